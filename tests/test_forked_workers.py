"""Forked workers: forked before any thread, used by a local threaded
run's shard tasks, and the same bytes as threads alone."""

import concurrent.futures
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from pipeline import config as config_lib
from pipeline.contract import metadata
from pipeline.commands import run as run_lib
from tests import helpers as H
from transforms.runtime import cpus
from transforms.runtime import forked_workers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Unsendable(Exception):
  """Cannot be rebuilt from its pickle (its __init__ takes two values)."""

  def __init__(self, a, b):
    super().__init__(f'{a}/{b}')


def _raise_unsendable():
  raise Unsendable('left', 'right')


def _raise_value_error():
  raise ValueError('bad window 7')


def _die():
  os.kill(os.getpid(), signal.SIGKILL)


def _in_fresh_process(code: str) -> str:
  proc = subprocess.run([sys.executable, '-c', textwrap.dedent(code)],
                        capture_output=True, text=True, cwd=ROOT, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stdout


def test_errors_come_back_as_themselves_or_named():
  out = _in_fresh_process('''
      from transforms.runtime import forked_workers as L
      from tests.test_forked_workers import (
          _die, _raise_unsendable, _raise_value_error)
      with L.started(1) as n:
        assert n == 1
        pool = L.current()
        assert L.call(pool, pow, 2, 10) == 1024
        try:
          L.call(pool, _raise_value_error)
        except ValueError as e:
          cause = str(e.__cause__).splitlines()
          print('value', e, cause[0], cause[-1])
        try:
          L.call(pool, _raise_unsendable)
        except L.WorkerProcessFailed as e:
          print('unsendable', e)
        try:
          L.call(pool, _die)
        except L.WorkerProcessFailed as e:
          print('died', 'killed' in str(e))
      assert L.current() is None
      ''')
  assert ('value bad window 7 Traceback (most recent call last): '
          'ValueError: bad window 7') in out
  assert 'unsendable Unsendable: left/right' in out
  assert 'died True' in out


def test_calls_keep_every_process_busy_and_keep_their_order():
  """Calls from one thread run in both processes at once (each call
  waits at a barrier for the other: run one at a time, the first would
  wait in vain), and come back in the order they started, through
  `then`; a failed call fails the bundle and drops the calls not
  started."""
  out = _in_fresh_process('''
      import multiprocessing, os, threading
      barrier = multiprocessing.get_context('fork').Barrier(2, timeout=60)
      def meet(i):
        barrier.wait()
        return i, os.getpid()
      def fail_on(i):
        if i == 1:
          raise ValueError('call 1 failed')
        return i
      import __main__
      __main__.meet, __main__.fail_on = meet, fail_on
      from transforms.runtime import forked_workers as L
      with L.started(2):
        calls = L.Calls(L.current())
        emitted = []
        for i in range(6):
          emitted += calls.start(lambda r: [r], meet, i)
        emitted += calls.finish()
        assert [i for i, _ in emitted] == list(range(6)), emitted
        assert len({pid for _, pid in emitted}) == 2
        assert os.getpid() not in {pid for _, pid in emitted}
        calls = L.Calls(L.current(), in_flight=1)
        got = []
        try:
          for i in range(5):
            got += calls.start(lambda r: [r], fail_on, i)
          got += calls.finish()
        except ValueError as e:
          print('failed:', e, got)
        assert calls.finish() is not None and not list(calls.finish())
      ''')
  # Call 0 comes back first or not at all: call 1's error is raised as it
  # comes back, without waiting for earlier calls; no later call is.
  assert out in ('failed: call 1 failed [0]\n', 'failed: call 1 failed []\n')


def test_calls_held_for_the_bundle_end_start_largest_first():
  """largest_first holds each call to the bundle's end (finish), then
  starts the largest first, ties in the order given: in one process they
  run in that order, and their results come back in it."""
  out = _in_fresh_process('''
      import time
      def note(size, name):
        return name, time.monotonic()
      import __main__
      __main__.note = note
      from transforms.runtime import forked_workers as L
      with L.started(1):
        calls = L.Calls(L.current())
        for size, name in ((1, 'a'), (5, 'b'), (3, 'c'), (5, 'd'), (2, 'e')):
          calls.largest_first(size, lambda r: [r], note, size, name)
        emitted = list(calls.finish())
        print(''.join(name for name, _ in emitted),
              [t for _, t in emitted] == sorted(t for _, t in emitted))
        assert not list(calls.finish())  # nothing held twice
      ''')
  assert out.split() == ['bdcea', 'True']


def test_calls_started_now_leave_in_flight_to_the_calls_started():
  """A call a `then` starts (start_now) runs beside the others without
  taking their place: `start` waits only while more than `in_flight` of
  its own calls are pending, so calls started now that are still running
  (here, until a gate opens) hold nothing up; they come back in the order
  they started, here at `finish`."""
  gate = threading.Event()
  # Were they counted, start would wait for the gate: it opens in the end,
  # so that the test fails instead of hanging.
  opening = threading.Timer(20, gate.set)
  opening.daemon = True
  opening.start()
  try:
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
      calls = forked_workers.Calls(pool, in_flight=1)

      def then(value):
        calls.start_now(lambda opened: [('gated', value, opened)],
                        gate.wait, 60)
        yield value

      emitted = []
      for i in range(4):
        emitted += calls.start(then, int, i)
      assert not gate.is_set()
      assert emitted == [0, 1, 2]
      gate.set()
      emitted += calls.finish()
  finally:
    opening.cancel()
  assert emitted == [0, 1, 2, 3, *[('gated', i, True) for i in range(4)]]


def test_in_child_runs_elsewhere_and_brings_back_value_or_error():
  """A process forked for the call (a closure will do), or once the
  workers exist, one of them (what pickles), else this process."""
  out = _in_fresh_process('''
      import os, threading
      from transforms.runtime import forked_workers as L
      from tests.test_forked_workers import _die, _raise_value_error
      me = os.getpid()
      print('forked', L.in_child(lambda: os.getpid()) != me)
      try:
        L.in_child(_raise_value_error)
      except ValueError as e:
        print('raised', e)
      try:
        L.in_child(_die)
      except L.WorkerProcessFailed as e:
        print('died', 'killed' in str(e))
      with L.started(1):
        print('worker', L.in_child(os.getpid) != me)
        print('closure here', L.in_child(lambda: os.getpid()) == me)
      print('children left', len(__import__('multiprocessing')
                                 .active_children()))
      ''')
  assert 'forked True' in out and 'raised bad window 7' in out
  assert 'died True' in out and 'worker True' in out
  assert 'closure here True' in out and 'children left 0' in out


def test_no_fork_once_a_thread_exists():
  stop = threading.Event()
  thread = threading.Thread(target=stop.wait)
  thread.start()
  try:
    assert not forked_workers.can_fork()
    with forked_workers.started(2) as n:
      assert n == 0 and forked_workers.current() is None
  finally:
    stop.set()
    thread.join()


@pytest.mark.parametrize('extra, expected', [
    ([], 2),
    (['--direct_running_mode=multi_threading', '--direct_num_workers=2'], 0),
    (['--direct_num_workers=1'], 0),
    (['--direct_num_workers=3'], 3),
    (['--direct_num_workers=0'], 2),
    (['--direct_num_workers', '16'], 16),
    (['--runner', 'DaskRunner'], 0),
    (['--no_such_flag'], 0),
])
def test_only_a_default_local_threaded_run_gets_them(tmp_path, extra,
                                                     expected, monkeypatch):
  """One per usable core, or --direct_num_workers of them, where wavbeam
  picks the running mode."""
  monkeypatch.setattr(cpus, 'usable_cpus', lambda *args: 2)
  H.write_wav(str(tmp_path / 'in' / 'a.wav'), H.noise(4096))
  config, beam_args = config_lib.parse_known_args(
      ['--input_dir', str(tmp_path / 'in'), '--output_dir',
       str(tmp_path / 'out'), *extra])
  assert run_lib.forked_workers_for(config, beam_args) == expected


@pytest.mark.parametrize('forked, expected', [(2, True), (0, False)])
def test_beam_runs_in_one_thread_beside_forked_workers(forked, expected):
  assert run_lib.in_one_thread(forked) is expected


def test_remote_or_in_memory_folders_get_none(tmp_path, monkeypatch):
  monkeypatch.setattr(os, 'cpu_count', lambda: 2)
  config, beam_args = config_lib.parse_known_args(
      ['--input_dir', str(tmp_path), '--output_dir', 'mem://out'])
  assert run_lib.forked_workers_for(config, beam_args) == 0


def _digests(out):
  return {name: hashlib.sha256((out / name).read_bytes()).hexdigest()
          for name in sorted(os.listdir(out)) if name != 'metadata.json'}


def test_the_cli_writes_shards_in_them_with_the_same_bytes(tmp_path):
  for i in range(10):
    H.write_wav(str(tmp_path / 'in' / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(3000 + 500 * i, seed=i))
  flags = ['--input_dir', str(tmp_path / 'in'), '--win_len', '1024',
           '--n_fft', '256', '--fft_hop', '128', '--quiet',
           '--max_examples_per_shard', '8', '--splits', 'train=0.6,test=0.4']
  # Records which process wrote each shard (the children are forked after
  # the patch, so they carry it).
  out = _in_fresh_process(f'''
      import os, sys
      from transforms.writing import sweep_writer
      write_segment = sweep_writer.write_segment
      def recording(*args):
        # One write: the workers print at once, to one pipe.
        os.write(1, f'wrote in {{os.getpid()}}\\n'.encode())
        return write_segment(*args)
      sweep_writer.write_segment = recording
      from pipeline.commands import run
      print('launcher', os.getpid())
      code = run.main({flags + ['--output_dir', str(tmp_path / 'forked')]!r})
      assert code == 0, code
      ''')
  launcher = next(line.split()[1] for line in out.splitlines()
                  if line.startswith('launcher'))
  writers = [line.split()[2] for line in out.splitlines()
             if line.startswith('wrote in')]
  assert len(writers) >= 2 and launcher not in writers
  assert run_lib.main(flags + [
      '--output_dir', str(tmp_path / 'threads'),
      '--direct_running_mode=multi_threading',
      '--direct_num_workers=2']) == 0
  forked, threads = _digests(tmp_path / 'forked'), _digests(tmp_path /
                                                            'threads')
  assert forked == threads and len(forked) > 4



def _content(out):
  meta = metadata.content(json.loads((out / 'metadata.json').read_text()))
  del meta['config']['output_dir']
  return meta


def test_a_shard_a_worker_would_wait_for_is_written_in_pieces(tmp_path):
  # 10 files of 16 windows: one shard of 160, cut near its middle on its
  # grid of read batches (of 32 windows: 80 -> 64).
  for i in range(10):
    H.write_wav(str(tmp_path / 'in' / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(16 * 1024 + 100 * i, seed=i))
  flags = ['--input_dir', str(tmp_path / 'in'), '--win_len', '1024',
           '--n_fft', '256', '--fft_hop', '128', '--quiet']
  out = _in_fresh_process(f'''
      import os
      from transforms.writing import sweep_writer
      write_segment = sweep_writer.write_segment
      def recording(makers, run_ids, split, targets, *args):
        os.write(1, f'wrote in {{os.getpid()}} {{[t.keys for t in targets]}}\\n'
                 .encode())  # one write: the workers print at once
        return write_segment(makers, run_ids, split, targets, *args)
      sweep_writer.write_segment = recording
      from pipeline.commands import run
      print('launcher', os.getpid(), flush=True)
      code = run.main({flags + ['--output_dir', str(tmp_path / 'two'),
                                '--direct_num_workers=2']!r})
      assert code == 0, code
      ''')
  launcher = next(line.split()[1] for line in out.splitlines()
                  if line.startswith('launcher'))
  written = [line.split(' ', 3)[2:] for line in out.splitlines()
             if line.startswith('wrote in')]
  # Two tasks for the workers (which of them takes each is theirs to say).
  assert launcher not in {pid for pid, _ in written}
  assert sorted(keys for _, keys in written) == ['[(0, 64)]', '[(64, 160)]']
  assert run_lib.main(flags + ['--output_dir', str(tmp_path / 'one'),
                               '--direct_num_workers=1']) == 0
  # The shard joined from its pieces is the shard one worker writes, and
  # so are its statistics, to the last digit.
  assert _digests(tmp_path / 'two') == _digests(tmp_path / 'one')
  two, one = _content(tmp_path / 'two'), _content(tmp_path / 'one')
  assert [len(s['shards']) for s in two['splits'].values()] == [1]
  assert two['splits']['train']['statistics'] == one['splits']['train'][
      'statistics']
  assert two == one


STUCK = '''
import os, time
import numpy as np
from transforms.features import registry

SPOT = os.environ['STUCK_SPOT']


@registry.register
class Stuck(registry.Feature):
  """On sound: the first worker here sleeps (its pid in SPOT/sleeper),
  the next one raises once the first sleeps."""
  name = 'stuck'
  help = 'one worker sleeps, another fails'

  def compute(self, batch):
    if np.any(batch.windows):
      try:
        fd = os.open(os.path.join(SPOT, 'sleeper'),
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL)
      except FileExistsError:
        if open(os.path.join(SPOT, 'sleeper')).read() != str(os.getpid()):
          raise ValueError('the trap went off')
      else:
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
      time.sleep(600)
    return np.zeros((len(batch.windows), 1), np.float32)
'''


@pytest.mark.parametrize('sink', ['shards', 'write_to_tfrecord'])
def test_a_failed_run_ends_without_waiting_for_its_other_workers(
    tmp_path, sink):
  """One worker fails while another is deep in a unit: the command says
  the error and ends, the busy worker killed, not waited for."""
  corpus = tmp_path / 'in'
  for i in range(8):
    H.write_wav(str(corpus / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(4096, seed=i))
  (tmp_path / 'stuck_feature.py').write_text(STUCK)
  done = subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir', str(corpus),
       '--output_dir', str(tmp_path / 'out'), '--win_len', '1024',
       '--feature_module', 'stuck_feature', '--features', 'signal,stuck',
       '--sink', sink, '--max_examples_per_shard', '4', '--quiet'],
      capture_output=True, text=True, timeout=300, cwd=ROOT,
      env={**os.environ, 'PYTHONPATH': f'{ROOT}:{tmp_path}',
           'STUCK_SPOT': str(tmp_path)})
  assert done.returncode == 1, done.stderr[-3000:]
  assert 'ValueError: the trap went off' in done.stderr
  sleeper = int((tmp_path / 'sleeper').read_text())
  with pytest.raises(ProcessLookupError):
    os.kill(sleeper, 0)
