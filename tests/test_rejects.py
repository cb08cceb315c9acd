"""pipeline/contract/rejects: reading rejects.jsonl, as the final step
writes it."""

import json

import pytest

from pipeline.contract import rejects
from pipeline.contract.errors import DatasetError
from transforms.inputs.file_reports import Rejection

WRITTEN = [Rejection('/in/a.wav', 'empty file (0 bytes)', 'probe'),
           Rejection('/in/b.wav', 'non-finite samples (NaN or Inf)', 'read',
                     (1024, 2048)),
           Rejection('/in/c.wav', 'data size unknown (...)', 'note'),
           Rejection('/in/d.wav', 'no row in the manifest (m.csv)', 'list')]


def test_the_records_the_final_step_writes_read_back():
  text = ''.join(json.dumps(r.to_json()) + '\n' for r in WRITTEN) + '\n'
  records = rejects.parse(text, 'rejects.jsonl')
  assert records == [r.to_json() for r in WRITTEN]
  assert [rejects.rejected_whole(r) for r in records] == [
      True, False, False, True]   # windows and notes are not whole files


@pytest.mark.parametrize('line,message', [
    ('{"path": "/in/a.wav", "stage"', 'line 2: not JSON'),
    ('["/in/a.wav"]', 'line 2: not a record with a "path"'),
    ('{"reason": "x"}', 'line 2: not a record with a "path"'),
])
def test_a_line_that_is_no_record_is_named(line, message):
  text = json.dumps(WRITTEN[0].to_json()) + '\n' + line + '\n'
  with pytest.raises(DatasetError, match=f'OUT/rejects.jsonl, {message}'):
    rejects.parse(text, 'OUT/rejects.jsonl')
