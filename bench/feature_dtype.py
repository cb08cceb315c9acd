"""Size and speed of the features stored as float32, float16 and bfloat16
(--feature_dtype), and of the signal as int32 and int16 (--signal_dtype).

    .venv/bin/python -m bench.feature_dtype [--hours 1] [--repeats 3]

Writes the bench corpus (long 16 kHz files, windows of 32768) once per
setting, each a whole `wavbeam run` process, interleaved over --repeats
rounds: the spectrogram alone and the log-mel alone at each dtype, and the
signal alone at each integer dtype. Prints per setting the dataset's size
per hour of audio and the median (min-max) wall time and audio-s/s of the
write. Then reads the spectrogram datasets with each reader (numpy_dataset,
replay_dataset's numpy and tf engines, WavbeamIterableDataset; batches of
64, one fresh process per read, interleaved) and prints the median
examples/s of each. Last, the accuracy of examples/train_keras.py's and
examples/train_torch.py's models trained on log-mels stored at each dtype
(one sweep, --variants; the corpus's four classes, files split 0.7/0.3;
--seeds seeds each), read as float32 either way.
"""

import argparse
import json
import os
import statistics
import sys
import time

from bench.procmon import run_measured
from bench.run import PY, ROOT, corpus_for, dir_bytes, writers

BATCH = 64
SETTINGS = {
    **{f'spectrogram {d}': ['--features', 'spectrogram', '--feature_dtype',
                            d] for d in ('float32', 'float16', 'bfloat16')},
    **{f'log_mel {d}': ['--features', 'log_mel', '--feature_dtype', d]
       for d in ('float32', 'float16', 'bfloat16')},
    **{f'signal {d}': ['--features', 'signal', '--signal_dtype', d]
       for d in ('int32', 'int16')},
}
READERS = ('numpy_dataset', 'replay numpy', 'replay tf', 'torch')
DTYPES = ('float32', 'float16', 'bfloat16')


def train(sweep: str, seeds: int) -> None:
  """One process: {model: {variant: [held-out accuracy per seed]}} of the
  Keras and PyTorch examples, as JSON."""
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
  sys.path.insert(0, os.path.join(os.path.dirname(
      os.path.dirname(os.path.abspath(__file__))), 'examples'))
  import train_keras
  import train_torch
  found = {'keras': {}, 'torch': {}}
  for variant in DTYPES:
    for seed in range(seeds):
      found['keras'].setdefault(variant, []).append(
          train_keras.train_and_evaluate(sweep, 3, 32, variant=variant,
                                         seed=seed, verbose=0).accuracy)
      found['torch'].setdefault(variant, []).append(
          train_torch.train_and_evaluate(sweep, 5, 32, variant=variant,
                                         seed=seed))
  print(json.dumps(found))


def read(reader: str, output_dir: str) -> None:
  """One process: a pass over the train split; prints examples/s."""
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
  if reader == 'numpy_dataset':
    from pipeline.readers import numpy_dataset
    batches = numpy_dataset.numpy_dataset(output_dir, 'train',
                                          batch_size=BATCH)
    size = lambda b: len(b['index'])  # noqa: E731
  elif reader.startswith('replay'):
    from pipeline.readers import tf_dataset
    batches = tf_dataset.replay_dataset(output_dir, 'train',
                                        batch_size=BATCH,
                                        engine=reader.split()[1])
    size = lambda b: int(b['index'].shape[0])  # noqa: E731
  else:
    import torch
    from pipeline.readers import torch_dataset
    batches = torch.utils.data.DataLoader(
        torch_dataset.WavbeamIterableDataset(output_dir, 'train',
                                             batch_size=BATCH),
        batch_size=None)
    size = lambda b: len(b['index'])  # noqa: E731
  start, n = time.perf_counter(), 0
  for batch in batches:
    n += size(batch)
  print(json.dumps({'examples': n,
                    'rate': n / (time.perf_counter() - start)}))


def _spread(values):
  return (f'{statistics.median(values):.2f} s ({min(values):.2f}-'
          f'{max(values):.2f})')


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--hours', type=float, default=1)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--seeds', type=int, default=3)
  parser.add_argument('--read', nargs=2, help=argparse.SUPPRESS)
  parser.add_argument('--train', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.read:
    return read(*args.read)
  if args.train:
    return train(args.train, args.seeds)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  corpus, seconds, _, _ = corpus_for(args.hours)
  base = writers(corpus, '')['wavbeam']
  out = {name: os.path.join(ROOT, 'dtype_' + name.replace(' ', '_'))
         for name in SETTINGS}
  walls = {name: [] for name in SETTINGS}
  for _ in range(args.repeats):
    for name, flags in SETTINGS.items():
      cmd = list(base)
      cmd[cmd.index('--output_dir') + 1] = out[name]
      wall, _, _ = run_measured(cmd + flags + ['--quiet'], env=env)
      walls[name].append(wall)
  hours = seconds / 3600
  print(f'{hours:.2f} h of 16 kHz audio in long files, windows of 32768; '
        f'{args.repeats} interleaved rounds')
  print('| stored | MB per hour of audio | write, median (min-max) | '
        'audio-s/s |')
  print('|---|---|---|---|')
  for name in SETTINGS:
    size = dir_bytes(out[name]) / 1e6 / hours
    print(f'| {name} | {size:,.1f} | {_spread(walls[name])} | '
          f'{seconds / statistics.median(walls[name]):,.0f} |')
  rates = {(r, d): [] for r in READERS for d in DTYPES}
  for _ in range(args.repeats):
    for reader, dtype in rates:
      _, _, stdout = run_measured(
          [PY, '-m', 'bench.feature_dtype', '--read', reader,
           out[f'spectrogram {dtype}']], env=env)
      rates[reader, dtype].append(
          json.loads(stdout.strip().splitlines()[-1])['rate'])
  print('| reader, batches of 64 | float32 ex/s | float16 ex/s | '
        'bfloat16 ex/s |')
  print('|---|---|---|---|')
  for reader in READERS:
    print(f'| {reader} | ' + ' | '.join(
        f'{statistics.median(rates[reader, d]):,.0f}'
        for d in DTYPES) + ' |')
  sweep = os.path.join(ROOT, 'dtype_sweep')
  variants = os.path.join(ROOT, 'dtype_variants.toml')
  with open(variants, 'w') as f:
    f.write(''.join(f'[{d}]\nfeature_dtype = "{d}"\n' for d in DTYPES))
  cmd = list(base)
  cmd[cmd.index('--output_dir') + 1] = sweep
  run_measured(cmd + ['--features', 'log_mel', '--variants', variants,
                      '--splits', 'train=0.7,validation=0.3', '--quiet'],
               env=env)
  _, _, stdout = run_measured([PY, '-m', 'bench.feature_dtype', '--train',
                               sweep, '--seeds', str(args.seeds)], env=env)
  found = json.loads(stdout.strip().splitlines()[-1])
  print(f'held-out accuracy on log-mels, {args.seeds} seeds, mean '
        '(min-max)')
  print('| model | ' + ' | '.join(DTYPES) + ' |')
  print('|---|---|---|---|')
  for model, by_variant in found.items():
    print(f'| {model} | ' + ' | '.join(
        f'{statistics.mean(by_variant[d]):.3f} ({min(by_variant[d]):.3f}-'
        f'{max(by_variant[d]):.3f})' for d in DTYPES) + ' |')


if __name__ == '__main__':
  sys.exit(main())
