"""Keep freed memory in the worker process instead of returning it to the OS.

Each batch of windows allocates and frees the same few arrays of ~8 MB
(frames, spectra, float64 copies for statistics, encoded records). With
glibc's defaults the freed top of the heap is trimmed back to the OS and the
next batch faults every page in again: about 185,000 page faults and a
fifth of the shard phase in kernel time on the 2-hour benchmark corpus.
Raising the trim threshold (and fixing the mmap threshold, which glibc
otherwise adjusts) keeps those pages: 49,000 faults, same peak memory.
"""

import ctypes
import ctypes.util
import logging

# mallopt parameters, from glibc's malloc.h.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Arrays above this still get their own mapping and go back when freed.
MMAP_THRESHOLD = 64 << 20
# Up to this much free memory stays at the top of the heap for reuse.
TRIM_THRESHOLD = 256 << 20


def keep_freed_memory() -> bool:
  """Sets glibc's thresholds for this process; False where there is no
  glibc (musl, macOS), which is harmless: only speed differs."""
  try:
    libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6')
    mallopt = libc.mallopt
  except (OSError, AttributeError):
    return False
  ok = (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1)
  if not ok:
    logging.debug('mallopt refused the thresholds; leaving glibc defaults')
  return ok
