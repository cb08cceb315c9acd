"""Augmentation at read time: building blocks for a reader's `transform=`
(an example, a dict of numpy arrays, in; the example out).

    from pipeline.readers import augment
    transform = augment.Compose([
        augment.Gain(db=(-6, 6)),
        augment.AddNoise(noise_clips, snr_db=(5, 20)),
        augment.SpecAugment('log_mel', freq_masks=2, freq_width=8,
                            time_masks=2, time_width=20)], seed=0)
    data = WavbeamIterableDataset(OUT, 'train', transform=transform, ...)

Each block draws from its own generator, seeded by (seed, epoch, rank,
worker): WavbeamIterableDataset calls `start_epoch(epoch, rank, worker)`
before each pass, so an epoch's draws are the same on every run and
differ between epochs; in a loop of your own, call it yourself. Integer
signals (--signal_dtype int16/int32) are read as full-scale floats in
[-1, 1) (float32) before Gain or AddNoise; float arrays keep their dtype.
"""

import numbers
from typing import Sequence, Tuple

import numpy as np


class Augmentation:
  """A block: `__call__(example) -> example`, drawing from `self.rng`."""

  def __init__(self, seed: int = 0):
    _check_count(seed=seed)
    self.seed = seed
    self.start_epoch(0)

  def start_epoch(self, epoch: int, rank: int = 0, worker: int = 0) -> None:
    """Seeds the draws of a pass: the same (epoch, rank, worker), the same
    draws in the same order."""
    self.rng = np.random.default_rng([self.seed, epoch, rank, worker])

  def __call__(self, example: dict) -> dict:
    raise NotImplementedError


class Compose(Augmentation):
  """Blocks applied in order, each drawing from a stream of its own,
  seeded by (seed, its place, its own seed); a Compose among the blocks
  seeds its own blocks' streams from that triple in place of its seed, so
  an outer seed reaches every block.

  The streams are the Compose's own: it lends each block its generator
  for the call, and never changes a block's seed, so blocks may be shared
  between Composes (or used alone) without changing each other's draws.
  Blocks other than Augmentations are called as they are (with their own
  start_epoch, where they have one)."""

  def __init__(self, blocks: Sequence[Augmentation], seed: int = 0):
    self.blocks = list(blocks)
    super().__init__(seed)

  def start_epoch(self, epoch: int, rank: int = 0, worker: int = 0) -> None:
    self._streams = self._streams_from(self.seed, epoch, rank, worker)

  def _streams_from(self, seed, epoch: int, rank: int, worker: int) -> list:
    """Each block's stream for a pass, with this Compose seeded by `seed`:
    a generator, a Compose's list of streams, or None for a block that
    seeds itself."""
    streams = []
    for place, block in enumerate(self.blocks):
      if isinstance(block, Compose):
        streams.append(block._streams_from(  # pylint: disable=protected-access
            [seed, place, block.seed], epoch, rank, worker))
      elif isinstance(block, Augmentation):
        # Its own start_epoch too: a block may keep state of its own per
        # epoch; what it draws comes from the stream lent it.
        block.start_epoch(epoch, rank, worker)
        streams.append(np.random.default_rng(
            [[seed, place, block.seed], epoch, rank, worker]))
      else:
        start_epoch(block, epoch, rank, worker)
        streams.append(None)
    return streams

  def __call__(self, example: dict) -> dict:
    return self._apply(example, self._streams)

  def _apply(self, example: dict, streams: list) -> dict:
    for block, stream in zip(self.blocks, streams):
      if isinstance(block, Compose):
        example = block._apply(example, stream)  # pylint: disable=protected-access
      elif stream is None:
        example = block(example)
      else:
        own, block.rng = getattr(block, 'rng', None), stream
        try:
          example = block(example)
        finally:
          block.rng = own
    return example


def as_float(values: np.ndarray) -> np.ndarray:
  """An integer signal as full-scale floats in [-1, 1) (float32); a float
  array as it is."""
  values = np.asarray(values)
  if np.issubdtype(values.dtype, np.integer):
    return values.astype(np.float32) / np.float32(
        2 ** (8 * values.dtype.itemsize - 1))
  return values


class Gain(Augmentation):
  """`key` times 10^(g / 20), g drawn uniformly from `db` (dB)."""

  def __init__(self, db: Tuple[float, float] = (-6.0, 6.0),
               key: str = 'signal', seed: int = 0):
    self.db, self.key = db, key
    super().__init__(seed)

  def __call__(self, example: dict) -> dict:
    gain = self.rng.uniform(*self.db)
    values = as_float(example[self.key])
    scaled = values * (10.0 ** (gain / 20.0))
    return {**example, self.key: scaled.astype(values.dtype)}


class AddNoise(Augmentation):
  """Mixes a noise clip into `key` at an SNR drawn uniformly from
  `snr_db`: a clip drawn from `noises`, a start in it drawn (the clip
  repeated when shorter than the signal), scaled so that 10 log10 of the
  signal's power over the noise's is the SNR. A silent signal or noise is
  left as it is."""

  def __init__(self, noises: Sequence[np.ndarray],
               snr_db: Tuple[float, float] = (5.0, 20.0),
               key: str = 'signal', seed: int = 0):
    self.noises = [as_float(n).astype(np.float64).ravel() for n in noises]
    if not self.noises or not all(len(n) for n in self.noises):
      raise ValueError('noises: give one or more clips of samples')
    self.snr_db, self.key = snr_db, key
    super().__init__(seed)

  def __call__(self, example: dict) -> dict:
    clip = self.noises[int(self.rng.integers(len(self.noises)))]
    snr = self.rng.uniform(*self.snr_db)
    values = as_float(example[self.key])
    signal = values.astype(np.float64)
    length = signal.shape[0]
    start = int(self.rng.integers(len(clip)))
    noise = np.resize(np.roll(clip, -start), length)
    if signal.ndim > 1:  # channels: the same noise in each
      noise = noise.reshape((length,) + (1,) * (signal.ndim - 1))
    power = np.mean(signal ** 2)
    noise_power = np.mean(noise ** 2)
    if power == 0 or noise_power == 0:
      return {**example, self.key: values}
    scale = np.sqrt(power / (noise_power * 10.0 ** (snr / 10.0)))
    mixed = signal + scale * noise
    return {**example, self.key: mixed.astype(values.dtype)}


class SpecAugment(Augmentation):
  """SpecAugment's masks (Park et al., 2019) on a (frames, bins) feature
  `key`: `freq_masks` times, f drawn from [0, freq_width] and bins
  [f0, f0 + f) set to `fill`, f0 from [0, bins − f]; likewise
  `time_masks` masks of up to `time_width` frames (at most
  `max_time_fraction` of the frames each). `fill`: a number, or 'mean'
  (the example's mean)."""

  def __init__(self, key: str = 'log_mel', freq_masks: int = 2,
               freq_width: int = 27, time_masks: int = 2,
               time_width: int = 40, max_time_fraction: float = 1.0,
               fill='mean', seed: int = 0):
    # Checked here, not at the first draw (in a DataLoader worker).
    _check_count(freq_masks=freq_masks, freq_width=freq_width,
                 time_masks=time_masks, time_width=time_width)
    if (isinstance(max_time_fraction, bool) or
        not isinstance(max_time_fraction, numbers.Real) or
        not 0 <= max_time_fraction <= 1):
      raise ValueError(f'max_time_fraction={max_time_fraction!r}: give a '
                       'number from 0 to 1 (the most of the frames a time '
                       'mask covers)')
    if not (isinstance(fill, str) and fill == 'mean') and (
        isinstance(fill, bool) or not isinstance(fill, numbers.Real)):
      raise ValueError(f"fill={fill!r}: give a number, or 'mean' (the "
                       "example's mean)")
    self.key = key
    self.freq_masks, self.freq_width = freq_masks, freq_width
    self.time_masks, self.time_width = time_masks, time_width
    self.max_time_fraction, self.fill = max_time_fraction, fill
    super().__init__(seed)

  def __call__(self, example: dict) -> dict:
    values = np.array(example[self.key], copy=True)
    if values.ndim != 2:
      raise ValueError(f'{self.key}: SpecAugment masks a (frames, bins) '
                       f'feature, not one of shape {values.shape}')
    frames, bins = values.shape
    fill = values.mean() if self.fill == 'mean' else self.fill
    for _ in range(self.freq_masks):
      f0, f = _mask(self.rng, self.freq_width, bins)
      values[:, f0:f0 + f] = fill
    widest = min(self.time_width, int(self.max_time_fraction * frames))
    for _ in range(self.time_masks):
      t0, t = _mask(self.rng, widest, frames)
      values[t0:t0 + t, :] = fill
    return {**example, self.key: values}


def _check_count(**counts) -> None:
  """ValueError for a count (seed=, freq_width=, ...) given that is not an
  integer of at least 0."""
  for name, value in counts.items():
    if (not isinstance(value, numbers.Integral) or isinstance(value, bool)
        or value < 0):
      raise ValueError(f'{name}={value!r}: give an integer of at least 0')


def _mask(rng, width: int, size: int) -> Tuple[int, int]:
  """(start, width) of one mask: width from [0, min(width, size)], start
  from [0, size − width]."""
  w = int(rng.integers(0, min(width, size) + 1))
  return int(rng.integers(0, size - w + 1)), w


def start_epoch(transform, epoch: int, rank: int = 0, worker: int = 0
                ) -> None:
  """Calls `transform.start_epoch` where it has one (a reader does this
  for its `transform=`)."""
  if hasattr(transform, 'start_epoch'):
    transform.start_epoch(epoch, rank, worker)
