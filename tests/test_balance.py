"""Shard group keys that split the shards evenly over Dask partitions,
checked against dask.bag's real task shuffle (the one Beam's DaskRunner
runs for a GroupByKey)."""

import zlib

import dask
import dask.bag as db
import numpy as np
import pytest

from transforms.planning import balance
from transforms.planning import layout


def _layouts(entries, **shard_options):
  return layout.compute_layouts(entries, **shard_options)


def test_shard_sizes_count_the_windows_layout_puts_in_each_shard():
  for total, shards in [(108, 11), (7, 7), (1000, 3), (5, 1), (12, 5)]:
    lay = layout.SplitLayout('train', total, shards, {0: 0})
    expected = np.bincount(lay.shard_of(np.arange(total)), minlength=shards)
    assert balance.shard_sizes(lay) == expected.tolist()


def test_without_a_partition_function_every_salt_is_zero():
  layouts = _layouts([('train', 0, 50), ('test', 1, 20)],
                     max_examples_per_shard=10)
  keys = balance.group_keys(layouts)
  assert keys == {(s, i): (s, i, 0) for s, n in [('train', 5), ('test', 2)]
                  for i in range(n)}


def test_shards_are_dealt_evenly_over_partitions():
  # Two splits with shards of different sizes; a stand-in hash.
  layouts = _layouts([('train', 0, 1000), ('test', 1, 130)],
                     max_examples_per_shard=100)
  sizes = {(s, i): n for s, lay in layouts.items()
           for i, n in enumerate(balance.shard_sizes(lay))}
  for partitions in (2, 3, 5):
    def partition_of(key, m=partitions):
      return zlib.crc32(repr(key).encode()) % m
    keys = balance.group_keys(layouts, partition_of, partitions)
    assert sorted(keys) == sorted(sizes)
    assert all(key[:2] == shard for shard, key in keys.items())
    load = [0] * partitions
    for shard, key in keys.items():
      load[partition_of(key)] += sizes[shard]
    # Largest first to the least loaded: within one shard of each other.
    assert max(load) - min(load) <= max(sizes.values())
    # Unsalted, the stand-in hash leaves them further apart.
    unsalted = [0] * partitions
    for shard in sizes:
      unsalted[partition_of((*shard, 0))] += sizes[shard]
    assert max(load) - min(load) < max(unsalted) - min(unsalted)


@pytest.mark.parametrize('input_partitions', [1, 2, 3, 40])
def test_dask_task_shuffle_puts_each_key_where_predicted(input_partitions):
  """dask.bag's groupby (shuffle='tasks', the DaskRunner's GroupByKey) on
  real partitions: every group lands in the partition dask_partition_of
  names, and the salted keys split the windows evenly. 40 input partitions
  take the shuffle's two-stage path (7 x 7 = 49 output partitions)."""
  layouts = _layouts([('train', 0, 1200), ('validation', 1, 150)],
                     max_examples_per_shard=100)
  keys = balance.dask_group_keys(layouts, input_partitions)
  partition_of, outputs = balance.dask_partition_of(input_partitions)
  assert outputs == (49 if input_partitions == 40 else input_partitions)
  refs = [(keys[(split, shard)], 1) for split, lay in layouts.items()
          for shard, size in enumerate(balance.shard_sizes(lay))
          for _ in range(size)]
  # As graph.ListWavFiles does: one list per partition, then flattened
  # (from_sequence(refs, npartitions=40) would make 41 partitions).
  bag = db.from_sequence([refs[i::input_partitions]
                          for i in range(input_partitions)],
                         npartitions=input_partitions).flatten()
  assert bag.npartitions == input_partitions
  grouped = bag.groupby(lambda ref: ref[0], shuffle='tasks')
  assert grouped.npartitions == outputs
  windows = [0] * outputs
  with dask.config.set(scheduler='sync'):
    for number, part in enumerate(grouped.to_delayed()):
      for key, values in part.compute():
        assert number == partition_of(key)
        windows[number] += len(values)
  assert sum(windows) == 1350
  # Largest shard first to the least loaded partition: none gets more than
  # the mean plus one shard (100 windows).
  assert max(windows) <= -(-1350 // outputs) + 100
