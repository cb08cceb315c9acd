import numpy as np
import pytest

from transforms import audio
from transforms import features


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
  assert batch.shape == (5, features.num_stft_frames(4096, 512, 256), 257)
  assert batch.dtype == np.float32
  for i in range(5):
    np.testing.assert_allclose(
        batch[i], _stft_reference(windows[i], 512, 256, win), rtol=1e-5,
        atol=1e-5)
    assert np.array_equal(
        batch[i], features.stft_magnitude(windows[i:i + 1], 512, 256, win)[0])


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


@pytest.mark.parametrize('frames,win,hop,pad,expected', [
    (0, 4, 4, False, 0), (0, 4, 4, True, 0),
    (3, 4, 4, False, 0), (3, 4, 4, True, 1),    # one sample short
    (4, 4, 4, False, 1), (4, 4, 4, True, 1),    # exactly one window
    (5, 4, 4, True, 2), (8, 4, 4, True, 2), (9, 4, 2, False, 3),
    (9, 4, 2, True, 4), (10, 4, 2, True, 4), (10, 4, 6, True, 2),
    (11, 4, 6, True, 2), (7, 4, 6, True, 2), (6, 4, 6, True, 1),
])
def test_window_count(frames, win, hop, pad, expected):
  assert audio.window_count(frames, win, hop, pad) == expected


def test_slice_windows_pads_with_zeros():
  x = np.arange(1, 8, dtype=np.float64)
  w = audio.slice_windows(x, np.array([0, 4]), 4)
  assert w.tolist() == [[1, 2, 3, 4], [5, 6, 7, 0]]


def test_mix_channels():
  block = np.array([[0.5, -0.5], [1.0, 0.0]])
  assert audio.mix_channels(block, 'mean').tolist() == [0.0, 0.5]
  assert audio.mix_channels(block, 'first').tolist() == [0.5, 1.0]


def test_to_signal_dtype_full_scale_and_clipping():
  x = np.array([-1.0, -0.5, 0.0, 0.5, 1.5, 2 ** -16])
  assert audio.to_signal_dtype(x, 'int16').tolist() == [
      -32768, -16384, 0, 16384, 32767, 0]  # 0.5 rounds half to even
  assert audio.to_signal_dtype(x, 'int32')[4] == 2 ** 31 - 1
  assert audio.to_signal_dtype(x, 'float32')[4] == np.float32(1.5)


def _resample_whole(x, rate_in, rate_out):
  n = audio.resampled_length(len(x), rate_in, rate_out)
  return audio.resample_range(x, 0, len(x), rate_in, rate_out, 0, n)


@pytest.mark.parametrize('rate_in,rate_out', [(16000, 8000), (8000, 16000),
                                              (44100, 16000), (16000, 22050)])
def test_resampling_keeps_a_tone_and_chunks_join_exactly(rate_in, rate_out):
  t = np.arange(rate_in * 5) / rate_in
  x = np.sin(2 * np.pi * 440.0 * t)
  y = _resample_whole(x, rate_in, rate_out)
  assert len(y) == audio.resampled_length(len(x), rate_in, rate_out)
  t_out = np.arange(len(y)) / rate_out
  inner = slice(len(y) // 8, -len(y) // 8)  # away from the zero edges
  np.testing.assert_allclose(y[inner], np.sin(2 * np.pi * 440.0 * t_out)[inner],
                             atol=1e-6)
  # A chunk computed from only its input neighbourhood equals the whole,
  # wherever it starts and ends relative to the resampling blocks.
  block_out = audio.resample_blocks(rate_in, rate_out)[0]
  for start, length in [(1000, 777), (block_out - 5, 10), (0, 3),
                        (len(y) - 700, 700), (block_out // 2, block_out)]:
    length = min(length, len(y) - start)
    lo, hi = audio.resample_input_range(len(x), rate_in, rate_out, start,
                                        start + length)
    part = audio.resample_range(x[lo:hi], lo, len(x), rate_in, rate_out,
                                start, length)
    assert np.array_equal(part, y[start:start + length]), (start, length)


RATE_PAIRS = [(44100, 16000), (48000, 16000), (22050, 16000), (16000, 8000),
              (8000, 16000), (44100, 48000), (192000, 8000)]


@pytest.mark.parametrize('rate_in,rate_out', RATE_PAIRS)
def test_resampling_equals_a_one_pass_soxr_within_1e8(rate_in, rate_out):
  import soxr
  x = np.random.default_rng(3).uniform(-1, 1, rate_in * 5)
  y = _resample_whole(x, rate_in, rate_out)
  one_pass = soxr.resample(x, rate_in, rate_out, quality='VHQ')
  n = min(len(y), len(one_pass))
  assert abs(len(y) - len(one_pass)) <= 1
  assert np.abs(y[:n] - one_pass[:n]).max() < 1e-8


def _tone_level_db(rate_in, rate_out, freq):
  """Level (dB re full scale) at `freq` or its alias after resampling a
  full-scale tone."""
  t = np.arange(rate_in * 2) / rate_in
  y = _resample_whole(np.sin(2 * np.pi * freq * t), rate_in, rate_out)
  y = y[len(y) // 4:3 * len(y) // 4]
  seen = freq if freq < rate_out / 2 else rate_out - freq
  window = np.blackman(len(y))
  spectrum = np.abs(np.fft.rfft(y * window)) / (window.sum() / 2)
  k = int(round(seen * len(y) / rate_out))
  return 20 * np.log10(spectrum[k - 3:k + 4].max() + 1e-300)


@pytest.mark.parametrize('rate_in,rate_out', [(44100, 16000), (48000, 16000),
                                              (22050, 16000), (16000, 8000)])
def test_resampling_does_not_alias(rate_in, rate_out):
  nyquist = rate_out / 2
  # Tones 100 Hz and more above the new Nyquist fold back at least 80 dB
  # down (the sinc with its cutoff at the Nyquist let 8.1 kHz through at
  # -9.8 dB when going to 16 kHz).
  for above in (100, 300, 600, 2000):
    assert _tone_level_db(rate_in, rate_out, nyquist + above) < -80, above
  # The pass band: flat to 0.91 x Nyquist, about -3 dB at 0.95 x.
  for fraction in (0.1, 0.5, 0.8, 0.91):
    assert abs(_tone_level_db(rate_in, rate_out, fraction * nyquist)) < 0.01
  assert -3.5 < _tone_level_db(rate_in, rate_out, 0.95 * nyquist) < -2.5


def test_resampling_rejects_missing_context():
  x = np.zeros(1000)
  with pytest.raises(ValueError, match='needs input'):
    audio.resample_range(x[500:], 500, 1000, 16000, 8000, 10, 10)


def test_chunks_are_bounded_by_input_samples():
  from transforms import plan
  from transforms.wav_io import WavInfo

  def per_chunk(rate, channels, hop=1000, dataset_rate=16000):
    info = WavInfo(0, 'x.wav', 10**7, rate, channels, 'PCM_16')
    p = plan.FilePlan(info, 'train', 'a', dataset_rate, 10**7, 10**4)
    return plan.windows_per_chunk(p, hop)

  assert per_chunk(16000, 1) == plan.CHUNK_SAMPLES // 1000
  # 8 channels, or 3x the rate before resampling: runs shrink to match.
  assert per_chunk(16000, 8) == plan.CHUNK_SAMPLES // 8000
  assert per_chunk(48000, 1) == plan.CHUNK_SAMPLES // 3000
  # A window bigger than the budget still makes progress, one at a time.
  assert per_chunk(16000, 2, hop=2**21) == 1


@pytest.mark.parametrize('total', [1, 2, 3, 5, 17, 64, 1000, 4097])
def test_permutation_is_a_seeded_bijection(total):
  from transforms import layout
  p = layout.permute(np.arange(total), total, seed=0)
  assert sorted(p.tolist()) == list(range(total))
  assert np.array_equal(p, layout.permute(np.arange(total), total, seed=0))
  if total >= 64:
    q = layout.permute(np.arange(total), total, seed=1)
    assert not np.array_equal(p, q)
    # Neighbours in input order land far apart.
    assert np.median(np.abs(np.diff(p))) > total / 10


def test_layout_balances_shards_and_places_every_window_once():
  from transforms import layout
  entries = [('train', 0, 7), ('train', 1, 100), ('test', 2, 5),
             ('train', 3, 1)]
  layouts = layout.compute_layouts(entries, max_examples_per_shard=10)
  train = layouts['train']
  assert train.total == 108 and train.num_shards == 11
  assert train.offsets == {0: 0, 1: 7, 3: 107}
  placed = {}
  for split, index, n in entries:
    for (s, shard), (i, w, key) in layout.window_refs(
        index, split, n, layouts[split], shuffle=True, seed=0):
      assert (i, w) not in placed
      placed[(i, w)] = (s, shard, key)
  assert len(placed) == 113
  sizes = np.bincount([v[1] for v in placed.values() if v[0] == 'train'])
  assert sizes.max() - sizes.min() <= 1
  # The long file is spread over every shard.
  assert {v[1] for k, v in placed.items() if k[0] == 1} == set(range(11))


def test_split_assignment_is_stable_and_follows_fractions():
  from transforms import splits
  spec = (('train', 0.8), ('validation', 0.1), ('test', 0.1))
  names = [splits.split_by_hash(f'c/{i}.wav', spec) for i in range(5000)]
  counts = {n: names.count(n) / 5000 for n, _ in spec}
  assert abs(counts['train'] - 0.8) < 0.03 and abs(counts['test'] - 0.1) < 0.02
  # Known values: the same on every machine and Python version.
  assert splits.split_by_hash('c/0.wav', spec) == names[0]
  assert splits.stable_unit('x') == int(
      ' 2d711642b726b044'.replace(' ', ''), 16) / 2**64
  assert splits.split_from_folder('train/dog/a.wav') == 'train'
  assert splits.split_from_folder('a.wav') is None


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
