"""Windows read from their files, their features computed a batch at a
time (transforms/features/extractor) and their examples encoded: the work of
a segment task (sweep_writer) and of a sink's work unit (sink)."""

import dataclasses
import time
from typing import (Dict, Iterator, List, Mapping, Optional, Sequence,
                    Tuple)

import numpy as np

from pipeline.config import PipelineConfig
from pipeline.contract import example_codec
from pipeline.contract import schema as schema_lib
from transforms.inputs import audio
from transforms.inputs import labels
from transforms.inputs import file_reports
from transforms.inputs import audio_io
from transforms.features import extractor as window_features
from transforms.features import registry
from transforms.planning.rules import (Chunk, FilePlan, chunk_input_range,
                             windows_per_chunk)
from transforms.writing import augment
from transforms.writing.stats import ExampleStats
# The numpy work lives in window_features (no Beam, shared with the
# inference featurizer); its names stay reachable here.
from transforms.features.extractor import (  # noqa: F401
    BATCH_WINDOWS, COMPUTE_SAMPLES, FeatureExtractor, compute_windows)


class _Unopened:
  """Files opened for each read (audio_io.read_range), as a caller without
  an OpenFiles reads."""

  @staticmethod
  def read_range(path, start, count, probed=None):
    del probed
    return audio_io.read_range(path, start, count)


def read_chunk_windows(chunk: Chunk, config: PipelineConfig,
                       files: Optional[audio_io.OpenFiles] = None
                       ) -> np.ndarray:
  """window_features.read_chunk_windows, through `files` or, without
  them, opening the file for the read."""
  return window_features.read_chunk_windows(
      chunk, config, _Unopened() if files is None else files)


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
                 files: Optional[audio_io.OpenFiles] = None
                 ) -> Tuple[np.ndarray, List[int],
                            List[file_reports.Rejection]]:
  """Windows for (plan key, window) refs, in the order given: the int16
  values stored (audio.full_scale) where every one comes from a mono
  16-bit PCM recording at the dataset's rate, else full-scale float64.

  Consecutive windows of a file are read as one range (bounded by the chunk
  budget). Returns (windows of the usable refs, positions of those refs in
  `refs`, rejections for the rest): a window touching NaN or Inf, or in a
  range that cannot be read, is rejected with its frame range.
  """
  where = {tuple(ref): i for i, ref in enumerate(refs)}
  by_file: Dict[int, List[int]] = {}
  for index, window in refs:
    by_file.setdefault(index, []).append(window)
  stored = all(_pcm16_as_read(plans[index]) for index in by_file)
  out = np.empty((len(refs), config.win_len),
                 np.int16 if stored else np.float64)
  good = np.zeros(len(refs), bool)
  rejections = []
  for index, windows in sorted(by_file.items()):
    plan = plans[index]
    limit = windows_per_chunk(plan, config.hop_len)
    same_rate = plan.info.sample_rate == plan.sample_rate
    for first, count, chunk in _chunks(plan, sorted(windows), limit):
      if count == 1 and same_rate and files is not None:
        # The shuffled case: one window, read straight into its row.
        row = where[(index, first)]
        if _read_one(files, chunk, config, out[row], rejections):
          good[row] = True
        continue
      row = where[(index, first)]
      if (same_rate and files is not None and
          all(where[(index, first + i)] == row + i for i in range(count))
          and _read_straight(files, chunk, config, out, row)):
        good[row:row + count] = True
        continue
      try:
        block = read_chunk_windows(chunk, config, files)
        if out.dtype == np.int16:
          block = _pcm16_values(block)
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
          one = dataclasses.replace(chunk, first_window=chunk.first_window
                                    + i, num_windows=1)
          rejections.append(file_reports.Rejection(
              plan.info.path, 'non-finite samples (NaN or Inf)', 'read',
              chunk_input_range(one, config.win_len, config.hop_len)))
  kept = np.flatnonzero(good).tolist()
  return (out if good.all() else out[good]), kept, rejections


def _pcm16_as_read(plan: FilePlan) -> bool:
  """A mono 16-bit PCM recording at the dataset's rate: each window's
  samples are the values it stores, scaled (audio.full_scale)."""
  info = plan.info
  return (info.subtype == audio_io.PCM_16 and info.channels == 1 and
          info.sample_rate == plan.sample_rate)


def _pcm16_values(samples: np.ndarray) -> np.ndarray:
  """Full-scale samples of a 16-bit PCM recording as the int16 values
  they were decoded from, exactly; BadWav where one is not such a value
  (the file is no longer what was probed)."""
  scaled = samples / audio.PCM16_SCALE  # exact: a power of two
  with np.errstate(invalid='ignore'):
    values = scaled.astype(np.int16)
  if not np.array_equal(values, scaled):
    raise file_reports.BadWav('samples that are not the 16-bit PCM it was '
                              'probed as')
  return values


def _read_straight(files: audio_io.OpenFiles, chunk: Chunk,
                   config: PipelineConfig, out: np.ndarray, row: int) -> bool:
  """The chunk's windows (at the dataset's rate, rows row, row + 1, ...
  of `out`) decoded straight into their rows in one pass, when they lie
  back to back in a mono integer-PCM plain WAV: no array in between, and
  no NaN check (integer samples cannot hold one). False otherwise, and
  when the read fails: the general path then reads the chunk again and
  reports why."""
  plan, count = chunk.plan, chunk.num_windows
  start = chunk.origin + chunk.first_window * config.hop_len
  if (config.hop_len != config.win_len or chunk.channel not in (None, 0) or
      not audio_io.always_finite(plan.info.subtype) or
      start + count * config.win_len > chunk.limit):
    return False
  try:
    return files.read_mono_into(plan.info.path, start,
                                out[row:row + count], plan.info)
  except (file_reports.BadWav, *file_reports.INPUT_ERRORS):
    return False


def _chunks(plan: FilePlan, windows: Sequence[int], limit: int):
  """(first window, count, Chunk) of each run of consecutive windows of a
  recording, within one of its spans when it has them."""
  for first, count in _runs(windows, limit):
    while count:
      span, k = plan.locate(first)
      n = count if span is None else min(count, span.num_windows - k)
      yield first, n, Chunk(plan, k, n, span)
      first, count = first + n, count - n


def _read_one(files: audio_io.OpenFiles, chunk: Chunk, config: PipelineConfig,
              row: np.ndarray,
              rejections: List[file_reports.Rejection]) -> bool:
  """The one window of a chunk of an unresampled file into `row`; False
  if rejected."""
  plan = chunk.plan
  start = chunk.origin + chunk.first_window * config.hop_len
  n = min(config.win_len, chunk.limit - start)
  frames = (start, start + n)
  try:
    straight = files.read_mono_into(plan.info.path, start, row[:n],
                                    plan.info)
    if not straight:
      samples = audio.one_channel(
          files.read_range(plan.info.path, start, n, plan.info),
          config.channels, chunk.channel)
      row[:n] = _pcm16_values(samples) if row.dtype == np.int16 else samples
  except file_reports.BadWav as e:
    rejections.append(file_reports.Rejection(plan.info.path, str(e), 'read',
                                             frames))
    return False
  except file_reports.INPUT_ERRORS as e:
    rejections.append(file_reports.Rejection(
        plan.info.path, str(file_reports.unreadable(e)), 'read', frames))
    return False
  row[n:] = 0.0
  if not audio_io.always_finite(plan.info.subtype) and not np.isfinite(
      row[:n]).all():
    rejections.append(file_reports.Rejection(
        plan.info.path, 'non-finite samples (NaN or Inf)', 'read', frames))
    return False
  return True


@dataclasses.dataclass(frozen=True)
class WindowBatch:
  """Windows read together, whose features are computed together."""
  refs: List[Tuple[tuple, int]]    # (plan key, window), in written order
  # (len(refs), win_len) as read: full-scale float64, or int16 PCM values
  # (audio.full_scale).
  windows: np.ndarray
  plans: Mapping[tuple, FilePlan]  # plan key -> its plan
  # (registry.ReadGroup, index of the first row in it): the whole
  # recordings read with these, or None.
  group: Optional[Tuple[registry.ReadGroup, int]] = None
  # --augment: what was done to each row ('' for a recording's own).
  augmentations: Optional[Tuple[str, ...]] = None


def read_batches(config: PipelineConfig, split: str, refs):
  """Refs [(FilePlan, window, key)] read in the order given -> WindowBatch
  of at most compute_windows() windows each, and a Rejection (with its
  split) per window that cannot be used. Reading depends only on the
  window options, so one read serves every feature setting."""
  plans = {plan.key: plan for plan, _, _ in refs}
  if config.variable_length:
    yield from _read_files(config, split,
                           [(plan, window) for plan, window, _ in refs])
    return
  refs = [(plan.key, window) for plan, window, _ in refs]
  step = compute_windows(config.win_len, registry.batch_samples(config))
  with audio_io.OpenFiles() as files:
    for start in range(0, len(refs), BATCH_WINDOWS):
      batch = refs[start:start + BATCH_WINDOWS]
      windows, kept, rejections = read_windows(batch, plans, config, files)
      for rejection in rejections:
        yield dataclasses.replace(rejection, split=split)
      kept_refs = [batch[i] for i in kept]
      for part in range(0, len(kept_refs), step):
        read = WindowBatch(kept_refs[part:part + step],
                           windows[part:part + step], plans)
        yield augment.applied(read, config) if config.augment else read


def _read_files(config: PipelineConfig, split: str, refs):
  """--example_unit file or segment: WindowBatches of the whole recordings
  or spans (plan, example) at the dataset's rate, one row each, and a
  Rejection per one that cannot be used. Consecutive examples of equal
  length share a batch (as many as compute_windows allows: clips of one
  length are computed together, as windows are); others are computed
  alone. Where a feature asks for batch_samples (a model), consecutive
  examples of up to that much audio are read as a group
  (registry.ReadGroup) that it can compute on together, whatever their
  lengths."""
  batch_samples = registry.batch_samples(config)
  # A model's group and --augment take full-scale float64 recordings.
  stored = not batch_samples and not config.augment
  rows, signals, done = [], [], []

  def batches():
    group = registry.ReadGroup(signals) if batch_samples else None
    start = 0
    while start < len(rows):
      length = len(signals[start])
      stop = start + 1
      while (stop < len(rows) and len(signals[stop]) == length and
             signals[stop].dtype == signals[start].dtype and
             stop - start < compute_windows(length, batch_samples)):
        stop += 1
      yield WindowBatch(
          [(plan.key, window) for plan, window in rows[start:stop]],
          (signals[start][np.newaxis] if stop - start == 1
           else np.stack(signals[start:stop])),
          {plan.key: plan for plan, _ in rows[start:stop]},
          None if group is None else (group, start),
          tuple(done[start:stop]) if config.augment else None)
      start = stop
    rows.clear()
    signals.clear()
    done.clear()

  def full(signal) -> bool:
    if batch_samples:
      return sum(map(len, signals)) + len(signal) > batch_samples
    return (len(signal) != len(signals[0]) or
            signal.dtype != signals[0].dtype or
            len(signals) == compute_windows(len(signal), batch_samples))

  with audio_io.OpenFiles() as files:
    for plan, window in refs:
      span, _ = plan.locate(window)
      frames = ((0, plan.info.frames) if span is None else
                _input_frames(plan, span.start, span.stop))
      try:
        signal = _read_file_samples(plan, config, files, span, stored)
      except file_reports.BadWav as e:
        yield file_reports.Rejection(plan.info.path, str(e), 'read',
                                     frames, split)
        continue
      if not np.isfinite(signal).all():
        yield file_reports.Rejection(
            plan.info.path, 'non-finite samples (NaN or Inf)', 'read',
            frames, split)
        continue
      if signals and full(signal):
        yield from batches()
      if config.augment:  # the length full() reads stays the same
        signal, record = augment.one(signal, plan, window, config)
        done.append(record)
      rows.append((plan, window))
      signals.append(signal)
  if signals:
    yield from batches()


def _read_file_samples(plan: FilePlan, config: PipelineConfig,
                       files: audio_io.OpenFiles, span, stored: bool
                       ) -> np.ndarray:
  """window_features.read_file_signal's recording or span, or, where
  `stored` and it is mono 16-bit PCM at the dataset's rate, the int16
  values it stores (as read_windows reads windows)."""
  if not (stored and _pcm16_as_read(plan) and
          (span is None or span.channel in (None, 0))):
    return window_features.read_file_signal(plan, config, files, span)
  start, stop = (0, plan.frames) if span is None else (span.start, span.stop)
  values = np.empty(stop - start, np.int16)
  try:
    if files.read_mono_into(plan.info.path, start, values, plan.info):
      return values
  except file_reports.BadWav:
    raise
  except file_reports.INPUT_ERRORS as e:
    raise file_reports.unreadable(e) from e
  return _pcm16_values(window_features.read_file_signal(plan, config, files,
                                                        span))


def _input_frames(plan: FilePlan, start: int, stop: int) -> Tuple[int, int]:
  """The file's frames [start, stop) at the dataset's rate come from."""
  if plan.info.sample_rate == plan.sample_rate:
    return start, stop
  return audio.resample_input_range(plan.info.frames, plan.info.sample_rate,
                                    plan.sample_rate, start, stop)


# --example_unit file: the key that holds the length a feature's first
# dimension follows (registry.Feature.length).
LENGTH_KEYS = {registry.SAMPLES: schema_lib.NUM_SAMPLES_KEY,
               registry.FRAMES: schema_lib.NUM_FRAMES_KEY}


def _length_key(name: str, config):
  if name not in registry.names():  # a function of the caller's own
    return None
  length = registry.get(name).length_of(config)
  return LENGTH_KEYS.get(length, length)


def length_columns(arrays: Mapping[str, np.ndarray], config
                   ) -> Tuple[Dict[str, List[int]], Dict[str, str]]:
  """--example_unit file: ({length key: [length per row]}, {feature: its
  length key}) of a batch of equal-length examples: the signal's length in
  num_samples, the STFT features' in num_frames. A feature function of
  your own keeps a fixed shape (one that varies with the recording is
  refused when the schemas of two examples merge)."""
  columns, lengths = {}, {}
  for key, value in arrays.items():
    length_key = _length_key(key, config)
    if length_key is not None:
      columns[length_key] = [int(value.shape[1])] * len(value)
      lengths[key] = length_key
  return columns, lengths


def timed(items, stats: ExampleStats):
  """`items` (read_batches'), the time spent producing each added to
  `stats.read_ns`: the reading, not what the caller does between items."""
  items = iter(items)
  while True:
    started = time.perf_counter_ns()
    try:
      item = next(items)
    except StopIteration:
      stats.read_ns += time.perf_counter_ns() - started
      return
    stats.read_ns += time.perf_counter_ns() - started
    yield item


# The options ExampleMaker._columns reads (and reads only from here): a
# sweep's variants alike in them share a batch's columns.
_COLUMN_OPTIONS = ('manifest_extra_columns', 'variable_length', 'hop_len',
                   'augment')


class ExampleMaker:
  """Computes the features of windows read by read_batches and encodes
  their examples: the work of a segment task (WriteSegment) or of a work
  unit (EncodeExamples).
  Not a DoFn: built in a DoFn's setup, one per worker thread, or in a
  forked worker. Counts nothing: Beam's counters exist only in a worker,
  so the DoFns count what it returns."""

  def __init__(self, config: PipelineConfig, extra_features=None):
    self.config = config
    self._extractor = FeatureExtractor(config, extra_features)

  def encode(self, stats: ExampleStats, batch: 'WindowBatch', class_names,
             shared: Optional[dict] = None):
    """The serialized examples of a batch of windows read by read_batches,
    in its order; `stats` counts them. `shared`: one dict per batch across
    a sweep's variants (FeatureExtractor.compute)."""
    return self._encode(stats, batch.refs, batch.windows, batch.plans,
                        class_names, shared, batch.group,
                        batch.augmentations)

  def _encode(self, stats, refs, windows, plans, class_names, shared=None,
              group=None, augmentations=None):
    began = time.perf_counter_ns()
    columns = self._shared_columns(refs, plans, class_names, augmentations,
                                   shared)
    started = time.perf_counter_ns()
    arrays = self._extractor.compute(windows, plans[refs[0][0]].sample_rate,
                                     shared, group)
    computed = time.perf_counter_ns()
    stats.feature_ns += computed - started
    stats.add_moments(arrays, shared)   # of the float32 values
    arrays = window_features.as_stored(arrays, self.config.feature_dtype)
    columns.update(arrays)
    lengths = {}
    if self.config.variable_length:
      length_values, lengths = length_columns(arrays, self.config)
      columns.update(length_values)
    # Scalar columns have fixed types: a batch's schema can only change
    # with its arrays' dtypes or shapes (of a variable-length array, the
    # shape after its first dimension).
    signature = tuple((k, a.dtype.str, a.shape[2 if k in lengths else 1:])
                      for k, a in sorted(arrays.items()))
    if signature != stats.schema_signature:
      stats.schema = stats.schema.merge(
          example_codec.batch_schema(columns).with_lengths(lengths))
      stats.schema_signature = signature
    records = example_codec.encode_batch(columns, len(refs))
    for label, record in zip(columns[schema_lib.CLASS_KEY], records):
      stats.add(label, len(record))
    stats.encode_ns += (started - began) + (time.perf_counter_ns() - computed)
    yield from records

  def _shared_columns(self, refs, plans, class_names, augmentations,
                      shared: Optional[dict]) -> dict:
    """_columns, made once a batch for the variants of a sweep whose
    options they depend on are the same (`shared`: the batch's dict)."""
    if shared is None:
      return self._columns(refs, plans, class_names, augmentations)
    key = ('columns', tuple(class_names),
           *(getattr(self.config, name) for name in _COLUMN_OPTIONS))
    if key not in shared:
      shared[key] = self._columns(refs, plans, class_names, augmentations)
    return dict(shared[key])

  def _columns(self, refs, plans, class_names, augmentations=None):
    extra_columns, variable_length, hop_len, augmented = (
        getattr(self.config, name) for name in _COLUMN_OPTIONS)
    rows = [plans[index] for index, _ in refs]
    # What each example is: its recording's, or its segment's.
    located = [p.locate(w) for p, (_, w) in zip(rows, refs)]
    owners = [p if span is None else span
              for p, (span, _) in zip(rows, located)]
    extras = {name: [dict(o.extras)[name] for o in owners]
              for name in extra_columns}
    hop = 0 if variable_length else hop_len
    if augmented:
      extras[augment.KEY] = list(augmentations)
    return {
        **extras,
        schema_lib.CLASS_KEY: [o.label for o in owners],
        'filepath': [p.info.path for p in rows],
        'index': [p.info.index for p in rows],
        'num_classes': [len(class_names)] * len(rows),
        schema_lib.LABEL_KEY: [class_names.index(o.label) if o.label
                               else labels.NO_LABEL_TARGET for o in owners],
        'win_start_idx': [(0 if span is None else span.start) + k * hop
                          for span, k in located],
    }
