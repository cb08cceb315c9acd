"""rejects.jsonl: what a run did not use, and why.

One JSON object a line: a rejected file, or window, {"path", "stage",
"reason"[, "frames": [start, stop]]}, or a file used with a remark
{"path", "note"}. A file --exclude left out is a record of stage EXCLUDED.
Written by the run's final step; read by inspect and by --append (which
files earlier parts rejected whole or excluded). Standard library only:
every layer imports it.
"""

from typing import List

from pipeline.contract import json_lines
from pipeline.contract import naming
from pipeline.contract.errors import DatasetError

FILE_NAME = naming.REJECTS_FILE
# The stage of a file left out by --exclude: not read, not rejected.
EXCLUDED = 'exclude'


def parse(text: str, where: str) -> List[dict]:
  """The records of a rejects.jsonl's text; DatasetError naming the line
  of one that is not such a record."""
  records = []
  try:
    for number, record in json_lines.values(text):
      if not isinstance(record, dict) or not isinstance(record.get('path'),
                                                        str):
        raise DatasetError(f'{where}, line {number}: not a record with a '
                           f'"path": {str(record)[:200]!r}')
      records.append(record)
  except json_lines.NotJson as e:
    raise DatasetError(f'{where}, line {e.number}: not JSON '
                       f'({e.cause})') from e
  return records


def rejected_whole(record: dict) -> bool:
  """Whether a record rejects (or excludes) a whole file (not some of its
  windows, and not a note on a file that was used)."""
  return bool(record.get('stage')) and 'frames' not in record


def excluded(record: dict) -> bool:
  """Whether a record is a file --exclude left out."""
  return record.get('stage') == EXCLUDED
