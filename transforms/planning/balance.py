"""The GroupByKey key of each shard, chosen so that every worker gets an
equal share of the shards on a runner that places groups by key hash.

Beam 2.77's DaskRunner runs a GroupByKey as dask.bag's task shuffle, which
sends a group to output partition `int(tokenize(key), 16) % m` (m: the
input's partition count, rounded up to a power of the shuffle's branching;
see `dask_partition_of`). Left to chance, 12 shards on 2 workers split
11/1 or 8/4 (docs/runners.md, "Dask"). So a shard's key is
(split, shard, salt), with the salt picked so that the key lands in the
partition that has the least work so far, largest shard first.

The salt changes nothing but where a group is computed: the shard task
drops it, and on every other runner it is 0.
"""

import math
from typing import Callable, Dict, Mapping, Optional, Tuple

from transforms.planning.layout import SplitLayout

ShardKey = Tuple[str, int, int]  # (split, shard, salt)
# dask.bag.core.groupby_tasks's default max_branch, used by the DaskRunner.
DASK_MAX_BRANCH = 32
# Each salt is a fresh hash, so one in m hits a given partition; past this
# many tries per partition the hash is not what we expect: keep salt 0.
_TRIES_PER_PARTITION = 64


def shard_sizes(layout: SplitLayout):
  """Windows in each shard: shard s holds keys k with k * N // total == s."""
  starts = layout.shard_starts()
  return [b - a for a, b in zip(starts, starts[1:])]


def group_keys(layouts: Mapping[str, SplitLayout],
               partition_of: Optional[Callable[[ShardKey], int]] = None,
               partitions: int = 1, sizes_of=shard_sizes
               ) -> Dict[Tuple[str, int], ShardKey]:
  """(split, shard) -> its GroupByKey key.

  Without `partition_of` every salt is 0. With it (key -> partition in
  [0, partitions)), shards are dealt largest first to the partition with the
  fewest windows so far, which puts at most one shard's worth above the mean.
  `sizes_of` gives a split's units (shards, or a sweep's segments) and
  their windows.
  """
  shards = [(size, split, shard) for split, layout in sorted(layouts.items())
            for shard, size in enumerate(sizes_of(layout))]
  if partition_of is None or partitions <= 1:
    return {(split, shard): (split, shard, 0) for _, split, shard in shards}
  load = [0] * partitions
  keys = {}
  for size, split, shard in sorted(shards, key=lambda s: (-s[0], s[1], s[2])):
    target = load.index(min(load))
    salt = next((salt for salt in range(_TRIES_PER_PARTITION * partitions)
                 if partition_of((split, shard, salt)) == target), 0)
    keys[(split, shard)] = (split, shard, salt)
    # The target, unless no salt reached it.
    load[partition_of(keys[(split, shard)])] += size
  return keys


def dask_partition_of(input_partitions: int,
                      max_branch: int = DASK_MAX_BRANCH
                      ) -> Tuple[Callable[[ShardKey], int], int]:
  """(key -> output partition, number of output partitions) of dask.bag's
  task shuffle (`Bag.groupby(shuffle='tasks')`) on `input_partitions`.

  The shuffle runs in `stages` rounds of k-way splits, k**stages >= input
  partitions, on the digits of the key's hash in base k; the last output
  partition index is therefore the hash modulo k**stages.
  """
  from dask.base import tokenize  # pylint: disable=import-outside-toplevel
  n = input_partitions
  stages = int(math.ceil(math.log(n) / math.log(max_branch))) or 1
  k = int(math.ceil(n ** (1 / stages))) if stages > 1 else n
  m = k ** stages
  return (lambda key: int(tokenize(key), 16) % m), m


def dask_group_keys(layouts: Mapping[str, SplitLayout],
                    input_partitions: Optional[int], sizes_of=shard_sizes
                    ) -> Dict[Tuple[str, int], ShardKey]:
  """group_keys for a GroupByKey whose input has `input_partitions` Dask
  partitions; salt 0 when that is not known (None)."""
  if input_partitions is None:
    return group_keys(layouts, sizes_of=sizes_of)
  return group_keys(layouts, *dask_partition_of(input_partitions),
                    sizes_of=sizes_of)
