"""Reading speed of every reader, one fresh process per reader and pass set.

    .venv/bin/python -m bench.readers [--datasets 1h,clips1s] [--repeats 3]

Datasets: the bench's 1 h corpus (window 32768) and its 20,000 one-second
clips (window 16000), written by wavbeam into scratch/bench/readers_*
(signal + spectrogram, the defaults, with --array_record). Readers with
`_shuffled` in their name read a full epoch in a fresh random order from
the ArrayRecord copies (random access; `torch_map_*` with
pipeline.readers.torch_dataset.collate, or DataLoader's default_collate); the
others read the TFRecord shards in sequence. Each reader reads the train split,
all features, in a process of its own (start-up not timed), 3 passes:
the first pass is reported apart ("first": tf.data's and the page cache's
warm-up included, files already in the page cache from writing), then the
median of the others ("warm"). Readers run interleaved, `--repeats`
times; the table gives medians. Examples/s; a reader whose package is not
installed is skipped and said so (the `tfrecord` package, the PyTorch
users' TFRecord reader, and torch come with requirements-test.txt).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.join('scratch', 'bench')
DATASETS = {'1h': ('1h', 32768), 'clips1s': ('clips1s', 16000)}
READERS = ('replay_dataset', 'replay_dataset_tf', 'hand_written',
           'tfds_as_dataset',
           'numpy_reader', 'numpy_reader_batched', 'tfrecord_package',
           'torch_loader_0_workers', 'torch_loader_2_workers',
           'torch_augment_0_workers', 'torch_augment_2_workers',
           'torch_examples_2_workers', 'torch_examples_2_workers_collate',
           'array_record_shuffled', 'tfds_data_source_shuffled',
           'grain_shuffled', 'torch_map_shuffled_2_workers',
           'torch_map_shuffled_2_workers_default_collate')
BATCH = 64


def dataset_for(name):
  from bench.run import corpus_for  # pylint: disable=import-outside-toplevel
  corpus, win_len = DATASETS[name]
  out = os.path.join(ROOT, f'readers_{name}')
  meta = os.path.join(out, 'metadata.json')
  if not (os.path.exists(meta) and
          '"array_record"' in open(meta, encoding='utf-8').read()):
    subprocess.run([sys.executable, '-m', 'pipeline.run', '--input_dir',
                    corpus_for(corpus)[0], '--output_dir', out, '--overwrite',
                    '--win_len', str(win_len), '--array_record', '--quiet'],
                   check=True)
  return out


def _count(batches):
  n = 0
  for b in batches:
    n += len(b['index']) if np.ndim(b['index']) else 1
  return n


def make_reader(name, out):
  """A function that reads the train split once; returns examples read."""
  # Opened once and read pass after pass, as a training loop reads it
  # (and as hf_arrow's dataset is loaded once).
  if name == 'numpy_reader':
    from pipeline.readers import numpy_dataset as numpy_reader
    dataset = numpy_reader.numpy_dataset(out, 'train')
    return lambda: _count(dataset)
  if name == 'numpy_reader_batched':
    from pipeline.readers import numpy_dataset as numpy_reader
    dataset = numpy_reader.numpy_dataset(out, 'train', batch_size=BATCH)
    return lambda: _count(dataset)
  if name == 'tfrecord_package':
    return _tfrecord_package(out)
  if name.startswith('torch_examples_'):
    return _torch_examples(out, collated=name.endswith('_collate'))
  if name.startswith(('torch_loader_', 'torch_augment_')):
    return _torch_loader(out, int(name.split('_')[2]),
                         augment=name.startswith('torch_augment_'))
  if name in ('array_record_shuffled', 'grain_shuffled',
              'torch_map_shuffled_2_workers',
              'torch_map_shuffled_2_workers_default_collate'):
    return _random_access(name, out)
  if name == 'tfds_data_source_shuffled':
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
    import tensorflow_datasets as tfds
    source = tfds.builder_from_directory(out).as_data_source('train')
    return lambda: _shuffled_epoch(source)
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  from bench import read_bench
  from pipeline.readers import tf_dataset as replay
  if name == 'replay_dataset':
    dataset = replay.replay_dataset(out, 'train', batch_size=BATCH)
  elif name == 'replay_dataset_tf':
    dataset = replay.replay_dataset(out, 'train', batch_size=BATCH,
                                    engine='tf')
  elif name == 'hand_written':
    dataset = read_bench.hand_written(out)
  elif name == 'tfds_as_dataset':
    import tensorflow_datasets as tfds
    dataset = tfds.builder_from_directory(out).as_dataset(split='train',
                                                         batch_size=BATCH)
  else:
    raise ValueError(name)
  return lambda: _count(dataset)


def _tfrecord_package(out):
  """What a PyTorch user writes with the `tfrecord` package: its loader
  per shard, then the arrays rebuilt from metadata.json by hand."""
  from tfrecord.reader import tfrecord_loader
  meta = json.load(open(os.path.join(out, 'metadata.json')))
  schema = meta['schema']
  files = [os.path.join(out, s['file'])
           for s in meta['splits']['train']['shards']]
  description = {'signal': 'byte', 'spectrogram': 'float', 'class': 'byte',
                 'filepath': 'byte', 'index': 'int', 'num_classes': 'int',
                 'target': 'int', 'win_start_idx': 'int'}
  signal_shape = schema['signal']['shape']
  spec_shape = schema['spectrogram']['shape']

  def read():
    n = 0
    for path in files:
      for e in tfrecord_loader(path, None, description):
        np.frombuffer(bytes(e['signal']), '<i4').reshape(signal_shape)
        e['spectrogram'].reshape(spec_shape)
        n += 1
    return n
  return read


def _torch_loader(out, workers, augment):
  """pipeline.readers.torch_dataset in a DataLoader (batches of BATCH made
  in the dataset, all features); workers persist between passes, as in
  training. With `augment`, SpecAugment-style work on every example."""
  import torch
  from pipeline.readers.torch_dataset import WavbeamIterableDataset
  loader = torch.utils.data.DataLoader(
      WavbeamIterableDataset(out, 'train', batch_size=BATCH,
                             transform=spec_augment if augment else None),
      batch_size=None, num_workers=workers, persistent_workers=workers > 0)
  return lambda: sum(len(b['index']) for b in loader)


def _torch_examples(out, collated):
  """Single examples batched by the DataLoader (BATCH, 2 workers), with
  its default_collate or pipeline.readers.torch_dataset.collate."""
  import torch
  from pipeline.readers.torch_dataset import WavbeamIterableDataset, collate
  loader = torch.utils.data.DataLoader(
      WavbeamIterableDataset(out, 'train'), batch_size=BATCH, num_workers=2,
      persistent_workers=True, collate_fn=collate if collated else None)
  return lambda: sum(len(b['index']) for b in loader)


def spec_augment(example, rng=np.random.default_rng()):  # pylint: disable=dangerous-default-value
  """Per-example training work a DataLoader worker would do: speed
  perturbation of the signal (0.9x, 1x or 1.1x, resampled polyphase, as
  in Kaldi's recipes) with a random gain, and SpecAugment on the log
  spectrogram (2 time and 2 frequency masks), standardized."""
  from scipy import signal as scipy_signal
  up = int(rng.choice([9, 10, 11]))
  wave = scipy_signal.resample_poly(example['signal'].astype(np.float32),
                                    up, 10)
  wave *= np.float32(rng.uniform(0.5, 1.5) / 2 ** 31)
  spec = np.log1p(example['spectrogram'])
  for axis in (0, 1, 0, 1):
    size = spec.shape[axis]
    width = int(rng.integers(0, size // 8 + 1))
    start = int(rng.integers(0, size - width + 1))
    index = [slice(None), slice(None)]
    index[axis] = slice(start, start + width)
    spec[tuple(index)] = 0.0
  spec = (spec - spec.mean()) / (spec.std() + 1e-6)
  n = len(example['signal'])  # cut or zero-padded back to the window
  example.update(spectrogram=spec,
                 signal=np.pad(wave[:n], (0, max(0, n - len(wave)))))
  return example


def _shuffled_epoch(source, epoch=[0]):  # pylint: disable=dangerous-default-value
  """One epoch of single-example reads in a fresh random order."""
  epoch[0] += 1
  order = np.random.default_rng(epoch[0]).permutation(len(source))
  for i in order:
    source[int(i)]
  return len(order)


def _random_access(name, out):
  """Full shuffled epochs over the ArrayRecord copies (--array_record)."""
  from pipeline.readers.array_record import ArrayRecordSource
  source = ArrayRecordSource(out, 'train')
  if name == 'array_record_shuffled':
    return lambda: _shuffled_epoch(source)
  if name == 'grain_shuffled':
    import grain
    seeds = iter(range(1, 1 << 30))
    return lambda: sum(len(b['index']) for b in grain.MapDataset.source(
        source).shuffle(seed=next(seeds)).batch(BATCH))
  import torch
  from pipeline.readers.torch_dataset import WavbeamMapDataset, collate
  loader = torch.utils.data.DataLoader(
      WavbeamMapDataset(out, 'train'), batch_size=BATCH, shuffle=True,
      num_workers=2, persistent_workers=True,
      collate_fn=None if name.endswith('default_collate') else collate)
  return lambda: sum(len(b['index']) for b in loader)


def run_one(name, out, passes):
  read = make_reader(name, out)
  rates = []
  for _ in range(passes):
    start = time.perf_counter()
    n = read()
    rates.append(n / (time.perf_counter() - start))
  return {'examples': n, 'first': rates[0],
          'warm': statistics.median(rates[1:])}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--datasets', default='1h,clips1s')
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--readers', default=','.join(READERS))
  parser.add_argument(
      '--hf_python', help='the Python of an environment with Hugging Face '
      '`datasets` (see bench/hf_anchor.py): adds the reader hf_arrow, the '
      'same content as memory-mapped Arrow read with '
      "with_format('numpy') in batches of 64, interleaved with the others")
  parser.add_argument('--one', help=argparse.SUPPRESS)
  parser.add_argument('--dataset_dir', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.one:
    print(json.dumps(run_one(args.one, args.dataset_dir, 3)))
    return
  names = args.readers.split(',')
  if args.hf_python:
    names.append('hf_arrow')
  for dataset in args.datasets.split(','):
    out = dataset_for(dataset)
    if args.hf_python:
      hf_dir = subprocess.run(
          [args.hf_python, '-c', 'from bench import hf_anchor; '
           f'print(hf_anchor.convert({out!r}))'], capture_output=True,
          text=True, check=True, env=dict(os.environ, PYTHONPATH='.')
      ).stdout.strip().splitlines()[-1]
    results = {n: [] for n in names}
    skipped = {}
    for _ in range(args.repeats):
      for name in names:
        if name in skipped:
          continue
        if name == 'hf_arrow':
          proc = subprocess.run(
              [args.hf_python, '-m', 'bench.hf_anchor', out, '--one',
               hf_dir], capture_output=True, text=True,
              env=dict(os.environ, PYTHONPATH='.'))
        else:
          proc = subprocess.run([sys.executable, '-m', 'bench.readers',
                                 '--one', name, '--dataset_dir', out],
                                capture_output=True, text=True)
        if proc.returncode:
          skipped[name] = proc.stderr.strip().splitlines()[-1]
          continue
        results[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f'\n### {dataset}: {out}\n')
    arrow = 'hf_arrow' in names
    print('| reader | first pass, ex/s | warm passes, ex/s | warm vs '
          'hand_written | warm vs tfds |' + (' warm vs hf_arrow |' if arrow
                                             else ''))
    print('|---|---|---|---|---|' + ('---|' if arrow else ''))
    warm = {n: statistics.median(r['warm'] for r in rs)
            for n, rs in results.items() if rs}
    counts = {rs[0]['examples'] for rs in results.values() if rs}
    assert len(counts) == 1, counts
    for name, rs in results.items():
      if not rs:
        print(f'| {name} | skipped: {skipped.get(name, "")} | | | |' +
              (' |' if arrow else ''))
        continue
      first = statistics.median(r['first'] for r in rs)
      def rel(other):
        return (f'{warm[name] / warm[other]:.2f}x' if other in warm
                else '')
      print(f'| {name} | {first:.0f} | {warm[name]:.0f} | '
            f'{rel("hand_written")} | {rel("tfds_as_dataset")} |'
            + (f' {rel("hf_arrow")} |' if 'hf_arrow' in warm else ''))


if __name__ == '__main__':
  main()
