"""log_mel: the log of each STFT frame's magnitude (or, with --mel_power
2, its power, as torchaudio's and librosa's mel spectrograms default to)
through a triangular HTK-mel filterbank
(tf.signal.linear_to_mel_weight_matrix's). Frames are not centred: the
first starts at the window's first sample."""

import numpy as np

from pipeline.contract.errors import ConfigError
from transforms.features import functions as F
from transforms.features import registry
from transforms.features import stft


def filterbank(config, sample_rate: int) -> np.ndarray:
  """The (n_fft // 2 + 1, n_mels) filterbank of `config` at `sample_rate`;
  ConfigError when --fmax exceeds half the rate, or --fmin is not below
  it, which only the data tells when --sample_rate is not given."""
  value = registry.option_value
  fmax = value(config, 'fmax')
  if fmax is not None and fmax > sample_rate / 2:
    raise ConfigError('fmax', fmax, f'exceeds half the sample rate of the '
                      f'dataset in {config.dataset_dir} ({sample_rate} Hz); '
                      'lower it, or give --sample_rate')
  fmin = value(config, 'fmin')
  if fmin >= sample_rate / 2:
    raise ConfigError('fmin', fmin, f'is not below half the sample rate of '
                      f'the dataset in {config.dataset_dir} ({sample_rate} '
                      'Hz): its mel bands would hold no frequency; lower it')
  return F.mel_filterbank(value(config, 'n_mels'), value(config, 'n_fft'),
                          sample_rate, value(config, 'fmin'), fmax)


def _key(batch) -> tuple:
  return ('filterbank', batch.sample_rate) + tuple(
      batch.option(n) for n in ('n_mels', 'n_fft', 'fmin', 'fmax'))


def _filterbank(batch) -> np.ndarray:
  """filterbank, built once per worker."""
  return batch.constant(_key(batch), lambda: filterbank(batch.config,
                                                        batch.sample_rate))


def _band_groups(batch):
  """F.mel_band_groups of the filterbank, found once per worker."""
  return batch.constant(_key(batch) + ('groups',),
                        lambda: F.mel_band_groups(_filterbank(batch)))


@registry.register
class LogMel(registry.Feature):
  name = 'log_mel'
  help = 'log of the mel bands of each STFT frame (--n_mels, --fmin, --fmax)'
  options = (
      registry.positive_int('n_mels', 64, 'mel bands of log_mel and mfcc'),
      registry.Option('fmin', float, 0.0, 'lowest frequency of the mel '
                      'bands, in Hz', minimum=0.0,
                      rule='a number of Hz, at least 0'),
      registry.Option('fmax', float, None, 'highest frequency of the mel '
                      'bands, in Hz (default: half the sample rate)',
                      optional=True, above=0.0,
                      rule='a positive number of Hz'),
      registry.Option('mel_power', int, 1, 'what the mel bands of log_mel '
                      'and mfcc weigh: 1, each frequency bin\'s magnitude, '
                      'or 2, its power (torchaudio\'s and librosa\'s '
                      'default)', minimum=1, maximum=2, rule='1 or 2'),
  )
  uses_stft = True
  uses_rate = True
  length = registry.FRAMES

  def check(self, config):
    n_fft = config.n_fft
    if config.n_mels > n_fft // 2 + 1:
      raise ConfigError('n_mels', config.n_mels,
                        f'must not exceed the {n_fft // 2 + 1} frequency '
                        f'bins of --n_fft={n_fft}')

  def compute(self, batch):
    weighed = stft.magnitude(batch)
    if batch.option('mel_power') == 2:
      weighed = np.square(weighed)
    return F.log_compress(F.mel_spectrogram(weighed, _filterbank(batch),
                                            _band_groups(batch)))

  def compute_tf(self, batch):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    weighed = stft.tf_magnitude(batch)
    if batch.option('mel_power') == 2:
      weighed = tf.square(weighed)
    return tf.math.log(tf.tensordot(weighed,
                                    tf.constant(_filterbank(batch)), 1) +
                       F.LOG_OFFSET)
