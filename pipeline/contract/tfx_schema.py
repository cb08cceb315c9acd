"""schema.pbtxt: a tensorflow_metadata Schema for TFX tooling (TFXIO, TFDV).

float32 arrays are FLOAT features with their shape, so TFX and TFDV see
numbers; `class` has a string domain of the class names and `target` an
int domain of their indices. Raw-bytes arrays (integer and float64) are
BYTES features: the schema cannot state their decoded dtype and shape, so
annotations carry them (tags `wavbeam.dtype:int32`, `wavbeam.shape:32768`,
`wavbeam.encoding:raw_bytes_little_endian`). A variable-length array
(--example_unit file) has no fixed shape: a FLOAT one is a list of at
least one row, and both carry `wavbeam.shape:-1,...` and
`wavbeam.length_key:KEY`, the int64 feature that holds its length.
Built as the Schema proto and
printed by protobuf's text_format, which escapes any feature key; the
tensorflow-metadata package is protobuf only (no TensorFlow).
"""

from typing import Mapping

from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from pipeline.contract import schema as schema_lib

FILE_NAME = 'schema.pbtxt'
LABEL_KEY = schema_lib.LABEL_KEY
CLASS_KEY = schema_lib.CLASS_KEY
_TYPES = {schema_lib.RAW_BYTES: schema_pb2.BYTES,
          schema_lib.BYTES_LIST: schema_pb2.BYTES,
          schema_lib.INT64_LIST: schema_pb2.INT,
          schema_lib.FLOAT_LIST: schema_pb2.FLOAT}


def proto(metadata: Mapping) -> schema_pb2.Schema:
  schema = schema_lib.Schema.from_json(metadata['schema'])
  out = schema_pb2.Schema()
  for key, spec in schema.features:
    feature = out.feature.add(name=key, type=_TYPES[spec.encoding])
    if key == LABEL_KEY and metadata['num_classes'] > 0:
      feature.int_domain.min = 0
      feature.int_domain.max = metadata['num_classes'] - 1
      feature.int_domain.is_categorical = True
    if key == CLASS_KEY and metadata['num_classes'] > 0:
      # TFDV then reports class frequencies and flags unknown classes.
      feature.string_domain.name = CLASS_KEY
      feature.string_domain.value.extend(metadata['classes'])
    feature.presence.min_fraction = 1.0
    if spec.encoding == schema_lib.FLOAT_LIST and spec.variable:
      # No fixed shape: TFXIO reads it as a variable-length (ragged)
      # list; a whole number of rows of the fixed dimensions.
      feature.value_count.min = spec.row_size
    else:
      feature.shape.SetInParent()  # a scalar, or one value per example
    if spec.encoding == schema_lib.FLOAT_LIST and not spec.variable:
      for size in spec.shape:
        feature.shape.dim.add(size=size)
    if spec.encoding == schema_lib.RAW_BYTES:
      feature.annotation.tag.extend([
          f'wavbeam.dtype:{spec.dtype}',
          f'wavbeam.shape:{",".join(map(str, spec.shape))}',
          'wavbeam.encoding:raw_bytes_little_endian'])
    elif spec.variable:
      feature.annotation.tag.append(
          f'wavbeam.shape:{",".join(map(str, spec.shape))}')
    if spec.variable:
      # -1: the first dimension is this example's `length_key`.
      feature.annotation.tag.append(f'wavbeam.length_key:{spec.length_key}')
  return out


def text(metadata: Mapping) -> str:
  return text_format.MessageToString(proto(metadata), as_utf8=True)
