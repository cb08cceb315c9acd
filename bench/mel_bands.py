"""The mel product as log_mel computes it (bands in groups, each over only
the bins its triangles cover) against the product with the whole
filterbank, on a feature batch of the pipeline's (4 windows of 32768).

  OPENBLAS_NUM_THREADS=1 .venv/bin/python -m bench.mel_bands

One BLAS thread, as the run command sets. Contenders interleaved, 7
rounds of 200 calls each: medians (min-max) in ms per batch, and the
ratio whole / grouped per round.
"""
import statistics
import time

import numpy as np

from transforms.features import functions as F
from transforms.runtime import allocator

CASES = ((40, 512), (64, 512), (80, 400), (128, 512), (128, 1024))
GROUPS = (8, 16, 32)


def _ms_per_call(fn, calls):
  started = time.perf_counter()
  for _ in range(calls):
    fn()
  return (time.perf_counter() - started) / calls * 1e3


def _spread(values, fmt):
  return (f'{fmt(statistics.median(values))} '
          f'({fmt(min(values))}-{fmt(max(values))})')


def main(rounds=7, calls=200):
  allocator.keep_freed_memory()
  rng = np.random.default_rng(0)
  print('| n_mels, n_fft | whole filterbank, ms | '
        + ' | '.join(f'groups of {g}, ms' for g in GROUPS)
        + f' | whole / groups of {F.MEL_BAND_GROUP} |')
  print('|---|---|' + '---|' * len(GROUPS) + '---|')
  ms = lambda v: f'{v:.3f}'  # noqa: E731
  for n_mels, n_fft in CASES:
    bank = F.mel_filterbank(n_mels, n_fft, 16000)
    frames = (32768 - n_fft) // (n_fft // 2) + 1
    magnitude = np.abs(rng.standard_normal(
        (4, frames, n_fft // 2 + 1))).astype(np.float32)
    contenders = {'whole': lambda m=magnitude, b=bank: m @ b}
    for g in GROUPS:
      groups = F.mel_band_groups(bank, g)
      contenders[g] = (lambda m=magnitude, b=bank, gr=groups:
                       F.mel_spectrogram(m, b, gr))
    times = {name: [] for name in contenders}
    for fn in contenders.values():
      fn()
    for _ in range(rounds):
      for name, fn in contenders.items():
        times[name].append(_ms_per_call(fn, calls))
    ratios = [w / g for w, g in zip(times['whole'],
                                    times[F.MEL_BAND_GROUP])]
    print(f'| {n_mels}, {n_fft} | {_spread(times["whole"], ms)} | '
          + ' | '.join(_spread(times[g], ms) for g in GROUPS)
          + f' | {_spread(ratios, lambda v: f"{v:.2f}x")} |')


if __name__ == '__main__':
  main()
