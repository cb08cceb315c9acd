"""One chunk of a file -> batched arrays of every feature (numpy only)."""

from typing import Dict, Optional

import numpy as np

from pipeline.config import PipelineConfig
from transforms import audio
from transforms import features as F
from transforms import wav_io
from transforms.plan import Chunk, chunk_input_range


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
      self._filterbanks[sample_rate] = F.mel_filterbank(
          self.config.n_mels, self.config.n_fft, sample_rate)
    return self._filterbanks[sample_rate]

  def compute(self, windows: np.ndarray,
              sample_rate: int) -> Dict[str, np.ndarray]:
    """(n, win_len) float64 windows -> {feature: (n, ...) array}."""
    c = self.config
    out = {}
    w32 = windows.astype(np.float32)
    if 'signal' in c.features:
      out['signal'] = audio.to_signal_dtype(windows, c.signal_dtype)
    if c.uses_stft:
      magnitude = F.stft_magnitude(w32, c.n_fft, c.fft_hop, self._window)
      if 'spectrogram' in c.features:
        out['spectrogram'] = (F.log_compress(magnitude)
                              if c.spectrogram_scale == 'log' else magnitude)
      if 'log_mel' in c.features:
        out['log_mel'] = F.log_compress(
            F.mel_spectrogram(magnitude, self.filterbank(sample_rate)))
    if 'fft' in c.features:
      out['fft'] = F.fft_magnitude(w32)
    for name, fn in self.extra_features.items():
      value = np.asarray(fn(w32, sample_rate))
      if value.ndim == 0 or value.shape[0] != windows.shape[0]:
        raise ValueError(
            f'feature function {name!r} returned shape {value.shape} for '
            f'{windows.shape[0]} windows; its first axis must be the window')
      out[name] = value
    return out


def read_chunk_windows(chunk: Chunk, config: PipelineConfig) -> np.ndarray:
  """The chunk's windows at the dataset's rate, (n, win_len) float64.

  Raises wav_io.BadWav for unreadable or non-finite audio.
  """
  plan = chunk.plan
  start, stop = chunk_input_range(chunk, config.win_len, config.hop_len)
  try:
    block = wav_io.read_range(plan.info.path, start, stop - start)
  except wav_io.BadWav:
    raise
  except wav_io.INPUT_ERRORS as e:
    raise wav_io.BadWav(f'unreadable: {wav_io._short(e)}') from e
  if not np.isfinite(block).all():
    raise wav_io.BadWav('non-finite samples (NaN or Inf)')
  mono = audio.mix_channels(block, config.channels)
  out_start = chunk.first_window * config.hop_len
  if plan.info.sample_rate != plan.sample_rate:
    out_stop = min(plan.frames, out_start +
                   (chunk.num_windows - 1) * config.hop_len + config.win_len)
    mono = audio.resample_range(mono, start, plan.info.frames,
                                plan.info.sample_rate, plan.sample_rate,
                                out_start, out_stop - out_start)
  starts = np.arange(chunk.num_windows, dtype=np.int64) * config.hop_len
  return audio.slice_windows(mono, starts, config.win_len)
