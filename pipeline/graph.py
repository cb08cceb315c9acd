"""The wavbeam pipeline graph.

    input folder -> list (blocks of files) -> probe headers (stored per
      block, see transforms/planning/block_store) -> plan windows (split, label,
      count) -> layout (per split: shard count, window positions; counts
      per block only)
      -> blocks planned again -> (split, segment, salt) <- a block's
         window refs in that segment (shards, or a piece of one)
      -> GroupByKey (salt: see balance)
      -> per segment: read windows + features + encode + write (temp
         names); pieces of a shard joined into it
    side outputs: per-shard stats (schema, counts), rejections
    final step (after every shard is written): rename shards into place,
      rejects.jsonl, then metadata.json

`build_pipeline(p, config)` only builds: it checks the input folder and the
options, and changes nothing on disk. The run step (pipeline.run) prepares
the output folder (pipeline.output_folder.prepare) and runs it.
"""

import dataclasses
from typing import Optional

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems

from pipeline.contract import naming
from pipeline import progress
from pipeline import variants as variants_lib
from pipeline.contract import schema as schema_lib
from pipeline.config import ConfigError, PipelineConfig
from pipeline.contract import array_record_file
from transforms.planning import balance
from transforms.runtime import filesystem
from transforms.runtime import forked_workers
from transforms.runtime.forked_workers import in_child
from transforms.writing import augment
from transforms.writing import finalize
from transforms.inputs import labels
from pipeline.contract import example_codec
from transforms.planning import layout as layout_lib
from transforms.inputs import listing
from transforms.inputs import manifest as manifest_lib
from transforms.planning import rules as plan_lib
from transforms.planning import passes as planning
from transforms.inputs import probing
from transforms.planning import block_rejects
from transforms.runtime import output_lock as run_marker
from transforms.writing import sink
from transforms.inputs import split_lists
from transforms.writing import stats as stats_lib
from transforms.writing import sweep_writer
from transforms.inputs import audio_io
from transforms.features.extractor import as_stored
from transforms.writing.extract import FeatureExtractor, length_columns
from transforms.features.functions import ExtraFeatures
from transforms.features import registry
from transforms.inputs import blocks as blocks_lib


class SplitByType(beam.PTransform):
  """One stream of mixed records -> {name: PCollection of one type}.

  Stands in for tagged outputs, which Beam 2.77's DaskRunner merges into
  one stream (see docs/runners.md, "Dask").
  """

  def __init__(self, **types):
    super().__init__()
    self.types = types

  def expand(self, mixed):
    return {name: mixed | f'Only{name.title()}' >> beam.Filter(
        lambda record, cls: isinstance(record, cls), cls)
            for name, cls in self.types.items()}


class ListWavFiles(beam.PTransform):
  """input_dir -> {'blocks': (block, ((index, path), ...)) with consecutive
  indices (blocks.block_size of them), 'records': one ListedFiles and a
  Rejection per unusable name}.

  Listed by the job itself (one task; listing.ListBlocks), so the graph holds
  the folder's name and not its files, then spread over the workers.

  On Beam's DaskRunner the listing is made here, and the blocks are
  created in exactly `dask_partitions` Dask partitions, which every later
  step keeps up to the shard grouping (see transforms/planning/balance):
  one listing task would put every block in one partition. `Create` of n
  elements makes ceil(n / floor(n / partitions)) of them, so 201 elements in 2
  partitions became 3; created as that many lists instead, then flattened.
  """

  def __init__(self, config: PipelineConfig,
               dask_partitions: Optional[int] = None, base=None):
    super().__init__()
    self.config = config
    self.dask_partitions = dask_partitions
    self.base = base

  def expand(self, root):
    if not self.dask_partitions:
      # The one element is the one listing task's: an --append part's
      # paths travel to it there, not to every worker.
      listed = (root
                 | 'InputDir' >> beam.Create([(self.config, self.base)])
                 | 'ListInDir' >> beam.ParDo(listing.ListBlocks())
                 | 'SplitListing' >> SplitByType(
                     blocks=tuple, names=audio_io.Rejection,
                     count=blocks_lib.ListedFiles))
      return {'blocks': listed['blocks'] | 'Spread' >> beam.Reshuffle(),
              'records': (listed['names'], listed['count'])
                         | 'ListingRecords' >> beam.Flatten()}
    count, excluded, blocks, unusable = listing.list_input(self.config,
                                                           self.base)
    n = self.dask_partitions
    return {'blocks': (root
                       | 'CreateOnePerPartition' >> beam.Create(
                           [blocks[i::n] for i in range(n)])
                       | 'OneBlockPerElement' >> beam.FlatMap(
                           lambda blocks: blocks)),
            'records': root | 'ListingRecords' >> beam.Create(
                [blocks_lib.ListedFiles(count, excluded), *unusable])}


class ProbeAndPlan(beam.PTransform):
  """File blocks -> {'stored': StoredBlocks (probes kept per block, see
  transforms/planning/block_store), 'rate': the dataset's rate, and what
  plan_blocks gives: 'windows', 'planned', 'rejected', 'allowed'}.

  `plan_config`, when given, plans in place of `config`: a sweep's probes
  serve variants that keep other recordings (plan.planning_options)."""

  def __init__(self, config: PipelineConfig, dataset_rate=None,
               plan_config: Optional[PipelineConfig] = None):
    super().__init__()
    self.config = config
    self.dataset_rate = dataset_rate  # an --append part's: the dataset's
    self.plan_config = plan_config or config

  def expand(self, blocks):
    stored = blocks | 'ProbeHeaders' >> beam.ParDo(
        probing.ProbeBlock(self.config.dataset_dir))
    return {'stored': stored, **plan_stored_blocks(
        stored, self.config, self.dataset_rate, self.plan_config)}


def plan_stored_blocks(stored, config: PipelineConfig, dataset_rate=None,
                       plan_config: Optional[PipelineConfig] = None) -> dict:
  """StoredBlocks -> {'rate': the dataset's rate (given, or the most
  common of the probed files'), and what plan_blocks gives}: planning,
  for probes however they were made (bench.plan_scale makes them up)."""
  c = config
  if c.sample_rate or dataset_rate:
    rate = stored.pipeline | 'GivenRate' >> beam.Create(
        [c.sample_rate or dataset_rate])
  else:
    rate = (stored
            | 'CountRates' >> beam.CombineGlobally(stats_lib.CountRates())
            | 'MostCommonRate' >> beam.Map(plan_lib.most_common_rate))
  return {'rate': rate, **plan_blocks(stored, rate, plan_config or config)}


def plan_blocks(stored, rate, config: PipelineConfig, suffix: str = ''
                ) -> dict:
  """StoredBlocks and the dataset's rate -> {'windows': their
  BlockWindows, 'planned': PlannedFiles, 'rejected': BlockRejects
  (transforms/writing/block_rejects), 'allowed': the plan.Allowance of
  --silence_windows and --num_elems (else None)}. `suffix` tells apart
  the labels of a sweep's further plans of the same probes."""
  c = config
  planned = (stored
             | f'PlanWindows{suffix}' >> beam.ParDo(
                 planning.PlanBlock(c),
                 dataset_rate=beam.pvalue.AsSingleton(rate))
             | f'SplitPlanned{suffix}' >> SplitByType(
                 windows=plan_lib.BlockWindows,
                 files=blocks_lib.PlannedFiles,
                 rejected=block_rejects.BlockRejects))
  windows, allowed = planned['windows'], None
  if c.num_elems is not None or c.silence_windows is not None:
    allowed = (windows
               | f'AllCounts{suffix}' >> beam.combiners.ToList()
               | f'Allocate{suffix}' >> beam.Map(
                   plan_lib.allowance, num_elems=c.num_elems,
                   silence_windows=c.silence_windows))
    windows = stored | f'LimitWindows{suffix}' >> beam.Map(
        lambda stored, rate, allowed: planning.planned_block(
            stored, c, rate, allowed).windows(),
        beam.pvalue.AsSingleton(rate), beam.pvalue.AsSingleton(allowed))
  return {'windows': windows, 'planned': planned['files'],
          'rejected': planned['rejected'], 'allowed': allowed}


class ClassNames(beam.PTransform):
  """File blocks -> one list of class names for the corpus (after
  --label_map and --silence_from): sorted, after the `known` ones of the
  parts an --append extends. With `check`, raises ConfigError when
  --label_map names a class no file has (not in an --append part, whose
  files are only the new ones)."""

  def __init__(self, config: PipelineConfig, known=(), check=True):
    super().__init__()
    self.config = config
    self.known = tuple(known)
    self.check = check

  def expand(self, blocks):
    return (blocks
            | 'LabelsOf' >> beam.FlatMap(
                lambda block, c: labels.classes_of_block(block[1], c),
                self.config)
            | 'Distinct' >> beam.Distinct()
            | 'Collect' >> beam.combiners.ToList()
            | 'Sort' >> beam.Map(labels.dataset_classes, self.config,
                                 self.known, self.check))


class PlanLayouts(beam.PTransform):
  """BlockWindows -> {variant: {split: SplitLayout}}: each variant's
  ({variant: (config, example size)}; a single run's one) shard count and
  the position of each block's first window, from per-block counts (one
  entry per block and split, not per file), gathered once."""

  def __init__(self, variants):
    super().__init__()
    self.variants = variants

  def expand(self, block_windows):
    return (_all_counts(block_windows)
            | 'ComputeLayouts' >> beam.Map(_variant_layouts, self.variants))


def _all_counts(block_windows):
  return (block_windows
          | 'BlockCounts' >> beam.FlatMap(lambda b: b.counts)
          | 'AllCounts' >> beam.combiners.ToList())


def _layouts(counts, config: PipelineConfig,
             example_size: layout_lib.ExampleSize):
  c = config
  return layout_lib.compute_layouts(
      counts, num_shards=c.num_shards,
      max_examples_per_shard=c.max_examples_per_shard,
      max_shard_bytes=c.max_shard_bytes, example_bytes=example_size.fixed,
      frame_bytes=example_size.per_frame,
      max_shard_frames=registry.shard_samples(c),
      window_frames=None if c.variable_length else c.win_len)


def _variant_layouts(counts, variants):
  return {name: _layouts(counts, config, size)
          for name, (config, size) in variants.items()}


class WriteSegments(beam.PTransform):
  """StoredBlocks -> (variant, item) for every variant of a sweep (or
  the one of a single run): its shard files (temp names), stats and
  rejections, from one read of each window
  (transforms/writing/sweep_writer).

  Each block is planned again from its stored probes (with the dataset's
  rate, and the --num_elems allowance) and gives its windows' references
  (file plan, window, sort key); only those are grouped by segment (keys
  between shard starts, sweep_writer.segment_bounds: with `segments`,
  cut near that many equal shares of a split, or without it, between
  every two); each segment task reads its
  windows and writes every variant's shards, or pieces of shards, and
  pieces are then assembled into shards.
  """

  def __init__(self, config: PipelineConfig, variant_configs,
               extra_features=None, dask_partitions: Optional[int] = None,
               run_ids=None, allowed=None, segments: Optional[int] = None):
    super().__init__()
    self.segments = segments
    self.config = config
    self.variant_configs = variant_configs
    self.extra_features = extra_features
    self.dask_partitions = dask_partitions
    self.run_ids = run_ids
    self.allowed = allowed

  def expand(self, inputs):
    stored, layouts, class_names, rate = inputs
    c = self.config
    side = beam.pvalue
    bounds = layouts | 'CutSegments' >> beam.Map(
        sweep_writer.segment_bounds, self.segments)
    group_keys = bounds | 'ChooseGroupKeys' >> beam.Map(
        balance.dask_group_keys, self.dask_partitions,
        sizes_of=sweep_writer.segment_sizes)
    limit = _allowance(self.allowed)
    return (stored
            | 'AssignWindowsToSegments' >> beam.FlatMap(
                lambda stored, rate, layouts, bounds, keys, allowed=None: (
                    sweep_writer.segment_refs(stored, c, rate, layouts,
                                              bounds, keys, allowed)),
                side.AsSingleton(rate), side.AsSingleton(layouts),
                side.AsSingleton(bounds), side.AsSingleton(group_keys),
                **limit)
            | 'GroupBySegment' >> beam.GroupByKey()
            | 'ComputeAndWrite' >> beam.ParDo(
                sweep_writer.WriteSegment(self.variant_configs,
                                          self.extra_features, self.run_ids),
                bounds=side.AsSingleton(bounds),
                layouts=side.AsSingleton(layouts),
                class_names=side.AsSingleton(class_names))
            | 'AssembleShards' >> sweep_writer.AssembleShards(
                self.variant_configs, self.run_ids))


class EncodeAndWriteToTFRecord(beam.PTransform):
  """StoredBlocks -> examples written by Beam's file-based sink, one per
  split: the shape the project was specified with (--sink
  write_to_tfrecord). Windows go in work units of references to a ParDo
  that computes features and encodes and frames examples; its main output
  goes to the split's sink (beam.io.Write, as in WriteToTFRecord), its
  per-unit facts (schema, counts, statistics) and rejections to the run's
  summary combine, and each file the sink reports as written has its
  records counted, one element per file.
  Runner-chosen sharding unless --num_shards; no shuffle of any kind.

  Returns ShardStats, ExampleStats and Rejections, mixed.
  """

  def __init__(self, config: PipelineConfig, extra_features=None,
               allowed=None, variant_configs=None):
    super().__init__()
    self.config = config
    self.extra_features = extra_features
    self.allowed = allowed  # a plan.Allowance, or None
    # A sweep's {variant: config}: windows read once for all of them, and
    # every result is (variant, result).
    self.variant_configs = variant_configs

  def expand(self, inputs):
    stored, class_names, rate = inputs
    c = self.config
    side = beam.pvalue
    limit = _allowance(self.allowed)
    encoded = (stored
               | 'WorkUnits' >> beam.FlatMap(
                   lambda stored, rate, allowed=None: sink.work_units(
                       stored, c, rate, allowed),
                   side.AsSingleton(rate), **limit)
               | 'EncodeExamples' >> beam.ParDo(
                   sink.EncodeExamples(c, self.extra_features,
                                       self.variant_configs),
                   class_names=side.AsSingleton(class_names)))
    if self.variant_configs is None:
      return _write_encoded(encoded, c)
    results = []
    for name, variant in self.variant_configs.items():
      mine = encoded | f'Of[{name}]' >> beam.FlatMap(
          lambda item, name: [item[1]] if item[0] == name else [], name)
      results.append(
          _write_encoded(mine, variant, f'[{name}]')
          | f'Tag[{name}]' >> beam.Map(lambda item, name: (name, item),
                                       name))
    return results | 'SweepResults' >> beam.Flatten()


def _write_encoded(encoded, config: PipelineConfig, suffix: str = ''):
  """Framed records, stats and rejections, mixed -> ShardStats (one per
  file each split's sink wrote), ExampleStats and Rejections."""
  c = config
  encoded = encoded | f'SplitEncoded{suffix}' >> SplitByType(
      records=tuple, stats=stats_lib.ExampleStats, rejected=audio_io.Rejection)
  folder = naming.join(run_marker.temp_dir(c.dataset_dir), SINK_FOLDER)
  results = [encoded['stats'], encoded['rejected']]
  for i, split in enumerate(c.split_names):
    results.append(
        encoded['records']
        | f'RecordsOfSplit{i}{suffix}' >> beam.FlatMap(
            lambda record, split: [record[1]] if record[0] == split else [],
            split)
        | f'WriteToTFRecord{i}{suffix}' >> write_to_tfrecord(
            c, naming.join(folder, naming.shard_prefix(c.dataset_name,
                                                       split)))
        | f'CountRecords{i}{suffix}' >> beam.ParDo(
            sink.CountShard(split, c.compression)))
  return results | f'SinkResults{suffix}' >> beam.Flatten()


SINK_FOLDER = 'sink'  # in the temp folder: the file-based sink's output


def _allowance(allowed):
  """The `allowed` side input (a plan.Allowance: windows kept) as
  keyword arguments of a block-planning step; none without
  --silence_windows or --num_elems."""
  return {} if allowed is None else {'allowed': beam.pvalue.AsSingleton(
      allowed)}


def write_to_tfrecord(config: PipelineConfig, prefix: str):
  """Beam's file-based sink for one split's shards: beam.io.Write of a
  FramedRecordSink, the files WriteToTFRecord writes, with the records'
  framing done where they were encoded.

  Beam's FileBasedSink ends a file at the first record that reaches a
  cap: with runner-chosen sharding, --max_examples_per_shard caps records
  and otherwise --max_shard_bytes caps the bytes (before compression). A fixed
  --num_shards groups every example by shard instead, which the local
  runner holds in memory (4-6 GB at 1-2 h of audio).
  """
  caps = {}
  if not config.num_shards:
    caps = ({'max_records_per_shard': config.max_examples_per_shard}
            if config.max_examples_per_shard else
            {'max_bytes_per_shard': config.max_shard_bytes})
  return beam.io.Write(sink.FramedRecordSink(
      prefix, num_shards=config.num_shards or 0,
      shard_name_template=naming.SHARD_NAME_TEMPLATE,
      compression_type=filesystem.beam_compression(config.compression),
      **caps))


def build_pipeline(p: beam.Pipeline, config: PipelineConfig,
                   extra_features: Optional[ExtraFeatures] = None,
                   run_id: Optional[str] = None, base=None):
  """Adds the whole job to `p`; returns the PCollection of the metadata path.

  Checks the input folder and the feature functions now, so that bad
  options fail before anything runs. `extra_features` maps feature names to
  numpy functions (see transforms.features.functions.FeatureFn). `run_id`
  is the id the run step marked the output folder with
  (output_folder.prepare): shard tasks and the final step check that the
  folder is still theirs. `base` (append.AppendBase) makes the job an
  --append part: its paths, and the dataset's classes and sample rate.
  """
  check_input(config)
  _check_extra_features(config, extra_features)
  dask_partitions = _check_runner_and_sink(p, config)
  shared = _list_probe_and_plan(p, config, dask_partitions, base)
  # A sweep's group of one variant: the same steps, and a shard is cut
  # where no shard starts near a worker's equal share, so that no worker
  # waits idle (_segments).
  name = config.dataset_name
  configs = {name: config}
  layouts = _plan_layouts(
      shared, configs,
      {name: estimate_example_size(config, extra_features)})
  if config.sink == 'write_to_tfrecord':
    planned = shared['planned']
    written = ((planned['stored'], shared['class_names'], planned['rate'])
               | 'EncodeAndWriteToTFRecord' >> EncodeAndWriteToTFRecord(
                   config, extra_features, planned['allowed'])
               | 'OfTheRun' >> beam.Map(lambda item: (name, item)))
  else:
    written = _write_group(shared, config, configs, layouts, extra_features,
                           dask_partitions, {name: run_id},
                           segments=_segments(config))
  return _summarize_and_finalize(shared, written, configs, layouts,
                                 extra_features, {name: run_id})


def build_sweep_pipeline(p: beam.Pipeline, config: PipelineConfig,
                         variant_configs, extra_features=None,
                         run_ids=None, base=None):
  """Adds a sweep (--variants) to `p`: one job that lists and probes the
  audio once and writes every variant's dataset (its config in
  `variant_configs`, {name: PipelineConfig}, its run id in `run_ids`).
  Variants that keep the same recordings (variants.planning_groups) are
  planned and read together, once; a group that keeps others (features
  needing more samples than some recordings hold, under --example_unit
  file) is planned and read on its own, as a separate run would. `base`
  (append.AppendBase) makes the job an --append part of every variant.
  Returns the PCollection of the metadata paths, one element once every
  variant is final."""
  check_input(config)
  run_ids = dict(run_ids or {name: None for name in variant_configs})
  example_size = {}
  for name, variant in variant_configs.items():
    _check_extra_features(variant, extra_features)
    example_size[name] = estimate_example_size(variant, extra_features)
  dask_partitions = _check_runner_and_sink(p, config)
  groups = variants_lib.planning_groups(variant_configs)
  # A group plans as its variants do, with its rejections in the sweep's
  # own temp folder, which outlives every variant's final step.
  plan_configs = [dataclasses.replace(variant_configs[names[0]],
                                      output_dir=config.output_dir)
                  for names in groups]
  shared = _list_probe_and_plan(p, config, dask_partitions, base,
                                plan_configs[0])
  finals = []
  for names, plan_config in zip(groups, plan_configs):
    suffix = f'[{"+".join(names)}]' if len(groups) > 1 else ''
    mine = shared
    if plan_config is not plan_configs[0]:
      stored, rate = shared['planned']['stored'], shared['planned']['rate']
      mine = dict(shared, planned={
          'stored': stored, 'rate': rate,
          **plan_blocks(stored, rate, plan_config, suffix)})
    configs = {name: variant_configs[name] for name in names}
    # Each of the group's steps is one step for all its variants, not one
    # a variant: a sweep of many variants starts and finishes about as
    # fast as one run.
    layouts = _plan_layouts(
        mine, configs, {name: example_size[name] for name in names}, suffix)
    written = _write_group(mine, plan_config, configs, layouts,
                           extra_features, dask_partitions, run_ids, suffix,
                           _segments(plan_config, sweep=True))
    finals.append(_summarize_and_finalize(
        mine, written, configs, layouts, extra_features, run_ids, suffix))
  # One last step that depends on every variant's final step (Beam's
  # DaskRunner computes only what the last transform needs).
  return (finals
          | 'EveryGroup' >> beam.Flatten()
          | 'AllFinal' >> beam.combiners.ToList())


def _write_group(shared, plan_config, variant_configs, layouts,
                 extra_features, dask_partitions, run_ids, suffix='',
                 segments=None):
  """A group of variants that keep the same recordings (a sweep's, or a
  single run's one; planned with `plan_config`; `layouts`: {variant: its
  layouts}) -> (variant, item): each one's shards, stats and rejections,
  every window read once for the whole group; `segments`: WriteSegments'
  (_segments)."""
  planned, class_names = shared['planned'], shared['class_names']
  if plan_config.sink == 'write_to_tfrecord':
    return ((planned['stored'], class_names, planned['rate'])
            | f'EncodeAndWriteToTFRecord{suffix}' >> EncodeAndWriteToTFRecord(
                plan_config, extra_features, planned['allowed'],
                variant_configs))
  return ((planned['stored'], layouts, class_names, planned['rate'])
          | f'WriteSegments{suffix}' >> WriteSegments(
              plan_config, variant_configs, extra_features, dask_partitions,
              run_ids, planned['allowed'], segments))


def _segments(config: PipelineConfig, sweep: bool = False
              ) -> Optional[int]:
  """WriteSegments' segments a split: cut near one equal share a forked
  worker (at shard starts: the shards between are written whole, not
  copied together from pieces; where
  no shard starts near a share's end, a shard is cut there), and None
  where another runner spreads the tasks: a segment between every two
  shard starts. A single run of whole recordings or segments keeps its
  shards whole: examples of equal length are computed together, and a
  cut would change which (their statistics' last digits, a model's
  batches); a sweep's variants cut theirs all the same."""
  if config.variable_length and not sweep:
    return None
  return forked_workers.processes() or None


def _check_runner_and_sink(p: beam.Pipeline, config: PipelineConfig
                           ) -> Optional[int]:
  """Raises ConfigError for what this runner or file system cannot do;
  returns the Dask partitions (_dask_partitions)."""
  dask_partitions = _dask_partitions(p)
  if (type(p.runner).__name__ == 'DaskRunner' and
      config.sink == 'write_to_tfrecord'):
    # Run on a 2-worker cluster: the files came out empty (the sink's
    # write results reach its finalize step as an empty side input), and
    # the final step's count check refused to publish them.
    raise ConfigError('sink', config.sink, "Beam 2.77's DaskRunner loses "
                      "the records of Beam's file-based sink (its shards "
                      'come out empty); use --sink shards on Dask')
  if config.array_record:
    if not filesystem.is_local(config.dataset_dir):
      raise ConfigError('array_record', True, 'ArrayRecord files are written '
                        f'to local folders only, not {config.dataset_dir}: '
                        'write locally, then copy the dataset')
    if not array_record_file.available():
      raise ConfigError('array_record', True, 'needs the array-record '
                        "package: pip install '.[array_record]' (in the "
                        'wavbeam checkout)')
  return dask_partitions


def _list_probe_and_plan(p, config, dask_partitions, base=None,
                         plan_config=None) -> dict:
  """The steps before any shard: {'listed', 'files_seen' ((files seen,
  files excluded)), 'class_names', 'planned' (ProbeAndPlan's outputs,
  planned with `plan_config` when given)}."""
  listed = p | 'ListWavFiles' >> ListWavFiles(config, dask_partitions, base)
  files = listed['blocks']
  files_seen = (listed['records']
                | 'OnlyCount' >> beam.Filter(
                    lambda r: isinstance(r, blocks_lib.ListedFiles))
                | 'Counts' >> beam.Map(
                    lambda listed: (listed.count, listed.excluded))
                # One value even if a runner repeats the listing's output
                # (Beam's DaskRunner does): the same counts, taken once.
                | 'FilesSeen' >> beam.CombineGlobally(
                    lambda counts: max(counts, default=(0, 0))))
  class_names = files | 'ClassNames' >> ClassNames(
      config, base.classes if base else (), check=base is None)
  planned = files | 'ProbeAndPlan' >> ProbeAndPlan(
      config, base.sample_rate if base else None, plan_config)
  return {'listed': listed, 'files_seen': files_seen,
          'class_names': class_names, 'planned': planned}


def _plan_layouts(shared, variant_configs, example_sizes, suffix=''):
  """A group's layouts, {variant: {split: SplitLayout}}, each variant's
  plan recorded in its own folder (for the progress display)."""
  return (shared['planned']['windows']
          | f'PlanLayout{suffix}' >> PlanLayouts(
              {name: (variant, example_sizes[name])
               for name, variant in variant_configs.items()})
          | f'RecordPlan{suffix}' >> beam.Map(
              _record_plans, variant_configs=variant_configs,
              example_sizes=example_sizes,
              files_seen=beam.pvalue.AsSingleton(shared['files_seen'])))


def _record_plans(layouts, *, variant_configs, example_sizes, files_seen):
  return {name: progress.write_plan(
      layouts[name], dataset_dir=variant.dataset_dir, files_seen=files_seen,
      example_size=example_sizes[name])
          for name, variant in variant_configs.items()}


def _summarize_and_finalize(shared, written, variant_configs, layouts,
                            extra_features, run_ids, suffix=''):
  """A group's results (`written`: (variant, item)) -> every variant's
  metadata path. They go through one combine into {variant: RunSummary},
  the final step's main input, and one final step finalizes each variant
  in turn: it runs after every shard is written, and runners that
  compute only what the last transform needs, or recompute each side
  input (Beam's DaskRunner), still run every branch, once."""
  planned = shared['planned']
  summaries = ((written, planned['rejected'], planned['planned'],
                shared['listed']['records'])
               | f'AllResults{suffix}' >> beam.Flatten()
               | f'SummarizeRun{suffix}' >> beam.CombineGlobally(
                   stats_lib.SummarizeVariants(list(variant_configs))))
  side = beam.pvalue
  return (summaries
          | f'Finalize{suffix}' >> beam.FlatMap(
              finalize.finalize_variants, configs=variant_configs,
              run_ids={name: run_ids[name] for name in variant_configs},
              expected_schemas={
                  name: expected_schema(config, extra_features)
                  for name, config in variant_configs.items()},
              provenances={
                  name: registry.provenance(config, extra_features)
                  for name, config in variant_configs.items()},
              class_names=side.AsSingleton(shared['class_names']),
              sample_rate=side.AsSingleton(planned['rate']),
              layouts=side.AsSingleton(layouts)))


def _dask_partitions(p: beam.Pipeline) -> Optional[int]:
  """--dask_npartitions when the job runs on Beam's DaskRunner, else None."""
  if type(p.runner).__name__ != 'DaskRunner':
    return None
  return p.options.get_all_options().get('npartitions')


def _silent_example(config: PipelineConfig, extra_features=None,
                    frames: Optional[int] = None):
  """(columns of one example made from a silent window, {feature: its
  length key} of the variable-length ones). `frames`: the window's
  length under --example_unit file (a recording's).

  Runs the extra feature functions once, so a broken one fails here.
  """
  arrays = dict(_silent_arrays(config, extra_features,
                               frames or config.win_len))
  lengths = {}
  if config.variable_length:
    length_values, lengths = length_columns(arrays, config)
    arrays.update(length_values)
  columns = {schema_lib.CLASS_KEY: ['x' * 16], 'filepath': ['x' * 120],
             'index': [0], 'num_classes': [0], schema_lib.LABEL_KEY: [0],
             'win_start_idx': [0], **arrays}
  assert set(schema_lib.BASE_KEYS) <= set(columns)
  if config.augment:
    columns[augment.KEY] = ['x' * 64]
  if config.manifest_extra_columns:
    found = listing.read_manifest(config)
    for name in config.manifest_extra_columns:
      columns[name] = ([0] if found.extra_types[name] == manifest_lib.INT64
                       else ['x' * found.extra_widths[name]])
  return columns, lengths


# --example_unit file: the lengths, in STFT hops, of the two silent
# recordings whose sizes give an example's bytes per frame.
_SIZE_HOPS = (100, 200)

# The features of silent examples of the configs (the latest few) whose
# features load a model: {(config, id(extra_features)): (extra_features,
# {length: arrays})}, extra_features held so that its id stays its own.
_SILENT_OF_MODELS = {}
_SILENT_KEPT = 16


def _silent_arrays(config: PipelineConfig, extra_features, frames: int):
  """The features of a silent example of `frames` samples. Where one
  loads a model, every length the launcher asks of this config is
  computed at once in another process (forked_workers.in_child), so that
  the model's library (torch) is not held by the launcher for the whole
  job."""
  if not registry.loads_model(config, extra_features):
    return _silent_features(config, extra_features, [frames])[frames]
  key = (config, id(extra_features))
  if key not in _SILENT_OF_MODELS:
    lengths = ([silent_length(config, h) for h in (1,) + _SIZE_HOPS]
               if config.variable_length else [config.win_len])
    lengths = sorted(set(lengths + [frames]))
    _SILENT_OF_MODELS[key] = (extra_features, in_child(
        _silent_features, config, extra_features, lengths))
    while len(_SILENT_OF_MODELS) > _SILENT_KEPT:
      del _SILENT_OF_MODELS[next(iter(_SILENT_OF_MODELS))]
  found = _SILENT_OF_MODELS[key][1]
  if frames not in found:
    found.update(in_child(_silent_features, config, extra_features,
                          [frames]))
  return found[frames]


# Where the data's rate is not known yet, the rates a silent example is
# tried at, in this order: the usual ones first.
SILENT_RATES = (16000, 22050, 24000, 32000, 44100, 48000, 88200, 96000,
                192000, 12000, 11025, 8000)


def silent_rate(config: PipelineConfig) -> int:
  """The rate silent examples are computed at: --sample_rate, else the
  first of SILENT_RATES every feature's options fit (sizes and dtypes do
  not depend on it; the dataset's own rate is checked once known)."""
  if config.sample_rate:
    return config.sample_rate
  lowest = int(2 * max(config.fmax or 0, config.fmin)) + 2

  def fits(rate: int) -> bool:
    # A window too short for a frame at one rate (a Kaldi frame, a
    # model's receptive field) may hold one at another.
    return rate >= lowest and registry.fits_rate(config, rate) and (
        config.example_unit != 'window' or
        registry.min_samples(config, rate).samples <= config.win_len)

  return next((r for r in SILENT_RATES if fits(r)), max(16000, lowest))


def silent_length(config: PipelineConfig, hops: int = 1) -> int:
  """--example_unit file: the samples of a silent recording `hops` STFT
  hops past one frame, and long enough for every feature."""
  return max(config.n_fft, registry.min_samples(
      config, silent_rate(config)).samples) + hops * config.fft_hop


def _silent_features(config: PipelineConfig, extra_features, lengths):
  """{length: the features of a silent example of that many samples}."""
  extractor = FeatureExtractor(config, extra_features)
  # Sizes and dtypes do not depend on the rate; --fmin and --fmax must fit
  # under its Nyquist frequency (the dataset's own rate is checked when
  # known).
  rate = silent_rate(config)
  return {n: as_stored(extractor.compute(np.zeros((1, n)), rate),
                       config.feature_dtype) for n in lengths}


def estimate_example_size(config: PipelineConfig,
                          extra_features=None) -> layout_lib.ExampleSize:
  """Serialized size of one example, from silent windows (sizes only).

  Under --example_unit file each example's size is estimated from its
  recording's length: the sizes of two silent recordings give the bytes
  per frame and the fixed part, so shards are sized by the length of
  the files they will hold, not by an average."""
  def size(frames=None):
    columns, _ = _silent_example(config, extra_features, frames)
    return len(example_codec.encode_batch(columns, 1)[0]) + 16

  if not config.variable_length:
    return layout_lib.ExampleSize(size())
  short, long = (silent_length(config, h) for h in _SIZE_HOPS)
  per_frame = (size(long) - size(short)) / (long - short)
  return layout_lib.ExampleSize(
      max(0, round(size(short) - per_frame * short)), per_frame)


def expected_schema(config: PipelineConfig, extra_features=None):
  """The schema examples will have: what an empty dataset records, so that
  its readers still know every feature's dtype and shape."""
  frames = silent_length(config) if config.variable_length else None
  columns, lengths = _silent_example(config, extra_features, frames)
  return example_codec.batch_schema(columns).with_lengths(lengths)


def check_input(config: PipelineConfig) -> None:
  """Raises ConfigError unless input_dir exists and holds an audio file
  (and, with --label_from subdir or suffix, one it finds a class for)."""
  try:
    exists = FileSystems.exists(config.input_dir)
  except Exception as e:  # unknown scheme, no credentials, ...
    raise ConfigError('input_dir', config.input_dir, str(e)) from e
  if not exists:
    raise ConfigError('input_dir', config.input_dir, 'does not exist')
  augment.check_folders(config)
  if manifest_lib.has_manifest(config):
    found = listing.read_manifest(config)  # it parses
    if not found.entries:
      raise ConfigError(
          'manifest' if config.manifest else 'lhotse_recordings',
          found.text, 'has no rows')
    if config.has_segments and not any(e.segments
                                       for e in found.entries.values()):
      raise ConfigError(
          'manifest' if config.manifest else 'lhotse_supervisions',
          found.text, 'gives no segment')
  elif not audio_io.count_audio_files(config.input_dir, config.audio_formats,
                                    1):
    raise ConfigError('input_dir', config.input_dir, 'holds no '
                      f'{"/".join("." + f for f in config.audio_formats)} '
                      'files (searched recursively; see --audio_formats)')
  if config.split_lists:
    split_lists.listed_splits(config)  # readable, no path listed twice
  # An unlabeled corpus run without --label_from none: stopped here, not
  # after every file was read and rejected.
  labels.check_label_from(listing.label_from_paths(config), config)


def _check_extra_features(config, extra_features):
  reserved = (set(config.features) | set(schema_lib.BASE_KEYS) |
              set(config.manifest_extra_columns) |
              {schema_lib.NUM_SAMPLES_KEY, schema_lib.NUM_FRAMES_KEY} |
              set(registry.length_keys(config)))
  for name, fn in (extra_features or {}).items():
    if name in config.features and name in registry.names() and \
        registry.get(name).takes_object:
      continue  # what it computes with (the embedding's model handler)
    if name in reserved:
      raise ConfigError('features', name, 'an extra feature may not reuse a '
                        'built-in key')
    if not callable(fn):
      raise ConfigError('features', name, 'extra feature is not callable')
