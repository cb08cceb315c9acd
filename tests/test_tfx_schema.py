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
