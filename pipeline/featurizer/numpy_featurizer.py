"""The numpy featurizer: a dataset's features from live audio, computed
by the pipeline's own code (the package's docstring shows its use)."""


import contextlib
import dataclasses
import os
from typing import Dict, Optional, Sequence, Union

import numpy as np

from pipeline.config import ConfigError
from pipeline.contract.errors import DatasetError
from pipeline.featurizer.base import DatasetOptions, FeaturizerError
from transforms.inputs import audio
from transforms.features import functions as F
from transforms.inputs import file_reports
from transforms.inputs import sound_files
from transforms.features import extractor as window_features
from transforms.features import registry
from transforms.planning.rules import (Chunk, FilePlan,
                                       file_windows, windows_per_chunk)

Recording = Union[str, os.PathLike, np.ndarray]


class _OpenFile:
  """The one file being featurized, read as audio_io.OpenFiles reads."""

  def __init__(self, wav):
    self.wav = wav

  def read_range(self, path, start, count, probed=None):
    del path, probed
    return sound_files.read_frames(self.wav, start, count)


class _Samples:
  """A (frames, channels) float64 array, read as a file would be."""

  def __init__(self, samples: np.ndarray):
    self.samples = samples

  def read_range(self, path, start, count, probed=None):
    del path, probed
    return self.samples[start:start + count]


class Featurizer:
  """Featurizes recordings as the dataset at `dataset_dir` was written
  (see featurizer()). Attributes: `dataset_dir` (the dataset's folder),
  `config` (its run's PipelineConfig), `sample_rate` (its rate, Hz),
  `features` (the keys of what a call returns)."""

  def __init__(self, dataset_dir: str, *, variant: Optional[str] = None,
               features: Optional[Sequence[str]] = None,
               extra_features: Optional[F.ExtraFeatures] = None):
    dataset = DatasetOptions(dataset_dir, variant)
    self._dataset = dataset
    self.dataset_dir, self.sample_rate = dataset.dir, dataset.sample_rate
    self.features = dataset.wanted(features)
    extra_features = dict(extra_features or {})
    unknown = sorted(set(extra_features) - set(dataset.extras))
    if unknown:
      raise FeaturizerError(
          f'extra_features names {unknown}, which the dataset at '
          f'{dataset.dir} does not store as features of your own (it has '
          f'{list(dataset.extras)})')
    missing = [f for f in self.features
               if f in dataset.extras and f not in extra_features]
    if missing:
      raise FeaturizerError(
          f'feature {missing} of the dataset at {dataset.dir} was computed '
          'by a function of your own, which metadata.json does not keep: '
          'pass it as extra_features={name: fn}, or leave it out with '
          'features=')
    builtins = tuple(f for f in self.features if f in dataset.config.features)
    self.config = dataset.config
    # Only the features asked for are computed (extra features alone: the
    # config still names a built-in one, whose result is left out).
    compute_config = (dataclasses.replace(self.config, features=builtins)
                      if builtins else self.config)
    self._extractor = window_features.FeatureExtractor(
        compute_config, {f: extra_features[f] for f in self.features
                         if f in extra_features})
    try:  # options the rate makes wrong (an --fmax above the
      # dataset's Nyquist), refused now: the features of a silent example
      length = (self.config.win_len if not self.config.variable_length
                else max(1, registry.min_samples(
                    compute_config, self.sample_rate).samples))
      window_features.FeatureExtractor(compute_config).compute(
          np.zeros((1, length)), self.sample_rate)
    except ConfigError as e:
      raise DatasetError(str(e)) from e

  def __repr__(self) -> str:
    return (f'Featurizer({self.dataset_dir!r}: {", ".join(self.features)} '
            f'at {self.sample_rate} Hz)')

  def __call__(self, recording: Recording,
               sample_rate: Optional[int] = None) -> Dict[str, np.ndarray]:
    """{feature: array[num_windows, ...]} of a recording: a path (any
    format the pipeline reads), or samples with their rate, `[n]` or
    `[n, channels]`, float (full scale, as soundfile reads them) or
    integer PCM (int16, int32). FeaturizerError for what the dataset's
    run would have rejected (too short for a window, NaN or Inf samples)
    and for anything that is not a recording."""
    if isinstance(recording, (str, bytes, os.PathLike)):
      if sample_rate is not None:
        raise FeaturizerError(
            f'sample_rate={sample_rate!r} given with a path: a file states '
            'its own rate; give sample_rate only with an array of samples')
      return self._from_path(os.fsdecode(recording))
    if sample_rate is None:
      raise FeaturizerError('an array of samples needs its sample rate: '
                            'fn(samples, sample_rate)')
    return self._from_array(recording, sample_rate)

  def _from_path(self, path: str) -> Dict[str, np.ndarray]:
    if not os.path.exists(path):
      raise FeaturizerError(f'{path}: no such file')
    with contextlib.ExitStack() as stack:
      try:
        wav = stack.enter_context(sound_files.open_audio(path))
      except file_reports.BadWav as e:
        raise FeaturizerError(f'{path}: {e}') from e
      except file_reports.INPUT_ERRORS as e:
        raise FeaturizerError(
            f'{path}: {file_reports.unreadable(e)}') from e
      info = file_reports.WavInfo(0, path, wav.frames, wav.samplerate,
                                  wav.channels, wav.subtype)
      try:
        return self._featurize(info, _OpenFile(wav), path)
      except file_reports.BadWav as e:  # too short, or a read that failed
        raise FeaturizerError(f'{path}: {e}') from e

  def _from_array(self, recording, sample_rate) -> Dict[str, np.ndarray]:
    rate = _sample_rate(sample_rate)
    samples = np.asarray(recording)
    if samples.dtype.kind == 'f':
      samples = samples.astype(np.float64)
    elif samples.dtype.kind == 'i':
      # Integer PCM at full scale, as libsndfile converts it.
      samples = audio.from_signal_dtype(samples)
    else:
      raise FeaturizerError(
          f'samples of dtype {samples.dtype}: give float samples (full '
          'scale, as soundfile reads them) or signed integer PCM')
    shape = samples.shape
    if samples.ndim == 1:
      samples = samples[:, None]
    if samples.ndim != 2 or 0 in samples.shape:
      raise FeaturizerError(
          f'samples of shape {shape}: give [n] (mono) or [n, channels], '
          'n > 0')
    if samples.shape[1] > samples.shape[0]:
      raise FeaturizerError(
          f'samples of shape {shape}: more channels than frames; give '
          '[n, channels] (as soundfile reads them), not [channels, n]')
    info = file_reports.WavInfo(0, '<samples>', samples.shape[0], rate,
                                samples.shape[1], 'array')
    try:
      return self._featurize(info, _Samples(samples), 'the samples')
    except file_reports.BadWav as e:
      raise FeaturizerError(f'the samples: {e}') from e

  def _featurize(self, info: file_reports.WavInfo, files,
                 where: str) -> Dict[str, np.ndarray]:
    """The windows of a recording at the dataset's rate, read a chunk at
    a time as a shard task reads them, and their features."""
    config, rate = self.config, self.sample_rate
    frames, num_windows = file_windows(info, config, rate)
    plan = FilePlan(info, '', '', rate, frames, num_windows)
    if config.variable_length:
      # The whole recording is the one example, as the run made it.
      signal = window_features.read_file_signal(plan, config, files)
      if not np.isfinite(signal).all():
        raise FeaturizerError(
            f'{where}: holds NaN or Inf samples; the dataset has no example '
            'of such a recording')
      out = window_features.as_stored(
          self._extractor.compute(signal[np.newaxis], rate),
          config.feature_dtype)
      result = {name: out[name] for name in self.features}
      self._dataset.check_specs(result)
      return result
    per_chunk = windows_per_chunk(plan, config.hop_len)
    step = window_features.compute_windows(config.win_len)
    parts = {name: [] for name in self.features}
    for first in range(0, num_windows, per_chunk):
      chunk = Chunk(plan, first, min(per_chunk, num_windows - first))
      windows = window_features.read_chunk_windows(chunk, config, files)
      finite = np.isfinite(windows).all(axis=1)
      if not finite.all():
        bad = first + int(np.flatnonzero(~finite)[0])
        raise FeaturizerError(
            f'{where}: window {bad} (from sample {bad * config.hop_len} at '
            f'{rate} Hz) holds NaN or Inf samples; the dataset has no '
            'example of such a window')
      for start in range(0, len(windows), step):
        out = window_features.as_stored(
            self._extractor.compute(windows[start:start + step], rate),
            config.feature_dtype)
        for name in self.features:
          parts[name].append(out[name])
    result = {name: np.concatenate(arrays) for name, arrays in parts.items()}
    self._dataset.check_specs(result)
    return result


def _sample_rate(value) -> int:
  if isinstance(value, (bool, np.bool_)) or not isinstance(
      value, (int, np.integer, float, np.floating)) or value != int(value) \
      or not 0 < value <= 10**7:
    raise FeaturizerError(f'sample_rate={value!r}: give the samples\' rate '
                          'in Hz, a positive whole number')
  return int(value)


def featurizer(dataset_dir: str, *, variant: Optional[str] = None,
               features: Optional[Sequence[str]] = None,
               extra_features: Optional[F.ExtraFeatures] = None
               ) -> Featurizer:
  """A function of a recording giving the features the dataset at
  `dataset_dir` holds of it: `fn(path)` or `fn(samples, sample_rate)`
  (see Featurizer.__call__) -> {feature: array[num_windows, ...]}.

  variant: one variant of a sweep written with --variants (OUT/<variant>).
  features: the features to compute (default: every one stored).
  extra_features: {name: fn} for the features the dataset's run computed
  with functions of its own (run(..., extra_features=...)), which
  metadata.json names but cannot keep; a stored one not given is refused
  unless `features` leaves it out.

  Raises DatasetError for a folder that holds no dataset (or a sweep
  without `variant`), FeaturizerError for a request it cannot honour.
  """
  return Featurizer(dataset_dir, variant=variant, features=features,
                    extra_features=extra_features)


def tf_featurizer(dataset_dir: str, *, variant: Optional[str] = None,
                  features: Optional[Sequence[str]] = None):
  """The same features as featurizer's, as a TensorFlow module for
  serving: see pipeline/featurizer/tf_graph.TfFeaturizer. Imports TensorFlow."""
  from pipeline.featurizer.tf_graph import TfFeaturizer
  return TfFeaturizer(DatasetOptions(dataset_dir, variant),
                      features)
