"""What --append costs against a full rebuild.

    .venv/bin/python -m bench.append [--corpora 4h,clips1s] [--repeats 3]
    .venv/bin/python -m bench.append --corpora 40h   # about 20 GB of output

For each bench corpus (bench.run's): a dataset of 90% of its recordings
(every tenth file left out, so every class and length is in both), then
the other 10% added to the input folder and `--append`ed (timed), against
a full rebuild of all of them into a fresh folder (timed), and `--append`
once more with nothing new (timed: the fixed cost of starting, listing
and checking every recording's identity). Input folders are hard links
into scratch/bench/append_*; each run is its own process, wall time as a
user sees it; runs interleaved, medians of `--repeats`.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

from bench.run import CORPORA, corpus_for

ROOT = os.path.join('scratch', 'bench')


def _files(corpus):
  return sorted(os.path.relpath(os.path.join(r, f), corpus)
                for r, _, fs in os.walk(corpus) for f in fs)


def _link(corpus, names, into):
  for name in names:
    target = os.path.join(into, name)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.link(os.path.join(corpus, name), target)


def _timed(args):
  start = time.perf_counter()
  subprocess.run([sys.executable, '-m', 'pipeline.run', *args, '--quiet'],
                 check=True)
  return time.perf_counter() - start


def run_corpus(name, repeats):
  corpus, _, _, win_len = corpus_for(name)
  names = _files(corpus)
  later = names[9::10]
  first = [n for n in names if n not in set(later)]
  work = os.path.join(ROOT, f'append_{name}')
  flags = ['--win_len', str(win_len)]
  times = {'rebuild': [], 'append': [], 'append_nothing': []}
  for _ in range(repeats):
    shutil.rmtree(work, ignore_errors=True)
    grown, whole = os.path.join(work, 'in'), os.path.join(work, 'all')
    _link(corpus, first, grown)
    _link(corpus, names, whole)
    out = os.path.join(work, 'out')
    _timed(['--input_dir', grown, '--output_dir', out, *flags])
    _link(corpus, later, grown)
    times['append'].append(_timed(['--input_dir', grown, '--output_dir', out,
                                   *flags, '--append']))
    times['append_nothing'].append(_timed(
        ['--input_dir', grown, '--output_dir', out, *flags, '--append']))
    shutil.rmtree(out)  # the disk holds one large corpus's output at a time
    times['rebuild'].append(_timed(
        ['--input_dir', whole, '--output_dir', os.path.join(work, 'rebuild'),
         *flags]))
  shutil.rmtree(work, ignore_errors=True)
  med = {k: statistics.median(v) for k, v in times.items()}
  print(f'\n### {name}: {len(names)} files, {len(later)} appended\n')
  print('| run | wall s (median) | vs full rebuild | runs |')
  print('|---|---|---|---|')
  for key in ('rebuild', 'append', 'append_nothing'):
    print(f'| {key} | {med[key]:.2f} | {med[key] / med["rebuild"]:.2f}x | '
          f'{[round(t, 2) for t in times[key]]} |')
  return med


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--corpora', default='4h,clips1s')
  parser.add_argument('--repeats', type=int, default=3)
  args = parser.parse_args(argv)
  for name in args.corpora.split(','):
    if name not in CORPORA:
      parser.error(f'unknown corpus {name!r}; choose from {sorted(CORPORA)}')
    run_corpus(name, args.repeats)


if __name__ == '__main__':
  main()
