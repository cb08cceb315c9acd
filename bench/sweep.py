"""What a feature sweep (--variants) costs against separate runs.

    .venv/bin/python -m bench.sweep [--corpora 4h,clips3s] [--repeats 3]
        [--sweep nfft|mel|mels] [--output_root /dev/shm]

For each bench corpus (bench.run's): a sweep as one `wavbeam run
--variants`, against the same datasets written by separate runs, one
after the other. `--sweep nfft`: spectrograms of n_fft 256, 512, 1024
and 2048, each with fft_hop n_fft / 2 (4 x 1.8 GB on 4h); `--sweep mel`:
log_mel of 64 and of 128 bands, log_mel + mfcc of 13 and of 20
coefficients (small outputs: the sweep's reading shared, its features
its own); `--sweep mels`: a search over one option, log_mel of 24 to 128
bands in steps of 8 (14 variants). Each run is its own process, timed
until its output is on disk (the run, then a sync), peak memory summed
over the process tree (the largest of the separate runs'); contenders
interleaved, medians
and spread of `--repeats` rounds, and the ratio sweep / separate per round.

The bound a sweep that reads once should meet: the fastest separate run
plus, for each other variant, its own work in that run (features,
encoding and writing: metadata.json's shards_written, summed over the
shard tasks, over the run's worker processes).
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import time

from bench.procmon import run_measured
from bench.run import ROOT, corpus_for, warm_page_cache
from transforms.runtime import cpus

N_FFTS = (256, 512, 1024, 2048)
SWEEPS = {
    'nfft': {f'nfft{n}': {'n_fft': n, 'fft_hop': n // 2} for n in N_FFTS},
    'mel': {'mel64': {'features': 'log_mel', 'n_mels': 64},
            'mel128': {'features': 'log_mel', 'n_mels': 128},
            'mfcc13': {'features': 'log_mel,mfcc', 'n_mfcc': 13},
            'mfcc20': {'features': 'log_mel,mfcc', 'n_mfcc': 20}},
    # A search over one option: what a sweep of many variants costs.
    'mels': {f'mel{n}': {'features': 'log_mel', 'n_mels': n}
             for n in range(24, 129, 8)},
}
PY = sys.executable


def variants_file(path, sweep='nfft'):
  with open(path, 'w') as f:
    json.dump(SWEEPS[sweep], f)
  return path


def as_flags(options):
  return [f'--{key}={value}' for key, value in options.items()]


def own_work_seconds(dataset_dir):
  """A run's features, encoding and writing, summed over its shard tasks
  and divided by its worker processes: that work's wall-clock share."""
  with open(os.path.join(dataset_dir, 'metadata.json')) as f:
    written = json.load(f)['shards_written']
  busy = sum(written[key] for key in ('feature_seconds', 'encode_seconds',
                                      'write_seconds'))
  return busy / cpus.usable_cpus()


def _run(args, corpus):
  """(seconds until the run's output is on disk, peak memory). The sync
  is timed too: a run that writes less than the kernel's dirty-page
  threshold (a tenth of memory here) would otherwise leave its writing to
  whoever runs next, and a sweep writes four datasets' worth."""
  warm_page_cache(corpus)
  wall, peak, _ = run_measured([PY, '-m', 'pipeline.run', *args, '--quiet'])
  started = time.perf_counter()
  os.sync()
  return wall + time.perf_counter() - started, peak


def _fresh(path):
  shutil.rmtree(path, ignore_errors=True)
  os.sync()  # the last run's deletes and dirty pages are not billed here
  time.sleep(1.0)


def run_corpus(name, repeats, sweep='nfft', output_root=ROOT):
  """(audio seconds, [((sweep wall, peak), (separate walls' sum, largest
  peak), bound)] per round); the datasets written under output_root."""
  corpus, seconds, _, win_len = corpus_for(name)
  work = os.path.join(ROOT, 'sweep')
  out = os.path.join(output_root, 'sweep_out')
  os.makedirs(work, exist_ok=True)
  spec = variants_file(os.path.join(work, 'variants.json'), sweep)
  common = ['--input_dir', corpus, '--win_len', str(win_len), '--overwrite']
  rounds = []
  for _ in range(repeats):
    _fresh(out)
    swept = _run([*common, '--output_dir', out, '--variants', spec], corpus)
    walls, own, separate_peak = [], [], 0
    for options in SWEEPS[sweep].values():
      _fresh(out)
      wall, peak = _run([*common, '--output_dir', out, *as_flags(options)],
                        corpus)
      walls.append(wall)
      own.append(own_work_seconds(out))
      separate_peak = max(separate_peak, peak)
    fastest = walls.index(min(walls))
    bound = walls[fastest] + sum(o for i, o in enumerate(own)
                                 if i != fastest)
    rounds.append((swept, (sum(walls), separate_peak), bound))
  shutil.rmtree(out, ignore_errors=True)
  return seconds, rounds


def _spread(values, fmt):
  return (f'{fmt(statistics.median(values))} '
          f'({fmt(min(values))}-{fmt(max(values))})')


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--corpora', default='4h,clips3s')
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--sweep', choices=sorted(SWEEPS), default='nfft')
  parser.add_argument('--output_root', default=ROOT,
                      help='where the datasets are written (default: '
                      f'{ROOT}, on disk); /dev/shm leaves the disk out, '
                      'as bench.stages can')
  args = parser.parse_args(argv)
  print(f'sweep {args.sweep}: ' + '; '.join(
      f'{name} {" ".join(as_flags(options))}'
      for name, options in SWEEPS[args.sweep].items()))
  count = len(SWEEPS[args.sweep])
  print(f'| corpus | {count} separate runs | sweep | sweep / separate | bound: '
        'fastest run + the others\' own work | sweep / bound | peak memory, '
        'one run | peak memory, sweep | memory ratio |')
  print('|---|---|---|---|---|---|---|---|---|')
  seconds = lambda v: f'{v:.1f} s'  # noqa: E731
  megabytes = lambda v: f'{v / 1e6:.0f} MB'  # noqa: E731
  ratio = lambda v: f'{v:.2f}x'  # noqa: E731
  for name in args.corpora.split(','):
    _, rounds = run_corpus(name, args.repeats, args.sweep,
                           args.output_root)
    sweep = [s for s, _, _ in rounds]
    separate = [p for _, p, _ in rounds]
    bounds = [b for _, _, b in rounds]
    print(f'| {name} | {_spread([w for w, _ in separate], seconds)} | '
          f'{_spread([w for w, _ in sweep], seconds)} | '
          f'{_spread([s[0] / p[0] for s, p, _ in rounds], ratio)} | '
          f'{_spread(bounds, seconds)} | '
          f'{_spread([s[0] / b for s, _, b in rounds], ratio)} | '
          f'{_spread([m for _, m in separate], megabytes)} | '
          f'{_spread([m for _, m in sweep], megabytes)} | '
          f'{_spread([s[1] / p[1] for s, p, _ in rounds], ratio)} |',
          flush=True)


if __name__ == '__main__':
  main()
