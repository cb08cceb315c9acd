"""The embedding feature against a hand-written loop, on this machine's CPUs.

    .venv/bin/python -m bench.embeddings [--hours 1] [--clip_seconds 10]
        [--repeats 3] [--hidden 256] [--layers 4] [--device cpu|cuda]
        [--dtype float32|bfloat16]

A wav2vec2-shaped model with random weights (--hidden, --layers; the
convolutional front end of wav2vec2-base, whose stride gives 50 frames a
second) saved with save_pretrained, and a corpus of --hours of 16 kHz
clips of --clip_seconds. Contenders, each a whole process, interleaved
over --repeats rounds, timed until their output is on disk:
- wavbeam: `wavbeam run --features embedding --embedding_model MODEL
  --embedding_layers last --embedding_pool mean --example_unit file`;
- loop: the same embeddings by hand, in one process per core: soundfile,
  the model in batches of equal-length clips (torch, one thread a
  process), the vectors written with numpy.
Prints the medians and spread of each, the ratio loop / wavbeam per round
(above 1: wavbeam is faster), the model's own rate (audio-seconds per
second of one forward pass over a batch, one thread) and peak memory.
With --device cuda (bench/embeddings_gpu.sh) wavbeam runs the model on
the GPU in --dtype, and is compared with the model's own batched rate
there (batches of 64 clips) instead of the loop.
"""

import argparse
import os
import shutil
import statistics
import sys
import time

import numpy as np
import soundfile as sf

from bench.procmon import run_measured
from bench.run import ROOT

PY = sys.executable
RATE = 16000

# The hand-written loop: argv = model, output file, clip paths.
LOOP = r'''
import os, sys
os.environ.setdefault('USE_TF', '0')
import numpy as np, soundfile as sf, torch, transformers
torch.set_num_threads(1)
model, out, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
net = transformers.AutoModel.from_pretrained(model).eval()
by_length = {}
for path in paths:
  data, _ = sf.read(path, dtype='float32')
  by_length.setdefault(len(data), []).append(data)
vectors = []
with torch.inference_mode():
  for clips in by_length.values():
    for i in range(0, len(clips), 8):
      x = torch.from_numpy(np.stack(clips[i:i + 8]))
      x = (x - x.mean(1, keepdim=True)) / torch.sqrt(
          x.var(1, keepdim=True, unbiased=False) + 1e-7)
      vectors.append(net(x).last_hidden_state.mean(1).numpy())
np.save(out, np.concatenate(vectors))
'''


def make_model(folder: str, hidden: int, layers: int) -> str:
  os.environ.setdefault('USE_TF', '0')
  import torch
  import transformers
  torch.manual_seed(0)
  config = transformers.Wav2Vec2Config(
      hidden_size=hidden, num_hidden_layers=layers,
      num_attention_heads=max(1, hidden // 64),
      intermediate_size=4 * hidden)
  transformers.Wav2Vec2Model(config).eval().save_pretrained(folder)
  transformers.Wav2Vec2FeatureExtractor(do_normalize=True).save_pretrained(
      folder)
  return folder


def make_corpus(folder: str, hours: float, clip_seconds: float) -> list:
  rng = np.random.default_rng(0)
  count = int(round(hours * 3600 / clip_seconds))
  paths = []
  for i in range(count):
    path = os.path.join(folder, ('a', 'b')[i % 2], f'{i:05d}.wav')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.exists(path):
      sf.write(path, rng.uniform(-0.3, 0.3, int(clip_seconds * RATE)),
               RATE, subtype='PCM_16')
    paths.append(path)
  return paths


def model_rate(model: str, clip_seconds: float, device: str = 'cpu',
               dtype: str = 'float32') -> float:
  """Audio-seconds per second of the model alone: on the CPU 8 clips and
  one thread; on a GPU batches of 64 clips, the median of 5 passes."""
  import torch
  import transformers
  torch.set_num_threads(1)
  clips = 8 if device == 'cpu' else 64
  net = transformers.AutoModel.from_pretrained(model).eval().to(
      device, getattr(torch, dtype))
  x = torch.randn(clips, int(clip_seconds * RATE)).to(device,
                                                      getattr(torch, dtype))
  passes = []
  with torch.inference_mode():
    net(x)
    for _ in range(1 if device == 'cpu' else 5):
      if device != 'cpu':
        torch.cuda.synchronize()
      started = time.perf_counter()
      net(x)
      if device != 'cpu':
        torch.cuda.synchronize()
      passes.append(time.perf_counter() - started)
  return clips * clip_seconds / statistics.median(passes)


def _timed(cmd):
  wall, peak, _ = run_measured(cmd)
  started = time.perf_counter()
  os.sync()
  return wall + time.perf_counter() - started, peak


def run_wavbeam(corpus, model, out, device='cpu', dtype='float32'):
  shutil.rmtree(out, ignore_errors=True)
  return _timed([PY, '-m', 'pipeline.run', '--input_dir', corpus,
                 '--output_dir', out, '--example_unit', 'file',
                 '--features', 'embedding', '--embedding_model', model,
                 '--embedding_pool', 'mean', '--embedding_device', device,
                 '--embedding_dtype', dtype, '--splits', 'train=1',
                 '--quiet'])


def run_loop(paths, model, out):
  """One process per core, each a share of the clips (the shell waits
  for all)."""
  shutil.rmtree(out, ignore_errors=True)
  os.makedirs(out)
  cores = os.cpu_count() or 1
  shares = [paths[i::cores] for i in range(cores)]
  script = ' & '.join(
      ' '.join([PY, '-c', _quoted(LOOP), model,
                os.path.join(out, f'{i}.npy'), *share])
      for i, share in enumerate(shares) if share) + ' & wait'
  return _timed(['sh', '-c', script])


def _quoted(text):
  return "'" + text.replace("'", "'\"'\"'") + "'"


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--hours', type=float, default=1.0)
  parser.add_argument('--clip_seconds', type=float, default=10.0)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--hidden', type=int, default=256)
  parser.add_argument('--layers', type=int, default=4)
  parser.add_argument('--device', default='cpu', choices=('cpu', 'cuda'))
  parser.add_argument('--dtype', default='float32',
                      choices=('float32', 'bfloat16'))
  args = parser.parse_args(argv)
  work = os.path.join(ROOT, 'embeddings')
  os.makedirs(work, exist_ok=True)
  model = make_model(os.path.join(work, f'model-{args.hidden}-'
                                  f'{args.layers}'), args.hidden, args.layers)
  paths = make_corpus(os.path.join(work, f'corpus-{args.hours:g}h-'
                                   f'{args.clip_seconds:g}s'),
                      args.hours, args.clip_seconds)
  corpus = os.path.dirname(os.path.dirname(paths[0]))
  audio = len(paths) * args.clip_seconds
  if args.device == 'cuda':
    return _on_gpu(args, corpus, model, os.path.join(work, 'out'), audio)
  rounds = []
  for _ in range(args.repeats):
    ours = run_wavbeam(corpus, model, os.path.join(work, 'out'))
    theirs = run_loop(paths, model, os.path.join(work, 'loop'))
    rounds.append((ours, theirs))
  rows = [('wavbeam', [r[0] for r in rounds]), ('loop', [r[1] for r in rounds])]
  print(f'{len(paths)} clips of {args.clip_seconds:g} s ({audio / 3600:g} h),'
        f' model hidden {args.hidden} x {args.layers} layers, '
        f'{os.cpu_count()} cores, {args.repeats} rounds')
  print('| contender | wall s median (min-max) | audio-s/s | peak MB |')
  print('|---|---|---|---|')
  for name, runs in rows:
    walls = [w for w, _ in runs]
    print(f'| {name} | {statistics.median(walls):.1f} ({min(walls):.1f}-'
          f'{max(walls):.1f}) | {audio / statistics.median(walls):.0f} | '
          f'{max(p for _, p in runs) / 1e6:.0f} |')
  ratios = [t[0] / o[0] for o, t in rounds]
  print(f'loop / wavbeam per round: median {statistics.median(ratios):.2f} '
        f'({min(ratios):.2f}-{max(ratios):.2f})')
  print(f'the model alone, one thread: '
        f'{model_rate(model, args.clip_seconds):.0f} audio-s/s')


def _on_gpu(args, corpus, model, out, audio):
  """The whole job on the GPU against the model's own batched rate."""
  alone = model_rate(model, args.clip_seconds, 'cuda', args.dtype)
  runs = [run_wavbeam(corpus, model, out, 'cuda', args.dtype)
          for _ in range(args.repeats)]
  walls = sorted(w for w, _ in runs)
  job = audio / statistics.median(walls)
  print(f'{audio / 3600:g} h in clips of {args.clip_seconds:g} s, model '
        f'hidden {args.hidden} x {args.layers} layers, {args.dtype}, '
        f'{os.cpu_count()} cores, {args.repeats} rounds')
  print(f'the whole job: {job:.0f} audio-s/s (wall {walls[0]:.1f}-'
        f'{walls[-1]:.1f} s), peak {max(p for _, p in runs) / 1e6:.0f} MB')
  print(f'the model alone, batches of 64: {alone:.0f} audio-s/s; job / '
        f'model {job / alone:.2f}')


if __name__ == '__main__':
  main()
