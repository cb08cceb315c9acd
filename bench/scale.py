"""Scaling benchmark: 1 vs 2 workers, locally and on a real Dask cluster.

    .venv/bin/python -m bench.scale [--repeats 3]

Corpora: the 4 h corpus of bench.run, and a "long file" corpus: one
60-minute recording plus about an hour of 20-120 s files. For each, wall
time (median, whole job) and peak memory summed over every process (the
launcher, its workers, and the Dask scheduler and workers) with 1 and 2
workers: local threads (the default), local worker processes
(multi_processing) and a Dask cluster on 127.0.0.1 (one thread per worker,
started before the timed runs, as a real cluster would be; one Dask
partition per worker, see launch/dask).

Three times per run: wall (the whole process), job (after start-up and
imports, printed by the CLI) and write (from the first shard task started to
the last one finished, as metadata.json records it on every runner: the
phase that scales with workers, without the runner's fixed start-up and
planning stages). Between runs it
measures what two processes can gain over one on this machine at that time
(bench/ceiling.py), since on a shared VM that moves too.
"""

import argparse
import os
import re
import shutil
import statistics
import sys
import time

from bench import ceiling
from tests.dask_cluster import dask_cluster
from bench.procmon import run_measured
from bench.run import ROOT, corpus_for
from pipeline.commands import example_corpus

PY = sys.executable


def long_file_corpus():
  path = os.path.join(ROOT, 'corpus_longfile')
  if not os.path.isdir(path):
    example_corpus.write_corpus(path + '.tmp', 3600, min_seconds=3600,
                                max_seconds=3600, seed=7, classes=('tone',))
    example_corpus.write_corpus(path + '.tmp', 3600, seed=8)  # short files
    os.rename(path + '.tmp', path)
  return path


def modes(workers):
  return {
      'threads': [f'--direct_num_workers={workers}'],
      'processes': [f'--direct_num_workers={workers}',
                    '--direct_running_mode=multi_processing'],
  }


def timed(corpus, extra, env, also=()):
  out = os.path.join(ROOT, 'scale_out')
  shutil.rmtree(out, ignore_errors=True)
  os.sync()
  time.sleep(1.0)
  wall, peak, stdout = run_measured(
      [PY, '-m', 'pipeline.run', '--input_dir', corpus, '--output_dir', out,
       '--overwrite', *extra], env=env, also=also)
  # The job's own time (after interpreter start-up and imports), and the
  # shard-writing phase (from metadata.json's shards_written).
  job = float(re.search(r' in ([0-9.]+) s;', stdout).group(1))
  phase = re.search(r'shards written in ([0-9.]+) s', stdout)
  return wall, peak, job, float(phase.group(1)) if phase else None


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--modes', default='threads,processes,dask',
                      help='comma-separated subset of threads,processes,dask')
  args = parser.parse_args(argv)
  chosen = args.modes.split(',')
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  corpora = {'4 h': corpus_for(4.0)[0], 'one long file': long_file_corpus()}
  results = {}
  ceilings = []
  for name, corpus in corpora.items():
    for mode in [m for m in ('threads', 'processes') if m in chosen]:
      for _ in range(args.repeats):
        for workers in (1, 2):  # interleaved
          results.setdefault((name, mode, workers), []).append(
              timed(corpus, modes(workers)[mode], env))
        ceilings.append(ceiling.measure(1))
    for workers in (1, 2) if 'dask' in chosen else ():
      with dask_cluster(workers) as (address, pids):
        for _ in range(args.repeats):
          results.setdefault((name, 'dask', workers), []).append(
              timed(corpus, ['--runner', 'DaskRunner',
                             '--dask_client_address', address,
                             f'--dask_npartitions={workers}'], env, pids))
  print('| corpus | mode | 1 worker: wall / job / write s | 2 workers: wall '
        '/ job / write s | speed-up: wall / job / write | peak MB, 1 / 2 '
        'workers (all processes) |')
  print('|---|---|---|---|---|---|')
  for name in corpora:
    for mode in [m for m in ('threads', 'processes', 'dask') if m in chosen]:
      one, two = results[(name, mode, 1)], results[(name, mode, 2)]
      w1 = statistics.median(r[0] for r in one)
      w2 = statistics.median(r[0] for r in two)
      m1 = statistics.median(r[1] for r in one) / 1e6
      m2 = statistics.median(r[1] for r in two) / 1e6
      j1 = statistics.median(r[2] for r in one)
      j2 = statistics.median(r[2] for r in two)
      if one[0][3] is None:
        p1 = p2 = ratio = 'n/a'
      else:
        p1 = statistics.median(r[3] for r in one)
        p2 = statistics.median(r[3] for r in two)
        p1, p2, ratio = f'{p1:.2f}', f'{p2:.2f}', f'{p1 / p2:.2f}x'
      print(f'| {name} | {mode} | {w1:.2f} / {j1:.2f} / {p1} | {w2:.2f} / '
            f'{j2:.2f} / {p2} | {w1 / w2:.2f}x / {j1 / j2:.2f}x / {ratio} | '
            f'{m1:.0f} / {m2:.0f} |')
  print('\nShard-writing phase of every run, s (1 worker | 2 workers):')
  for (name, mode, workers), runs in sorted(results.items()):
    if workers == 1 and runs[0][3] is not None:
      print(f'- {name}, {mode}: {[r[3] for r in runs]} | '
            f'{[r[3] for r in results[(name, mode, 2)]]}')
  if ceilings:
    print('\nMachine ceiling, 2 processes vs 1 on the same work, measured '
          f'between the runs above ({len(ceilings)} times), median: pure '
          f'Python {statistics.median(c["python"] for c in ceilings):.2f}x, '
          f'numpy STFT {statistics.median(c["stft"] for c in ceilings):.2f}x '
          '(bench/ceiling.py)')


if __name__ == '__main__':
  main()
