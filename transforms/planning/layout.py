"""Where every window goes: split, shard and place in the shard.

Computed from window counts alone, before any audio is read, so the layout
is identical on every run and runner, and only tiny (file, window, key)
references are shuffled, never example data.

A split's windows are numbered in input order (file index, then window):
position p. Written order is p itself (--no_shuffle) or perm(p), a seeded
pseudo-random bijection of [0, total). Shard s holds the keys in
[s * total / N, (s + 1) * total / N), so shards are equal to within one
example, and a long recording is spread across all shards.
"""

import dataclasses
import math
from typing import Dict, Iterable, List, Tuple

import numpy as np

from transforms.planning.rules import window_plans

_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


@dataclasses.dataclass(frozen=True)
class SplitLayout:
  split: str
  total: int                 # windows in the split
  num_shards: int
  # unit (a file index, or a block of consecutive indices) -> position of
  # its first window in the split
  offsets: Dict[int, int]
  num_files: int = 0
  frames: int = 0            # of its files, at the dataset's rate

  def shard_of(self, keys: np.ndarray) -> np.ndarray:
    return (keys.astype(np.int64) * self.num_shards) // self.total

  def shard_starts(self) -> List[int]:
    """Each shard's first key, then total: shard s holds the keys k with
    k * num_shards // total == s, from ceil(s * total / num_shards)."""
    n, total = self.num_shards, self.total
    if n == 0:
      return [0]
    return [-(-s * total // n) for s in range(n + 1)]


@dataclasses.dataclass(frozen=True)
class ExampleSize:
  """Estimated serialized bytes of an example: `fixed`, plus `per_frame`
  per frame of its recording for --example_unit file (its arrays grow
  with the recording's length; 0 for windows, all of one size)."""
  fixed: int
  per_frame: float = 0.0

  def total(self, examples: int, frames: int) -> float:
    return examples * self.fixed + frames * self.per_frame


def num_shards_for(total: int, *, num_shards=None, max_examples_per_shard=None,
                   max_shard_bytes=None, example_bytes=1, frame_bytes=0,
                   frames=0, max_shard_frames=None,
                   window_frames=None) -> int:
  """Shards for `total` examples. By bytes, the split's size is
  estimated as example_bytes per example plus frame_bytes per frame of
  its `frames` (the estimate of variable-length examples, whose size
  grows with their recording's length). `max_shard_frames`: at most this
  much audio per shard besides, where a feature's work is costly (a
  model's), so that it is spread over the workers: `window_frames` per
  example (windows), else the split's `frames`."""
  if total == 0:
    return 0
  if num_shards is not None:
    n = num_shards
  elif max_examples_per_shard is not None:
    n = math.ceil(total / max_examples_per_shard)
  else:
    n = math.ceil((total * example_bytes + frames * frame_bytes) /
                  max_shard_bytes)
    if max_shard_frames:
      work = total * window_frames if window_frames else frames
      n = max(n, math.ceil(work / max_shard_frames))
  return max(1, min(n, total))


def compute_layouts(entries: Iterable[Tuple], **shard_options
                    ) -> Dict[str, SplitLayout]:
  """entries: (split, unit, windows[, files[, frames]]) -> {split:
  SplitLayout}.

  A unit is a file index, or a block of consecutive file indices (with its
  number of files, and their frames); units are numbered in input order,
  so a split's windows are numbered by file index, then window, either
  way. Repeated entries count once (see SplitByType on DaskRunner
  duplicates).
  """
  unique: Dict[Tuple[str, int], Tuple[int, int, int]] = {}
  for split, unit, n, *rest in entries:
    value = (n, rest[0] if rest else 1, rest[1] if len(rest) > 1 else 0)
    if unique.setdefault((split, unit), value) != value:
      raise ValueError(f'unit {unit} planned with {unique[(split, unit)]} '
                       f'and {value} (windows, files, frames)')
  by_split: Dict[str, list] = {}
  for (split, unit), (n, files, frames) in unique.items():
    by_split.setdefault(split, []).append((unit, n, files, frames))
  layouts = {}
  for split, units in sorted(by_split.items()):
    offsets, total = {}, 0
    for unit, n, _, _ in sorted(units):
      offsets[unit] = total
      total += n
    layouts[split] = SplitLayout(
        split, total, num_shards_for(
            total, frames=sum(u[3] for u in units), **shard_options),
        offsets, sum(u[2] for u in units), sum(u[3] for u in units))
  return layouts


def _mix(x: np.ndarray) -> np.ndarray:
  """splitmix64's finalizer: a strong 64-bit mixer, wrapping arithmetic."""
  x = x ^ (x >> np.uint64(30))
  x = x * np.uint64(0xBF58476D1CE4E5B9)
  x = x ^ (x >> np.uint64(27))
  x = x * np.uint64(0x94D049BB133111EB)
  return x ^ (x >> np.uint64(31))


def _feistel(x: np.ndarray, half_bits: int, seed: int) -> np.ndarray:
  mask = np.uint64((1 << half_bits) - 1)
  left, right = x >> np.uint64(half_bits), x & mask
  for round_ in range(4):
    key = np.uint64((seed * 0x9E3779B97F4A7C15 + round_ + 1) & (2**64 - 1))
    left, right = right, left ^ (_mix(right ^ key) & mask)
  return (left << np.uint64(half_bits)) | right


def permute(positions: np.ndarray, total: int, seed: int) -> np.ndarray:
  """A pseudo-random bijection of [0, total), applied to `positions`.

  A 4-round Feistel network on the smallest even bit width that covers
  total, with cycle walking: values that land outside [0, total) are
  permuted again until they fall inside, which keeps it a bijection.
  """
  with np.errstate(over='ignore'):
    half_bits = max(1, math.ceil(max(1, (total - 1).bit_length()) / 2))
    x = np.asarray(positions, np.uint64)
    out = _feistel(x, half_bits, seed)
    outside = out >= np.uint64(total)
    while outside.any():
      out[outside] = _feistel(out[outside], half_bits, seed)
      outside = out >= np.uint64(total)
  return out.astype(np.int64)


def block_refs(block: int, plans, layouts: Dict[str, SplitLayout],
               shuffle: bool, seed: int):
  """((split, shard), (plan, window, sort key)) for every window of a
  block's FilePlans (in index order): positions continue from the block's
  offset in each split, so they equal a file-by-file numbering. One
  permutation per split and block, not per file: numpy's per-call cost
  on one-window clips would be most of the planning time."""
  by_split: Dict[str, list] = {}
  for plan in plans:
    by_split.setdefault(plan.split, []).append(plan)
  for split, members in sorted(by_split.items()):
    layout = layouts[split]
    counts = np.array([p.num_windows for p in members], np.int64)
    positions = layout.offsets.get(block, 0) + np.arange(counts.sum(),
                                                         dtype=np.int64)
    keys = permute(positions, layout.total, seed) if shuffle else positions
    shards = layout.shard_of(keys).tolist()
    keys = keys.tolist()
    i = 0
    for plan in members:
      for own, window in window_plans(plan):
        yield (split, shards[i]), (own, window, keys[i])
        i += 1
