"""wavbeam: WAV corpora to sharded TFRecord datasets with Apache Beam.

This package must stay importable without Beam: `pipeline.replay` (training
code) imports it with TensorFlow only. Beam is imported by the modules that
build and run the graph (`pipeline.graph`, `pipeline.run`).
"""

import logging as _logging
import os as _os
import sys as _sys


def _open_closed_standard_streams():
  """Points a closed stdin, stdout or stderr (`wavbeam run ... 2>&-`) at
  /dev/null, before anything else opens a file: the next file opened
  would otherwise get that descriptor, and every log line written to
  "stderr" (by Beam's workers, by TensorFlow's C++ code) would land in it.
  Python leaves sys.stdout or sys.stderr as None for a closed one."""
  for fd, name, mode in ((0, 'stdin', 'r'), (1, 'stdout', 'w'),
                         (2, 'stderr', 'w')):
    try:
      _os.fstat(fd)
    except OSError:
      opened = _os.open(_os.devnull, _os.O_RDWR)  # the lowest free one
      if opened != fd:
        _os.close(opened)
        continue
    if getattr(_sys, name) is None:
      setattr(_sys, name, open(fd, mode, closefd=False))


_open_closed_standard_streams()


class _BeamImportWarnings:
  """A logging filter for the warning Beam logs when it is imported without
  its [gcp] extra ('apitools not found, and bigquery client libraries are
  not available'): it concerns BigQuery, which wavbeam does not use, and
  it would open every command's output in a minimal install."""

  @staticmethod
  def filter(record):
    return 'apitools not found' not in str(record.msg)


_logging.getLogger().addFilter(_BeamImportWarnings())
