"""Pure numpy feature functions, each vectorized over a batch of windows.

Every function takes `windows`, a (n, win_len) float32 array of full-scale
samples, and returns an array whose first axis is n. Rows never interact, so
a batch's result equals the row-by-row result bit for bit (tested).
"""

from typing import Callable, Dict, Optional, Tuple

import numpy as np

# scipy's pocketfft, not numpy's: 1.75x faster on float32 frames here
# (python -m bench.fft: 0.89 -> 0.50 ms per 4 windows of 32768).
from transforms.features import pocketfft

LOG_OFFSET = 1e-6  # added before log so silence maps to log(1e-6), not -inf


def window_function(name: str, n_fft: int) -> np.ndarray:
  """Periodic analysis window (as tf.signal's defaults), float32."""
  n = np.arange(n_fft, dtype=np.float64)
  if name == 'hann':
    w = 0.5 - 0.5 * np.cos(2.0 * np.pi * n / n_fft)
  elif name == 'hamming':
    w = 0.54 - 0.46 * np.cos(2.0 * np.pi * n / n_fft)
  elif name in ('rect', 'none'):
    w = np.ones(n_fft)
  else:
    raise ValueError(f'unknown window function {name!r}')
  return w.astype(np.float32)


def windowed_frames(windows: np.ndarray, n_fft: int, fft_hop: int,
                    window: np.ndarray) -> np.ndarray:
  """The STFT's frames of each window times the analysis window:
  (n, frames, n_fft), float32.

  Frames are not centred or padded (as tf.signal.stft): frame k covers
  samples [k * fft_hop, k * fft_hop + n_fft) of the window.
  """
  return _frames_of(windows, n_fft, fft_hop) * window


def _frames_of(windows: np.ndarray, n_fft: int, fft_hop: int) -> np.ndarray:
  """(n, frames, n_fft): a view of each window's frames, nothing copied."""
  return np.lib.stride_tricks.sliding_window_view(
      windows, n_fft, axis=-1)[:, ::fft_hop]


def frame_magnitude(frames: np.ndarray,
                    out: Optional[np.ndarray] = None) -> np.ndarray:
  """|rFFT| of each windowed frame: (..., n_fft) -> (..., n_fft // 2 + 1),
  into `out` if given."""
  # float32 in, complex64 out: pocketfft transforms single precision natively.
  return np.abs(pocketfft.rfft(frames, axis=-1), out=out)


# Frame values an STFT part holds (1 MB of float32): its frames, their
# spectra and magnitudes stay in a core's cache. All at once, a whole
# recording's frames (a minute: 7.7 MB, and as much of spectra) went to
# memory and back between the steps; 64 windows of 32768 samples took
# 12.1 ms so against 8.0 in parts. (Windows are computed 4 at a time,
# extractor.COMPUTE_SAMPLES, a part already.)
STFT_PART_VALUES = 1 << 18


def stft_magnitude(windows: np.ndarray, n_fft: int, fft_hop: int,
                   window: np.ndarray) -> np.ndarray:
  """|STFT| of each window: (n, frames, n_fft // 2 + 1) float32, that is
  frame_magnitude(windowed_frames(...)), computed a part of the frames at
  a time (whole windows, or a long window's frames in runs); each frame's
  values are the same either way."""
  frames = _frames_of(windows, n_fft, fft_hop)
  n, count = frames.shape[:2]
  out = np.empty((n, count, n_fft // 2 + 1), np.float32)
  per_part = max(1, STFT_PART_VALUES // n_fft)
  rows, run = max(1, per_part // max(1, count)), min(count, per_part)
  for row in range(0, n, rows):
    for first in range(0, count, run):
      part = (slice(row, row + rows), slice(first, first + run))
      frame_magnitude(frames[part] * window, out=out[part])
  return out


def log_compress(x: np.ndarray) -> np.ndarray:
  return np.log(x + np.float32(LOG_OFFSET))


def hz_to_mel(hz):
  return 1127.0 * np.log1p(np.asarray(hz, np.float64) / 700.0)


def mel_filterbank(n_mels: int, n_fft: int, sample_rate: int,
                   fmin: float = 0.0, fmax: float = None) -> np.ndarray:
  """(n_fft // 2 + 1, n_mels) triangular HTK-mel weights, float32.

  Same construction as tf.signal.linear_to_mel_weight_matrix (triangles
  spaced evenly in mel, the DC bin left out).
  """
  fmax = sample_rate / 2.0 if fmax is None else fmax
  n_bins = n_fft // 2 + 1
  bin_mel = hz_to_mel(np.linspace(0.0, sample_rate / 2.0, n_bins))[1:]
  edges = np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2)
  lower, center, upper = edges[:-2], edges[1:-1], edges[2:]
  rising = (bin_mel[:, None] - lower) / (center - lower)
  falling = (upper - bin_mel[:, None]) / (upper - center)
  weights = np.maximum(0.0, np.minimum(rising, falling))
  return np.pad(weights, [[1, 0], [0, 0]]).astype(np.float32)


# Mel bands multiplied together: 16 bands of 64 or 128 at n_fft 512 cover
# a fifth to a tenth of the bins, and fewer products (bench.mel_bands) beat
# the extra matrix products.
MEL_BAND_GROUP = 16


def mel_band_groups(filterbank: np.ndarray, group: int = MEL_BAND_GROUP
                    ) -> Tuple[Tuple[int, int, int, int], ...]:
  """(first band, end band, first bin, end bin) of each run of `group`
  consecutive bands of a (bins, n_mels) filterbank: the bins where some of
  their weights are not zero. A triangular filterbank is mostly zeros (64
  bands over 257 bins: about 2 of every 64 weights are not)."""
  covered = filterbank != 0
  groups = []
  for first in range(0, filterbank.shape[1], group):
    end = min(first + group, filterbank.shape[1])
    bins = np.flatnonzero(covered[:, first:end].any(axis=1))
    lo, hi = (int(bins[0]), int(bins[-1]) + 1) if bins.size else (0, 0)
    groups.append((first, end, lo, hi))
  return tuple(groups)


def mel_spectrogram(magnitude: np.ndarray, filterbank: np.ndarray,
                    groups=None) -> np.ndarray:
  """(n, frames, bins) magnitude -> (n, frames, n_mels): each group of
  bands (mel_band_groups, computed here when not given) the product of
  only the bins it covers; the products skipped are of zero weights.
  One matrix product per window: a window's values do not depend on the
  others in its batch, which a product of all frames at once would not
  promise (the BLAS kernel taking a row differs with the row count)."""
  if groups is None:
    groups = mel_band_groups(filterbank)
  return np.concatenate([magnitude[..., lo:hi] @ filterbank[lo:hi, first:end]
                         for first, end, lo, hi in groups], axis=-1)


def mfcc(log_mel: np.ndarray, n_mfcc: int,
         basis: Optional[np.ndarray] = None) -> np.ndarray:
  """The first n_mfcc cepstral coefficients of each log-mel frame:
  (..., n_mels) -> (..., n_mfcc) float32.

  The DCT-II of the log-mel bands scaled by 1 / sqrt(2 * n_mels), as
  tf.signal.mfccs_from_log_mel_spectrograms computes them, in float64:
  each window's frames times mfcc_basis (`basis`, computed here when not
  given). Only the coefficients kept are computed: for 13 of 64 bands,
  0.08 ms per 4 windows of 127 frames, against 0.4 ms for all 64 by
  scipy's FFT-based DCT, whose short transforms cost more per frame than
  the product.
  """
  if basis is None:
    basis = mfcc_basis(log_mel.shape[-1], n_mfcc)
  # A product per window (a batch's leading axis): a window's values do not
  # depend on the others in its batch (see mel_spectrogram).
  return (log_mel.astype(np.float64) @ basis).astype(np.float32)


def mfcc_basis(n_mels: int, n_mfcc: int) -> np.ndarray:
  """(n_mels, n_mfcc) float64: column k the DCT-II's k-th basis vector,
  2 cos(pi k (2n + 1) / (2 n_mels)), scaled by 1 / sqrt(2 * n_mels)."""
  bands = np.arange(n_mels, dtype=np.float64)[:, None]
  k = np.arange(n_mfcc, dtype=np.float64)[None, :]
  return (2.0 * np.cos(np.pi * k * (2.0 * bands + 1.0) / (2.0 * n_mels))
          / np.sqrt(2.0 * n_mels))


def autocorrelation(frames: np.ndarray, max_lag: int) -> np.ndarray:
  """r[k] = sum_t x[t] x[t + k] for k = 0..max_lag of each frame:
  (..., frame_len) -> (..., max_lag + 1) float64."""
  x = frames.astype(np.float64)
  n = x.shape[-1]
  return np.stack([np.einsum('...t,...t->...', x[..., :n - k], x[..., k:])
                   for k in range(max_lag + 1)], axis=-1)


def levinson_durbin(r: np.ndarray, order: int) -> np.ndarray:
  """Solves the Yule-Walker equations of each autocorrelation row
  (..., order + 1) for the coefficients a_1..a_order of
  A(z) = 1 + sum_k a_k z^-k (the prediction error filter): (..., order)
  float64. A row with r[0] == 0 (silence) gives zeros; where the
  recursion's error vanishes (a frame predicted exactly), the
  coefficients found so far are kept."""
  r = np.asarray(r, np.float64)
  shape = r.shape[:-1]
  r = r.reshape(-1, order + 1)
  a = np.zeros((r.shape[0], order + 1))
  a[:, 0] = 1.0
  error = r[:, 0].copy()
  active = error > 0
  for i in range(1, order + 1):
    acc = np.einsum('bj,bj->b', a[:, :i], r[:, i:0:-1])
    reflection = np.zeros_like(error)
    np.divide(-acc, error, out=reflection, where=active)
    previous = a[:, :i + 1].copy()
    a[:, 1:i + 1] = previous[:, 1:i + 1] + reflection[:, None] * \
        previous[:, i - 1::-1][:, :i]
    a[:, i] = reflection
    error = error * (1.0 - reflection * reflection)
    active &= error > 0
  return a[:, 1:].reshape(*shape, order)


def lpc(frames: np.ndarray, order: int) -> np.ndarray:
  """Linear prediction coefficients a_1..a_order of each windowed frame by
  the autocorrelation method: (n, frames, frame_len) -> (n, frames, order)
  float32; zeros for a silent frame."""
  return levinson_durbin(autocorrelation(frames, order),
                         order).astype(np.float32)


def fft_magnitude(windows: np.ndarray) -> np.ndarray:
  """|rFFT| of each whole window: (n, win_len // 2 + 1) float32."""
  return np.abs(pocketfft.rfft(windows, axis=-1))


# A user feature: (n, win_len) float32 windows and the sample rate in, an array
# with first axis n out. Must be a module-level function (or a partial of one)
# so that it pickles to remote workers.
FeatureFn = Callable[[np.ndarray, int], np.ndarray]
ExtraFeatures = Dict[str, FeatureFn]
