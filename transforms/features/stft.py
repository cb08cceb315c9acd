"""The STFT every framed feature shares (spectrogram, log_mel, mfcc, lpc):
a batch's windowed frames and their magnitudes, each computed once per
batch; the analysis window once per worker."""

import numpy as np

from transforms.features import functions as F


def _key(batch) -> tuple:
  return ('stft', batch.option('n_fft'), batch.option('fft_hop'),
          batch.option('fft_window'))


def analysis_window(batch) -> np.ndarray:
  name, n_fft = batch.option('fft_window'), batch.option('n_fft')
  return batch.constant(('window', name, n_fft),
                        lambda: F.window_function(name, n_fft))


def frames(batch) -> np.ndarray:
  """(n, frames, n_fft) float32: each window's frames times the window."""
  return batch.once(_key(batch) + ('frames',), lambda: F.windowed_frames(
      batch.w32, batch.option('n_fft'), batch.option('fft_hop'),
      analysis_window(batch)))


def magnitude(batch) -> np.ndarray:
  """(n, frames, n_fft // 2 + 1) float32: |rFFT| of each frame, framed a
  part at a time (F.stft_magnitude), not from `frames`."""
  return batch.once(_key(batch), lambda: F.stft_magnitude(
      batch.w32, batch.option('n_fft'), batch.option('fft_hop'),
      analysis_window(batch)))


def tf_frames(batch):
  """frames, for a featurizer's TfBatch."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return batch.once(_key(batch) + ('frames',), lambda: tf.signal.frame(
      batch.w32, batch.option('n_fft'), batch.option('fft_hop')) *
                    tf.constant(analysis_window(batch)))


def tf_magnitude(batch):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return batch.once(_key(batch), lambda: tf.abs(tf.signal.rfft(
      tf_frames(batch), [batch.option('n_fft')])))
