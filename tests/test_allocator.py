"""transforms.runtime.allocator: batches stop faulting their memory in again."""

import subprocess
import sys

_PROGRAM = '''
import resource, sys
import numpy as np
from transforms.runtime import allocator
if sys.argv[1] == 'keep':
  assert allocator.keep_freed_memory()
def batch():  # a few arrays of ~8 MB, as in a 32-window batch
  frames = np.ones((32, 127, 512), np.float32)
  spectrum = np.abs(np.fft.rfft(frames, axis=-1))
  return float(spectrum.astype(np.float64).sum())
batch()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(30):
  batch()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
'''


def _faults(mode):
  out = subprocess.run([sys.executable, '-c', _PROGRAM, mode], check=True,
                       capture_output=True, text=True).stdout
  return int(out.split()[-1])


def test_keeping_freed_memory_avoids_refaulting_each_batch():
  default, kept = _faults('default'), _faults('keep')
  # 30 batches of ~40 MB of temporaries: glibc's defaults fault most pages
  # in again every batch; kept memory is reused.
  assert default > 30 * 1000, default
  assert kept < default / 10, (kept, default)
