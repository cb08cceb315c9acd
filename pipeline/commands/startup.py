"""What a command's process sets up before anything else runs. The
commands call it as they start; a program that imports wavbeam's modules
keeps its own standard streams and logging as they were."""

import logging
import os
import sys


def prepare_process() -> None:
  """Both below; a second call changes nothing."""
  reopen_closed_standard_streams()
  root = logging.getLogger()
  if not any(isinstance(f, _BeamImportWarnings) for f in root.filters):
    root.addFilter(_BeamImportWarnings())


def reopen_closed_standard_streams() -> None:
  """Points a closed stdin, stdout or stderr (`wavbeam run ... 2>&-`) at
  /dev/null, before anything else opens a file: the next file opened
  would otherwise get that descriptor, and every log line written to
  "stderr" (by Beam's workers, by TensorFlow's C++ code) would land in it.
  Python leaves sys.stdout or sys.stderr as None for a closed one."""
  for fd, name, mode in ((0, 'stdin', 'r'), (1, 'stdout', 'w'),
                         (2, 'stderr', 'w')):
    try:
      os.fstat(fd)
    except OSError:
      opened = os.open(os.devnull, os.O_RDWR)  # the lowest free one
      if opened != fd:
        os.close(opened)
        continue
    if getattr(sys, name) is None:
      setattr(sys, name, open(fd, mode, closefd=False))


def interrupted_in_one_line(run) -> None:
  """run(), a command's whole process; a Ctrl-C that reaches here (while
  its modules are imported: a run says more once it has begun) is one
  line and exit 130, not a traceback of whatever import it stopped."""
  try:
    run()
  except KeyboardInterrupt:
    for stream in (sys.stdout, sys.stderr):  # what was printed stays
      try:
        stream.flush()
      except (OSError, ValueError):
        pass
    sys.stderr.write('\nwavbeam: interrupted\n')
    sys.stderr.flush()
    os._exit(130)


class _BeamImportWarnings:
  """A logging filter for the warning Beam logs when it is imported without
  its [gcp] extra ('apitools not found, and bigquery client libraries are
  not available'): it concerns BigQuery, which wavbeam does not use, and
  it would open every command's output in a minimal install."""

  @staticmethod
  def filter(record):
    return 'apitools not found' not in str(record.msg)
