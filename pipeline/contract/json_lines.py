"""JSON Lines text (rejects.jsonl, manifests): one value a line, blank
lines skipped. Standard library only: every layer imports it."""

import json
from typing import Iterator, Tuple


class NotJson(ValueError):
  """A line that does not parse; `number` is its line number (from 1)."""

  def __init__(self, number: int, cause: ValueError):
    self.number, self.cause = number, cause
    super().__init__(f'line {number} is not JSON ({cause})')


def values(text: str) -> Iterator[Tuple[int, object]]:
  """(line number, parsed value) of each non-blank line; NotJson for a
  line that does not parse, or whose object gives a key twice (json keeps
  the last, which would silently drop the first: a manifest row with two
  'label's)."""
  for number, line in enumerate(text.splitlines(), 1):
    if not line.strip():
      continue
    try:
      yield number, json.loads(line, object_pairs_hook=_unique_keys)
    except ValueError as e:
      raise NotJson(number, e) from e


def _unique_keys(pairs) -> dict:
  keys = [key for key, _ in pairs]
  twice = sorted({key for key in keys if keys.count(key) > 1})
  if twice:
    raise ValueError(f'the keys {twice} are given twice')
  return dict(pairs)
