"""Class labels from file paths, renamed by --label_map, and the class of
--silence_from recordings."""

import functools
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from pipeline.config import ConfigError, OTHER_CLASSES, label_map_text
from pipeline.contract import naming
from transforms.inputs import patterns

NO_LABEL_TARGET = -1
# Classes a refusal names before it says how many more there are.
_SHOWN_CLASSES = 20


def label_of(rel_path: str, mode: str) -> str:
  """The class of a file from its path relative to the input folder.

  subdir: name of the parent folder ('' for a file directly in the input
  folder); suffix: text after the last '_' of the stem
  ('..._24346_passenger.wav' -> 'passenger'); none: ''.
  """
  if mode == 'none':
    return ''
  parts = rel_path.strip('/').split('/')
  if mode == 'subdir':
    return parts[-2] if len(parts) > 1 else ''
  if mode == 'suffix':
    stem = parts[-1].rsplit('.', 1)[0]
    return stem.rsplit('_', 1)[1] if '_' in stem else ''
  raise ValueError(f'unknown label mode {mode!r}')


def class_names(labels: Iterable[str], known: Sequence[str] = ()) -> List[str]:
  """Distinct class names, the position is the target: `known` ones first,
  in their order (the classes of the parts an --append extends, never
  renumbered), then the others sorted."""
  return list(known) + sorted(set(labels) - {''} - set(known))


def is_silence(path: str, config) -> bool:
  """Whether a listed file is a --silence_from recording."""
  return bool(config.silence_from) and patterns.first_match(
      patterns.relative_path(path, config.input_dir),
      config.silence_from) is not None


def corpus_label(path: str, config, entry=None, segment=None) -> str:
  """The class the corpus gives a listed file (or one of its segments),
  before --label_map: its manifest row's (a manifest.Entry, or its
  manifest.Segment) with --manifest_label_column, else label_of its
  path, below the split folder if there is one."""
  if config.manifest_label_column:
    row = segment if segment is not None else entry
    return (row.label or '') if row is not None else ''
  rel = patterns.relative_path(path, config.input_dir)
  if config.split_from == 'subdir':
    rel = rel.partition('/')[2]
  return label_of(rel, config.label_from)


def file_label(path: str, config, entry=None) -> str:
  """The class of a listed file in the dataset: --silence_label for a
  --silence_from recording, else its corpus_label renamed by
  --label_map ('' stays '': the file has no class)."""
  if is_silence(path, config):
    return config.silence_label
  return renamed(corpus_label(path, config, entry), config.label_map)


@functools.lru_cache(maxsize=16)
def _lookup(label_map: Tuple[Tuple[str, str], ...]) -> Dict[str, str]:
  return dict(label_map)


def renamed(label: str, label_map) -> str:
  """`label` after --label_map (pairs): its own entry, else the map's
  OTHER_CLASSES entry, else itself."""
  if not label or not label_map:
    return label
  lookup = _lookup(tuple(label_map))
  found = lookup.get(label)
  return found if found is not None else lookup.get(OTHER_CLASSES, label)


def check_label_map(corpus_labels: Iterable[Optional[str]], config) -> None:
  """ConfigError when --label_map names a class that no listed file has
  (a typo there would silently put that class's files under *=NEW)."""
  found = set(corpus_labels) - {None, ''}
  missing = [old for old, _ in config.label_map
             if old != OTHER_CLASSES and old not in found]
  if not missing:
    return
  shown = sorted(found)[:_SHOWN_CLASSES]
  more = len(found) - len(shown)
  raise ConfigError('label_map', label_map_text(config.label_map),
                    f'names {", ".join(map(repr, missing))}, which no file '
                    f'of the corpus has as its class (the corpus has '
                    f'{", ".join(shown) or "none"}'
                    f'{f" and {more} more" if more > 0 else ""})')


def _label_from_rule(config) -> str:
  """Where --label_from looks for a file's class, for a refusal."""
  if config.label_from == 'suffix':
    return 'the text after the last "_" of the file name'
  if config.split_from == 'subdir':
    return 'the folder a file is in, below its split folder'
  return 'the folder a file is in, below input_dir'


def check_label_from(paths: Iterable[str], config) -> None:
  """ConfigError when --label_from finds a class in none of `paths` (the
  listed files that take theirs from it): an unlabeled corpus, whose every
  file it would reject for having none, leaving an empty dataset. Stops
  at the first file that has one; a corpus with some files outside a
  class passes (those are rejected one by one, with the reason)."""
  if config.label_from == 'none' or config.manifest_label_column:
    return
  count, first = 0, None
  for path in paths:
    if corpus_label(path, config):
      return
    # The first in path order, whatever order the listing gives.
    count, first = count + 1, min(first or path, path)
  if not count:
    return
  shown = patterns.relative_path(first, config.input_dir)
  raise ConfigError('label_from', config.label_from, f'finds no class in '
                    f'any of the {count} files (e.g. {shown}): it takes '
                    f'{_label_from_rule(config)}. For an unlabeled corpus '
                    'give --label_from none; with a manifest, '
                    '--manifest_label_column COLUMN takes the classes from '
                    'its rows')


def classes_of_block(block, config) -> List[Tuple[Optional[str], str]]:
  """(corpus class or None for a silence recording, dataset class) of a
  listing block's files ((index, path, entry), ...), each pair once."""
  found = set()
  for _, path, entry in block:
    if is_silence(path, config):
      found.add((None, config.silence_label))
    else:
      for segment in (entry.segments if entry is not None and
                      entry.segments else (None,)):
        label = corpus_label(path, config, entry, segment)
        new = renamed(label, config.label_map)
        if new and not naming.is_class_name(new):
          continue  # not a class: its file or segment is rejected (plan)
        found.add((label, new))
  return sorted(found, key=lambda pair: (pair[0] or '', pair[1]))


def dataset_classes(pairs: Iterable[Tuple[Optional[str], str]], config,
                    known: Sequence[str] = (), check: bool = True
                    ) -> List[str]:
  """The dataset's class names from every block's classes_of_block pairs;
  with `check`, refuses a --label_map that names a class none has."""
  pairs = list(pairs)
  if check and config.label_map:
    check_label_map((old for old, _ in pairs), config)
  return class_names((new for _, new in pairs), known)
