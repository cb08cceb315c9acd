"""Baseline: a plain single-process loop doing the same work as wavbeam.

soundfile read, numpy windows and STFT of all windows of a file at once,
raw-bytes tf.train.Example, one tf.io.TFRecordWriter. What a careful engineer
writes by hand.
"""

import os
import sys

import numpy as np
import soundfile as sf
import tensorflow as tf


def main(input_dir, output_dir, win_len=32768, n_fft=512, fft_hop=256):
  paths = sorted(os.path.join(r, f) for r, _, fs in os.walk(input_dir)
                 for f in fs if f.lower().endswith('.wav'))
  classes = sorted({os.path.basename(os.path.dirname(p)) for p in paths})
  window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)).astype(
      np.float32)
  os.makedirs(output_dir, exist_ok=True)
  count = 0
  with tf.io.TFRecordWriter(os.path.join(output_dir, 'data.tfrecord')) as w:
    for index, path in enumerate(paths):
      x, _ = sf.read(path, dtype='float64')
      n = len(x) // win_len
      if n == 0:
        continue
      wins = x[:n * win_len].reshape(n, win_len)
      signal = np.clip(np.rint(wins * 2**31), -2**31, 2**31 - 1).astype(
          np.int32)
      frames = np.lib.stride_tricks.sliding_window_view(
          wins.astype(np.float32), n_fft, axis=-1)[:, ::fft_hop]
      spec = np.abs(np.fft.rfft(frames * window, axis=-1))
      label = os.path.basename(os.path.dirname(path))
      for i in range(n):
        f = {
            'signal': tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[signal[i].tobytes()])),
            'spectrogram': tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[spec[i].tobytes()])),
            'class': tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[label.encode()])),
            'filepath': tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[path.encode()])),
            'index': tf.train.Feature(int64_list=tf.train.Int64List(
                value=[index])),
            'target': tf.train.Feature(int64_list=tf.train.Int64List(
                value=[classes.index(label)])),
            'num_classes': tf.train.Feature(int64_list=tf.train.Int64List(
                value=[len(classes)])),
            'win_start_idx': tf.train.Feature(int64_list=tf.train.Int64List(
                value=[i * win_len])),
        }
        w.write(tf.train.Example(features=tf.train.Features(
            feature=f)).SerializeToString())
        count += 1
  print(count)


if __name__ == '__main__':
  main(sys.argv[1], sys.argv[2])
