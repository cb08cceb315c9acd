"""--augment: what a copy does to each of its examples once it is read.

A copy's speed= is planned (rules.copy_plan: the file read at another
rate); its other effects act here on each example's samples at the
dataset's rate, in this order whatever the order written:

- reverb: the example convolved with an impulse response drawn from
  --rir_dir, from its direct path (its largest sample) on, cut to the
  example's length and scaled back to the example's energy;
- noise=SNR: a clip drawn from --noise_dir, from a drawn sample on (and
  from its start again where it ends), scaled so that the example's mean
  power over the noise's is SNR dB;
- gain=DB: the samples times 10^(DB / 20).

A value given as LOW:HIGH is drawn uniformly per example. What is drawn
comes from a generator seeded by (--augment_seed, the copy, the
recording's path, the example's window): the same on every run, runner
and worker, and each example's own. Each example records what was done
to it in its `augmentation` string ('' for the recording itself), e.g.
'speed=1.1+noise=7.31:babble/b3.wav@48213+gain=-2.40'.
"""

import dataclasses
import functools
import io
from typing import List, Optional, Sequence, Tuple

import crc32c
import numpy as np
import soundfile as sf
from apache_beam.io.filesystems import FileSystems

from pipeline.config import ConfigError, PipelineConfig
from pipeline.config.augment import KEY  # noqa: F401  (re-exported)
from pipeline.contract import naming
from transforms.inputs import audio
from transforms.inputs import patterns


def gain(x: np.ndarray, db: float) -> np.ndarray:
  return x * 10.0 ** (db / 20.0)


def looped(noise: np.ndarray, start: int, n: int) -> np.ndarray:
  """n samples of `noise` from `start` on, from its start again where it
  ends."""
  return noise[(start + np.arange(n)) % len(noise)]


def mix_at_snr(x: np.ndarray, noise: np.ndarray, snr_db: float) -> np.ndarray:
  """x plus `noise` (as long as x) scaled so that mean(x²) / mean(n²) is
  snr_db; x itself when either is silent (no level to set)."""
  signal_power = float(np.mean(np.square(x)))
  noise_power = float(np.mean(np.square(noise)))
  if signal_power == 0.0 or noise_power == 0.0:
    return x.copy()
  scale = np.sqrt(signal_power / (noise_power * 10.0 ** (snr_db / 10.0)))
  return x + noise * scale


def reverberate(x: np.ndarray, rir: np.ndarray) -> np.ndarray:
  """x convolved with `rir` from its direct path (argmax |rir|) on, as
  long as x, at x's energy (x itself when the result is silent)."""
  direct = int(np.argmax(np.abs(rir)))
  wet = np.convolve(x, rir[direct:])[:len(x)]
  energy = float(np.sum(np.square(wet)))
  if energy == 0.0:
    return x.copy()
  return wet * np.sqrt(float(np.sum(np.square(x))) / energy)


def example_rng(seed: int, copy: int, path: str,
                window: int) -> 'np.random.Generator':
  return np.random.default_rng(
      [seed, copy, crc32c.crc32c(path.encode('utf-8')), window])


def _draw(rng: 'np.random.Generator', effect) -> float:
  if effect.low == effect.high:
    return effect.low
  return float(rng.uniform(effect.low, effect.high))


def _listing(folder: str, formats: Tuple[str, ...]) -> list:
  """FileMetadata of the audio files under a folder (or URI), by path."""
  found = []
  for result in FileSystems.match([naming.join(folder, '**')]):
    found += [m for m in result.metadata_list
              if m.path.rsplit('.', 1)[-1].lower() in formats]
  return sorted(found, key=lambda m: m.path)


@functools.lru_cache(maxsize=8)
def folder_files(folder: str, formats: Tuple[str, ...]) -> Tuple[str, ...]:
  """The audio files under a folder, sorted: what a copy draws from, in
  an order every worker agrees on."""
  return tuple(m.path for m in _listing(folder, formats))


@functools.lru_cache(maxsize=16)
def loaded(path: str, rate: int) -> np.ndarray:
  """A noise clip or impulse response, channels mixed, at `rate`
  (float64). A few stay in memory per process."""
  with FileSystems.open(path) as f:
    data, own_rate = sf.read(io.BytesIO(f.read()), dtype='float64',
                             always_2d=True)
  mono = data.mean(axis=1)
  if not np.isfinite(mono).all():
    raise ConfigError('augment', path, 'holds NaN or Inf samples: it '
                      'cannot be mixed into an example')
  if own_rate != rate and len(mono):
    n = audio.resampled_length(len(mono), own_rate, rate)
    mono = audio.resample_range(mono, 0, len(mono), own_rate, rate, 0, n)
  return mono


def sources(config: PipelineConfig) -> List[List]:
  """[folder option, path in it, size, modification time] of every noise
  clip and impulse response a run draws from: what a --resume compares,
  since a changed clip changes the copies."""
  found = []
  for option in ('noise_dir', 'rir_dir'):
    folder = getattr(config, option)
    if not folder:
      continue
    for meta in _listing(folder, tuple(config.audio_formats)):
      found.append([f'--{option} {patterns.relative_path(meta.path, folder)}',
                    meta.size_in_bytes, meta.last_updated_in_seconds])
  return found


def check_folders(config: PipelineConfig) -> None:
  """ConfigError for a --noise_dir or --rir_dir with no audio file. A
  run starts with the folders listed afresh (a process may run several)."""
  folder_files.cache_clear()
  loaded.cache_clear()
  for option in ('noise_dir', 'rir_dir'):
    folder = getattr(config, option)
    if folder and not folder_files(folder, tuple(config.audio_formats)):
      raise ConfigError(option, folder, 'holds no audio file (of '
                        f'--audio_formats {",".join(config.audio_formats)})')


def _drawn_file(rng, folder: str, config: PipelineConfig,
                rate: int) -> Tuple[str, np.ndarray]:
  files = folder_files(folder, tuple(config.audio_formats))
  path = files[int(rng.integers(len(files)))]
  return patterns.relative_path(path, folder), loaded(path, rate)


def augmented(x: np.ndarray, copy, config: PipelineConfig, rate: int,
              rng: 'np.random.Generator') -> Tuple[np.ndarray, str]:
  """(the example's samples after the copy's effects, what was done)."""
  done = [e.text() for e in copy if e.name == 'speed']
  by_name = {e.name: e for e in copy}
  if 'reverb' in by_name:
    name, rir = _drawn_file(rng, config.rir_dir, config, rate)
    x = reverberate(x, rir)
    done.append(f'reverb:{name}')
  if 'noise' in by_name:
    snr = _draw(rng, by_name['noise'])
    name, noise = _drawn_file(rng, config.noise_dir, config, rate)
    if len(noise):
      start = int(rng.integers(len(noise)))
      x = mix_at_snr(x, looped(noise, start, len(x)), snr)
      done.append(f'noise={snr:.2f}:{name}@{start}')
    else:
      done.append(f'noise={snr:.2f}:{name} (empty: none added)')
  if 'gain' in by_name:
    db = _draw(rng, by_name['gain'])
    x = gain(x, db)
    done.append(f'gain={db:.2f}')
  return x, '+'.join(done)


def one(x: np.ndarray, plan, window: int,
        config: PipelineConfig) -> Tuple[np.ndarray, str]:
  """(example `window` of `plan` after its copy's effects, what was
  done); a recording's own example as it is, recorded ''."""
  if plan.copy == 0:
    return x, ''
  rng = example_rng(config.augment_seed, plan.copy, patterns.relative_path(
      plan.info.path, config.input_dir), window)
  return augmented(x, config.augment_copies[plan.copy - 1], config,
                   plan.sample_rate, rng)


def apply(windows: np.ndarray, refs: Sequence[Tuple[tuple, int]], plans,
          config: PipelineConfig) -> Tuple[np.ndarray, List[str]]:
  """(a batch's rows after their copies' effects, each row's record)."""
  out: Optional[np.ndarray] = None
  done = []
  for i, (key, window) in enumerate(refs):
    row, record = one(windows[i], plans[key], window, config)
    if plans[key].copy:  # a recording's own rows stay as read
      if out is None:
        out = windows.copy()
      out[i] = row
    done.append(record)
  return (windows if out is None else out), done


def applied(batch, config: PipelineConfig):
  """A WindowBatch with its copies' effects applied and recorded."""
  windows, done = apply(audio.full_scale(batch.windows), batch.refs,
                        batch.plans, config)
  return dataclasses.replace(batch, windows=windows,
                             augmentations=tuple(done))
