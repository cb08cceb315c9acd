"""Pure numpy: window arithmetic, channel mixing, sample conversion, resampling.

Everything here is a function of its arguments, so a chunk of a file computed
on one worker equals the same windows computed from the whole file.
"""

import math
from typing import Tuple

import numpy as np


def window_count(frames: int, win_len: int, hop_len: int, pad: bool) -> int:
  """Number of windows a signal of `frames` samples yields.

  Full windows start at 0, hop, 2*hop, ... and end inside the signal. With
  `pad`, one more window starts right after the last full one if the signal
  has samples no full window covered; its missing tail is zeros.
  """
  if frames <= 0:
    return 0
  full = (frames - win_len) // hop_len + 1 if frames >= win_len else 0
  if not pad:
    return full
  covered_to = (full - 1) * hop_len + win_len if full else 0
  if frames > covered_to and full * hop_len < frames:
    return full + 1
  return full


def mix_channels(block: np.ndarray, policy: str) -> np.ndarray:
  """(frames, channels) float64 -> (frames,) float64."""
  if block.shape[1] == 1 or policy == 'first':
    return block[:, 0]
  if policy == 'mean':
    return block.mean(axis=1)
  raise ValueError(f'unknown channel policy {policy!r}')


def slice_windows(samples: np.ndarray, starts: np.ndarray,
                  win_len: int) -> np.ndarray:
  """Windows of `samples` at `starts` (relative), zero-padded past the end.

  Returns a new (len(starts), win_len) array of samples' dtype.
  """
  starts = np.asarray(starts, dtype=np.int64)
  if starts.size == 0:
    return np.zeros((0, win_len), samples.dtype)
  if starts.size == 1 and starts[0] == 0 and samples.shape[0] == win_len:
    return samples.reshape(1, win_len).copy()  # the common shuffled case
  needed = int(starts[-1]) + win_len
  if needed > samples.shape[0]:
    samples = np.concatenate(
        [samples, np.zeros(needed - samples.shape[0], samples.dtype)])
  view = np.lib.stride_tricks.sliding_window_view(samples, win_len)
  return view[starts]


def to_signal_dtype(samples: np.ndarray, dtype: str) -> np.ndarray:
  """Full-scale float samples ([-1, 1)) as the stored signal dtype.

  Integer dtypes are full scale (as libsndfile reads PCM): x * 2**(bits-1),
  rounded half to even and clipped to the dtype's range. Float dtypes keep
  the value, including peaks above 1.0.
  """
  target = np.dtype(dtype)
  if target.kind == 'f':
    return samples.astype(target)
  if target.kind != 'i':
    raise ValueError(f'signal dtype must be a signed integer or float: {dtype}')
  info = np.iinfo(target)
  scaled = np.multiply(samples, 2.0 ** (info.bits - 1), dtype=np.float64)
  np.rint(scaled, out=scaled)
  np.clip(scaled, info.min, info.max, out=scaled)
  return scaled.astype(target)


def from_signal_dtype(signal: np.ndarray) -> np.ndarray:
  """A stored signal back to full-scale float64 samples (to_signal_dtype's
  inverse, up to its rounding and clipping)."""
  if np.issubdtype(signal.dtype, np.integer):
    return signal / float(2 ** (np.iinfo(signal.dtype).bits - 1))
  return signal.astype(np.float64)


# --- resampling -------------------------------------------------------------
# A Kaiser-windowed sinc interpolator evaluated at each output sample from the
# input samples around it. Each output sample depends only on the input, never
# on how the signal was chunked, so chunks resampled on different workers join
# exactly.

RESAMPLE_HALF_WIDTH = 32  # input-rate zero crossings on each side
_KAISER_BETA = 8.6


def resample_ratio(rate_in: int, rate_out: int) -> Tuple[int, int]:
  g = math.gcd(rate_in, rate_out)
  return rate_out // g, rate_in // g  # (up, down)


def resampled_length(frames: int, rate_in: int, rate_out: int) -> int:
  up, down = resample_ratio(rate_in, rate_out)
  return -(-frames * up // down)


def resample_context(rate_in: int, rate_out: int) -> int:
  """Input samples needed on each side of an output range."""
  up, down = resample_ratio(rate_in, rate_out)
  return RESAMPLE_HALF_WIDTH * max(1, -(-down // up)) + 1


def resample_kernel(rate_in: int, rate_out: int) -> np.ndarray:
  """(up, 2*half) interpolation taps, one row per output phase."""
  up, down = resample_ratio(rate_in, rate_out)
  half = resample_context(rate_in, rate_out) - 1
  cutoff = min(1.0, up / down)  # the lower Nyquist, in input-sample units
  taps = np.arange(-half + 1, half + 1, dtype=np.float64)
  frac = np.arange(up, dtype=np.float64) / up  # output time - base sample
  dist = taps[None, :] - frac[:, None]
  ratio = np.clip(dist / half, -1.0, 1.0)
  window = np.i0(_KAISER_BETA * np.sqrt(1.0 - ratio * ratio)) / np.i0(
      _KAISER_BETA)
  return cutoff * np.sinc(cutoff * dist) * window


def resample_range(x: np.ndarray, x_offset: int, frames: int, rate_in: int,
                   rate_out: int, out_start: int, out_len: int,
                   kernel: np.ndarray = None) -> np.ndarray:
  """Output samples [out_start, out_start + out_len) of the resampled signal.

  `x` (float64) holds input samples [x_offset, x_offset + len(x)) of a signal
  of `frames` samples, which is zero outside [0, frames). `x` must cover
  `resample_context` samples around the range, or reach the signal's ends.
  """
  up, down = resample_ratio(rate_in, rate_out)
  if up == down:
    return x[out_start - x_offset:out_start - x_offset + out_len].copy()
  if kernel is None:
    kernel = resample_kernel(rate_in, rate_out)
  half = kernel.shape[1] // 2
  out = np.empty(out_len, np.float64)
  if out_len == 0:
    return out
  first = (out_start * down) // up - half + 1
  last = ((out_start + out_len - 1) * down) // up + half  # inclusive
  lo, hi = max(first, 0), min(last + 1, frames)
  if lo < x_offset or hi > x_offset + x.shape[0]:
    raise ValueError(
        f'resample_range needs input [{lo}, {hi}), got [{x_offset}, '
        f'{x_offset + x.shape[0]})')
  ext = np.zeros(last + 1 - first, np.float64)
  ext[lo - first:hi - first] = x[lo - x_offset:hi - x_offset]
  taps = np.arange(-half + 1, half + 1, dtype=np.int64)
  block = 4096  # bounds the (block, taps) gather to a few MB
  for b in range(0, out_len, block):
    j = np.arange(out_start + b, out_start + min(b + block, out_len),
                  dtype=np.int64)
    base = (j * down) // up
    phase = j * down - base * up
    values = ext[(base - first)[:, None] + taps[None, :]]
    out[b:b + j.size] = np.einsum('ij,ij->i', values, kernel[phase])
  return out
