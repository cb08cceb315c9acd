"""pipeline/contract/tfx_schema: schema.pbtxt for TFX tooling, on its own."""

from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from pipeline.contract import tfx_schema
from tests.test_tfds_info import _metadata


def test_types_domains_shapes_and_annotations():
  schema = schema_pb2.Schema()
  text_format.Parse(tfx_schema.text(_metadata()), schema)  # round trip
  features = {f.name: f for f in schema.feature}
  assert features['spectrogram'].type == schema_pb2.FLOAT
  assert [d.size for d in features['spectrogram'].shape.dim] == [3, 4]
  assert features['signal'].type == schema_pb2.BYTES
  assert list(features['signal'].annotation.tag) == [
      'wavbeam.dtype:int16', 'wavbeam.shape:8',
      'wavbeam.encoding:raw_bytes_little_endian']
  target = features['target']
  assert target.type == schema_pb2.INT
  assert (target.int_domain.min, target.int_domain.max) == (0, 1)
  assert target.int_domain.is_categorical
  assert list(features['class'].string_domain.value) == ['owl', 'wren']
  assert all(f.presence.min_fraction == 1.0 for f in schema.feature)
  assert not features['class'].shape.dim  # a scalar


def test_unlabelled_has_no_domains():
  schema = tfx_schema.proto(_metadata(num_classes=0, classes=[]))
  features = {f.name: f for f in schema.feature}
  assert not features['target'].HasField('int_domain')
  assert not features['class'].HasField('string_domain')


def test_a_variable_length_array_has_no_fixed_shape_and_names_its_length():
  metadata = _metadata()
  metadata['schema'] = dict(
      metadata['schema'],
      num_frames={'dtype': 'int64', 'shape': [], 'encoding': 'int64_list'},
      num_samples={'dtype': 'int64', 'shape': [], 'encoding': 'int64_list'},
      spectrogram={'dtype': 'float32', 'shape': [-1, 4],
                   'encoding': 'float_list', 'length_key': 'num_frames'},
      signal={'dtype': 'int16', 'shape': [-1], 'encoding': 'raw_bytes',
              'length_key': 'num_samples'})
  schema = schema_pb2.Schema()
  text_format.Parse(tfx_schema.text(metadata), schema)
  features = {f.name: f for f in schema.feature}
  spectrogram = features['spectrogram']
  assert not spectrogram.HasField('shape')
  assert spectrogram.value_count.min == 4
  assert list(spectrogram.annotation.tag) == [
      'wavbeam.shape:-1,4', 'wavbeam.length_key:num_frames']
  assert list(features['signal'].annotation.tag) == [
      'wavbeam.dtype:int16', 'wavbeam.shape:-1',
      'wavbeam.encoding:raw_bytes_little_endian',
      'wavbeam.length_key:num_samples']
  assert features['signal'].HasField('shape')  # one bytes value
