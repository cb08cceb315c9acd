"""Duration batches against Lhotse's DynamicBucketingSampler, on the same
segments of one long recording.

    .venv/bin/python -m bench.duration_batches [--minutes 60] [--repeats 5]
        [--max_duration 60]

Writes a recording of --minutes at 16 kHz (seeded noise) and a manifest
of back-to-back segments of 0.5-15 s (uniform, seeded), then prepares the
same 80-band log-mel frames (25 ms windows, 10 ms hop) both ways:

- wavbeam: one run, `--example_unit segment --features log_mel`; read
  with `numpy_dataset(..., max_duration=, shuffle=True)`.
- Lhotse: the recording and supervisions as a CutSet cut to the
  segments, Fbank features computed and stored uncompressed, a .npy file
  per cut (NumpyFilesWriter: no decompression, its fastest storage that
  needs no other package; the recipes' lilcom storage decompresses on
  reading); read with DynamicBucketingSampler(max_duration=,
  shuffle=True, num_buckets=10) and `collate_features`, which loads and
  pads each batch.

Both in one process, no workers, each epoch after a first that warms the
page cache; the rounds interleave the two. Reports per reader the padded
share of a batch's frames (1 - sum of lengths / (count x longest)), its
mean over the epochs (each epoch its own seed),
batches per epoch, and examples/s (median, min-max), with the ratio.
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time

import numpy as np
import soundfile as sf

from bench.padding import padded_fraction

RATE = 16000
HOP = 160


def write_corpus(folder: str, minutes: float, seed: int = 0):
  """The recording and its segments' (start, end) in seconds."""
  rng = np.random.default_rng(seed)
  frames = int(minutes * 60 * RATE)
  samples = (rng.standard_normal(frames) * 0.1).clip(-1, 1)
  sf.write(os.path.join(folder, 'long.wav'), samples, RATE,
           subtype='PCM_16')
  segments, t = [], 0.0
  while True:
    length = round(float(rng.uniform(0.5, 15.0)), 3)
    if t + length > frames / RATE:
      break
    segments.append((round(t, 3), round(t + length, 3)))
    t += length
  return segments


def wavbeam_epoch(out: str, max_duration: float, seed: int):
  from pipeline.readers import numpy_dataset as numpy_reader
  lengths, examples = [], 0
  for batch in numpy_reader.numpy_dataset(
      out, features=['log_mel'], max_duration=max_duration, shuffle=True,
      seed=seed):
    lengths.append(batch['log_mel_length'])
    examples += len(batch['log_mel_length'])
  return lengths, examples


def lhotse_epoch(cuts, max_duration: float, seed: int):
  from lhotse.dataset import DynamicBucketingSampler
  from lhotse.dataset.collation import collate_features
  sampler = DynamicBucketingSampler(cuts, max_duration=max_duration,
                                    shuffle=True, num_buckets=10, seed=seed)
  lengths, examples = [], 0
  for batch in sampler:
    features, lens = collate_features(batch)
    lengths.append(lens.numpy())
    examples += len(lens)
  return lengths, examples


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--minutes', type=float, default=60)
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--max_duration', type=float, default=60.0)
  parser.add_argument('--work', help='folder for the corpus and datasets '
                      '(default: a temporary one, removed after)')
  args = parser.parse_args(argv)
  import lhotse
  from pipeline.commands import run as run_lib

  work = args.work or tempfile.mkdtemp(prefix='wavbeam-duration-')
  corpus = os.path.join(work, 'corpus')
  out = os.path.join(work, 'wavbeam')
  try:
    os.makedirs(corpus, exist_ok=True)
    segments = write_corpus(corpus, args.minutes)
    with open(os.path.join(work, 'segments.csv'), 'w') as f:
      f.write('path,start,end\n')
      f.writelines(f'long.wav,{a},{b}\n' for a, b in segments)
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    run_lib.run(['--input_dir', corpus, '--output_dir', out,
                 '--manifest', os.path.join(work, 'segments.csv'),
                 '--manifest_start_column', 'start',
                 '--manifest_end_column', 'end', '--label_from', 'none',
                 '--example_unit', 'segment', '--features', 'log_mel',
                 '--n_fft', '400', '--fft_hop', str(HOP), '--n_mels', '80',
                 '--max_seconds', '16', '--quiet'])
    prepared = {'wavbeam': time.perf_counter() - started}

    started = time.perf_counter()
    recording = lhotse.Recording.from_file(os.path.join(corpus, 'long.wav'),
                                           recording_id='long')
    supervisions = lhotse.SupervisionSet.from_segments(
        lhotse.SupervisionSegment(f's{i}', 'long', a, round(b - a, 3))
        for i, (a, b) in enumerate(segments))
    cuts = lhotse.CutSet.from_manifests(
        recordings=lhotse.RecordingSet.from_recordings([recording]),
        supervisions=supervisions).trim_to_supervisions(
            keep_overlapping=False).to_eager()
    cuts = cuts.compute_and_store_features(
        lhotse.Fbank(lhotse.FbankConfig(num_mel_bins=80)),
        storage_path=os.path.join(work, 'lhotse_feats'),
        storage_type=lhotse.NumpyFilesWriter, num_jobs=1).to_eager()
    prepared['lhotse'] = time.perf_counter() - started

    readers = {'wavbeam': lambda seed: wavbeam_epoch(out, args.max_duration,
                                                     seed),
               'lhotse': lambda seed: lhotse_epoch(cuts, args.max_duration,
                                                   seed)}
    times = {name: [] for name in readers}
    padding = {name: [] for name in readers}
    found = {}
    for name, read in readers.items():  # warms the page cache
      found[name] = read(0)
    for round_ in range(args.repeats):
      for name, read in readers.items():
        started = time.perf_counter()
        found[name] = read(round_ + 1)  # an epoch of its own seed
        times[name].append(time.perf_counter() - started)
        padding[name].append(padded_fraction(found[name][0]))
    print(f'{len(segments)} segments of 0.5-15 s of a {args.minutes:g}-'
          f'minute recording, 80-band log-mel frames (10 ms), '
          f'max_duration={args.max_duration:g} s, {args.repeats} repeats:')
    rates = {}
    for name in readers:
      lengths, examples = found[name]
      rates[name] = [examples / t for t in times[name]]
      pads = padding[name]
      print(f'  {name:8s} prepared in {prepared[name]:6.1f} s; padded '
            f'fraction {statistics.mean(pads):6.1%} mean over the epochs '
            f'({min(pads):.1%}-{max(pads):.1%}), {len(lengths)} '
            f'batches per epoch, {statistics.median(rates[name]):8.0f} '
            f'examples/s ({min(rates[name]):.0f}-{max(rates[name]):.0f})')
    ratios = [w / h for w, h in zip(rates['wavbeam'], rates['lhotse'])]
    print(f'  wavbeam / lhotse examples/s: {statistics.median(ratios):.2f}x '
          f'({min(ratios):.2f}-{max(ratios):.2f}), paired by round')
    return found, rates
  finally:
    if not args.work:
      shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
  main()
