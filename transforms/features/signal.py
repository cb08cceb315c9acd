"""signal: the window's samples (or the whole recording's, under
--example_unit file), stored as --signal_dtype."""

import numpy as np

from transforms.features import registry
from transforms.inputs import audio

SIGNAL_DTYPES = ('int16', 'int32', 'float32', 'float64')


@registry.register
class Signal(registry.Feature):
  name = 'signal'
  help = 'the samples, as --signal_dtype'
  options = (registry.Option(
      'signal_dtype', str, 'int32',
      'dtype of the stored signal; integers are full scale',
      choices=SIGNAL_DTYPES),)
  length = registry.SAMPLES

  def compute(self, batch):
    return audio.to_signal_dtype(batch.samples, batch.option('signal_dtype'))

  def compute_tf(self, batch):
    """audio.to_signal_dtype: integers at full scale, rounded half to
    even (as tf.round) and clipped."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    target = np.dtype(batch.option('signal_dtype'))
    if target.kind == 'f':
      return tf.cast(batch.windows, tf.as_dtype(target))
    info = np.iinfo(target)
    scaled = tf.round(batch.windows * float(2 ** (info.bits - 1)))
    return tf.cast(tf.clip_by_value(scaled, float(info.min),
                                    float(info.max)), tf.as_dtype(target))
