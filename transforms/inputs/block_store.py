"""Probe results kept between the passes of a run: one file per block.

Planning needs every file's probe twice, with a whole-corpus barrier before
each use: the dataset's rate (most files) before windows are counted, the
layout (every block's counts) before windows get their shard. Passed
through the graph, the probes were kept by the local runner between the
passes, one process holding every file's entry (722 MB at 1,000,000
files against 292 MB at 100,000). Written here, into the output's temp
folder (removed when the run completes), only each block's file name and
counts travel through the graph.
"""

import dataclasses
import pickle
import uuid
from typing import Dict, Iterable, Optional, Tuple

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.contract import naming
from transforms.runtime import output_lock as run_marker
from transforms.inputs.file_reports import Rejection, WavInfo

FOLDER = 'probes'


def write(dataset_dir: str, block: int, infos: Iterable[WavInfo],
          rejections: Iterable[Rejection] = (),
          entries: Optional[Dict[int, object]] = None) -> str:
  """Stores a block's probes, the rejections and notes of its files that
  probing made, and their manifest rows ({index: manifest.Entry}); returns
  the file's path.

  A fresh name per attempt: a block probed twice (a retry, or Beam's
  DaskRunner computing a branch again) never rewrites a file another task
  may be reading.
  """
  path = naming.join(naming.join(run_marker.temp_dir(dataset_dir), FOLDER),
                     f'block-{block:07d}-{uuid.uuid4().hex}')
  with FileSystems.create(
      path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
    # Probes as plain tuples: unpickling 20,000 frozen dataclasses took
    # 0.07 s, their tuples a fifth of it (what sources.jsonl reads).
    rows = tuple(tuple(vars(info).values()) for info in infos)
    f.write(pickle.dumps((rows, tuple(rejections), entries or {}),
                         protocol=pickle.HIGHEST_PROTOCOL))
  return path


def _load(path: str):
  try:
    with FileSystems.open(
        path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
      return pickle.loads(f.read())
  except (OSError, IOError) as e:
    raise run_marker.OutputChanged(
        f'{path}, which this run wrote, cannot be read ({e}): its output '
        'folder was changed by someone else while this job ran') from e


# Where a probe's fields sit in its stored tuple.
FIELD = {f.name: i for i, f in enumerate(dataclasses.fields(WavInfo))}


def read_rows(path: str) -> Tuple[tuple, ...]:
  """A block's probes as stored: one tuple of WavInfo's fields each (see
  FIELD)."""
  return _load(path)[0]


def read_rows_and_entries(path: str) -> Tuple[Tuple[tuple, ...],
                                              Dict[int, object]]:
  """A block's probes as stored (read_rows) and its files' manifest rows
  ({index: manifest.Entry})."""
  rows, _, entries = _load(path)
  return rows, entries


def read(path: str) -> Tuple[WavInfo, ...]:
  """A block's probes; OutputChanged when its file is gone (the output's
  temp folder was removed while the job ran)."""
  return read_all(path)[0]


def read_all(path: str) -> Tuple[Tuple[WavInfo, ...], Tuple[Rejection, ...],
                                 Dict[int, object]]:
  """A block's probes, its probing's rejections and notes, and its files'
  manifest rows (write)."""
  rows, rejections, entries = _load(path)
  return tuple(WavInfo(*row) for row in rows), rejections, entries
