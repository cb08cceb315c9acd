"""Imports Beam without pandas and pyarrow, for the `run` command.

`import apache_beam` imports pandas and pyarrow only to register batch
converters for DataFrame- and Arrow-batched DoFns and for Parquet and
BigQuery I/O; no wavbeam step uses them. Together they cost about 0.3 s
of start-up and 70 MB of resident memory in the launcher, and again in
every forked worker's resident count.

Only the commands (`wavbeam run`, `python -m pipeline.run`) import Beam
this way, first thing, before any thread exists: the Beam modules
imported meanwhile keep lacking them for the life of the process, which
a program that imports wavbeam may not want. Both libraries stay
importable afterwards (Dask and TFDV import them when they need them).
"""

import os
import sys

DATAFRAME_LIBRARIES = ('pandas', 'pyarrow')


def one_blas_thread() -> None:
  """OpenBLAS (numpy's, for the log_mel matmul) gets one thread unless
  the environment says otherwise: the pipeline already runs one worker
  or bundle per core, and a pool per process would spin on the same
  cores. numpy reads it when first imported (Beam imports numpy), and
  worker processes inherit it."""
  os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')


def import_beam():
  """Imports apache_beam with DATAFRAME_LIBRARIES hidden (after
  one_blas_thread), unless Beam or either library is already imported
  (then nothing changes: Beam keeps the converters it registered)."""
  one_blas_thread()
  if 'apache_beam' in sys.modules:
    return sys.modules['apache_beam']
  hidden = [name for name in DATAFRAME_LIBRARIES if name not in sys.modules]
  if len(hidden) < len(DATAFRAME_LIBRARIES):
    hidden = []
  for name in hidden:
    sys.modules[name] = None  # `import name` raises ImportError
  try:
    import apache_beam  # pylint: disable=import-outside-toplevel
  finally:
    for name in hidden:
      if sys.modules.get(name, ...) is None:
        del sys.modules[name]
  return apache_beam
