"""What the example stream holds, merged across workers by a CombineFn."""

import collections
import dataclasses
import math
from typing import Dict

import apache_beam as beam
import numpy as np

from pipeline import schema as schema_lib


@dataclasses.dataclass
class Moments:
  """Streaming count, mean, variance, min and max in float64.

  Batches are merged with Chan et al.'s parallel update, which stays
  accurate where sum-of-squares formulas cancel.
  """
  count: int = 0
  mean: float = 0.0
  m2: float = 0.0          # sum of squared deviations from the mean
  min: float = math.inf
  max: float = -math.inf

  @classmethod
  def of(cls, values: np.ndarray) -> 'Moments':
    x = np.asarray(values).astype(np.float64, copy=False).ravel()
    if x.size == 0:
      return cls()
    mean = float(x.mean())
    deviations = x - mean
    # einsum, not np.dot: numpy's own loop. BLAS would wake its thread pool,
    # whose spinning threads compete with the pipeline's worker threads.
    m2 = float(np.einsum('i,i->', deviations, deviations))
    return cls(int(x.size), mean, m2, float(x.min()), float(x.max()))

  def merge(self, other: 'Moments') -> 'Moments':
    if other.count == 0:
      return self
    if self.count == 0:
      return dataclasses.replace(other)
    n = self.count + other.count
    delta = other.mean - self.mean
    return Moments(n, self.mean + delta * other.count / n,
                   self.m2 + other.m2 + delta * delta * self.count *
                   other.count / n,
                   min(self.min, other.min), max(self.max, other.max))

  def to_json(self) -> dict:
    std = math.sqrt(self.m2 / self.count) if self.count else 0.0
    return {'count': self.count, 'mean': self.mean, 'std': std,
            'min': self.min if self.count else None,
            'max': self.max if self.count else None}


@dataclasses.dataclass
class ExampleStats:
  split: str = ''
  schema: schema_lib.Schema = dataclasses.field(
      default_factory=schema_lib.Schema)
  num_examples: int = 0
  example_bytes: int = 0   # sum of serialized example sizes (no framing)
  per_class: collections.Counter = dataclasses.field(
      default_factory=collections.Counter)
  # Per shard, merged in shard order only at the end: floating-point merges
  # do not commute, and the metadata must be the same bytes on every run.
  shard_moments: Dict[int, Dict[str, Moments]] = dataclasses.field(
      default_factory=dict)

  def add_moments(self, shard: int, arrays: Dict[str, np.ndarray]) -> None:
    moments = self.shard_moments.setdefault(shard, {})
    for key, values in arrays.items():
      if np.issubdtype(np.asarray(values).dtype, np.number):
        moments[key] = moments.get(key, Moments()).merge(Moments.of(values))

  @property
  def moments(self) -> Dict[str, Moments]:
    total: Dict[str, Moments] = {}
    for shard in sorted(self.shard_moments):
      for key, m in sorted(self.shard_moments[shard].items()):
        total[key] = total.get(key, Moments()).merge(m)
    return total

  def add(self, label: str, num_bytes: int) -> None:
    self.num_examples += 1
    self.example_bytes += num_bytes
    self.per_class[label] += 1

  def merge(self, other: 'ExampleStats') -> 'ExampleStats':
    """Raises SchemaError naming the key when the schemas disagree."""
    self.split = self.split or other.split
    self.schema = self.schema.merge(other.schema)
    self.num_examples += other.num_examples
    self.example_bytes += other.example_bytes
    self.per_class.update(other.per_class)
    for shard, moments in other.shard_moments.items():
      if shard in self.shard_moments:
        raise ValueError(f'shard {shard} of split {self.split!r} counted twice')
      self.shard_moments[shard] = moments
    return self


class MergeExampleStats(beam.CombineFn):
  """ExampleStats per chunk -> one ExampleStats for the dataset."""

  def create_accumulator(self):
    return ExampleStats()

  def add_input(self, accumulator, stats):
    return accumulator.merge(stats)

  def merge_accumulators(self, accumulators):
    merged = ExampleStats()
    for acc in accumulators:
      merged.merge(acc)
    return merged

  def extract_output(self, accumulator):
    return accumulator


class CountRates(beam.CombineFn):
  """WavInfo -> {sample rate: number of files}."""

  def create_accumulator(self):
    return collections.Counter()

  def add_input(self, counts, info):
    counts[info.sample_rate] += 1
    return counts

  def merge_accumulators(self, accumulators):
    total = collections.Counter()
    for counts in accumulators:
      total.update(counts)
    return total

  def extract_output(self, counts):
    return dict(counts)
