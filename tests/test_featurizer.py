"""pipeline/featurizer: a recording featurized at inference equals the
dataset's examples of it, read back from the shards the pipeline wrote."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.commands import run as run_lib
from pipeline.contract.errors import DatasetError
from pipeline.featurizer import FeaturizerError, featurizer, tf_featurizer
from tests import helpers as H

RATE = 16000
ALL = ('signal', 'spectrogram', 'log_mel', 'mfcc', 'lpc', 'fft')


def _zero_crossings(windows, sample_rate):
  del sample_rate
  return np.count_nonzero(np.diff(np.signbit(windows), axis=1), axis=1)


def _two_channels(n, seed):
  """Channels that differ, so that mixing them matters."""
  t = np.arange(n) / RATE
  return np.stack([H.noise(n, seed=seed) * 0.6 + 0.3 * np.sin(2e3 * t),
                   H.noise(n, seed=seed + 1) * 0.4], axis=1)


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
  d = tmp_path_factory.mktemp('featurizer')
  paths = {
      # 17500 frames: 5 full windows of 4096 every 3000, and a padded one.
      'stereo': H.write_wav(str(d / 'in' / 'stereo.wav'),
                            _two_channels(17500, 1), RATE),
      'other_rate': H.write_wav(str(d / 'in' / 'other_rate.wav'),
                                H.noise(22750, seed=3), 22050),
      'flac': H.write_wav(str(d / 'in' / 'take.flac'),
                          H.noise(9000, channels=3, seed=4), RATE,
                          subtype='PCM_24', fmt='FLAC'),
      # Decoded whole from its start, as the pipeline decodes it.
      'vorbis': H.write_wav(str(d / 'in' / 'lossy.ogg'),
                            H.noise(12000, seed=5), RATE, subtype='VORBIS',
                            fmt='OGG'),
  }
  return d, paths


@pytest.fixture(scope='module')
def resampled(corpus):
  """Every built-in feature, every file resampled to 16 kHz, the last
  window padded, an integer signal of another width than the default."""
  d, _ = corpus
  config = H.make_config(
      d / 'in', d / 'resampled', audio_formats=('wav', 'flac', 'ogg'),
      label_from='none', win_len=4096, hop_len=3000, pad=True,
      sample_rate=RATE, features=ALL, signal_dtype='int16', n_fft=512,
      fft_hop=256, fft_window='hamming', spectrogram_scale='log', n_mels=40,
      fmin=50.0, fmax=7000.0, n_mfcc=20, lpc_order=10)
  H.run_pipeline(config)
  return str(d / 'resampled')


@pytest.fixture(scope='module')
def plain(corpus):
  """The first channel, no padding, at most 3 windows a file, a float
  signal, a function of our own: the 22050 Hz file is rejected."""
  d, _ = corpus
  config = H.make_config(
      d / 'in', d / 'plain', audio_formats=('wav', 'flac', 'ogg'),
      label_from='none', win_len=2048, hop_len=1024, channels='first',
      max_windows_per_signal=3, signal_dtype='float32',
      features=('signal', 'spectrogram', 'fft'), n_fft=256, fft_hop=128,
      fft_window='rect')
  H.run_pipeline(config, extra_features={'zcr': _zero_crossings})
  return str(d / 'plain')


@pytest.fixture(scope='module')
def sweep(corpus):
  d, _ = corpus
  (d / 'v.json').write_text(json.dumps(
      {'m13': {'n_mfcc': 13}, 'm20': {'n_mfcc': 20, 'n_mels': 32}}))
  run_lib.run(['--input_dir', str(d / 'in'), '--output_dir',
               str(d / 'sweep'), '--win_len', '4096', '--sample_rate',
               str(RATE), '--label_from', 'none', '--features',
               'signal,mfcc', '--variants', str(d / 'v.json'),
               '--runner=FnApiRunner', '--quiet'])
  return str(d / 'sweep')


def _stored(dataset_dir, path):
  """The examples of one file, in window order: {key: stacked array}."""
  examples = sorted((e for e in numpy_reader.numpy_dataset(dataset_dir)
                     if e['filepath'] == path),
                    key=lambda e: int(e['win_start_idx']))
  assert examples, path
  return {k: np.stack([e[k] for e in examples]) for k in examples[0]}


def _assert_same_bytes(got, stored, keys):
  assert sorted(got) == sorted(keys)
  for key in keys:
    assert got[key].dtype == stored[key].dtype, key
    assert got[key].shape == stored[key].shape, key
    assert got[key].tobytes() == stored[key].tobytes(), key


def test_files_give_their_stored_examples_bit_for_bit(corpus, resampled):
  _, paths = corpus
  featurize = featurizer(resampled)
  assert featurize.sample_rate == RATE and featurize.features == ALL
  for name, path in paths.items():
    stored = _stored(resampled, path)
    got = featurize(path)
    _assert_same_bytes(got, stored, ALL)
    n = len(got['signal'])
    assert stored['win_start_idx'].tolist() == [3000 * i for i in range(n)]
  # What the corpus covers: 3 channels mixed, a resampled file, and a
  # last window that is zeros past the end of its file.
  assert sf.info(paths['flac']).channels == 3
  assert sf.info(paths['other_rate']).samplerate == 22050
  signal = featurize(paths['stereo'])['signal']
  assert len(signal) == 6   # the last starts at 15000 of 17500 frames
  assert not signal[-1][2500:].any() and signal[-1][:2500].any()


def test_the_other_options_and_a_feature_of_our_own(corpus, plain):
  _, paths = corpus
  featurize = featurizer(plain, extra_features={'zcr': _zero_crossings})
  keys = ('signal', 'spectrogram', 'fft', 'zcr')
  assert featurize.features == keys
  for name in ('stereo', 'flac'):
    got = featurize(paths[name])
    _assert_same_bytes(got, _stored(plain, paths[name]), keys)
    assert len(got['signal']) == 3  # max_windows_per_signal, of 16 or 7
    # channels=first: the first channel alone, as float32.
    first = sf.read(paths[name], always_2d=True)[0][:2048, 0]
    assert np.array_equal(got['signal'][0], first.astype(np.float32))
  # A file the run rejected for its rate is resampled, as --sample_rate
  # would have it: the whole-file reference of tests/helpers.
  assert all(e['filepath'] != paths['other_rate']
             for e in numpy_reader.numpy_dataset(plain))
  got = featurize(paths['other_rate'])
  _, windows = H.reference_windows(paths['other_rate'], featurize.config,
                                   RATE)
  assert np.array_equal(got['signal'], windows.astype(np.float32))


def test_decoded_samples_give_the_same_features(corpus, resampled):
  """Samples as soundfile.read gives them; not those of a lossy file,
  which soundfile.read decodes after a seek to its start (an MPEG-2 MP3
  then decodes to other samples: tests/test_audio_formats.py)."""
  _, paths = corpus
  featurize = featurizer(resampled)
  for name, path in paths.items():
    if name == 'vorbis':
      continue
    want = featurize(path)
    integer = 'int32' if name == 'flac' else 'int16'  # 24-bit samples
    for dtype in ('float64', 'float32', integer):
      samples, rate = sf.read(path, dtype=dtype)
      got = featurize(samples, rate)
      for key in ALL:
        assert got[key].dtype == want[key].dtype, (name, dtype, key)
        np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-5,
                                   err_msg=f'{name} {dtype} {key}')
    # The float64 samples soundfile reads are those the pipeline read.
    samples, rate = sf.read(path)
    _assert_same_bytes(featurize(samples, rate), want, ALL)


def test_a_subset_of_the_features(corpus, resampled):
  _, paths = corpus
  got = featurizer(resampled, features=['mfcc', 'lpc'])(paths['stereo'])
  _assert_same_bytes(got, _stored(resampled, paths['stereo']),
                     ('mfcc', 'lpc'))


def test_a_variant_of_a_sweep(corpus, sweep):
  _, paths = corpus
  with pytest.raises(DatasetError, match=r'a sweep of one dataset per '
                     r'variant \(m13, m20\): pass variant='):
    featurizer(sweep)
  with pytest.raises(DatasetError, match="variant 'm99' is not in"):
    featurizer(sweep, variant='m99')
  for variant, n_mfcc in (('m13', 13), ('m20', 20)):
    got = featurizer(sweep, variant=variant)(paths['other_rate'])
    stored = _stored(os.path.join(sweep, variant), paths['other_rate'])
    _assert_same_bytes(got, stored, ('signal', 'mfcc'))
    assert got['mfcc'].shape[-1] == n_mfcc


def test_the_tensorflow_module_saved_and_loaded(corpus, resampled, plain,
                                                tmp_path):
  import tensorflow as tf
  _, paths = corpus
  loaded = {}
  for dataset, features in ((resampled, None), (plain, ('signal', 'fft'))):
    module = tf_featurizer(dataset, features=features)
    tf.saved_model.save(module, str(tmp_path / os.path.basename(dataset)))
    loaded[dataset] = tf.saved_model.load(
        str(tmp_path / os.path.basename(dataset)))
  assert int(loaded[resampled].sample_rate.numpy()) == RATE
  cases = [(resampled, 'stereo', ALL), (resampled, 'flac', ALL),
           (plain, 'stereo', ('signal', 'fft'))]
  for dataset, name, keys in cases:
    samples, rate = sf.read(paths[name], dtype='float32')
    assert rate == RATE
    stored = _stored(dataset, paths[name])
    for waveform in (samples, samples[:, :1], samples[:, 0]):
      got = {k: v.numpy() for k, v in loaded[dataset](waveform).items()}
      if waveform.ndim == 1 or waveform.shape[1] == 1:
        # One channel given: the features of that channel alone.
        want = featurizer(dataset, features=keys)(samples[:, 0], RATE)
      else:
        want = {k: stored[k] for k in keys}
      assert sorted(got) == sorted(keys)
      for key in keys:
        assert got[key].dtype == want[key].dtype, key
        assert got[key].shape == want[key].shape, key
        if key == 'signal':
          assert np.array_equal(got[key], want[key]), (name, key)
        else:
          np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-4,
                                     err_msg=f'{name} {key}')
  for waveform, message in [
      (np.zeros(2047, np.float32), 'too short: a window needs 2048'),
      (np.zeros((0, 2), np.float32), 'too short'),
      (np.zeros((1, 4096, 2), np.float32), r'give \[n\] \(mono\) or'),
      (np.zeros((4096, 0), np.float32), 'no channels'),
      (np.r_[np.zeros(3000), np.inf].astype(np.float32), 'NaN or Inf')]:
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
      loaded[plain](waveform)


def test_tensorflow_refuses_a_feature_of_our_own(plain):
  with pytest.raises(FeaturizerError, match=r"feature \['zcr'\].*no "
                     'TensorFlow form'):
    tf_featurizer(plain)


def test_bad_recordings_are_refused_with_the_reason(corpus, plain, tmp_path):
  _, paths = corpus
  featurize = featurizer(plain, features=['signal'])
  cases = [
      ((str(tmp_path / 'missing.wav'),), 'missing.wav: no such file'),
      ((str(tmp_path),), 'not a regular file: a folder'),
      ((paths['stereo'], RATE), 'sample_rate=16000 given with a path'),
      ((np.zeros(4096),), 'needs its sample rate'),
      ((np.zeros((4096, 2, 2)), RATE), r'shape \(4096, 2, 2\)'),
      ((np.zeros(0), RATE), r'shape \(0,\)'),
      ((np.zeros((2, 4096)), RATE), r'not \[channels, n\]'),
      ((np.zeros(4096, np.uint8), RATE), 'dtype uint8'),
      ((np.zeros(4096, np.complex64), RATE), 'dtype complex64'),
      ((np.zeros(4096), 0), 'sample_rate=0'),
      ((np.zeros(4096), 16000.5), 'sample_rate=16000.5'),
      ((np.zeros(4096), True), 'sample_rate=True'),
      ((np.zeros(2047), RATE), 'too short: 2047 frames at 16000 Hz, a window '
       'needs 2048'),
      ((np.r_[np.zeros(3000), np.nan, np.zeros(2000)], RATE),
       r'window 1 \(from sample 1024 at 16000 Hz\) holds NaN'),
  ]
  text = tmp_path / 'notes.wav'
  text.write_text('not audio at all\n')
  cases.append(((str(text),), 'notes.wav: unreadable'))
  for args, message in cases:
    with pytest.raises(FeaturizerError, match=message):
      featurize(*args)


def test_bad_requests_are_refused_with_the_reason(plain, tmp_path):
  with pytest.raises(DatasetError, match='no wavbeam dataset at'):
    featurizer(str(tmp_path))
  with pytest.raises(FeaturizerError, match=r"feature \['zcr'\] .* "
                     'extra_features='):
    featurizer(plain)
  with pytest.raises(FeaturizerError, match=r"extra_features names \['zc'\]"):
    featurizer(plain, extra_features={'zc': _zero_crossings})
  with pytest.raises(FeaturizerError, match=r"unknown feature \['mfcc'\].*"
                     "'signal', 'spectrogram', 'fft', 'zcr'"):
    featurizer(plain, features=['signal', 'mfcc'])
  # A function other than the dataset's, found by what it returns.
  wrong = featurizer(plain, extra_features={'zcr': _as_float})
  with pytest.raises(FeaturizerError, match=r"'zcr': computed float64\[\] "
                     r'per window, but the dataset .* stores int64\[\]'):
    wrong(np.ones(4096), RATE)


def _as_float(windows, sample_rate):
  return _zero_crossings(windows, sample_rate).astype(np.float64)


def test_featurizing_imports_neither_beam_nor_tensorflow(corpus, resampled):
  _, paths = corpus
  code = (
      'import sys\n'
      'for name in ("tensorflow", "apache_beam"): sys.modules[name] = None\n'
      'from pipeline.featurizer import featurizer\n'
      f'out = featurizer({resampled!r})({paths["other_rate"]!r})\n'
      'print(sorted((k, v.shape) for k, v in out.items()))\n')
  proc = subprocess.run([sys.executable, '-c', code], cwd=H.ROOT, text=True,
                        capture_output=True)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "('mfcc', (6, 15, 20))" in proc.stdout

