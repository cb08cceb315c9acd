"""TensorFlow Datasets metadata: dataset_info.json, features.json, labels.

Beside the shards, these make `tfds.builder_from_directory(OUT)` load every
split with the right dtypes and shapes, exact split sizes, a ClassLabel with
the real class names and supervised keys. Formats as verified with
tensorflow-datasets 4.9.10 (tests/test_integration_interop.py loads them
with it). Standard library only.
"""

import json
import re
from typing import Dict, List, Mapping, Optional, Tuple

from pipeline.contract import metadata as metadata_lib
from pipeline.contract import naming
from pipeline.contract import schema as schema_lib

_TENSOR = 'tensorflow_datasets.core.features.tensor_feature.Tensor'
_TEXT = 'tensorflow_datasets.core.features.text_feature.Text'
_CLASS_LABEL = ('tensorflow_datasets.core.features.class_label_feature.'
                'ClassLabel')
_FEATURES_DICT = ('tensorflow_datasets.core.features.features_dict.'
                  'FeaturesDict')
LABEL_KEY = schema_lib.LABEL_KEY


def _dumps(obj) -> str:
  return json.dumps(obj, indent=2, sort_keys=True) + '\n'


def skip_reason(name: str, compression: str,
                splits: Mapping[str, Mapping]) -> Optional[str]:
  """Why TFDS could not load this dataset, or None when it can."""
  if compression != 'none':
    return f'--compression={compression}: TFDS cannot read compressed shards'
  if not re.fullmatch(r'[a-z][a-z0-9_]*', name):
    return (f'--dataset_name={name!r} is not a TFDS name (lowercase letters, '
            'digits and "_", starting with a letter)')
  if not any(entry['shards'] for entry in splits.values()):
    return 'no split holds any example'
  return None


def _feature(key: str, spec: schema_lib.FeatureSpec,
             num_classes: int) -> Dict:
  if key == LABEL_KEY and num_classes > 0:
    return {'pythonClassName': _CLASS_LABEL,
            'classLabel': {'numClasses': str(num_classes)}}
  if spec.encoding == schema_lib.BYTES_LIST:
    return {'pythonClassName': _TEXT, 'text': {}}
  shape = ({'dimensions': [str(d) for d in spec.shape]} if spec.shape else {})
  encoding = 'bytes' if spec.encoding == schema_lib.RAW_BYTES else 'none'
  return {'pythonClassName': _TENSOR,
          'tensor': {'shape': shape, 'dtype': spec.dtype,
                     'encoding': encoding}}


def files(metadata: Mapping) -> Tuple[List[Tuple[str, str]], List[str]]:
  """([(file name, text)], [split names left out because empty])."""
  schema = schema_lib.Schema.from_json(metadata['schema'])
  num_classes = metadata['num_classes']
  features = {
      'pythonClassName': _FEATURES_DICT,
      'featuresDict': {'features': {
          key: _feature(key, spec, num_classes)
          for key, spec in schema.features}}}
  splits, empty = [], []
  for name, entry in sorted(metadata['splits'].items()):
    if not entry['shards']:
      empty.append(name)  # TFDS wants at least one shard per split
      continue
    splits.append({
        'name': name,
        'filepathTemplate': naming.TFDS_FILEPATH_TEMPLATE,
        'shardLengths': [str(s['num_examples']) for s in entry['shards']],
        # TFDS counts serialized example bytes, without record framing.
        'numBytes': str(entry['example_bytes'])})
  info = {
      'name': metadata['name'],
      'version': metadata['version'],
      'fileFormat': 'tfrecord',
      # as_data_source picks the random-access copy when there is one.
      **({'alternativeFileFormats': [naming.ARRAY_RECORD]}
         if metadata_lib.has_array_record(metadata) else {}),
      'description': (
          {'file': 'Whole recordings', 'segment': 'Segments of recordings'}.get(
              metadata.get('config', {}).get('example_unit'),
              'Windows of WAV recordings') +
          ' written by wavbeam; see metadata.json.'),
      'splits': splits,
  }
  if num_classes > 0:
    # TFDS's current form; its proto marks `input`/`output` deprecated.
    info['supervisedKeys'] = {'tuple': {'items': [
        {'featureKey': metadata['input_key']}, {'featureKey': LABEL_KEY}]}}
  out = [('dataset_info.json', _dumps(info)),
         ('features.json', _dumps(features))]
  if num_classes > 0:
    out.append((f'{LABEL_KEY}.labels.txt',
                ''.join(c + '\n' for c in metadata['classes'])))
  return out, empty
