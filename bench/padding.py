"""How much of a batch of whole utterances is padding, with and without
bucketing by length.

    .venv/bin/python -m bench.padding [--utterances 400] [--batch_size 16]

Writes a corpus of utterances of 1-15 s (uniform lengths, 16 kHz mono
PCM, seeded), turns it into a dataset with `--example_unit file
--features signal,log_mel`, then reads its log_mel through
replay_dataset in batches of --batch_size: once in plain batches
(shuffled, as training reads them), once with bucket_boundaries every
second (in frames). Reports, for each, the padded fraction: the share of
the batches' frames that are padding, 1 - sum(lengths) / sum(batch
longest * batch size). The PyTorch side's LengthGroupedBatchSampler is
measured on the same lengths.
"""

import argparse
import os
import shutil
import tempfile

import numpy as np
import soundfile as sf

RATE = 16000
FFT_HOP = 256


def write_corpus(folder: str, utterances: int, seed: int = 0):
  rng = np.random.default_rng(seed)
  for i in range(utterances):
    n = int(rng.uniform(1.0, 15.0) * RATE)
    samples = (rng.standard_normal(n) * 0.1).clip(-1, 1)
    sf.write(os.path.join(folder, f'u{i:05d}.wav'), samples, RATE,
             subtype='PCM_16')


def padded_fraction(batches) -> float:
  real = padded = 0
  for lengths in batches:
    lengths = np.asarray(lengths)
    real += int(lengths.sum())
    padded += int(lengths.max()) * len(lengths)
  return 1 - real / padded


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--utterances', type=int, default=400)
  parser.add_argument('--batch_size', type=int, default=16)
  parser.add_argument('--work', help='folder for the corpus and dataset '
                      '(default: a temporary one, removed after)')
  args = parser.parse_args(argv)
  from pipeline.readers import tf_dataset as replay
  from pipeline.commands import run as run_lib
  from pipeline.readers.torch_dataset import LengthGroupedBatchSampler

  work = args.work or tempfile.mkdtemp(prefix='wavbeam-padding-')
  corpus, out = os.path.join(work, 'corpus'), os.path.join(work, 'out')
  try:
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(corpus, exist_ok=True)
    if not os.listdir(corpus):
      write_corpus(corpus, args.utterances)
    run_lib.run(['--input_dir', corpus, '--output_dir', out,
                 '--label_from', 'none', '--example_unit', 'file',
                 '--features', 'signal,log_mel', '--fft_hop', str(FFT_HOP),
                 '--max_seconds', '16', '--quiet'])
    frames_per_second = RATE // FFT_HOP
    boundaries = [s * frames_per_second for s in range(2, 15)]
    results = {}
    for name, extra in (('plain batches', {}),
                        ('bucketed (tf.data)',
                         {'bucket_boundaries': boundaries})):
      ds = replay.replay_dataset(out, batch_size=args.batch_size,
                                 features=['log_mel'], shuffle=True, seed=0,
                                 **extra)
      results[name] = padded_fraction(
          b['log_mel_length'].numpy() for b in ds)
    lengths = [int(e['log_mel'].shape[0])
               for e in replay.replay_dataset(out, features=['log_mel'])]
    sampler = LengthGroupedBatchSampler(lengths, args.batch_size, seed=0)
    results['length-grouped (PyTorch sampler)'] = padded_fraction(
        [lengths[i] for i in batch] for batch in sampler)
    print(f'{args.utterances} utterances of 1-15 s, batches of '
          f'{args.batch_size}, log_mel frames:')
    for name, fraction in results.items():
      print(f'  {name:34s} padded fraction {fraction:6.1%}')
    return results
  finally:
    if not args.work:
      shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
  main()
