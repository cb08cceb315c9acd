"""What the example stream holds, merged across workers by a CombineFn."""

import collections
import dataclasses
import math
from typing import Dict, List, Optional, Tuple

import apache_beam as beam
import numpy as np

from pipeline.contract import schema as schema_lib
from transforms.runtime import cache_parts
from transforms.planning.block_rejects import BlockRejects
from transforms.inputs.blocks import ListedFiles, PlannedFiles
from transforms.inputs.file_reports import Rejection


@dataclasses.dataclass(frozen=True)
class ShardStats:
  """A shard as written: which file, how many records, how many bytes."""
  split: str
  shard: int
  path: str          # where it was written (a temp name until finalized)
  num_examples: int
  num_bytes: int     # file size on disk
  # When this attempt started and finished (ms since the epoch): the first
  # start and last finish bound the phase that scales with workers.
  started_ms: int
  finished_ms: int
  # Shards of the split, when the writer chose it (Beam's file-based sink's
  # -of-NNNNN); 0 when the layout decided it.
  num_shards: int = 0
  # Its `tfrecord`-package index (naming.index_name), when uncompressed.
  index_path: str = ''
  # Its ArrayRecord copy (--array_record), and that file's size.
  array_record_path: str = ''
  array_record_bytes: int = 0
  array_record_crc32c: int = -1  # array_record_file.fingerprint
  # tfrecord.RecordsDigest of its records (-1: not known).
  records_crc32c: int = -1
  # Written by an earlier attempt of the run and kept (--resume).
  kept: bool = False


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
    values = np.asarray(values).ravel()
    if values.size == 0:
      return cls()
    # min and max in the stored dtype: exact, and half the bytes of
    # float64 for int32 and float32.
    low, high = float(values.min()), float(values.max())
    # The rest a part at a time (cache_parts), each part's float64 copy
    # worked in place, the parts merged (merge). numpy's own loops, not
    # BLAS: BLAS would wake its thread pool, whose spinning threads compete
    # with the pipeline's workers, and split its sums by thread, so that
    # the last bits of metadata.json would follow the thread count.
    if values.size <= cache_parts.VALUES:  # one part: no scratch, no merge
      return cls._of_part(values.astype(np.float64), low, high)
    moments = cls()
    for _, part, deviations in cache_parts.parts(values):
      np.copyto(deviations, part, casting='unsafe')  # any numeric dtype
      moments = moments.merge(cls._of_part(deviations, low, high))
    return moments

  @classmethod
  def _of_part(cls, deviations: np.ndarray, low: float, high: float
               ) -> 'Moments':
    """The moments of a part's float64 values, which it overwrites."""
    mean = float(deviations.sum()) / deviations.size
    deviations -= mean
    np.square(deviations, out=deviations)
    return cls(deviations.size, mean, float(deviations.sum()), low, high)

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
  """What one shard task wrote: schema, counts, bytes, moments."""
  split: str = ''
  shard: int = -1
  schema: schema_lib.Schema = dataclasses.field(
      default_factory=schema_lib.Schema)
  num_examples: int = 0
  example_bytes: int = 0   # sum of serialized example sizes (no framing)
  per_class: collections.Counter = dataclasses.field(
      default_factory=collections.Counter)
  moments: Dict[str, Moments] = dataclasses.field(default_factory=dict)
  # What the schema was last computed from (see ExampleMaker); not merged.
  schema_signature: tuple = dataclasses.field(default=(), compare=False,
                                              repr=False)
  # When its encoding began (ms since the epoch; 0: not recorded). With
  # --sink write_to_tfrecord, shards are written as examples are encoded:
  # the first unit's start is the shard phase's.
  started_ms: int = dataclasses.field(default=0, compare=False)
  # Time spent computing features (ns, summed over the task's batches):
  # what a sweep's variants cost apart from reading and writing.
  feature_ns: int = dataclasses.field(default=0, compare=False)
  # Likewise: reading windows (decoding and resampling, extract.timed), and
  # encoding examples (their columns, moments, schema and serialization:
  # all of extract.ExampleMaker's work but features) and writing them
  # (shard files opened, records appended, closed, indexed: shard_writer).
  read_ns: int = dataclasses.field(default=0, compare=False)
  encode_ns: int = dataclasses.field(default=0, compare=False)
  write_ns: int = dataclasses.field(default=0, compare=False)
  # Of a piece of a shard (sweep_writer.Piece): each batch's moments, in
  # order, so that the shard joined from its pieces folds the very batches
  # a shard written whole folds, and its statistics are the same to the
  # last digit (merge); None where only the total is kept.
  moment_batches: Optional[List[Dict[str, Moments]]] = dataclasses.field(
      default=None, compare=False)

  def add(self, label: str, num_bytes: int) -> None:
    self.num_examples += 1
    self.example_bytes += num_bytes
    self.per_class[label] += 1

  def merge(self, other: 'ExampleStats') -> None:
    """Adds the counts of examples written after these (a shard's parts,
    in order)."""
    self.num_examples += other.num_examples
    self.example_bytes += other.example_bytes
    self.feature_ns += other.feature_ns
    self.read_ns += other.read_ns
    self.encode_ns += other.encode_ns
    self.write_ns += other.write_ns
    self.per_class.update(other.per_class)
    self.schema = self.schema.merge(other.schema)
    # Floating-point merges do not associate: where `other` kept its
    # batches, they are folded in one by one, as if added here.
    for batch in (other.moment_batches if other.moment_batches is not None
                  else [other.moments]):
      self._fold(batch)
      if self.moment_batches is not None:
        self.moment_batches.append(batch)

  def _fold(self, batch: Dict[str, Moments]) -> None:
    for key, m in sorted(batch.items()):
      self.moments[key] = self.moments.get(key, Moments()).merge(m)

  def add_moments(self, arrays: Dict[str, np.ndarray],
                  shared: Optional[dict] = None) -> None:
    """`shared`: FeatureExtractor.compute's, so that an array two variants
    share has its moments computed once."""
    batch = {}
    for key, values in arrays.items():
      if np.issubdtype(np.asarray(values).dtype, np.number):
        if shared is None:
          batch[key] = Moments.of(values)
        else:
          batch[key] = shared.get(('moments', id(values)))
          if batch[key] is None:
            batch[key] = shared[('moments', id(values))] = Moments.of(values)
    self._fold(batch)
    if self.moment_batches is not None:
      self.moment_batches.append(batch)


@dataclasses.dataclass
class SplitSummary:
  """All shards of a split, each counted once, merged in shard order.

  Keyed by shard: a shard reported twice (a retried bundle, or a runner
  that repeats outputs) replaces itself instead of counting twice, and
  floating-point merges, which do not commute, always run in the same
  order, so metadata is the same bytes on every run.
  """
  split: str = ''
  shards: Dict[int, ExampleStats] = dataclasses.field(default_factory=dict)

  def add(self, stats: ExampleStats) -> None:
    known = self.shards.get(stats.shard)
    if known is not None and (known.num_examples, known.example_bytes) != (
        stats.num_examples, stats.example_bytes):
      raise ValueError(f'shard {stats.shard} of split {stats.split!r} '
                       'reported twice with different contents')
    self.split = self.split or stats.split
    self.shards[stats.shard] = stats

  def _ordered(self):
    return [self.shards[k] for k in sorted(self.shards)]

  @property
  def schema(self) -> schema_lib.Schema:
    """Raises SchemaError naming the key when shards disagree."""
    schema = schema_lib.Schema()
    for s in self._ordered():
      schema = schema.merge(s.schema)
    return schema

  @property
  def num_examples(self) -> int:
    return sum(s.num_examples for s in self._ordered())

  @property
  def example_bytes(self) -> int:
    return sum(s.example_bytes for s in self._ordered())

  @property
  def feature_ns(self) -> int:
    return self.work_ns('feature_ns')

  def work_ns(self, name: str) -> int:
    """An ExampleStats time (`feature_ns`, `read_ns`, `encode_ns`,
    `write_ns`) summed over the split's shards."""
    return sum(getattr(s, name) for s in self._ordered())

  @property
  def per_class(self) -> collections.Counter:
    total = collections.Counter()
    for s in self._ordered():
      total.update(s.per_class)
    return total

  @property
  def moments(self) -> Dict[str, Moments]:
    total: Dict[str, Moments] = {}
    for s in self._ordered():
      for key, m in sorted(s.moments.items()):
        total[key] = total.get(key, Moments()).merge(m)
    return total


@dataclasses.dataclass
class RunSummary:
  """Everything the run reports, each record counted once (by identity)."""
  shards: Dict[tuple, object] = dataclasses.field(default_factory=dict)
  splits: Dict[str, SplitSummary] = dataclasses.field(default_factory=dict)
  # Rejections of the listing and of reads; those of probing and planning
  # are in files of their own (transforms/writing/block_rejects.py), one
  # per block.
  rejections: set = dataclasses.field(default_factory=set)
  block_rejects: Dict[int, BlockRejects] = dataclasses.field(
      default_factory=dict)
  planned: Dict[int, PlannedFiles] = dataclasses.field(
      default_factory=dict)   # block -> its files planned per split
  stores: Dict[int, str] = dataclasses.field(
      default_factory=dict)   # block -> its stored probes
  files_seen: int = 0

  def planned_by_split(self) -> Dict[str, int]:
    out: Dict[str, int] = collections.Counter()
    for record in self.planned.values():
      for split, n in record.files_by_split:
        out[split] += n
    return dict(out)

  def files_planned(self) -> int:
    """Recordings planned, each once whatever its splits."""
    return sum(record.num_files for record in self.planned.values())

  def split_overlap(self) -> Dict[Tuple[str, str], Tuple[int, int]]:
    """{(split a, split b): (recordings, frames)} the splits share."""
    out: Dict[Tuple[str, str], Tuple[int, int]] = {}
    for record in self.planned.values():
      for a, b, n, frames in record.split_overlap:
        known = out.get((a, b), (0, 0))
        out[(a, b)] = (known[0] + n, known[1] + frames)
    return out

  def add(self, record) -> None:
    if isinstance(record, ShardStats):
      key = (record.split, record.shard)
      known = self.shards.get(key)
      if known is None or record.path < known.path:  # one attempt per shard
        self.shards[key] = record
    elif isinstance(record, ExampleStats):
      self.splits.setdefault(record.split,
                             SplitSummary(split=record.split)).add(record)
    elif isinstance(record, Rejection):
      self.rejections.add(record)
    elif isinstance(record, BlockRejects):
      known = self.block_rejects.get(record.block)
      if known is None or record.path < known.path:  # one attempt per block
        self.block_rejects[record.block] = record
    elif isinstance(record, PlannedFiles):
      self.planned[record.block] = dataclasses.replace(record, store='')
      known = self.stores.get(record.block)
      if known is None or record.store < known:  # one attempt per block
        self.stores[record.block] = record.store
    elif isinstance(record, ListedFiles):  # one listing; delivered twice, once
      self.files_seen = record.count
    else:
      raise TypeError(f'unexpected record {record!r}')

  def merge(self, other: 'RunSummary') -> 'RunSummary':
    for record in other.shards.values():
      self.add(record)
    for summary in other.splits.values():
      for stats in summary.shards.values():
        self.add(stats)
    self.rejections |= other.rejections
    for part in other.block_rejects.values():
      self.add(part)
    self.planned.update(other.planned)
    for block, store in other.stores.items():
      self.add(dataclasses.replace(other.planned[block], store=store))
    self.files_seen = max(self.files_seen, other.files_seen)
    return self


class SummarizeRun(beam.CombineFn):
  """Shard results, per-shard stats, rejections, planned files -> RunSummary.

  One CombineFn over one flattened stream, so the final step has a single
  main input that depends on every write: runners that compute each side
  input's graph again (Beam's DaskRunner) then write every shard once.
  Raises SchemaError, naming the key, when shards disagree on a feature.
  """

  def create_accumulator(self):
    return RunSummary()

  def add_input(self, summary, record):
    summary.add(record)
    return summary

  def merge_accumulators(self, accumulators):
    merged = RunSummary()
    for summary in accumulators:
      merged.merge(summary)
    return merged

  def extract_output(self, summary):
    for split in summary.splits.values():
      split.schema  # pylint: disable=pointless-statement  # raises if mixed
    return summary


class SummarizeVariants(beam.CombineFn):
  """A sweep group's results -> {variant: RunSummary}, as SummarizeRun
  gives each variant's: a (variant, record) pair is that variant's own
  (its shards, stats and read rejections); any other record (a listing's,
  a plan's, a rejection made before reading) is every variant's."""

  def __init__(self, names):
    self.names = tuple(names)

  def create_accumulator(self):
    return {name: RunSummary() for name in self.names}

  def add_input(self, summaries, record):
    if isinstance(record, tuple):
      name, record = record
      summaries[name].add(record)
    else:
      for summary in summaries.values():
        summary.add(record)
    return summaries

  def merge_accumulators(self, accumulators):
    merged = self.create_accumulator()
    for summaries in accumulators:
      for name, summary in summaries.items():
        merged[name].merge(summary)
    return merged

  def extract_output(self, summaries):
    for summary in summaries.values():
      SummarizeRun().extract_output(summary)
    return summaries


class CountRates(beam.CombineFn):
  """StoredBlocks -> {sample rate: number of files}, each block counted
  once (a runner may deliver one twice)."""

  def create_accumulator(self):
    return {}

  def add_input(self, by_block, probed):
    by_block[probed.block] = collections.Counter(dict(probed.rate_counts))
    return by_block

  def merge_accumulators(self, accumulators):
    merged = {}
    for by_block in accumulators:
      merged.update(by_block)
    return merged

  def extract_output(self, by_block):
    total = collections.Counter()
    for counts in by_block.values():
      total.update(counts)
    return dict(total)
