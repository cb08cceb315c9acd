"""What a feature sweep (--variants) costs against separate runs.

    .venv/bin/python -m bench.sweep [--corpora 4h,clips3s] [--repeats 3]

For each bench corpus (bench.run's): a four-variant spectrogram sweep
(n_fft 256, 512, 1024 and 2048, each with fft_hop n_fft / 2) as one
`wavbeam run --variants`, against the same four datasets written by four
separate runs, one after the other. Each run is its own process, timed
until its output is on disk (the run, then a sync), peak memory summed
over the process tree (the largest of the four for separate runs);
contenders interleaved, medians and spread of `--repeats` rounds, and the
ratio sweep / separate per round.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import time

from bench.procmon import run_measured
from bench.run import ROOT, corpus_for

N_FFTS = (256, 512, 1024, 2048)
PY = sys.executable


def variants_file(path):
  with open(path, 'w') as f:
    json.dump({f'nfft{n}': {'n_fft': n, 'fft_hop': n // 2} for n in N_FFTS},
              f)
  return path


def _run(args):
  """(seconds until the run's output is on disk, peak memory). The sync
  is timed too: a run that writes less than the kernel's dirty-page
  threshold (a tenth of memory here) would otherwise leave its writing to
  whoever runs next, and a sweep writes four datasets' worth."""
  wall, peak, _ = run_measured([PY, '-m', 'pipeline.run', *args, '--quiet'])
  started = time.perf_counter()
  os.sync()
  return wall + time.perf_counter() - started, peak


def _fresh(path):
  shutil.rmtree(path, ignore_errors=True)
  os.sync()  # the last run's deletes and dirty pages are not billed here
  time.sleep(1.0)


def run_corpus(name, repeats):
  corpus, seconds, _, win_len = corpus_for(name)
  work = os.path.join(ROOT, 'sweep')
  os.makedirs(work, exist_ok=True)
  spec = variants_file(os.path.join(work, 'variants.json'))
  common = ['--input_dir', corpus, '--win_len', str(win_len), '--overwrite']
  rounds = []
  for _ in range(repeats):
    _fresh(os.path.join(work, 'out'))
    sweep = _run([*common, '--output_dir', os.path.join(work, 'out'),
                  '--variants', spec])
    separate_wall, separate_peak = 0.0, 0
    for n in N_FFTS:
      _fresh(os.path.join(work, 'out'))
      wall, peak = _run([*common, '--output_dir', os.path.join(work, 'out'),
                         '--n_fft', str(n), '--fft_hop', str(n // 2)])
      separate_wall += wall
      separate_peak = max(separate_peak, peak)
    rounds.append((sweep, (separate_wall, separate_peak)))
  shutil.rmtree(os.path.join(work, 'out'), ignore_errors=True)
  return seconds, rounds


def _spread(values, fmt):
  return (f'{fmt(statistics.median(values))} '
          f'({fmt(min(values))}-{fmt(max(values))})')


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--corpora', default='4h,clips3s')
  parser.add_argument('--repeats', type=int, default=3)
  args = parser.parse_args(argv)
  print('| corpus | 4 separate runs | sweep | sweep / separate | peak memory, '
        'one run | peak memory, sweep | memory ratio |')
  print('|---|---|---|---|---|---|---|')
  seconds = lambda v: f'{v:.1f} s'  # noqa: E731
  megabytes = lambda v: f'{v / 1e6:.0f} MB'  # noqa: E731
  ratio = lambda v: f'{v:.2f}x'  # noqa: E731
  for name in args.corpora.split(','):
    _, rounds = run_corpus(name, args.repeats)
    sweep = [s for s, _ in rounds]
    separate = [p for _, p in rounds]
    print(f'| {name} | {_spread([w for w, _ in separate], seconds)} | '
          f'{_spread([w for w, _ in sweep], seconds)} | '
          f'{_spread([s[0] / p[0] for s, p in rounds], ratio)} | '
          f'{_spread([m for _, m in separate], megabytes)} | '
          f'{_spread([m for _, m in sweep], megabytes)} | '
          f'{_spread([s[1] / p[1] for s, p in rounds], ratio)} |',
          flush=True)


if __name__ == '__main__':
  main()
