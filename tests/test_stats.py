"""transforms/writing/stats: the streaming moments behind metadata's
statistics."""

import math

import numpy as np
import pytest

from transforms.runtime import cache_parts
from transforms.writing.stats import ExampleStats, Moments


def test_moments_of_values_match_numpy():
  values = np.random.default_rng(0).normal(3.0, 2.0, 10_000).astype(
      np.float32)
  m = Moments.of(values).to_json()
  assert m['count'] == values.size
  assert m['mean'] == pytest.approx(values.astype(np.float64).mean(),
                                    rel=1e-12)
  assert m['std'] == pytest.approx(values.astype(np.float64).std(),
                                   rel=1e-12)
  assert (m['min'], m['max']) == (float(values.min()), float(values.max()))


@pytest.mark.parametrize('cuts', [[0], [1, 2], [5, 5, 900], [0, 0, 0]])
def test_merged_parts_equal_the_whole(cuts):
  values = np.random.default_rng(1).integers(-2**31, 2**31, 1000,
                                             dtype=np.int64).astype(np.int32)
  parts = np.split(values, np.cumsum(cuts))
  merged = Moments()
  for part in parts:
    merged = merged.merge(Moments.of(part))
  whole = Moments.of(values)
  assert merged.count == whole.count
  assert merged.mean == pytest.approx(whole.mean, rel=1e-12)
  assert merged.m2 == pytest.approx(whole.m2, rel=1e-9)
  assert (merged.min, merged.max) == (whole.min, whole.max)


def test_a_large_offset_keeps_the_variance():
  """Where sum-of-squares formulas cancel (values near 1e9, spread 1),
  the parallel update stays exact to float64 precision."""
  rng = np.random.default_rng(2)
  values = 1e9 + rng.normal(0.0, 1.0, 4096)
  merged = Moments()
  for part in np.array_split(values, 64):
    merged = merged.merge(Moments.of(part))
  assert merged.to_json()['std'] == pytest.approx(values.std(), rel=1e-6)


def test_empty():
  assert Moments.of(np.zeros(0)).to_json() == {
      'count': 0, 'mean': 0.0, 'std': 0.0, 'min': None, 'max': None}
  one = Moments.of(np.array([4.0]))
  assert Moments().merge(one) == one and one.merge(Moments()) == one


def test_an_array_of_many_cache_parts_matches_exact_sums():
  """Moments.of works in parts of a cache's size: over 2.5 parts, with a
  large offset, its mean and variance match exactly rounded sums."""
  rng = np.random.default_rng(3)
  values = (1e4 + rng.normal(0.0, 3.0, int(2.5 * cache_parts.VALUES))).astype(
      np.float32)
  exact = [float(v) for v in values]
  mean = math.fsum(exact) / len(exact)
  variance = math.fsum((v - mean) ** 2 for v in exact) / len(exact)
  m = Moments.of(values).to_json()
  assert m['count'] == values.size
  assert m['mean'] == pytest.approx(mean, rel=1e-13)
  assert m['std'] == pytest.approx(math.sqrt(variance), rel=1e-10)
  assert (m['min'], m['max']) == (float(values.min()), float(values.max()))


@pytest.mark.parametrize('cut', [1, 3, 5])
def test_a_shard_joined_from_pieces_has_the_moments_of_the_whole(cut):
  """Pieces that keep their batches' moments join into the very moments a
  shard written whole folds, to the last digit; merged as totals, they
  need not (floating-point merges do not associate)."""
  rng = np.random.default_rng(0)
  batches = [{'x': (rng.standard_normal((4, 37)) * (1 + i) + 3 * i)
              .astype(np.float32), 'n': np.arange(4) + i} for i in range(8)]
  whole = ExampleStats()
  for arrays in batches:
    whole.add_moments(arrays)
  joined = {}
  for kept in (True, False):
    pieces = [ExampleStats(moment_batches=[] if kept else None)
              for _ in range(2)]
    for i, arrays in enumerate(batches):
      pieces[i >= cut].add_moments(arrays)
    joined[kept] = ExampleStats()
    for piece in pieces:
      joined[kept].merge(piece)
  assert joined[True].moments == whole.moments
  assert joined[False].moments != whole.moments
  assert joined[False].moments['x'].mean == pytest.approx(
      whole.moments['x'].mean, rel=1e-12)
