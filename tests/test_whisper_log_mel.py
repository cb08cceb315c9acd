"""whisper_log_mel against its reference, transformers'
WhisperFeatureExtractor: the function, and the values a run stores."""

import numpy as np
import pytest
import soundfile as sf

from pipeline.config import ConfigError
from pipeline.readers import numpy_dataset as numpy_reader
from tests import helpers as H
from transforms.features import whisper_log_mel as W

transformers = pytest.importorskip('transformers')


def _reference(signal, n_mels, pad):
  extractor = transformers.WhisperFeatureExtractor(feature_size=n_mels)
  features = extractor(np.asarray(signal, np.float32), sampling_rate=16000,
                       padding='max_length' if pad else 'longest',
                       return_tensors='np').input_features[0]
  return features.T  # (frames, bands), as wavbeam stores it


@pytest.mark.parametrize('n_mels', [80, 128])
@pytest.mark.parametrize('length', [401, 4000, 16000, 23456])
@pytest.mark.parametrize('pad', [False, True])
def test_equals_transformers_whisper_feature_extractor(n_mels, length, pad):
  signal = np.random.default_rng(length).standard_normal(length) * 0.1
  ours = W.whisper_log_mel(signal[None], n_mels,
                           W.PAD_SAMPLES if pad else None)[0]
  expected = _reference(signal, n_mels, pad)
  assert ours.dtype == np.float32
  assert ours.shape == expected.shape == (
      (3000 if pad else length // 160), n_mels)
  np.testing.assert_allclose(ours, expected, atol=2e-5, rtol=0)


def test_a_batch_is_each_example_alone():
  rng = np.random.default_rng(1)
  batch = rng.standard_normal((3, 8000)) * np.array([[0.01], [0.3], [1.0]])
  together = W.whisper_log_mel(batch, 80)
  for row, alone in zip(batch, together):
    np.testing.assert_array_equal(W.whisper_log_mel(row[None], 80)[0], alone)


def test_the_slaney_filterbank_is_unit_area_triangles():
  bank = W.slaney_filterbank(80)
  assert bank.shape == (201, 80)
  assert (bank >= 0).all()
  # Each filter peaks once, every band sees a frequency bin, and the
  # bands span 0 Hz to 8 kHz (both edges weigh nothing).
  assert all(np.count_nonzero(np.diff(np.sign(np.diff(col))) < 0) <= 1
             for col in bank.T)
  assert (bank.sum(axis=0) > 0).all()
  assert bank[0].sum() == 0 and bank[-1].sum() == 0 and bank[-2].sum() > 0


@pytest.mark.parametrize('options,named', [
    ({'whisper_n_mels': 64}, 'whisper_n_mels'),
    ({'sample_rate': 22050}, 'sample_rate'),
    ({'whisper_pad': '10s'}, 'whisper_pad'),
    ({'whisper_pad': '30s', 'win_len': 16000 * 31}, 'win_len'),
    ({'whisper_pad': '30s', 'example_unit': 'file', 'max_seconds': 40.0},
     'max_seconds'),
])
def test_options_that_do_not_fit_are_refused(tmp_path, options, named):
  with pytest.raises(ConfigError) as e:
    H.make_config(tmp_path, tmp_path / 'out',
                  features=('signal', 'whisper_log_mel'), **options)
  assert f'--{named}' in str(e.value)


@pytest.mark.slow
@pytest.mark.parametrize('unit', ['window', 'file', 'file_padded'])
def test_a_run_stores_what_the_reference_computes(tmp_path, unit):
  for i in range(4):
    H.write_wav(str(tmp_path / f'in/c{i % 2}/f{i}.wav'),
                H.noise(12000 + 3001 * i, seed=i))
  options = ({'win_len': 8000, 'hop_len': 5000} if unit == 'window' else
             {'example_unit': 'file', 'max_seconds': 10.0})
  pad = unit == 'file_padded'
  if pad:
    options.update(whisper_pad='30s', whisper_n_mels=128)
  config = H.make_config(tmp_path / 'in', tmp_path / 'out',
                         features=('signal', 'whisper_log_mel'),
                         signal_dtype='float32', splits='train=1.0',
                         **options)
  H.run_pipeline(config)
  seen = 0
  for example in numpy_reader.numpy_dataset(str(tmp_path / 'out'), 'train'):
    audio, _ = sf.read(example['filepath'], dtype='float64')
    start = int(example['win_start_idx'])
    signal = audio[start:start + len(example['signal'])]
    np.testing.assert_array_equal(example['signal'],
                                  signal.astype(np.float32))
    expected = _reference(signal, 128 if pad else 80, pad)
    stored = example['whisper_log_mel']
    if unit == 'file':
      assert int(example[W.FRAMES_KEY]) == len(signal) // 160
    np.testing.assert_allclose(stored, expected, atol=2e-5, rtol=0)
    seen += 1
  assert seen == (9 if unit == 'window' else 4)


@pytest.mark.slow
def test_a_recording_too_short_to_centre_a_frame_is_rejected(tmp_path):
  """--example_unit file: 200 samples or fewer cannot be reflected 200 at
  each end; such a recording is a rejection with its reason, the others
  are kept."""
  for name, n in (('tiny', 200), ('ok', 201), ('long', 4000)):
    H.write_wav(str(tmp_path / 'in' / 'c' / f'{name}.wav'),
                H.noise(n, seed=n))
  config = H.make_config(tmp_path / 'in', tmp_path / 'out',
                         features=('whisper_log_mel',), example_unit='file',
                         splits='train=1.0')
  meta = H.run_pipeline(config)
  assert meta['counts']['files_rejected'] == 1
  assert 'too short: 200 frames at 16000 Hz, whisper_log_mel needs more ' \
      'than 200' in (tmp_path / 'out' / 'rejects.jsonl').read_text()
  frames = sorted(int(e[W.FRAMES_KEY]) for e in numpy_reader.numpy_dataset(
      str(tmp_path / 'out'), 'train'))
  assert frames == [201 // 160, 4000 // 160]
