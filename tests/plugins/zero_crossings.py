"""A feature of a user's own, as a plug-in: the zero-crossing rate of
frames of --zcr_frame samples. This module is all it takes: with
`--feature_module tests.plugins.zero_crossings` it is a --features name,
--zcr_frame a flag, and runs, sweeps, readers and featurizers have it."""

import numpy as np

from transforms.features import registry


def zero_crossing_rate(windows: np.ndarray, frame: int) -> np.ndarray:
  """(n, length) -> (n, length // frame) float32: in each frame, the
  fraction of neighbouring samples whose signs differ."""
  n, length = windows.shape
  frames = windows[:, :length // frame * frame].reshape(n, -1, frame)
  negative = frames < 0
  changes = negative[..., 1:] != negative[..., :-1]
  return changes.mean(axis=-1, dtype=np.float64).astype(np.float32)


@registry.register
class ZeroCrossings(registry.Feature):
  name = 'zcr'
  help = 'zero-crossing rate of each frame of --zcr_frame samples'
  options = (registry.positive_int('zcr_frame', 400,
                                   'samples per zero-crossing frame'),)
  window_only = True
  plot_title = 'zero crossings'

  def compute(self, batch):
    return zero_crossing_rate(batch.w32, batch.option('zcr_frame'))

  def compute_tf(self, batch):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    frame = batch.option('zcr_frame')
    negative = tf.signal.frame(batch.w32, frame, frame) < 0
    changes = tf.not_equal(negative[..., 1:], negative[..., :-1])
    return tf.cast(tf.reduce_mean(tf.cast(changes, tf.float64), axis=-1),
                   tf.float32)
