"""Array work a part at a time, each part small enough to stay in a core's
cache while several passes go over it.

A whole batch (64 windows of 32768 samples: 16 MB of float64) is larger
than a core's cache, so each pass of numpy over a whole-batch temporary
runs at the speed of memory; worked one part at a time, only the first
read and the last write of each value go to memory.
"""

from typing import Iterator

# float64 values per part: 1 MB, a core's L2 cache on the machines the
# benchmarks ran on (512 KB to 2 MB elsewhere: within 10% either way).
VALUES = 1 << 17


def slices(size: int, part: int = VALUES) -> Iterator[slice]:
  """Consecutive slices of at most `part` values covering range(size)."""
  for start in range(0, size, part):
    yield slice(start, min(start + part, size))
