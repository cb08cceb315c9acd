"""kaldi_fbank against its reference, torchaudio.compliance.kaldi.fbank:
the function over Kaldi's options, and the values a run stores."""

import numpy as np
import pytest
import soundfile as sf

from pipeline.config import ConfigError
from pipeline.readers import numpy_dataset as numpy_reader
from tests import helpers as H
from transforms.features import kaldi_fbank as K

torch = pytest.importorskip('torch')
kaldi = pytest.importorskip('torchaudio.compliance.kaldi')


def _reference(signal, rate, scale=1.0, **options):
  waveform = torch.tensor(np.asarray(signal)[None] * scale,
                          dtype=torch.float32)
  return kaldi.fbank(waveform, sample_frequency=rate, dither=0.0,
                     **options).numpy()


OPTIONS = [
    {},
    {'snip_edges': False},
    {'window_type': 'hanning', 'num_mel_bins': 128, 'use_power': False},
    {'window_type': 'hamming', 'preemphasis_coefficient': 0.0,
     'remove_dc_offset': False},
    {'window_type': 'blackman', 'low_freq': 100.0, 'high_freq': -400.0,
     'round_to_power_of_two': False},
    {'window_type': 'rectangular', 'frame_length': 20.0, 'frame_shift': 5.0,
     'snip_edges': False},
]


@pytest.mark.parametrize('options', OPTIONS, ids=range(len(OPTIONS)))
@pytest.mark.parametrize('length', [400, 1234, 16000])
@pytest.mark.parametrize('rate', [16000, 8000])
def test_equals_torchaudio_kaldi_fbank(options, length, rate):
  signal = np.random.default_rng(length).standard_normal(length) * 0.1
  expected = _reference(signal, rate, 32768, **options)
  ours = K.kaldi_fbank(signal[None], rate, sample_scale=32768, **options)[0]
  assert ours.dtype == np.float32 and ours.shape == expected.shape
  assert_close(ours, expected)


def assert_close(ours, expected):
  """Equal energies within float32's rounding, which torchaudio computes
  in: relative to the largest energy of the frame, as the FFT's errors
  are (a faint band's log then differs by more than a loud one's)."""
  energies, reference = np.exp(ours), np.exp(expected)
  np.testing.assert_allclose(
      energies, reference, rtol=1e-3,
      atol=1e-5 * reference.max(axis=-1, keepdims=True).max())
  loud = reference > 1e-3 * reference.max(axis=-1, keepdims=True)
  np.testing.assert_allclose(ours[loud], expected[loud], atol=2e-4, rtol=0)


def test_silence_is_floored_not_minus_infinity():
  ours = K.kaldi_fbank(np.zeros((1, 4000)), 16000)[0]
  assert np.isfinite(ours).all()
  np.testing.assert_allclose(ours, _reference(np.zeros(4000), 16000),
                             atol=1e-6)


@pytest.mark.parametrize('options,named', [
    ({'kaldi_window_type': 'kaiser'}, 'kaldi_window_type'),
    ({'kaldi_snip_edges': 'yes'}, 'kaldi_snip_edges'),
    ({'kaldi_low_freq': 4000.0, 'kaldi_high_freq': 3000.0},
     'kaldi_high_freq'),
    ({'kaldi_preemphasis_coefficient': 1.5}, 'kaldi_preemphasis_coefficient'),
    ({'win_len': 256, 'sample_rate': 16000}, 'win_len'),
])
def test_options_that_do_not_fit_are_refused(tmp_path, options, named):
  with pytest.raises(ConfigError) as e:
    H.make_config(tmp_path, tmp_path / 'out',
                  features=('signal', 'kaldi_fbank'), **options)
  assert f'--{named}' in str(e.value)


@pytest.mark.slow
@pytest.mark.parametrize('unit', ['window', 'file'])
def test_a_run_stores_what_the_reference_computes(tmp_path, unit):
  for i in range(4):
    H.write_wav(str(tmp_path / f'in/c{i % 2}/f{i}.wav'),
                H.noise(12000 + 3001 * i, seed=i))
  options = ({'win_len': 8000, 'hop_len': 5000} if unit == 'window' else
             {'example_unit': 'file', 'max_seconds': 10.0})
  config = H.make_config(tmp_path / 'in', tmp_path / 'out',
                         features=('signal', 'kaldi_fbank'),
                         signal_dtype='float32', splits='train=1.0',
                         kaldi_num_mel_bins=40, kaldi_snip_edges='false',
                         kaldi_sample_scale=32768.0, **options)
  H.run_pipeline(config)
  seen = 0
  for example in numpy_reader.numpy_dataset(str(tmp_path / 'out'), 'train'):
    audio, rate = sf.read(example['filepath'], dtype='float64')
    start = int(example['win_start_idx'])
    signal = audio[start:start + len(example['signal'])]
    expected = _reference(signal, rate, 32768, num_mel_bins=40,
                          snip_edges=False)
    if unit == 'file':
      assert int(example[K.FRAMES_KEY]) == len(expected)
    assert_close(example['kaldi_fbank'], expected)
    seen += 1
  assert seen == (9 if unit == 'window' else 4)
