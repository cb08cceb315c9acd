"""rejects.jsonl: what a run did not use, and why.

One JSON object a line: a rejected file, or window, {"path", "stage",
"reason"[, "frames": [start, stop]]}, or a file used with a remark
{"path", "note"}. Written by the run's final step; read by inspect and by
--append (which files earlier parts rejected whole). Standard library
only: every layer imports it.
"""

import json
from typing import List

from pipeline.contract import naming
from pipeline.contract.errors import DatasetError

FILE_NAME = naming.REJECTS_FILE


def parse(text: str, where: str) -> List[dict]:
  """The records of a rejects.jsonl's text; DatasetError naming the line
  of one that is not such a record."""
  records = []
  for number, line in enumerate(text.splitlines(), 1):
    if not line.strip():
      continue
    try:
      record = json.loads(line)
    except ValueError as e:
      raise DatasetError(f'{where}, line {number}: not JSON ({e})') from e
    if not isinstance(record, dict) or not isinstance(record.get('path'),
                                                      str):
      raise DatasetError(f'{where}, line {number}: not a record with a '
                         f'"path": {line[:200]!r}')
    records.append(record)
  return records


def rejected_whole(record: dict) -> bool:
  """Whether a record rejects a whole file (not some of its windows, and
  not a note on a file that was used)."""
  return bool(record.get('stage')) and 'frames' not in record
