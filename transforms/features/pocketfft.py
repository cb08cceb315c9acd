"""The real FFT of scipy.fft, from its compiled kernel loaded without the
scipy.fft package.

Why: `import scipy.fft` took 0.13 s of a command's 1.0 s: its array-API
layer copies every numpy attribute, which imports numpy.f2py and
numpy.testing, and its log-FFT part imports scipy.special. The kernel
(scipy/fft/_pocketfft/pypocketfft, a compiled module; from scipy 1.18 on,
scipy/fft/_duccfft/pyduccfft, with the same calls) is what computes the
transform; `rfft` calls it with the arguments scipy.fft's own
function passes for the calls wavbeam makes (the default "backward"
norm, one thread), so the values are scipy.fft's bit for bit (tested
against scipy.fft itself, at the scipy that requirements.txt pins).
Where the kernel is not found where that scipy keeps it, scipy.fft
itself computes them.
"""

import importlib
import importlib.machinery
import importlib.util
import os
import sys

import numpy as np

# Where scipy keeps the kernel: scipy up to 1.17, and from 1.18 on.
KERNELS = ('scipy.fft._pocketfft.pypocketfft', 'scipy.fft._duccfft.pyduccfft')
_BACKWARD = 0  # the kernel's normalisation code for norm="backward"
_ONE_THREAD = 1

_kernel = None  # the loaded kernel module
_scipy = None  # scipy.fft, where the kernel cannot be loaded on its own


def rfft(x: np.ndarray, axis: int = -1) -> np.ndarray:
  """scipy.fft.rfft(x, axis=axis) of a real float32 or float64 array:
  complex64 for float32 input, complex128 for float64."""
  x = _aligned(x)
  kernel = _kernel or _load()
  if kernel is None:
    return _scipy.rfft(x, axis=axis)
  return kernel.r2c(x, (axis,), True, _BACKWARD, None, _ONE_THREAD)


def uses_kernel() -> bool:
  """Whether the kernel was loaded on its own (else scipy.fft serves)."""
  return (_kernel or _load()) is not None


def _aligned(x: np.ndarray) -> np.ndarray:
  """x as the kernel takes it, as scipy.fft prepares it: a floating dtype
  in native byte order, in aligned memory."""
  if x.dtype.kind != 'f' or x.dtype == np.float16:
    raise TypeError(f'a real float32 or float64 array, not {x.dtype}')
  dtype = x.dtype.newbyteorder('=')
  if x.dtype == dtype and x.flags['ALIGNED']:
    return x
  return np.array(x, dtype=dtype, copy=True)


def _load():
  """Loads the kernel, or else scipy.fft; returns the kernel or None."""
  global _kernel, _scipy  # pylint: disable=global-statement
  if _kernel is None and _scipy is None:
    _kernel = _load_kernel()
    if _kernel is None:
      _scipy = importlib.import_module('scipy.fft')
  return _kernel


def _load_kernel():
  """The kernel module, registered under its own name (so that a later
  `import scipy.fft` uses this one), or None where it is not found."""
  scipy_spec = importlib.util.find_spec('scipy')
  if scipy_spec is None or not scipy_spec.submodule_search_locations:
    return None
  for name in KERNELS:
    module = sys.modules.get(name) or _kernel_at(
        name, scipy_spec.submodule_search_locations[0])
    if module is not None:
      return module
  return None


def _kernel_at(name: str, scipy_folder: str):
  """The kernel `name` (scipy.fft._folder.module) loaded from its file
  under scipy_folder, or None."""
  folder, module_name = name.split('.')[2:]
  for suffix in importlib.machinery.EXTENSION_SUFFIXES:
    path = os.path.join(scipy_folder, 'fft', folder, module_name + suffix)
    if os.path.isfile(path):
      break
  else:
    return None
  try:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
  except ImportError:
    return None
  if not hasattr(module, 'r2c'):
    return None
  sys.modules[name] = module
  return module
