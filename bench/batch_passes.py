"""A batch's per-value passes a cache part at a time (transforms/runtime/
cache_parts) against the same formulas over the whole batch at once.

  .venv/bin/python -m bench.batch_passes

Batches of 4 windows of 32768 samples (float64, as read: a compute batch
of the default job, 1 MB of float64, one part) and of 64 (whole
utterances, a model's batches): their stored int16 signal and their
spectrogram (n_fft 512, hop 256: float32). Medians of 7 interleaved passes,
one core, allocator as in workers; the results are checked equal (the
signal bit for bit, the moments to 1e-12).
"""
import statistics
import time

import numpy as np

from transforms.inputs import audio
from transforms.runtime import allocator
from transforms.writing.stats import Moments


def whole_moments(values):
  """Moments.of's formulas over one float64 copy of the whole batch."""
  values = np.asarray(values).ravel()
  deviations = values.astype(np.float64)
  mean = float(deviations.mean())
  deviations -= mean
  return Moments(values.size, mean, float(np.einsum('i,i->', deviations,
                                                    deviations)),
                 float(values.min()), float(values.max()))


def whole_signal(samples, dtype):
  """to_signal_dtype's formulas over the whole batch."""
  info = np.iinfo(dtype)
  scaled = np.multiply(samples, 2.0 ** (info.bits - 1), dtype=np.float64)
  np.rint(scaled, out=scaled)
  np.clip(scaled, info.min, info.max, out=scaled)
  return scaled.astype(dtype)


def _medians_ms(functions, calls=20, passes=7):
  times = {name: [] for name in functions}
  for fn in functions.values():
    fn()
  for _ in range(passes):
    for name, fn in functions.items():
      started = time.perf_counter()
      for _ in range(calls):
        fn()
      times[name].append((time.perf_counter() - started) / calls * 1e3)
  return {name: statistics.median(t) for name, t in times.items()}


def _compare(windows_per_batch: int, rng) -> None:
  n = windows_per_batch
  windows = rng.integers(-32768, 32768, (n, 32768)) / 32768.0
  spectrogram = np.abs(rng.standard_normal((n, 127, 257))).astype(
      np.float32)
  signal = audio.to_signal_dtype(windows, 'int16')
  assert np.array_equal(signal, whole_signal(windows, np.int16))
  for values in (signal, spectrogram):
    parts, whole = Moments.of(values), whole_moments(values)
    assert abs(parts.mean - whole.mean) <= 1e-12 * abs(whole.mean)
    assert abs(parts.m2 - whole.m2) <= 1e-12 * whole.m2
  for name, whole_fn, parts_fn in (
      ('stored int16 signal', lambda: whole_signal(windows, np.int16),
       lambda: audio.to_signal_dtype(windows, 'int16')),
      ('statistics of the signal',
       lambda: whole_moments(signal), lambda: Moments.of(signal)),
      ('statistics of the spectrogram (float32)',
       lambda: whole_moments(spectrogram),
       lambda: Moments.of(spectrogram))):
    ms = _medians_ms({'whole': whole_fn, 'parts': parts_fn},
                     calls=max(20, 320 // n))
    print(f'| {n} | {name} | {ms["whole"]:.3f} | {ms["parts"]:.3f} | '
          f'{ms["whole"] / ms["parts"]:.2f}x |')


def main():
  allocator.keep_freed_memory()
  rng = np.random.default_rng(0)
  print('| windows of 32768 | work | whole batch ms | in cache parts ms | '
        'ratio |')
  print('|---|---|---|---|---|')
  # A compute batch of the default job (extractor.compute_windows), and
  # a larger one, as whole utterances (--example_unit file) and a model's
  # batches make.
  for windows_per_batch in (4, 64):
    _compare(windows_per_batch, rng)


if __name__ == '__main__':
  main()
