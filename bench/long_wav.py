"""Peak memory against the length of one recording.

    .venv/bin/python -m bench.long_wav [--repeats 3]

Writes a corpus of a single 1-hour WAV and one of a single 4-hour WAV
(16 kHz int16 mono, 115 MB and 461 MB), runs the default CLI on each,
interleaved, and reports wall time and peak memory summed over the process
tree. Memory must not grow with the file: audio is read in bounded ranges.

With --segments, also a single 2-hour WAV with a manifest of 4,800
segments of 1.5 s every 1.5 s (and a second, overlapping set shifted by
0.75 s: 9,599 segments in all), run as `--example_unit segment` and as
windows of 16,000 cut inside the segments: what a segment list of a long
recording costs.
"""

import argparse
import os
import shutil
import statistics
import sys
import time

from bench.procmon import run_measured
from bench.run import ROOT
from pipeline.commands import example_corpus


def one_file_corpus(hours: int) -> str:
  path = os.path.join(ROOT, f'corpus_one_{hours}h_file')
  if not os.path.isdir(path):
    seconds = 3600 * hours
    example_corpus.write_corpus(path + '.tmp', seconds, min_seconds=seconds,
                                max_seconds=seconds, seed=hours,
                                classes=('tone',))
    os.rename(path + '.tmp', path)
  return path


def segment_manifest(corpus: str) -> str:
  """4,800 segments of 1.5 s end to end, and 4,799 more shifted by 0.75 s
  (each overlapping two), of the one recording in `corpus`."""
  path = corpus + '_segments.csv'
  if not os.path.exists(path):
    name = next(os.path.relpath(os.path.join(d, f), corpus)
                for d, _, files in os.walk(corpus) for f in files)
    with open(path, 'w', encoding='utf-8') as f:
      f.write('path,start,end,part\n')
      for offset, count in ((0.0, 4800), (0.75, 4799)):
        for i in range(count):
          start = offset + 1.5 * i
          f.write(f'{name},{start:.2f},{start + 1.5:.2f},{i % 7}\n')
  return path


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--segments', action='store_true')
  args = parser.parse_args(argv)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  runs = {f'{hours} h': [one_file_corpus(hours)] for hours in (1, 4)}
  if args.segments:
    corpus = one_file_corpus(2)
    segments = ['--manifest', segment_manifest(corpus),
                '--manifest_start_column', 'start', '--manifest_end_column',
                'end', '--manifest_extra_columns', 'part', '--label_from',
                'none']
    runs['2 h, 9,599 segments'] = [corpus, *segments, '--example_unit',
                                   'segment']
    runs['2 h, windows in 9,599 segments'] = [corpus, *segments,
                                              '--win_len', '16000']
  out = os.path.join(ROOT, 'long_wav_out')
  results = {name: [] for name in runs}
  for _ in range(args.repeats):
    for name, (corpus, *options) in runs.items():
      shutil.rmtree(out, ignore_errors=True)
      os.sync()
      time.sleep(1.0)
      wall, peak, _ = run_measured(
          [sys.executable, '-m', 'pipeline.run', '--input_dir', corpus,
           '--output_dir', out, '--overwrite', '--quiet', *options], env=env)
      results[name].append((wall, peak))
  print('| one recording | wall s (median) | peak MB (median, all processes) '
        '| peak MB, every run |')
  print('|---|---|---|---|')
  for name, runs_ in results.items():
    print(f'| {name} | {statistics.median(r[0] for r in runs_):.2f} | '
          f'{statistics.median(r[1] for r in runs_) / 1e6:.0f} | '
          f'{[round(r[1] / 1e6) for r in runs_]} |')
  shutil.rmtree(out, ignore_errors=True)


if __name__ == '__main__':
  main()
