"""bench/common_voice.py: the Common-Voice-shaped run in file mode, with
speaker-disjoint splits, and its checks, which must catch a wrong
example."""

import csv
import os

import pytest

from bench import common_voice

pytestmark = pytest.mark.slow


def test_a_common_voice_shaped_corpus_passes_every_check(tmp_path):
  assert common_voice.main(['--utterances', '160', '--work',
                            str(tmp_path)]) == 0
  corpus, out = str(tmp_path / 'corpus'), str(tmp_path / 'out')
  assert common_voice.check(corpus, out) == []
  # The checks see a transcript, a speaker and a sample that differ.
  rows = list(common_voice.read_rows(corpus).values())
  rows[0]['sentence'] = 'Another sentence.'
  rows[1]['client_id'] = rows[2]['client_id'] + 'x'
  with open(os.path.join(corpus, 'validated.tsv'), 'w', newline='',
            encoding='utf-8') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter='\t',
                            quoting=csv.QUOTE_NONE, escapechar='\\')
    writer.writeheader()
    writer.writerows(rows)
  failures = common_voice.check(corpus, out)
  assert any(rows[0]['path'] in f and 'transcript' in f for f in failures)
  assert any(rows[1]['path'] in f and 'transcript or speaker' in f
             for f in failures)
