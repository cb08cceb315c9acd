"""Reading speed: replay_dataset (its default engine, and engine='tf') vs
a hand-written tf.data reader and TFDS.

All read every feature of the same shards (from page cache after a
warm-up), batch 64; runs are interleaved and the median is reported.
"""

import json
import os
import statistics
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
import tensorflow as tf  # noqa: E402

from pipeline.readers import tf_dataset as replay  # noqa: E402

BATCH = 64


def hand_written(output_dir):
  """What an engineer writes by hand, knowing the schema."""
  meta = replay.load_metadata(output_dir)
  files = [os.path.join(output_dir, s['file'])
           for s in meta['splits']['train']['shards']]
  spec = {'signal': tf.io.FixedLenFeature([], tf.string),
          'spectrogram': tf.io.FixedLenFeature(
              meta['schema']['spectrogram']['shape'], tf.float32),
          'class': tf.io.FixedLenFeature([], tf.string),
          'filepath': tf.io.FixedLenFeature([], tf.string),
          'index': tf.io.FixedLenFeature([], tf.int64),
          'num_classes': tf.io.FixedLenFeature([], tf.int64),
          'target': tf.io.FixedLenFeature([], tf.int64),
          'win_start_idx': tf.io.FixedLenFeature([], tf.int64)}
  shapes = {k: v['shape'] for k, v in meta['schema'].items()}

  def parse(batch):
    d = tf.io.parse_example(batch, spec)
    d['signal'] = tf.reshape(tf.io.decode_raw(d['signal'], tf.int32),
                             [-1, *shapes['signal']])
    return d

  return (tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
          .batch(BATCH).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
          .prefetch(tf.data.AUTOTUNE))


def timed(make):
  start = time.perf_counter()
  n = 0
  for batch in make():
    n += int(batch['index'].shape[0])
  return n, time.perf_counter() - start


def main(output_dir, repeats):
  import tensorflow_datasets as tfds
  builder = tfds.builder_from_directory(output_dir)
  readers = {
      'replay_dataset': lambda: replay.replay_dataset(output_dir,
                                                      batch_size=BATCH),
      'replay_dataset_tf': lambda: replay.replay_dataset(
          output_dir, batch_size=BATCH, engine='tf'),
      'hand_written': lambda: hand_written(output_dir),
      'tfds_as_dataset': lambda: builder.as_dataset(split='train',
                                                    batch_size=BATCH),
  }
  for make in readers.values():  # warm page cache and tf.data
    timed(make)
  times = {k: [] for k in readers}
  counts = {}
  for _ in range(repeats):
    for name, make in readers.items():
      counts[name], t = timed(make)
      times[name].append(t)
  assert len(set(counts.values())) == 1, counts
  n = counts['replay_dataset']
  print(json.dumps({name: {'examples': n, 'seconds': statistics.median(ts),
                           'examples_per_s': n / statistics.median(ts)}
                    for name, ts in times.items()}))


if __name__ == '__main__':
  main(sys.argv[1], int(sys.argv[2]))
