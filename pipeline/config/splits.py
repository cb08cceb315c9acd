"""The options of which split each file goes to (fractions by a stable
hash, the folders, or list files) and of the order examples are written
in."""

import dataclasses
from typing import Mapping, Tuple

from pipeline.config.fields import MAX_COUNT, check_choices, opt, split_list
from pipeline.contract import naming
from pipeline.contract.errors import ConfigError

SPLIT_SOURCES = ('hash', 'subdir')
# With --split_lists, the split of every file no list names.
REST_SPLIT = 'train'


@dataclasses.dataclass(frozen=True, kw_only=True)
class SplitOptions:
  splits: Tuple[Tuple[str, float], ...] = opt(
      'split names and fractions, e.g. train=0.8,validation=0.1,test=0.1; '
      'a file goes to one split by a stable hash of its path relative to '
      'input_dir', default=(('train', 1.0),))
  split_from: str = opt(
      'hash (assign files by --splits) or subdir (the top-level folder under '
      'input_dir names the split: DIR/train/..., DIR/test/...)',
      default='hash', choices=SPLIT_SOURCES)
  split_lists: Tuple[Tuple[str, str], ...] = opt(
      'files named in list files go to that split and all others to train, '
      'as Speech Commands ships its official splits: e.g. '
      'validation=validation_list.txt,test=testing_list.txt; a list holds '
      'one path relative to input_dir per line, and a list file is found '
      'relative to input_dir unless absolute or a URI; instead of --splits '
      '(default: none)', default=())
  no_shuffle: bool = opt(
      'write examples in input order (file, then window) instead of a '
      'deterministic pseudo-random order that mixes files and classes in '
      'every shard', default=False)
  shuffle_seed: int = opt('seed of the write order', default=0)

  @property
  def split_names(self) -> Tuple[str, ...]:
    """Known up front for hash splits, split lists, fold splits and
    per-file manifests; None when folders or a split column decide."""
    if self.fold_splits:
      return tuple(n for n, _ in self.fold_splits)
    if any(s for s, _ in self.manifest):
      return tuple(dict.fromkeys(s for s, _ in self.manifest))
    if self.manifest_split_column:
      return None
    if self.split_lists:
      return (REST_SPLIT, *(n for n, _ in self.split_lists))
    return tuple(n for n, _ in self.splits) if self.split_from == 'hash' \
        else None

  def _normalise_splits(self):
    if isinstance(self.splits, str):
      object.__setattr__(self, 'splits', _parse_splits(self.splits))
    object.__setattr__(self, 'splits',
                       tuple((n, float(f)) for n, f in self.splits))
    if isinstance(self.split_lists, str):
      object.__setattr__(self, 'split_lists',
                         _parse_split_lists(self.split_lists))
    object.__setattr__(self, 'split_lists',
                       tuple((n, f) for n, f in self.split_lists))

  def _validate_splits(self, written: Mapping[str, str]):
    check_choices(self, SplitOptions)
    names = [name for name, _ in self.splits]
    if self.split_from == 'hash':
      text = written.get('splits', splits_text(self.splits))
      if not self.splits:
        raise ConfigError('splits', text, 'name at least one split')
      if len(set(names)) != len(names):
        raise ConfigError('splits', text, 'names a split twice')
      for name, fraction in self.splits:
        check_split_name('splits', text, name)
        if not 0 < fraction <= 1:
          raise ConfigError('splits', text, f'fraction of {name!r} must be '
                            'in (0, 1]')
      if abs(sum(f for _, f in self.splits) - 1.0) > 1e-9:
        raise ConfigError('splits', text, 'fractions must sum to 1')
    if not 0 <= self.shuffle_seed <= MAX_COUNT:
      raise ConfigError('shuffle_seed', self.shuffle_seed,
                        f'must be in [0, {MAX_COUNT}]')
    if self.sink == 'write_to_tfrecord' and self.shuffle_seed != 0:
      raise ConfigError('shuffle_seed', self.shuffle_seed,
                        '--sink write_to_tfrecord writes in no global '
                        'order, so there is nothing to seed; use --sink '
                        'shards for a shuffled layout')
    if self.split_lists:
      text = written.get('split_lists', ','.join(
          f'{n}={f}' for n, f in self.split_lists))
      names = [n for n, _ in self.split_lists]
      if self.split_from != 'hash' or self.splits != (('train', 1.0),):
        raise ConfigError('split_lists', text, 'give --split_lists or '
                          '--splits / --split_from subdir, not both')
      if len(set(names)) != len(names) or REST_SPLIT in names:
        raise ConfigError('split_lists', text, 'names a split twice (the '
                          f'files of no list go to {REST_SPLIT!r})')
      for name in names:
        check_split_name('split_lists', text, name)


def splits_text(splits) -> str:
  """--splits as given: every fraction with all of its digits."""
  def fraction(f):
    text = repr(float(f))
    return text[:-2] if text.endswith('.0') else text
  return ','.join(f'{n}={fraction(f)}' for n, f in splits)


def check_split_name(option: str, value, name: str, where: str = '') -> None:
  """ConfigError unless `name` can name a split (it names shard files)."""
  if not naming.is_split_name(name):
    raise ConfigError(option, value, f'{where}split name {name!r}: use '
                      f'{naming.SPLIT_NAME_RULE} only')


def _parse_splits(text: str) -> Tuple[Tuple[str, float], ...]:
  pairs = []
  for part in split_list(text):
    name, sep, fraction = part.partition('=')
    try:
      pairs.append((name.strip(), float(fraction)))
    except ValueError:
      raise ConfigError('splits', text, f'{part!r} is not NAME=FRACTION')
    if not sep:
      raise ConfigError('splits', text, f'{part!r} is not NAME=FRACTION')
  return tuple(pairs)


def _parse_split_lists(text: str) -> Tuple[Tuple[str, str], ...]:
  pairs = []
  for part in split_list(text):
    name, sep, path = part.partition('=')
    if not sep or not name.strip() or not path.strip():
      raise ConfigError('split_lists', text, f'{part!r} is not SPLIT=FILE')
    pairs.append((name.strip(), path.strip()))
  return tuple(pairs)
