"""spectrogram: |STFT| of each window, linear or log."""

from transforms.features import functions as F
from transforms.features import registry
from transforms.features import stft

SCALES = ('linear', 'log')


@registry.register
class Spectrogram(registry.Feature):
  name = 'spectrogram'
  help = 'STFT magnitude per frame, linear or log (--spectrogram_scale)'
  options = (registry.Option(
      'spectrogram_scale', str, 'linear',
      'spectrogram magnitude, linear or log (natural log of magnitude + '
      '1e-6)', choices=SCALES),)
  uses_stft = True
  length = registry.FRAMES

  def compute(self, batch):
    magnitude = stft.magnitude(batch)
    if batch.option('spectrogram_scale') != 'log':
      return magnitude
    return F.log_compress(magnitude)

  def compute_tf(self, batch):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    magnitude = stft.tf_magnitude(batch)
    if batch.option('spectrogram_scale') != 'log':
      return magnitude
    return tf.math.log(magnitude + F.LOG_OFFSET)
