"""The wavbeam pipeline graph.

    wav paths -> probe headers -> plan windows -> chunks (frame ranges)
      -> Reshuffle -> read + features + encode -> WriteToTFRecord (sharded)
    side outputs: per-chunk stats (schema, counts), rejections
    final step (after every shard is written): rejects.jsonl, metadata.json

`build_pipeline(p, config)` only builds; the caller runs. Tests build it on a
TestPipeline.
"""

import dataclasses
import logging
from typing import List, Optional

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline import naming
from pipeline.config import ConfigError, PipelineConfig
from transforms import dofns
from transforms import finalize
from transforms import labels
from transforms import plan as plan_lib
from transforms import shards
from transforms import stats as stats_lib
from transforms import wav_io
from transforms.features import ExtraFeatures


class ProbeAndPlan(beam.PTransform):
  """(index, path) -> FilePlan, rejecting what cannot become windows."""

  def __init__(self, config: PipelineConfig):
    super().__init__()
    self.config = config

  def expand(self, indexed_paths):
    probed = indexed_paths | 'ProbeHeaders' >> beam.ParDo(
        dofns.ProbeWav()).with_outputs(dofns.REJECTED, main='ok')
    if self.config.sample_rate:
      rate = indexed_paths.pipeline | 'GivenRate' >> beam.Create(
          [self.config.sample_rate])
    else:
      rate = (probed.ok
              | 'CountRates' >> beam.CombineGlobally(stats_lib.CountRates())
              | 'MostCommonRate' >> beam.Map(plan_lib.most_common_rate))
    planned = probed.ok | 'PlanWindows' >> beam.ParDo(
        dofns.PlanWindows(self.config),
        dataset_rate=beam.pvalue.AsSingleton(rate)).with_outputs(
            dofns.REJECTED, main='ok')
    plans = planned.ok
    if self.config.num_elems is not None:
      plans = plans | 'LimitToNumElems' >> LimitWindows(self.config.num_elems)
    rejected = ((probed[dofns.REJECTED], planned[dofns.REJECTED])
                | 'AllPlanRejections' >> beam.Flatten())
    return {'plans': plans, 'rejected': rejected, 'rate': rate,
            'planned_paths': planned.ok | 'PlannedPaths' >> beam.Map(
                lambda plan: plan.info.path)}


class LimitWindows(beam.PTransform):
  """Keeps the first `num_elems` windows of the corpus, in file order."""

  def __init__(self, num_elems: int):
    super().__init__()
    self.num_elems = num_elems

  def expand(self, plans):
    allowed = (plans
               | 'WindowCounts' >> beam.Map(lambda p: (p.info.index,
                                                       p.num_windows))
               | 'AllCounts' >> beam.combiners.ToList()
               | 'Allocate' >> beam.Map(plan_lib.limit_windows,
                                        self.num_elems))
    return (plans
            | 'ApplyLimit' >> beam.Map(
                lambda p, a: dataclasses.replace(
                    p, num_windows=a[p.info.index]),
                beam.pvalue.AsSingleton(allowed))
            | 'DropEmpty' >> beam.Filter(lambda p: p.num_windows > 0))


class ClassNames(beam.PTransform):
  """(index, path) -> one sorted list of class names for the corpus."""

  def __init__(self, label_from: str):
    super().__init__()
    self.label_from = label_from

  def expand(self, indexed_paths):
    return (indexed_paths
            | 'LabelOf' >> beam.Map(lambda ip: labels.label_of(
                ip[1], self.label_from))
            | 'Distinct' >> beam.Distinct()
            | 'Collect' >> beam.combiners.ToList()
            | 'Sort' >> beam.Map(labels.class_names))


class WindowsToExamples(beam.PTransform):
  """FilePlan -> serialized tf.train.Examples (+ stats and rejections)."""

  def __init__(self, config: PipelineConfig,
               extra_features: Optional[ExtraFeatures] = None):
    super().__init__()
    self.config = config
    self.extra_features = extra_features

  def expand(self, plans_and_classes):
    plans, class_names = plans_and_classes
    return (plans
            | 'SplitIntoChunks' >> beam.FlatMap(plan_lib.split_into_chunks,
                                                self.config.hop_len)
            # Chunks are tiny descriptors; spreading them before the
            # expensive step keeps every worker busy when one file is long.
            | 'SpreadChunks' >> beam.Reshuffle()
            | 'ComputeAndEncode' >> beam.ParDo(
                dofns.EncodeChunk(self.config, self.extra_features),
                class_names=beam.pvalue.AsSingleton(class_names)).with_outputs(
                    dofns.STATS, dofns.REJECTED, main='examples'))


def shard_writer(config: PipelineConfig, split: str) -> beam.PTransform:
  """WriteToTFRecord with wavbeam's sharding policy.

  Without --num_shards the runner chooses the count and each shard is capped
  (by bytes, or --max_examples_per_shard records): no GroupByKey of example
  data, so memory stays flat. WriteToTFRecord does not expose the caps of its
  FileBasedSink (Beam 2.77), so they are set on the sink it builds.
  """
  write = beam.io.WriteToTFRecord(
      naming.join(config.output_dir,
                  naming.shard_prefix(config.dataset_name, split)),
      num_shards=config.num_shards or 0,
      shard_name_template=naming.SHARD_NAME_TEMPLATE,
      compression_type=(CompressionTypes.GZIP if config.compression == 'gzip'
                        else CompressionTypes.UNCOMPRESSED))
  if config.max_examples_per_shard:
    write._sink.max_records_per_shard = config.max_examples_per_shard
  elif not config.num_shards:
    write._sink.max_bytes_per_shard = config.max_shard_bytes
  return write


def build_pipeline(p: beam.Pipeline, config: PipelineConfig,
                   extra_features: Optional[ExtraFeatures] = None):
  """Adds the whole job to `p`; returns the PCollection of the metadata path.

  Lists the input and checks the output folder now, so that bad options fail
  before anything runs. `extra_features` maps feature names to numpy
  functions (see transforms.features.FeatureFn).
  """
  paths = list_input(config)
  prepare_output_dir(config)
  _check_extra_features(config, extra_features)

  files = p | 'ListWavFiles' >> beam.Create(list(enumerate(paths)))
  class_names = files | 'ClassNames' >> ClassNames(config.label_from)
  planned = files | 'ProbeAndPlan' >> ProbeAndPlan(config)
  encoded = ((planned['plans'], class_names)
             | 'WindowsToExamples' >> WindowsToExamples(config,
                                                        extra_features))
  written = (encoded.examples
             | 'WriteShards' >> shard_writer(config, finalize.DEFAULT_SPLIT))
  shard_stats = written | 'CountShardRecords' >> beam.Map(
      shards.count_records, config.compression)
  example_stats = encoded[dofns.STATS] | 'MergeStats' >> beam.CombineGlobally(
      stats_lib.MergeExampleStats())
  rejected = ((planned['rejected'], encoded[dofns.REJECTED])
              | 'AllRejections' >> beam.Flatten())
  # The last step reads every other branch as a side input, so it runs only
  # after every shard is final, and runners that compute only what the last
  # transform needs (Beam's DaskRunner) still run the whole graph.
  side = beam.pvalue
  return (p
          | 'Once' >> beam.Create([None])
          | 'WriteMetadata' >> beam.Map(
              finalize.write_dataset_metadata, config=config,
              files_seen=len(paths),
              shard_stats=side.AsList(shard_stats),
              stats=side.AsSingleton(example_stats),
              rejects=side.AsList(rejected),
              planned_paths=side.AsList(planned['planned_paths']),
              class_names=side.AsSingleton(class_names),
              sample_rate=side.AsSingleton(planned['rate'])))


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


def dataset_files(config: PipelineConfig) -> List[str]:
  """Files of a wavbeam dataset already in the output folder."""
  out = config.output_dir
  if not FileSystems.exists(out):
    return []
  patterns = [naming.join(out, naming.METADATA_FILE),
              naming.join(out, naming.REJECTS_FILE),
              naming.join(out, f'{config.dataset_name}-*.tfrecord-*')]
  return sorted(m.path for r in FileSystems.match(patterns)
                for m in r.metadata_list)


def prepare_output_dir(config: PipelineConfig) -> None:
  """Refuses to mix with an earlier dataset unless --overwrite removes it."""
  existing = dataset_files(config)
  if not existing:
    return
  if not config.overwrite:
    complete = any(p.endswith('/' + naming.METADATA_FILE) for p in existing)
    what = ('a complete dataset' if complete
            else 'files of an incomplete earlier run')
    raise ConfigError(
        'output_dir', config.output_dir,
        f'already holds {what} ({len(existing)} files, e.g. '
        f'{existing[0]}); pass --overwrite to replace it')
  logging.info('--overwrite: removing %d files of the earlier dataset',
               len(existing))
  FileSystems.delete(existing)


def _check_extra_features(config, extra_features):
  reserved = set(config.features) | {'class', 'filepath', 'index',
                                     'num_classes', 'target', 'win_start_idx'}
  for name, fn in (extra_features or {}).items():
    if name in reserved:
      raise ConfigError('features', name, 'an extra feature may not reuse a '
                        'built-in key')
    if not callable(fn):
      raise ConfigError('features', name, 'extra feature is not callable')
