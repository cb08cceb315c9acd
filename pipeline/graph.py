"""The wavbeam pipeline graph.

    wav paths -> probe headers -> plan windows (split, label, count)
      -> layout (per split: shard count, window positions; counts only)
      -> (split, shard, salt) <- window refs -> GroupByKey (salt: see balance)
      -> per shard: read windows + features + encode + write (temp name)
    side outputs: per-shard stats (schema, counts), rejections
    final step (after every shard is written): rename shards into place,
      rejects.jsonl, then metadata.json

`build_pipeline(p, config)` only builds: it lists the input and checks the
options, and changes nothing on disk. The run step (pipeline.run) prepares
the output folder (pipeline.dataset_dir.prepare) and runs it.
"""

from typing import List, Optional, Tuple

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems

from pipeline import progress
from pipeline.config import ConfigError, PipelineConfig
from transforms import balance
from transforms import dofns
from transforms import finalize
from transforms import labels
from transforms import example_codec
from transforms import layout as layout_lib
from transforms import plan as plan_lib
from transforms import stats as stats_lib
from transforms import wav_io
from transforms.extract import FeatureExtractor
from transforms.features import ExtraFeatures


class SplitByType(beam.PTransform):
  """One stream of mixed records -> {name: PCollection of one type}.

  Stands in for tagged outputs, which Beam 2.77's DaskRunner merges into
  one stream (see README, "Running at scale").
  """

  def __init__(self, **types):
    super().__init__()
    self.types = types

  def expand(self, mixed):
    return {name: mixed | f'Only{name.title()}' >> beam.Filter(
        lambda record, cls: isinstance(record, cls), cls)
            for name, cls in self.types.items()}


class ListWavFiles(beam.PTransform):
  """The input files as blocks: (block, ((index, path), ...)), consecutive
  indices in each (plan.block_size of them).

  On Beam's DaskRunner, in exactly `dask_partitions` Dask partitions, which
  every later step keeps up to the shard grouping (see transforms/balance):
  `Create` of n elements makes ceil(n / floor(n / partitions)) of them, so
  201 elements in 2 partitions became 3. Created as that many lists
  instead, then flattened.
  """

  def __init__(self, indexed: List[Tuple[int, str]],
               dask_partitions: Optional[int] = None):
    super().__init__()
    self.indexed = indexed
    self.dask_partitions = dask_partitions

  def expand(self, root):
    size = plan_lib.block_size(len(self.indexed))
    blocks = [(b, tuple(self.indexed[start:start + size]))
              for b, start in enumerate(range(0, len(self.indexed), size))]
    if not self.dask_partitions:
      return root | 'Create' >> beam.Create(blocks)
    n = self.dask_partitions
    return (root
            | 'CreateOnePerPartition' >> beam.Create(
                [blocks[i::n] for i in range(n)])
            | 'OneBlockPerElement' >> beam.FlatMap(lambda blocks: blocks))


class ProbeAndPlan(beam.PTransform):
  """File blocks -> PlannedBlocks, rejecting what cannot become windows."""

  def __init__(self, config: PipelineConfig):
    super().__init__()
    self.config = config

  def expand(self, blocks):
    probed = (blocks
              | 'ProbeHeaders' >> beam.ParDo(dofns.ProbeBlock())
              | 'SplitProbed' >> SplitByType(ok=plan_lib.ProbedBlock,
                                             rejected=wav_io.Rejection))
    if self.config.sample_rate:
      rate = blocks.pipeline | 'GivenRate' >> beam.Create(
          [self.config.sample_rate])
    else:
      rate = (probed['ok']
              | 'CountRates' >> beam.CombineGlobally(stats_lib.CountRates())
              | 'MostCommonRate' >> beam.Map(plan_lib.most_common_rate))
    planned = (probed['ok']
               | 'PlanWindows' >> beam.ParDo(
                   dofns.PlanBlock(self.config),
                   dataset_rate=beam.pvalue.AsSingleton(rate))
               | 'SplitPlanned' >> SplitByType(ok=plan_lib.PlannedBlock,
                                               rejected=wav_io.Rejection))
    plans = planned['ok']
    if self.config.num_elems is not None:
      plans = plans | 'LimitToNumElems' >> LimitWindows(self.config.num_elems)
    rejected = ((probed['rejected'], planned['rejected'])
                | 'AllPlanRejections' >> beam.Flatten())
    return {'plans': plans, 'rejected': rejected, 'rate': rate,
            'planned': planned['ok'] | 'PlannedFiles' >> beam.Map(
                lambda b: stats_lib.PlannedFiles(
                    b.block, tuple(sorted(b.files_by_split().items()))))}


class LimitWindows(beam.PTransform):
  """Keeps the first `num_elems` windows of the corpus, in file order."""

  def __init__(self, num_elems: int):
    super().__init__()
    self.num_elems = num_elems

  def expand(self, blocks):
    allowed = (blocks
               | 'WindowCounts' >> beam.Map(
                   lambda b: (b.block, sum(p.num_windows for p in b.plans)))
               | 'AllCounts' >> beam.combiners.ToList()
               | 'Allocate' >> beam.Map(plan_lib.limit_windows,
                                        self.num_elems))
    return (blocks
            | 'ApplyLimit' >> beam.Map(
                lambda b, a: plan_lib.limit_block(b, a[b.block]),
                beam.pvalue.AsSingleton(allowed)))


class ClassNames(beam.PTransform):
  """File blocks -> one sorted list of class names for the corpus."""

  def __init__(self, config: PipelineConfig):
    super().__init__()
    self.config = config

  def expand(self, blocks):
    return (blocks
            | 'LabelsOf' >> beam.FlatMap(
                lambda block, c: sorted({labels.file_label(path, c)
                                         for _, path in block[1]}),
                self.config)
            | 'Distinct' >> beam.Distinct()
            | 'Collect' >> beam.combiners.ToList()
            | 'Sort' >> beam.Map(labels.class_names))


class PlanLayout(beam.PTransform):
  """PlannedBlocks -> {split: SplitLayout}: shard count and the position of
  each block's first window, from per-block counts (one entry per block and
  split, not per file)."""

  def __init__(self, config: PipelineConfig, example_bytes: int):
    super().__init__()
    self.config = config
    self.example_bytes = example_bytes

  def expand(self, blocks):
    c = self.config
    return (blocks
            | 'BlockCounts' >> beam.FlatMap(plan_lib.PlannedBlock.counts)
            | 'AllCounts' >> beam.combiners.ToList()
            | 'ComputeLayouts' >> beam.Map(
                layout_lib.compute_layouts, num_shards=c.num_shards,
                max_examples_per_shard=c.max_examples_per_shard,
                max_shard_bytes=c.max_shard_bytes,
                example_bytes=self.example_bytes))


class WriteShards(beam.PTransform):
  """PlannedBlocks -> shard files (temp names), stats and rejections.

  Only (file plan, window, sort key) references are grouped by shard; each
  shard task then reads its windows, computes features and writes its file.
  """

  def __init__(self, config: PipelineConfig, extra_features=None,
               dask_partitions: Optional[int] = None,
               run_id: Optional[str] = None):
    super().__init__()
    self.config = config
    self.extra_features = extra_features
    self.dask_partitions = dask_partitions
    self.run_id = run_id

  def expand(self, inputs):
    blocks, layouts, class_names = inputs
    c = self.config
    group_keys = layouts | 'ChooseGroupKeys' >> beam.Map(
        balance.dask_group_keys, self.dask_partitions)
    return (blocks
            | 'AssignWindowsToShards' >> beam.FlatMap(
                lambda b, layouts, keys: (
                    (keys[shard], ref) for shard, ref in layout_lib.block_refs(
                        b.block, b.plans, layouts, shuffle=not c.no_shuffle,
                        seed=c.shuffle_seed)),
                beam.pvalue.AsSingleton(layouts),
                beam.pvalue.AsSingleton(group_keys))
            | 'GroupByShard' >> beam.GroupByKey()
            | 'ComputeAndWrite' >> beam.ParDo(
                dofns.WriteShard(c, self.extra_features, self.run_id),
                class_names=beam.pvalue.AsSingleton(class_names))
          )


def build_pipeline(p: beam.Pipeline, config: PipelineConfig,
                   extra_features: Optional[ExtraFeatures] = None,
                   run_id: Optional[str] = None,
                   paths: Optional[List[str]] = None):
  """Adds the whole job to `p`; returns the PCollection of the metadata path.

  Lists the input and checks the feature functions now, so that bad options
  fail before anything runs. `extra_features` maps feature names to numpy
  functions (see transforms.features.FeatureFn). `run_id` is the id the run
  step marked the output folder with (dataset_dir.prepare): shard tasks and
  the final step check that the folder is still theirs. `paths`: the input
  listing, when the caller has made it (list_input).
  """
  paths = list_input(config) if paths is None else paths
  _check_extra_features(config, extra_features)
  example_bytes = estimate_example_bytes(config, extra_features)

  dask_partitions = _dask_partitions(p)
  indexed, unnamed = _usable_names(paths)
  files = p | 'ListWavFiles' >> ListWavFiles(indexed, dask_partitions)
  class_names = files | 'ClassNames' >> ClassNames(config)
  planned = files | 'ProbeAndPlan' >> ProbeAndPlan(config)
  plans = planned['plans']
  layouts = (plans
             | 'PlanLayout' >> PlanLayout(config, example_bytes)
             | 'RecordPlan' >> beam.Map(
                 progress.write_plan, dataset_dir=config.dataset_dir,
                 files_seen=len(paths), example_bytes=example_bytes))
  written = ((plans, layouts, class_names)
             | 'WriteShards' >> WriteShards(config, extra_features,
                                            dask_partitions, run_id))
  # Every result of the run goes through one combine into the final step's
  # main input: it runs after every shard is written, and runners that
  # compute only what the last transform needs, or recompute each side
  # input (Beam's DaskRunner), still run every branch, once.
  results = [written, planned['rejected'], planned['planned']]
  if unnamed:
    results.append(p | 'UndecodableNames' >> beam.Create(unnamed))
  summary = (results
             | 'AllResults' >> beam.Flatten()
             | 'SummarizeRun' >> beam.CombineGlobally(
                 stats_lib.SummarizeRun()))
  side = beam.pvalue
  return (summary
          | 'Finalize' >> beam.Map(
              finalize.finalize_dataset, config=config,
              files_seen=len(paths), run_id=run_id,
              expected_schema=expected_schema(config, extra_features),
              class_names=side.AsSingleton(class_names),
              sample_rate=side.AsSingleton(planned['rate']),
              layouts=side.AsSingleton(layouts)))


def _usable_names(paths: List[str]):
  """([(index, path)] to process, [Rejection] for names that are not UTF-8).

  A name that is not valid UTF-8 cannot be written in an example, a
  rejection or a Beam coder's string; it is rejected here, shown with its
  bytes as \\xNN, and counted like any other file.
  """
  indexed, unnamed = [], []
  for index, path in enumerate(paths):
    shown = wav_io.undecodable_name(path)
    if shown is None:
      indexed.append((index, path))
    else:
      unnamed.append(wav_io.Rejection(
          shown, 'file name is not valid UTF-8 (shown with its bytes as '
          '\\xNN): rename the file', 'list'))
  return indexed, unnamed


def _dask_partitions(p: beam.Pipeline) -> Optional[int]:
  """--dask_npartitions when the job runs on Beam's DaskRunner, else None."""
  if type(p.runner).__name__ != 'DaskRunner':
    return None
  return p.options.get_all_options().get('npartitions')


def _silent_example(config: PipelineConfig, extra_features=None) -> dict:
  """The columns of one example made from a silent window.

  Runs the extra feature functions once, so a broken one fails here.
  """
  extractor = FeatureExtractor(config, extra_features)
  arrays = extractor.compute(np.zeros((1, config.win_len)), 16000)
  return {'class': ['x' * 16], 'filepath': ['x' * 120], 'index': [0],
          'num_classes': [0], 'target': [0], 'win_start_idx': [0], **arrays}


def estimate_example_bytes(config: PipelineConfig,
                           extra_features=None) -> int:
  """Serialized size of one example, from a silent window (sizes only)."""
  columns = _silent_example(config, extra_features)
  return len(example_codec.encode_batch(columns, 1)[0]) + 16


def expected_schema(config: PipelineConfig, extra_features=None):
  """The schema examples will have: what an empty dataset records, so that
  its readers still know every feature's dtype and shape."""
  return example_codec.batch_schema(_silent_example(config, extra_features))


def list_input(config: PipelineConfig) -> List[str]:
  try:
    exists = FileSystems.exists(config.input_dir)
  except Exception as e:  # unknown scheme, no credentials, ...
    raise ConfigError('input_dir', config.input_dir, str(e)) from e
  if not exists:
    raise ConfigError('input_dir', config.input_dir, 'does not exist')
  paths = wav_io.list_wav_files(config.input_dir)
  if not paths:
    raise ConfigError('input_dir', config.input_dir,
                      'holds no .wav files (searched recursively)')
  return paths


def _check_extra_features(config, extra_features):
  reserved = set(config.features) | {'class', 'filepath', 'index',
                                     'num_classes', 'target', 'win_start_idx'}
  for name, fn in (extra_features or {}).items():
    if name in reserved:
      raise ConfigError('features', name, 'an extra feature may not reuse a '
                        'built-in key')
    if not callable(fn):
      raise ConfigError('features', name, 'extra feature is not callable')
