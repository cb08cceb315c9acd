"""Blocks of the listing: consecutive files, up to block_size of them,
listed, probed and planned together, and what each of those steps reports
of a block. Files travel in blocks so that per-element costs are paid per
block, and what the graph carries grows with the blocks, not the files.
No Beam."""

import dataclasses
from typing import Optional, Tuple


def block_size(num_files: int) -> int:
  """Files per block: about 64 blocks (work for every worker), at most 512
  files each. Output does not depend on it."""
  return max(1, min(512, -(-num_files // 64)))


@dataclasses.dataclass(frozen=True)
class StoredBlock:
  """One block of the listing, probed: its files' WavInfos are in `path`
  (block_store), and only these few numbers travel on."""
  block: int
  path: str
  rate_counts: Tuple[Tuple[int, int], ...]   # (sample rate, files)
  files_rejected: int = 0   # by probing (stored with the probes)


@dataclasses.dataclass(frozen=True)
class PlannedFiles:
  """How many files of a block were planned, per split, and where its
  probes are stored (block_store; sources.jsonl is written from them)."""
  block: int
  files_by_split: Tuple[Tuple[str, int], ...]
  store: str = ''
  # Recordings planned, each once (under --split_unit segment one may be
  # in several splits); None: the sum of files_by_split.
  files: Optional[int] = None
  # --split_unit segment: (split a, split b, recordings, frames) that two
  # splits share (rules.PlannedBlock.split_overlap).
  split_overlap: Tuple[Tuple[str, str, int, int], ...] = ()

  @property
  def num_files(self) -> int:
    return (self.files if self.files is not None
            else sum(n for _, n in self.files_by_split))


@dataclasses.dataclass(frozen=True)
class ListedFiles:
  """How many files the listing found (each is planned, rejected or
  excluded), and how many of them --exclude left out."""
  count: int
  excluded: int = 0
