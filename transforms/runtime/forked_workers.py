"""Processes forked at launch that do a local run's probing and shard work.

Why: a local run's worker threads share one GIL. On many short clips much
of a shard task is Python (a read, a header, an encoding and a framing per
clip), so a second thread added little: 4,800 clips of 3 s, shard phase
2.86 s with one thread, 2.46 s with two. Beam's multi_processing mode runs
in parallel but starts fresh interpreters that import Beam after the job
has started (+0.9 s before the first shard and +0.6 s after the last on
that corpus). Processes forked at launch, while the launcher still has a
single thread, start in milliseconds with every module already imported
(shard phase 1.5 s on that corpus). The run then needs only one runner
thread, which keeps them all busy (`Calls`), and runs Beam in-process
(pipeline/run.py).

Forking is safe only before any thread exists (a lock held by another
thread at fork time stays held in the child forever), so `started` forks
only when the process has one thread, and only on Linux (macOS forbids
many frameworks after fork). Anything that cannot use them (another
runner, a remote or in-memory file system, a caller that started threads)
runs the same code in the worker thread: the output is the same bytes.
"""

import collections
import concurrent.futures
import contextlib
import ctypes
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import traceback
from typing import Callable, Optional

from apache_beam.transforms.window import GlobalWindows

from pipeline.contract.errors import WavbeamError

_executor: Optional[concurrent.futures.ProcessPoolExecutor] = None
_processes = 0


class WorkerProcessFailed(WavbeamError, RuntimeError):
  """A forked worker died, or raised an error that cannot be sent back
  as itself; the message holds the original error and its traceback."""


class RemoteTraceback(Exception):
  """The cause of an error raised in a forked worker: its traceback
  there, whose last line is the error (as concurrent.futures does)."""

  def __str__(self):
    return self.args[0].rstrip()


def can_fork() -> bool:
  return sys.platform.startswith('linux') and threading.active_count() == 1


@contextlib.contextmanager
def started(processes: int):
  """Forks `processes` worker processes now (if this process may: see
  can_fork) and makes them `current()` until exit; yields their number
  (0 when none were started). Inside an outer `started`, uses the outer
  one's processes."""
  global _executor, _processes
  if _executor is not None:  # started by an outer caller, who shuts down
    yield _processes
    return
  if processes < 1 or not can_fork():
    yield 0
    return
  executor = concurrent.futures.ProcessPoolExecutor(
      processes, mp_context=multiprocessing.get_context('fork'),
      initializer=_die_with, initargs=(os.getpid(),))
  # The first submit forks every process, from this thread, before the
  # executor starts its own threads (Python's fork-context pools launch all
  # at once): the thread whose end PR_SET_PDEATHSIG watches is this one.
  executor.submit(int).result()
  _executor, _processes = executor, processes
  finished = False
  try:
    yield processes
    finished = True
  finally:
    _executor, _processes = None, 0
    # An error or Ctrl-C, or calls still queued or running once the block
    # is done (a run that failed, its error already said): no work is
    # wanted now, and waiting for it could take as long as a shard.
    if not finished or getattr(executor, '_pending_work_items', None):
      for process in list(getattr(executor, '_processes', {}).values()):
        process.kill()
    executor.shutdown(wait=True, cancel_futures=True)


def kill_now() -> None:
  """SIGKILLs the forked workers and reaps them, from a signal handler
  that ends the process next (os.kill and waitpid wait on no lock of the
  interrupted line): gone when the process is, not a moment after."""
  executor = _executor
  if executor is None:
    return
  try:
    pids = [p.pid for p in list(getattr(executor, '_processes', {})
                                .values())]
  except RuntimeError:  # changed while copied: PDEATHSIG ends them anyway
    return
  for pid in pids:
    try:
      os.kill(pid, signal.SIGKILL)
      os.waitpid(pid, 0)
    except OSError:  # gone already, or reaped by the pool
      pass


_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
  """In each forked worker: ends it when the job's process ends, however
  that ends (SIGKILL included), and leaves Ctrl-C to the job's process,
  which stops them (the terminal sends it to the whole process group)."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  libc = ctypes.CDLL(None, use_errno=True)
  if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
    raise OSError(ctypes.get_errno(), 'prctl(PR_SET_PDEATHSIG) failed')
  if os.getppid() != parent:  # the job ended before prctl took effect
    os._exit(1)
  global _in_worker
  _in_worker = True
  _one_native_thread()


_in_worker = False


def in_worker() -> bool:
  """Whether this process is one of the forked workers: one of a process
  per core, which a library's own pool of a thread per core would only
  oversubscribe."""
  return _in_worker


def _one_native_thread() -> None:
  """PyTorch's OpenMP pool (GNU libgomp) does not survive fork: a child of
  a launcher that has run a torch operation waits forever at its first
  parallel region. One thread takes no pool, and is what a worker of a
  process per core wants anyway."""
  torch = sys.modules.get('torch')
  if torch is not None:
    torch.set_num_threads(1)


def current() -> Optional[concurrent.futures.ProcessPoolExecutor]:
  return _executor


def processes() -> int:
  """How many forked workers are running (0: none)."""
  return _processes


def call(executor: concurrent.futures.ProcessPoolExecutor,
         fn: Callable, *args):
  """fn(*args) in one of the processes, its error raised here."""
  return outcome(executor.submit(_call_sendable, fn, *args))


def outcome(future: concurrent.futures.Future):
  """The value of a call started in the processes, its error raised
  here."""
  try:
    result, value = future.result()
  except concurrent.futures.process.BrokenProcessPool as e:
    raise WorkerProcessFailed(
        f'a worker process died ({e}); was it killed, or out of '
        'memory?') from e
  if result == 'raised':
    error, where = value
    raise error from RemoteTraceback(where)
  return value


class Calls:
  """Calls from one bundle of a DoFn, several at once: a local run whose
  work the forked workers do runs its bundles in one thread, which keeps
  every process busy by starting a call before the earlier ones end.

      calls = Calls(executor)                     # in start_bundle
      yield from calls.start(then, fn, *args)     # in process
      calls.largest_first(size, then, fn, *args)  # or, in process
      yield from calls.finish()                   # in finish_bundle

  A pool of threads will do as `executor` too (the sink's encoding).
  Each call's result goes through `then` (a function returning what to
  emit) in the order the calls started; `start` emits the oldest calls'
  once more than `in_flight` are pending (two a process: each has the
  next at hand), `finish` the rest. The first call to fail fails the
  bundle as it comes back, whichever started first.
  """

  def __init__(self, executor: concurrent.futures.ProcessPoolExecutor,
               in_flight: Optional[int] = None):
    self._executor = executor
    self._in_flight = in_flight or 2 * max(1, _processes)
    self._pending = collections.deque()  # (future, then) of `start`
    self._started_now = collections.deque()  # (future, then) of start_now
    self._held = []

  def start(self, then: Callable, fn: Callable, *args):
    self._pending.append(
        (self._executor.submit(_call_sendable, fn, *args), then))
    while len(self._pending) > self._in_flight:
      yield from self._next(self._pending)
    while self._started_now and self._started_now[0][0].done():
      yield from self._next(self._started_now)

  def largest_first(self, size: int, then: Callable, fn: Callable, *args):
    """A call started at the bundle's end (`finish`), where the calls held
    start largest `size` first (ties in the order given): a few large
    tasks taken in any order can leave a process idle while another runs
    the last one (shards of a third and of a sixth of the work on 2
    processes: up to 4/3 of the time); largest first, the last to start
    are the smallest."""
    self._held.append((size, len(self._held), then, fn, args))

  def start_now(self, then: Callable, fn: Callable, *args):
    """A call started at once: for a `then` to start the work its
    result made possible. Such calls come back in the order they started,
    once done (`start` waits for none of them) or at `finish`; they are
    not counted in `in_flight`, so the calls `start` starts keep as many
    processes busy as before."""
    self._started_now.append(
        (self._executor.submit(_call_sendable, fn, *args), then))

  def finish(self):
    held, self._held = sorted(self._held, key=lambda h: (-h[0], h[1])), []
    for _, _, then, fn, args in held:
      yield from self.start(then, fn, *args)
    while self._pending:
      yield from self._next(self._pending)
    while self._started_now:
      yield from self._next(self._started_now)

  def _next(self, calls: collections.deque):
    """The oldest of `calls` (one of the two queues) emitted."""
    try:
      self._wait_for_oldest(calls)
      future, then = calls.popleft()
      value = outcome(future)
    except BaseException:
      # The bundle fails: calls not yet running are not wanted.
      for pending, _ in (*self._pending, *self._started_now):
        pending.cancel()
      self._pending.clear()
      self._started_now.clear()
      raise
    yield from then(value)

  def _wait_for_oldest(self, calls: collections.deque) -> None:
    """Returns once the oldest of `calls` is done; raises the error of
    any call that fails first: the bundle fails then, without waiting for
    calls started before it, which may run as long as a shard."""
    oldest = calls[0][0]
    others = {future for future, _ in (*self._pending, *self._started_now)}
    while not oldest.done():
      done, others = concurrent.futures.wait(
          others, return_when=concurrent.futures.FIRST_COMPLETED)
      for future in done:
        if future is not oldest and _failed(future):
          outcome(future)


def _failed(future: concurrent.futures.Future) -> bool:
  """Whether a finished call raised (here, or there: _call_sendable)."""
  if future.cancelled():
    return False
  if future.exception() is not None:
    return True
  return future.result()[0] == 'raised'


class CallsInBundles:
  """What a DoFn whose work may go to the forked workers shares: in each
  bundle, `self.calls` is a Calls when they exist (None otherwise, the
  work then done in the bundle's thread), drained when the bundle ends.
  Put before beam.DoFn among the bases."""

  def start_bundle(self):
    executor = current()
    self.calls = None if executor is None else Calls(executor)

  def finish_bundle(self):
    if self.calls is not None:
      for item in self.calls.finish():
        yield GlobalWindows.windowed_value(item)


def in_child(fn: Callable, *args):
  """fn(*args) in another process, its error raised here: a process
  forked for it, which then ends, or where this process may no longer
  fork (can_fork), one of the forked workers (fn and args picklable),
  else this process. For what the launcher needs once of a library it
  should not hold for the whole job: a model's output for a silent
  example would keep torch's memory (half a GB) in the launcher beside
  every worker's copy. In a forked worker, or in such a child, fn runs
  here: that is the other process already."""
  if _in_worker:
    return fn(*args)
  if not can_fork():
    try:
      pickle.dumps((fn, args))
    except Exception:  # pylint: disable=broad-except
      return fn(*args)
    return call(_executor, fn, *args) if _executor else fn(*args)
  context = multiprocessing.get_context('fork')
  reader, writer = context.Pipe(duplex=False)
  process = context.Process(target=_send_result,
                            args=(os.getpid(), writer, fn, args))
  process.start()
  writer.close()
  try:
    result, value = reader.recv()
  except EOFError:
    process.join()
    raise WorkerProcessFailed(
        f'a process of the launcher died (exit {process.exitcode}); was '
        'it killed, or out of memory?') from None
  finally:
    reader.close()
  process.join()
  if result == 'raised':
    error, where = value
    raise error from RemoteTraceback(where)
  return value


def _send_result(parent: int, writer, fn: Callable, args) -> None:
  _die_with(parent)
  writer.send(_call_sendable(fn, *args))
  writer.close()


def _call_sendable(fn: Callable, *args):
  """('returned', value) or ('raised', error), with an error that cannot
  travel between processes replaced by a WorkerProcessFailed naming it."""
  try:
    return 'returned', fn(*args)
  except BaseException as e:  # pylint: disable=broad-except
    where = traceback.format_exc()
    try:
      pickle.loads(pickle.dumps(e))
    except Exception:  # pylint: disable=broad-except
      e = WorkerProcessFailed(f'{type(e).__name__}: {e}')
    return 'raised', (e, where)
