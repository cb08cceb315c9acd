"""mfcc: the first --n_mfcc cepstral coefficients of each log_mel frame
(tf.signal.mfccs_from_log_mel_spectrograms)."""

from pipeline.contract.errors import ConfigError
from transforms.features import functions as F
from transforms.features import registry


@registry.register
class Mfcc(registry.Feature):
  name = 'mfcc'
  help = 'cepstral coefficients of each log_mel frame (--n_mfcc)'
  options = (registry.positive_int(
      'n_mfcc', 13, 'coefficients of mfcc: the first of the DCT-II of each '
      'log_mel frame, as tf.signal.mfccs_from_log_mel_spectrograms'),)
  requires = ('log_mel',)
  length = registry.FRAMES
  plot_title = 'MFCC'
  plot_colormap = 'coolwarm'
  plot_symmetric = True

  def check(self, config):
    if config.n_mfcc > config.n_mels:
      raise ConfigError('n_mfcc', config.n_mfcc,
                        f'must not exceed --n_mels={config.n_mels}')

  def compute(self, batch):
    n_mels, n_mfcc = batch.option('n_mels'), batch.option('n_mfcc')
    basis = batch.constant(('mfcc_basis', n_mels, n_mfcc),
                           lambda: F.mfcc_basis(n_mels, n_mfcc))
    return F.mfcc(batch.get('log_mel'), n_mfcc, basis)

  def compute_tf(self, batch):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    return tf.signal.mfccs_from_log_mel_spectrograms(
        batch.get('log_mel'))[..., :batch.option('n_mfcc')]
