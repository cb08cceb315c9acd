"""examples/sweep_keras.py trains on every variant of a sweep and ranks
them; examples/train_keras.py chooses the split it evaluates on;
examples/train_torch.py trains the same model in PyTorch."""

import functools
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from pipeline.commands import example_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWEEP = '''
[nfft256]
n_fft = 256
fft_hop = 128

[nfft512]
n_fft = 512
fft_hop = 256
'''
# One ranked line: name, differing options, input, accuracy, loss.
LINE = re.compile(r'^  (\S+) {2,}(.*?) {2,}(\w+) \[([\d, ]+)\] +'
                  r'accuracy (\S+)  loss (\S+)$')


def _python(*args):
  return subprocess.run([sys.executable, *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=600)


@pytest.fixture(scope='module')
def sweep(tmp_path_factory):
  d = tmp_path_factory.mktemp('sweep_example')
  # The demo's four classes, in 1 to 1.5 s files cut in quarter seconds:
  # enough windows for every class to reach both splits.
  example_corpus.write_corpus(str(d / 'in'), 24, min_seconds=1,
                              max_seconds=1.5)
  (d / 'sweep.toml').write_text(SWEEP)
  proc = _python('-m', 'pipeline.run', '--input_dir', str(d / 'in'),
                 '--output_dir', str(d / 'out'), '--win_len', '4000',
                 '--splits', 'train=0.7,validation=0.3', '--variants',
                 str(d / 'sweep.toml'), '--quiet')
  assert proc.returncode == 0, proc.stderr[-3000:]
  return d / 'out'


def test_sweep_example_ranks_every_variant_by_accuracy(sweep):
  proc = _python('examples/sweep_keras.py', '--sweep', str(sweep),
                 '--epochs', '1', '--batch_size', '16')
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = proc.stdout.splitlines()
  assert lines[0].startswith('validation accuracy per variant, best first')
  rows = [LINE.match(line) for line in lines[1:]]
  assert all(rows), proc.stdout
  index = json.loads((sweep / 'variants.json').read_text())
  assert sorted(r[1] for r in rows) == sorted(index['variants'])
  accuracies = [float(r[5]) for r in rows]
  assert all(0 <= a <= 1 for a in accuracies), accuracies
  assert accuracies == sorted(accuracies, reverse=True), proc.stdout
  for row in rows:
    differs = index['variants'][row[1]]['differs']
    assert row[2] == ', '.join(f'{k}={v}' for k, v in sorted(
        differs.items())), row[0]
    meta = json.loads((sweep / row[1] / 'metadata.json').read_text())
    assert row[3] == meta['input_key']
    assert [int(n) for n in row[4].split(',')] == (
        meta['schema'][meta['input_key']]['shape'])
    assert float(row[6]) >= 0


def test_sweep_example_refuses_a_folder_that_is_not_a_sweep(sweep):
  proc = _python('examples/sweep_keras.py', '--sweep', str(sweep / 'nfft256'))
  assert proc.returncode == 2
  assert 'holds no variants.json' in proc.stderr


@functools.cache
def _train_keras():
  spec = importlib.util.spec_from_file_location(
      'train_keras', os.path.join(ROOT, 'examples', 'train_keras.py'))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _metadata(**sizes):
  return {'splits': {name: {'num_examples': n, 'shards': []}
                     for name, n in sizes.items()}}


@pytest.mark.parametrize('sizes, chosen', [
    ({'train': 8, 'test': 2, 'validation': 2}, 'validation'),
    ({'train': 8, 'validation': 0, 'test': 2}, 'test'),
    ({'train': 8, 'dev': 1, 'test': 2}, 'dev'),
    ({'train': 8, 'holdout': 2}, 'holdout'),
])
def test_evaluation_split_prefers_validation_then_another_split(sizes,
                                                                 chosen):
  assert _train_keras().evaluation_split(_metadata(**sizes)) == chosen


@pytest.mark.parametrize('sizes, said', [
    ({'train': 8}, "no split besides 'train'"),
    ({'train': 8, 'validation': 0}, "no split besides 'train'"),
    ({'validation': 2}, "no examples in a 'train' split"),
])
def test_evaluation_split_names_what_is_missing(sizes, said):
  train_keras = _train_keras()
  with pytest.raises(train_keras.NoSplit, match=said):
    train_keras.evaluation_split(_metadata(**sizes), 'OUT/v')


def test_the_torch_example_learns_the_classes(sweep):
  spec = importlib.util.spec_from_file_location(
      'train_torch', os.path.join(ROOT, 'examples', 'train_torch.py'))
  train_torch = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(train_torch)
  accuracy = train_torch.train_and_evaluate(str(sweep), 20, 16,
                                            variant='nfft256')
  # Four classes: chance is 0.25.
  assert accuracy > 0.5, accuracy


def test_the_keras_example_trains_on_recordings_of_their_own_length(
    tmp_path):
  """--example_unit file: each example its own number of frames (the
  schema's -1), a batch padded to its longest."""
  from tests import helpers as H
  for i in range(8):
    H.write_wav(str(tmp_path / 'in' / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(3000 + 700 * i, seed=i))
  proc = _python('-m', 'pipeline.run', '--input_dir', str(tmp_path / 'in'),
                 '--output_dir', str(tmp_path / 'out'), '--example_unit',
                 'file', '--features', 'signal,spectrogram', '--splits',
                 'train=0.5,validation=0.5', '--quiet')
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = _train_keras().train_and_evaluate(str(tmp_path / 'out'), 1, 4,
                                             verbose=0)
  assert result.shape == [-1, 257] and 0 <= result.accuracy <= 1
