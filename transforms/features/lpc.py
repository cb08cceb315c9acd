"""lpc: linear prediction coefficients a_1..a_p of each STFT frame, by the
autocorrelation method (Levinson-Durbin)."""

from pipeline.contract.errors import ConfigError
from transforms.features import functions as F
from transforms.features import registry
from transforms.features import stft


@registry.register
class Lpc(registry.Feature):
  name = 'lpc'
  help = 'linear prediction coefficients of each STFT frame (--lpc_order)'
  options = (registry.positive_int(
      'lpc_order', 12, 'coefficients a_1..a_p of lpc: linear prediction of '
      'each STFT frame (same frames and window as the spectrogram) by the '
      'autocorrelation method; silent frames give zeros'),)
  uses_stft = True
  length = registry.FRAMES
  plot_title = 'LPC a_1..a_p'
  plot_colormap = 'coolwarm'
  plot_symmetric = True

  def check(self, config):
    if config.lpc_order >= config.n_fft:
      raise ConfigError('lpc_order', config.lpc_order,
                        f'must be less than --n_fft={config.n_fft}')

  def compute(self, batch):
    return F.lpc(stft.frames(batch), batch.option('lpc_order'))

  def compute_tf(self, batch):
    """F.lpc: the autocorrelation of each windowed frame and the
    Levinson-Durbin recursion, in float64, unrolled over the order (a
    silent frame, or one predicted exactly, kept as F.levinson_durbin
    keeps it)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    order = batch.option('lpc_order')
    frames = stft.tf_frames(batch)
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
