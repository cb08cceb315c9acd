"""pocketfft: scipy.fft's rfft from its kernel alone, equal to scipy.fft's
own function bit for bit, and the same through scipy.fft where the kernel
is not found."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.fft

from transforms.features import functions
from transforms.features import pocketfft

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _inputs():
  rng = np.random.default_rng(7)
  for dtype in (np.float32, np.float64):
    x = rng.standard_normal((5, 31, 400)).astype(dtype)
    yield x  # contiguous
    yield x[:, ::3, 1:]  # strided, odd length
    yield x.astype(x.dtype.newbyteorder('>'))  # big-endian
    yield np.zeros((2, 512), dtype)  # silence


def _check_equal_to_scipy():
  for x in _inputs():
    for ours, theirs in (
        (pocketfft.rfft(x), scipy.fft.rfft(x, axis=-1)),
        (pocketfft.rfft(x, axis=1), scipy.fft.rfft(x, axis=1))):
      assert ours.dtype == theirs.dtype
      assert ours.shape == theirs.shape
      np.testing.assert_array_equal(ours, theirs)


def test_the_kernel_is_loaded_on_its_own_and_equals_scipy_fft():
  assert pocketfft.uses_kernel()
  _check_equal_to_scipy()


def test_without_the_kernel_scipy_fft_computes_the_same(monkeypatch):
  monkeypatch.setattr(pocketfft, '_kernel', None)
  monkeypatch.setattr(pocketfft, '_scipy', None)
  monkeypatch.setattr(pocketfft, '_load_kernel', lambda: None)
  assert not pocketfft.uses_kernel()
  _check_equal_to_scipy()


def test_the_feature_functions_equal_scipy_fft():
  rng = np.random.default_rng(3)
  windows = rng.uniform(-1, 1, (3, 4000)).astype(np.float32)
  window = functions.window_function('hann', 512)
  frames = functions.windowed_frames(windows, 512, 128, window)
  np.testing.assert_array_equal(
      functions.stft_magnitude(windows, 512, 128, window),
      np.abs(scipy.fft.rfft(frames, axis=-1)))
  np.testing.assert_array_equal(functions.fft_magnitude(windows),
                                np.abs(scipy.fft.rfft(windows, axis=-1)))


@pytest.mark.parametrize('kernel', [True, False])
@pytest.mark.parametrize('dtype', [np.int16, np.complex64, np.float16])
def test_other_dtypes_are_refused(dtype, kernel, monkeypatch):
  if not kernel:
    monkeypatch.setattr(pocketfft, '_kernel', None)
    monkeypatch.setattr(pocketfft, '_scipy', None)
    monkeypatch.setattr(pocketfft, '_load_kernel', lambda: None)
  with pytest.raises(TypeError, match='float32 or float64'):
    pocketfft.rfft(np.zeros((2, 8), dtype))


def test_scipy_fft_imported_later_uses_the_loaded_kernel():
  """A process that loads the kernel first (as a command does) and then
  imports scipy.fft gets one kernel module, and the same values."""
  code = textwrap.dedent('''
      import sys
      import numpy as np
      from transforms.features import pocketfft
      x = np.random.default_rng(5).standard_normal((4, 300)).astype('f4')
      ours = pocketfft.rfft(x)
      assert 'scipy.fft' not in sys.modules and pocketfft.uses_kernel()
      import importlib
      import scipy.fft
      name = next(n for n in pocketfft.KERNELS if n in sys.modules)
      basic = importlib.import_module(name.rsplit('.', 1)[0] + '.basic')
      assert basic.pfft is sys.modules[name]
      assert np.array_equal(ours, scipy.fft.rfft(x, axis=-1))
      print('ok')
      ''')
  done = subprocess.run([sys.executable, '-c', code], capture_output=True,
                        text=True, timeout=120, cwd=ROOT)
  assert done.returncode == 0, done.stderr
  assert done.stdout.strip() == 'ok'
