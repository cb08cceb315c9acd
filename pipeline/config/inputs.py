"""The options of what is read: the input folder, the files taken and left
out, where their classes come from and how they are renamed, the
--silence_from recordings, and the channel and sample rate every file is
brought to."""

import dataclasses
import fnmatch
import json
import re
from typing import Mapping, Optional, Tuple

from pipeline.config.fields import (
    MAX_COUNT, at_most, check_choices, opt, positive, split_list)
from pipeline.contract import naming
from pipeline.contract.errors import ConfigError

LABEL_MODES = ('subdir', 'suffix', 'none')
CHANNEL_POLICIES = ('mean', 'first')
# File extensions read, of what libsndfile decodes. Lossy files are
# decoded whole (transforms/inputs/audio_io.WHOLE_DECODE_SUBTYPES).
AUDIO_FORMATS = ('wav', 'flac', 'opus', 'ogg', 'mp3', 'aiff', 'aif')
MAX_SAMPLE_RATE = 10**7       # 10 MHz: ultrasound, not a typo of 16000
# --label_map's key for every class the map does not name.
OTHER_CLASSES = '*'
SILENCE_LABEL = '_silence_'   # --silence_label's default
GLOB_CHARS = '*?['


@dataclasses.dataclass(frozen=True, kw_only=True)
class InputOptions:
  input_dir: str = opt('folder (or URI) searched recursively for audio '
                       'files (--audio_formats)', required=True)
  audio_formats: Tuple[str, ...] = opt(
      'comma-separated extensions of the files read (any case), from '
      + ','.join(AUDIO_FORMATS) + '; lossy files (MP3, Vorbis, Opus) are '
      'decoded whole, so each must decode to at most 256 MiB (70 min of '
      '16 kHz mono)', default=('wav',))
  exclude: Tuple[str, ...] = opt(
      'leave out the files whose path relative to input_dir matches this '
      'glob (fnmatch: * and ? also match "/", so _background_noise_/* '
      'takes the whole folder); repeatable or comma-separated. Excluded '
      'files are not read but counted (counts.files_excluded) and listed in '
      'rejects.jsonl; a pattern that matches no file stops the run '
      '(default: none)', default=(), repeatable=True)
  label_from: str = opt(
      'where the class comes from: subdir (parent folder name), suffix (text '
      'after the last "_" of the file stem) or none', default='subdir',
      choices=LABEL_MODES)
  label_map: Tuple[Tuple[str, str], ...] = opt(
      'rename classes: a JSON file mapping class to class, or a '
      'comma-separated list of CLASS=NEW (a bare CLASS keeps its name), '
      'where *=NEW renames every class the map does not name, e.g. '
      'yes,no,*=_unknown_; applied wherever a label is made (targets, '
      'classes, per-class counts, TFDS labels). Naming a class no file has '
      'stops the run (default: none)', default=())
  silence_from: Tuple[str, ...] = opt(
      'files whose path relative to input_dir matches this glob (as '
      '--exclude) are long recordings whose windows (under --example_unit '
      'file, whole recordings) become examples of --silence_label, '
      'whatever their folder; repeatable or '
      'comma-separated. A file also matched by --exclude is excluded '
      '(default: none)', default=(), repeatable=True)
  silence_label: str = opt('the class of the --silence_from examples',
                           default=SILENCE_LABEL)
  silence_windows: Optional[int] = opt(
      'keep at most this many --silence_from windows in all, shared as '
      'evenly as their lengths allow between the recordings, each giving '
      'its first ones (default: every window at --hop_len)', default=None)
  channels: str = opt('multi-channel files: mean (average to mono) or first',
                      default='mean', choices=CHANNEL_POLICIES)
  sample_rate: Optional[int] = opt(
      'resample every file to this rate; by default the dataset keeps the '
      "corpus's most common rate and rejects files at other rates",
      default=None)

  def _normalise_input(self):
    if isinstance(self.audio_formats, str):
      object.__setattr__(self, 'audio_formats',
                         split_list(self.audio_formats))
    object.__setattr__(self, 'audio_formats',
                       tuple(f.lower().lstrip('.') for f in
                             self.audio_formats))
    for name in ('exclude', 'silence_from'):
      patterns = getattr(self, name)
      if isinstance(patterns, str):
        patterns = split_list(patterns)
      object.__setattr__(self, name, tuple(_normal_pattern(p)
                                           for p in patterns))
    if isinstance(self.label_map, str):
      object.__setattr__(self, 'label_map', _parse_label_map(self.label_map))
    object.__setattr__(self, 'label_map', tuple(sorted(
        (str(k), str(v)) for k, v in self.label_map)))

  def _validate_input(self, written: Mapping[str, str]):
    if not self.input_dir:
      raise ConfigError('input_dir', self.input_dir, 'is required')
    if self.sample_rate is not None:
      positive('sample_rate', self.sample_rate)
      at_most('sample_rate', self.sample_rate, MAX_SAMPLE_RATE)
    check_choices(self, InputOptions)
    formats = written.get('audio_formats', ','.join(self.audio_formats))
    if not self.audio_formats:
      raise ConfigError('audio_formats', formats,
                        'name at least one extension')
    unknown = [f for f in self.audio_formats if f not in AUDIO_FORMATS]
    if unknown:
      raise ConfigError('audio_formats', formats, f'unknown {unknown}; '
                        f'choose from {", ".join(AUDIO_FORMATS)}')
    if len(set(self.audio_formats)) != len(self.audio_formats):
      raise ConfigError('audio_formats', formats, 'lists a repeat')

  def _validate_labels(self, written: Mapping[str, str]):
    """The classes and the patterns: where a manifest gives the labels,
    --exclude, --silence_from, --label_map and the --silence_* options."""
    if self.manifest_label_column and self.label_from != 'subdir':
      raise ConfigError('label_from', self.label_from, 'the manifest gives '
                        'the labels (--manifest_label_column): leave out '
                        '--label_from')
    for name in ('exclude', 'silence_from'):
      patterns = getattr(self, name)
      text = written.get(name, ','.join(patterns))
      for pattern in patterns:
        if (not pattern or pattern.startswith('/') or
            re.match(r'[A-Za-z][A-Za-z0-9+.-]*:/', pattern) or
            '..' in pattern.split('/')):
          raise ConfigError(name, text, f'pattern {pattern!r}: give a glob '
                            'relative to input_dir, e.g. '
                            '_background_noise_/*')
      if len(set(patterns)) != len(patterns):
        raise ConfigError(name, text, 'lists a pattern twice')
    for silence in self.silence_from:
      for excluded in self.exclude:
        if silence == excluded or (
            not any(c in silence for c in GLOB_CHARS) and
            fnmatch.fnmatchcase(silence, excluded)):
          raise ConfigError('silence_from', silence, f'every file it '
                            f'matches is left out by --exclude={excluded}: '
                            'a file cannot be both')
    no_classes = (self.label_from == 'none' and
                  not self.manifest_label_column)
    if self.label_map:
      text = written.get('label_map', label_map_text(self.label_map))
      if no_classes:
        raise ConfigError('label_map', text, '--label_from none gives no '
                          'classes to rename')
      # Given as text, each pair was checked as it was read (naming the
      # pair as written, or the file and the key).
      for old, new in self.label_map:
        problem = _label_pair_problem(old, new)
        if problem:
          raise ConfigError('label_map', text, f'{old}={new}: {problem}')
      olds = [old for old, _ in self.label_map]
      if len(set(olds)) != len(olds):
        raise ConfigError('label_map', text, 'renames a class twice')
    if not self.silence_from:
      if self.silence_windows is not None:
        raise ConfigError('silence_windows', self.silence_windows,
                          'needs --silence_from')
      if self.silence_label != SILENCE_LABEL:
        raise ConfigError('silence_label', self.silence_label,
                          'needs --silence_from')
      return
    if no_classes:
      raise ConfigError('silence_from', written.get(
          'silence_from', ','.join(self.silence_from)),
                        '--label_from none gives no classes, so windows '
                        'cannot be labelled silence')
    if not naming.is_class_name(self.silence_label):
      raise ConfigError('silence_label', self.silence_label, 'give a class '
                        f'name ({naming.CLASS_NAME_RULE})')
    if self.silence_windows is not None:
      positive('silence_windows', self.silence_windows)
      at_most('silence_windows', self.silence_windows, MAX_COUNT)


def _normal_pattern(pattern: str) -> str:
  """A glob as the listing's relative paths are spelled: './a/*' and
  'a//*' are 'a/*'."""
  pattern = re.sub('/+', '/', str(pattern).strip())
  while pattern.startswith('./'):
    pattern = pattern[2:]
  return pattern


def label_map_text(label_map) -> str:
  """--label_map as an inline list."""
  return ','.join(old if old == new else f'{old}={new}'
                  for old, new in label_map)


def _parse_label_map(text: str) -> Tuple[Tuple[str, str], ...]:
  """[(class, new class)] from a .json file or an inline list. A file is
  read now, so that the map itself is the option a dataset records (and
  --append compares), not a file that may change."""
  text = text.strip()
  if not text:
    return ()
  if text.lower().endswith('.json'):
    return _read_label_map(text)
  pairs = []
  for part in split_list(text):
    old, sep, new = part.partition('=')
    old, new = old.strip(), new.strip()
    if sep and (not old or not new):
      raise ConfigError('label_map', text, f'{part!r} is not CLASS=NEW or '
                        'CLASS')
    problem = _label_pair_problem(old, new if sep else old)
    if problem:
      raise ConfigError('label_map', text, f'{part!r}: {problem}')
    pairs.append((old, new if sep else old))
  return tuple(pairs)


def _label_pair_problem(old: str, new: str) -> Optional[str]:
  """Why a --label_map pair cannot rename class `old` to `new`; None when
  it can."""
  if not old or not new or new == OTHER_CLASSES:
    return f'give CLASS=NEW with a NEW class name (or {OTHER_CLASSES}=NEW)'
  if not (naming.is_class_name(old) and naming.is_class_name(new)):
    return f'a class name holds {naming.CLASS_NAME_RULE}'
  return None


def _read_label_map(path: str) -> Tuple[Tuple[str, str], ...]:
  # Imported here: this module is imported by the modules that must work
  # without Beam (tests/test_layers.py), which never read a label map file.
  from apache_beam.io.filesystems import FileSystems
  try:
    with FileSystems.open(path) as f:
      data = f.read().decode('utf-8-sig')  # a byte-order mark is no text
  except (OSError, IOError, UnicodeDecodeError) as e:
    raise ConfigError('label_map', path, f'cannot be read ({e})') from e
  try:
    found = json.loads(data, object_pairs_hook=_label_pairs)
  except ValueError as e:
    raise ConfigError('label_map', path, f'is not valid ({e})') from e
  if not isinstance(found, _Pairs) or not all(
      isinstance(k, str) and isinstance(v, str) for k, v in found):
    raise ConfigError('label_map', path, 'must be a JSON object mapping '
                      'class names to class names')
  for old, new in found:
    if not old or not new or new == OTHER_CLASSES:
      raise ConfigError('label_map', path, f'key {old!r} maps to {new!r}: '
                        'map a class name to a new class name (the key '
                        f'{OTHER_CLASSES!r} stands for every other class)')
    if not (naming.is_class_name(old) and naming.is_class_name(new)):
      raise ConfigError('label_map', path, f'key {old!r} maps to {new!r}: '
                        f'a class name holds {naming.CLASS_NAME_RULE}')
  return tuple(found)


class _Pairs(list):
  """A JSON object's (key, value) pairs, in order."""


def unique_pairs(pairs):
  """A JSON object's pairs (json's object_pairs_hook); ValueError naming
  the keys given twice, which json.loads would silently keep the last of."""
  keys = [k for k, _ in pairs]
  repeated = sorted({k for k in keys if keys.count(k) > 1})
  if repeated:
    raise ValueError(f'{repeated} given twice')
  return pairs


def _label_pairs(pairs):
  return _Pairs(unique_pairs(pairs))
