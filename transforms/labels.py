"""Class labels from file paths."""

from typing import Iterable, List, Sequence

from transforms import splits

NO_LABEL_TARGET = -1


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


def file_label(path: str, config, entry=None) -> str:
  """The class of a listed file: its manifest row's (a manifest.Entry)
  with --manifest_label_column, else label_of its path, below the split
  folder if there is one."""
  if config.manifest_label_column:
    return entry.label if entry is not None else ''
  rel = splits.relative_path(path, config.input_dir)
  if config.split_from == 'subdir':
    rel = rel.partition('/')[2]
  return label_of(rel, config.label_from)
