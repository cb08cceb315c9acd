"""A file's windows at the dataset's rate and their features, computed a
batch at a time: the numpy work a shard task (transforms/writing/extract)
and the inference featurizer (pipeline/featurizer) share, so that both give the
same bytes. No Beam: the file is read through whatever `files` the caller
has.
"""

from typing import Dict, Optional, Protocol

import numpy as np

from pipeline.config import ConfigError, PipelineConfig
from transforms.inputs import audio
from transforms.features import functions as F
from transforms.inputs import file_reports
from transforms.planning.rules import Chunk, chunk_input_range


class Files(Protocol):
  """What reads a file's frames: audio_io.OpenFiles in the pipeline."""

  def read_range(self, path: str, start: int, count: int,
                 probed: Optional[file_reports.WavInfo] = None
                 ) -> np.ndarray:
    """Frames [start, start + count) as (frames, channels) float64."""


class FeatureExtractor:
  """Computes the configured features for a batch of windows.

  Holds the analysis window and mel filterbanks so they are built once per
  worker, not once per chunk.
  """

  def __init__(self, config: PipelineConfig,
               extra_features: Optional[F.ExtraFeatures] = None):
    self.config = config
    self.extra_features = dict(extra_features or {})
    self._window = (F.window_function(config.fft_window, config.n_fft)
                    if config.uses_stft else None)
    self._filterbanks = {}

  def filterbank(self, sample_rate: int) -> np.ndarray:
    if sample_rate not in self._filterbanks:
      c = self.config
      if c.fmax is not None and c.fmax > sample_rate / 2:
        raise ConfigError('fmax', c.fmax, f'exceeds half the sample rate of '
                          f'the dataset in {c.dataset_dir} ({sample_rate} '
                          'Hz); lower it, or give --sample_rate')
      self._filterbanks[sample_rate] = F.mel_filterbank(
          c.n_mels, c.n_fft, sample_rate, c.fmin, c.fmax)
    return self._filterbanks[sample_rate]

  def compute(self, windows: np.ndarray, sample_rate: int,
              shared: Optional[dict] = None) -> Dict[str, np.ndarray]:
    """(n, win_len) float64 windows -> {feature: (n, ...) array}.

    `shared`: a dict kept for one batch of windows across the extractors
    of a sweep's variants: what depends only on the windows and on options
    two variants have in common (the signal, the STFT of one n_fft and
    hop, a filterbank's log-mel, ...) is computed once and the same array
    given to each."""
    c = self.config

    def once(key, make):
      if shared is None:
        return make()
      if key not in shared:
        shared[key] = make()
      return shared[key]

    out = {}
    w32 = once('float32', lambda: windows.astype(np.float32))
    if 'signal' in c.features:
      out['signal'] = once(('signal', c.signal_dtype),
                           lambda: audio.to_signal_dtype(windows,
                                                         c.signal_dtype))
    if c.uses_stft:
      stft = ('stft', c.n_fft, c.fft_hop, c.fft_window)
      frames = once(stft + ('frames',), lambda: F.windowed_frames(
          w32, c.n_fft, c.fft_hop, self._window))
      magnitude = once(stft, lambda: F.frame_magnitude(frames))
      if 'spectrogram' in c.features:
        out['spectrogram'] = (
            once(stft + ('log',), lambda: F.log_compress(magnitude))
            if c.spectrogram_scale == 'log' else magnitude)
      if c.uses_mel:
        mel = stft + ('mel', c.n_mels, c.fmin, c.fmax, sample_rate)
        log_mel = once(mel, lambda: F.log_compress(
            F.mel_spectrogram(magnitude, self.filterbank(sample_rate))))
        if 'log_mel' in c.features:
          out['log_mel'] = log_mel
        if 'mfcc' in c.features:
          out['mfcc'] = once(mel + ('mfcc', c.n_mfcc),
                             lambda: F.mfcc(log_mel, c.n_mfcc))
      if 'lpc' in c.features:
        out['lpc'] = once(stft + ('lpc', c.lpc_order),
                          lambda: F.lpc(frames, c.lpc_order))
    if 'fft' in c.features:
      out['fft'] = once('fft', lambda: F.fft_magnitude(w32))
    for name, fn in self.extra_features.items():
      value = np.asarray(once(('extra', name),
                              lambda: self._extra(name, fn, w32,
                                                  sample_rate)))
      if value.ndim == 0 or value.shape[0] != windows.shape[0]:
        raise ValueError(
            f'feature function {name!r} returned shape {value.shape} for '
            f'{windows.shape[0]} windows; its first axis must be the window')
      out[name] = value
    return out

  def _extra(self, name, fn, windows: np.ndarray, sample_rate: int):
    """A feature function's value for a batch. Under --example_unit file
    or segment a function is given one example at a time, its whole
    length, as a (1, n) array (several of one length may share a batch
    here), and its rows are stacked."""
    if not self.config.variable_length or len(windows) == 1:
      return fn(windows, sample_rate)
    rows = []
    for i in range(len(windows)):
      value = np.asarray(fn(windows[i:i + 1], sample_rate))
      if value.ndim == 0 or value.shape[0] != 1:
        raise ValueError(
            f'feature function {name!r} returned shape {value.shape} for '
            'one recording; its first axis must be the recording')
      if rows and value.shape != rows[0].shape:
        raise ValueError(
            f'feature function {name!r} returned shapes {rows[0].shape} '
            f'and {value.shape} for two recordings; its result must have '
            'one shape for every recording')
      rows.append(value)
    return np.concatenate(rows)


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


def compute_windows(win_len: int) -> int:
  """Windows per feature batch (rows never interact: any batching gives
  the same bytes)."""
  return max(1, min(BATCH_WINDOWS, COMPUTE_SAMPLES // win_len))
