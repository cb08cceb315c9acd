"""The wavbeam benchmark: `make bench` (python -m bench.run).

Generates deterministic corpora (4 classes, 16 kHz int16 mono): long files
of 20 to 120 s (1 h and 4 h of audio), and many short clips (4 h in 4,800
clips of 3 s; 20,000 clips of 1 s). Then runs every writer as its own
process, interleaved (each round runs every writer once), `--repeats`
times (default 5), and reports medians with their spread (min-max over the
rounds): audio-seconds per wall second (of the corpus, and of the audio
the examples hold), windows/s, MB/s written, peak memory summed over the
process tree (RSS and PSS), and the ratios to `baseline` (the plain loop
a typical user writes, 1 process, TensorFlow imported) and to
`baseline_notf_nproc` (the same loop and bytes without TensorFlow, a
process per usable CPU: the fastest honest peer). Each writer's fixed
cost is its wall time on a one-file corpus, run beside it every round
(timed alone, without the memory sampling); its rate once running, the
corpus's audio over its wall time less that. Wall time is the whole
process (start-up and imports included), as a user experiences it; for
wavbeam it is split into before the first shard
(start-up, listing, probing, planning), the shard phase, and after the last
shard (final step, shutdown), from metadata.json's `shards_written`. Then
reading speed. Window 32768 (16000 for the 1 s clips), hop = window,
spectrogram n_fft 512 hop 256.
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import soundfile as sf

from bench.procmon import as_installed, run_measured
from pipeline.commands import example_corpus
from transforms.runtime import cpus

ROOT = os.path.join('scratch', 'bench')
PY = sys.executable


# name: (total seconds, clip seconds or None for 20-120 s files, window,
# audio format)
CORPORA = {
    '1h': (3600, None, 32768, 'wav'),
    '4h': (4 * 3600, None, 32768, 'wav'),
    'clips3s': (4 * 3600, 3, 32768, 'wav'),
    'clips1s': (20000, 1, 16000, 'wav'),
    # Not in `make bench`: the speed targets' long corpus, and
    # bench.append's large case.
    '16h': (16 * 3600, None, 32768, 'wav'),
    '40h': (40 * 3600, None, 32768, 'wav'),
    # Compressed clips, as Common Voice (MP3) and LibriSpeech (FLAC) ship
    # them (not in `make bench`; --corpora mp3clips5s,flacclips5s).
    'mp3clips5s': (20000, 5, 16000, 'mp3'),
    'flacclips5s': (20000, 5, 16000, 'flac'),
  # One 4 s file: a writer's fixed cost, command to exit (every bench
  # corpus's writers also run on it).
  'one_file': (4, 4, 32768, 'wav'),
}
DEFAULT_CORPORA = '1h,4h,clips3s,clips1s'


def writers(corpus, out, win_len=32768, audio_format='wav'):
  whole = [PY, '-m', 'pipeline.run', '--input_dir', corpus, '--output_dir',
           out, '--overwrite', '--audio_formats', audio_format]
  base = whole + ['--win_len', str(win_len)]
  baseline = [PY, '-m', 'bench.baseline_numpy', corpus, out, '--win_len',
              str(win_len), '--audio_format', audio_format]
  notf = [PY, '-m', 'bench.baseline_notf', corpus, out, '--win_len',
          str(win_len), '--audio_format', audio_format]
  return {
      'wavbeam': base,
      'wavbeam_1worker': base + ['--direct_num_workers=1'],
      # The memory of a 16-core machine's forked workers, on any machine:
      # the count follows --direct_num_workers, not the cores.
      'wavbeam_16workers': base + ['--direct_num_workers=16'],
      'wavbeam_threads': base + ['--direct_num_workers=2',
                                 '--direct_running_mode=multi_threading'],
      'wavbeam_noshuffle': base + ['--no_shuffle'],
      # One example per recording (corpora of clips: a clip is one window).
      'wavbeam_file': whole + ['--example_unit', 'file'],
      # Its window counterpart on 3 s clips: each whole clip as one
      # window, the same audio per example as wavbeam_file.
      'wavbeam_win48k': whole + ['--win_len', '48000'],
      # And in windows of 1 s: all of a 3 s clip's audio, in 3 examples.
      'wavbeam_win16k': whole + ['--win_len', '16000'],
      'wavbeam_2proc': base + ['--direct_num_workers=2',
                               '--direct_running_mode=multi_processing'],
      # The specified shape: Beam's file-based sink, runner-chosen shards.
      'wavbeam_sink': base + ['--sink', 'write_to_tfrecord'],
      'wavbeam_sink_2proc': base + ['--sink', 'write_to_tfrecord',
                                    '--direct_num_workers=2',
                                    '--direct_running_mode=multi_processing'],
      # Beam's Prism runner (`make prism`): the portable path, on one
      # machine.
      'wavbeam_prism': base + ['--runner=PrismRunner', '--prism_location='
                               + os.path.join(os.path.dirname(PY), 'prism')],
      'baseline': baseline,
      'baseline_2proc': baseline + ['--procs', '2'],
      # The fastest honest peer: the same loop and bytes without
      # TensorFlow's import, in 1 and in one process per usable CPU.
      'baseline_notf': notf,
      'baseline_notf_nproc': notf + ['--procs', str(cpus.usable_cpus())],
      'tfdata_seed': [PY, '-m', 'bench.baseline_tfdata', corpus, out],
  }


def corpus_for(name):
  """(path, audio seconds, windows, window length) of a bench corpus; a
  number alone is hours of long files."""
  if name not in CORPORA:
    hours = float(name)
    name = f'{hours:g}h'
  total, clip, win_len, audio_format = (
      CORPORA.get(name) or (hours * 3600, None, 32768, 'wav'))
  path = os.path.join(ROOT, f'corpus_{name}')
  if not os.path.isdir(path):
    if clip is None:
      example_corpus.write_corpus(path + '.tmp', total,
                                  seed=int(total // 3600))
    else:
      example_corpus.write_corpus(path + '.tmp', total, min_seconds=clip,
                                  max_seconds=clip, seed=int(100 + clip),
                                  audio_format=audio_format)
    os.rename(path + '.tmp', path)
  seconds, windows = 0.0, 0
  for r, _, files in os.walk(path):
    for f in files:
      info = sf.info(os.path.join(r, f))
      seconds += info.frames / info.samplerate
      windows += info.frames // win_len
  return path, seconds, windows, win_len


def dir_bytes(path):
  return sum(os.path.getsize(os.path.join(r, f))
             for r, _, fs in os.walk(path) for f in fs)


def metadata(out):
  """A wavbeam output's metadata.json, or None (other writers)."""
  try:
    with open(os.path.join(out, 'metadata.json')) as f:
      return json.load(f)
  except (OSError, ValueError):
    return None


def phases(meta, started, wall):
  """(before the first shard, shard phase, after the last shard) in
  seconds, from metadata.json's shards_written; None for other writers,
  and for a run that wrote no shard."""
  written = (meta or {}).get('shards_written')
  if written is None:
    return None
  first = datetime.datetime.fromisoformat(written['first_started'])
  before = first.timestamp() - started
  return (before, written['seconds'], wall - before - written['seconds'])


def example_seconds(meta):
  """Audio-seconds held in the written examples (their signals' samples,
  from metadata.json's statistics), or None: a window mode drops a
  recording's tail shorter than a window; a file mode keeps it."""
  try:
    samples = sum(split['statistics']['signal']['count']
                  for split in meta['splits'].values())
    return samples / meta['sample_rate']
  except (KeyError, TypeError):
    return None


def spread(values):
  """(median, min, max) of some measurements."""
  values = list(values)
  return (statistics.median(values), min(values), max(values))


def cell(s, digits=2, unit=''):
  """A spread as `median (min-max)`."""
  median, low, high = s
  return (f'{median:.{digits}f}{unit} ({low:.{digits}f}-{high:.{digits}f}'
          f'{unit})')


def audio_format_of(name):
  return CORPORA[name][3] if name in CORPORA else 'wav'


def _cleared(out):
  """Removes `out`, then flushes the previous writer's dirty pages and
  deletes (this disk is mounted with discard) so they are not billed to
  the next writer."""
  shutil.rmtree(out, ignore_errors=True)
  os.sync()
  time.sleep(1.0)


def warm_page_cache(corpus):
  """Reads every file of `corpus` (untimed), so that each contender reads
  it from memory: the 16 h corpus is 1.8 GB, and the 7 GB a writer
  writes push it out of the page cache, leaving the next contender the
  disk."""
  for root, _, files in os.walk(corpus):
    for name in files:
      with open(os.path.join(root, name), 'rb', buffering=0) as f:
        while f.read(1 << 22):
          pass


def _measured(command, out, env, corpus=None):
  _cleared(out)
  if corpus is not None:
    warm_page_cache(corpus)
  started = time.time()
  wall, peak, _, pss = run_measured(command, env=env, pss=True)
  return started, wall, peak, pss


def _timed(command, out, env):
  """Whole-process wall seconds of `command`, its output thrown away."""
  _cleared(out)
  started = time.perf_counter()
  subprocess.run(command, env=as_installed(env), check=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  return time.perf_counter() - started


def bench_writers(corpus_name, repeats, names, env):
  corpus, seconds, windows, win_len = corpus_for(corpus_name)
  one_file = corpus_for('one_file')[0]
  audio_format = audio_format_of(corpus_name)
  out = os.path.join(ROOT, 'out')
  runs = {n: [] for n in names}
  fixed = {n: [] for n in names}
  for _ in range(repeats):
    for name in names:  # interleaved: machine noise hits every contender
      started, wall, peak, pss = _measured(
          writers(corpus, out, win_len, audio_format)[name], out, env,
          corpus)
      meta = metadata(out)
      runs[name].append((wall, peak, dir_bytes(out),
                         phases(meta, started, wall), example_seconds(meta),
                         pss))
      # Its fixed cost: the same command on a one-file corpus, timed
      # alone (no memory sampling beside it).
      fixed[name].append(_timed(writers(one_file, out, win_len)[name],
                                out, env))
  rows = {}
  for name, rs in runs.items():
    wall = statistics.median(r[0] for r in rs)
    rows[name] = {'wall_s': wall, 'wall_spread': spread(r[0] for r in rs),
                  'audio_s_per_s': seconds / wall,
                  'windows_per_s': windows / wall,
                  'mb_per_s': statistics.median(r[2] for r in rs) / wall / 1e6,
                  'peak_mb': statistics.median(r[1] for r in rs) / 1e6,
                  'peak_spread': spread(r[1] / 1e6 for r in rs),
                  'pss_spread': (spread(r[5] / 1e6 for r in rs)
                                 if all(r[5] for r in rs) else None),
                  'walls': [round(r[0], 2) for r in rs]}
    if all(r[3] for r in rs):
      rows[name]['phases'] = [spread(r[3][i] for r in rs) for i in range(3)]
    if all(r[4] for r in rs):
      rows[name]['example_audio_s_per_s'] = rs[0][4] / wall
    rows[name]['fixed_spread'] = spread(fixed[name])
    # Once running: the corpus's audio over the time past the fixed cost.
    running = wall - statistics.median(fixed[name])
    rows[name]['steady_audio_s_per_s'] = (seconds / running if running > 0
                                          else None)
  for base_name, key in (('baseline', 'ratio'),
                         ('baseline_notf_nproc', 'ratio_notf')):
    if base_name not in rows:
      continue
    base = [r[0] for r in runs[base_name]]
    for name, row in rows.items():
      row[key] = rows[base_name]['wall_s'] / row['wall_s']
      # Round by round: the baseline and the writer ran side by side.
      row[key + '_spread'] = spread(
          b / r[0] for b, r in zip(base, runs[name]))
  return {'corpus': corpus_name, 'audio_seconds': seconds,
          'windows': windows, 'files': sum(len(f) for _, _, f in
                                           os.walk(corpus)),
          'writers': rows}


def bench_reading(corpus_name, repeats, env):
  corpus, _, _, _ = corpus_for(corpus_name)
  out = os.path.join(ROOT, 'read_out')
  run_measured(writers(corpus, out)['wavbeam'], env=env)
  _, _, stdout = run_measured([PY, '-m', 'bench.read_bench', out,
                               str(repeats)], env=env)
  result = json.loads(stdout.strip().splitlines()[-1])
  return result


def to_markdown(results, reading):
  lines = []
  for r in results:
    lines.append(f"\n### {r['corpus']}: {r['files']} files, "
                 f"{r['audio_seconds']:.0f} audio-s, {r['windows']} windows"
                 "\n")
    lines.append('| writer | wall s, median (min-max) | audio-s/s | '
                 'fixed cost s (one file) | audio-s/s once running | '
                 'audio-s/s in examples | windows/s | MB/s written | '
                 'peak MB (all processes): RSS; PSS | '
                 'vs TF loop, per round | '
                 'vs TF-free loop in N processes, per round | '
                 'before shards / shards / after, s | runs |')
    lines.append('|---|---|---|---|---|---|---|---|---|---|---|---|---|')
    for name, w in r['writers'].items():
      split = ' / '.join(cell(x) for x in w['phases']) \
          if 'phases' in w else ''
      ratios = [cell(w[key + '_spread'], unit='x')
                if key + '_spread' in w else ''
                for key in ('ratio', 'ratio_notf')]
      in_examples = w.get('example_audio_s_per_s')
      in_examples = '' if in_examples is None else f'{in_examples:.0f}'
      steady = w.get('steady_audio_s_per_s')
      steady = '' if steady is None else f'{steady:.0f}'
      lines.append(
          f"| {name} | {cell(w['wall_spread'])} | "
          f"{w['audio_s_per_s']:.0f} | {cell(w['fixed_spread'])} | "
          f"{steady} | {in_examples} | "
          f"{w['windows_per_s']:.0f} | "
          f"{w['mb_per_s']:.0f} | {cell(w['peak_spread'], 0)}; "
          f"{cell(w['pss_spread'], 0) if w.get('pss_spread') else '-'} | "
          f"{ratios[0]} | {ratios[1]} | {split} | {w['walls']} |")
  if reading:
    lines.append('\n### Reading (batch 64, all features, page cache)\n')
    lines.append('| reader | examples/s (median) | vs hand-written | '
                 'vs TFDS |')
    lines.append('|---|---|---|---|')
    hand = reading['hand_written']['examples_per_s']
    tfds = reading['tfds_as_dataset']['examples_per_s']
    for name in ('replay_dataset', 'replay_dataset_tf', 'hand_written',
                 'tfds_as_dataset'):
      eps = reading[name]['examples_per_s']
      lines.append(f'| {name} | {eps:.0f} | {eps / hand:.2f}x | '
                   f'{eps / tfds:.2f}x |')
  return '\n'.join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--corpora', default=DEFAULT_CORPORA,
                      help=f'from {", ".join(CORPORA)} (default: '
                      f'{DEFAULT_CORPORA})')
  parser.add_argument('--repeats', type=int, default=5,
                      help='rounds, each running every writer once '
                      '(default 5)')
  parser.add_argument('--writers', default='wavbeam,wavbeam_sink,'
                      'baseline,baseline_notf,baseline_notf_nproc')
  parser.add_argument('--no_reading', action='store_true')
  args = parser.parse_args(argv)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  names = args.writers.split(',')
  results = [bench_writers(c, args.repeats, names, env)
             for c in args.corpora.split(',')]
  reading = None if args.no_reading else bench_reading('1h', args.repeats,
                                                       env)
  os.makedirs(ROOT, exist_ok=True)
  with open(os.path.join(ROOT, 'results.json'), 'w') as f:
    json.dump({'writers': results, 'reading': reading}, f, indent=2)
  print(to_markdown(results, reading))


if __name__ == '__main__':
  main()
