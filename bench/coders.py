"""tfx-bsl's C++ example coders against wavbeam's own
(transforms/example_codec).

    .venv/bin/python -m bench.coders [--batches 40] [--batch 32]

Encodes batches shaped like the bench's (signal int32 (32768,) as raw
bytes, spectrogram float32 (127, 257) as a packed FloatList, and the six
scalar/string columns) with example_codec.encode_batch, and with
tfx_bsl.coders.example_coder.RecordBatchToExamplesEncoder from an Arrow
RecordBatch (building the batch included, since the pipeline has numpy
arrays); then decodes them with example_codec.decode_example and with
tfx-bsl's ExamplesToRecordBatchDecoder (to Arrow, then to numpy arrays of
the schema's shapes). Checks that both encoders give the same bytes, or
the same parsed Example, and reports medians of examples/s.
"""

import argparse
import statistics
import time

import numpy as np
import pyarrow as pa

from pipeline.contract import example_codec


def batch(n, seed):
  rng = np.random.default_rng(seed)
  return {
      'class': ['owl'] * n,
      'filepath': [f'/corpus/owl/{seed}_{i}.wav' for i in range(n)],
      'index': list(range(seed * n, seed * n + n)),
      'num_classes': [4] * n,
      'target': [2] * n,
      'win_start_idx': [32768 * i for i in range(n)],
      'signal': rng.integers(-2**31, 2**31 - 1, (n, 32768), dtype=np.int32),
      'spectrogram': rng.random((n, 127, 257), dtype=np.float32),
  }


def to_record_batch(columns, n):
  """The Arrow form tfx-bsl's encoder takes: one list column per feature."""
  def lists(values, typ):
    return pa.array([[v] for v in values], pa.list_(typ))
  spec = columns['spectrogram'].reshape(n, -1)
  arrays = {
      'class': lists([c.encode() for c in columns['class']], pa.binary()),
      'filepath': lists([p.encode() for p in columns['filepath']],
                        pa.binary()),
      'index': lists(columns['index'], pa.int64()),
      'num_classes': lists(columns['num_classes'], pa.int64()),
      'target': lists(columns['target'], pa.int64()),
      'win_start_idx': lists(columns['win_start_idx'], pa.int64()),
      'signal': lists([r.tobytes() for r in columns['signal']], pa.binary()),
      'spectrogram': pa.ListArray.from_arrays(
          np.arange(0, spec.size + 1, spec.shape[1], dtype=np.int32),
          pa.array(spec.ravel(), pa.float32())),
  }
  return pa.RecordBatch.from_arrays(list(arrays.values()), list(arrays))


def rate(fn, items, per_item, repeats=5):
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    for item in items:
      fn(item)
    times.append(time.perf_counter() - start)
  return len(items) * per_item / statistics.median(times)


def main(argv=None):
  from tfx_bsl.coders import example_coder
  import tensorflow as tf
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--batches', type=int, default=40)
  parser.add_argument('--batch', type=int, default=32)
  args = parser.parse_args(argv)
  n = args.batch
  batches = [batch(n, s) for s in range(args.batches)]
  ours = [example_codec.encode_batch(b, n) for b in batches]
  encoder = example_coder.RecordBatchToExamplesEncoder()
  theirs = [encoder.encode(to_record_batch(b, n)) for b in batches]
  same_bytes = all(a == b for x, y in zip(ours, theirs) for a, b in zip(x, y))
  same_parse = all(tf.train.Example.FromString(a) ==
                   tf.train.Example.FromString(b)
                   for x, y in zip(ours, theirs) for a, b in zip(x, y))
  enc_ours = rate(lambda b: example_codec.encode_batch(b, n), batches, n)
  enc_theirs = rate(lambda b: encoder.encode(to_record_batch(b, n)), batches,
                    n)
  prebuilt = [to_record_batch(b, n) for b in batches]
  enc_prebuilt = rate(encoder.encode, prebuilt, n)
  schema = example_codec.batch_schema(batches[0])
  records = [r for rs in ours for r in rs]
  dec_ours = rate(lambda r: example_codec.decode_example(r, schema), records,
                  1)
  decoder = example_coder.ExamplesToRecordBatchDecoder()

  def decode_theirs(chunk):
    rb = decoder.DecodeBatch(chunk)
    sig = rb.column(rb.schema.get_field_index('signal'))
    spec = rb.column(rb.schema.get_field_index('spectrogram'))
    for i in range(len(chunk)):
      np.frombuffer(sig[i][0].as_py(), '<i4')
      spec[i].values.to_numpy().reshape(127, 257)

  chunks = [records[i:i + n] for i in range(0, len(records), n)]
  dec_theirs = rate(decode_theirs, chunks, n)
  print(f'{len(records)} examples, batches of {n}; bytes equal: '
        f'{same_bytes}; parsed Examples equal: {same_parse}')
  print('| coder | wavbeam example_codec, ex/s | tfx-bsl, ex/s | '
        'tfx-bsl / wavbeam |')
  print('|---|---|---|---|')
  print(f'| encode | {enc_ours:.0f} | {enc_theirs:.0f} | '
        f'{enc_theirs / enc_ours:.2f}x |')
  print(f'| encode, Arrow batch built beforehand | {enc_ours:.0f} | '
        f'{enc_prebuilt:.0f} | {enc_prebuilt / enc_ours:.2f}x |')
  print(f'| decode | {dec_ours:.0f} | {dec_theirs:.0f} | '
        f'{dec_theirs / dec_ours:.2f}x |')


if __name__ == '__main__':
  main()
