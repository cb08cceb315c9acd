"""Element dict <-> serialized tf.train.Example, driven by `pipeline.schema`.

The tf.train.Example wire format is written directly (it is four nested
length-delimited messages), so workers encode without importing TensorFlow
and the bytes are deterministic: keys in sorted order, one copy of each array.
TensorFlow's own parser is the independent check in the tests.
"""

import struct
from typing import Any, Dict, Mapping

import numpy as np

from pipeline import schema as schema_lib

_LEN1 = b'\x0a'  # field 1, length-delimited
_LEN2 = b'\x12'  # field 2, length-delimited
_LEN3 = b'\x1a'  # field 3, length-delimited
# Feature.kind field tags.
_KIND_TAG = {
    schema_lib.BYTES_LIST: _LEN1,
    schema_lib.RAW_BYTES: _LEN1,
    schema_lib.FLOAT_LIST: _LEN2,
    schema_lib.INT64_LIST: _LEN3,
}


def _varint(n: int) -> bytes:
  if n < 0:
    n += 1 << 64  # int64 varints are two's complement, 10 bytes
  out = bytearray()
  while n > 0x7f:
    out.append((n & 0x7f) | 0x80)
    n >>= 7
  out.append(n)
  return bytes(out)


def to_array(value: Any) -> np.ndarray:
  """A feature value as the numpy array (or str) that will be stored."""
  if isinstance(value, str):
    return value
  if isinstance(value, bytes):
    raise TypeError('byte strings are not features; pass str or an array')
  if isinstance(value, bool):
    return np.asarray(value)
  if isinstance(value, int):
    return np.int64(value)
  if isinstance(value, float):
    return np.float32(value) if np.float32(value) == value else np.float64(value)
  return np.asarray(value)


def spec_of(value: Any) -> schema_lib.FeatureSpec:
  value = to_array(value)
  if isinstance(value, str):
    return schema_lib.FeatureSpec(schema_lib.STRING, ())
  return schema_lib.FeatureSpec(value.dtype.name, value.shape)


def schema_of(element: Mapping[str, Any]) -> schema_lib.Schema:
  return schema_lib.Schema.of({k: spec_of(v) for k, v in element.items()})


def _payload(value: Any, encoding: str):
  """The packed field-1 payload of the typed list, as a buffer."""
  if encoding == schema_lib.BYTES_LIST:
    data = value.encode('utf-8')
    return _LEN1 + _varint(len(data)) + data
  if encoding == schema_lib.INT64_LIST:
    data = _varint(int(value))
    return _LEN1 + _varint(len(data)) + data
  if encoding == schema_lib.FLOAT_LIST:
    data = struct.pack('<f', value)
    return _LEN1 + _varint(len(data)) + data
  raise AssertionError(encoding)


def encode_example(element: Mapping[str, Any],
                   schema: schema_lib.Schema = None) -> bytes:
  """Serializes one element as a tf.train.Example.

  With `schema`, values are checked against it (dtype and shape); arrays are
  written as little-endian raw bytes whatever the machine's byte order.
  """
  parts = []
  features_len = 0
  for key in sorted(element):
    value = to_array(element[key])
    spec = spec_of(value)
    if schema is not None and schema[key] != spec:
      raise schema_lib.SchemaError(
          f'feature {key!r}: expected {schema[key]}, got {spec}')
    encoding = spec.encoding
    if encoding == schema_lib.RAW_BYTES:
      arr = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder('<'))
      data = memoryview(arr.reshape(-1).view(np.uint8))
      head = _LEN1 + _varint(len(data))
      payload_len = len(head) + len(data)
      payload_parts = (head, data)
    else:
      payload = _payload(value, encoding)
      payload_len = len(payload)
      payload_parts = (payload,)
    kind_head = _KIND_TAG[encoding] + _varint(payload_len)
    feature_len = len(kind_head) + payload_len
    key_bytes = key.encode('utf-8')
    entry_head = (_LEN1 + _varint(len(key_bytes)) + key_bytes +
                  _LEN2 + _varint(feature_len))
    entry_len = len(entry_head) + feature_len
    entry_tag = _LEN1 + _varint(entry_len)
    parts.extend((entry_tag, entry_head, kind_head) + payload_parts)
    features_len += len(entry_tag) + entry_len
  return b''.join([_LEN1 + _varint(features_len)] + parts)


def decode_raw(data: bytes, spec: schema_lib.FeatureSpec) -> np.ndarray:
  """Inverse of the raw-bytes encoding, for numpy readers."""
  dtype = np.dtype(spec.dtype).newbyteorder('<')
  return np.frombuffer(data, dtype=dtype).reshape(spec.shape)

