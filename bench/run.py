"""The wavbeam benchmark: `make bench` (python -m bench.run).

Generates deterministic corpora (4 classes, 16 kHz int16 mono, files of 20 to
120 s; 1 h and 4 h of audio), then runs every writer as its own process,
interleaved, `--repeats` times, and reports medians: audio-seconds per wall
second, windows/s, MB/s written, peak memory summed over the process tree,
and the ratio to `baseline`. Wall time is the whole process (start-up and
imports included), as a user experiences it. Then reading speed.
Window 32768, hop 32768, spectrogram n_fft 512 hop 256.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import time

import soundfile as sf

from bench.procmon import run_measured
from pipeline import example_corpus

ROOT = os.path.join('scratch', 'bench')
PY = sys.executable


def writers(corpus, out):
  base = [PY, '-m', 'pipeline.run', '--input_dir', corpus, '--output_dir',
          out, '--overwrite']
  return {
      'wavbeam': base,
      'wavbeam_1worker': base + ['--direct_num_workers=1'],
      'wavbeam_noshuffle': base + ['--no_shuffle'],
      'wavbeam_2proc': base + ['--direct_num_workers=2',
                               '--direct_running_mode=multi_processing'],
      'baseline': [PY, '-m', 'bench.baseline_numpy', corpus, out],
      'tfdata_seed': [PY, '-m', 'bench.baseline_tfdata', corpus, out],
  }


def corpus_for(hours):
  path = os.path.join(ROOT, f'corpus_{hours:g}h')
  if not os.path.isdir(path):
    example_corpus.write_corpus(path + '.tmp', hours * 3600, seed=int(hours))
    os.rename(path + '.tmp', path)
  seconds, windows = 0.0, 0
  for r, _, files in os.walk(path):
    for f in files:
      info = sf.info(os.path.join(r, f))
      seconds += info.frames / info.samplerate
      windows += info.frames // 32768
  return path, seconds, windows


def dir_bytes(path):
  return sum(os.path.getsize(os.path.join(r, f))
             for r, _, fs in os.walk(path) for f in fs)


def bench_writers(hours, repeats, names, env):
  corpus, seconds, windows = corpus_for(hours)
  out = os.path.join(ROOT, 'out')
  runs = {n: [] for n in names}
  for _ in range(repeats):
    for name in names:  # interleaved: machine noise hits every contender
      shutil.rmtree(out, ignore_errors=True)
      # Flush the previous writer's dirty pages and deletes (this disk is
      # mounted with discard) so they are not billed to the next writer.
      os.sync()
      time.sleep(1.0)
      wall, peak, _ = run_measured(writers(corpus, out)[name], env=env)
      runs[name].append((wall, peak, dir_bytes(out)))
  rows = {}
  for name, rs in runs.items():
    wall = statistics.median(r[0] for r in rs)
    rows[name] = {'wall_s': wall, 'audio_s_per_s': seconds / wall,
                  'windows_per_s': windows / wall,
                  'mb_per_s': statistics.median(r[2] for r in rs) / wall / 1e6,
                  'peak_mb': statistics.median(r[1] for r in rs) / 1e6,
                  'walls': [round(r[0], 2) for r in rs]}
  if 'baseline' in rows:
    for row in rows.values():
      row['ratio'] = rows['baseline']['wall_s'] / row['wall_s']
  return {'hours': hours, 'audio_seconds': seconds, 'windows': windows,
          'writers': rows}


def bench_reading(hours, repeats, env):
  corpus, _, _ = corpus_for(hours)
  out = os.path.join(ROOT, 'read_out')
  run_measured(writers(corpus, out)['wavbeam'], env=env)
  _, _, stdout = run_measured([PY, '-m', 'bench.read_bench', out,
                               str(repeats)], env=env)
  result = json.loads(stdout.strip().splitlines()[-1])
  return result


def to_markdown(results, reading):
  lines = []
  for r in results:
    lines.append(f"\n### {r['hours']:g} h corpus: {r['audio_seconds']:.0f} "
                 f"audio-s, {r['windows']} windows\n")
    lines.append('| writer | wall s (median) | audio-s/s | windows/s | MB/s '
                 'written | peak MB (all processes) | vs baseline | runs |')
    lines.append('|---|---|---|---|---|---|---|---|')
    for name, w in r['writers'].items():
      lines.append(
          f"| {name} | {w['wall_s']:.2f} | {w['audio_s_per_s']:.0f} | "
          f"{w['windows_per_s']:.0f} | {w['mb_per_s']:.0f} | "
          f"{w['peak_mb']:.0f} | {w.get('ratio', float('nan')):.2f}x | "
          f"{w['walls']} |")
  if reading:
    lines.append('\n### Reading (batch 64, all features, page cache)\n')
    lines.append('| reader | examples/s (median) | vs hand-written | '
                 'vs TFDS |')
    lines.append('|---|---|---|---|')
    hand = reading['hand_written']['examples_per_s']
    tfds = reading['tfds_as_dataset']['examples_per_s']
    for name in ('replay_dataset', 'hand_written', 'tfds_as_dataset'):
      eps = reading[name]['examples_per_s']
      lines.append(f'| {name} | {eps:.0f} | {eps / hand:.2f}x | '
                   f'{eps / tfds:.2f}x |')
  return '\n'.join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--hours', default='1,4',
                      help='corpus sizes in hours of audio (default: 1,4)')
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--writers', default='wavbeam,wavbeam_noshuffle,'
                      'wavbeam_1worker,wavbeam_2proc,baseline,'
                      'tfdata_seed')
  parser.add_argument('--no_reading', action='store_true')
  args = parser.parse_args(argv)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  names = args.writers.split(',')
  results = [bench_writers(float(h), args.repeats, names, env)
             for h in args.hours.split(',')]
  reading = (None if args.no_reading else
             bench_reading(float(args.hours.split(',')[-1]), args.repeats,
                           env))
  os.makedirs(ROOT, exist_ok=True)
  with open(os.path.join(ROOT, 'results.json'), 'w') as f:
    json.dump({'writers': results, 'reading': reading}, f, indent=2)
  print(to_markdown(results, reading))


if __name__ == '__main__':
  main()
