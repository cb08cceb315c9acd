"""What the commands print: wording shared by run, inspect and verify,
and the handling of the run command's standard streams and logs, which
must neither stop a run on a closed reader nor repeat its errors."""

import errno
import logging
import os
import re
import shutil
import signal
import sys
import threading

from pipeline.config import ConfigError
from pipeline.output_folder import read_metadata
from transforms.runtime import filesystem


def plural(count: int, noun: str) -> str:
  """'1 shard', '2 shards', '0 files'."""
  return f'{count} {noun}{"" if count == 1 else "s"}'


def summary(output_dir: str, seconds: float, meta=None) -> str:
  """One line on what a finished run wrote, from its metadata.json (read
  here unless given), with the shard-writing phase's throughput where it
  records one."""
  meta = read_metadata(output_dir) if meta is None else meta
  if meta is None:
    return f'wavbeam: no metadata.json in {output_dir} after {seconds:.1f} s'
  shards = sum(len(e['shards']) for e in meta['splits'].values())
  size = sum(e['num_bytes'] for e in meta['splits'].values())
  counts = meta['counts']
  line = (f'wavbeam: {plural(counts["examples"], "example")} in '
          f'{plural(shards, "shard")} ({size / 1e6:.1f} MB) from '
          f'{plural(counts["files_ok"], "file")} written to {output_dir} in '
          f'{seconds:.1f} s; {plural(counts["files_rejected"], "file")} '
          'rejected (rejects.jsonl)')
  if counts.get('files_excluded'):
    line += f', {counts["files_excluded"]} excluded (--exclude)'

  written = meta.get('shards_written')
  if not written:
    return line
  phase = max(written['seconds'], 0.001)
  if written.get('shards_kept'):
    return line + (f'; {written["shards_kept"]} of the {shards} shards kept '
                   f'from the stopped run, {shards - written["shards_kept"]}'
                   f' computed in {phase:.2f} s')
  return (line + f'; shards written in {phase:.2f} s '
          f'({counts["examples"] / phase:.0f} examples/s, '
          f'{size / phase / 1e6:.0f} MB/s)')


def holds_no_example(meta) -> bool:
  """Whether a finished run's dataset (metadata `meta`) holds no example:
  complete, its rejects written, and of no use, so the command exits 1
  for scripts and CI to notice."""
  return meta is not None and meta['counts']['examples'] == 0


def empty_warnings(output_dir: str, meta) -> list:
  """Lines saying loudly that the dataset (metadata `meta`), or one of its
  splits, holds no example: an error for the dataset (holds_no_example),
  a warning for a split (the others hold examples)."""
  if meta is None:
    return []
  counts = meta['counts']
  if holds_no_example(meta):
    return [f'error: the dataset is EMPTY: no example was written to '
            f'{output_dir} ({counts["files_rejected"]} of '
            f'{counts["files_seen"]} files rejected; reasons in '
            f'{output_dir}/rejects.jsonl)']
  return [f'wavbeam: WARNING: split {name!r} is EMPTY: '
          f'{_why_empty(entry, meta)}'
          for name, entry in sorted(meta['splits'].items())
          if entry['num_examples'] == 0]


def _why_empty(split: dict, meta) -> str:
  files = split.get('num_files', 0)
  if not files:
    return ('no file was assigned to it (too few files for --splits, or all '
            'of its files rejected)')
  cap = meta.get('config', {}).get('num_elems')
  if cap:
    return (f'--num_elems={cap} took its examples from other files than its '
            f'{plural(files, "file")}')
  return f'its {plural(files, "file")} gave no example'


# The largest finite float16, and where rounding to it ends (a value
# from here on is stored as inf).
FLOAT16_MAX = 65504.0
FLOAT16_INF_FROM = 65520.0


def overflow_warnings(meta) -> list:
  """Lines saying which float16 features (--feature_dtype float16) hold
  values beyond float16's range, stored as +-inf: the statistics, of the
  float32 values, say so."""
  if meta is None:
    return []
  lines = []
  for name, spec in sorted(meta['schema'].items()):
    if spec['dtype'] != 'float16':
      continue
    reach = max((max(abs(s[name]['min']), abs(s[name]['max']))
                 for entry in meta['splits'].values()
                 for s in [entry.get('statistics', {})]
                 if s.get(name, {}).get('count')),
                default=0.0)
    if reach >= FLOAT16_INF_FROM:
      lines.append(f'wavbeam: WARNING: {name}: values reach {reach:.6g}, '
                   f'beyond float16\'s largest, {FLOAT16_MAX:g}: those '
                   'are stored as inf (--feature_dtype float16); '
                   'bfloat16 keeps the range of float32')
  return lines


def disk_full(error: BaseException) -> bool:
  """Whether a run failed because a disk was full (ENOSPC anywhere in the
  chain, or in the text of an error a worker sent back)."""
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
      return True
    if f'[Errno {errno.ENOSPC}]' in str(error):
      return True
    error = error.__cause__ or error.__context__
  return False


def free_space(folder: str) -> str:
  """'N MB free of M MB' on the disk that holds folder (or its nearest
  existing parent); '' where that cannot be told (a remote file system)."""
  if not filesystem.is_local(folder):
    return ''
  folder = os.path.abspath(folder)
  while not os.path.exists(folder):
    folder = os.path.dirname(folder)
  usage = shutil.disk_usage(folder)
  return f'{usage.free / 1e6:.1f} MB free of {usage.total / 1e6:.1f} MB'


def option_error(error: BaseException) -> str:
  """The message of a ConfigError raised while the job ran (an option
  that only the data shows wrong, e.g. --fmax above the dataset's Nyquist
  frequency), however the runner wrapped it; '' if there is none."""
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    if isinstance(error, ConfigError):
      return str(error)
    found = re.search(r'ConfigError: (--\w+=.*?)(?: \[while running .*)?$',
                      str(error), re.M)
    if found:
      return found.group(1)
    error = error.__cause__ or error.__context__
  return ''


def root_cause(error: BaseException) -> str:
  """The innermost error's last line: what actually went wrong on a worker,
  without the runner's wrapping."""
  while error.__cause__ is not None or error.__context__ is not None:
    error = error.__cause__ or error.__context__
  lines = [line.strip() for line in str(error).splitlines() if line.strip()]
  return (lines[-1] if lines else type(error).__name__)[:500]


def interrupted(error: BaseException) -> bool:
  """Whether `error` is a Ctrl-C that the runner wrapped: a local run's
  steps run in the launcher's thread, where the interrupt lands, and Beam
  reraises it as an error of the step it stopped."""
  seen = set()
  while error is not None and id(error) not in seen:
    if isinstance(error, KeyboardInterrupt):
      return True
    seen.add(id(error))
    error = error.__cause__ or error.__context__
  return False


class ClosedSafe:
  """A standard stream whose writes never raise: once the reader has gone
  (`wavbeam ... 2>&1 | head`), output is dropped. A write that raised
  inside one of Beam's worker threads (a log line) stopped that thread
  without reporting its bundle, and the run waited for it forever."""

  def __init__(self, stream):
    self._stream = stream
    self.drop_worker_tracebacks = False
    self._dropped_by = None  # the thread whose traceback was dropped last

  def write(self, text):
    thread = threading.current_thread()
    if self.drop_worker_tracebacks and thread is not threading.main_thread():
      # Beam's in-process worker prints each failed bundle's traceback
      # here (then print's newline), besides logging it; main reports the
      # failure once, at the end.
      if 'Traceback (most recent call last)' in text:
        self._dropped_by = thread
        return len(text)
      if text == '\n' and self._dropped_by is thread:
        self._dropped_by = None
        return len(text)
    try:
      return self._stream.write(text)
    except (OSError, ValueError):  # EPIPE, or a closed file
      self._stream = open(os.devnull, 'w')
      return len(text)

  def flush(self):
    try:
      self._stream.flush()
    except (OSError, ValueError):
      self._stream = open(os.devnull, 'w')

  def __getattr__(self, name):
    return getattr(self._stream, name)


class EndsOnClosedReader:
  """A standard stream of a command that reads and prints (inspect,
  verify, demo, `wavbeam` itself): once its reader has gone (`wavbeam
  inspect OUT | head`), the process ends there, quietly, as `git log |
  head` ends. Python ignores SIGPIPE, so a write to the closed pipe
  raised BrokenPipeError instead, which inspect reported as an error of
  its own (`error: [Errno 32] Broken pipe`), the others as a traceback,
  and the interpreter once more as it flushed the stream on the way out.
  A run keeps going instead (ClosedSafe): it has a dataset to finish."""

  def __init__(self, stream):
    self._stream = stream

  def write(self, text):
    try:
      return self._stream.write(text)
    except BrokenPipeError:
      end_as_closed_pipe()

  def flush(self):
    try:
      self._stream.flush()
    except BrokenPipeError:
      end_as_closed_pipe()

  def __getattr__(self, name):
    return getattr(self._stream, name)


def end_on_closed_reader() -> None:
  """Gives the process's stdout and stderr to EndsOnClosedReader: for a
  command's process, before it prints (not a run's: see ClosedSafe)."""
  for name in ('stdout', 'stderr'):
    stream = getattr(sys, name)
    # None where the descriptor was closed (`2>&-`): print then drops.
    if stream is not None and not isinstance(
        stream, (EndsOnClosedReader, ClosedSafe)):
      setattr(sys, name, EndsOnClosedReader(stream))


def end_as_closed_pipe() -> None:
  """Ends the process as a write to a closed pipe ends `git log | head`:
  killed by SIGPIPE (a shell says 141), saying nothing, its buffered
  output dropped (its reader is gone)."""
  if threading.current_thread() is threading.main_thread():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # main thread only
    signal.raise_signal(signal.SIGPIPE)
  os._exit(128 + signal.SIGPIPE)  # the status a shell shows for the signal


class StderrRelay:
  """Points file descriptor 2 at a pipe this process empties into the real
  stderr, dropping what a closed reader cannot take. Worker processes
  inherit descriptor 2, not sys.stderr: one whose log write failed on a
  closed pipe stopped without reporting its bundle, and the run waited
  forever. A terminal is left alone (it keeps the progress bar)."""

  def __init__(self):
    self._thread = None
    try:
      if os.isatty(2):
        return
      self._real = os.dup(2)
    except OSError:
      return
    self._read, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    self._thread = threading.Thread(target=self._relay, daemon=True,
                                    name='stderr-relay')
    self._thread.start()

  def _relay(self):
    reader_open = True
    while True:
      data = os.read(self._read, 65536)
      if not data:
        break
      if reader_open:
        try:
          os.write(self._real, data)
        except OSError:
          reader_open = False
    os.close(self._read)

  def real_stderr(self) -> int:
    """The descriptor of the stderr this relays to (2 when it relays
    nothing)."""
    return 2 if self._thread is None else self._real

  def close(self):
    """Puts descriptor 2 back and passes on what is still in the pipe."""
    if self._thread is None:
      return
    try:
      sys.stderr.flush()
    except (OSError, ValueError):
      pass
    os.dup2(self._real, 2)  # the pipe's last writer here is gone: EOF
    self._thread.join(timeout=5)
    self._thread = None


def exit_at_interrupt(message, stderr: int = 2, before_exit=None):
  """Makes Ctrl-C (SIGINT) end this process at once, exit 130, after
  writing message() to descriptor `stderr`, from the signal handler
  itself. A KeyboardInterrupt instead arrives at whatever line runs then:
  one that Beam's set-up caught while it held logging's lock left the
  next bundle waiting on that lock forever. Every step of a run is made
  to survive such an end, as a kill. A SIGINT the process was started
  ignoring (a job in the background) stays ignored. message() and
  before_exit() must not wait on any lock: they run wherever the main
  thread stopped. Returns what puts the earlier handler back, for a
  caller that goes on after the command (a test, a notebook)."""
  previous = signal.getsignal(signal.SIGINT)
  if previous is not signal.default_int_handler:
    return lambda: None

  def interrupted(signum, frame):
    del signum, frame
    if before_exit is not None:
      before_exit()
    try:
      os.write(stderr, message().encode('utf-8', 'replace'))
    except OSError:
      pass
    os._exit(130)

  signal.signal(signal.SIGINT, interrupted)
  return lambda: signal.signal(signal.SIGINT, previous)


class _OwnLines(logging.Handler):
  """wavbeam's own log records (logger `wavbeam`) as its other lines:
  `wavbeam: WARNING: ...` on the stderr of the moment."""

  def emit(self, record):
    try:
      print(f'wavbeam: {record.levelname}: {record.getMessage()}',
            file=sys.stderr)
    except Exception:  # pylint: disable=broad-except
      self.handleError(record)


class _FlagsReportedByWavbeam(logging.Filter):
  """Drops Beam's warning about flags it cannot parse: wavbeam names each
  unknown flag itself, with the option it may have meant."""

  def filter(self, record):
    return 'Discarding unparseable args' not in record.getMessage()


class _HarmlessWorkerWarnings(logging.Filter):
  """Drops the warning every Beam worker process logs at start-up on the
  local runner (no semi-persistent directory: a Dataflow notion). Other
  worker warnings, wavbeam's own included, pass."""

  def filter(self, record):
    return 'No semi_persistent_directory found' not in record.getMessage()


class _ErrorsReportedAtTheEnd(logging.Filter):
  """Drops the error Beam's in-process worker logs for each failed
  bundle (the same error, with its traceback, two or more times): the
  run's failure is reported once, at the end, by `main`."""

  def filter(self, record):
    return record.levelno < logging.ERROR


# Loggers of Beam's in-process worker that log a bundle's failure.
_BUNDLE_ERROR_LOGGERS = ('apache_beam.runners.common',
                         'apache_beam.runners.worker.sdk_worker')


def quiet_logs(verbose: bool = False) -> None:
  """wavbeam's own lines only, unless `verbose`: Beam's worker, gRPC and
  absl loggers say about 30 INFO lines a run (channels opened, state
  caches, harness shutdown), which users read as trouble. Warnings and
  errors still show; wavbeam's own (logger `wavbeam`) as its other
  lines."""
  level = logging.INFO if verbose else logging.WARNING
  logging.getLogger().setLevel(level)
  relay = logging.getLogger('apache_beam.runners.portability.local_job_service')
  if not verbose and not any(isinstance(f, _HarmlessWorkerWarnings)
                             for f in relay.filters):
    relay.addFilter(_HarmlessWorkerWarnings())
  for name in _BUNDLE_ERROR_LOGGERS:
    logger = logging.getLogger(name)
    if not verbose and not any(isinstance(f, _ErrorsReportedAtTheEnd)
                               for f in logger.filters):
      logger.addFilter(_ErrorsReportedAtTheEnd())
  ours = logging.getLogger('wavbeam')
  if not any(isinstance(h, _OwnLines) for h in ours.handlers):
    ours.addHandler(_OwnLines())
    ours.propagate = False
  options = logging.getLogger('apache_beam.options.pipeline_options')
  if not verbose and not any(isinstance(f, _FlagsReportedByWavbeam)
                             for f in options.filters):
    options.addFilter(_FlagsReportedByWavbeam())
  os.environ.setdefault('GRPC_VERBOSITY', 'INFO' if verbose else 'ERROR')
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '0' if verbose else '2')


def exit_process(code: int):
  """Ends a command's process with `code`, its output flushed, skipping
  the interpreter's teardown when nothing is left for it to do: after a
  run, freeing Beam's modules and objects one by one took 0.35-0.6 s of
  every command and closed nothing a finished command had left open
  (its files are closed, its worker processes gone). With a thread other
  than daemons still running, or a child process still alive, it exits
  the ordinary way, which waits for them."""
  import multiprocessing  # pylint: disable=import-outside-toplevel
  others = [t for t in threading.enumerate()
            if t is not threading.current_thread() and not t.daemon]
  if others or multiprocessing.active_children():
    sys.exit(code)
  logging.shutdown()
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):  # a closed reader: nothing more to say
      pass
  os._exit(code)
