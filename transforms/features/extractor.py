"""A file's windows at the dataset's rate and their features, computed a
batch at a time: the numpy work a shard task (transforms/writing/extract)
and the inference featurizer (pipeline/featurizer) share, so that both give the
same bytes. No Beam: the file is read through whatever `files` the caller
has.
"""

from typing import Dict, Optional, Protocol

import numpy as np

from pipeline.config import PipelineConfig
from pipeline.contract import example_codec
from transforms.inputs import audio
from transforms.features import functions as F
from transforms.features import log_mel
from transforms.features import registry
from transforms.features.user_function import FunctionFeature
from transforms.inputs import file_reports
from transforms.planning.rules import Chunk, chunk_input_range


class Files(Protocol):
  """What reads a file's frames: audio_io.OpenFiles in the pipeline."""

  def read_range(self, path: str, start: int, count: int,
                 probed: Optional[file_reports.WavInfo] = None
                 ) -> np.ndarray:
    """Frames [start, start + count) as (frames, channels) float64."""


class FeatureExtractor:
  """Computes the configured features for a batch of windows, each by its
  plug-in (transforms/features/registry.py).

  Holds what depends on options alone (the analysis window, the mel
  filterbanks) so that it is built once per worker, not once per chunk.
  """

  def __init__(self, config: PipelineConfig,
               extra_features: Optional[F.ExtraFeatures] = None):
    self.config = config
    # A run's --feature_module plug-ins: imported in every process that
    # computes (a remote worker unpickles the config without them).
    registry.load_modules(config.feature_module)
    self.extra_features = dict(extra_features or {})
    # A function of the caller's own is a feature of its own; what the
    # caller gives a registered feature that takes one (the embedding
    # feature's model handler) is that feature's to compute with.
    taken = {name for name in self.extra_features
             if name in registry.names() and registry.get(name).takes_object}
    self._extra = {name: FunctionFeature(name, fn, config.variable_length)
                   for name, fn in self.extra_features.items()
                   if name not in taken}
    self._objects = {name: self.extra_features[name] for name in taken}
    self._constants = {}
    # The stored order: built-in features in the registry's order, then
    # the plug-ins', then the caller's functions.
    self._names = [n for n in registry.names() if n in config.features]

  def filterbank(self, sample_rate: int) -> np.ndarray:
    return log_mel.filterbank(self.config, sample_rate)

  def compute(self, windows: np.ndarray, sample_rate: int,
              shared: Optional[dict] = None,
              group=None) -> Dict[str, np.ndarray]:
    """(n, win_len) windows as read (full-scale float64, or int16 PCM
    values: audio.full_scale) -> {feature: (n, ...) array}.

    `shared`: a dict kept for one batch of windows across the extractors
    of a sweep's variants: what depends only on the windows and on options
    two variants have in common (the signal, the STFT of one n_fft and
    hop, a filterbank's log-mel, ...) is computed once and the same array
    given to each. `group`: (registry.ReadGroup, first row) of whole
    recordings read with these."""
    batch = registry.Batch(windows, sample_rate, self.config,
                           self._constants, shared, self._extra,
                           self._objects, group)
    out = {name: batch.get(name) for name in self._names}
    for name in self._extra:
      out[name] = batch.get(name)
    return out


def as_stored(arrays: Dict[str, np.ndarray], feature_dtype: str
              ) -> Dict[str, np.ndarray]:
  """The arrays as stored: every float32 one but the signal's as
  --feature_dtype, rounded to nearest even (numpy's cast; ml_dtypes' for
  bfloat16)."""
  if feature_dtype == 'float32':
    return arrays
  dtype = example_codec.numpy_dtype(feature_dtype)
  # Beyond float16's range a value becomes inf, as the cast does; the
  # run says so from the statistics (console.overflow_warnings).
  with np.errstate(over='ignore'):
    return {k: (a.astype(dtype) if a.dtype == np.float32 and k != 'signal'
                else a) for k, a in arrays.items()}


def read_chunk_windows(chunk: Chunk, config: PipelineConfig,
                       files: Files) -> np.ndarray:
  """The chunk's windows at the dataset's rate, (n, win_len) float64.

  Raises file_reports.BadWav for unreadable audio. Non-finite samples stay
  in: callers reject the windows they reach (see extract.read_windows).
  """
  plan = chunk.plan
  start, stop = chunk_input_range(chunk, config.win_len, config.hop_len)
  try:
    block = files.read_range(plan.info.path, start, stop - start, plan.info)
  except file_reports.BadWav:
    raise
  except file_reports.INPUT_ERRORS as e:
    raise file_reports.unreadable(e) from e
  mono = audio.one_channel(block, config.channels, chunk.channel)
  out_start = chunk.origin + chunk.first_window * config.hop_len
  if plan.info.sample_rate != plan.sample_rate:
    out_stop = min(chunk.limit, out_start +
                   (chunk.num_windows - 1) * config.hop_len + config.win_len)
    mono = audio.resample_range(mono, start, plan.info.frames,
                                plan.info.sample_rate, plan.sample_rate,
                                out_start, out_stop - out_start)
  starts = np.arange(chunk.num_windows, dtype=np.int64) * config.hop_len
  return audio.slice_windows(mono, starts, config.win_len)


def read_file_signal(plan, config: PipelineConfig, files: Files,
                     span=None) -> np.ndarray:
  """A whole recording (--example_unit file), or one span of it
  (--example_unit segment: a plan.Span), at the dataset's rate, channels
  mixed or the span's one taken, float64: the one window of its example.
  Raises file_reports.BadWav for unreadable audio; non-finite samples stay
  in."""
  info = plan.info
  start, stop = (0, plan.frames) if span is None else (span.start, span.stop)
  first, last = start, stop
  if info.sample_rate != plan.sample_rate:
    first, last = audio.resample_input_range(
        info.frames, info.sample_rate, plan.sample_rate, start, stop)
  try:
    block = files.read_range(info.path, first, last - first, info)
  except file_reports.BadWav:
    raise
  except file_reports.INPUT_ERRORS as e:
    raise file_reports.unreadable(e) from e
  mono = audio.one_channel(block, config.channels,
                           None if span is None else span.channel)
  if info.sample_rate != plan.sample_rate:
    mono = audio.resample_range(mono, first, info.frames, info.sample_rate,
                                plan.sample_rate, start, stop - start)
  return np.ascontiguousarray(mono, np.float64)


# Windows read together. The grouping decides where reads seek, and a
# compressed stream (MP3 content named .wav) decodes differently after a
# seek, so it stays fixed: the hostile-input test checks those bytes.
BATCH_WINDOWS = 32
# Samples computed together: 4 windows of 32768 (4 x 127 STFT frames) still
# vectorize the FFT, and each array (~0.5-1 MB) fits a core's own 1 MB L2
# cache, so two worker processes do not evict each other's data from the
# shared L3. Against 8 such windows: shard phase 4% faster with 1 worker
# process, 18% with 2 (1.89x instead of 1.65x the 1-worker rate); 32 at
# once is slower still (bench.fft). Shorter windows go more at a time,
# the same samples per batch, so per-batch costs do not grow per example.
COMPUTE_SAMPLES = 4 * 32768


def compute_windows(win_len: int, batch_samples: Optional[int] = None
                    ) -> int:
  """Windows per feature batch (rows never interact: any batching gives
  the same bytes); more where the features ask for `batch_samples`
  together (a model's forward pass: registry.batch_samples), up to
  MODEL_BATCH_WINDOWS."""
  if batch_samples:
    return max(1, min(MODEL_BATCH_WINDOWS, batch_samples // win_len))
  return max(1, min(BATCH_WINDOWS, COMPUTE_SAMPLES // win_len))


# At most this many examples in one batch for a model (64 clips of 10 s:
# a GPU's usual batch).
MODEL_BATCH_WINDOWS = 64
