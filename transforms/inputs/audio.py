"""Pure numpy: window arithmetic, channel mixing, sample conversion; resampling
with soxr.

Everything here is a function of its arguments, so a chunk of a file computed
on one worker equals the same windows computed from the whole file.
"""

import math
import threading
from typing import Tuple

import numpy as np
import soxr

from transforms.runtime import cache_parts


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


def one_channel(block: np.ndarray, policy: str,
                channel=None) -> np.ndarray:
  """(frames, channels) float64 -> (frames,): the `channel` given (a
  segment's own, as a Lhotse supervision names it), else mixed by
  `policy`."""
  if channel is not None:
    return block[:, channel]
  return mix_channels(block, policy)


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


# Windows of 16-bit PCM recordings are read as the int16 values stored:
# the full-scale float of value v is v * PCM16_SCALE, exact in float32 as
# in float64, so every conversion from them is exact and the float64
# array need never be made.
PCM16_SCALE = 2.0 ** -15


def full_scale(samples: np.ndarray) -> np.ndarray:
  """Samples as read (full-scale float64, or int16 PCM values) as
  full-scale float64; float64 ones as they are."""
  if samples.dtype == np.int16:
    return np.multiply(samples, PCM16_SCALE, dtype=np.float64)
  return samples


def as_float32(samples: np.ndarray) -> np.ndarray:
  """full_scale(samples) as float32, rounded to nearest even (numpy's
  cast); int16 PCM values converted in one exact pass."""
  if samples.dtype == np.int16:
    return np.multiply(samples, np.float32(PCM16_SCALE), dtype=np.float32)
  return samples.astype(np.float32)


def to_signal_dtype(samples: np.ndarray, dtype: str) -> np.ndarray:
  """Full-scale float samples ([-1, 1)) as the stored signal dtype; int16
  PCM values (full_scale) give the same values.

  Integer dtypes are full scale (as libsndfile reads PCM): x * 2**(bits-1),
  rounded half to even and clipped to the dtype's range. Float dtypes keep
  the value, including peaks above 1.0.
  """
  target = np.dtype(dtype)
  if samples.dtype == np.int16:
    return _pcm16_as(samples, target)
  if target.kind == 'f':
    return samples.astype(target)
  if target.kind != 'i':
    raise ValueError(f'signal dtype must be a signed integer or float: {dtype}')
  info = np.iinfo(target)
  if np.size(samples) <= cache_parts.VALUES:
    return _full_scale(samples, info, np.empty(np.shape(samples))).astype(
        target)
  flat = np.asarray(samples).reshape(-1)
  signal = np.empty(flat.size, target)
  for where, part, scratch in cache_parts.parts(flat):
    np.copyto(signal[where], _full_scale(part, info, scratch),
              casting='unsafe')
  return signal.reshape(np.shape(samples))


def _full_scale(samples: np.ndarray, info: np.iinfo,
                scaled: np.ndarray) -> np.ndarray:
  """samples x 2**(bits-1), rounded and clipped, into `scaled` (float64,
  their shape)."""
  np.multiply(samples, 2.0 ** (info.bits - 1), out=scaled, dtype=np.float64)
  np.rint(scaled, out=scaled)
  return np.clip(scaled, info.min, info.max, out=scaled)


def _pcm16_as(samples: np.ndarray, target: np.dtype) -> np.ndarray:
  """to_signal_dtype of int16 PCM values, exactly: a wider integer is the
  value shifted to its full scale (never clipped), a narrower one its
  value rounded half to even after the shift."""
  if target == np.float32:
    return as_float32(samples)
  if target.kind == 'f':
    return full_scale(samples).astype(target)
  if target.kind != 'i':
    raise ValueError(f'signal dtype must be a signed integer or float: '
                     f'{target}')
  shift = np.iinfo(target).bits - 16
  if shift >= 0:
    return np.left_shift(samples, shift, dtype=target)
  return to_signal_dtype(full_scale(samples), target.name)


def from_signal_dtype(signal: np.ndarray) -> np.ndarray:
  """A stored signal back to full-scale float64 samples (to_signal_dtype's
  inverse, up to its rounding and clipping)."""
  if np.issubdtype(signal.dtype, np.integer):
    return signal / float(2 ** (np.iinfo(signal.dtype).bits - 1))
  return signal.astype(np.float64)


# --- resampling -------------------------------------------------------------
# soxr's VHQ resampler (28-bit precision, computed in float64): pass band flat
# to 0.91 of the lower Nyquist, -3 dB at 0.95, stop band from the Nyquist on,
# at least 150 dB down (measured in tests/test_features.py). soxr filters a
# stream in blocks of its own, so a range resampled on its own would differ
# from the same range inside a whole-file pass in its last bits. Here the
# resampled signal is defined block by block instead: output block b is
# soxr's output for a fixed input segment around it (the block's input plus
# RESAMPLE_CONTEXT zeros-outside-the-file samples each side). Every block is
# computed from the same samples whoever computes it, so a chunk read on one
# worker equals the same samples of a whole-file pass, bit for bit, and both
# stay within 1e-8 of soxr's own one-pass output.

RESAMPLE_QUALITY = 'VHQ'
_BLOCK_TARGET = 32768    # output samples per block, rounded to the period
_CONTEXT_MIN = 1024      # input samples each side of a block, at least


_streams = threading.local()
_EMPTY = np.zeros(0, np.float64)


def _resampler(rate_in: int, rate_out: int) -> soxr.ResampleStream:
  """A soxr stream for this rate pair, reused by this thread: designing
  soxr's filter costs about as much as resampling a second of audio."""
  cache = _streams.__dict__.setdefault('by_rates', {})
  if (rate_in, rate_out) not in cache:
    cache[(rate_in, rate_out)] = soxr.ResampleStream(
        rate_in, rate_out, 1, dtype='float64', quality=RESAMPLE_QUALITY)
  return cache[(rate_in, rate_out)]


def resample_ratio(rate_in: int, rate_out: int) -> Tuple[int, int]:
  g = math.gcd(rate_in, rate_out)
  return rate_out // g, rate_in // g  # (up, down)


def resampled_length(frames: int, rate_in: int, rate_out: int) -> int:
  up, down = resample_ratio(rate_in, rate_out)
  return -(-frames * up // down)


def resample_blocks(rate_in: int, rate_out: int) -> Tuple[int, int, int]:
  """(output samples, input samples, input context) of a resampling block.

  A block starts on a multiple of `down` input samples, where input and
  output sample times coincide; the context grows with the decimation
  factor, which sets soxr's filter length in input samples.
  """
  up, down = resample_ratio(rate_in, rate_out)
  periods = max(1, -(-_BLOCK_TARGET // up))
  context = max(_CONTEXT_MIN, 256 * -(-down // up))
  return periods * up, periods * down, -(-context // down) * down


def resample_input_range(frames: int, rate_in: int, rate_out: int,
                         out_start: int, out_stop: int) -> Tuple[int, int]:
  """Input frames [start, stop) that output samples [out_start, out_stop)
  are computed from (their blocks with context, within the file)."""
  block_out, block_in, context = resample_blocks(rate_in, rate_out)
  first = out_start // block_out
  last = -(-out_stop // block_out)  # exclusive
  return (max(0, first * block_in - context),
          min(frames, last * block_in + context))


def resample_range(x: np.ndarray, x_offset: int, frames: int, rate_in: int,
                   rate_out: int, out_start: int, out_len: int) -> np.ndarray:
  """Output samples [out_start, out_start + out_len) of the resampled signal.

  `x` (float64) holds input samples [x_offset, x_offset + len(x)) of a signal
  of `frames` samples, which is zero outside [0, frames). `x` must cover
  `resample_input_range` of the output range.
  """
  up, down = resample_ratio(rate_in, rate_out)
  if up == down:
    return x[out_start - x_offset:out_start - x_offset + out_len].copy()
  out = np.empty(out_len, np.float64)
  if out_len == 0:
    return out
  lo, hi = resample_input_range(frames, rate_in, rate_out, out_start,
                                out_start + out_len)
  if lo < x_offset or hi > x_offset + x.shape[0]:
    raise ValueError(
        f'resample_range needs input [{lo}, {hi}), got [{x_offset}, '
        f'{x_offset + x.shape[0]})')
  block_out, block_in, context = resample_blocks(rate_in, rate_out)
  stream = _resampler(rate_in, rate_out)
  for b in range(out_start // block_out,
                 -(-(out_start + out_len) // block_out)):
    # soxr's own start is kept (it differs from zeros before the file);
    # past the end the signal is zeros, so every later segment has one length.
    seg_start = max(0, b * block_in - context)
    seg_stop = (b + 1) * block_in + context
    if seg_stop <= frames:
      segment = np.ascontiguousarray(
          x[seg_start - x_offset:seg_stop - x_offset], np.float64)
    else:
      segment = np.zeros(seg_stop - seg_start, np.float64)
      have = max(seg_start, frames)
      segment[:have - seg_start] = x[seg_start - x_offset:have - x_offset]
    skip = (b * block_in - seg_start) * up // down
    stream.clear()  # the same bits as a new stream, without its set-up
    # soxr emits outputs as soon as they are final: the block is usually
    # out before the flush, which would only compute outputs dropped here.
    block = stream.resample_chunk(segment, last=False)
    if block.shape[0] < skip + block_out:
      block = np.concatenate([block, stream.resample_chunk(_EMPTY, last=True)])
    block = block[skip:skip + block_out]
    o_lo = max(out_start, b * block_out)
    o_hi = min(out_start + out_len, (b + 1) * block_out)
    out[o_lo - out_start:o_hi - out_start] = block[o_lo - b * block_out:
                                                   o_hi - b * block_out]
  return out
