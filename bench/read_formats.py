"""Reading speed of format 2 (float32 arrays as FloatLists) against format 1
(the same arrays as raw bytes), same examples.

    .venv/bin/python -m bench.read_formats [--hours 1] [--repeats 5]

Writes the bench corpus with the default CLI (format 2), makes a format-1
copy of it (every float32 array re-encoded as raw bytes, metadata.json as
version 1 wrote it), then reads both with `replay_dataset(...,
engine='tf')` (TensorFlow's parser; batch 64, every feature), one fresh
process per read, interleaved, and reports the median examples/s of the
first pass and of a second pass in the same process.
"""

import argparse
import json
import os
import statistics
import sys
import time

from bench.procmon import run_measured
from bench.run import PY, ROOT, corpus_for, writers
from tests.helpers import to_format_1

BATCH = 64


def read_twice(output_dir: str) -> None:
  """One process: two full passes; prints their examples/s as JSON."""
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
  from pipeline.readers import tf_dataset as replay
  rates = []
  for _ in range(2):
    start, n = time.perf_counter(), 0
    for batch in replay.replay_dataset(output_dir, batch_size=BATCH,
                                        engine='tf'):
      n += int(batch['index'].shape[0])
    rates.append(n / (time.perf_counter() - start))
  print(json.dumps({'examples': n, 'first': rates[0], 'second': rates[1]}))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--hours', type=float, default=1)
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--read', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.read:
    return read_twice(args.read)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  corpus, _, _, _ = corpus_for(args.hours)
  datasets = {'format 2 (FloatList)': os.path.join(ROOT, 'formats_v2'),
              'format 1 (raw bytes)': os.path.join(ROOT, 'formats_v1')}
  run_measured(writers(corpus, datasets['format 2 (FloatList)'])['wavbeam'],
               env=env)
  to_format_1(datasets['format 2 (FloatList)'],
              datasets['format 1 (raw bytes)'])
  runs = {name: [] for name in datasets}
  for _ in range(args.repeats):
    for name, path in datasets.items():
      _, _, stdout = run_measured(
          [PY, '-m', 'bench.read_formats', '--read', path], env=env)
      runs[name].append(json.loads(stdout.strip().splitlines()[-1]))
  counts = {r['examples'] for rs in runs.values() for r in rs}
  assert len(counts) == 1, counts
  print(f'{args.hours:g} h corpus, {counts.pop()} examples, batch 64, every '
        f'feature; median of {args.repeats} fresh processes, interleaved')
  print('| dataset | first pass ex/s | second pass ex/s | MB on disk |')
  print('|---|---|---|---|')
  for name, rs in runs.items():
    size = sum(os.path.getsize(os.path.join(datasets[name], f))
               for f in os.listdir(datasets[name]) if '.tfrecord-' in f)
    print(f'| {name} | {statistics.median(r["first"] for r in rs):,.0f} | '
          f'{statistics.median(r["second"] for r in rs):,.0f} | '
          f'{size / 1e6:,.1f} |')


if __name__ == '__main__':
  sys.exit(main())
