"""Hugging Face `datasets` reading the same content from Arrow: the anchor
row of bench.readers. `datasets` is not a wavbeam dependency,
and installing it into wavbeam's environment would move pinned packages,
so it runs in an environment of its own:

    python3 -m venv /tmp/hf
    /tmp/hf/bin/pip install datasets==5.2.0 numpy crc32c==2.9.post0
    PYTHONPATH=. /tmp/hf/bin/python -m bench.hf_anchor scratch/bench/readers_1h

The train split is converted once (through numpy_reader, which needs only
numpy and crc32c) to an Arrow dataset saved beside it
(`..._hf/`), with its arrays as fixed-shape Arrow arrays. Then each repeat
is a fresh process that opens it memory-mapped and reads every column in
batches of 64 as numpy arrays, 3 passes: the first apart, then the median
of the others, as bench.readers reports its readers.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

BATCH = 64


def _features(example):
  import datasets  # pylint: disable=import-outside-toplevel
  out = {}
  for key, value in example.items():
    if isinstance(value, str):
      out[key] = datasets.Value('string')
    elif value.ndim == 0:
      out[key] = datasets.Value(str(value.dtype))
    elif value.ndim == 1:
      out[key] = datasets.Sequence(datasets.Value(str(value.dtype)),
                                   length=value.shape[0])
    else:
      out[key] = datasets.Array2D(shape=value.shape, dtype=str(value.dtype))
  return datasets.Features(out)


def _examples(dataset_dir: str):
  from pipeline.readers import numpy_dataset as numpy_reader  # pylint: disable=import-outside-toplevel
  yield from numpy_reader.numpy_dataset(dataset_dir, 'train')


def convert(dataset_dir: str) -> str:
  import datasets  # pylint: disable=import-outside-toplevel
  from pipeline.readers import numpy_dataset as numpy_reader  # pylint: disable=import-outside-toplevel
  target = dataset_dir.rstrip('/') + '_hf'
  if os.path.exists(os.path.join(target, 'dataset_info.json')):
    return target
  first = next(iter(numpy_reader.numpy_dataset(dataset_dir, 'train')))
  data = datasets.Dataset.from_generator(
      _examples, gen_kwargs={'dataset_dir': dataset_dir},
      features=_features(first), cache_dir=target + '_cache')
  data.save_to_disk(target)
  del data
  shutil.rmtree(target + '_cache', ignore_errors=True)  # a copy of it all
  return target


def read_passes(hf_dir: str, passes: int = 3) -> dict:
  import datasets  # pylint: disable=import-outside-toplevel
  data = datasets.load_from_disk(hf_dir).with_format('numpy')
  rates = []
  for _ in range(passes):
    start = time.perf_counter()
    n = 0
    for batch in data.iter(batch_size=BATCH):
      n += len(batch['index'])
    rates.append(n / (time.perf_counter() - start))
  return {'examples': n, 'first': rates[0],
          'warm': statistics.median(rates[1:])}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('dataset_dir')
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--one', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.one:
    print(json.dumps(read_passes(args.one)))
    return
  hf_dir = convert(args.dataset_dir)
  runs = []
  for _ in range(args.repeats):
    proc = subprocess.run([sys.executable, '-m', 'bench.hf_anchor',
                           args.dataset_dir, '--one', hf_dir],
                          capture_output=True, text=True, check=True)
    runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
  print(f'| hf_datasets_arrow ({args.dataset_dir}) | '
        f'{statistics.median(r["first"] for r in runs):.0f} | '
        f'{statistics.median(r["warm"] for r in runs):.0f} | '
        f'{runs[0]["examples"]} examples |')


if __name__ == '__main__':
  main()
