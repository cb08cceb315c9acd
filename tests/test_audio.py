"""transforms/inputs/audio: windows, channels, sample formats, resampling."""

import numpy as np
import pytest

from transforms.inputs import audio
from transforms.runtime import cache_parts


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


def test_to_signal_dtype_of_a_batch_larger_than_a_cache_part():
  """A batch of windows is converted a cache part at a time: each value
  of a strided 2.5-part batch, rounded and clipped, as Python's round()
  (half to even) gives it, in the batch's shape."""
  rng = np.random.default_rng(4)
  size = int(2.5 * cache_parts.VALUES)
  wide = rng.uniform(-1.2, 1.2, (4, size // 2))  # every other value kept
  windows = wide[:, ::2]
  windows[0, :3] = [0.5 / 32768, 1.5 / 32768, -2.5 / 32768]
  signal = audio.to_signal_dtype(windows, 'int16')
  assert signal.shape == windows.shape and signal.dtype == np.int16
  expected = [[max(-32768, min(32767, round(float(v) * 32768))) for v in row]
              for row in windows]
  assert signal.tolist() == expected
  assert signal[0, :3].tolist() == [0, 2, -2]


def test_int16_pcm_values_convert_as_their_full_scale_floats():
  """Windows read as a 16-bit file's stored values give, in every signal
  dtype and as float32, the values their full-scale float64 gives, bit
  for bit; full scale is value / 32768 (Python's division)."""
  values = np.arange(-32768, 32768, dtype=np.int16)
  values = np.stack([values, values[::-1]])[:, ::3]   # strided rows
  floats = audio.full_scale(values)
  assert floats.dtype == np.float64
  assert floats.ravel().tolist() == [int(v) / 32768 for v in values.ravel()]
  for dtype in ('int16', 'int32', 'float32', 'float64'):
    got = audio.to_signal_dtype(values, dtype)
    want = audio.to_signal_dtype(floats, dtype)
    assert got.dtype == want.dtype == np.dtype(dtype) and got.shape == (
        want.shape)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), dtype
  assert audio.to_signal_dtype(values, 'int32').ravel().tolist() == [
      int(v) * 65536 for v in values.ravel()]
  as32 = audio.as_float32(values)
  assert np.array_equal(as32.view(np.uint32),
                        floats.astype(np.float32).view(np.uint32))
  assert audio.full_scale(floats) is floats


def _resample_whole(x, rate_in, rate_out):
  n = audio.resampled_length(len(x), rate_in, rate_out)
  return audio.resample_range(x, 0, len(x), rate_in, rate_out, 0, n)


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
