"""A wavbeam split for PyTorch: no TensorFlow, no Beam.

WavbeamIterableDataset streams the TFRecord shards; WavbeamMapDataset
(below) gives random access to the ArrayRecord copies of --array_record.

    from pipeline.readers.torch_dataset import WavbeamIterableDataset

    data = WavbeamIterableDataset('out/', 'train', features=['log_mel',
                                  'target'], shuffle=True, seed=0,
                                  batch_size=32)
    loader = torch.utils.data.DataLoader(data, batch_size=None,
                                         num_workers=2)
    for epoch in range(epochs):
      data.set_epoch(epoch)          # a new order each epoch
      for batch in loader:           # batch['log_mel']: a float32 tensor
        ...

Every example is read exactly once per epoch: the split's records, in the
epoch's shard order, are cut into contiguous ranges, one per rank of
`torch.distributed` (when it is initialised; ranks get equal lengths, give
or take one), then each rank's range into one per DataLoader worker. A
worker skips to its first record by the record headers and reads only its
range, so any number of ranks and workers share any number of shards
evenly. `len()` is this rank's number of examples (or batches).
Examples are numpy_reader's (the same dtypes, shapes and checks: CRCs,
sizes, record counts).

`batch_size` batches in the dataset; use it with
`DataLoader(batch_size=None)`. A worker fills each batch's arrays into
shared memory it reuses once the training process has let go of the
batch (pipeline.torch_batches), so handing batches over costs next to
nothing and 2 workers read 1.7-1.8x as fast as none on 2 cores
(BENCHMARKS.md); DataLoader's own batching makes fresh shared memory for
every batch.
Ranges are cut at whole batches, so only a rank's last batch is short
(`drop_last` drops it). `transform` is applied to each example (a dict of
numpy arrays) in the worker before batching. To batch single examples in
the DataLoader instead (`DataLoader(data, batch_size=32)`), pass
`collate_fn=collate` for the same hand-over.

With shuffle, the shard order is drawn from (seed, epoch) and examples
pass a shuffle buffer seeded by (seed, epoch, rank, worker). The epoch is
kept in shared memory made with the dataset, so set_epoch reaches
DataLoader workers started earlier (persistent_workers=True).

`max_duration=` (instead of `batch_size`) batches by audio: as many
examples as fit in that many seconds, padding included, grouped in
`num_buckets` buckets of similar length (pipeline/readers/duration_batches.py,
as Lhotse's DynamicBucketingSampler), straight from the TFRecord shards.
Each worker buckets its own range of records, so every example is in one
batch per epoch, and each epoch's order makes new batches; ranks may get
a few batches more or fewer than each other (torch.distributed's Join
evens that out), and `len()` is not known before the epoch.
"""

import itertools
import numbers
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import torch
from torch.utils import data as torch_data

from pipeline.readers import augment
from pipeline.readers import batching
from pipeline.readers import duration_batches
from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.readers import torch_batches
from pipeline.readers.array_record import ArrayRecordSource
from pipeline.contract.errors import DatasetError


class WavbeamIterableDataset(torch_data.IterableDataset):
  """One split of a wavbeam dataset; see the module docstring."""

  def __init__(self, output_dir: str, split: str = 'train', *,
               features: Optional[Sequence[str]] = None,
               shuffle: bool = False, seed: int = 0,
               shuffle_buffer_size: int = 1024,
               batch_size: Optional[int] = None, drop_last: bool = False,
               transform: Optional[Callable[[Dict], Dict]] = None,
               rank: Optional[int] = None, world_size: Optional[int] = None,
               variant: Optional[str] = None, parts=None, dtype=None,
               max_duration: Optional[float] = None,
               num_buckets: Optional[int] = None):
    super().__init__()
    # Checked here, not at the first batch: a DataLoader's worker would
    # raise it from another process, far from the call.
    numpy_reader.check_sizes(batch_size=batch_size,
                             shuffle_buffer_size=shuffle_buffer_size)
    _check_seed(seed, 'every rank and epoch shuffles from it alike')
    if max_duration is not None and (batch_size is not None or drop_last):
      raise ValueError(f'batch_size={batch_size!r}, drop_last={drop_last!r} '
                       f'and max_duration={max_duration!r}: batches of '
                       'max_duration are all kept; give batch_size or '
                       'max_duration')
    # Opened once here, so a bad folder, split or feature fails at once.
    self._reader = numpy_reader.NumpyDataset(
        output_dir, split, features=features, variant=variant, parts=parts,
        max_duration=max_duration, num_buckets=num_buckets)
    self.max_duration = max_duration
    self.num_buckets = self._reader.num_buckets
    self.output_dir, self.split = self._reader.output_dir, split
    self.features = tuple(k for k in self._reader.keys
                          if k not in self._reader.unasked)
    # dtype=: the float features as this dtype, else as stored.
    self.dtype = torch_batches.numpy_dtype_name(dtype)
    self._float_keys = batching.float_keys(self._reader.schema,
                                           self._reader.keys)
    self.shuffle, self.seed = shuffle, seed
    self.shuffle_buffer_size = shuffle_buffer_size
    self.batch_size, self.drop_last = batch_size, drop_last
    self.transform = transform
    self.rank, self.world_size = _rank_and_size(rank, world_size)
    self._counts = [s['num_examples'] for s in self._reader.shards]
    total = sum(self._counts)
    self._first = self.rank * total // self.world_size
    self._end = (self.rank + 1) * total // self.world_size
    # The epoch, in shared memory made with the dataset: DataLoader
    # workers, forked or spawned, read set_epoch's value as each pass
    # starts; a copy of their own would stay at the epoch they were
    # started in (persistent_workers=True keeps them across epochs).
    self._shared_epoch = torch.zeros((), dtype=torch.int64).share_memory_()
    self._buffers: Dict = {}

  def __getstate__(self):  # a spawned worker makes its own buffers
    return {**self.__dict__, '_buffers': {}}

  def set_epoch(self, epoch: int) -> None:
    """Sets the epoch the next iteration shuffles for (as
    DistributedSampler.set_epoch); call it before each epoch's loop. It
    reaches DataLoader workers already started (persistent_workers=True)
    when their next pass starts."""
    self._shared_epoch.fill_(checked_epoch(epoch))

  @property
  def epoch(self) -> int:
    return int(self._shared_epoch)

  def __len__(self) -> int:
    if self.max_duration is not None:
      raise TypeError('batches of max_duration= seconds: how many depends '
                      "on the epoch's order")
    n = self._end - self._first
    if self.batch_size is None:
      return n
    return n // self.batch_size if self.drop_last else -(-n //
                                                         self.batch_size)

  def __iter__(self):
    info = torch_data.get_worker_info()
    worker, workers = (info.id, info.num_workers) if info else (0, 1)
    first, end = self._worker_range(worker, workers)
    epoch = self.epoch  # read once: the whole pass draws from it
    order = list(range(len(self._counts)))
    if self.shuffle:  # the same order in every worker: each takes its own
      np.random.default_rng([self.seed, epoch]).shuffle(order)
    if (self.batch_size is not None and self.transform is None and
        self.dtype is None and self._reader.chunks_batch()):
      return numpy_reader.closed_at_exit(
          self._located_batches(order, first, end, epoch, worker))
    # Batched as they come, untransformed examples need no copy of their
    # own; shuffled, they wait in the buffer as views of their records.
    # Batched by duration, they wait for their batch as views too (the
    # bucket edges come from a look-ahead over the first examples), and
    # are cast and transformed as it is made (_duration_batches).
    by_duration = self.max_duration is not None
    examples = self._read(order, first, end,
                          copy=not by_duration and (
                              self.batch_size is None or
                              self.transform is not None))
    if self.dtype is not None and not by_duration:
      examples = (batching.cast_floats(e, self._float_keys, self.dtype)
                  for e in examples)
    if self.shuffle:
      rng = np.random.default_rng([self.seed, epoch, self.rank, worker])
      examples = numpy_reader.buffer_shuffle(
          examples, self.shuffle_buffer_size, rng)
    if self.transform is not None:
      # Augmentation blocks draw this pass's values from (epoch, rank,
      # worker): pipeline/readers/augment.py.
      augment.start_epoch(self.transform, epoch, self.rank, worker)
    if by_duration:
      return numpy_reader.closed_at_exit(self._duration_batches(examples))
    if self.transform is not None:
      examples = map(self.transform, examples)
    if self.batch_size is None:
      return numpy_reader.closed_at_exit(examples)
    return numpy_reader.closed_at_exit(torch_batches.batched(
        self._buffers, examples, self.batch_size, self.drop_last,
        self._reader.variable))

  def _duration_batches(self, examples):
    """Batches of max_duration= seconds (duration_batches.batches), each
    example's duration taken as read. The examples of a batch are cast
    (dtype=) and transformed as it is made, in the batch's order: the
    look-ahead that draws the bucket edges, and the buckets, hold them as
    read."""
    for group in duration_batches.batches(self._reader.timed(examples),
                                          self._reader.max_samples,
                                          self.num_buckets):
      if self.dtype is not None:
        group = [batching.cast_floats(e, self._float_keys, self.dtype)
                 for e in group]
      if self.transform is not None:
        group = [self.transform(_writable(e)) for e in group]
      yield next(torch_batches.batched(self._buffers, group, len(group),
                                       False, self._reader.variable))

  def _worker_range(self, worker: int, workers: int):
    """This worker's records, as positions in the rank's range; cut at
    whole batches when batching."""
    n, unit = self._end - self._first, self.batch_size or 1
    units = -(-n // unit)
    first = min(worker * units // workers * unit, n)
    end = min((worker + 1) * units // workers * unit, n)
    return self._first + first, self._first + end

  def _located_batches(self, order: List[int], first: int, end: int,
                       epoch: int, worker: int):
    """The batches of __iter__, filled from records read a chunk at a
    time (numpy_reader.NumpyDataset.chunked_records): the same batches."""
    with numpy_reader.crc_checker() as checker:
      records = itertools.chain.from_iterable(
          self._reader.chunked_records(shard, start, stop, checker)
          for shard, start, stop in self._ranges(order, first, end))
      if self.shuffle:
        rng = np.random.default_rng([self.seed, epoch, self.rank, worker])
        records = numpy_reader.buffer_shuffle(
            records, self.shuffle_buffer_size, rng)
      yield from torch_batches.batched(
          self._buffers, records, self.batch_size, self.drop_last,
          first_example=numpy_reader.first_example)

  def _read(self, order: List[int], first: int, end: int, copy: bool):
    for shard, start, stop in self._ranges(order, first, end):
      yield from self._reader.read_records(shard, start, stop, copy)

  def _ranges(self, order: List[int], first: int, end: int):
    """(shard, first record, end) covering records first..end-1 of the
    shards in `order`."""
    counts = [self._counts[i] for i in order]
    for position, start, stop in numpy_reader.record_ranges(
        counts, first, end):
      yield self._reader.shards[order[position]], start, stop


def _check_seed(seed, drawn: str) -> None:
  """DatasetError (a ValueError) for a seed= that is not an integer of at
  least 0; `drawn` says what draws from it."""
  if (not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or
      seed < 0):
    raise DatasetError(f'seed={seed!r}: give an integer of at least 0 '
                       f'({drawn})')


def checked_epoch(epoch) -> int:
  """set_epoch's epoch, checked where it is set: a bad one would fail in
  a DataLoader worker, in numpy's seeding."""
  if (not isinstance(epoch, numbers.Integral) or isinstance(epoch, bool) or
      not 0 <= epoch < 2**63):
    raise ValueError(f'epoch={epoch!r}: give an integer of at least 0 (and '
                     'below 2**63): the shuffle and the augmentation of an '
                     'epoch are drawn from it')
  return int(epoch)


def _writable(example: Dict) -> Dict:
  """An example whose arrays a transform may change in place: those read
  as views of their record (read-only) copied."""
  return {k: v.copy() if isinstance(v, np.ndarray) and
          not v.flags.writeable else v for k, v in example.items()}


def _rank_and_size(rank: Optional[int], world_size: Optional[int]):
  if rank is None and world_size is None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
      return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1
  if (not all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
             for v in (rank, world_size)) or not 0 <= rank < world_size):
    raise ValueError(f'rank={rank!r}, world_size={world_size!r}: give both, '
                     'with 0 <= rank < world_size (or neither, to take them '
                     'from torch.distributed)')
  return rank, world_size


class WavbeamMapDataset(torch_data.Dataset):
  """Random access (a map-style Dataset) over a split written with
  --array_record: `DataLoader(data, shuffle=True, collate_fn=collate)`
  shuffles the whole split each epoch, and a DistributedSampler splits it
  between ranks. Items are ArrayRecordSource's (numpy_reader's dicts of
  arrays)."""

  def __init__(self, output_dir: str, split: str = 'train', *,
               features: Optional[Sequence[str]] = None,
               variant: Optional[str] = None, parts=None, dtype=None):
    super().__init__()
    self.source = ArrayRecordSource(output_dir, split, features=features,
                                    variant=variant, parts=parts)
    self.parts = parts  # lengths() reads the same parts
    # dtype=: the float features as this dtype, else as stored.
    self.dtype = torch_batches.numpy_dtype_name(dtype)
    self._float_keys = batching.float_keys(self.source.schema,
                                           self.source.keys)
    self.variable = numpy_reader.variable_keys(self.source.schema,
                                               self.source.keys)

  def collate(self, examples: List[Dict]) -> Dict:
    """DataLoader's `collate_fn` for this dataset: `collate`, with its
    variable-length arrays (--example_unit file) zero-padded to the
    batch's longest and `<key>_length` added."""
    return next(torch_batches.batched(_COLLATE_BUFFERS, examples,
                                      len(examples), False, self.variable))

  def lengths(self, key: Optional[str] = None) -> List[int]:
    """Every example's length, in index order: of `key`, a
    variable-length feature (default: the first read), from its stored
    length key; for LengthGroupedBatchSampler. Reads the split (its
    parts read, `parts=`) once."""
    key = key or (self.variable[0] if self.variable else None)
    if key not in self.variable:
      raise ValueError(f'{key!r} is not a variable-length feature of '
                       f'{self.source.output_dir} among those read '
                       f'({list(self.source.keys)})')
    length_key = self.source.schema[key].length_key
    reader = numpy_reader.NumpyDataset(self.source.output_dir,
                                       self.source.split,
                                       features=[length_key],
                                       parts=self.parts)
    return [int(e[length_key]) for e in reader]

  def __len__(self) -> int:
    return len(self.source)

  def __getitem__(self, index: int):
    return self._cast(self.source[index])

  def __getitems__(self, indices):  # DataLoader fetches a batch at once
    return [self._cast(e) for e in self.source.__getitems__(indices)]

  def _cast(self, example: Dict) -> Dict:
    if self.dtype is None:
      return example
    return batching.cast_floats(example, self._float_keys, self.dtype)


class LengthGroupedBatchSampler(torch_data.Sampler):
  """Batches of indices of examples of similar length, for
  `DataLoader(data, batch_sampler=..., collate_fn=data.collate)`: less
  padding than random batches of variable-length examples.

  Each epoch the indices are shuffled (seeded by (seed, epoch)), cut into
  groups of `batch_size * group_batches`, each group sorted by length and
  cut into batches, and the batches shuffled: every example once per
  epoch, lengths similar within a batch, batches in random order.
  `lengths`: WavbeamMapDataset.lengths().
  """

  def __init__(self, lengths: Sequence[int], batch_size: int, *,
               shuffle: bool = True, seed: int = 0, drop_last: bool = False,
               group_batches: int = 50):
    super().__init__()
    # Checked here, not when the DataLoader first iterates the sampler.
    numpy_reader.check_sizes(batch_size=batch_size,
                             group_batches=group_batches)
    _check_seed(seed, 'each epoch shuffles from it')
    self.lengths = np.asarray(lengths, np.int64)
    self.batch_size, self.drop_last = batch_size, drop_last
    self.shuffle, self.seed = shuffle, seed
    self.group = batch_size * group_batches
    self.epoch = 0

  def set_epoch(self, epoch: int) -> None:
    self.epoch = checked_epoch(epoch)

  def __len__(self) -> int:
    n = len(self.lengths)
    return n // self.batch_size if self.drop_last else -(-n //
                                                         self.batch_size)

  def __iter__(self):
    rng = np.random.default_rng([self.seed, self.epoch])
    order = (rng.permutation(len(self.lengths)) if self.shuffle
             else np.arange(len(self.lengths)))
    batches = []
    for start in range(0, len(order), self.group):
      group = order[start:start + self.group]
      # Stable: equal lengths keep the shuffled order.
      group = group[np.argsort(self.lengths[group], kind='stable')]
      batches += [group[i:i + self.batch_size].tolist()
                  for i in range(0, len(group), self.batch_size)]
    # The groups' short batches (one a group at most) are put together
    # and go last; with drop_last the short one left goes.
    full = [b for b in batches if len(b) == self.batch_size]
    short = [b for b in batches if len(b) < self.batch_size]
    if self.shuffle:
      rng.shuffle(full)
    merged = [i for b in short for i in b]
    short = [merged[i:i + self.batch_size]
             for i in range(0, len(merged), self.batch_size)]
    if self.drop_last:
      short = [b for b in short if len(b) == self.batch_size]
    return iter(full + short)


def collate(examples: List[Dict]) -> Dict:
  """DataLoader's `collate_fn` for WavbeamMapDataset (or any dataset of
  wavbeam examples): the batch as WavbeamIterableDataset makes it, filled
  into this process's reused buffers and, from a worker, handed over in
  shared memory once (pipeline.torch_batches). DataLoader's own
  default_collate gives the same tensors in fresh shared memory for every
  batch."""
  return next(torch_batches.batched(_COLLATE_BUFFERS, examples,
                                    len(examples), False))


# collate's buffers, one pool a process (a function has nowhere else to
# keep them; a forked worker's copy of the parent's entry is never used).
_COLLATE_BUFFERS: Dict = {}
