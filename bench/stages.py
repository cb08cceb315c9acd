"""Where the time goes: python -m bench.stages --corpora 1h,4h,clips3s,clips1s
--repeats 5.

For each bench corpus (bench.run's, generated on first use) it runs the
default job (bench.run's `wavbeam` writer, `python -m pipeline.run`) and
reports, per phase, seconds as median (min-max) over the rounds:

- wall-clock phases of the whole process, which add up to its wall time
  (transforms/runtime/timeline.py: the job marks them into $WAVBEAM_TIMELINE;
  start-up runs from this process's launch of it, the shard phase comes
  from metadata.json's shards_written, shutdown ends at its exit);
- the shard tasks' work, in seconds of task time summed over the tasks
  (metadata.json's shards_written: read_seconds, feature_seconds,
  encode_seconds, write_seconds; wall time of the task's thread, so time
  lost to other processes on the machine counts too), and their sum as a
  share of the shard phase's capacity (its wall time x the cores).

Beside each job it measures the features-only limit: the features of all
the corpus's windows (signal and STFT spectrogram, as the run computes
them: window_features.FeatureExtractor, a batch of compute_windows()
windows at a time) computed from memory by 2 processes at once, the files
dealt between them, with the shard tasks' allocator settings, reading
left out of the timing (each batch is copied into a buffer just before, as
a run computes a batch just read); in audio-seconds per second. Each
job's wall time and shard phase are given as a fraction of it (the limit's
seconds over theirs). Jobs and limits alternate, corpus by corpus, in
every round.

Beside both it measures the read+write floor: the same 2 processes read
the corpus's files (from page cache) and write as many bytes as the job's
shards hold, in records of the job's mean size, and compute nothing. The
limit plus the floor is the least two cores need for the features and the
bytes alone; the job's phases are given as a fraction of that too.
Before the job and the floor the corpus is read into the page cache
(untimed), as the limit's processes hold it in memory: each floor's
writes would otherwise leave the next job the disk.
Results: scratch/bench/stages.json and a table.
"""

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import time
from typing import Dict, List, Sequence

from bench import run as bench_run
from bench.procmon import run_measured
from transforms.runtime import timeline

WORK = ('read', 'feature', 'encode', 'write')
WORK_NAMES = {'read': 'decode', 'feature': 'features', 'encode': 'encode',
              'write': 'write'}
CORES = 2


def spread(values: Sequence[float]) -> Dict[str, float]:
  """{'median', 'min', 'max'} of some measurements."""
  values = list(values)
  return {'median': statistics.median(values), 'min': min(values),
          'max': max(values)}


def cell(s: Dict[str, float], digits: int = 2) -> str:
  """A spread as `median (min-max)`."""
  return (f"{s['median']:.{digits}f} ({s['min']:.{digits}f}-"
          f"{s['max']:.{digits}f})")


def deal(sizes: Sequence[int], parts: int) -> List[List[int]]:
  """Indices of `sizes` dealt into `parts` lists of near-equal totals,
  largest first, each to the part with the least so far."""
  dealt, totals = [[] for _ in range(parts)], [0] * parts
  for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
    least = totals.index(min(totals))
    dealt[least].append(i)
    totals[least] += sizes[i]
  return dealt


def fraction(limit_seconds: float, seconds: float) -> float:
  """How close a phase of `seconds` comes to the limit's time for the
  same audio: 1.0 runs at the limit."""
  return limit_seconds / seconds if seconds > 0 else float('nan')


def _audio_files(corpus: str) -> List[str]:
  return sorted(os.path.join(r, f) for r, _, fs in os.walk(corpus)
                for f in fs)


def _features_part(paths, win_len, barrier, queue):
  """One process of the limit: its files' windows read into memory, then
  (after the barrier, both processes together) their features computed;
  puts the seconds spent computing."""
  from pipeline import config as config_lib
  from transforms.runtime import allocator
  from transforms.inputs import audio
  from transforms.inputs import audio_io
  from transforms.features import extractor as window_features
  import numpy as np
  allocator.keep_freed_memory()  # as a shard task's process does
  config, _ = config_lib.parse_known_args(
      ['--input_dir', '.', '--output_dir', '.', '--win_len', str(win_len)])
  extractor = window_features.FeatureExtractor(config)
  step = window_features.compute_windows(win_len)
  parts, rates = [], set()
  with audio_io.OpenFiles() as files:
    for path in paths:
      info = audio_io.probe(0, path)[0]
      n = info.frames // win_len
      if n:
        # As a shard reads them: a mono 16-bit file's stored values
        # (extract.read_windows), other files' full-scale float64.
        rows = np.empty((n, win_len), np.int16)
        if not files.read_mono_into(path, 0, rows, info):
          rows = files.read_range(path, 0, n * win_len, info)[:, 0].reshape(
              n, win_len)
        parts.append(rows)
        rates.add(info.sample_rate)
  if len({p.dtype for p in parts}) > 1:  # a batch holds one kind
    parts = [audio.full_scale(p) for p in parts]
  # As in a shard: batches of `step` windows whatever their files.
  windows = np.concatenate(parts) if parts else np.empty((0, win_len))
  rate, = rates or {16000}
  # Each batch is copied into one buffer before it is timed: in the run a
  # batch is computed just after it is read, from the processor's cache.
  buffer = np.empty((step, win_len), windows.dtype)
  barrier.wait()
  spent = 0
  for i in range(0, len(windows), step):
    batch = buffer[:len(windows[i:i + step])]
    np.copyto(batch, windows[i:i + step])
    started = time.perf_counter_ns()
    extractor.compute(batch, rate)
    spent += time.perf_counter_ns() - started
  queue.put(spent / 1e9)


def _slower_part(corpus: str, part, *args) -> float:
  """The corpus's files dealt to CORES forked processes, each running
  `part(its paths, *args, barrier, queue)`: the slower one's seconds."""
  paths = _audio_files(corpus)
  parts = deal([os.path.getsize(p) for p in paths], CORES)
  context = multiprocessing.get_context('fork')
  barrier, queue = context.Barrier(CORES), context.Queue()
  workers = [context.Process(target=part,
                             args=([paths[i] for i in dealt], *args,
                                   barrier, queue)) for dealt in parts]
  for w in workers:
    w.start()
  spent = [queue.get() for _ in workers]
  for w in workers:
    w.join()
  return max(spent)


def features_limit(corpus: str, win_len: int) -> float:
  """Seconds 2 processes take to compute the features of all the corpus's
  windows from memory (the slower one's)."""
  return _slower_part(corpus, _features_part, win_len)


def _read_write_part(paths, record_bytes, num_records, folder, barrier,
                     queue):
  """One process of the floor: reads its files whole, writes its records
  of zeros to a file of its own; puts the seconds spent."""
  record = bytes(record_bytes)
  barrier.wait()
  started = time.perf_counter_ns()
  for path in paths:
    with open(path, 'rb') as f:
      while f.read(1 << 20):
        pass
  with open(os.path.join(folder, f'part-{os.getpid()}'), 'wb') as f:
    for _ in range(num_records):
      f.write(record)
  queue.put((time.perf_counter_ns() - started) / 1e9)


def read_write_floor(corpus: str, num_bytes: int, num_records: int,
                     output_root: str = bench_run.ROOT) -> float:
  """Seconds 2 processes take to read the corpus and write `num_bytes` in
  `num_records` records (the slower one's), under output_root."""
  folder = os.path.join(output_root, 'stages_floor')
  shutil.rmtree(folder, ignore_errors=True)
  os.makedirs(folder)
  os.sync()
  bench_run.warm_page_cache(corpus)
  try:
    return _slower_part(corpus, _read_write_part,
                        num_bytes // max(1, num_records),
                        num_records // CORES, folder)
  finally:
    shutil.rmtree(folder)


def job_round(corpus: str, win_len: int, env,
              output_root: str = bench_run.ROOT) -> dict:
  """One default run, timed whole, its dataset under output_root; its
  phases and the tasks' work."""
  out = os.path.join(output_root, 'stages_out')
  marks = os.path.abspath(os.path.join(bench_run.ROOT, 'stages.timeline'))
  shutil.rmtree(out, ignore_errors=True)
  if os.path.exists(marks):
    os.remove(marks)
  os.sync()  # the previous run's dirty pages are not billed to this one
  time.sleep(1.0)
  bench_run.warm_page_cache(corpus)
  started = time.time()
  wall, peak, _ = run_measured(bench_run.writers(corpus, out, win_len)
                               ['wavbeam'], env={**env, timeline.ENV: marks})
  with open(os.path.join(out, 'metadata.json')) as f:
    metadata = json.load(f)
  written = metadata['shards_written']
  shards = [s for split in metadata['splits'].values()
            for s in split['shards']]
  with open(marks) as f:
    events = timeline.parse(f)
  first = bench_run.phases(bench_run.metadata(out), started, wall)[0] + started
  shutil.rmtree(out)  # its space is the floor's (tmpfs is memory)
  return {'wall': wall, 'peak_mb': peak / 1e6,
          'bytes': sum(s['num_bytes'] for s in shards),
          'records': sum(s['num_examples'] for s in shards),
          'stages': timeline.stages(events, started, started + wall,
                                    (first, first + written['seconds'])),
          'work': {name: written[f'{name}_seconds'] for name in WORK}}


def summarize(corpus_name, audio_seconds, windows, files, jobs, limits,
              floors):
  """The rounds of one corpus -> medians and spreads."""
  shards = spread(j['stages']['shards'] for j in jobs)
  least = [s + f for s, f in zip(limits, floors)]
  return {
      'corpus': corpus_name, 'audio_seconds': audio_seconds,
      'windows': windows, 'files': files,
      'wall': spread(j['wall'] for j in jobs),
      'peak_mb': spread(j['peak_mb'] for j in jobs),
      'stages': {name: spread(j['stages'][name] for j in jobs)
                 for name in timeline.STAGES},
      'work': {name: spread(j['work'][name] for j in jobs) for name in WORK},
      'busy': spread(sum(j['work'].values()) /
                     (CORES * j['stages']['shards']) for j in jobs),
      'limit_seconds': spread(limits),
      'limit_audio_s_per_s': spread(audio_seconds / s for s in limits),
      # Each round's job against the limit measured beside it.
      'wall_of_limit': spread(fraction(s, j['wall'])
                              for j, s in zip(jobs, limits)),
      'shards_of_limit': spread(fraction(s, j['stages']['shards'])
                                for j, s in zip(jobs, limits)),
      'floor_seconds': spread(floors),
      'wall_of_least': spread(fraction(s, j['wall'])
                              for j, s in zip(jobs, least)),
      'shards_of_least': spread(fraction(s, j['stages']['shards'])
                                for j, s in zip(jobs, least)),
      'shards': shards, 'walls': [round(j['wall'], 2) for j in jobs]}


def to_markdown(results) -> str:
  lines = ['| corpus | whole process | ' + ' | '.join(timeline.STAGES) +
           ' |', '|---' * (len(timeline.STAGES) + 2) + '|']
  for r in results:
    lines.append(f"| {r['corpus']} | {cell(r['wall'])} | " + ' | '.join(
        cell(r['stages'][name]) for name in timeline.STAGES) + ' |')
  lines += ['', '| corpus | ' + ' | '.join(
      f'{WORK_NAMES[n]}, task-s' for n in WORK) + ' | busy in shard phase | '
            'features-only limit, audio-s/s | whole job / limit | '
            'shard phase / limit |', '|---' * 9 + '|']
  for r in results:
    lines.append(
        f"| {r['corpus']} | " + ' | '.join(cell(r['work'][n]) for n in WORK)
        + f" | {cell(r['busy'])} | {cell(r['limit_audio_s_per_s'], 0)} | "
        f"{cell(r['wall_of_limit'])} | {cell(r['shards_of_limit'])} |")
  lines += ['', '| corpus | limit, s | read+write floor, s | '
            'whole job / (limit + floor) | shard phase / (limit + floor) |',
            '|---' * 5 + '|']
  for r in results:
    lines.append(
        f"| {r['corpus']} | {cell(r['limit_seconds'])} | "
        f"{cell(r['floor_seconds'])} | {cell(r['wall_of_least'])} | "
        f"{cell(r['shards_of_least'])} |")
  return '\n'.join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--corpora', default=bench_run.DEFAULT_CORPORA,
                      help='bench.run corpora (default: '
                      f'{bench_run.DEFAULT_CORPORA})')
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--output_root', default=bench_run.ROOT,
                      help='where the jobs and the floor write (default: '
                      f'{bench_run.ROOT}); a tmpfs folder such as /dev/shm/x '
                      'leaves the disk out of both')
  args = parser.parse_args(argv)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  corpora = {}
  for name in args.corpora.split(','):
    path, seconds, windows, win_len = bench_run.corpus_for(name)
    corpora[name] = (path, seconds, windows, win_len,
                     len(_audio_files(path)))
  jobs = {name: [] for name in corpora}
  limits = {name: [] for name in corpora}
  floors = {name: [] for name in corpora}
  for round_number in range(args.repeats):
    for name, (path, _, _, win_len, _) in corpora.items():
      jobs[name].append(job_round(path, win_len, env, args.output_root))
      limits[name].append(features_limit(path, win_len))
      floors[name].append(read_write_floor(path, jobs[name][-1]['bytes'],
                                           jobs[name][-1]['records'],
                                           args.output_root))
      print(f'{round_number + 1}/{args.repeats} {name}: job '
            f'{jobs[name][-1]["wall"]:.2f} s, limit {limits[name][-1]:.2f} s,'
            f' floor {floors[name][-1]:.2f} s', file=sys.stderr)
  results = [summarize(name, seconds, windows, files, jobs[name],
                       limits[name], floors[name])
             for name, (_, seconds, windows, _, files) in corpora.items()]
  with open(os.path.join(bench_run.ROOT, 'stages.json'), 'w') as f:
    json.dump(results, f, indent=2)
  print(to_markdown(results))


if __name__ == '__main__':
  main()
