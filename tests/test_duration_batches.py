"""max_duration= batches: bucketed by length, straight from the TFRecord
shards, in numpy_dataset and the PyTorch iterable dataset. Every example
once per epoch across ranks and workers, each batch within its seconds
(padding included, as Lhotse counts them), a new composition each epoch
from the seed, and bucket edges as Lhotse estimates them."""

import collections
import csv

import numpy as np
import pytest

from pipeline.commands import run as run_lib
from pipeline.contract.errors import DatasetError
from pipeline.readers import augment
from pipeline.readers import duration_batches
from pipeline.readers import numpy_dataset as numpy_reader
from tests import helpers as H

RATE = 8000
MAX_DURATION = 12.0


def test_every_item_once_and_every_batch_within_its_seconds():
  rng = np.random.default_rng(0)
  durations = rng.uniform(0.2, 9.0, 3000)
  durations[7] = 20.0  # longer than a batch: a batch of its own
  got = list(duration_batches.batches(
      ((d, i) for i, d in enumerate(durations)), MAX_DURATION,
      num_buckets=8, edges_estimate=500))
  assert sorted(i for b in got for i in b) == list(range(3000))
  for batch in got:
    assert (len(batch) * durations[batch].max() <= MAX_DURATION or
            len(batch) == 1)
    assert batch == sorted(batch)  # stream order within a batch
  assert [7] in got


def test_bucket_edges_are_lhotses():
  from lhotse.dataset.sampling.dynamic_bucketing import (
      estimate_duration_buckets)
  from lhotse.testing.dummies import dummy_cut
  rng = np.random.default_rng(1)
  durations = rng.uniform(0.5, 15.0, 1000)
  cuts = [dummy_cut(i, duration=float(d)) for i, d in enumerate(durations)]
  for n in (2, 5, 10, 30):
    assert duration_batches.bucket_edges(durations, n) == pytest.approx(
        estimate_duration_buckets(cuts, n), abs=0)


def test_fewer_lengths_than_buckets_make_fewer_buckets():
  assert duration_batches.bucket_edges([1.0] * 50, 10) == []
  assert duration_batches.bucket_edges([], 10) == []
  assert list(duration_batches.batches([], 5.0)) == []


@pytest.mark.parametrize('value', [0, -1.0, float('nan'), '5', True,
                                   np.float32(-2)])
def test_max_duration_must_be_seconds(value):
  with pytest.raises(ValueError, match='max_duration='):
    duration_batches.check_options(value, 10)


@pytest.fixture(scope='module')
def utterances(tmp_path_factory):
  """300 segments of 0.3-6 s of a 20-minute recording, as
  --example_unit segment examples of their signal."""
  d = tmp_path_factory.mktemp('utterances')
  rng = np.random.default_rng(5)
  H.write_wav(str(d / 'in' / 'long.wav'), H.noise(RATE * 1200, seed=2),
              rate=RATE)
  with open(d / 'segments.csv', 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['path', 'start', 'end'])
    for i in range(300):
      start = round(i * 3.9, 3)
      writer.writerow(['long.wav', start,
                       round(start + rng.uniform(0.3, 6.0), 3)])
  run_lib.run(['--input_dir', str(d / 'in'), '--output_dir', str(d / 'out'),
               '--manifest', str(d / 'segments.csv'),
               '--manifest_start_column', 'start',
               '--manifest_end_column', 'end', '--label_from', 'none',
               '--example_unit', 'segment', '--features', 'signal',
               '--max_examples_per_shard', '40', '--runner=FnApiRunner'])
  lengths = {int(e['win_start_idx']): int(e['num_samples'])
             for e in numpy_reader.numpy_dataset(str(d / 'out'))}
  assert len(lengths) == 300
  return d / 'out', lengths


def _check_epoch(batches, lengths):
  """The batches' examples by start, each once; every batch within
  MAX_DURATION; the composition, as sets of starts."""
  seen = collections.Counter()
  composition = set()
  for batch in batches:
    starts = [int(s) for s in batch['win_start_idx']]
    seen.update(starts)
    composition.add(frozenset(starts))
    longest = max(lengths[s] for s in starts)
    assert (len(starts) * longest <= MAX_DURATION * RATE or
            len(starts) == 1)
    assert 'num_samples' not in batch  # read for batching, not asked for
    assert [int(n) for n in batch['signal_length']] == [
        lengths[s] for s in starts]
    assert batch['signal'].shape[1] == longest
  assert seen == {s: 1 for s in lengths}
  return composition


@pytest.mark.slow
def test_numpy_batches_by_duration(utterances):
  out, lengths = utterances
  data = numpy_reader.numpy_dataset(
      str(out), features=['signal', 'win_start_idx'],
      max_duration=MAX_DURATION, shuffle=True, seed=3)
  first = _check_epoch(data, lengths)
  second = _check_epoch(data, lengths)
  assert first != second  # a new composition each epoch
  again = numpy_reader.numpy_dataset(
      str(out), features=['signal', 'win_start_idx'],
      max_duration=MAX_DURATION, shuffle=True, seed=3)
  assert _check_epoch(again, lengths) == first  # from the seed
  # The padded samples are real samples, the rest zeros.
  full = {int(e['win_start_idx']): e['signal']
          for e in numpy_reader.numpy_dataset(str(out))}
  for batch in numpy_reader.numpy_dataset(
      str(out), max_duration=MAX_DURATION):
    for row, start, n in zip(batch['signal'], batch['win_start_idx'],
                             batch['signal_length']):
      assert np.array_equal(row[:n], full[int(start)])
      assert not row[n:].any()


@pytest.mark.slow
def test_bucketing_pads_less_than_batches_by_count(utterances):
  out, lengths = utterances

  def padding(batches):
    real = padded = 0
    for batch in batches:
      n = batch['signal_length']
      real += int(n.sum())
      padded += int(n.max()) * len(n)
    return 1 - real / padded
  bucketed = padding(numpy_reader.numpy_dataset(
      str(out), max_duration=MAX_DURATION, shuffle=True, seed=0))
  counted = padding(numpy_reader.numpy_dataset(
      str(out), batch_size=4, shuffle=True, seed=0))
  assert bucketed < counted / 2


@pytest.mark.slow
def test_one_of_batch_size_and_max_duration(utterances):
  out, _ = utterances
  with pytest.raises(DatasetError, match='give one of them'):
    numpy_reader.numpy_dataset(str(out), batch_size=4, max_duration=5.0)
  with pytest.raises(DatasetError, match='max_duration=0'):
    numpy_reader.numpy_dataset(str(out), max_duration=0)
  with pytest.raises(TypeError, match='max_duration'):
    len(numpy_reader.numpy_dataset(str(out), max_duration=5.0))


@pytest.mark.slow
def test_spawned_workers_get_the_same_batches(utterances):
  """The dataset pickles into spawned DataLoader workers (macOS's and
  Windows' default) and gives the batches forked ones give."""
  torch = pytest.importorskip('torch')
  from pipeline.readers.torch_dataset import WavbeamIterableDataset
  out, lengths = utterances
  found = {}
  for context in ('fork', 'spawn'):
    data = WavbeamIterableDataset(str(out), features=['signal',
                                                      'win_start_idx'],
                                  shuffle=True, seed=1,
                                  max_duration=np.float32(MAX_DURATION))
    assert data.features == ('signal', 'win_start_idx')
    loader = torch.utils.data.DataLoader(
        data, batch_size=None, num_workers=2,
        multiprocessing_context=context)
    batches = [{k: v.numpy() for k, v in b.items()} for b in loader]
    found[context] = _check_epoch(batches, lengths)
  assert found['fork'] == found['spawn']
  with pytest.raises(ValueError, match='drop_last=True'):
    WavbeamIterableDataset(str(out), max_duration=5.0, drop_last=True)
  with pytest.raises(DatasetError, match='drop_remainder=True'):
    numpy_reader.numpy_dataset(str(out), max_duration=5.0,
                               drop_remainder=True)


@pytest.mark.slow
def test_windows_make_batches_of_a_fixed_count(tmp_path):
  """Windows all last win_len: max_duration / their seconds of them."""
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(RATE * 10),
              rate=RATE)
  run_lib.run(['--input_dir', str(tmp_path / 'in'), '--output_dir',
               str(tmp_path / 'out'), '--win_len', '4000', '--features',
               'signal', '--runner=FnApiRunner'])
  sizes = [len(b['signal']) for b in numpy_reader.numpy_dataset(
      str(tmp_path / 'out'), max_duration=2.0)]
  assert sizes == [4] * 5  # 20 windows of 0.5 s


def test_max_duration_in_whole_samples():
  """0.3 s at 8 kHz is 2400 samples, though 0.3 * 8000 and 3 * 0.1 are
  not exact in floats."""
  assert duration_batches.samples_within(0.3, 8000) == 2400
  assert duration_batches.samples_within(0.6, 8000) == 4800
  assert duration_batches.samples_within(np.float32(0.3), 8000) == 2400
  assert duration_batches.samples_within(0.29999, 8000) == 2399
  assert duration_batches.samples_within(7, 16000) == 112000
  assert duration_batches.samples_within(0.1, 44100) == 4410
  assert [len(b) for b in duration_batches.batches(
      ((800, i) for i in range(7)), 2400)] == [3, 3, 1]
  with pytest.raises(ValueError, match='max_duration=inf'):
    duration_batches.check_options(float('inf'), 10)


@pytest.mark.slow
def test_windows_that_fill_max_duration_exactly(tmp_path):
  """Windows of 800 samples at 8 kHz (0.1 s): 3 in 0.3 s, 6 in 0.6 s,
  counted in samples, where 3 * 0.1 > 0.3 in floats."""
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(RATE),
              rate=RATE)
  run_lib.run(['--input_dir', str(tmp_path / 'in'), '--output_dir',
               str(tmp_path / 'out'), '--win_len', '800', '--features',
               'signal', '--runner=FnApiRunner'])
  out = str(tmp_path / 'out')
  assert len(numpy_reader.numpy_dataset(out)) == 10
  for seconds, sizes in ((0.3, [3, 3, 3, 1]), (0.6, [6, 4]),
                         (0.29, [2] * 5)):
    assert [len(b['signal']) for b in numpy_reader.numpy_dataset(
        out, max_duration=seconds)] == sizes


@pytest.mark.slow
@pytest.mark.parametrize('world_size,workers', [(1, 2), (2, 2), (3, 1)])
def test_torch_every_example_once_across_ranks_and_workers(
    utterances, world_size, workers):
  torch = pytest.importorskip('torch')
  from pipeline.readers.torch_dataset import WavbeamIterableDataset
  out, lengths = utterances
  compositions = []
  for epoch in (0, 1):
    batches = []
    for rank in range(world_size):
      data = WavbeamIterableDataset(
          str(out), features=['signal', 'win_start_idx'], shuffle=True,
          seed=7, max_duration=MAX_DURATION, rank=rank,
          world_size=world_size)
      data.set_epoch(epoch)
      loader = torch.utils.data.DataLoader(data, batch_size=None,
                                           num_workers=workers)
      batches += [{k: (v.numpy() if hasattr(v, 'numpy') else v)
                   for k, v in b.items()} for b in loader]
    compositions.append(_check_epoch(batches, lengths))
  assert compositions[0] != compositions[1]


@pytest.mark.slow
def test_torch_transform_sees_each_example_before_batching(utterances):
  pytest.importorskip('torch')
  from pipeline.readers.torch_dataset import WavbeamIterableDataset
  out, lengths = utterances
  seen = []

  def halve(e):
    seen.append(sorted(e))
    return {**e, 'signal': e['signal'] // 2}
  data = WavbeamIterableDataset(str(out), features=['signal',
                                                    'win_start_idx'],
                                max_duration=MAX_DURATION, transform=halve)
  full = {int(e['win_start_idx']): e['signal']
          for e in numpy_reader.numpy_dataset(str(out))}
  for batch in data:
    for row, start, n in zip(batch['signal'].numpy(),
                             batch['win_start_idx'].numpy(),
                             batch['signal_length'].numpy()):
      assert np.array_equal(row[:n], full[int(start)] // 2)
  assert len(seen) == 300
  assert seen[0] == ['signal', 'win_start_idx']


class _CountedGain:
  """augment.Gain, noting the start of each example it is called on."""

  def __init__(self):
    self.gain, self.calls = augment.Gain(db=(-6, 6), seed=1), []

  def start_epoch(self, epoch, rank=0, worker=0):
    self.gain.start_epoch(epoch, rank, worker)

  def __call__(self, example):
    self.calls.append(int(example['win_start_idx']))
    return self.gain(example)


@pytest.mark.slow
def test_torch_transform_runs_as_each_batch_is_made(utterances):
  """The bucket edges come from a look-ahead over the first examples of
  the stream (here all 300): they wait there as read, and are transformed
  only as their batch is made. The batches and their gains are the same
  for the same epoch, and other ones the next."""
  pytest.importorskip('torch')
  from pipeline.readers.torch_dataset import WavbeamIterableDataset
  out, lengths = utterances
  full = {int(e['win_start_idx']): augment.as_float(e['signal'])
          for e in numpy_reader.numpy_dataset(str(out))}
  transform = _CountedGain()
  data = WavbeamIterableDataset(str(out), features=['signal',
                                                    'win_start_idx'],
                                shuffle=True, seed=4,
                                max_duration=MAX_DURATION,
                                transform=transform)

  def epoch(n):
    data.set_epoch(n)
    transform.calls.clear()
    batches = iter(data)
    first = next(batches)
    assert transform.calls == first['win_start_idx'].tolist()
    found = []
    for batch in [first, *batches]:
      for row, start, n in zip(batch['signal'].numpy(),
                               batch['win_start_idx'].tolist(),
                               batch['signal_length'].tolist()):
        # This example's signal, gained: one factor for all its samples.
        factor = row[:n] @ full[start] / (full[start] @ full[start])
        np.testing.assert_allclose(row[:n], factor * full[start],
                                   rtol=1e-5, atol=1e-6)
        assert not row[n:].any()
        found.append((start, round(float(factor), 6)))
    assert sorted(transform.calls) == sorted(lengths)
    return found
  first = epoch(0)
  assert epoch(0) == first
  assert epoch(1) != first


@pytest.mark.slow
def test_durations_from_stft_frames_without_the_signal(tmp_path):
  """A dataset of log-mel frames alone: a segment's seconds are the
  audio its frames span, ((frames - 1) * hop + n_fft) / rate."""
  rng = np.random.default_rng(9)
  H.write_wav(str(tmp_path / 'in' / 'long.wav'), H.noise(RATE * 200),
              rate=RATE)
  rows = ['path,start,end']
  for i in range(40):
    start = i * 4.5
    rows.append(f'long.wav,{start},{round(start + rng.uniform(0.5, 4), 3)}')
  (tmp_path / 'segments.csv').write_text('\n'.join(rows) + '\n')
  run_lib.run(['--input_dir', str(tmp_path / 'in'), '--output_dir',
               str(tmp_path / 'out'), '--manifest',
               str(tmp_path / 'segments.csv'), '--manifest_start_column',
               'start', '--manifest_end_column', 'end', '--label_from',
               'none', '--example_unit', 'segment', '--features', 'log_mel',
               '--n_fft', '400', '--fft_hop', '160', '--runner=FnApiRunner'])
  count = 0
  for batch in numpy_reader.numpy_dataset(str(tmp_path / 'out'),
                                          features=['log_mel'],
                                          max_duration=6.0):
    frames = batch['log_mel_length']
    samples = (int(frames.max()) - 1) * 160 + 400
    assert len(frames) * samples <= 6 * RATE or len(frames) == 1
    assert 'num_frames' not in batch
    count += len(frames)
  assert count == 40
