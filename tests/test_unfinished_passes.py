"""Readers left in the middle of a pass when the program ends (a loop left
early, an iterator kept in a global) end it quietly: Python would close
their generators after tearing down the modules they use, and print a
traceback for each; and replay_dataset's tf.data threads, reading ahead,
would hang the program's exit."""

import os
import subprocess
import sys

import pytest

from pipeline.readers import tf_dataset as replay
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each reader kind, its iterator kept in a global two elements in.
_LEFT_UNFINISHED = {
    'numpy_batches': '''
from pipeline.readers import numpy_dataset as numpy_reader
it = iter(numpy_reader.numpy_dataset(OUT, 'train', batch_size=2))
''',
    'numpy_batches_shuffled': '''
from pipeline.readers import numpy_dataset as numpy_reader
it = iter(numpy_reader.numpy_dataset(OUT, 'train', batch_size=2,
                                     shuffle=True, seed=1))
''',
    'numpy_examples': '''
from pipeline.readers import numpy_dataset as numpy_reader
it = iter(numpy_reader.numpy_dataset(OUT, 'train'))
''',
    'numpy_variable_length_batches': '''
from pipeline.readers import numpy_dataset as numpy_reader
it = iter(numpy_reader.numpy_dataset(FILES, 'train', batch_size=2))
''',
    'replay_numpy_engine': '''
from pipeline.readers import tf_dataset as replay
ds = replay.replay_dataset(OUT, 'train', batch_size=2)
it = iter(ds)
''',
    'torch_batches': '''
import torch
from pipeline.readers.torch_dataset import WavbeamIterableDataset
it = iter(torch.utils.data.DataLoader(
    WavbeamIterableDataset(OUT, 'train', batch_size=2), batch_size=None))
''',
    'torch_examples': '''
import torch
from pipeline.readers.torch_dataset import WavbeamIterableDataset
it = iter(torch.utils.data.DataLoader(
    WavbeamIterableDataset(OUT, 'train'), batch_size=None))
''',
    'torch_transformed_batches': '''
import torch
from pipeline.readers.torch_dataset import WavbeamIterableDataset
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
  # As in a training script, a framework imported first: with its many
  # modules, Python tears numpy_reader's down before it closes the pass.
  # Chunks of 2 records: the pass stops inside a shard's chunks, as it
  # does on shards of more records than a chunk holds.
  script = (f'OUT, FILES = {out!r}, {files!r}\n'
            'import torch\n'
            'from pipeline import numpy_reader\n'
            'numpy_reader._CHUNK_RECORDS = 2\n' + _LEFT_UNFINISHED[reader] +
            'next(it), next(it)\nprint("read")\n')
  proc = _python(script)
  assert proc.stdout.split() == ['read']
  assert 'Traceback' not in proc.stderr, proc.stderr[-3000:]
  assert 'Exception ignored' not in proc.stderr, proc.stderr[-3000:]


def _python(script: str, *args: str) -> subprocess.CompletedProcess:
  """`script` run by a Python of its own, which must end well."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  try:
    proc = subprocess.run([sys.executable, '-c', script, *args],
                          capture_output=True, text=True, cwd=ROOT, env=env,
                          check=False, timeout=120)
  except subprocess.TimeoutExpired:
    pytest.fail('the program hung as it exited')
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


# A batch being read ahead (prefetch) as the program exits: its reading
# lasts until Python finalizes, or a second.
_READ_AHEAD_AT_EXIT = """
import sys, time
from pipeline.readers import tf_dataset as replay
read = replay._Passes.batch_at
calls = []
def slowly(self, token, index):
  calls.append(index)
  if len(calls) > 2:
    until = time.monotonic() + 1
    while time.monotonic() < until and not sys.is_finalizing():
      time.sleep(0.001)
  return read(self, token, index)
replay._Passes.batch_at = slowly
it = iter(replay.replay_dataset(sys.argv[1], 'train', batch_size=2))
next(it), next(it)
print('read')
"""


def test_a_replay_pass_reading_ahead_lets_the_program_exit(datasets):
  """A tf.data thread that asks for the GIL once Python finalizes is ended
  on the spot, and the iterator it was filling waits for it for ever as
  Python destroys it: the numpy engine's calls stop before that."""
  out, _ = datasets
  proc = _python(_READ_AHEAD_AT_EXIT, out)
  assert proc.stdout.split() == ['read']
  assert 'Traceback' not in proc.stderr, proc.stderr[-3000:]


def test_once_stopped_the_numpy_engine_reads_nothing_more(datasets):
  """What the exit does first: from then on every batch fails at once,
  without reading (tf.data's buffers fill, and its threads go idle)."""
  out, _ = datasets
  script = ('import sys\nfrom pipeline import replay\n'
            "ds = replay.replay_dataset(sys.argv[1], 'train', batch_size=2)\n"
            'print(sum(1 for _ in ds))\nreplay._CALLS.stop()\n'
            'try:\n  print(sum(1 for _ in ds))\n'
            'except Exception as e:\n  print(type(e).__name__)\n')
  proc = _python(script, out)
  batches = len(replay.replay_dataset(out, 'train', batch_size=2))
  assert proc.stdout.split() == [str(batches), 'InvalidArgumentError']
