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

import tensorflow as tf

from pipeline.config import ConfigError
from pipeline.contract.errors import DatasetError
from pipeline.featurizer.base import FeaturizerError
from transforms.features import registry


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
    self._constants = {}  # what the features build once (a filterbank)
    without = [f for f in self.features if f not in dataset.extras and
               not _has_tf_form(f)]
    if without:
      raise FeaturizerError(
          f'feature {without} of the dataset at {dataset.dir} has no '
          'TensorFlow form (its plug-in defines no compute_tf): leave it '
          'out with features=, or use pipeline.featurizer.featurizer')
    try:  # options the rate makes wrong (an --fmax above the dataset's
      # Nyquist), refused now, outside any traced function
      self._features(tf.zeros([1, c.win_len], tf.float64))
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
    batch = TfBatch(windows, self._rate, self.config, self._constants)
    out = {name: batch.get(name) for name in registry.names()
           if name in self.features}
    # As stored (--feature_dtype): TensorFlow's casts round to nearest
    # even, as the pipeline's do.
    stored = tf.as_dtype(self.config.feature_dtype)
    return {name: (tf.cast(value, stored) if value.dtype == tf.float32 and
                   name != 'signal' else value)
            for name, value in out.items()}


def _has_tf_form(name: str) -> bool:
  return type(registry.get(name)).compute_tf is not \
      registry.Feature.compute_tf


class TfBatch(registry.Batch):
  """registry.Batch in TensorFlow: `windows` a [n, win_len] float64
  tensor, each feature's value its compute_tf's."""

  def _float32(self):
    return tf.cast(self.windows, tf.float32)

  def get(self, name: str):
    feature = registry.get(name)
    return self.once(feature.cache_key(self),
                     lambda: feature.compute_tf(self))
