"""What 2 worker processes can gain over 1 on this machine right now.

The same fixed piece of work runs in one process, then in two at once; the
speed-up is 2 x (time alone) / (time of the pair). Two kinds of work: pure
Python (holds one core) and numpy STFTs of the pipeline's shape (also
memory-heavy). On a shared, noisy VM this moves between runs (1.5x-2.0x
seen), so bench/scale.py measures it between its own runs and reports the
pipeline's speed-ups next to it.
"""

import multiprocessing
import os
import statistics
import time

os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')
import numpy as np  # noqa: E402


def python_work() -> float:
  start = time.perf_counter()
  total = 0
  for i in range(5_000_000):
    total += i
  return time.perf_counter() - start


def stft_work() -> float:
  windows = np.random.default_rng(0).standard_normal(
      (64, 32768)).astype(np.float32)
  start = time.perf_counter()
  for _ in range(30):
    frames = np.lib.stride_tricks.sliding_window_view(
        windows, 512, axis=-1)[:, ::256]
    np.abs(np.fft.rfft(frames * np.float32(0.5), axis=-1))
  return time.perf_counter() - start


def _timed(work) -> float:
  return work()


def two_process_speedup(work) -> float:
  alone = work()
  with multiprocessing.get_context('spawn').Pool(2) as pool:
    pool.map(_timed, [work, work])  # warm: imports, page faults
    start = time.perf_counter()
    pool.map(_timed, [work, work])
    together = time.perf_counter() - start
  return 2 * alone / together


def measure(repeats: int = 3) -> dict:
  """{'python': median speed-up, 'stft': median speed-up}."""
  return {name: statistics.median(two_process_speedup(work)
                                  for _ in range(repeats))
          for name, work in (('python', python_work), ('stft', stft_work))}


if __name__ == '__main__':
  print(measure(5))
