"""One writer at a time per dataset folder, and no kill that leaves a
dataset unreadable.

Each run here is a real `pipeline.run` process. To stop one at an exact
step, it is started through a small driver that wraps the function that
step calls, and there either kills its own process (SIGKILL, as the OOM
killer or a preempted machine would) or waits for the test to let it go.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.contract import parts as parts_lib
from transforms.runtime import output_lock as run_marker
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = ['--win_len', '1024', '--hop_len', '1024', '--splits',
         'train=0.5,test=0.5', '--max_examples_per_shard', '5',
         '--features', 'signal', '--quiet']

_driven = H.DrivenRun
STEPS = H.DRIVEN_STEPS


def _cli(*args, cwd):
  env = dict(os.environ, PYTHONPATH=ROOT)
  return subprocess.run([sys.executable, '-m', 'pipeline.run', *args],
                        capture_output=True, text=True, cwd=cwd, env=env,
                        timeout=600)


def _files(folder, first, count):
  for i in range(first, first + count):
    H.write_wav(str(folder / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(2048 + 512 * (i % 3), seed=i))


def _examples(out):
  """(examples per split, recordings) the readers see."""
  meta = numpy_reader.load_metadata(str(out))
  counts = {split: sum(1 for _ in numpy_reader.numpy_dataset(str(out), split))
            for split in meta['splits']}
  return counts, meta['counts']['files_ok']


def _verify(out):
  proc = subprocess.run([sys.executable, '-m', 'pipeline.verify', str(out)],
                        capture_output=True, text=True, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.fixture()
def dataset(tmp_path):
  _files(tmp_path / 'in', 0, 6)
  out = tmp_path / 'out'
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir', str(out),
              *FLAGS, cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  _files(tmp_path / 'in', 6, 4)  # the new day
  return tmp_path, out


def _append_args(tmp_path, out, *more):
  return ('--input_dir', str(tmp_path / 'in'), '--output_dir', str(out),
          *FLAGS, '--append', *more)


@pytest.mark.parametrize('step', STEPS)
def test_a_kill_at_any_step_of_an_append_leaves_a_readable_dataset(
    dataset, step):
  tmp_path, out = dataset
  before = _examples(out)
  code, _ = _driven(step, 'kill', *_append_args(tmp_path, out),
                    cwd=tmp_path).wait()
  assert code == -signal.SIGKILL, step
  after = _examples(out)
  assert after[1] in (6, 10)
  if step == 'listed':
    assert after[1] == 10
  else:
    assert after == before
  _verify(out)
  # The next append recovers: it takes the dead run's lock over, and the
  # dataset ends with every recording exactly once.
  again = _cli(*_append_args(tmp_path, out), cwd=tmp_path)
  assert again.returncode == 0, again.stderr[-3000:]
  if step != 'listed':
    assert 'taking over the lock' in again.stderr
    assert 'appended 4 new recordings' in again.stderr
  assert _examples(out)[1] == 10
  sources = [json.loads(line)['path'] for d in _part_dirs(out)
             for line in open(os.path.join(d, 'sources.jsonl'))]
  assert sorted(sources) == sorted(set(sources)) and len(sources) == 10
  _verify(out)


def _part_dirs(out):
  return parts_lib.part_dirs(str(out), os.path.exists,
                             lambda p: open(p).read())


def _hold(step, args, cwd):
  """A run stopped at `step`, holding its lock until released."""
  proc = _driven(step, 'hold', *args, cwd=cwd)
  deadline = time.monotonic() + 300
  while not os.path.exists(cwd / 'hold.here'):
    assert proc.poll() is None, proc.wait()[1][-3000:]
    assert time.monotonic() < deadline
    time.sleep(0.05)
  return proc


def _release(proc, cwd):
  (cwd / 'hold.go').touch()
  code, err = proc.wait()
  assert code == 0, err[-3000:]
  return err


def test_a_second_run_is_refused_while_an_append_writes(dataset):
  tmp_path, out = dataset
  first = _hold('prepared', _append_args(tmp_path, out), tmp_path)
  holder = json.loads((out / run_marker.LOCK_FILE).read_text())
  assert holder['pid'] == first.pid
  before = sorted(os.listdir(out))
  for args in (_append_args(tmp_path, out),
               ('--input_dir', str(tmp_path / 'in'), '--output_dir',
                str(out), *FLAGS, '--overwrite')):
    second = _cli(*args, cwd=tmp_path)
    assert second.returncode == 2, second.stderr[-3000:]
    assert f'process {first.pid} on ' in second.stderr
    assert holder['started'] in second.stderr
    assert 'another wavbeam job is writing' in second.stderr
    assert sorted(os.listdir(out)) == before
  _release(first, tmp_path)
  assert _examples(out)[1] == 10
  assert not (out / run_marker.LOCK_FILE).exists()
  assert [os.path.basename(d) for d in _part_dirs(out)] == ['out',
                                                            'part-00001']
  _verify(out)


def test_a_fresh_run_holds_the_folder_too(tmp_path):
  _files(tmp_path / 'in', 0, 4)
  out = tmp_path / 'out'
  args = ('--input_dir', str(tmp_path / 'in'), '--output_dir', str(out),
          *FLAGS)
  first = _hold('prepared', args, tmp_path)
  second = _cli(*args, '--overwrite', cwd=tmp_path)
  assert second.returncode == 2
  assert f'process {first.pid} on ' in second.stderr
  _release(first, tmp_path)
  assert _examples(out)[1] == 4
  _verify(out)


def test_the_lock_of_a_killed_run_is_taken_over(dataset):
  tmp_path, out = dataset
  killed = _driven('prepared', 'kill', *_append_args(tmp_path, out),
                   cwd=tmp_path)
  killed.wait()
  assert (out / run_marker.LOCK_FILE).exists()  # left by the dead run
  again = _cli(*_append_args(tmp_path, out), cwd=tmp_path)
  assert again.returncode == 0, again.stderr[-3000:]
  assert f'taking over the lock of process {killed.pid} on ' in again.stderr
  assert not (out / run_marker.LOCK_FILE).exists()


def _children(pid):
  found = []
  for task in os.listdir(f'/proc/{pid}/task'):
    with open(f'/proc/{pid}/task/{task}/children') as f:
      found += [int(c) for c in f.read().split()]
  return found


def _alive(pid):
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
  except FileNotFoundError:
    return False


@pytest.mark.parametrize('how', [signal.SIGKILL, signal.SIGTERM])
def test_no_process_of_the_job_outlives_it(tmp_path, how):
  """The processes a run forks at launch end with it, however it ends."""
  _files(tmp_path / 'in', 0, 6)
  run = _driven('prepared', 'hold', '--input_dir', str(tmp_path / 'in'),
                '--output_dir', str(tmp_path / 'out'), *FLAGS, cwd=tmp_path)
  deadline = time.monotonic() + 300
  while not (tmp_path / 'hold.here').exists():
    assert run.poll() is None and time.monotonic() < deadline
    time.sleep(0.05)
  children = _children(run.pid)
  assert children, 'the run forked no forked worker'
  os.kill(run.pid, how)
  run.wait()
  deadline = time.monotonic() + 10
  while any(map(_alive, children)) and time.monotonic() < deadline:
    time.sleep(0.05)
  left = [c for c in children if _alive(c)]
  for c in left:
    os.kill(c, signal.SIGKILL)
  assert not left


@pytest.mark.parametrize('step', ['prepared', 'finalizing'])
def test_ctrl_c_says_one_line_and_exits_130(tmp_path, step):
  """At a step in the main thread and at one in a Beam worker thread (held
  there, so the run cannot finish by itself)."""
  _files(tmp_path / 'in', 0, 6)
  out = tmp_path / 'out'
  run = _driven(step, 'hold', '--input_dir', str(tmp_path / 'in'),
                '--output_dir', str(out), *FLAGS, cwd=tmp_path)
  deadline = time.monotonic() + 300
  while not (tmp_path / 'hold.here').exists():
    assert run.poll() is None and time.monotonic() < deadline
    time.sleep(0.05)
  children = _children(run.pid)
  os.kill(run.pid, signal.SIGINT)
  code, printed = run.wait()
  assert code == 130, printed[-3000:]
  assert printed.strip().splitlines() == [
      f'wavbeam: interrupted; {out} holds no complete dataset (no '
      'metadata.json); rerun with --resume to finish it from its finished '
      'shards, or --overwrite to start again'], printed[-3000:]
  assert not any(map(_alive, children))
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir', str(out),
              *FLAGS, '--overwrite', cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  _verify(out)
