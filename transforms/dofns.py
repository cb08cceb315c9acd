"""The pipeline's DoFns: small, stateless between elements, pickle-safe."""

import apache_beam as beam
from apache_beam import pvalue

from pipeline.config import PipelineConfig
from transforms import example_codec
from transforms import labels
from transforms import plan as plan_lib
from transforms import wav_io
from transforms.extract import FeatureExtractor, read_chunk_windows
from transforms.stats import ExampleStats

REJECTED = 'rejected'
STATS = 'stats'


class ProbeWav(beam.DoFn):
  """(index, path) -> WavInfo, or a Rejection on the 'rejected' output."""

  def process(self, indexed_path):
    index, path = indexed_path
    try:
      yield wav_io.probe(index, path)
    except wav_io.BadWav as e:
      yield pvalue.TaggedOutput(REJECTED, wav_io.Rejection(path, str(e),
                                                           'probe'))


class PlanWindows(beam.DoFn):
  """WavInfo -> FilePlan, or a Rejection (wrong rate, too short, no label)."""

  def __init__(self, config: PipelineConfig):
    self.config = config

  def process(self, info, dataset_rate):
    try:
      yield plan_lib.plan_file(info, self.config, dataset_rate)
    except wav_io.BadWav as e:
      yield pvalue.TaggedOutput(REJECTED,
                                wav_io.Rejection(info.path, str(e), 'plan'))


class EncodeChunk(beam.DoFn):
  """Chunk -> serialized tf.train.Examples, one per window.

  Also emits one ExampleStats per chunk on 'stats' (schema, counts, bytes),
  and a Rejection on 'rejected' when the chunk's audio cannot be used.
  """

  def __init__(self, config: PipelineConfig, extra_features=None):
    self.config = config
    self.extra_features = extra_features

  def setup(self):
    self._extractor = FeatureExtractor(self.config, self.extra_features)

  def process(self, chunk, class_names):
    plan = chunk.plan
    try:
      windows = read_chunk_windows(chunk, self.config)
    except wav_io.BadWav as e:
      start, stop = plan_lib.chunk_input_range(chunk, self.config.win_len,
                                               self.config.hop_len)
      yield pvalue.TaggedOutput(
          REJECTED, wav_io.Rejection(plan.info.path, str(e), 'read',
                                     (start, stop)))
      return
    arrays = self._extractor.compute(windows, plan.sample_rate)
    target = (class_names.index(plan.label) if plan.label
              else labels.NO_LABEL_TARGET)
    n = chunk.num_windows
    columns = {
        'class': [plan.label] * n,
        'filepath': [plan.info.path] * n,
        'index': [plan.info.index] * n,
        'num_classes': [len(class_names)] * n,
        'target': [target] * n,
        'win_start_idx': [(chunk.first_window + i) * self.config.hop_len
                          for i in range(n)],
        **arrays,
    }
    stats = ExampleStats(schema=example_codec.batch_schema(columns))
    for record in example_codec.encode_batch(columns, n):
      stats.add(plan.label, len(record))
      yield record
    yield pvalue.TaggedOutput(STATS, stats)
