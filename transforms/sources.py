"""sources.jsonl: the identity of every recording a dataset (or a part of
it) read, so that --append can tell new and changed recordings from those
already in it.

One line per probed file, sorted by path: its path relative to input_dir,
its size and the CRC32C of its first wav_io.HEAD_BYTES (header and first
samples, which probing reads anyway). Files rejected before probing have
no line; rejects.jsonl names them. The final step writes the file from
the blocks' stored probes, in block order (the listing's sorted order),
so no step holds every file's entry.
"""

import itertools
import json
from typing import Dict, Iterator

from transforms import block_store
from transforms import splits

FILE_NAME = 'sources.jsonl'


def line(rel_path: str, size: int, head_crc: int) -> str:
  """json.dumps({...}, sort_keys=True) of the three, spelled out: a third
  of its time, and the same bytes (tests/test_sources.py)."""
  return (f'{{"head_crc32c": {int(head_crc)}, "path": {json.dumps(rel_path)}'
          f', "size": {int(size)}}}\n')


def lines(stores: Dict[int, str], input_dir: str) -> Iterator[str]:
  """sources.jsonl's lines from the blocks' stored probes ({block: path})."""
  path, size, crc = (block_store.FIELD[k] for k in ('path', 'size',
                                                      'head_crc'))
  for block in sorted(stores):
    for row in block_store.read_rows(stores[block]):
      yield line(splits.relative_path(row[path], input_dir), row[size],
                 row[crc])


def parse(text: str, where: str) -> Iterator[dict]:
  for number, raw in zip(itertools.count(1), text.splitlines()):
    try:
      entry = json.loads(raw)
      yield {'path': str(entry['path']), 'size': int(entry['size']),
             'head_crc32c': int(entry['head_crc32c'])}
    except (ValueError, KeyError, TypeError) as e:
      raise ValueError(f'{where} line {number}: not a sources line '
                       f'({e})') from e
