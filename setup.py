"""Installs the `pipeline` and `transforms` packages.

`pip install .` gives the pipeline (what every worker needs, no TensorFlow);
extras add the rest: [tf] the reader, [inspect] its figures, [dask] and
[gcp] Beam's Dask runner and GCS file system, [test] the test suite. Also
the file handed to remote Beam workers (--setup_file ./setup.py).
The pins are those of the requirements files, read from them.
"""

import os
import re

import setuptools

HERE = os.path.dirname(os.path.abspath(__file__))


def requirements(name):
  """Requirement lines of a requirements file, following `-r`."""
  out = []
  with open(os.path.join(HERE, name), encoding='utf-8') as f:
    for line in f:
      line = line.split('#', 1)[0].strip()
      if line.startswith('-r '):
        out += requirements(line[3:].strip())
      elif line:
        out.append(line)
  return out


def without_beam_extras(reqs):
  # Workers get Beam's extras they need from their own image or the extras
  # below, not from the core install (Dataflow's workers have no use for Dask).
  return [re.sub(r'^apache-beam\[[^\]]*\]', 'apache-beam', r) for r in reqs]


RUNTIME = without_beam_extras(requirements('requirements.txt'))
BEAM = [r for r in RUNTIME if r.startswith('apache-beam')][0]
setuptools.setup(
    name='wavbeam',
    version='0.1.0',
    description='WAV corpora to sharded TFRecord datasets with Apache Beam',
    license='Apache-2.0',
    classifiers=[
        'License :: OSI Approved :: Apache Software License',
        'Programming Language :: Python :: 3',
        'Programming Language :: Python :: 3.11',
    ],
    packages=setuptools.find_packages(include=['pipeline', 'pipeline.*',
                                               'transforms', 'transforms.*']),
    # `wavbeam run|inspect|verify|demo`: the python -m commands, installed.
    entry_points={'console_scripts': [
        'wavbeam = pipeline.commands.cli:command']},
    python_requires='>=3.11',
    install_requires=RUNTIME,
    extras_require={
        'tf': requirements('requirements-tf.txt'),
        'inspect': requirements('requirements-inspect.txt'),
        'torch': requirements('requirements-torch.txt'),
        'array_record': requirements('requirements-array_record.txt'),
        'embeddings': requirements('requirements-embeddings.txt'),
        'dask': [BEAM.replace('apache-beam', 'apache-beam[dask]')],
        'gcp': [BEAM.replace('apache-beam', 'apache-beam[gcp]')],
        'test': requirements('requirements-test.txt'),
    },
)
