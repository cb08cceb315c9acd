"""A dataset's features in TensorFlow ops, for serving: a tf.Module whose
`__call__` is a tf.function, saved with tf.saved_model.save.

    from pipeline.featurizer import tf_featurizer

    module = tf_featurizer('out/')
    tf.saved_model.save(module, 'featurizer/')
    features = tf.saved_model.load('featurizer/')(waveform)

`waveform`: float32 samples at the dataset's rate (`module.sample_rate`),
full scale, `[n]` (mono) or `[n, channels]`; channels are mixed as the
dataset's run mixed them. Resampling is not done here: resample to the
dataset's rate first (pipeline.featurizer does, from any rate). The
result is {feature: [num_windows, ...]}, the windows, padding and
feature options of the dataset's run: signal, spectrogram, log_mel, mfcc,
lpc and fft, within 1e-4 of the numpy features (tested after a
save and load), the signal exactly for samples a file holds. The mel
filterbank and the analysis window are the pipeline's own arrays, as
constants. Features of the caller's own (extra_features) have no
TensorFlow form and are refused.
"""

from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from pipeline.config import ConfigError
from pipeline.contract.errors import DatasetError
from pipeline.featurizer.base import FeaturizerError
from transforms.features import functions as F
from transforms.features import extractor as window_features


class TfFeaturizer(tf.Module):
  """Built by pipeline.featurizer.tf_featurizer from a dataset's
  DatasetOptions. Python attributes (not saved): `config`, `features`;
  saved: the non-trainable variable `sample_rate` (Hz) and `__call__`."""

  def __init__(self, dataset, features: Optional[Sequence[str]] = None):
    super().__init__(name='wavbeam_featurizer')
    self.features = dataset.wanted(features)
    own = [f for f in self.features if f in dataset.extras]
    if own:
      raise FeaturizerError(
          f'feature {own} of the dataset at {dataset.dir} was computed by '
          'a function of your own, which has no TensorFlow form here: '
          'leave it out with features=')
    self.config = c = dataset.config
    if c.variable_length:
      raise FeaturizerError(
          f'the dataset at {dataset.dir} was written with --example_unit '
          f'{c.example_unit}, which the TensorFlow featurizer does not '
          'reproduce (it cuts windows); use pipeline.featurizer.featurizer')
    self._rate = dataset.sample_rate
    self.sample_rate = tf.Variable(self._rate, dtype=tf.int64,
                                   trainable=False, name='sample_rate')
    self._window = tf.constant(F.window_function(c.fft_window, c.n_fft))
    self._filterbank = None
    if 'log_mel' in self.features or 'mfcc' in self.features:
      try:  # the pipeline's own matrix, so that the bands match exactly
        self._filterbank = tf.constant(
            window_features.FeatureExtractor(c).filterbank(self._rate))
      except ConfigError as e:
        raise DatasetError(str(e)) from e

  @tf.function(input_signature=[tf.TensorSpec(None, tf.float32,
                                              name='waveform')])
  def __call__(self, waveform):
    """{feature: [num_windows, ...]} of float32 samples at the dataset's
    rate, [n] or [n, channels]; an InvalidArgumentError for another rank,
    no channels, NaN or Inf samples (the dataset's run drops their
    windows) or a recording too short for a window."""
    # Each check runs before what depends on it, so that the error is
    # the check's, not that of an op given a malformed tensor.
    with tf.control_dependencies([tf.debugging.assert_rank_in(
        waveform, [1, 2], message='waveform: give [n] (mono) or '
        '[n, channels] samples')]):
      waveform = tf.debugging.assert_all_finite(
          waveform, 'waveform: holds NaN or Inf samples')
    windows = self._windows(self._mono(waveform))
    return self._features(windows)

  def _mono(self, waveform):
    shape = tf.shape(waveform)
    channels = tf.reduce_prod(shape[1:])  # 1 for [n]
    with tf.control_dependencies([tf.debugging.assert_positive(
        channels, message='waveform: no channels')]):
      # float64 as the pipeline mixes, so that the stored integer signal
      # is met exactly.
      block = tf.cast(tf.reshape(waveform, [shape[0], channels]),
                      tf.float64)
    if self.config.channels == 'first':
      return block[:, 0]
    return tf.reduce_mean(block, axis=1)

  def _windows(self, mono):
    """transforms.inputs.audio.window_count's windows, zero-padded past the end
    (audio.slice_windows): [num_windows, win_len] float64."""
    c = self.config
    frames = tf.shape(mono, out_type=tf.int64)[0]
    win, hop = tf.constant(c.win_len, tf.int64), tf.constant(c.hop_len,
                                                              tf.int64)
    full = tf.where(frames >= win, (frames - win) // hop + 1,
                    tf.constant(0, tf.int64))
    count = full
    if c.pad:
      covered = tf.where(full > 0, (full - 1) * hop + win,
                         tf.constant(0, tf.int64))
      more = tf.logical_and(frames > covered, full * hop < frames)
      count = full + tf.cast(more, tf.int64)
    if c.max_windows_per_signal is not None:
      count = tf.minimum(count, c.max_windows_per_signal)
    with tf.control_dependencies([tf.debugging.assert_positive(
        count, message=f'waveform too short: a window needs {c.win_len} '
        f'samples at {self._rate} Hz')]):
      needed = (count - 1) * hop + win
    padded = tf.pad(mono, [[0, tf.maximum(needed - frames, 0)]])[:needed]
    return tf.signal.frame(padded, c.win_len, c.hop_len)

  def _features(self, windows) -> Dict[str, tf.Tensor]:
    c = self.config
    out = {}
    w32 = tf.cast(windows, tf.float32)
    if 'signal' in self.features:
      out['signal'] = _signal_dtype(windows, c.signal_dtype)
    if {'spectrogram', 'log_mel', 'mfcc', 'lpc'} & set(self.features):
      frames = tf.signal.frame(w32, c.n_fft, c.fft_hop) * self._window
      magnitude = tf.abs(tf.signal.rfft(frames, [c.n_fft]))
      if 'spectrogram' in self.features:
        out['spectrogram'] = (_log_compress(magnitude)
                              if c.spectrogram_scale == 'log' else magnitude)
      if self._filterbank is not None:
        log_mel = _log_compress(tf.tensordot(magnitude, self._filterbank, 1))
        if 'log_mel' in self.features:
          out['log_mel'] = log_mel
        if 'mfcc' in self.features:
          out['mfcc'] = tf.signal.mfccs_from_log_mel_spectrograms(
              log_mel)[..., :c.n_mfcc]
      if 'lpc' in self.features:
        out['lpc'] = _lpc(frames, c.lpc_order)
    if 'fft' in self.features:
      out['fft'] = tf.abs(tf.signal.rfft(w32, [c.win_len]))
    return out


def _log_compress(x):
  return tf.math.log(x + F.LOG_OFFSET)


def _signal_dtype(windows, dtype: str):
  """audio.to_signal_dtype: integers at full scale, rounded half to even
  (as tf.round) and clipped."""
  target = np.dtype(dtype)
  if target.kind == 'f':
    return tf.cast(windows, tf.as_dtype(target))
  info = np.iinfo(target)
  scaled = tf.round(windows * float(2 ** (info.bits - 1)))
  return tf.cast(tf.clip_by_value(scaled, float(info.min), float(info.max)),
                 tf.as_dtype(target))


def _lpc(frames, order: int):
  """features.lpc: the autocorrelation of each windowed frame and the
  Levinson-Durbin recursion, in float64, unrolled over the order (a
  silent frame, or one predicted exactly, kept as features.levinson_durbin
  keeps it)."""
  x = tf.cast(frames, tf.float64)
  n = frames.shape[-1]
  r = [tf.reduce_sum(x[..., :n - k] * x[..., k:], axis=-1)
       for k in range(order + 1)]
  a = [tf.ones_like(r[0])] + [tf.zeros_like(r[0])] * order
  error = r[0]
  active = error > 0
  for i in range(1, order + 1):
    acc = tf.add_n([a[j] * r[i - j] for j in range(i)])
    reflection = tf.where(active, -acc / tf.where(active, error, 1.0),
                          tf.zeros_like(acc))
    previous = list(a)
    for j in range(1, i):
      a[j] = previous[j] + reflection * previous[i - j]
    a[i] = reflection
    error = error * (1.0 - reflection * reflection)
    active = tf.logical_and(active, error > 0)
  return tf.cast(tf.stack(a[1:], axis=-1), tf.float32)
