"""rejects.jsonl written from one file per block, so no step holds every
rejection.

A corpus whose files are all rejected (a wrong --sample_rate, a folder of
something else) has a rejection per file: gigabytes at tens of millions of
files, if one final task held them all. Instead each block's planning
writes its probing and planning rejections, sorted, into a file of its own
in the output's temp folder and sends only the counts. The final step
streams those files in block order (blocks hold consecutive names of the
sorted listing, so that stream is sorted too) merged with the few it still
holds: names that are not UTF-8, found by the listing, and windows
rejected when read. The file comes out the same, line for line, as when
every rejection was sorted at once.
"""

import dataclasses
import heapq
import itertools
import json
import uuid
from typing import Iterable, Iterator, Tuple

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.contract import naming
from transforms.runtime import output_lock as run_marker
from transforms.inputs.file_reports import NOTE, SEGMENT, Rejection

FOLDER = 'rejects'


@dataclasses.dataclass(frozen=True)
class BlockRejects:
  """One block's rejections, in a file of its own: what the summary keeps."""
  block: int
  path: str
  files_rejected: int   # distinct files, notes and segments aside
  rejections: int
  notes: int
  segments_rejected: int = 0


def line(rejection: Rejection) -> str:
  return json.dumps(rejection.to_json(), sort_keys=True) + '\n'


def order(entry: dict, text: str) -> tuple:
  """rejects.jsonl's order: by path, then frames (whole files first), then
  stage, then the line itself (so ties have one order too)."""
  return (entry['path'], tuple(entry.get('frames', (0, 0))),
          entry.get('stage', NOTE), text)


def _keyed(rejections: Iterable[Rejection]):
  keyed = []
  for r in rejections:
    text = line(r)
    keyed.append((order(r.to_json(), text), text))
  return sorted(keyed)


def write(dataset_dir: str, block: int,
          rejections: Iterable[Rejection]) -> BlockRejects:
  """Writes a block's rejections and notes, sorted, under a fresh name per
  attempt (as block_store does)."""
  rejections = set(rejections)
  path = naming.join(naming.join(run_marker.temp_dir(dataset_dir), FOLDER),
                     f'block-{block:07d}-{uuid.uuid4().hex}.jsonl')
  with FileSystems.create(
      path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
    for _, text in _keyed(rejections):
      f.write(text.encode('utf-8'))
  rejects = [r for r in rejections if not r.is_note]
  segments = sum(r.stage == SEGMENT for r in rejects)
  return BlockRejects(block, path,
                      len({r.path for r in rejects if r.stage != SEGMENT}),
                      len(rejects), len(rejections) - len(rejects), segments)


def _block_lines(part: BlockRejects) -> Iterator[Tuple[tuple, str]]:
  try:
    with FileSystems.open(
        part.path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
      for raw in f:
        text = raw.decode('utf-8')
        yield order(json.loads(text), text), text
  except (OSError, IOError) as e:
    raise run_marker.OutputChanged(
        f'{part.path}, which this run wrote, cannot be read ({e}): its '
        'output folder was changed by someone else while this job ran'
    ) from e


def lines(parts: Iterable[BlockRejects],
          held: Iterable[Rejection]) -> Iterator[str]:
  """rejects.jsonl's lines: the parts (in block order) merged with the
  rejections held in memory."""
  in_order = sorted(parts, key=lambda p: p.block)
  from_parts = itertools.chain.from_iterable(map(_block_lines, in_order))
  for _, text in heapq.merge(from_parts, _keyed(held)):
    yield text
