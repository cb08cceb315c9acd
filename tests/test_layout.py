"""transforms/planning/layout: the seeded write order and the shard layout."""

import numpy as np
import pytest

from transforms.planning import rules as plan_lib
from transforms.inputs.file_reports import WavInfo


@pytest.mark.parametrize('total', [1, 2, 3, 5, 17, 64, 1000, 4097])
def test_permutation_is_a_seeded_bijection(total):
  from transforms.planning import layout
  p = layout.permute(np.arange(total), total, seed=0)
  assert sorted(p.tolist()) == list(range(total))
  assert np.array_equal(p, layout.permute(np.arange(total), total, seed=0))
  if total >= 64:
    q = layout.permute(np.arange(total), total, seed=1)
    assert not np.array_equal(p, q)
    # Neighbours in input order land far apart.
    assert np.median(np.abs(np.diff(p))) > total / 10


def test_layout_balances_shards_and_places_every_window_once():
  from transforms.planning import layout
  entries = [('train', 0, 7), ('train', 1, 100), ('test', 2, 5),
             ('train', 3, 1)]
  layouts = layout.compute_layouts(entries, max_examples_per_shard=10)
  train = layouts['train']
  assert train.total == 108 and train.num_shards == 11
  assert train.offsets == {0: 0, 1: 7, 3: 107}
  placed = {}
  for split, index, n in entries:
    info = WavInfo(index, f'{index}.wav', n, 16000, 1, 'PCM_16')
    plan = plan_lib.FilePlan(info, split, 'c', 16000, n, n)
    for (s, shard), (p, w, key) in layout.block_refs(
        index, [plan], layouts, shuffle=True, seed=0):
      i = p.info.index
      assert (i, w) not in placed
      placed[(i, w)] = (s, shard, key)
  assert len(placed) == 113
  sizes = np.bincount([v[1] for v in placed.values() if v[0] == 'train'])
  assert sizes.max() - sizes.min() <= 1
  # The long file is spread over every shard.
  assert {v[1] for k, v in placed.items() if k[0] == 1} == set(range(11))


def test_shards_by_bytes_count_the_frames_of_variable_length_examples():
  """--example_unit file: a split's size is its examples' fixed part plus
  bytes per frame of its recordings, so long recordings take more
  shards than as many short ones."""
  from transforms.planning import layout
  size = layout.ExampleSize(fixed=1000, per_frame=2.0)
  short = [('train', b, 1, 1, 1000) for b in range(10)]
  long = [('train', b, 1, 1, 100000) for b in range(10)]
  options = dict(max_shard_bytes=100000, example_bytes=size.fixed,
                 frame_bytes=size.per_frame)
  # 10 * (1000 + 2 * 1000) = 30 kB; 10 * (1000 + 2 * 100000) = 2.01 MB.
  assert layout.compute_layouts(short, **options)['train'].num_shards == 1
  found = layout.compute_layouts(long, **options)['train']
  assert found.num_shards == 10  # 21 by bytes, at most one per example
  assert found.frames == 10 * 100000
  fewer = layout.compute_layouts(long[:1] + short[1:], **options)['train']
  assert fewer.num_shards == 3   # 201000 + 9 * 3000 bytes
  assert size.total(3, 10) == 3020.0


def test_a_costly_feature_caps_the_audio_of_a_shard():
  """max_shard_frames (a model's work): more shards than the bytes alone
  give, by the windows' frames or, for variable-length examples, the
  recordings'; never more shards than examples; num_shards and
  max_examples_per_shard, when given, decide alone."""
  from transforms.planning import layout
  entries = [('train', b, 3, 1, 30000) for b in range(10)]  # 30 examples
  options = dict(max_shard_bytes=10**9, example_bytes=100)
  assert layout.compute_layouts(entries, **options)['train'].num_shards == 1
  # Windows of 4000 frames: 120,000 frames of work, 25,000 a shard.
  assert layout.compute_layouts(
      entries, max_shard_frames=25000, window_frames=4000,
      **options)['train'].num_shards == 5
  # Variable length: the recordings' 300,000 frames.
  assert layout.compute_layouts(
      entries, max_shard_frames=25000, **options)['train'].num_shards == 12
  assert layout.compute_layouts(
      entries, max_shard_frames=1, **options)['train'].num_shards == 30
  assert layout.compute_layouts(
      entries, max_shard_frames=1, num_shards=2,
      **options)['train'].num_shards == 2
  assert layout.compute_layouts(
      entries, max_shard_frames=1, max_examples_per_shard=10,
      **options)['train'].num_shards == 3


def test_window_refs_travel_with_one_copy_of_each_plan():
  """Beam's default coder sends a block's refs for one shard with its
  file's plan once, and they arrive sharing one plan object."""
  from apache_beam.coders import typecoders
  from transforms.planning import passes
  info = WavInfo(4, '/in/c/recording.wav', 10**6, 16000, 1, 'PCM_16')
  plan = plan_lib.FilePlan(info, 'train', 'c', 16000, 10**6, 30,
                           extras=(('speaker', 'spk-0042'),))
  keyed = [((('train', 1, 0)), (plan, w, 1000 + w)) for w in range(30)]
  [(key, refs)] = passes.refs_by_key(keyed)
  assert key == ('train', 1, 0) and list(refs) == [r for _, r in keyed]
  coder = typecoders.registry.get_coder(object)
  one = len(coder.encode([(plan, 0, 1000)]))
  plain = len(coder.encode(list(refs)))
  sent = coder.encode(refs)
  assert plain > 25 * one / 2  # a plain list: a plan per ref
  assert len(sent) < 3 * one   # one plan, and 30 small tuples
  back = coder.decode(sent)
  assert list(back) == list(refs)
  assert len({id(p) for p, _, _ in back}) == 1
