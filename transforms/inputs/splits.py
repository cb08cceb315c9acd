"""Which split a file belongs to: stable across processes, runs and runners.

The assignment depends only on the file's path relative to the input folder
(never on Python's per-process hash(), the corpus size or the other files),
so adding files never moves existing ones and every window of a recording
lands in the same split.
"""

import hashlib
from typing import Optional, Sequence, Tuple


def stable_unit(text: str) -> float:
  """A number in [0, 1) from SHA-256: the same everywhere, forever."""
  digest = hashlib.sha256(text.encode('utf-8')).digest()
  return int.from_bytes(digest[:8], 'big') / 2.0**64


def split_by_hash(rel_path: str,
                  splits: Sequence[Tuple[str, float]]) -> str:
  u = stable_unit('wavbeam-split:' + rel_path)
  edge = 0.0
  for name, fraction in splits:
    edge += fraction
    if u < edge:
      return name
  return splits[-1][0]  # u within rounding of 1.0


def split_from_folder(rel_path: str) -> Optional[str]:
  """DIR/train/dog/x.wav -> 'train'; a file directly in DIR -> None."""
  head, sep, _ = rel_path.partition('/')
  return head if sep else None
