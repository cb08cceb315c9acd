"""sources.jsonl: the identity of every recording a dataset (or a part of
it) read, so that --append can tell new and changed recordings from those
already in it.

One line per probed file, sorted by path: its path relative to input_dir,
its size and the CRC32C of its first audio_io.HEAD_BYTES (header and first
samples, which probing reads anyway), and, when the manifest gives the
recording time-stamped segments, a digest of those (manifest.
segments_digest), so that --append tells a recording given new segments
from one it holds as it is. Files rejected before probing have
no line; rejects.jsonl names them. The final step writes the file from
the blocks' stored probes, in block order (the listing's sorted order),
so no step holds every file's entry.
"""

import itertools
import json
from typing import Dict, Iterator, Optional

from transforms.inputs import block_store
from transforms.inputs import manifest
from transforms.inputs import patterns

FILE_NAME = 'sources.jsonl'


def line(rel_path: str, size: int, head_crc: int,
         segments: Optional[int] = None) -> str:
  """json.dumps({...}, sort_keys=True) of the three (or four), spelled
  out: a third of its time, and the same bytes (tests/test_sources.py)."""
  digest = '' if segments is None else f', "segments": {int(segments)}'
  return (f'{{"head_crc32c": {int(head_crc)}, "path": {json.dumps(rel_path)}'
          f'{digest}, "size": {int(size)}}}\n')


def lines(stores: Dict[int, str], input_dir: str) -> Iterator[str]:
  """sources.jsonl's lines from the blocks' stored probes ({block: path})."""
  path, size, crc, index = (block_store.FIELD[k] for k in (
      'path', 'size', 'head_crc', 'index'))
  for block in sorted(stores):
    rows, entries = block_store.read_rows_and_entries(stores[block])
    for row in rows:
      yield line(patterns.relative_path(row[path], input_dir), row[size],
                 row[crc], manifest.segments_digest(entries.get(row[index])))


def parse(text: str, where: str) -> Iterator[dict]:
  for number, raw in zip(itertools.count(1), text.splitlines()):
    try:
      entry = json.loads(raw)
      yield {'path': str(entry['path']), 'size': int(entry['size']),
             'head_crc32c': int(entry['head_crc32c']),
             'segments': (None if entry.get('segments') is None
                          else int(entry['segments']))}
    except (ValueError, KeyError, TypeError) as e:
      raise ValueError(f'{where} line {number}: not a sources line '
                       f'({e})') from e
