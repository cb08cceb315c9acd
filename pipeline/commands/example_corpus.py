"""A deterministic synthetic corpus: the demo's data and the benchmark's.

Four classes with different spectra (tones, chirps, noise bands, clicks),
int16 mono files in one folder per class: WAV, or FLAC or MP3 for the
benchmark's compressed corpora. The same arguments give the same bytes on
every machine (with the same soundfile wheel, for MP3).
"""

import os
from typing import List

import numpy as np
import soundfile as sf

CLASSES = ('chirp', 'click', 'noise', 'tone')
# audio format: (soundfile format, subtype)
FORMATS = {'wav': ('WAV', 'PCM_16'), 'flac': ('FLAC', 'PCM_16'),
           'mp3': ('MP3', 'MPEG_LAYER_III')}


def _synth(kind: str, n: int, rate: int, rng: np.random.Generator):
  t = np.arange(n) / rate
  if kind == 'tone':
    f0 = rng.uniform(200, 2000)
    x = np.sin(2 * np.pi * f0 * t) + 0.5 * np.sin(2 * np.pi * 2 * f0 * t)
  elif kind == 'chirp':
    f0, f1 = rng.uniform(100, 500), rng.uniform(2000, 6000)
    period = rng.uniform(0.5, 2.0)
    phase = (t % period) / period
    x = np.sin(2 * np.pi * (f0 + (f1 - f0) * phase / 2) * (t % period))
  elif kind == 'noise':
    white = rng.standard_normal(n)
    k = int(rng.integers(2, 16))
    x = np.convolve(white, np.ones(k) / k, mode='same')
  elif kind == 'click':
    x = np.zeros(n)
    x[rng.integers(0, n, max(1, n // 800))] = 1.0
    x = np.convolve(x, np.exp(-np.arange(200) / 30.0), mode='same')
  else:
    raise ValueError(kind)
  x = x + 0.05 * rng.standard_normal(n)
  return x / (np.max(np.abs(x)) + 1e-9) * 0.8


def write_corpus(directory: str, total_seconds: float, *, min_seconds=20.0,
                 max_seconds=120.0, sample_rate=16000, seed=0,
                 classes=CLASSES, audio_format='wav') -> List[str]:
  """Writes files until `total_seconds` of audio; returns their paths."""
  rng = np.random.default_rng(seed)
  paths, written, i = [], 0.0, 0
  while written < total_seconds:
    seconds = min(rng.uniform(min_seconds, max_seconds),
                  max(min_seconds, total_seconds - written))
    kind = classes[i % len(classes)]
    n = int(seconds * sample_rate)
    x = _synth(kind, n, sample_rate, rng)
    folder = os.path.join(directory, kind)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f'{kind}_{i:05d}.{audio_format}')
    sf_format, subtype = FORMATS[audio_format]
    sf.write(path, np.round(x * 32767).astype(np.int16), sample_rate,
             format=sf_format, subtype=subtype)
    paths.append(path)
    written += n / sample_rate
    i += 1
  return paths
