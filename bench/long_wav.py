"""Peak memory against the length of one recording.

    .venv/bin/python -m bench.long_wav [--repeats 3]

Writes a corpus of a single 1-hour WAV and one of a single 4-hour WAV
(16 kHz int16 mono, 115 MB and 461 MB), runs the default CLI on each,
interleaved, and reports wall time and peak memory summed over the process
tree. Memory must not grow with the file: audio is read in bounded ranges.
"""

import argparse
import os
import shutil
import statistics
import sys
import time

from bench.procmon import run_measured
from bench.run import ROOT
from pipeline import example_corpus


def one_file_corpus(hours: int) -> str:
  path = os.path.join(ROOT, f'corpus_one_{hours}h_file')
  if not os.path.isdir(path):
    seconds = 3600 * hours
    example_corpus.write_corpus(path + '.tmp', seconds, min_seconds=seconds,
                                max_seconds=seconds, seed=hours,
                                classes=('tone',))
    os.rename(path + '.tmp', path)
  return path


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--repeats', type=int, default=3)
  args = parser.parse_args(argv)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  corpora = {hours: one_file_corpus(hours) for hours in (1, 4)}
  out = os.path.join(ROOT, 'long_wav_out')
  results = {hours: [] for hours in corpora}
  for _ in range(args.repeats):
    for hours, corpus in corpora.items():
      shutil.rmtree(out, ignore_errors=True)
      os.sync()
      time.sleep(1.0)
      wall, peak, _ = run_measured(
          [sys.executable, '-m', 'pipeline.run', '--input_dir', corpus,
           '--output_dir', out, '--overwrite', '--quiet'], env=env)
      results[hours].append((wall, peak))
  print('| one recording | wall s (median) | peak MB (median, all processes) '
        '| peak MB, every run |')
  print('|---|---|---|---|')
  for hours, runs in results.items():
    print(f'| {hours} h | {statistics.median(r[0] for r in runs):.2f} | '
          f'{statistics.median(r[1] for r in runs) / 1e6:.0f} | '
          f'{[round(r[1] / 1e6) for r in runs]} |')
  shutil.rmtree(out, ignore_errors=True)


if __name__ == '__main__':
  main()
