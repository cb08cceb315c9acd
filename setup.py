"""Installs the `pipeline` and `transforms` packages.

Also the file handed to remote Beam workers (--setup_file ./setup.py): they
already have Beam, and need only what the transforms import besides it.
"""

import setuptools

setuptools.setup(
    name='wavbeam',
    version='0.1.0',
    description='WAV corpora to sharded TFRecord datasets with Apache Beam',
    packages=['pipeline', 'transforms'],
    python_requires='>=3.10',
    install_requires=['numpy>=2,<3', 'soundfile==0.14.0'],
)
