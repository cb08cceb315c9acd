"""The options of offline augmentation: the augmented copies of every
recording a run writes beside it (speed, gain, noise, reverberation),
the folders their noise and room impulse responses come from, and their
seed."""

import dataclasses
import math
from typing import Optional, Tuple

from pipeline.config.fields import MAX_COUNT, opt, split_list
from pipeline.contract.errors import ConfigError

EFFECTS = ('speed', 'gain', 'noise', 'reverb')
# What each example records of its copy's effects.
KEY = 'augmentation'
# sox's speed factors that Kaldi's and Lhotse's recipes use are 0.9 and
# 1.1; far outside this range a copy is no longer the same speech.
SPEED_RANGE = (0.5, 2.0)


@dataclasses.dataclass(frozen=True)
class Effect:
  """One effect of a copy: its name and its value, or the range a value
  is drawn from per example (low == high: fixed). reverb has none."""
  name: str
  low: float = 0.0
  high: float = 0.0

  def text(self) -> str:
    """As --augment writes it, every digit of its values kept."""
    if self.name == 'reverb':
      return 'reverb'
    if self.low == self.high:
      return f'{self.name}={_number(self.low)}'
    return f'{self.name}={_number(self.low)}:{_number(self.high)}'


def _number(value: float) -> str:
  text = repr(float(value))
  return text[:-2] if text.endswith('.0') else text


Copy = Tuple[Effect, ...]


@dataclasses.dataclass(frozen=True, kw_only=True)
class AugmentOptions:
  augment: Tuple[str, ...] = opt(
      'augmented copies of every recording, each an example of its own '
      'beside the original, in its split: comma-separated copies, each '
      'effects joined by "+": speed=F (resampled as if played F times as '
      'fast, as sox speed and Kaldi\'s speed perturbation; needs '
      '--sample_rate), gain=DB, noise=SNR (a clip of --noise_dir mixed at '
      'that SNR in dB), reverb (convolved with a room impulse response of '
      '--rir_dir); a value LOW:HIGH is drawn per example. E.g. '
      'speed=0.9,speed=1.1,noise=5:20,reverb+noise=10 (default: none)',
      default=())
  noise_dir: Optional[str] = opt(
      'folder of noise recordings (MUSAN noise, e.g.) that noise= draws '
      'from, searched recursively for --audio_formats; each is resampled '
      'to the dataset\'s rate and mixed down to one channel',
      default=None)
  rir_dir: Optional[str] = opt(
      'folder of room impulse responses that reverb draws from, as '
      '--noise_dir', default=None)
  augment_seed: int = opt(
      'seed of what the copies draw (a noise clip and where it starts, '
      'an SNR, a gain, an impulse response), with the recording and the '
      'example', default=0)

  @property
  def augment_copies(self) -> Tuple[Copy, ...]:
    """--augment parsed: the effects of each copy, in order."""
    return tuple(parse_copy(text) for text in self.augment)

  def _normalise_augment(self):
    if isinstance(self.augment, str):
      object.__setattr__(self, 'augment', split_list(self.augment))
    object.__setattr__(self, 'augment', tuple(
        '+'.join(e.text() for e in parse_copy(text, self.augment))
        for text in self.augment))

  def _validate_augment(self):
    if not 0 <= self.augment_seed <= MAX_COUNT:
      raise ConfigError('augment_seed', self.augment_seed,
                        f'must be in [0, {MAX_COUNT}]')
    copies = self.augment_copies
    used = {e.name for copy in copies for e in copy}
    text = ','.join(self.augment)
    if len(set(self.augment)) != len(self.augment):
      raise ConfigError('augment', text, 'names a copy twice')
    if 'noise' in used and not self.noise_dir:
      raise ConfigError('augment', text, 'noise= needs --noise_dir')
    if 'reverb' in used and not self.rir_dir:
      raise ConfigError('augment', text, 'reverb needs --rir_dir')
    for name, option in (('noise', 'noise_dir'), ('reverb', 'rir_dir')):
      if getattr(self, option) and name not in used:
        raise ConfigError(option, getattr(self, option), 'is used by '
                          f'--augment {name}, which no copy has')
    if 'speed' in used and self.sample_rate is None:
      raise ConfigError('augment', text, 'speed= needs --sample_rate: a '
                        'sped-up copy is resampled to the dataset\'s rate')
    if copies and KEY in self.manifest_extra_columns:
      raise ConfigError('manifest_extra_columns', KEY, 'is the key of what '
                        '--augment did to each example: rename the column')
    if copies and self.silence_from:
      raise ConfigError('augment', text, 'augmented copies of '
                        '--silence_from recordings are not made: leave out '
                        'one of the two')


def parse_copy(text: str, whole=None) -> Copy:
  """The effects of one copy, 'speed=0.9+noise=5:20'; ConfigError naming
  --augment (as `whole` gives it) otherwise."""
  shown = ','.join(whole) if isinstance(whole, tuple) else (whole or text)
  effects = []
  for part in text.split('+'):
    name, sep, value = part.strip().partition('=')
    name = name.strip()
    if name not in EFFECTS:
      raise ConfigError('augment', shown, f'{part.strip()!r}: an effect is '
                        f'one of {", ".join(EFFECTS)}')
    if name == 'reverb':
      if sep:
        raise ConfigError('augment', shown, 'reverb takes no value (its '
                          'impulse response is drawn from --rir_dir)')
      effects.append(Effect('reverb'))
      continue
    low, colon, high = value.partition(':')
    try:
      low = float(low)
      high = float(high) if colon else low
    except ValueError:
      raise ConfigError('augment', shown, f'{part.strip()!r}: give '
                        f'{name}=VALUE or {name}=LOW:HIGH') from None
    if not (math.isfinite(low) and math.isfinite(high)) or high < low:
      raise ConfigError('augment', shown, f'{part.strip()!r}: give '
                        'finite numbers, LOW at most HIGH')
    if name == 'speed':
      if colon:
        raise ConfigError('augment', shown, 'speed takes one factor per '
                          'copy (its examples are cut after it)')
      if not SPEED_RANGE[0] <= low <= SPEED_RANGE[1] or low == 1.0:
        raise ConfigError('augment', shown, f'speed={low:g}: give a '
                          f'factor in [{SPEED_RANGE[0]:g}, '
                          f'{SPEED_RANGE[1]:g}] other than 1')
    effects.append(Effect(name, low, high))
  names = [e.name for e in effects]
  if len(set(names)) != len(names):
    raise ConfigError('augment', shown, f'{text!r} has an effect twice')
  # speed first: it changes the recording the others act on.
  return tuple(sorted(effects, key=lambda e: e.name != 'speed'))
