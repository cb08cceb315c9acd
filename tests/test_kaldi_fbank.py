"""kaldi_fbank against its reference, torchaudio.compliance.kaldi.fbank:
the function over Kaldi's options, and the values a run stores."""

import json
import os

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


@pytest.mark.parametrize('options,named', [
    ({'kaldi_low_freq': 4500.0}, 'kaldi_low_freq'),
    ({'kaldi_high_freq': 6000.0}, 'kaldi_high_freq'),
    ({'kaldi_frame_shift': 0.05}, 'kaldi_frame_shift'),
    ({'kaldi_frame_length': 0.1}, 'kaldi_frame_length'),
    ({'kaldi_num_mel_bins': 128}, 'kaldi_num_mel_bins'),
    ({'kaldi_round_to_power_of_two': 'false',
      'kaldi_frame_length': 25.125}, 'kaldi_round_to_power_of_two'),
    ({'win_len': 150}, 'win_len'),
])
def test_what_does_not_fit_a_rate_names_its_option(tmp_path, options, named):
  """At 8 kHz (Nyquist 4 kHz, frames of 200 samples): each option that
  does not fit is named, as Kaldi refuses it (128 bins leave some without
  an FFT bin; an odd frame gives an odd FFT size)."""
  options = {'win_len': 4000, **options}
  with pytest.raises(ConfigError) as e:
    H.make_config(tmp_path, tmp_path / 'out', features=('kaldi_fbank',),
                  sample_rate=8000, **options)
  assert str(e.value).startswith(f'--{named}='), str(e.value)


def test_a_frame_is_what_torchaudio_needs_with_mirrored_edges_too():
  """torchaudio's fbank refuses a signal shorter than one frame, whether or
  not it mirrors the ends; from one frame on, the values are its own."""
  config = H.make_config('.', 'out', features=('kaldi_fbank',),
                         kaldi_snip_edges='false')
  need = K.KaldiFbank().min_samples(config, 44100)
  assert need.samples == 1102
  assert need.why == ('one kaldi_fbank frame needs 1102 '
                      '(--kaldi_frame_length=25 ms)')
  signal = np.random.default_rng(0).standard_normal(1103) * 0.1
  with pytest.raises(AssertionError):
    _reference(signal[:1101], 44100, snip_edges=False)
  for n in (1102, 1103):
    assert_close(K.kaldi_fbank(signal[None, :n], 44100, snip_edges=False)[0],
                 _reference(signal[:n], 44100, snip_edges=False))


@pytest.mark.slow
def test_recordings_shorter_than_a_frame_are_rejected_and_the_rest_kept(
    tmp_path):
  """--example_unit file with kaldi_fbank alone: a recording shorter than a
  Kaldi frame is a rejection with its reason, not the end of the run; the
  featurizer of the dataset computes what was stored."""
  from pipeline.featurizer import FeaturizerError, featurizer
  lengths = {'short150': 150, 'short399': 399, 'long1': 12000,
             'long2': 9001}
  for name, n in lengths.items():
    H.write_wav(str(tmp_path / 'in' / 'c' / f'{name}.wav'),
                H.noise(n, seed=n))
  config = H.make_config(tmp_path / 'in', tmp_path / 'out',
                         features=('kaldi_fbank',), example_unit='file',
                         splits='train=1.0')
  meta = H.run_pipeline(config)
  assert meta['counts']['files_rejected'] == 2
  rejects = [json.loads(line) for line in
             open(tmp_path / 'out' / 'rejects.jsonl')]
  assert sorted((os.path.basename(r['path']), r['reason']) for r in rejects) \
      == [(f'short{n}.wav', f'too short: {n} frames at 16000 Hz, one '
           'kaldi_fbank frame needs 400 (--kaldi_frame_length=25 ms)')
          for n in (150, 399)]
  featurize = featurizer(str(tmp_path / 'out'))
  seen = 0
  for example in numpy_reader.numpy_dataset(str(tmp_path / 'out'), 'train'):
    n = lengths[os.path.basename(example['filepath'])[:-4]]
    assert int(example[K.FRAMES_KEY]) == 1 + (n - 400) // 160
    np.testing.assert_array_equal(
        featurize(example['filepath'])['kaldi_fbank'][0],
        example['kaldi_fbank'])
    seen += 1
  assert seen == 2
  with pytest.raises(FeaturizerError, match='one kaldi_fbank frame needs'):
    featurize(np.zeros(399), 16000)


@pytest.mark.slow
def test_options_are_checked_at_the_rate_of_the_data(tmp_path):
  """Without --sample_rate: band edges and frames that fit 44.1 kHz data
  (not 16 kHz) are its own, and the values torchaudio's at that rate; a
  featurizer of the dataset is built for it."""
  from pipeline.featurizer import featurizer
  for i in range(2):
    H.write_wav(str(tmp_path / 'in' / 'c' / f'f{i}.wav'),
                H.noise(20000 + 7 * i, seed=i), rate=44100)
  config = H.make_config(tmp_path / 'in', tmp_path / 'out',
                         features=('kaldi_fbank',), example_unit='file',
                         splits='train=1.0', kaldi_high_freq=12000.0,
                         kaldi_sample_scale=32768.0)
  H.run_pipeline(config)
  featurize = featurizer(str(tmp_path / 'out'))
  examples = list(numpy_reader.numpy_dataset(str(tmp_path / 'out'), 'train'))
  assert len(examples) == 2
  for example in examples:
    audio, rate = sf.read(example['filepath'], dtype='float64')
    assert rate == 44100
    assert_close(example['kaldi_fbank'], _reference(audio, rate, 32768,
                                                    high_freq=12000.0))
    np.testing.assert_array_equal(
        featurize(example['filepath'])['kaldi_fbank'][0],
        example['kaldi_fbank'])


def _windows_of_one_file(tmp_path, rate, samples, win_len, **options):
  """A run over one file of `samples` at `rate`, in windows of `win_len`,
  without --sample_rate: (the file's audio, its examples)."""
  path = str(tmp_path / 'in' / 'c' / 'f.wav')
  H.write_wav(path, H.noise(samples), rate=rate)
  H.run_pipeline(H.make_config(
      tmp_path / 'in', tmp_path / 'out', win_len=win_len, hop_len=win_len,
      features=('kaldi_fbank',), splits='train=1.0', **options))
  audio, _ = sf.read(path, dtype='float64')
  return audio, list(numpy_reader.numpy_dataset(str(tmp_path / 'out'),
                                                'train'))


@pytest.mark.slow
def test_a_window_holding_a_frame_at_the_datas_rate_is_enough(tmp_path):
  """Without --sample_rate, windows of 300 samples of 8 kHz data hold a
  Kaldi frame (200 samples there, 400 at 16 kHz): the run is the data's."""
  audio, examples = _windows_of_one_file(tmp_path, 8000, 3000, 300)
  assert len(examples) == 10
  for example in examples:
    start = int(example['win_start_idx'])
    assert example['kaldi_fbank'].shape == (2, 23)
    assert_close(example['kaldi_fbank'],
                 _reference(audio[start:start + 300], 8000))


@pytest.mark.slow
def test_options_that_fit_only_the_datas_rate_run(tmp_path):
  """128 bins leave some without an FFT bin at 16 kHz (512 points), not at
  48 kHz (2048): without --sample_rate the run is judged at the data's
  rate, and its values are torchaudio's there."""
  audio, examples = _windows_of_one_file(tmp_path, 48000, 9600, 4800,
                                         kaldi_num_mel_bins=128)
  assert len(examples) == 2
  for example in examples:
    start = int(example['win_start_idx'])
    assert_close(example['kaldi_fbank'], _reference(
        audio[start:start + 4800], 48000, num_mel_bins=128))
