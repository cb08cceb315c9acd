"""The PyTorch reader, with real torch: exactly once per epoch across
DataLoader workers and distributed ranks, bit-equal to numpy_reader, and
a tiny model trained for an epoch from it."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from pipeline.readers import augment
from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.readers.torch_dataset import WavbeamIterableDataset, collate
from tests import helpers as H
from tests.dask_cluster import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FEATURES = ['spectrogram', 'target', 'filepath', 'win_start_idx']


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
  d = tmp_path_factory.mktemp('torch')
  for i in range(12):
    H.write_wav(str(d / 'in' / ('owl', 'wren')[i % 2] / f'{i}.wav'),
                H.noise(4096 + 700 * i, seed=i))
  config = H.make_config(str(d / 'in'), str(d / 'out'), win_len=1024,
                         hop_len=1024, n_fft=256, fft_hop=128,
                         features=('signal', 'spectrogram'),
                         max_examples_per_shard=7)
  H.run_pipeline(config)
  return str(d / 'out')


def _key(example):
  return (str(example['filepath']), int(example['win_start_idx']))


def _reference(dataset):
  return {_key(e): e for e in numpy_reader.numpy_dataset(
      dataset, 'train', features=FEATURES)}


def _keys_of_batches(batches):
  keys = []
  for batch in batches:
    keys += zip(batch['filepath'], batch['win_start_idx'].tolist())
  return keys


@pytest.mark.parametrize('workers', [0, 2])
@pytest.mark.parametrize('collate_fn', [None, collate])
@pytest.mark.filterwarnings('error::UserWarning')  # e.g. read-only arrays
def test_every_example_once_per_epoch_bit_equal(dataset, workers,
                                                collate_fn):
  """Single examples batched by DataLoader: with its default_collate, and
  with wavbeam's collate (reused buffers; every batch is kept here)."""
  reference = _reference(dataset)
  data = WavbeamIterableDataset(dataset, 'train', features=FEATURES,
                                shuffle=True, seed=3)
  assert len(data) == len(reference) > 14  # more than two shards
  loader = torch.utils.data.DataLoader(
      data, batch_size=5, num_workers=workers, collate_fn=collate_fn,
      multiprocessing_context='spawn' if workers else None)
  orders = []
  for epoch in range(2):
    data.set_epoch(epoch)
    batches = list(loader)
    keys = _keys_of_batches(batches)
    assert sorted(keys) == sorted(reference)  # each exactly once
    orders.append(keys)
    for batch in batches:
      assert batch['spectrogram'].dtype == torch.float32
      for i, key in enumerate(zip(batch['filepath'],
                                  batch['win_start_idx'].tolist())):
        expected = reference[key]
        assert np.array_equal(batch['spectrogram'][i].numpy(),
                              expected['spectrogram'])
        assert int(batch['target'][i]) == int(expected['target'])
  assert orders[0] != orders[1]  # set_epoch gives a new order


def _contents(loader):
  """Each batch's examples and gained signals, copied out of the
  reused buffers."""
  return [(list(b['filepath']), b['win_start_idx'].tolist(),
           b['signal'].numpy().tobytes()) for b in loader]


@pytest.mark.parametrize('context', ['fork', 'spawn'])
def test_set_epoch_reaches_persistent_workers(dataset, context):
  """persistent_workers=True keeps the workers, with their copy of the
  dataset, from one epoch to the next: each epoch is still shuffled and
  augmented as by workers started for that epoch."""
  def reader():
    return WavbeamIterableDataset(
        dataset, 'train', features=['filepath', 'win_start_idx', 'signal'],
        shuffle=True, seed=0, batch_size=4,
        transform=augment.Gain(db=(-6, 6)))
  data = reader()
  persistent = torch.utils.data.DataLoader(
      data, batch_size=None, num_workers=2, persistent_workers=True,
      multiprocessing_context=context)
  epochs = []
  for epoch in range(3):
    data.set_epoch(epoch)
    got = _contents(persistent)
    fresh = reader()
    fresh.set_epoch(epoch)
    assert got == _contents(torch.utils.data.DataLoader(
        fresh, batch_size=None, num_workers=2,
        multiprocessing_context='fork'))
    epochs.append(got)
  assert epochs[0] != epochs[1] and epochs[1] != epochs[2]


@pytest.mark.parametrize('world_size', [2, 3, 40])
def test_ranks_split_the_records_evenly(dataset, world_size):
  """Any number of ranks, more than the shards too: disjoint parts that
  cover the split, lengths equal give or take one."""
  reference = _reference(dataset)
  seen, lengths = [], []
  for rank in range(world_size):
    data = WavbeamIterableDataset(dataset, 'train', features=FEATURES,
                                  rank=rank, world_size=world_size,
                                  shuffle=True, seed=1)
    keys = [_key(e) for e in data]
    assert len(keys) == len(data)
    seen += keys
    lengths.append(len(keys))
  assert sorted(seen) == sorted(reference)
  assert max(lengths) - min(lengths) <= 1
  with pytest.raises(ValueError, match='give both'):
    WavbeamIterableDataset(dataset, 'train', rank=1)


def _double_spectrogram(example):  # module level: spawned workers import it
  example['spectrogram'] = example['spectrogram'] * 2
  return example


@pytest.mark.parametrize('workers', [0, 3])
@pytest.mark.filterwarnings('ignore:This DataLoader will create 3 worker')
def test_batches_made_in_the_dataset(dataset, workers):
  """batch_size: whole batches cut across workers, only the last short;
  the tensors bit-equal to numpy_reader's arrays; transform applied to
  every example first."""
  reference = _reference(dataset)
  n = len(reference)
  data = WavbeamIterableDataset(dataset, 'train', features=FEATURES,
                                batch_size=4, transform=_double_spectrogram)
  assert len(data) == -(-n // 4)
  loader = torch.utils.data.DataLoader(
      data, batch_size=None, num_workers=workers,
      multiprocessing_context='spawn' if workers else None)
  batches = list(loader)
  assert len(batches) == len(data)
  assert sorted(len(b['target']) for b in batches)[1:] == [4] * (
      len(batches) - 1)
  assert sorted(_keys_of_batches(batches)) == sorted(reference)
  for batch in batches:
    assert batch['spectrogram'].dtype == torch.float32
    assert batch['target'].dtype == torch.int64
    for i, key in enumerate(zip(batch['filepath'],
                                batch['win_start_idx'].tolist())):
      assert np.array_equal(batch['spectrogram'][i].numpy(),
                            reference[key]['spectrogram'] * 2)
  dropped = WavbeamIterableDataset(dataset, 'train', features=FEATURES,
                                   batch_size=4, drop_last=True)
  assert len(dropped) == n // 4
  assert [len(b['target']) for b in dropped] == [4] * (n // 4)
  with pytest.raises(ValueError, match='batch_size=0'):
    WavbeamIterableDataset(dataset, 'train', batch_size=0)


@pytest.mark.parametrize('arguments, message', [
    ({'batch_size': 2.5}, 'batch_size=2.5: give a positive integer'),
    ({'batch_size': '4'}, "batch_size='4': give a positive integer"),
    ({'shuffle': True, 'shuffle_buffer_size': 0},
     'shuffle_buffer_size=0: give a positive integer'),
    ({'shuffle': True, 'seed': None}, 'seed=None: give an integer'),
    ({'shuffle': True, 'seed': -1}, 'seed=-1: give an integer'),
    ({'rank': '0', 'world_size': 2}, "rank='0', world_size=2: give both"),
    ({'rank': 2, 'world_size': 2}, 'rank=2, world_size=2: give both'),
    ({'dtype': 'bogus'}, "dtype='bogus': give a float dtype"),
    ({'dtype': torch.int16}, 'dtype=torch.int16: give a float dtype'),
    ({'num_buckets': 0}, 'num_buckets=0: give a positive integer'),
])
def test_bad_arguments_are_refused_when_built(dataset, arguments, message):
  """Not at the first batch, in a DataLoader's worker process."""
  with pytest.raises(ValueError, match=message):
    WavbeamIterableDataset(dataset, 'train', **arguments)


@pytest.mark.parametrize('workers', [0, 2])
@pytest.mark.parametrize('shuffle', [False, True])
def test_batches_read_a_chunk_at_a_time_are_the_examples_batched(
    dataset, workers, shuffle):
  """Without a transform, batches are filled from records read a chunk
  at a time (numpy_reader.chunked_records): the same batches, in the same
  order, as examples read one at a time and batched (an identity
  transform takes that way), in each worker and across ranks."""
  def load(transform):
    data = WavbeamIterableDataset(dataset, 'train', shuffle=shuffle, seed=5,
                                  shuffle_buffer_size=6, batch_size=3,
                                  transform=transform, rank=1, world_size=2)
    return list(torch.utils.data.DataLoader(
        data, batch_size=None, num_workers=workers,
        multiprocessing_context='spawn' if workers else None))
  chunked, one_by_one = load(None), load(_same)
  assert len(chunked) == len(one_by_one) > 3
  for a, b in zip(chunked, one_by_one):
    assert list(a) == list(b)
    for key, value in a.items():
      if isinstance(value, list):
        assert value == b[key]
      else:
        assert value.dtype == b[key].dtype
        assert value.numpy().tobytes() == b[key].numpy().tobytes()


def _same(example):
  return example


def test_torch_distributed_ranks_read_disjoint_parts(dataset, tmp_path):
  """Two real processes in a gloo process group: each rank's reader takes
  its rank from torch.distributed; together they read every example."""
  script = textwrap.dedent('''
      import sys, torch.distributed as dist
      from pipeline.readers.torch_dataset import WavbeamIterableDataset, collate
      rank, port, dataset, out = (int(sys.argv[1]), sys.argv[2],
                                  sys.argv[3], sys.argv[4])
      dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}',
                              rank=rank, world_size=2)
      data = WavbeamIterableDataset(dataset, 'train',
                                    features=['filepath', 'win_start_idx'])
      with open(out, 'w') as f:
        for e in data:
          f.write(f"{e['filepath']}|{int(e['win_start_idx'])}\\n")
        f.write(f'len {len(data)}\\n')
      dist.barrier()
      dist.destroy_process_group()
      ''')
  port = str(free_port())
  procs = [subprocess.Popen(
      [sys.executable, '-c', script, str(rank), port, dataset,
       str(tmp_path / f'rank{rank}.txt')], cwd=ROOT,
      stderr=subprocess.PIPE, text=True) for rank in range(2)]
  for proc in procs:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
  parts = []
  for rank in range(2):
    lines = (tmp_path / f'rank{rank}.txt').read_text().splitlines()
    assert lines[-1] == f'len {len(lines) - 1}'
    parts.append({tuple(line.rsplit('|', 1)) for line in lines[:-1]})
  expected = {(path, str(start)) for path, start in _reference(dataset)}
  assert not parts[0] & parts[1] and parts[0] | parts[1] == expected


def test_trains_a_tiny_model_for_an_epoch(dataset):
  torch.manual_seed(0)
  data = WavbeamIterableDataset(dataset, 'train',
                                features=['spectrogram', 'target'],
                                shuffle=True, seed=0)
  model = torch.nn.Linear(data_shape(dataset)[-1], 2)
  before = model.weight.detach().clone()
  optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
  seen, losses = 0, []
  for batch in torch.utils.data.DataLoader(data, batch_size=4):
    logits = model(torch.log1p(batch['spectrogram']).mean(dim=1))
    loss = torch.nn.functional.cross_entropy(logits, batch['target'])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    seen += len(batch['target'])
    losses.append(loss.item())
  assert seen == len(data)
  assert all(np.isfinite(losses))
  assert not torch.equal(before, model.weight)


def data_shape(dataset):
  return next(iter(numpy_reader.numpy_dataset(
      dataset, 'train', features=['spectrogram'])))['spectrogram'].shape


def test_no_tensorflow_and_no_beam(dataset):
  code = textwrap.dedent(f'''
      import sys
      class Blocked:
        def find_spec(self, name, path=None, target=None):
          if name.split('.')[0] in ('tensorflow', 'apache_beam'):
            raise ImportError('blocked: ' + name)
      sys.meta_path.insert(0, Blocked())
      from pipeline.readers.torch_dataset import WavbeamIterableDataset, collate
      print(sum(1 for _ in WavbeamIterableDataset({dataset!r})))
      ''')
  proc = subprocess.run([sys.executable, '-c', code], cwd=ROOT,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert int(proc.stdout) == len(_reference(dataset))


@pytest.mark.parametrize('epoch', [1.5, -1, 'a', True, 2**63])
def test_a_bad_epoch_is_refused_where_it_is_set(dataset, epoch):
  """Not in a DataLoader worker, where numpy would refuse the seed."""
  from pipeline.readers.torch_dataset import LengthGroupedBatchSampler
  data = WavbeamIterableDataset(dataset, 'train', shuffle=True)
  sampler = LengthGroupedBatchSampler([3, 1, 2], 2)
  for reader in (data, sampler):
    with pytest.raises(ValueError, match=f'epoch={epoch!r}: give an '
                       'integer of at least 0'):
      reader.set_epoch(epoch)
    reader.set_epoch(np.int64(2))
    assert reader.epoch == 2


@pytest.mark.parametrize('arguments, message', [
    ({'batch_size': 1.5}, 'batch_size=1.5: give a positive integer'),
    ({'batch_size': True}, 'batch_size=True: give a positive integer'),
    ({'batch_size': 2, 'group_batches': 0},
     'group_batches=0: give a positive integer'),
    ({'batch_size': 2, 'seed': -1}, 'seed=-1: give an integer'),
    ({'batch_size': 2, 'seed': False}, 'seed=False: give an integer'),
])
def test_length_grouped_sampler_refuses_bad_arguments(arguments, message):
  from pipeline.readers.torch_dataset import LengthGroupedBatchSampler
  with pytest.raises(ValueError, match=message):
    LengthGroupedBatchSampler([3, 1, 2], **arguments)


def test_length_grouped_batches_hold_every_index_once_with_less_spread():
  from pipeline.readers.torch_dataset import LengthGroupedBatchSampler
  rng = np.random.default_rng(0)
  lengths = rng.integers(16000, 240000, 203)
  sampler = LengthGroupedBatchSampler(lengths, 8, seed=3, group_batches=5)
  batches = list(sampler)
  assert len(batches) == len(sampler) == 26
  assert sorted(i for b in batches for i in b) == list(range(203))
  assert sum(len(b) < 8 for b in batches) == 1
  spread = np.mean([lengths[b].max() - lengths[b].min() for b in batches])
  shuffled = rng.permutation(203)
  random_spread = np.mean([np.ptp(lengths[shuffled[i:i + 8]])
                           for i in range(0, 203, 8)])
  assert spread < random_spread / 3
  sampler.set_epoch(1)
  assert list(sampler) != batches  # a new order each epoch
  assert list(LengthGroupedBatchSampler(lengths, 8, seed=3,
                                        group_batches=5)) == batches
  dropped = list(LengthGroupedBatchSampler(lengths, 8, drop_last=True))
  assert len(dropped) == 25 and all(len(b) == 8 for b in dropped)


def test_lengths_of_the_parts_read(tmp_path):
  """An appended dataset of recordings (variable lengths): lengths() has
  one length per example of the parts read, in index order, so a
  LengthGroupedBatchSampler over it indexes those examples only."""
  from pipeline.commands import run as run_lib
  from pipeline.readers.torch_dataset import (LengthGroupedBatchSampler,
                                              WavbeamMapDataset)

  def run(first, count, *extra):
    for i in range(first, first + count):
      H.write_wav(str(tmp_path / 'in' / 'owl' / f'{i}.wav'),
                  H.noise(3000 + 977 * i, seed=i))
    run_lib.run(['--input_dir', str(tmp_path / 'in'), '--output_dir',
                 str(tmp_path / 'out'), '--example_unit', 'file',
                 '--features', 'signal', '--splits', 'train=1.0',
                 '--array_record', '--runner=FnApiRunner', *extra])
  run(0, 4)
  run(4, 6, '--append')
  out = str(tmp_path / 'out')
  for parts, count in (([0], 4), (['part-00001'], 6), (None, 10)):
    data = WavbeamMapDataset(out, 'train', features=['signal'],
                             parts=parts)
    lengths = data.lengths()
    assert len(lengths) == len(data) == count
    assert lengths == [len(data[i]['signal']) for i in range(len(data))]
    sampler = LengthGroupedBatchSampler(lengths, 2, seed=0)
    batches = list(torch.utils.data.DataLoader(
        data, batch_sampler=sampler, collate_fn=data.collate))
    assert sorted(n for b in batches
                  for n in b['signal_length'].tolist()) == sorted(lengths)
