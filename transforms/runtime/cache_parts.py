"""Array work a part at a time, each part small enough to stay in a core's
cache while several passes go over it.

A whole batch (64 windows of 32768 samples: 16 MB of float64) is larger
than a core's cache, so each pass of numpy over a whole-batch temporary
runs at the speed of memory; worked one part at a time, only the first
read and the last write of each value go to memory.
"""

from typing import Iterator, Tuple

import numpy as np

# float64 values per part: 1 MB, a core's L2 cache on the machines the
# benchmarks ran on (512 KB to 2 MB elsewhere: within 10% either way).
VALUES = 1 << 17


def parts(values: np.ndarray
          ) -> Iterator[Tuple[slice, np.ndarray, np.ndarray]]:
  """(where, values[where], float64 scratch of its size) for each part of
  a 1-D array, in order; every part's scratch is the same memory."""
  scratch = np.empty(min(values.size, VALUES), np.float64)
  for start in range(0, values.size, VALUES):
    where = slice(start, min(start + VALUES, values.size))
    yield where, values[where], scratch[:where.stop - start]
