"""Class labels from file paths."""

from typing import Iterable, List

NO_LABEL_TARGET = -1


def label_of(path: str, mode: str) -> str:
  """subdir: name of the parent folder; suffix: text after the last '_' of
  the stem ('..._24346_passenger.wav' -> 'passenger'); none: ''."""
  if mode == 'none':
    return ''
  parts = path.rstrip('/').split('/')
  if mode == 'subdir':
    return parts[-2] if len(parts) > 1 else ''
  if mode == 'suffix':
    stem = parts[-1].rsplit('.', 1)[0]
    return stem.rsplit('_', 1)[1] if '_' in stem else ''
  raise ValueError(f'unknown label mode {mode!r}')


def class_names(labels: Iterable[str]) -> List[str]:
  """Sorted distinct class names; the position is the target."""
  return sorted(set(labels) - {''})
