"""A wavbeam split for PyTorch: no TensorFlow, no Beam.

WavbeamIterableDataset streams the TFRecord shards; WavbeamMapDataset
(below) gives random access to the ArrayRecord copies of --array_record.

    from pipeline.torch_dataset import WavbeamIterableDataset

    data = WavbeamIterableDataset('out/', 'train', features=['log_mel',
                                  'target'], shuffle=True, seed=0)
    loader = torch.utils.data.DataLoader(data, batch_size=32, num_workers=2)
    for epoch in range(epochs):
      data.set_epoch(epoch)          # a new order each epoch
      for batch in loader:           # batch['log_mel']: a float32 tensor
        ...

Every example is read exactly once per epoch: the split's shards are dealt
to the ranks of `torch.distributed` (when it is initialised), then each
rank's shards to its DataLoader workers, so no two readers share a shard.
`len()` is this rank's number of examples, from metadata.json. Examples
are numpy_reader's (the same dtypes, shapes and checks: CRCs, sizes,
record counts); DataLoader's collation turns the arrays into tensors and
the strings into lists.

Shards are the unit of parallelism: a split needs at least as many shards
as ranks (write more with --max_examples_per_shard), and ranks whose shards
hold different numbers of examples get different len(). With shuffle, the
shard order is drawn from (seed, epoch) and examples pass a shuffle buffer
seeded by (seed, epoch, rank, worker).
"""

from typing import List, Optional, Sequence

import numpy as np
import torch
from torch.utils import data as torch_data

from pipeline import numpy_reader
from pipeline.array_record_source import ArrayRecordSource
from pipeline.errors import DatasetError


class WavbeamIterableDataset(torch_data.IterableDataset):
  """One split of a wavbeam dataset; see the module docstring."""

  def __init__(self, output_dir: str, split: str = 'train', *,
               features: Optional[Sequence[str]] = None,
               shuffle: bool = False, seed: int = 0,
               shuffle_buffer_size: int = 1024,
               rank: Optional[int] = None, world_size: Optional[int] = None):
    super().__init__()
    # Opened once here, so a bad folder, split or feature fails at once.
    whole = numpy_reader.NumpyDataset(output_dir, split, features=features)
    self.output_dir, self.split, self.features = (whole.output_dir, split,
                                                  whole.keys)
    self.shuffle, self.seed = shuffle, seed
    self.shuffle_buffer_size = shuffle_buffer_size
    self.rank, self.world_size = _rank_and_size(rank, world_size)
    num_shards = len(whole.shards)
    if num_shards and num_shards < self.world_size:
      raise DatasetError(
          f'split {split!r} of {self.output_dir} has {num_shards} shards, '
          f'fewer than the {self.world_size} ranks: rank {self.rank} would '
          'read nothing; write more, smaller shards '
          '(--max_examples_per_shard)')
    self.shard_indices: List[int] = list(
        range(self.rank, num_shards, self.world_size))
    self._lengths = [whole.shards[i]['num_examples']
                     for i in self.shard_indices]
    self.epoch = 0

  def set_epoch(self, epoch: int) -> None:
    """Sets the epoch the next iteration shuffles for (as
    DistributedSampler.set_epoch); call it before each epoch's loop."""
    self.epoch = epoch

  def __len__(self) -> int:
    return sum(self._lengths)

  def __iter__(self):
    info = torch_data.get_worker_info()
    worker, workers = (info.id, info.num_workers) if info else (0, 1)
    order = list(self.shard_indices)
    if self.shuffle:  # the same order in every worker: each takes its own
      np.random.default_rng([self.seed, self.epoch]).shuffle(order)
    mine = order[worker::workers]
    if not mine:
      return iter(())
    examples = iter(numpy_reader.NumpyDataset(
        self.output_dir, self.split, features=self.features,
        shard_indices=mine))
    if self.shuffle:
      rng = np.random.default_rng([self.seed, self.epoch, self.rank, worker])
      examples = numpy_reader.buffer_shuffle(
          examples, self.shuffle_buffer_size, rng)
    return examples


def _rank_and_size(rank: Optional[int], world_size: Optional[int]):
  if rank is None and world_size is None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
      return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1
  if rank is None or world_size is None or not 0 <= rank < world_size:
    raise ValueError(f'rank={rank!r}, world_size={world_size!r}: give both, '
                     'with 0 <= rank < world_size (or neither, to take them '
                     'from torch.distributed)')
  return rank, world_size


class WavbeamMapDataset(torch_data.Dataset):
  """Random access (a map-style Dataset) over a split written with
  --array_record: `DataLoader(data, shuffle=True)` shuffles the whole
  split each epoch, and a DistributedSampler splits it between ranks.
  Items are ArrayRecordSource's (numpy_reader's dicts of arrays)."""

  def __init__(self, output_dir: str, split: str = 'train', *,
               features: Optional[Sequence[str]] = None):
    super().__init__()
    self.source = ArrayRecordSource(output_dir, split, features=features)

  def __len__(self) -> int:
    return len(self.source)

  def __getitem__(self, index: int):
    return self.source[index]

  def __getitems__(self, indices):  # DataLoader fetches a batch at once
    return self.source.__getitems__(indices)
