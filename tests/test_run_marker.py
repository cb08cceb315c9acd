"""The output folder's lock and the files a run creates in it, directly:
nothing is written through a link planted at a name, and a lock left
behind is described by what is known of its holder."""

import json
import logging
import os
import socket
import subprocess
import sys
import time

import pytest

from transforms.runtime import filesystem
from transforms.runtime import output_lock as run_marker


@pytest.mark.parametrize('kind', ['link', 'dangling link', 'fifo', 'folder'])
def test_create_never_writes_through_what_is_planted_at_the_name(tmp_path,
                                                                 kind):
  victim = tmp_path / 'victim'
  victim.write_bytes(b'keep')
  name = tmp_path / 'started'
  if kind == 'link':
    os.symlink(victim, name)
  elif kind == 'dangling link':
    os.symlink(tmp_path / 'nowhere', name)
  elif kind == 'fifo':
    os.mkfifo(name)
  else:
    name.mkdir()
  with pytest.raises(filesystem.NotAFile, match=str(name) + ' is a'):
    filesystem.create(str(name))
  assert victim.read_bytes() == b'keep'
  assert not (tmp_path / 'nowhere').exists()


def test_create_writes_a_new_file_and_replaces_an_old_one(tmp_path):
  path = tmp_path / 'sub' / 'f.txt'
  for data in (b'first, longer', b'second'):
    with filesystem.create(str(path)) as f:
      f.write(data)
    assert path.read_bytes() == data


def test_the_marker_and_heartbeat_refuse_a_link_planted_in_the_temp_folder(
    tmp_path):
  victim = tmp_path / 'victim'
  victim.write_bytes(b'keep')
  temp = tmp_path / 'out' / '.wavbeam-incomplete'
  temp.mkdir(parents=True)
  os.symlink(victim, temp / 'started')
  with pytest.raises(filesystem.NotAFile):
    run_marker.write_marker(str(tmp_path / 'out'), 'r1')
  assert victim.read_bytes() == b'keep'


def _leave_lock(folder, holder):
  (folder / run_marker.LOCK_FILE).write_text(json.dumps(holder))


def _take(folder, caplog):
  # On the logger itself: a command run earlier in this process may have
  # stopped it from propagating to the root logger.
  logger = logging.getLogger('wavbeam')
  logger.addHandler(caplog.handler)
  try:
    with caplog.at_level(logging.WARNING, logger='wavbeam'):
      with run_marker.FolderLock(str(folder)) as lock:
        held = json.loads((folder / run_marker.LOCK_FILE).read_text())
  finally:
    logger.removeHandler(caplog.handler)
  return lock.taken_over, held, caplog.text


def test_a_lock_left_by_a_process_that_is_gone_says_so(tmp_path, caplog):
  child = subprocess.Popen([sys.executable, '-c', 'pass'])
  child.wait()  # its PID now names no process (until the kernel reuses it)
  _leave_lock(tmp_path, {'host': socket.gethostname(), 'pid': child.pid,
                         'started': '2026-01-01T00:00:00+00:00',
                         'process_start': 'boot/1'})
  taken, held, said = _take(tmp_path, caplog)
  assert taken['pid'] == child.pid
  assert (f'taking over the lock of process {child.pid} on '
          f'{socket.gethostname()}, started 2026-01-01T00:00:00+00:00: '
          'nothing holds it') in said
  assert f'no process {child.pid} runs on this host now' in said
  assert held['pid'] == os.getpid()
  assert held['process_start'] == run_marker.process_start(os.getpid())


def test_a_pid_taken_by_another_program_is_not_called_the_holder(tmp_path,
                                                                 caplog):
  """The lock names a PID that runs now, but as another program (its start
  time differs from the one the lock records)."""
  other = subprocess.Popen([sys.executable, '-c',
                            'import time; time.sleep(60)'])
  try:
    _leave_lock(tmp_path, {'host': socket.gethostname(), 'pid': other.pid,
                           'started': '2026-01-01T00:00:00+00:00',
                           'process_start': 'another-boot/12345'})
    _, _, said = _take(tmp_path, caplog)
  finally:
    other.kill()
    other.wait()
  assert f'the process {other.pid} running now, started ' in said
  assert 'is another program that reuses the PID' in said
  assert 'no longer running' not in said


def test_a_holder_that_runs_but_let_go_of_the_lock_is_named_as_such(
    tmp_path, caplog):
  _leave_lock(tmp_path, {'host': socket.gethostname(), 'pid': os.getpid(),
                         'started': '2026-01-01T00:00:00+00:00',
                         'process_start': run_marker.process_start(
                             os.getpid())})
  _, _, said = _take(tmp_path, caplog)
  assert (f'process {os.getpid()} still runs (the same start time), but it '
          'no longer holds the lock') in said


def test_a_lock_from_another_host_says_its_processes_cannot_be_seen(
    tmp_path, caplog):
  _leave_lock(tmp_path, {'host': 'elsewhere.example', 'pid': 1,
                         'started': '2026-01-01T00:00:00+00:00'})
  _, _, said = _take(tmp_path, caplog)
  assert ('it ran on host elsewhere.example, whose processes cannot be seen '
          'from here') in said


def test_a_lock_held_by_a_live_process_is_refused_naming_it(tmp_path):
  holder = subprocess.Popen(
      [sys.executable, '-c', 'import sys\n'
       'from transforms.runtime import output_lock\n'
       f'with output_lock.FolderLock({str(tmp_path)!r}):\n'
       '  print("held", flush=True); sys.stdin.read()'],
      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
      cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  try:
    assert holder.stdout.readline() == 'held\n'
    with pytest.raises(run_marker.FolderLocked,
                       match=f'process {holder.pid} on '):
      run_marker.FolderLock(str(tmp_path)).__enter__()
  finally:
    holder.stdin.close()
    holder.wait()


def test_a_heartbeat_of_a_reused_pid_is_not_alive(tmp_path):
  """A heartbeat whose PID now belongs to another program (its start time
  differs) does not keep a new run out."""
  temp = tmp_path / '.wavbeam-incomplete'
  temp.mkdir()
  beat = {'run_id': 'r', 'pid': os.getpid(), 'host': socket.gethostname(),
          'time': time.time()}
  (temp / 'heartbeat').write_text(json.dumps(
      dict(beat, process_start='another-boot/1')))
  assert run_marker.live_heartbeat(str(tmp_path)) is None
  (temp / 'heartbeat').write_text(json.dumps(
      dict(beat, process_start=run_marker.process_start(os.getpid()))))
  assert run_marker.live_heartbeat(str(tmp_path))['pid'] == os.getpid()


@pytest.mark.slow  # a race tried many times over
def test_the_final_removal_of_the_temp_folder_never_races_a_heartbeat(
    tmp_path, monkeypatch):
  """A beat into the temporary folder while it is being removed would
  leave a file in it once its files are gone, and the removal of the
  folder would then fail a finished run. Beating continuously, the
  removal of a full folder succeeds every time, and what a later beat
  makes goes with the heartbeat."""
  monkeypatch.setattr(run_marker, 'HEARTBEAT_SECONDS', 0.0002)
  out = str(tmp_path / 'out')
  temp = run_marker.temp_dir(out)
  with run_marker.Heartbeat(out, 'run-1'):
    _fill_and_remove(out, times=40, files=200)
  assert not os.path.exists(temp)


def _fill_and_remove(out, times, files):
  """The temporary folder filled with files and removed, `times` over."""
  temp = run_marker.temp_dir(out)
  for _ in range(times):
    os.makedirs(os.path.join(temp, 'probes'), exist_ok=True)
    for i in range(files):
      with open(os.path.join(temp, 'probes', f'block-{i}'), 'wb') as f:
        f.write(b'x')
    run_marker.remove_temp_dir(out)


_BEATING = '''
import sys, time
from transforms.runtime import output_lock as run_marker
run_marker.HEARTBEAT_SECONDS = 0.0002
with run_marker.Heartbeat(sys.argv[1], 'run-1'):
  print('beating', flush=True)
  time.sleep(120)
'''


@pytest.mark.slow  # a race tried many times over
def test_a_heartbeat_of_another_process_never_fails_the_final_removal(
    tmp_path):
  """On a cluster the final step runs in a worker while the launcher
  beats: a beat between the removal of the folder's files and of the
  folder itself would fail the finished run. Beating continuously from
  another process, the removal of a full folder succeeds every time."""
  out = str(tmp_path / 'out')
  beating = subprocess.Popen([sys.executable, '-c', _BEATING, out],
                             stdout=subprocess.PIPE, text=True,
                             cwd=os.path.dirname(os.path.dirname(__file__)))
  try:
    assert beating.stdout.readline() == 'beating\n'
    _fill_and_remove(out, times=20, files=50)
  finally:
    beating.kill()
    beating.wait()
