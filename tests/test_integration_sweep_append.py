"""An --append to a sweep (--variants) is committed to every variant at
once: a kill at any step of it leaves every reader, `verify` and
`inspect` seeing the sweep as it was before, or as it is after, never
variants that hold different parts; a rerun completes it."""

import json
import os
import signal
import subprocess
import sys

import pytest

from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.commands import verify
from pipeline.contract.errors import DatasetError
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = ['--win_len', '1024', '--hop_len', '1024', '--splits',
         'train=0.5,test=0.5', '--max_examples_per_shard', '5',
         '--features', 'signal,spectrogram', '--n_fft', '256', '--quiet']
VARIANTS = {'fine': {'fft_hop': 64}, 'coarse': {'fft_hop': 256}}


def _cli(*args, cwd):
  return subprocess.run([sys.executable, '-m', 'pipeline.run', *args],
                        capture_output=True, text=True, cwd=cwd,
                        env=dict(os.environ, PYTHONPATH=ROOT), timeout=600)


def _files(folder, first, count):
  for i in range(first, first + count):
    H.write_wav(str(folder / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(2048 + 512 * (i % 3), seed=i))


@pytest.fixture()
def sweep(tmp_path):
  _files(tmp_path / 'in', 0, 6)
  (tmp_path / 'v.json').write_text(json.dumps(VARIANTS))
  args = ['--input_dir', str(tmp_path / 'in'), '--output_dir',
          str(tmp_path / 'out'), *FLAGS, '--variants', str(tmp_path / 'v.json')]
  proc = _cli(*args, cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  _files(tmp_path / 'in', 6, 4)  # the new day
  return tmp_path, args


def _seen(out):
  """{how it is read: the recordings it holds, sorted} for every way of
  reading each variant: by name from the sweep, and as its folder."""
  seen = {}
  for name in VARIANTS:
    for how, (folder, variant) in {
        f'{name} of the sweep': (str(out), name),
        f'{name} folder': (str(out / name), None)}.items():
      paths = set()
      for split in ('train', 'test'):
        paths |= {e['filepath'] for e in numpy_reader.numpy_dataset(
            folder, split, variant=variant, features=['filepath'])}
      seen[how] = sorted(paths)
  return seen


@pytest.mark.parametrize('step', H.SWEEP_APPEND_STEPS)
def test_a_kill_at_any_step_of_a_sweep_append_leaves_one_sweep(sweep, step):
  tmp_path, args = sweep
  out = tmp_path / 'out'
  before = _seen(out)
  assert len(set(map(tuple, before.values()))) == 1
  code, printed = H.DrivenRun(step, 'kill', *args, '--append',
                              cwd=tmp_path).wait()
  assert code == -signal.SIGKILL, (step, printed[-3000:])
  after = _seen(out)
  # Every variant, read either way, holds the same recordings: all the old
  # ones, or all the old and the new.
  assert len(set(map(tuple, after.values()))) == 1, after
  held = len(next(iter(after.values())))
  committed = step in ('renaming', 'second_renaming', 'listed')
  assert held == (10 if committed else 6), (step, held)
  verify.verify(str(out))  # raises on variants that differ
  inspected = subprocess.run(
      [sys.executable, '-m', 'pipeline.inspect_dataset', str(out)],
      capture_output=True, text=True, cwd=ROOT)
  assert inspected.returncode == 0, inspected.stderr[-2000:]
  # A rerun completes the append (or says there is nothing left to do).
  again = _cli(*args, '--append', cwd=tmp_path)
  assert again.returncode == 0, again.stderr[-3000:]
  final = _seen(out)
  assert len(set(map(tuple, final.values()))) == 1
  assert len(next(iter(final.values()))) == 10
  verify.verify(str(out))
  for name in VARIANTS:  # each variant folder, copied out, is whole too
    listed = json.loads((out / name / 'parts.json').read_text())['parts']
    assert listed == ['.', 'part-00001'], (name, listed)


@pytest.mark.parametrize('step', ['prepared', 'finalizing', 'sweep_listing'])
def test_a_stopped_sweep_is_not_read_and_overwrite_removes_what_it_made(
    tmp_path, step):
  _files(tmp_path / 'in', 0, 6)
  (tmp_path / 'v.json').write_text(json.dumps(VARIANTS))
  args = ['--input_dir', str(tmp_path / 'in'), '--output_dir',
          str(tmp_path / 'out'), *FLAGS]
  code, printed = H.DrivenRun(step, 'kill', *args, '--variants',
                              str(tmp_path / 'v.json'), cwd=tmp_path).wait()
  assert code == -signal.SIGKILL, printed[-3000:]
  assert {'fine', 'coarse'} <= set(os.listdir(tmp_path / 'out'))
  for name in VARIANTS:  # complete or not, no variant is read on its own
    with pytest.raises(DatasetError, match=(
        'of a sweep in .* that did not finish' if step == 'sweep_listing'
        else 'incomplete dataset|no wavbeam dataset')):
      numpy_reader.numpy_dataset(str(tmp_path / 'out' / name), 'train')
    with pytest.raises(DatasetError, match='holds no complete sweep'):
      numpy_reader.numpy_dataset(str(tmp_path / 'out'), 'train', variant=name)
  (tmp_path / 'other.json').write_text(json.dumps({'wide': {'n_fft': 512}}))
  refused = _cli(*args, '--variants', str(tmp_path / 'other.json'),
                 cwd=tmp_path)
  assert refused.returncode == 2, refused.stderr[-3000:]
  assert ('holds the variants of a sweep that did not finish (coarse, fine)'
          in refused.stderr)
  proc = _cli(*args, '--variants', str(tmp_path / 'other.json'),
              '--overwrite', cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert sorted(os.listdir(tmp_path / 'out')) == ['variants.json', 'wide']
  assert not os.path.exists(tmp_path / 'out' / 'wide' / '.wavbeam-lock')
  verify.verify(str(tmp_path / 'out'))
