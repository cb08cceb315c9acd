"""numpy.fft against scipy.fft on the pipeline's STFT and whole-window FFT.

  .venv/bin/python -m bench.fft

Medians of 7 passes of 300 calls each, one core, allocator as in workers.
"""
import statistics
import time

import numpy as np
import scipy.fft

from transforms.runtime import allocator
from transforms.features import functions as F


def _stft(rfft, windows, window):
  frames = np.lib.stride_tricks.sliding_window_view(
      windows, 512, axis=-1)[:, ::256]
  return np.abs(rfft(frames * window, axis=-1))


def _median_ms(fn, calls=300, passes=7):
  fn()
  times = []
  for _ in range(passes):
    started = time.perf_counter()
    for _ in range(calls):
      fn()
    times.append((time.perf_counter() - started) / calls * 1e3)
  return statistics.median(times)


def main():
  allocator.keep_freed_memory()
  rng = np.random.default_rng(0)
  windows = rng.uniform(-1, 1, (4, 32768)).astype(np.float32)
  window = F.window_function('hann', 512)
  print('| work (4 windows of 32768, float32) | numpy ms | scipy ms | ratio |')
  print('|---|---|---|---|')
  for name, np_fn, sp_fn in (
      ('STFT n_fft 512 hop 256, magnitude',
       lambda: _stft(np.fft.rfft, windows, window),
       lambda: _stft(scipy.fft.rfft, windows, window)),
      ('whole-window rFFT, magnitude',
       lambda: np.abs(np.fft.rfft(windows, axis=-1)),
       lambda: np.abs(scipy.fft.rfft(windows, axis=-1)))):
    a, b = _median_ms(np_fn), _median_ms(sp_fn)
    print(f'| {name} | {a:.3f} | {b:.3f} | {a / b:.2f}x |')
  difference = np.abs(_stft(np.fft.rfft, windows, window) -
                      _stft(scipy.fft.rfft, windows, window)).max()
  print(f'largest STFT magnitude difference: {difference:.2g}')


if __name__ == '__main__':
  main()
