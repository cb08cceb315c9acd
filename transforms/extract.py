"""Windows read from their files, their features computed a batch at a
time and their examples encoded: the work of a shard (shard_writer) and
of a sink's work unit (sink)."""

import dataclasses
import time
from typing import (Dict, Iterator, List, Mapping, Optional, Sequence,
                    Tuple)

import numpy as np

from pipeline.config import ConfigError, PipelineConfig
from pipeline.contract import example_codec
from pipeline.contract import schema as schema_lib
from transforms import audio
from transforms import features as F
from transforms import labels
from transforms import file_reports
from transforms import wav_io
from transforms.plan import (Chunk, FilePlan, chunk_input_range,
                             windows_per_chunk)
from transforms.stats import ExampleStats


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

  def compute(self, windows: np.ndarray,
              sample_rate: int) -> Dict[str, np.ndarray]:
    """(n, win_len) float64 windows -> {feature: (n, ...) array}."""
    c = self.config
    out = {}
    w32 = windows.astype(np.float32)
    if 'signal' in c.features:
      out['signal'] = audio.to_signal_dtype(windows, c.signal_dtype)
    if c.uses_stft:
      frames = F.windowed_frames(w32, c.n_fft, c.fft_hop, self._window)
      magnitude = F.frame_magnitude(frames)
      if 'spectrogram' in c.features:
        out['spectrogram'] = (F.log_compress(magnitude)
                              if c.spectrogram_scale == 'log' else magnitude)
      if c.uses_mel:
        log_mel = F.log_compress(
            F.mel_spectrogram(magnitude, self.filterbank(sample_rate)))
        if 'log_mel' in c.features:
          out['log_mel'] = log_mel
        if 'mfcc' in c.features:
          out['mfcc'] = F.mfcc(log_mel, c.n_mfcc)
      if 'lpc' in c.features:
        out['lpc'] = F.lpc(frames, c.lpc_order)
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

  Raises file_reports.BadWav for unreadable audio. Non-finite samples stay in:
  callers reject the windows they reach (see read_windows).
  """
  plan = chunk.plan
  start, stop = chunk_input_range(chunk, config.win_len, config.hop_len)
  try:
    if files is not None:
      block = files.read_range(plan.info.path, start, stop - start, plan.info)
    else:
      block = wav_io.read_range(plan.info.path, start, stop - start)
  except file_reports.BadWav:
    raise
  except file_reports.INPUT_ERRORS as e:
    raise file_reports.unreadable(e) from e
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
                 ) -> Tuple[np.ndarray, List[int],
                            List[file_reports.Rejection]]:
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
      except file_reports.BadWav as e:
        rejections.append(file_reports.Rejection(
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
          rejections.append(file_reports.Rejection(
              plan.info.path, 'non-finite samples (NaN or Inf)', 'read',
              chunk_input_range(one, config.win_len, config.hop_len)))
  kept = np.flatnonzero(good).tolist()
  return (out if good.all() else out[good]), kept, rejections


def _read_one(files: wav_io.OpenFiles, plan: FilePlan, window: int,
              config: PipelineConfig, row: np.ndarray,
              rejections: List[file_reports.Rejection]) -> bool:
  """Window `window` of an unresampled file into `row`; False if rejected."""
  start = window * config.hop_len
  n = min(config.win_len, plan.frames - start)
  frames = (start, start + n)
  try:
    block = files.read_range(plan.info.path, start, n, plan.info)
  except file_reports.BadWav as e:
    rejections.append(file_reports.Rejection(plan.info.path, str(e), 'read',
                                             frames))
    return False
  except file_reports.INPUT_ERRORS as e:
    rejections.append(file_reports.Rejection(
        plan.info.path, str(file_reports.unreadable(e)), 'read', frames))
    return False
  row[:n] = audio.mix_channels(block, config.channels)
  row[n:] = 0.0
  if not np.isfinite(row[:n]).all():
    rejections.append(file_reports.Rejection(
        plan.info.path, 'non-finite samples (NaN or Inf)', 'read', frames))
    return False
  return True


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


@dataclasses.dataclass(frozen=True)
class WindowBatch:
  """Windows read together, whose features are computed together."""
  refs: List[Tuple[int, int]]      # (file index, window), in written order
  windows: np.ndarray              # (len(refs), win_len) float64
  plans: Mapping[int, FilePlan]    # file index -> its plan


def read_batches(config: PipelineConfig, split: str, refs):
  """Refs [(FilePlan, window, key)] read in the order given -> WindowBatch
  of at most compute_windows() windows each, and a Rejection (with its
  split) per window that cannot be used. Reading depends only on the
  window options, so one read serves every feature setting."""
  plans = {plan.info.index: plan for plan, _, _ in refs}
  refs = [(plan.info.index, window) for plan, window, _ in refs]
  step = compute_windows(config.win_len)
  with wav_io.OpenFiles() as files:
    for start in range(0, len(refs), BATCH_WINDOWS):
      batch = refs[start:start + BATCH_WINDOWS]
      windows, kept, rejections = read_windows(batch, plans, config, files)
      for rejection in rejections:
        yield dataclasses.replace(rejection, split=split)
      kept_refs = [batch[i] for i in kept]
      for part in range(0, len(kept_refs), step):
        yield WindowBatch(kept_refs[part:part + step],
                          windows[part:part + step], plans)


class ExampleMaker:
  """Reads windows, computes their features and encodes their examples:
  the work of a shard task (WriteShard) or of a work unit (EncodeExamples).
  Not a DoFn: built in a DoFn's setup, one per worker thread, or in a
  forked worker. Counts nothing: Beam's counters exist only in a worker,
  so the DoFns count what it returns."""

  def __init__(self, config: PipelineConfig, extra_features=None):
    self.config = config
    self._extractor = FeatureExtractor(config, extra_features)

  def examples(self, split, refs, class_names, stats: ExampleStats):
    """Serialized examples of refs [(FilePlan, window, key)], in the order
    given, and a Rejection (with its split) per window that cannot be
    used; `stats` counts what is yielded."""
    for batch in read_batches(self.config, split, refs):
      if isinstance(batch, file_reports.Rejection):
        yield batch
      else:
        yield from self.encode(stats, batch, class_names)

  def encode(self, stats: ExampleStats, batch: 'WindowBatch', class_names):
    """The serialized examples of a batch of windows read by read_batches,
    in its order; `stats` counts them."""
    return self._encode(stats, batch.refs, batch.windows, batch.plans,
                        class_names)

  def _encode(self, stats, refs, windows, plans, class_names):
    columns = self._columns(refs, plans, class_names)
    started = time.perf_counter_ns()
    arrays = self._extractor.compute(windows, plans[refs[0][0]].sample_rate)
    stats.feature_ns += time.perf_counter_ns() - started
    stats.add_moments(arrays)
    columns.update(arrays)
    # Scalar columns have fixed types: a batch's schema can only change
    # with its arrays' dtypes or shapes.
    signature = tuple((k, a.dtype.str, a.shape[1:])
                      for k, a in sorted(arrays.items()))
    if signature != stats.schema_signature:
      stats.schema = stats.schema.merge(example_codec.batch_schema(columns))
      stats.schema_signature = signature
    for ref, record in zip(refs, example_codec.encode_batch(columns,
                                                            len(refs))):
      stats.add(plans[ref[0]].label, len(record))
      yield record

  def _columns(self, refs, plans, class_names):
    rows = [plans[index] for index, _ in refs]
    extras = {name: [dict(p.extras)[name] for p in rows]
              for name in self.config.manifest_extra_columns}
    return {
        **extras,
        schema_lib.CLASS_KEY: [p.label for p in rows],
        'filepath': [p.info.path for p in rows],
        'index': [p.info.index for p in rows],
        'num_classes': [len(class_names)] * len(rows),
        schema_lib.LABEL_KEY: [class_names.index(p.label) if p.label
                               else labels.NO_LABEL_TARGET for p in rows],
        'win_start_idx': [w * self.config.hop_len for _, w in refs],
    }
