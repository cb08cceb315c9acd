"""Atomic completion: a run killed at any point never leaves something that
looks like a dataset, and a rerun always succeeds with the same bytes."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pipeline.contract import metadata
from pipeline.contract import naming
from pipeline import progress
from pipeline import resume
from pipeline.readers import tf_dataset as replay
from tests import helpers as H
from transforms.inputs import block_store
from transforms.runtime import output_lock as run_marker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = ['--win_len', '4096', '--features', 'signal,spectrogram,log_mel',
         '--max_examples_per_shard', '60', '--splits', 'train=0.8,test=0.2']


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
  d = tmp_path_factory.mktemp('kill_corpus')
  for i in range(40):
    H.write_wav(str(d / f'c{i % 3}/f{i:02d}.wav'),
                H.noise(16000 * 8 + 97 * i, seed=i))
  return d


def _start(corpus, out, *extra):
  return subprocess.Popen(
      [sys.executable, '-m', 'pipeline.run', '--input_dir', str(corpus),
       '--output_dir', str(out), *FLAGS, *extra], cwd=ROOT,
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _digest(out, leftovers=()):
  """Hashes of every file of a finished dataset; metadata without its
  creation time, output folder and --overwrite. Not the lock file a run
  killed just after finishing leaves (the next run takes it over), nor
  the `leftovers` named."""
  digests = {}
  for name in sorted(os.listdir(out)):
    if name == run_marker.LOCK_FILE or name in leftovers:
      continue
    with open(os.path.join(out, name), 'rb') as f:
      data = f.read()
    if name == naming.METADATA_FILE:
      meta = metadata.content(json.loads(data))
      meta['config'].pop('output_dir')
      meta['config'].pop('overwrite')
      data = json.dumps(meta, sort_keys=True).encode()
    digests[name] = hashlib.sha256(data).hexdigest()
  return digests


def _temp_files(out):
  """Shard files in the temporary folder (not the run's marker files)."""
  try:
    names = os.listdir(os.path.join(out, naming.TEMP_DIR))
  except FileNotFoundError:
    return 0
  return sum(1 for n in names
             if n not in (naming.STARTED_FILE, run_marker.HEARTBEAT_FILE,
                          progress.PLAN_FILE, block_store.FOLDER))


def _verify(out):
  return subprocess.run([sys.executable, '-m', 'pipeline.verify', str(out)],
                        cwd=ROOT, capture_output=True, text=True)


# When to kill: a point in time, or the first moment the output shows a
# stage of the run. A run that finishes first counts as "complete".
# Kills at an exact step, by the driven run (tests/helpers.py), always
# land inside the run; the others are watched for from outside and may
# come after the run has finished, which the test accepts.
STEPS_KILLED_AT = ['prepared', 'finalizing']
KILL_POINTS = [
    ('first shard file open', lambda out: _temp_files(out) >= 1),
    ('a third of the shards', lambda out: _temp_files(out) >= 3),
    ('most shards', lambda out: _temp_files(out) >= 6),
    ('finalizing: first shard renamed', lambda out: os.path.isdir(out) and
     any('.tfrecord-' in n for n in os.listdir(out))),
    ('rejects.jsonl written', lambda out: os.path.exists(
        os.path.join(out, naming.REJECTS_FILE))),
]


def test_sigkill_at_any_point_then_rerun(corpus, tmp_path):
  clean = tmp_path / 'clean'
  proc = _start(corpus, clean)
  assert proc.wait() == 0, proc.stderr.read().decode()[-2000:]
  expected = _digest(clean)
  outcomes = {}
  points = [(step, None) for step in STEPS_KILLED_AT] + KILL_POINTS
  for i, (point, reached) in enumerate(points):
    out = tmp_path / f'killed{i}'
    if reached is None:
      code, _ = H.DrivenRun(point, 'kill', '--input_dir', str(corpus),
                            '--output_dir', str(out), *FLAGS,
                            cwd=tmp_path).wait()
      assert code == -signal.SIGKILL, point
    else:
      proc = _start(corpus, out)
      while proc.poll() is None and not reached(str(out)):
        time.sleep(0.002)
      if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
    complete = os.path.exists(out / naming.METADATA_FILE)
    outcomes[point] = 'complete' if complete else 'incomplete'
    if complete:   # it finished before the kill: it must be whole
      assert _verify(out).returncode == 0
      # A kill between metadata.json and the removal of the temporary
      # folder leaves the folder, which readers pass over and the next
      # run removes.
      assert _digest(out, leftovers=[naming.TEMP_DIR]) == expected
    else:
      with pytest.raises(replay.DatasetError,
                         match='incomplete dataset|no wavbeam dataset'):
        replay.replay_dataset(str(out), 'train')
      check = _verify(out)
      assert check.returncode == 1 and 'not found' in check.stderr
      if os.path.exists(out):   # leftovers are refused, not mixed in
        again = _start(corpus, out)
        assert again.wait() == 2
        assert b'pass --overwrite' in again.stderr.read()
    rerun = _start(corpus, out, '--overwrite')
    assert rerun.wait() == 0, rerun.stderr.read().decode()[-2000:]
    assert _verify(out).returncode == 0
    assert _digest(out) == expected, point
    assert not os.path.exists(out / naming.TEMP_DIR), point
  print('kill outcomes:', outcomes)
  assert all(outcomes[step] == 'incomplete' for step in STEPS_KILLED_AT)


def test_a_killed_run_leaves_nothing_in_the_temporary_folder(corpus,
                                                            tmp_path):
  """Beam's Pipeline() makes a folder there that only its run() removes:
  a run killed before its end must not leave it behind."""
  temp = tmp_path / 'tmp'
  temp.mkdir()
  code, log = H.DrivenRun('prepared', 'kill', '--input_dir', str(corpus),
                          '--output_dir', str(tmp_path / 'out'), *FLAGS,
                          cwd=tmp_path, env={'TMPDIR': str(temp)}).wait()
  assert code == -signal.SIGKILL, log[-2000:]
  assert os.listdir(temp) == []


def _limits(file_size=None):
  """For the child: no root bypass of permissions; files capped in size."""
  def apply():
    if os.geteuid() == 0:
      H.without_root_file_access()
    if file_size is not None:
      import resource
      signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # EFBIG, not a signal
      resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
  return apply


def _run_limited(corpus, out, limits):
  return subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir', str(corpus),
       '--output_dir', str(out), *FLAGS], cwd=ROOT, capture_output=True,
      text=True, preexec_fn=limits)


def test_read_only_output_fails_before_running(corpus, tmp_path):
  parent = tmp_path / 'locked'
  parent.mkdir()
  os.chmod(parent, 0o555)
  proc = _run_limited(corpus, parent / 'out', _limits())
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert f"--output_dir='{parent / 'out'}': cannot be written" in proc.stderr
  assert 'Permission denied' in proc.stderr
  assert not os.path.exists(parent / 'out' / naming.METADATA_FILE)


def test_full_disk_fails_clearly_and_leaves_no_metadata(corpus, tmp_path):
  out = tmp_path / 'out'
  # Every file may grow to 512 KB: the marker and the small files fit, the
  # shards (about 2 MB each) do not, as on a disk that fills up mid-run.
  proc = _run_limited(corpus, out, _limits(file_size=512 << 10))
  assert proc.returncode == 1, proc.stderr[-2000:]
  last = proc.stderr.strip().splitlines()[-2:]
  assert 'error: the run failed:' in last[0] and 'File too large' in last[0]
  assert 'holds no complete dataset' in last[1] and '--overwrite' in last[1]
  assert not os.path.exists(out / naming.METADATA_FILE)
  with pytest.raises(replay.DatasetError, match='incomplete dataset'):
    replay.load_metadata(str(out))


def test_overwrite_deletes_metadata_before_anything_else():
  """An --overwrite interrupted while deleting never leaves metadata.json
  beside missing shards (on a Beam file system that logs deletions)."""
  from pipeline import output_folder
  from tests import memfs
  names = ['wavbeam-train.tfrecord-00000-of-00002',
           'wavbeam-train.tfrecord-00001-of-00002', naming.REJECTS_FILE,
           'dataset_info.json', naming.METADATA_FILE]
  for name in names:
    memfs.put(f'mem://earlier/{name}', b'x')
  config = H.make_config('mem://corpus', 'mem://earlier', overwrite=True)
  del memfs.DELETED[:]
  output_folder.prepare(config, 'run-1')
  # (The writability check's own file comes and goes first.)
  deleted = [p for p in memfs.DELETED if '.wavbeam-write-check-' not in p]
  assert deleted[0] == f'mem://earlier/{naming.METADATA_FILE}'
  assert sorted(deleted) == sorted(f'mem://earlier/{n}' for n in names)
  assert memfs.listing('mem://earlier/') == [
      f'mem://earlier/{naming.TEMP_DIR}/{name}'
      for name in sorted([naming.STARTED_FILE, resume.RUN_FILE])]


def _run_with_closed(stream, corpus, out, limits):
  """The CLI with its stdout or stderr a pipe nobody reads (closed at
  once, as `... | head -c 0` does); its exit code."""
  proc = subprocess.Popen(
      [sys.executable, '-m', 'pipeline.run', '--input_dir', str(corpus),
       '--output_dir', str(out), *FLAGS], cwd=ROOT, preexec_fn=limits,
      stdout=subprocess.PIPE if stream == 'stdout' else subprocess.DEVNULL,
      stderr=subprocess.PIPE if stream == 'stderr' else subprocess.DEVNULL)
  getattr(proc, stream).close()
  try:
    return proc.wait(timeout=300)
  except subprocess.TimeoutExpired:
    proc.kill()
    proc.wait()
    raise AssertionError(f'the run hung with a closed {stream}')


def test_a_failing_run_with_stderr_closed_exits_1(corpus, tmp_path):
  assert _run_with_closed('stderr', corpus, tmp_path / 'out',
                          _limits(file_size=512 << 10)) == 1


def test_a_good_run_with_stdout_closed_exits_0(corpus, tmp_path):
  assert _run_with_closed('stdout', corpus, tmp_path / 'out',
                          _limits()) == 0
  assert os.path.exists(tmp_path / 'out' / naming.METADATA_FILE)


def test_a_second_job_is_refused_while_the_first_runs(corpus, tmp_path,
                                                     capsys):
  """The first job held at its last step: the second, with or without
  --overwrite, is refused; the first then completes."""
  out = tmp_path / 'out'
  first = H.DrivenRun('finalizing', 'hold', '--input_dir', str(corpus),
                      '--output_dir', str(out), *FLAGS, '--quiet',
                      cwd=tmp_path)
  first.wait_until_there()
  from pipeline.commands import run
  for extra in ([], ['--overwrite']):
    code = run.main(['--input_dir', str(corpus), '--output_dir', str(out),
                     *FLAGS, '--quiet', *extra])
    assert code == 2
    assert 'another wavbeam job is writing to it' in capsys.readouterr().err
  first.release()
  code, printed = first.wait()
  assert code == 0, printed[-2000:]
  assert _verify(out).returncode == 0
  assert not os.path.exists(out / naming.TEMP_DIR)


def test_a_job_whose_folder_is_deleted_says_so(corpus, tmp_path):
  import shutil
  out = tmp_path / 'out'
  run = H.DrivenRun('finalizing', 'hold', '--input_dir', str(corpus),
                    '--output_dir', str(out), *FLAGS, cwd=tmp_path)
  run.wait_until_there()
  shutil.rmtree(out / naming.TEMP_DIR)
  run.release()
  code, printed = run.wait()
  assert code == 1
  assert 'was changed by someone else while this job ran' in printed, \
      printed[-2000:]
  assert not os.path.exists(out / naming.METADATA_FILE)


def test_read_only_output_with_overwrite_leaves_the_old_dataset(corpus,
                                                                tmp_path):
  out = tmp_path / 'out'
  first = _start(corpus, out)
  assert first.wait() == 0
  before = _digest(out)
  os.chmod(out, 0o555)
  try:
    proc = subprocess.run(
        [sys.executable, '-m', 'pipeline.run', '--input_dir', str(corpus),
         '--output_dir', str(out), *FLAGS, '--overwrite'], cwd=ROOT,
        capture_output=True, text=True, preexec_fn=_limits())
  finally:
    os.chmod(out, 0o755)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert 'cannot be written' in proc.stderr
  assert _digest(out) == before
