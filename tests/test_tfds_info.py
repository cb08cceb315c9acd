"""pipeline/contract/tfds_info: the TFDS files (dataset_info.json,
features.json, labels) from a metadata, on their own
(test_integration_interop loads them with TFDS)."""

import json

from pipeline.contract import tfds_info


def _metadata(**kw):
  meta = {
      'name': 'birds', 'version': '1.2.3', 'num_classes': 2,
      'classes': ['owl', 'wren'], 'input_key': 'spectrogram',
      'compression': 'none',
      'schema': {
          'signal': {'dtype': 'int16', 'shape': [8], 'encoding': 'raw_bytes'},
          'spectrogram': {'dtype': 'float32', 'shape': [3, 4],
                          'encoding': 'float_list'},
          'class': {'dtype': 'string', 'shape': [],
                    'encoding': 'bytes_list'},
          'target': {'dtype': 'int64', 'shape': [],
                     'encoding': 'int64_list'}},
      'splits': {
          'train': {'example_bytes': 900, 'shards': [
              {'file': 'birds-train.tfrecord-00000-of-00002',
               'num_examples': 5, 'num_bytes': 500},
              {'file': 'birds-train.tfrecord-00001-of-00002',
               'num_examples': 4, 'num_bytes': 400}]},
          'test': {'example_bytes': 0, 'shards': []}}}
  meta.update(kw)
  return meta


def test_files_describe_features_splits_and_labels():
  files, empty = tfds_info.files(_metadata())
  files = dict(files)
  assert empty == ['test']  # TFDS wants a shard per split
  info = json.loads(files['dataset_info.json'])
  assert (info['name'], info['version'], info['fileFormat']) == (
      'birds', '1.2.3', 'tfrecord')
  assert [s['name'] for s in info['splits']] == ['train']
  assert info['splits'][0]['shardLengths'] == ['5', '4']
  assert info['splits'][0]['numBytes'] == '900'
  assert 'alternativeFileFormats' not in info
  assert info['supervisedKeys']['tuple']['items'] == [
      {'featureKey': 'spectrogram'}, {'featureKey': 'target'}]
  features = json.loads(files['features.json'])['featuresDict']['features']
  assert features['target']['classLabel'] == {'numClasses': '2'}
  assert features['class']['text'] == {}
  assert features['signal']['tensor'] == {
      'shape': {'dimensions': ['8']}, 'dtype': 'int16', 'encoding': 'bytes'}
  assert features['spectrogram']['tensor']['shape'] == {
      'dimensions': ['3', '4']}
  assert files['target.labels.txt'] == 'owl\nwren\n'


def test_unlabelled_and_array_record():
  meta = _metadata(num_classes=0, classes=[])
  meta['splits']['train']['array_record'] = [{'file': 'x'}]
  files = dict(tfds_info.files(meta)[0])
  info = json.loads(files['dataset_info.json'])
  assert 'supervisedKeys' not in info and 'target.labels.txt' not in files
  assert info['alternativeFileFormats'] == ['array_record']
  features = json.loads(files['features.json'])['featuresDict']['features']
  assert 'tensor' in features['target']  # a plain int64, no ClassLabel


def test_skip_reasons():
  ok = _metadata()
  assert tfds_info.skip_reason('birds', 'none', ok['splits']) is None
  assert 'compressed' in tfds_info.skip_reason('birds', 'gzip', ok['splits'])
  assert 'not a TFDS name' in tfds_info.skip_reason('Birds', 'none',
                                                    ok['splits'])
  empty = {'train': {'shards': []}}
  assert 'no split' in tfds_info.skip_reason('birds', 'none', empty)
