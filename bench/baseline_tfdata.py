"""A writer from TensorFlow ops alone: tf.data decode_wav -> frame -> stft ->
serialize_tensor.

One tf.data pipeline, whole files in memory, tensors serialized with
tf.io.serialize_tensor into a TFRecordWriter.
"""

import os
import sys

import tensorflow as tf


def main(input_dir, output_dir, win_len=32768, n_fft=512, fft_hop=256):
  paths = sorted(os.path.join(r, f) for r, _, fs in os.walk(input_dir)
                 for f in fs if f.lower().endswith('.wav'))
  classes = sorted({os.path.basename(os.path.dirname(p)) for p in paths})
  table = {c: i for i, c in enumerate(classes)}
  labels = [table[os.path.basename(os.path.dirname(p))] for p in paths]

  def load(index, path, label):
    audio, _ = tf.audio.decode_wav(tf.io.read_file(path))
    frames = tf.signal.frame(audio[:, 0], win_len, win_len)
    signal = tf.cast(frames * 2.0**31, tf.int32)
    spec = tf.abs(tf.signal.stft(frames, n_fft, fft_hop, fft_length=n_fft))
    n = tf.shape(frames)[0]
    return tf.data.Dataset.from_tensor_slices({
        'signal': signal, 'spectrogram': spec,
        'win_start_idx': tf.range(n, dtype=tf.int64) * win_len,
        'index': tf.fill([n], tf.cast(index, tf.int64)),
        'target': tf.fill([n], tf.cast(label, tf.int64)),
        'filepath': tf.fill([n], path)})

  ds = tf.data.Dataset.from_tensor_slices(
      (tf.range(len(paths), dtype=tf.int64), paths, labels)).flat_map(load)
  os.makedirs(output_dir, exist_ok=True)
  count = 0

  def bytes_feature(v):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

  def int_feature(v):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))

  with tf.io.TFRecordWriter(os.path.join(output_dir, 'data.tfrecord')) as w:
    for e in ds:
      f = {
          'signal': bytes_feature(tf.io.serialize_tensor(e['signal']).numpy()),
          'spectrogram': bytes_feature(
              tf.io.serialize_tensor(e['spectrogram']).numpy()),
          'filepath': bytes_feature(e['filepath'].numpy()),
          'win_start_idx': int_feature(int(e['win_start_idx'])),
          'index': int_feature(int(e['index'])),
          'target': int_feature(int(e['target'])),
      }
      w.write(tf.train.Example(features=tf.train.Features(
          feature=f)).SerializeToString())
      count += 1
  print(count)


if __name__ == '__main__':
  main(sys.argv[1], sys.argv[2])
