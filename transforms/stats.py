"""What the example stream holds, merged across workers by a CombineFn."""

import collections
import dataclasses

import apache_beam as beam

from pipeline import schema as schema_lib


@dataclasses.dataclass
class ExampleStats:
  split: str = ''
  schema: schema_lib.Schema = dataclasses.field(
      default_factory=schema_lib.Schema)
  num_examples: int = 0
  example_bytes: int = 0   # sum of serialized example sizes (no framing)
  per_class: collections.Counter = dataclasses.field(
      default_factory=collections.Counter)

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
