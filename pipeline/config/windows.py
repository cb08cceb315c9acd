"""The options of what one example is: a window of a recording (its
length, hop, padding and count), a whole recording or a segment (the
lengths taken), and how many examples a run makes."""

import dataclasses
from typing import Optional

from pipeline.config.fields import (
    MAX_COUNT, at_most, check_choices, opt, positive)
from pipeline.contract.errors import ConfigError

EXAMPLE_UNITS = ('window', 'file', 'segment')
# The units whose examples differ in length (a recording's, a segment's).
VARIABLE_UNITS = ('file', 'segment')
# What --example_unit file and segment leave out: the window options (and
# the features of whole windows, registry.Feature.window_only).
WINDOW_ONLY_OPTIONS = ('win_len', 'hop_len', 'pad', 'max_windows_per_signal')
# --example_unit file holds a whole recording, and its features, in memory
# at once: 60 s of 48 kHz audio is 23 MB as float64 and its 257-bin
# spectrogram 29 MB; the cap can be raised up to MAX_FILE_SECONDS.
DEFAULT_MAX_SECONDS = 60.0
MAX_FILE_SECONDS = 600.0
# A shard task holds 32 windows as float64: 2**22 samples (95 s at
# 44.1 kHz) make 1 GB, where --win_len 99999999999 would ask for 745 GiB.
MAX_WIN_LEN = 2**22


@dataclasses.dataclass(frozen=True, kw_only=True)
class WindowOptions:
  win_len: int = opt('window length in samples', default=32768)
  hop_len: Optional[int] = opt(
      'samples between window starts (default: win_len)', default=None)
  pad: bool = opt('zero-pad the last partial window instead of dropping it',
                  default=False)
  max_windows_per_signal: Optional[int] = opt(
      'keep at most this many windows of each file (of each segment, where '
      'a manifest gives segments; default: all)',
      default=None)
  example_unit: str = opt(
      'what one example is: window (a --win_len window of a recording, or '
      'of each of its segments, cut every --hop_len), file (a whole '
      'recording after channel mixing and resampling) or segment (one '
      'time-stamped span of a recording, from --manifest_start_column or '
      '--lhotse_supervisions); file and segment store variable-length '
      'arrays with their length, and --win_len, --hop_len, --pad, '
      '--max_windows_per_signal and the fft feature do not apply to them',
      default='window', choices=EXAMPLE_UNITS)
  max_seconds: float = opt(
      f'--example_unit file or segment: reject (rejects.jsonl) recordings '
      f'or segments longer than this, at most {MAX_FILE_SECONDS:g}; an '
      'example and its features are held in memory whole',
      default=DEFAULT_MAX_SECONDS)
  min_seconds: float = opt(
      '--example_unit file or segment: reject (rejects.jsonl) recordings or '
      'segments shorter than this', default=0.0)
  num_elems: Optional[int] = opt(
      'stop after this many examples, taken in file order; not with '
      '--append (default: all)',
      default=None)

  @property
  def variable_length(self) -> bool:
    """Examples differ in length: whole recordings or segments."""
    return self.example_unit in VARIABLE_UNITS

  def _normalise_windows(self):
    if self.hop_len is None:
      object.__setattr__(self, 'hop_len', self.win_len)

  def _validate_windows(self):
    for name in ('win_len', 'hop_len'):
      positive(name, getattr(self, name))
    for name in ('max_windows_per_signal', 'num_elems'):
      if getattr(self, name) is not None:
        positive(name, getattr(self, name))
    at_most('win_len', self.win_len, MAX_WIN_LEN,
            'a shard task holds 32 windows as float64')
    at_most('hop_len', self.hop_len, MAX_WIN_LEN * 1024)
    for name in ('max_windows_per_signal', 'num_elems'):
      if getattr(self, name) is not None:
        at_most(name, getattr(self, name), MAX_COUNT)
    check_choices(self, WindowOptions)
    self._validate_example_unit()
    # With --overwrite too, the output options' checks (run after these)
    # refuse --append itself, which this message would take for granted.
    if self.append and not self.overwrite and self.num_elems is not None:
      raise ConfigError('num_elems', self.num_elems, 'stops a run partway '
                        'through its recordings, and --append skips every '
                        'recording the dataset has seen, those past the '
                        'stop too: append to a dataset written without it')

  def _validate_example_unit(self):
    """What applies to the --example_unit given: the window options to
    windows, the lengths taken to recordings and segments, segments to a
    manifest that gives them."""
    defaults = {f.name: f.default for f in dataclasses.fields(WindowOptions)}
    for name in ('max_seconds', 'min_seconds'):
      value = getattr(self, name)
      if (isinstance(value, bool) or not isinstance(value, (int, float))
          or not 0 <= value < float('inf')):
        raise ConfigError(name, value, 'must be a number of seconds, at '
                          'least 0')
    unit = self.example_unit
    if unit == 'segment' and not self.has_segments:
      raise ConfigError('example_unit', unit, 'needs segments: a manifest '
                        'with --manifest_start_column, or '
                        '--lhotse_supervisions')
    if unit == 'file' and self.has_segments:
      raise ConfigError('example_unit', unit, 'makes one example of a '
                        'whole recording, and the manifest gives segments '
                        f'({self._segments_option()}): use --example_unit '
                        'segment, or window for windows cut inside them')
    if unit == 'window':
      for name in ('max_seconds', 'min_seconds'):
        if getattr(self, name) != defaults[name]:
          raise ConfigError(name, getattr(self, name), 'applies to '
                            '--example_unit file or segment only (windows '
                            'have --win_len samples)')
      return
    what = 'a whole recording' if unit == 'file' else 'a whole segment'
    for name in WINDOW_ONLY_OPTIONS:
      value = getattr(self, name)
      default = self.win_len if name == 'hop_len' else defaults[name]
      if value != default:
        raise ConfigError(name, value, f'does not apply to --example_unit '
                          f'{unit} (an example is {what}); leave it out, or '
                          'use --example_unit window')
    if not 0 < self.max_seconds <= MAX_FILE_SECONDS:
      raise ConfigError('max_seconds', self.max_seconds, 'must be more than '
                        f'0 and at most {MAX_FILE_SECONDS:g} (a recording '
                        'and its features are held in memory whole)')
    if self.min_seconds > self.max_seconds:
      raise ConfigError('min_seconds', self.min_seconds, 'must not exceed '
                        f'--max_seconds={self.max_seconds:g}')
