"""Readers left in the middle of a pass when the program ends (a loop left
early, an iterator kept in a global) end it quietly: Python would close
their generators after tearing down the modules they use, and print a
traceback for each."""

import os
import subprocess
import sys

import pytest

from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each reader kind, its iterator kept in a global two elements in.
_LEFT_UNFINISHED = {
    'numpy_batches': '''
from pipeline import numpy_reader
it = iter(numpy_reader.numpy_dataset(OUT, 'train', batch_size=2))
''',
    'numpy_batches_shuffled': '''
from pipeline import numpy_reader
it = iter(numpy_reader.numpy_dataset(OUT, 'train', batch_size=2,
                                     shuffle=True, seed=1))
''',
    'numpy_examples': '''
from pipeline import numpy_reader
it = iter(numpy_reader.numpy_dataset(OUT, 'train'))
''',
    'numpy_variable_length_batches': '''
from pipeline import numpy_reader
it = iter(numpy_reader.numpy_dataset(FILES, 'train', batch_size=2))
''',
    'replay_numpy_engine': '''
from pipeline import replay
ds = replay.replay_dataset(OUT, 'train', batch_size=2)
it = iter(ds)
''',
    'torch_batches': '''
import torch
from pipeline.torch_dataset import WavbeamIterableDataset
it = iter(torch.utils.data.DataLoader(
    WavbeamIterableDataset(OUT, 'train', batch_size=2), batch_size=None))
''',
    'torch_examples': '''
import torch
from pipeline.torch_dataset import WavbeamIterableDataset
it = iter(torch.utils.data.DataLoader(
    WavbeamIterableDataset(OUT, 'train'), batch_size=None))
''',
    'torch_transformed_batches': '''
import torch
from pipeline.torch_dataset import WavbeamIterableDataset
it = iter(torch.utils.data.DataLoader(
    WavbeamIterableDataset(OUT, 'train', batch_size=2, transform=dict),
    batch_size=None))
''',
}


@pytest.fixture(scope='module')
def datasets(tmp_path_factory):
  d = tmp_path_factory.mktemp('unfinished')
  for i in range(6):
    H.write_wav(str(d / 'in' / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(3000 + 700 * i, seed=i))
  out, files = str(d / 'windows'), str(d / 'files')
  H.run_pipeline(H.make_config(str(d / 'in'), out, win_len=512, n_fft=128,
                               fft_hop=64, max_examples_per_shard=5))
  H.run_pipeline(H.make_config(str(d / 'in'), files, example_unit='file',
                               n_fft=128, fft_hop=64,
                               max_examples_per_shard=4))
  return out, files


@pytest.mark.parametrize('reader', sorted(_LEFT_UNFINISHED))
def test_a_pass_left_unfinished_ends_quietly_with_the_program(datasets,
                                                              reader):
  out, files = datasets
  script = (f'OUT, FILES = {out!r}, {files!r}\n' + _LEFT_UNFINISHED[reader] +
            'next(it), next(it)\nprint("read")\n')
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  proc = subprocess.run([sys.executable, '-c', script], capture_output=True,
                        text=True, cwd=ROOT, env=env, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.split() == ['read']
  assert 'Traceback' not in proc.stderr, proc.stderr[-3000:]
  assert 'Exception ignored' not in proc.stderr, proc.stderr[-3000:]
