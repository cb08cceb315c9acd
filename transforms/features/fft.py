"""fft: |rFFT| of each whole window (one spectrum per window: windows
only)."""

from transforms.features import functions as F
from transforms.features import registry


@registry.register
class Fft(registry.Feature):
  name = 'fft'
  help = ('rFFT magnitude of each whole window (--example_unit window '
          'only)')
  window_only = True

  def compute(self, batch):
    return F.fft_magnitude(batch.w32)

  def compute_tf(self, batch):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    return tf.abs(tf.signal.rfft(batch.w32, [batch.config.win_len]))
