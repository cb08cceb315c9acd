"""One chunk of a file -> batched arrays of every feature (numpy only)."""

from typing import (Dict, Iterator, List, Mapping, Optional, Sequence,
                    Tuple)

import numpy as np

from pipeline.config import PipelineConfig
from transforms import audio
from transforms import features as F
from transforms import records
from transforms import wav_io
from transforms.plan import (Chunk, FilePlan, chunk_input_range,
                             windows_per_chunk)


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


def read_chunk_windows(chunk: Chunk, config: PipelineConfig,
                       files: Optional[wav_io.OpenFiles] = None) -> np.ndarray:
  """The chunk's windows at the dataset's rate, (n, win_len) float64.

  Raises records.BadWav for unreadable audio. Non-finite samples stay in:
  callers reject the windows they reach (see read_windows).
  """
  plan = chunk.plan
  start, stop = chunk_input_range(chunk, config.win_len, config.hop_len)
  try:
    if files is not None:
      block = files.read_range(plan.info.path, start, stop - start, plan.info)
    else:
      block = wav_io.read_range(plan.info.path, start, stop - start)
  except records.BadWav:
    raise
  except records.INPUT_ERRORS as e:
    raise records.unreadable(e) from e
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


def _runs(windows: Sequence[int], limit: int) -> Iterator[Tuple[int, int]]:
  """Sorted window indices -> (first, count) runs of consecutive ones."""
  start = prev = None
  for w in windows:
    if start is not None and w == prev + 1 and w - start < limit:
      prev = w
      continue
    if start is not None:
      yield start, prev - start + 1
    start = prev = w
  if start is not None:
    yield start, prev - start + 1


def read_windows(refs: Sequence[Tuple[int, int]], plans: Mapping[int, FilePlan],
                 config: PipelineConfig,
                 files: Optional[wav_io.OpenFiles] = None
                 ) -> Tuple[np.ndarray, List[int], List[records.Rejection]]:
  """Windows for (file index, window) refs, float64, in the order given.

  Consecutive windows of a file are read as one range (bounded by the chunk
  budget). Returns (windows of the usable refs, positions of those refs in
  `refs`, rejections for the rest): a window touching NaN or Inf, or in a
  range that cannot be read, is rejected with its frame range.
  """
  where = {tuple(ref): i for i, ref in enumerate(refs)}
  out = np.empty((len(refs), config.win_len), np.float64)
  good = np.zeros(len(refs), bool)
  rejections = []
  by_file: Dict[int, List[int]] = {}
  for index, window in refs:
    by_file.setdefault(index, []).append(window)
  for index, windows in sorted(by_file.items()):
    plan = plans[index]
    limit = windows_per_chunk(plan, config.hop_len)
    same_rate = plan.info.sample_rate == plan.sample_rate
    for first, count in _runs(sorted(windows), limit):
      if count == 1 and same_rate and files is not None:
        # The shuffled case: one window, read straight into its row.
        row = where[(index, first)]
        if _read_one(files, plan, first, config, out[row], rejections):
          good[row] = True
        continue
      chunk = Chunk(plan, first, count)
      try:
        block = read_chunk_windows(chunk, config, files)
      except records.BadWav as e:
        rejections.append(records.Rejection(
            plan.info.path, str(e), 'read',
            chunk_input_range(chunk, config.win_len, config.hop_len)))
        continue
      finite = np.isfinite(block).all(axis=1)
      for i in range(count):
        if finite[i]:
          row = where[(index, first + i)]
          out[row] = block[i]
          good[row] = True
        else:
          one = Chunk(plan, first + i, 1)
          rejections.append(records.Rejection(
              plan.info.path, 'non-finite samples (NaN or Inf)', 'read',
              chunk_input_range(one, config.win_len, config.hop_len)))
  kept = np.flatnonzero(good).tolist()
  return (out if good.all() else out[good]), kept, rejections


def _read_one(files: wav_io.OpenFiles, plan: FilePlan, window: int,
              config: PipelineConfig, row: np.ndarray,
              rejections: List[records.Rejection]) -> bool:
  """Window `window` of an unresampled file into `row`; False if rejected."""
  start = window * config.hop_len
  n = min(config.win_len, plan.frames - start)
  frames = (start, start + n)
  try:
    block = files.read_range(plan.info.path, start, n, plan.info)
  except records.BadWav as e:
    rejections.append(records.Rejection(plan.info.path, str(e), 'read', frames))
    return False
  except records.INPUT_ERRORS as e:
    rejections.append(records.Rejection(
        plan.info.path, str(records.unreadable(e)), 'read', frames))
    return False
  row[:n] = audio.mix_channels(block, config.channels)
  row[n:] = 0.0
  if not np.isfinite(row[:n]).all():
    rejections.append(records.Rejection(
        plan.info.path, 'non-finite samples (NaN or Inf)', 'read', frames))
    return False
  return True
