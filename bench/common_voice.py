"""A Common-Voice-shaped corpus in file mode, checked example by example.

    .venv/bin/python -m bench.common_voice [--utterances 2000] [--work DIR]

Writes utterances of 1-10 s (16 kHz mono 16-bit PCM, seeded) by a few
hundred speakers, and a TSV as Common Voice ships it (`path`,
`sentence`, `client_id`, `up_votes`; sentences with quote marks, tabs
never). Runs `wavbeam run --example_unit file --manifest validated.tsv
--manifest_extra_columns sentence,client_id --split_by client_id
--splits train=0.8,validation=0.1,test=0.1` as a separate process and
checks what it wrote against the corpus, independently:

- every utterance is one example; its signal equals the file's int16
  samples bit for bit, and `num_samples` their number;
- every example carries its row's transcript and speaker;
- no speaker is in two splits, and every split has examples.

Prints the run's wall time and audio seconds per second. Exits 1 when a
check fails.
"""

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import soundfile as sf

RATE = 16000
WORDS = ('the', 'quick', 'brown', 'fox', "don't", 'say', '"hello"', 'to',
         'everyone', 'at', 'nine', 'o\'clock', 'again')


def write_corpus(folder: str, utterances: int, seed: int = 0) -> float:
  """The clips and validated.tsv; returns the audio's seconds."""
  rng = np.random.default_rng(seed)
  speakers = max(2, utterances // 8)
  os.makedirs(os.path.join(folder, 'clips'), exist_ok=True)
  seconds = 0.0
  with open(os.path.join(folder, 'validated.tsv'), 'w', newline='',
            encoding='utf-8') as f:
    # Common Voice's TSVs quote nothing: cells are joined as they are.
    f.write('client_id\tpath\tsentence\tup_votes\n')
    for i in range(utterances):
      n = int(rng.uniform(1.0, 10.0) * RATE)
      seconds += n / RATE
      samples = (rng.standard_normal(n) * 3000).clip(-32768, 32767)
      name = f'common_voice_en_{i:07d}.wav'
      sf.write(os.path.join(folder, 'clips', name),
               samples.astype(np.int16), RATE, subtype='PCM_16')
      words = rng.choice(WORDS, size=int(rng.integers(2, 9)))
      f.write(f'{int(rng.integers(speakers)):064x}\t{name}\t'
              f'{" ".join(words).capitalize()}.\t'
              f'{int(rng.integers(0, 5))}\n')
  return seconds


def read_rows(folder: str):
  with open(os.path.join(folder, 'validated.tsv'), newline='',
            encoding='utf-8') as f:
    return {row['path']: row for row in csv.DictReader(
        f, delimiter='\t', quoting=csv.QUOTE_NONE)}


def check(corpus: str, out: str) -> list:
  """Failed checks, as messages (empty: every check holds)."""
  import json
  from pipeline.readers import numpy_dataset as numpy_reader
  rows = read_rows(corpus)
  failures, seen, speaker_splits = [], set(), {}
  with open(os.path.join(out, 'metadata.json'), encoding='utf-8') as f:
    splits = json.load(f)['splits']
  for split, entry in splits.items():
    if not entry['num_examples']:
      failures.append(f'split {split} is empty')
    for e in numpy_reader.numpy_dataset(out, split):
      name = os.path.basename(str(e['filepath']))
      row = rows.get(name)
      if row is None or name in seen:
        failures.append(f'{name}: unexpected or repeated')
        continue
      seen.add(name)
      samples, _ = sf.read(os.path.join(corpus, 'clips', name),
                           dtype='int16')
      if (e['signal'].dtype != np.int16 or
          not np.array_equal(e['signal'], samples) or
          int(e['num_samples']) != len(samples)):
        failures.append(f'{name}: signal differs from the file')
      if e['sentence'] != row['sentence'] or e['client_id'] != row[
          'client_id']:
        failures.append(f'{name}: transcript or speaker differs')
      speaker_splits.setdefault(row['client_id'], set()).add(split)
  if seen != set(rows):
    failures.append(f'{len(set(rows) - seen)} utterances have no example')
  shared = [s for s, v in speaker_splits.items() if len(v) > 1]
  if shared:
    failures.append(f'{len(shared)} speakers are in two splits')
  return failures


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--utterances', type=int, default=2000)
  parser.add_argument('--work', help='folder for the corpus and dataset '
                      '(default: a temporary one, removed after; a corpus '
                      'already there is reused)')
  args = parser.parse_args(argv)
  work = args.work or tempfile.mkdtemp(prefix='wavbeam-cv-')
  corpus, out = os.path.join(work, 'corpus'), os.path.join(work, 'out')
  try:
    if not os.path.exists(os.path.join(corpus, 'validated.tsv')):
      write_corpus(corpus, args.utterances)
    seconds = sum(float(sf.info(os.path.join(corpus, 'clips', name)).duration)
                  for name in read_rows(corpus))
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, '-m', 'pipeline.run', '--input_dir',
         os.path.join(corpus, 'clips'), '--output_dir', out,
         '--manifest', os.path.join(corpus, 'validated.tsv'),
         '--manifest_extra_columns', 'sentence,client_id',
         '--split_by', 'client_id',
         '--splits', 'train=0.8,validation=0.1,test=0.1',
         '--label_from', 'none', '--example_unit', 'file',
         '--signal_dtype', 'int16', '--features', 'signal,log_mel',
         '--max_seconds', '11', '--quiet'], check=True)
    wall = time.perf_counter() - started
    failures = check(corpus, out)
    print(f'{len(read_rows(corpus))} utterances, {seconds:.0f} s of audio: '
          f'written in {wall:.1f} s ({seconds / wall:,.0f} audio-s/s); '
          f'{"every check holds" if not failures else "FAILED"}')
    for failure in failures[:20]:
      print(f'  {failure}')
    return 1 if failures else 0
  finally:
    if not args.work:
      shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
  sys.exit(main())
