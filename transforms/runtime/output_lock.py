"""Who owns an output folder while a run writes to it.

One writer at a time: a run (fresh, --overwrite or --append) holds the
folder's lock (FolderLock, OUT/.wavbeam-lock, an flock the kernel releases
when the process ends however it ends) from before anything is written to
its end; a second run is refused at once, naming the holder. The lock
file keeps its holder's host, process and start time: a run that finds
one left by a process that is gone takes the lock over and says so.
Object stores have no locks: there the heartbeat below keeps a second run
out while the first is alive.

A run writes OUT/.wavbeam-incomplete/started holding its run id before
anything else, and its launcher refreshes OUT/.wavbeam-incomplete/heartbeat
while the job runs. Shard tasks and the final step check the marker, so a
run whose folder was deleted or taken over by another run (`--overwrite`,
a user's `rm`) fails saying so instead of publishing into someone else's
dataset; a second run sees the heartbeat and is refused while the first
is alive.
"""

import datetime
import errno
import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
from typing import Optional

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from pipeline.contract import naming
from pipeline.contract.errors import WavbeamError
from transforms.runtime import filesystem

LOCK_FILE = '.wavbeam-lock'
HEARTBEAT_FILE = 'heartbeat'
HEARTBEAT_SECONDS = 5.0
# A heartbeat from another host counts as alive for this long; on the same
# host, while its process exists (a killed run's rerun need not wait).
STALE_AFTER_SECONDS = 3 * HEARTBEAT_SECONDS


class OutputChanged(WavbeamError, RuntimeError):
  """The output folder no longer belongs to this run."""


def new_run_id() -> str:
  return uuid.uuid4().hex


def temp_dir(dataset_dir: str) -> str:
  return naming.temp_dir(dataset_dir)


def _marker(dataset_dir: str) -> str:
  return naming.join(temp_dir(dataset_dir), naming.STARTED_FILE)


def write_marker(dataset_dir: str, run_id: str) -> None:
  with filesystem.create(_marker(dataset_dir)) as f:
    f.write(run_id.encode('ascii'))


def read_marker(dataset_dir: str) -> Optional[str]:
  """The run id in the marker; None when there is none (or it is empty:
  runs before run ids wrote an empty marker)."""
  try:
    with FileSystems.open(_marker(dataset_dir)) as f:
      return f.read().decode('ascii', 'replace').strip() or None
  except Exception:  # missing, or unreadable: not ours either way
    return None


def check_marker(dataset_dir: str, run_id: Optional[str]) -> None:
  """Raises OutputChanged unless the folder still belongs to run_id."""
  if run_id is None:  # a pipeline built without a run (tests, dry runs)
    return
  found = read_marker(dataset_dir)
  if found != run_id:
    whose = ('it is gone' if found is None
             else f'it now belongs to run {found}')
    raise OutputChanged(
        f'the output folder {dataset_dir} was changed by someone else '
        f'while this job ran: its {naming.TEMP_DIR}/{naming.STARTED_FILE} '
        f'marker of run {run_id} is missing ({whose}); another job\'s '
        '--overwrite or a deletion. Nothing of this run was published.')


def _read_heartbeat(path: str) -> dict:
  with FileSystems.open(path) as f:
    return json.loads(f.read().decode('utf-8'))


def live_heartbeat(dataset_dir: str) -> Optional[dict]:
  """The heartbeat of a run that is still alive, else None."""
  try:
    beat = _read_heartbeat(naming.join(temp_dir(dataset_dir),
                                       HEARTBEAT_FILE))
    age = time.time() - float(beat['time'])
    if beat.get('host') == socket.gethostname():
      os.kill(int(beat['pid']), 0)  # raises when the process is gone
      # Not another program that took the PID over.
      now, then = process_start(int(beat['pid'])), beat.get('process_start')
      alive = age < 60 and not (now and then and now != then)
    else:
      alive = age < STALE_AFTER_SECONDS
  except Exception:  # none, unreadable, or its process is gone
    return None
  return dict(beat, age=age) if alive else None


# Held by a heartbeat while it writes, and by remove_temp_dir while it
# removes the folder the heartbeat is in: a beat written into a folder
# being removed (every 5 s, by each of a sweep's datasets) would leave a
# file in it once its files are gone, and the removal of the folder
# itself would fail a finished run ("Directory not empty").
_WRITING = threading.Lock()


# Attempts at removing the temporary folder: a beat of another process
# (the launcher's, while a Dask worker runs the final step) may land in it
# between the removal of its files and of the folder itself. Each attempt
# after the first finds little but that beat, and loses again less than
# half as often: beating every 0.2 ms on a loaded machine, 5 of 200
# removals needed more than 3 attempts, none more than 5.
_REMOVALS = 20


def remove_temp_dir(dataset_dir: str) -> None:
  """Removes the run's temporary folder, if there is one, while no
  heartbeat of this process writes into it; again where a beat of another
  process left a file in it. A beat after it makes the folder again with
  its file alone, which the Heartbeat's end removes."""
  temp = temp_dir(dataset_dir)
  with _WRITING:
    for attempt in range(_REMOVALS):
      if not FileSystems.exists(temp):
        return
      try:
        filesystem.delete([temp])
        return
      except BeamIOError:
        if attempt == _REMOVALS - 1 or not filesystem.is_local(temp):
          raise


class Heartbeat:
  """While open, refreshes this run's heartbeat every HEARTBEAT_SECONDS."""

  def __init__(self, dataset_dir: str, run_id: str):
    self.dataset_dir = dataset_dir
    self.path = naming.join(temp_dir(dataset_dir), HEARTBEAT_FILE)
    self.run_id = run_id
    self._process_start = process_start(os.getpid())
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._loop, daemon=True,
                                    name='wavbeam-heartbeat')

  def beat(self) -> None:
    data = json.dumps({'run_id': self.run_id, 'pid': os.getpid(),
                       'host': socket.gethostname(), 'time': time.time(),
                       'process_start': self._process_start})
    try:
      with _WRITING, filesystem.create(self.path) as f:
        f.write(data.encode('utf-8'))
    except Exception:  # the folder is gone: the run will say why
      pass

  def _loop(self):
    while not self._stop.wait(HEARTBEAT_SECONDS):
      self.beat()

  def __enter__(self):
    self.beat()
    self._thread.start()
    return self

  def __exit__(self, *exc):
    self._stop.set()
    self._thread.join()
    if read_marker(self.dataset_dir) == self.run_id:
      return  # the run failed: its folder stays marked, with its heartbeat
    # The final step removed the temporary folder; a beat racing it may
    # have left the heartbeat (and, locally, the folder) behind.
    try:
      if self._ours():
        filesystem.delete([self.path])
      temp = temp_dir(self.dataset_dir)
      if filesystem.is_local(temp) and os.path.isdir(temp) and \
          not os.listdir(temp):
        os.rmdir(temp)
    except Exception:  # best effort: a leftover heartbeat is stale anyway
      pass

  def _ours(self) -> bool:
    try:
      return _read_heartbeat(self.path)['run_id'] == self.run_id
    except Exception:
      return False


class FolderLocked(WavbeamError, RuntimeError):
  """Another run holds the output folder's lock."""


class FolderLock:
  """The output folder's lock, held while open (see the module docstring).

  Raises FolderLocked on entry when another live process holds it. Only
  local folders are locked; elsewhere this does nothing.
  """

  def __init__(self, dataset_dir: str):
    self.dataset_dir = dataset_dir
    self.path = naming.join(dataset_dir, LOCK_FILE)
    self._fd = None
    self._made_folders = []  # the folders __enter__ made, deepest last
    self.taken_over: Optional[dict] = None  # the dead holder's record

  def __enter__(self):
    if not filesystem.is_local(self.dataset_dir):
      return self
    folder = os.path.abspath(self.dataset_dir)
    while not os.path.isdir(folder):
      self._made_folders.insert(0, folder)
      folder = os.path.dirname(folder)
    os.makedirs(self.dataset_dir, exist_ok=True)
    while True:
      # Not through a link planted at the lock's name (it would truncate
      # the link's target), and not blocked by a FIFO there: NotAFile.
      fd = filesystem.open_regular(self.path, os.O_RDWR | os.O_CREAT, 0o644)
      try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except OSError as e:
        holder = _read_holder(fd)
        os.close(fd)
        if e.errno not in (errno.EAGAIN, errno.EACCES):
          raise
        raise FolderLocked(
            'another wavbeam job is writing to it: '
            f'{describe_holder(holder)}; wait for it to finish or stop it'
            ) from None
      # The holder before us may have removed the file between our open
      # and our lock: then we hold a lock on a name that is gone.
      try:
        same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
      except FileNotFoundError:
        same = False
      if same:
        break
      os.close(fd)
    previous = _read_holder(fd)
    if previous:
      self.taken_over = previous
      logging.getLogger('wavbeam').warning('%s', takeover_note(previous))
    record = json.dumps({
        'host': socket.gethostname(), 'pid': os.getpid(),
        'started': datetime.datetime.now(
            datetime.timezone.utc).isoformat(timespec='seconds'),
        'process_start': process_start(os.getpid())})
    os.ftruncate(fd, 0)
    os.pwrite(fd, record.encode('utf-8'), 0)
    self._fd = fd
    return self

  def __exit__(self, *exc):
    if self._fd is None:
      return
    # Removed while still held, so that no run finds it empty-handed.
    try:
      os.unlink(self.path)
    except OSError:
      pass
    os.close(self._fd)
    self._fd = None
    for folder in reversed(self._made_folders):
      try:
        os.rmdir(folder)  # only if the run left nothing there
      except OSError:
        break


def _read_holder(fd: int) -> dict:
  try:
    data = os.pread(fd, 4096, 0)
    holder = json.loads(data.decode('utf-8')) if data else {}
    return holder if isinstance(holder, dict) else {}
  except (OSError, ValueError):
    return {}


def process_start(pid: int) -> Optional[str]:
  """Who process `pid` of this host is, beyond its PID, which the kernel
  reuses: its boot and start time in clock ticks since boot
  ('BOOT_ID/TICKS'); None when no such process runs (or no /proc)."""
  try:
    with open(f'/proc/{int(pid)}/stat', encoding='ascii') as f:
      fields = f.read().rsplit(')', 1)[1].split()
    with open('/proc/sys/kernel/random/boot_id', encoding='ascii') as f:
      boot = f.read().strip()
  except (OSError, ValueError, IndexError):
    return None
  if fields[0] == 'Z':  # ended, not yet reaped
    return None
  return f'{boot}/{fields[19]}'  # field 22 of stat: starttime


def _start_time_text(start: str) -> str:
  """A process_start as a UTC time, or '' where it cannot be told."""
  try:
    with open('/proc/stat', encoding='ascii') as f:
      boot_time = next(int(line.split()[1]) for line in f
                       if line.startswith('btime '))
    seconds = boot_time + int(start.split('/')[1]) / os.sysconf(
        'SC_CLK_TCK')
  except (OSError, ValueError, IndexError, StopIteration):
    return ''
  return datetime.datetime.fromtimestamp(
      seconds, datetime.timezone.utc).isoformat(timespec='seconds')


def holder_process_now(holder: dict) -> str:
  """What is known of the process that wrote a lock record now: whether a
  process with its PID runs on this host and whether it is the same one
  (its start time recorded in the lock)."""
  pid = holder.get('pid')
  if holder.get('host') != socket.gethostname():
    return (f'it ran on host {holder.get("host")}, whose processes cannot '
            'be seen from here')
  try:
    now = process_start(int(pid))
  except (TypeError, ValueError):
    return 'the lock names no process'
  if now is None:
    return f'no process {pid} runs on this host now'
  recorded = holder.get('process_start')
  started = _start_time_text(now)
  started = f', started {started}' if started else ''
  if not recorded:
    return (f'a process {pid} runs now{started}; the lock does not record '
            'its holder\'s start, so whether it is the same process is '
            'not known')
  if recorded != now:
    return (f'the process {pid} running now{started} is another program '
            'that reuses the PID (its start time differs from the '
            'holder\'s)')
  return (f'process {pid} still runs (the same start time), but it no longer '
          'holds the lock')


def takeover_note(holder: dict) -> str:
  """The line a run prints when it takes over a lock it found free."""
  return (f'taking over the lock of {describe_holder(holder)}: nothing holds '
          'it, and the kernel releases a lock when the process that held it '
          f'ends, so that run is over; {holder_process_now(holder)}')


def describe_holder(holder: dict) -> str:
  if not holder:
    return 'a run that has not said who it is yet'
  return (f'process {holder.get("pid")} on '
          f'{holder.get("host")}, started {holder.get("started")}')
