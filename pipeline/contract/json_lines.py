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
  line that does not parse."""
  for number, line in enumerate(text.splitlines(), 1):
    if not line.strip():
      continue
    try:
      yield number, json.loads(line)
    except ValueError as e:
      raise NotJson(number, e) from e
