"""pipeline/contract/parts: the parts index, and the merged view readers
read by."""

import numpy as np
import pytest

from pipeline.contract import parts
from transforms.writing.stats import Moments


def test_index_round_trip_and_refusals():
  names = ['.', 'part-00001', 'part-00002']
  assert parts.parse(parts.dumps(names), 'p') == names
  for bad in ('{"format": "wavbeam-parts", "parts": ["part-00001"]}',
              '{"format": "wavbeam-parts", "parts": [".", "../x"]}',
              '{"format": "other", "parts": ["."]}', 'not json'):
    with pytest.raises(parts.PartsError):
      parts.parse(bad, 'p')
  assert parts.select(names, None) == [0, 1, 2]
  assert parts.select(names, [2, '.']) == [0, 2]
  with pytest.raises(parts.PartsError, match='unknown part'):
    parts.select(names, ['part-00009'])


def _meta(classes, shards, stats, count):
  return {'classes': classes, 'schema': {'x': {}},
          'counts': {'examples': count, 'files_seen': count},
          'splits': {'train': {
              'num_examples': count, 'num_bytes': 10 * count,
              'example_bytes': 9 * count, 'num_files': count,
              'examples_per_class': {c: 1 for c in classes},
              'shards': shards, 'statistics': {'x': stats}}}}


def test_merge_names_files_from_the_folder_and_pools_statistics():
  rng = np.random.default_rng(0)
  a, b = rng.normal(0, 1, 100), rng.normal(5, 3, 37)
  first = _meta(['owl'], [{'file': 's0', 'num_examples': 100}],
                Moments.of(a).to_json(), 100)
  second = _meta(['owl', 'kite'], [{'file': 's0', 'num_examples': 37}],
                 Moments.of(b).to_json(), 37)
  merged = parts.merge([first, second], ['.', 'part-00001'])
  train = merged['splits']['train']
  assert [s['file'] for s in train['shards']] == ['s0', 'part-00001/s0']
  assert train['num_examples'] == 137 and merged['counts']['examples'] == 137
  assert train['examples_per_class'] == {'kite': 1, 'owl': 2}
  assert merged['classes'] == ['owl', 'kite']
  whole = Moments.of(np.concatenate([a, b])).to_json()
  for key in ('count', 'mean', 'std', 'min', 'max'):
    assert train['statistics']['x'][key] == pytest.approx(whole[key],
                                                          rel=1e-12)
  second['schema'] = {'y': {}}
  with pytest.raises(parts.PartsError, match='other features'):
    parts.merge([first, second], ['.', 'part-00001'])
