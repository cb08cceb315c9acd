"""--mel_power 2: log_mel (and mfcc) from each bin's power, against
TensorFlow's STFT and mel matrix; --mel_power 1 (the default) is the
magnitude, as before."""

import numpy as np
import pytest
import soundfile as sf

from pipeline.commands import run as run_lib
from pipeline.config import ConfigError
from pipeline.readers import numpy_dataset as numpy_reader
from tests import helpers as H

RATE = 16000


def _reference(windows, power, n_fft=512, hop=128, n_mels=40):
  import tensorflow as tf
  stft = tf.signal.stft(tf.constant(windows, tf.float32), n_fft, hop,
                        window_fn=tf.signal.hann_window)
  weighed = tf.abs(stft) ** power
  bank = tf.signal.linear_to_mel_weight_matrix(n_mels, n_fft // 2 + 1, RATE,
                                               0.0, RATE / 2)
  log_mel = tf.math.log(tf.tensordot(weighed, bank, 1) + 1e-6)
  return log_mel.numpy(), tf.signal.mfccs_from_log_mel_spectrograms(
      log_mel).numpy()[..., :13]


@pytest.mark.slow
@pytest.mark.parametrize('power', [1, 2])
def test_a_run_stores_the_mel_bands_of_the_power(tmp_path, power):
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(RATE * 3),
              rate=RATE)
  run_lib.run(['--input_dir', str(tmp_path / 'in'), '--output_dir',
               str(tmp_path / 'out'), '--win_len', '8000', '--features',
               'signal,log_mel,mfcc', '--n_fft', '512', '--fft_hop', '128',
               '--n_mels', '40', '--mel_power', str(power),
               '--signal_dtype', 'float32', '--no_shuffle',
               '--runner=FnApiRunner'])
  examples = list(numpy_reader.numpy_dataset(str(tmp_path / 'out')))
  windows = np.stack([e['signal'] for e in examples])
  data, _ = sf.read(str(tmp_path / 'in' / 'a' / 'x.wav'), dtype='float32')
  assert np.array_equal(windows, data[:len(examples) * 8000].reshape(-1,
                                                                     8000))
  log_mel, mfcc = _reference(windows, power)
  ours = np.stack([e['log_mel'] for e in examples])
  # float32 FFTs of two libraries: a few parts in 1e5 of the log.
  np.testing.assert_allclose(ours, log_mel, atol=2e-4, rtol=0)
  np.testing.assert_allclose(np.stack([e['mfcc'] for e in examples]), mfcc,
                             atol=2e-3, rtol=0)
  # The featurizers compute what the run stored: numpy bit for bit,
  # TensorFlow's graph to float32 rounding.
  from pipeline.featurizer import featurizer, tf_featurizer
  live = featurizer(str(tmp_path / 'out'), features=['log_mel', 'mfcc'])(
      data, RATE)
  graph = tf_featurizer(str(tmp_path / 'out'),
                        features=['log_mel', 'mfcc'])(data)
  for key in ('log_mel', 'mfcc'):
    stored = np.stack([e[key] for e in examples])
    assert live[key].tobytes() == stored.tobytes(), key
    np.testing.assert_allclose(graph[key].numpy(), stored, atol=1e-3,
                               rtol=0)
  if power == 2:  # the power's log is twice the magnitude's, nearly
    magnitude, _ = _reference(windows, 1)
    assert np.abs(ours - magnitude).mean() > 1.0


@pytest.mark.parametrize('value', [0, 3])
def test_other_powers_are_refused(tmp_path, value):
  with pytest.raises(ConfigError, match='mel_power'):
    H.make_config(str(tmp_path), str(tmp_path / 'out'), mel_power=value,
                  features=('log_mel',))
