"""Who owns an output folder while a run writes to it.

A run writes OUT/.wavbeam-incomplete/started holding its run id before
anything else, and its launcher refreshes OUT/.wavbeam-incomplete/heartbeat
while the job runs. Shard tasks and the final step check the marker, so a
run whose folder was deleted or taken over by another run (`--overwrite`,
a user's `rm`) fails saying so instead of publishing into someone else's
dataset; a second run sees the heartbeat and is refused while the first
is alive.
"""

import json
import os
import socket
import threading
import time
import uuid
from typing import Optional

from apache_beam.io.filesystems import FileSystems

from pipeline.contract import naming
from pipeline.contract.errors import WavbeamError
from transforms import filesystem

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
  with FileSystems.create(_marker(dataset_dir)) as f:
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
      alive = age < 60
    else:
      alive = age < STALE_AFTER_SECONDS
  except Exception:  # none, unreadable, or its process is gone
    return None
  return dict(beat, age=age) if alive else None


class Heartbeat:
  """While open, refreshes this run's heartbeat every HEARTBEAT_SECONDS."""

  def __init__(self, dataset_dir: str, run_id: str):
    self.dataset_dir = dataset_dir
    self.path = naming.join(temp_dir(dataset_dir), HEARTBEAT_FILE)
    self.run_id = run_id
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._loop, daemon=True,
                                    name='wavbeam-heartbeat')

  def beat(self) -> None:
    data = json.dumps({'run_id': self.run_id, 'pid': os.getpid(),
                       'host': socket.gethostname(), 'time': time.time()})
    try:
      with FileSystems.create(self.path) as f:
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
