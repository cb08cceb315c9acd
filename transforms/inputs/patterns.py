"""--exclude and --silence_from: globs matched against the path of a listed
file relative to input_dir (relative_path), with fnmatch's rules,
case-sensitive: `*` and `?` also match `/`, so `_background_noise_/*`
takes every file under that folder, at any depth."""

import fnmatch
import functools
import re
from typing import Optional, Sequence


@functools.lru_cache(maxsize=64)
def _compiled(patterns: Sequence[str]):
  return [(p, re.compile(fnmatch.translate(p)).match) for p in patterns]


def first_match(rel_path: str, patterns: Sequence[str]) -> Optional[str]:
  """The first of `patterns` (a tuple) that `rel_path` matches, or None."""
  for pattern, match in _compiled(tuple(patterns)):
    if match(rel_path):
      return pattern
  return None


def relative_path(path: str, input_dir: str) -> str:
  """A listed path relative to input_dir (itself when it lies elsewhere)."""
  root = input_dir.rstrip('/') + '/'
  return path[len(root):] if path.startswith(root) else path
