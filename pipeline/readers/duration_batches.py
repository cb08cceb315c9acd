"""Batches of up to `max_duration` seconds of audio, bucketed by length.

Variable-length examples (whole recordings, segments) batched by count
waste memory on padding and vary in size; batched by duration, a batch
holds as many examples as fit, and examples of similar length share a
batch. As Lhotse's DynamicBucketingSampler does, a batch's padded size,
its number of examples times its longest, stays within `max_duration`
(one example longer than that is a batch of its own), and duration
buckets are drawn from the first examples of the stream so that each
holds an equal share of the audio.

The readers count in samples (an example's stored length, the audio its
STFT frames span, a window's length) against max_duration's samples at
the dataset's rate, whole numbers: a batch of exactly max_duration is not
lost to float rounding (3 windows of 0.1 s in 0.3 s), and none exceeds it
by a sample.

The examples arrive as a stream (shards read in order, shuffled through
a buffer by the caller): each goes to its bucket; once a bucket holds two
batches' worth, its longest examples that fit are a batch; at the end of
the stream what the buckets hold is cut the same way. So every example is
in exactly one batch, and a new order of the stream (a new epoch) makes
new batches.
"""

import bisect
import fractions
import math
import numbers
from typing import Iterable, Iterator, List, Sequence, Tuple, TypeVar

import numpy as np

T = TypeVar('T')

# Examples the bucket edges are estimated from, as Lhotse's
# num_cuts_for_bins_estimate (there 10,000; a reader's worker starts
# sooner with fewer, and edges from 2,000 lengths are already stable).
EDGES_ESTIMATE = 2000
# Batches' worth of audio a bucket gathers before it makes one of them.
POOL_BATCHES = 2
# Buckets when a reader's num_buckets= is not given.
NUM_BUCKETS = 10


def check_options(max_duration, num_buckets: int) -> None:
  """ValueError naming the argument and its value."""
  if (isinstance(max_duration, bool) or
      not isinstance(max_duration, numbers.Real) or not max_duration > 0 or
      not math.isfinite(max_duration)):
    raise ValueError(f'max_duration={max_duration!r}: give the seconds of '
                     'audio a batch may hold, above 0')
  if isinstance(num_buckets, bool) or not isinstance(num_buckets, int) or (
      num_buckets < 1):
    raise ValueError(f'num_buckets={num_buckets!r}: give a positive whole '
                     'number')


def samples_within(max_duration: float, rate: int) -> int:
  """The whole samples `max_duration` seconds hold at `rate`, counted from
  the shortest decimal that reads back as max_duration (0.3 s at 8 kHz:
  2400, where 0.3 * 8000 in floats may fall either side of it)."""
  seconds = fractions.Fraction(repr(float(max_duration)))
  return math.floor(seconds * rate)


def bucket_edges(durations: Sequence[float], num_buckets: int) -> List[float]:
  """The durations that start buckets 1..n-1 (bucket 0 starts at 0): the
  sorted durations cut where each bucket's share of their total is
  reached, as Lhotse's estimate_duration_buckets; fewer edges when the
  durations do not fill that many buckets."""
  if num_buckets < 2 or not len(durations):
    return []
  sizes = np.sort(np.asarray(durations, np.float64))
  share = sizes.sum() / num_buckets
  edges, total = [], 0.0
  for size in sizes:
    if total > share and size > (edges[-1] if edges else sizes[0]):
      edges.append(float(size))
      total = 0.0
    total += size
  return edges


def batches(items: Iterable[Tuple[float, T]], max_duration: float,
            num_buckets: int = NUM_BUCKETS,
            edges_estimate: int = EDGES_ESTIMATE) -> Iterator[List[T]]:
  """Lists of items from (duration, item) pairs, each list's count times
  its longest duration at most `max_duration` (or one item longer than
  that), in one unit (the readers': samples, whole numbers, so that the
  sums and products are exact). Every item is in one list; the items of
  a list keep their stream order.

  Each bucket gathers items until they hold POOL_BATCHES batches' worth
  of audio; then its longest items that fit make a batch, so that a batch
  holds lengths closer than the bucket's spread (half the padding of
  taking them in arrival order, on lengths of 0.5-15 s)."""
  stream = iter(items)
  first: List[Tuple[float, T]] = []
  for pair in stream:
    first.append(pair)
    if len(first) == edges_estimate:
      break
  edges = bucket_edges([d for d, _ in first], num_buckets)
  pools: List[list] = [[] for _ in range(len(edges) + 1)]
  held = [0.0] * len(pools)

  def chain():
    yield from first
    yield from stream

  for order, (duration, item) in enumerate(chain()):
    b = bisect.bisect_right(edges, duration)
    pools[b].append((duration, order, item))
    held[b] += duration
    if held[b] >= POOL_BATCHES * max_duration:
      batch = _longest_that_fit(pools[b], max_duration)
      held[b] = sum(d for d, _, _ in pools[b])
      yield batch
  for pool in pools:
    while pool:
      yield _longest_that_fit(pool, max_duration)


def _longest_that_fit(pool: list, max_duration: float) -> list:
  """The longest items of a bucket's pool whose count times the longest
  is within max_duration (at least one), taken out of it, in stream
  order."""
  pool.sort(key=lambda t: (-t[0], t[1]))
  longest, count = pool[0][0], 1
  while count < len(pool) and (count + 1) * longest <= max_duration:
    count += 1
  taken = sorted(pool[:count], key=lambda t: t[1])
  del pool[:count]
  return [item for _, _, item in taken]


class ExampleSamples:
  """The samples of audio an example holds, from the key `samples_of`
  chose (a class, not a closure, so that a reader holding it pickles into
  spawned DataLoader workers)."""

  def __init__(self, key, hop: int = 0, n_fft: int = 0, fixed: int = 0):
    self.key, self.hop, self.n_fft, self.fixed = key, hop, n_fft, fixed

  def __call__(self, example) -> int:
    from pipeline.contract.schema import NUM_FRAMES_KEY, NUM_SAMPLES_KEY
    if self.key == NUM_SAMPLES_KEY:
      return int(example[NUM_SAMPLES_KEY])
    if self.key == NUM_FRAMES_KEY:
      frames = int(example[NUM_FRAMES_KEY])
      return max(frames - 1, 0) * self.hop + self.n_fft
    return self.fixed


def samples_of(metadata, schema):
  """(the key an example's duration is read from, or None, and an
  ExampleSamples giving an example's samples at the dataset's rate): its
  stored `num_samples`; else the audio its `num_frames` STFT frames span,
  (frames - 1) * fft_hop + n_fft samples, short of its length by less
  than a hop; else, for windows, the one length of every window.
  ValueError when a dataset of variable-length examples stores neither."""
  from pipeline.contract.schema import NUM_FRAMES_KEY, NUM_SAMPLES_KEY
  config = metadata['config']
  keys = schema.keys()
  if NUM_SAMPLES_KEY in keys:
    return NUM_SAMPLES_KEY, ExampleSamples(NUM_SAMPLES_KEY)
  if NUM_FRAMES_KEY in keys:
    return NUM_FRAMES_KEY, ExampleSamples(
        NUM_FRAMES_KEY, int(config['fft_hop']), int(config['n_fft']))
  if config.get('example_unit', 'window') == 'window':
    return None, ExampleSamples(None, fixed=int(config['win_len']))
  raise ValueError('max_duration=: the examples store neither num_samples '
                   'nor num_frames to take their durations from (write the '
                   'dataset with the signal feature, or an STFT feature)')
