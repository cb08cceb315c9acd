"""Batches filled into reused buffers (pipeline.batching): a kept batch is
never overwritten, a dropped one's buffer is reused, the idle ones stay
few, and examples that do not stack are named."""

import gc

import numpy as np
import pytest

from pipeline.readers import batching


def examples(n, start=0):
  """Examples of every kind a reader yields: int64 scalar, string, float32
  and int32 arrays; the values tell the example's number."""
  for i in range(start, start + n):
    yield {'index': np.int64(i), 'name': f'clip{i}',
           'spectrogram': np.full((3, 5), i, np.float32),
           'signal': np.arange(7, dtype=np.int32) + i}


def check(batch, first, count, to_numpy=np.asarray):
  assert list(batch) == ['index', 'name', 'spectrogram', 'signal']
  assert to_numpy(batch['index']).tolist() == list(range(first,
                                                         first + count))
  assert batch['name'] == [f'clip{i}' for i in range(first, first + count)]
  spectrogram, signal = (to_numpy(batch['spectrogram']),
                         to_numpy(batch['signal']))
  assert spectrogram.dtype == np.float32 and signal.dtype == np.int32
  assert spectrogram.shape == (count, 3, 5)
  for row, i in enumerate(range(first, first + count)):
    assert np.array_equal(spectrogram[row], np.full((3, 5), i, np.float32))
    assert np.array_equal(signal[row], np.arange(7, dtype=np.int32) + i)


def test_a_dropped_batch_gives_its_buffer_back():
  buffers = batching.BatchBuffers()
  first = 0
  for arrays in buffers.batches(examples(100), 4, False):
    check(arrays, first, 4)
    first += 4
    del arrays  # zip's or enumerate's tuple would hold it a batch longer
  assert len(buffers) == buffers.idle() == 1


def test_the_lease_follows_the_last_view():
  buffers = batching.BatchBuffers()
  arrays = next(buffers.batches(examples(4), 4, False))
  spectrogram = arrays['spectrogram'][1:]
  del arrays
  gc.collect()
  assert buffers.idle() == 0
  row = spectrogram[0].reshape(-1)  # a view of a view
  del spectrogram
  gc.collect()
  assert buffers.idle() == 0 and row[0] == 1
  del row
  gc.collect()
  assert buffers.idle() == 1


def test_a_kept_batch_is_never_overwritten():
  buffers = batching.BatchBuffers()
  kept = []
  for first, arrays in zip(range(0, 40, 4),
                           buffers.batches(examples(40), 4, False)):
    if first % 8 == 0:
      arrays['spectrogram'] += 1000  # the training loop's own in-place work
      kept.append((first, arrays))
  assert len(buffers) == len(kept) + 1 == 6
  for first, arrays in kept:
    assert arrays['index'].tolist() == list(range(first, first + 4))
    assert float(arrays['spectrogram'][3, 0, 0]) == first + 3 + 1000


def test_idle_buffers_beyond_a_few_are_given_up():
  buffers = batching.BatchBuffers()
  held = list(buffers.batches(examples(40), 4, False))
  assert len(buffers) == 10
  del held
  gc.collect()
  check(next(buffers.batches(examples(4), 4, False)), 0, 4)
  assert len(buffers) == batching.MAX_IDLE + 1


def test_a_short_last_batch_drop_last_and_an_early_stop():
  buffers = batching.BatchBuffers()
  batches = list(buffers.batches(examples(10), 4, False))
  assert [len(b['name']) for b in batches] == [4, 4, 2]
  check(batches[2], 8, 2)
  del batches
  assert len(list(buffers.batches(examples(10), 4, True))) == 2
  stopped = buffers.batches(examples(10), 4, False)
  next(stopped)  # the second batch is half filled when the loop stops
  stopped.close()
  gc.collect()
  assert buffers.idle() == len(buffers)


@pytest.mark.parametrize('change, message', [
    ({'spectrogram': np.zeros((3, 6), np.float32)},
     r"feature 'spectrogram': float32\[3, 6\] in an example, "
     r'float32\[3, 5\]'),
    ({'signal': np.zeros(7, np.int64)}, r"feature 'signal': int64\[7\]"),
    ({'extra': np.zeros(1)}, 'an example has the features'),
])
def test_examples_that_do_not_stack_are_named(change, message):
  some = list(examples(3))
  some[2] = {**some[2], **change}
  buffers = batching.BatchBuffers()
  with pytest.raises(ValueError, match=message):
    list(buffers.batches(iter(some), 4, False))
  assert buffers.idle() == len(buffers)  # the failed batch's buffer is free


def test_variable_length_arrays_are_padded_with_zeros_and_given_lengths():
  buffers = batching.BatchBuffers()
  lengths = [3, 7, 1, 5, 2]
  found = [{'index': np.int64(i),
            'signal': np.arange(n, dtype=np.int16) + 1,
            'log_mel': np.full((n, 2), i + 1, np.float32)}
           for i, n in enumerate(lengths)]
  batches = list(buffers.batches(iter(found), 2, False,
                                 variable=('signal', 'log_mel')))
  assert [len(b['index']) for b in batches] == [2, 2, 1]
  for batch, chunk in zip(batches, (lengths[0:2], lengths[2:4], lengths[4:])):
    assert list(batch) == ['index', 'signal', 'log_mel', 'signal_length',
                           'log_mel_length']
    assert batch['signal_length'].tolist() == chunk
    assert batch['signal_length'].dtype == np.int64
    assert batch['signal'].shape == (len(chunk), max(chunk))
    assert batch['log_mel'].shape == (len(chunk), max(chunk), 2)
    for row, n in enumerate(chunk):
      assert batch['signal'][row, :n].tolist() == list(range(1, n + 1))
      assert not batch['signal'][row, n:].any()
      assert not batch['log_mel'][row, n:].any()
      assert batch['log_mel'][row, :n].min() > 0
  dropped = list(buffers.batches(iter(found), 2, True, variable=('signal',
                                                                 'log_mel')))
  assert len(dropped) == 2
  wrong = dict(found[1], log_mel=np.zeros((4, 3), np.float32))
  with pytest.raises(ValueError, match="feature 'log_mel'"):
    list(buffers.batches(iter([found[0], wrong]), 2, False,
                         variable=('signal', 'log_mel')))
