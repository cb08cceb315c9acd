"""transforms/inputs/sources: sources.jsonl's lines."""

import json

import pytest

from transforms.inputs import sources


@pytest.mark.parametrize('path', ['a/b.wav', 'quote "x".wav', 'ünï\\c\n.wav',
                                  'tab\t.wav'])
def test_a_line_is_sorted_json_and_parses_back(path):
  text = sources.line(path, 123, 2**32 - 1)
  assert text == json.dumps({'path': path, 'size': 123,
                             'head_crc32c': 2**32 - 1},
                            sort_keys=True) + '\n'
  assert list(sources.parse(text, 'x')) == [
      {'path': path, 'size': 123, 'head_crc32c': 2**32 - 1,
       'segments': None}]
  with_segments = sources.line(path, 123, 7, segments=2**32 - 2)
  assert with_segments == json.dumps({'path': path, 'size': 123,
                                      'head_crc32c': 7,
                                      'segments': 2**32 - 2},
                                     sort_keys=True) + '\n'
  assert list(sources.parse(with_segments, 'x'))[0]['segments'] == 2**32 - 2


def test_a_bad_line_names_its_number():
  with pytest.raises(ValueError, match='x line 2'):
    list(sources.parse(sources.line('a', 1, 2) + '{"path": 3}\n', 'x'))
