"""transforms/features/functions: STFT, window functions and the mel filterbank,
against a textbook loop and TensorFlow's own."""

import numpy as np
import pytest

from tests import helpers as H
from transforms.features import functions as features
from transforms.features.extractor import FeatureExtractor


def _stft_reference(window, n_fft, hop, win):
  """Frame-by-frame loop, the textbook definition."""
  frames = [window[s:s + n_fft] * win
            for s in range(0, len(window) - n_fft + 1, hop)]
  return np.abs(np.stack([np.fft.rfft(f) for f in frames]))


def test_stft_matches_frame_loop_and_batch_equals_rows():
  rng = np.random.default_rng(1)
  windows = rng.uniform(-1, 1, (5, 4096)).astype(np.float32)
  win = features.window_function('hann', 512)
  batch = features.stft_magnitude(windows, 512, 256, win)
  assert batch.shape == (5, H.num_stft_frames(4096, 512, 256), 257)
  assert batch.dtype == np.float32
  for i in range(5):
    np.testing.assert_allclose(
        batch[i], _stft_reference(windows[i], 512, 256, win), rtol=1e-5,
        atol=1e-5)
    assert np.array_equal(
        batch[i], features.stft_magnitude(windows[i:i + 1], 512, 256, win)[0])


@pytest.mark.parametrize('n, length, n_fft, hop', [
    (64, 32768, 512, 256),    # whole windows a part: 4 of 127 frames
    (3, 300_000, 512, 160),   # long windows: runs of 512 of 1,872 frames
    (40, 5000, 2048, 300),    # 12 windows a part, the last 4; a hop that
    (0, 4096, 512, 256)])     # leaves samples over; no windows
def test_stft_in_parts_is_the_whole_batch_stft_bit_for_bit(n, length, n_fft,
                                                          hop):
  rng = np.random.default_rng(n + length)
  windows = rng.uniform(-1, 1, (n, length)).astype(np.float32)
  win = features.window_function('hann', n_fft)
  whole = features.frame_magnitude(features.windowed_frames(
      windows, n_fft, hop, win))
  parts = features.stft_magnitude(windows, n_fft, hop, win)
  assert parts.dtype == whole.dtype and parts.shape == whole.shape
  assert np.array_equal(parts, whole)


def test_stft_of_a_tone_peaks_at_its_bin():
  sr, n_fft = 16000, 512
  t = np.arange(8192) / sr
  tone = np.sin(2 * np.pi * 1000.0 * t).astype(np.float32)[None]
  mag = features.stft_magnitude(tone, n_fft, 256,
                                features.window_function('hann', n_fft))
  assert np.all(mag[0].argmax(axis=-1) == round(1000.0 * n_fft / sr))


def test_window_functions_are_periodic():
  hann = features.window_function('hann', 8)
  np.testing.assert_allclose(
      hann, [0, .1464466, .5, .8535534, 1, .8535534, .5, .1464466], atol=1e-6)
  assert np.all(features.window_function('rect', 4) == 1)
  with pytest.raises(ValueError, match='blackman'):
    features.window_function('blackman', 4)


def test_mel_filterbank_shape_and_triangles():
  fb = features.mel_filterbank(40, 512, 16000)
  assert fb.shape == (257, 40) and fb.dtype == np.float32
  assert np.all(fb[0] == 0)           # DC is left out
  assert np.all(fb.max(axis=0) > 0)   # every filter sees some bin
  assert np.all(fb <= 1.0 + 1e-6)
  peaks = fb.argmax(axis=0)
  assert np.all(np.diff(peaks) >= 0)  # centres rise with the filter index


def test_fft_magnitude_of_dc():
  x = np.full((2, 64), 0.5, np.float32)
  mag = features.fft_magnitude(x)
  assert mag.shape == (2, 33)
  np.testing.assert_allclose(mag[:, 0], 32.0)
  np.testing.assert_allclose(mag[:, 1:], 0.0, atol=1e-5)


@pytest.mark.parametrize('n_mels,n_fft,rate', [(64, 512, 16000),
                                               (40, 1024, 44100),
                                               (128, 400, 22050)])
def test_mel_filterbank_equals_tensorflows(n_mels, n_fft, rate):
  import tensorflow as tf
  ours = features.mel_filterbank(n_mels, n_fft, rate)
  # float64: ours rounded to float32; float32: TF's own float32 arithmetic.
  for dtype, atol in ((tf.float64, 6e-8), (tf.float32, 1e-4)):
    theirs = tf.signal.linear_to_mel_weight_matrix(
        n_mels, n_fft // 2 + 1, rate, lower_edge_hertz=0.0,
        upper_edge_hertz=rate / 2.0, dtype=dtype).numpy()
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=atol)


@pytest.mark.parametrize('n_fft', [256, 512, 400])
def test_window_functions_equal_tensorflows(n_fft):
  import tensorflow as tf
  pairs = {'hann': tf.signal.hann_window, 'hamming': tf.signal.hamming_window}
  for name, tf_window in pairs.items():
    theirs = tf_window(n_fft, periodic=True, dtype=tf.float64).numpy()
    np.testing.assert_allclose(features.window_function(name, n_fft), theirs,
                               rtol=0, atol=6e-8)  # float32 rounding
  assert np.array_equal(features.window_function('rect', n_fft), np.ones(n_fft))


@pytest.mark.parametrize('fmin,fmax', [(125.0, 7600.0), (300.0, None),
                                       (0.0, 4000.0)])
def test_mel_band_limits_equal_tensorflows(fmin, fmax):
  import tensorflow as tf
  rate, n_fft, n_mels = 16000, 512, 40
  ours = features.mel_filterbank(n_mels, n_fft, rate, fmin, fmax)
  theirs = tf.signal.linear_to_mel_weight_matrix(
      n_mels, n_fft // 2 + 1, rate, lower_edge_hertz=fmin,
      upper_edge_hertz=rate / 2.0 if fmax is None else fmax,
      dtype=tf.float64).numpy()
  np.testing.assert_allclose(ours, theirs, rtol=0, atol=6e-8)


@pytest.mark.parametrize('n_mels,n_fft,rate,fmin,fmax', [
    (64, 512, 16000, 0.0, None), (128, 512, 16000, 0.0, None),
    (80, 400, 16000, 20.0, 7600.0), (40, 2048, 44100, 0.0, None),
    (1, 256, 8000, 0.0, None), (17, 512, 16000, 300.0, 3000.0),
    # more bands than the low bins can separate: some cover no bin
    (128, 256, 16000, 0.0, None)])
@pytest.mark.parametrize('power', [1, 2])
def test_mel_spectrogram_is_the_product_with_the_filterbank(
    n_mels, n_fft, rate, fmin, fmax, power):
  """Only the products of zero weights are skipped: each band is its
  bins' weighted sum to float32's rounding of that sum, and a band that
  covers no bin is exactly 0."""
  bank = features.mel_filterbank(n_mels, n_fft, rate, fmin, fmax)
  magnitude = np.abs(np.random.default_rng(n_mels).standard_normal(
      (3, 9, n_fft // 2 + 1))).astype(np.float32) ** power * 50
  ours = features.mel_spectrogram(magnitude, bank)
  exact = magnitude.astype(np.float64) @ bank.astype(np.float64)
  assert ours.dtype == np.float32 and ours.shape == exact.shape
  # float32 sums of at most n_fft // 2 + 1 non-negative terms
  bound = (n_fft // 2 + 1) * np.finfo(np.float32).eps * exact
  assert np.all(np.abs(ours - exact) <= bound)
  empty = ~bank.any(axis=0)
  assert (ours[..., empty] == 0).all()
  assert not (ours[..., ~empty] == 0).any()


def test_mel_band_groups_cover_every_weight():
  bank = features.mel_filterbank(128, 512, 16000)
  groups = features.mel_band_groups(bank)
  assert [g[:2] for g in groups] == [(i, min(i + 16, 128))
                                     for i in range(0, 128, 16)]
  for first, end, lo, hi in groups:
    outside = np.delete(bank[:, first:end], np.s_[lo:hi], axis=0)
    assert not outside.any() and bank[lo, first:end].any()
    assert bank[hi - 1, first:end].any()
  # the high bands are wide, the low ones narrow: most bins are skipped
  assert sum((hi - lo) * (end - first) for first, end, lo, hi in groups
             ) < bank.size / 4


def test_a_window_s_mel_bands_do_not_depend_on_its_batch():
  """The run computes a few windows at a time, the featurizer one
  recording: a window's values must be the same bits in any batch."""
  bank = features.mel_filterbank(64, 512, 16000)
  magnitude = np.abs(np.random.default_rng(7).standard_normal(
      (32, 127, 257))).astype(np.float32)
  whole = features.mel_spectrogram(magnitude, bank)
  for size in (1, 3, 4, 7, 32):
    for start in range(0, 32 - size + 1, 5):
      part = features.mel_spectrogram(magnitude[start:start + size], bank)
      assert np.array_equal(part.view(np.uint32),
                            whole[start:start + size].view(np.uint32))


def _log_mel(seed=3, n=4, win_len=4096, n_fft=512, hop=256, n_mels=40,
             rate=16000):
  windows = np.random.default_rng(seed).uniform(
      -0.5, 0.5, (n, win_len)).astype(np.float32)
  window = features.window_function('hann', n_fft)
  magnitude = features.stft_magnitude(windows, n_fft, hop, window)
  return features.log_compress(features.mel_spectrogram(
      magnitude, features.mel_filterbank(n_mels, n_fft, rate)))


@pytest.mark.parametrize('n_mfcc', [13, 20, 40])
def test_mfcc_equals_tensorflows(n_mfcc):
  import tensorflow as tf
  log_mel = _log_mel()
  theirs = tf.signal.mfccs_from_log_mel_spectrograms(
      tf.constant(log_mel))[..., :n_mfcc].numpy()
  ours = features.mfcc(log_mel, n_mfcc)
  assert ours.dtype == np.float32 and ours.shape == theirs.shape
  np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4)
  # Rows never interact: a batch gives each row's result bit for bit.
  assert np.array_equal(features.mfcc(log_mel[2:3], n_mfcc), ours[2:3])


def test_lpc_solves_the_yule_walker_equations():
  import scipy.linalg
  rng = np.random.default_rng(4)
  frames = rng.standard_normal((3, 5, 400)).astype(np.float32)
  frames *= features.window_function('hamming', 400)
  for order in (1, 2, 12, 30):
    ours = features.lpc(frames, order)
    assert ours.shape == (3, 5, order) and ours.dtype == np.float32
    for i, j in np.ndindex(3, 5):
      x = frames[i, j].astype(np.float64)
      r = np.array([x[:len(x) - k] @ x[k:] for k in range(order + 1)])
      expected = scipy.linalg.solve_toeplitz(r[:order], -r[1:])
      np.testing.assert_allclose(ours[i, j], expected, rtol=0, atol=2e-5)
    assert np.array_equal(features.lpc(frames[1:2], order), ours[1:2])


def test_lpc_recovers_an_ar2_process():
  """x[t] = 1.3 x[t-1] - 0.6 x[t-2] + e[t]: A(z) = 1 - 1.3 z^-1 + 0.6 z^-2,
  so a_1 = -1.3 and a_2 = 0.6."""
  import scipy.signal
  rng = np.random.default_rng(5)
  noise = rng.standard_normal(16000 * 4)
  x = scipy.signal.lfilter([1.0], [1.0, -1.3, 0.6], noise)
  x = (x / np.abs(x).max() * 0.5).astype(np.float32)
  windows = x.reshape(16, -1)
  window = features.window_function('hann', 512)
  frames = features.windowed_frames(windows, 512, 256, window)
  coefficients = features.lpc(frames, 2).reshape(-1, 2)
  np.testing.assert_allclose(coefficients.mean(axis=0), [-1.3, 0.6],
                             atol=0.05)


def test_lpc_of_silence_and_of_a_frame_predicted_exactly():
  frames = np.zeros((2, 3, 256), np.float32)
  frames[1, 0] = 0.25  # a constant: predicted exactly by a_1 = -1
  found = features.lpc(frames, 4)
  assert np.isfinite(found).all()
  assert not found[0].any()
  assert found[1, 0, 0] == pytest.approx(-1.0, abs=1e-2)


def _first_and_last(windows, sample_rate):
  del sample_rate
  return windows[:, [0, -1]]


def _positive_samples(windows, sample_rate):
  """A shape that follows the content: refused."""
  del sample_rate
  return windows[:, windows[0] > 0]


def test_feature_functions_get_one_recording_at_a_time_in_file_mode(
    tmp_path):
  config = H.make_config(tmp_path, tmp_path / 'out', example_unit='file',
                         features=('signal',))
  calls = []

  def recorded(windows, sample_rate):
    calls.append(windows.shape)
    return _first_and_last(windows, sample_rate)

  batch = H.noise(3 * 4000, seed=1).reshape(3, 4000)
  out = FeatureExtractor(config, {'ends': recorded}).compute(batch, 16000)
  assert calls == [(1, 4000)] * 3
  assert np.array_equal(out['ends'],
                        batch[:, [0, -1]].astype(np.float32))
  with pytest.raises(ValueError, match="returned shapes .* for two "
                     "recordings; its result must have one shape"):
    FeatureExtractor(config, {'pos': _positive_samples}).compute(batch,
                                                                  16000)
  with pytest.raises(ValueError, match=r"returned shape \(\) for one "
                     "recording; its first axis must be the recording"):
    FeatureExtractor(config, {'peak': _peak}).compute(batch, 16000)


def _peak(windows, sample_rate):
  """A scalar, not a row per recording: refused."""
  del sample_rate
  return np.abs(windows).max()


def test_mfcc_variants_share_one_log_mel_per_batch(tmp_path):
  """A sweep's variants that differ in n_mfcc alone take their
  coefficients from one log_mel of the batch, and each gives what mfcc
  (checked against TensorFlow's above) gives for that log_mel."""
  extractors = [FeatureExtractor(H.make_config(
      tmp_path, tmp_path / 'out', features=('log_mel', 'mfcc'), n_mfcc=n,
      win_len=4096)) for n in (13, 20)]
  windows = H.noise(3 * 4096, seed=2).reshape(3, 4096)
  shared = {}
  outs = [extractor.compute(windows, 16000, shared)
          for extractor in extractors]
  assert outs[0]['log_mel'] is outs[1]['log_mel']
  for out, n in zip(outs, (13, 20)):
    assert out['mfcc'].shape == (3, out['log_mel'].shape[1], n)
    assert np.array_equal(out['mfcc'], features.mfcc(out['log_mel'], n))


@pytest.mark.parametrize('n_mels,n_mfcc', [(40, 13), (64, 20), (128, 128),
                                           (20, 1)])
def test_mfcc_is_the_fft_based_dct_rounded_to_float32(n_mels, n_mfcc):
  """mfcc's product with the DCT-II basis against scipy.fft's FFT-based
  DCT-II, both in float64: the same float32 values, but for a last-place
  unit where the two float64 results fall either side of a rounding
  boundary."""
  import scipy.fft
  log_mel = (np.random.default_rng(n_mels).standard_normal(
      (4, 127, n_mels)) * 3 - 5).astype(np.float32)
  expected = (scipy.fft.dct(log_mel.astype(np.float64), type=2, axis=-1)
              [..., :n_mfcc] / np.sqrt(2.0 * n_mels)).astype(np.float32)
  ours = features.mfcc(log_mel, n_mfcc)
  assert ours.dtype == np.float32 and ours.shape == expected.shape
  np.testing.assert_array_max_ulp(ours, expected, maxulp=1)
  assert np.mean(ours == expected) > 0.999
