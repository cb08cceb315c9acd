"""Element dict <-> serialized tf.train.Example, driven by the schema
(`pipeline.contract.schema`).

The tf.train.Example wire format is written directly (it is four nested
length-delimited messages), so workers encode without importing TensorFlow
and the bytes are deterministic: keys in sorted order, one copy of each array.
TensorFlow's own parser is the independent check in the tests.
"""

import functools
import struct
from typing import Any, List, Mapping

import numpy as np

from pipeline.contract import schema as schema_lib

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


# The varints of 0..127: one byte each, the most common case by far.
_SMALL_VARINTS = [bytes((n,)) for n in range(0x80)]


def _varint(n: int) -> bytes:
  if 0 <= n < 0x80:
    return _SMALL_VARINTS[n]
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
    return (np.float32(value) if np.float32(value) == value
            else np.float64(value))
  return np.asarray(value)


def spec_of(value: Any) -> schema_lib.FeatureSpec:
  value = to_array(value)
  if isinstance(value, str):
    return schema_lib.FeatureSpec(schema_lib.STRING, ())
  return schema_lib.FeatureSpec(value.dtype.name, value.shape)


def _payload(value: Any, encoding: str) -> bytes:
  """The packed field-1 payload of a typed list."""
  if encoding == schema_lib.BYTES_LIST:
    data = value.encode('utf-8')
  elif encoding == schema_lib.INT64_LIST:
    data = _varint(int(value))
  elif encoding == schema_lib.FLOAT_LIST:
    data = struct.pack('<f', value)
  else:
    raise AssertionError(encoding)
  return _LEN1 + _varint(len(data)) + data


def _entry_head(key: bytes, encoding: str, payload_len: int) -> bytes:
  """Map entry {key, Feature{kind: payload}} up to the payload."""
  kind_head = _KIND_TAG[encoding] + _varint(payload_len)
  feature_len = len(kind_head) + payload_len
  body_head = _LEN1 + _varint(len(key)) + key + _LEN2 + _varint(feature_len)
  return (_LEN1 + _varint(len(body_head) + feature_len) + body_head +
          kind_head)


@functools.lru_cache(maxsize=256)
def _array_head(key: bytes, encoding: str, num_bytes: int) -> bytes:
  """Everything before an array's bytes, for raw bytes (one BytesList item)
  and float32 (a packed FloatList): the same framing under another kind
  tag. Fixed for a fixed shape."""
  if encoding == schema_lib.FLOAT_LIST and num_bytes == 0:
    inner = b''  # protobuf writes no field for an empty packed list
  else:
    inner = _LEN1 + _varint(num_bytes)
  return _entry_head(key, encoding, len(inner) + num_bytes) + inner


def _row_spec(column) -> schema_lib.FeatureSpec:
  if isinstance(column, np.ndarray):
    return _array_spec(column.dtype, column.shape[1:])
  first = column[0]
  if type(first) is str:  # not a subclass
    return _STRING_SPEC
  if type(first) is int and _INT64_MIN <= first <= _INT64_MAX:  # not bool
    return _INT64_SPEC
  return spec_of(first)


@functools.lru_cache(maxsize=256)
def _array_spec(dtype: np.dtype, row_shape) -> schema_lib.FeatureSpec:
  """The spec of an array column's rows: one per dtype and shape, made
  once (FeatureSpec checks the dtype and shape as it is built)."""
  return schema_lib.FeatureSpec(dtype.name, row_shape)


# What spec_of gives for a str and for an int that to_array stores as
# an int64 (spec_of refuses one out of that range).
_STRING_SPEC = schema_lib.FeatureSpec(schema_lib.STRING, ())
_INT64_SPEC = schema_lib.FeatureSpec('int64', ())
_INT64_MIN, _INT64_MAX = -2**63, 2**63 - 1


def batch_schema(columns: Mapping[str, Any]) -> schema_lib.Schema:
  """Schema of the examples `encode_batch(columns)` writes."""
  return schema_lib.Schema.of({k: _row_spec(c) for k, c in columns.items()})


def encode_batch(columns: Mapping[str, Any], n: int) -> List[bytes]:
  """Serializes n examples given column-wise.

  A column is a numpy array whose first axis is the example (one array per
  example, e.g. a batch of spectrograms) or a sequence of n values (scalars
  or strings). Keys are written in sorted order; arrays as little-endian
  bytes (raw, or a packed FloatList for float32), sliced from the batch
  without copying.
  """
  # Per column, in key order: (head, row bytes) of an array, each row its
  # head then its bytes; (None, entries) of scalars, an entry a row.
  writers = []
  for key in sorted(columns):
    column, key_bytes = columns[key], key.encode('utf-8')
    if isinstance(column, np.ndarray) and column.shape[0] != n:
      raise ValueError(f'column {key!r} has {column.shape[0]} rows, not {n}')
    spec = _row_spec(column)
    encoding = spec.encoding
    if encoding == schema_lib.RAW_BYTES or (
        encoding == schema_lib.FLOAT_LIST and isinstance(column, np.ndarray)):
      batch = np.ascontiguousarray(column, column.dtype.newbyteorder('<'))
      width = batch[0].nbytes if n else 0
      flat = memoryview(batch.reshape(-1).view(np.uint8))
      writers.append((_array_head(key_bytes, encoding, width),
                      [flat[i * width:(i + 1) * width] for i in range(n)]))
    else:
      writers.append((None, _scalar_entries(key_bytes, encoding, column)))
  records = []
  for i in range(n):
    parts = [b'']
    for head, rows in writers:
      if head is not None:
        parts.append(head)
      parts.append(rows[i])
    parts[0] = _LEN1 + _varint(sum(map(len, parts)))
    records.append(b''.join(parts))
  return records


def _scalar_entries(key_bytes: bytes, encoding: str, column) -> List[bytes]:
  """The map entry of each value of a scalar column. A short str or an
  int64 (not a bool) is encoded once per worker (_cached_entry): a batch's
  examples, and a sweep's variants, mostly repeat their labels, paths and
  indices. Longer strings (a manifest's transcripts) are encoded each
  time: kept, 16,000 of them could take hundreds of MB."""
  entries = []
  for value in column:
    kind = type(value)
    if ((kind is str and len(value) <= _CACHED_STR_CHARS) or
        (kind is int and _INT64_MIN <= value <= _INT64_MAX)):
      entries.append(_cached_entry(key_bytes, encoding, value))
    else:
      entries.append(_entry(key_bytes, encoding, to_array(value)))
  return entries


def _entry(key_bytes: bytes, encoding: str, value) -> bytes:
  payload = _payload(value, encoding)
  return _entry_head(key_bytes, encoding, len(payload)) + payload


# Only str and int64 values come here: a float's -0.0 equals 0.0, a bool
# equals 0 or 1, and each needs entries of its own. Some 16,000 entries of
# strings up to 256 characters: at most about 10 MB.
_CACHED_STR_CHARS = 256
_cached_entry = functools.lru_cache(maxsize=1 << 14, typed=True)(_entry)


def numpy_dtype(name: str) -> np.dtype:
  """The numpy dtype of a schema's dtype name: bfloat16 is ml_dtypes'
  (imported only for it)."""
  if name == 'bfloat16':
    import ml_dtypes  # pylint: disable=import-outside-toplevel
    return np.dtype(ml_dtypes.bfloat16)
  return np.dtype(name)


def decode_raw(data: bytes, spec: schema_lib.FeatureSpec) -> np.ndarray:
  """Inverse of the raw-bytes encoding, for numpy readers."""
  dtype = numpy_dtype(spec.dtype).newbyteorder('<')
  values = np.frombuffer(data, dtype=dtype)
  return values.reshape(_shape(spec, values.size))



# --- decoding ---------------------------------------------------------------


def _read_varint(buf, pos):
  result = shift = 0
  while True:
    if pos >= len(buf):
      raise ValueError('truncated varint')
    byte = buf[pos]
    pos += 1
    result |= (byte & 0x7f) << shift
    if not byte & 0x80:
      return result, pos
    shift += 7
    if shift > 63:
      raise ValueError('varint too long')


def _fields(buf):
  """(field number, wire type, value) of one protobuf message."""
  pos = 0
  while pos < len(buf):
    tag, pos = _read_varint(buf, pos)
    number, wire = tag >> 3, tag & 7
    if wire == 0:
      value, pos = _read_varint(buf, pos)
    elif wire == 2:
      length, pos = _read_varint(buf, pos)
      if pos + length > len(buf):
        raise ValueError('truncated field')
      value, pos = buf[pos:pos + length], pos + length
    elif wire == 5:
      value, pos = buf[pos:pos + 4], pos + 4
    elif wire == 1:
      value, pos = buf[pos:pos + 8], pos + 8
    else:
      raise ValueError(f'unsupported wire type {wire}')
    yield number, wire, value


def _int64s(payload):
  values, pos = [], 0
  while pos < len(payload):
    v, pos = _read_varint(payload, pos)
    values.append(_int64_of(v))
  return values


def _int64_of(varint: int) -> int:
  """An int64 varint's value: its low 64 bits, two's complement (bits
  past them dropped, as protobuf and TensorFlow drop them)."""
  varint &= (1 << 64) - 1
  return varint - (1 << 64) if varint >= 1 << 63 else varint


def decode_example(data: bytes, schema: schema_lib.Schema,
                   copy: bool = True) -> dict:
  """Inverse of encode_batch, checked against `schema` (numpy, no TF).

  Arrays are writable copies, or with `copy=False` read-only views of
  `data` (possibly unaligned), for a caller that copies them on at once.
  Raises SchemaError naming the key when a feature is missing, extra, of
  the wrong kind or of the wrong size.
  """
  data = memoryview(data)
  features = {}
  try:
    for number, wire, value in _fields(data):
      if number != 1 or wire != 2:
        continue
      for n2, w2, entry in _fields(value):  # Features.feature map entries
        if n2 != 1 or w2 != 2:
          continue
        key, feature = None, None
        for n3, _, v3 in _fields(entry):
          if n3 == 1:
            key = bytes(v3).decode('utf-8')
          elif n3 == 2:
            feature = v3
        features[key] = list(_fields(feature))
  except ValueError as e:
    raise schema_lib.SchemaError(f'not a tf.train.Example ({e})') from e
  specs = schema.as_dict()
  extra, missing = set(features) - set(specs), set(specs) - set(features)
  if extra or missing:
    raise schema_lib.SchemaError(
        f'keys differ from the schema: missing {sorted(missing)}, '
        f'extra {sorted(extra)}')
  out = {}
  for key, spec in specs.items():
    kinds = features[key]
    kind = kinds[0][0] if len(kinds) == 1 else None
    expected = {schema_lib.RAW_BYTES: 1, schema_lib.BYTES_LIST: 1,
                schema_lib.FLOAT_LIST: 2, schema_lib.INT64_LIST: 3}
    if kind != expected[spec.encoding]:
      raise schema_lib.SchemaError(f'feature {key!r}: stored kind {kind}, '
                                   f'schema says {spec.encoding}')
    items = [v for n, _, v in _fields(kinds[0][2]) if n == 1]
    if spec.encoding in (schema_lib.RAW_BYTES, schema_lib.BYTES_LIST):
      if len(items) != 1:
        raise schema_lib.SchemaError(f'feature {key!r}: {len(items)} values')
      if spec.encoding == schema_lib.BYTES_LIST:
        out[key] = bytes(items[0]).decode('utf-8')
        continue
      _check_size(key, spec, len(items[0]),
                  numpy_dtype(spec.dtype).itemsize,
                  'bytes')
      # bytearray copies: writable arrays (PyTorch warns on read-only ones).
      out[key] = decode_raw(bytearray(items[0]) if copy else items[0], spec)
    elif spec.encoding == schema_lib.INT64_LIST:
      values = _int64s(items[0]) if items else []
      if len(values) != 1:
        raise schema_lib.SchemaError(f'feature {key!r}: {len(values)} values')
      out[key] = np.int64(values[0])
    else:
      # Packed (one item) or, from other writers, one 4-byte item per value.
      if len(items) == 1:
        raw = bytearray(items[0]) if copy else items[0]
      else:
        raw = bytearray().join(items)
      _check_size(key, spec, len(raw) // 4, 1, 'float32 values')
      values = np.frombuffer(raw, '<f4').reshape(_shape(spec, len(raw) // 4))
      out[key] = values[()] if spec.shape == () else values
  for key, spec in specs.items():
    if spec.variable and len(out[key]) != out[spec.length_key]:
      raise schema_lib.SchemaError(
          f'feature {key!r}: {len(out[key])} rows, its length '
          f'{spec.length_key!r} says {out[spec.length_key]}')
  return out


class _Fallback(Exception):
  """A record not in the one layout encode_batch writes."""


def _varint_at(buf, pos):
  byte = buf[pos]
  if byte < 0x80:
    return byte, pos + 1
  second = buf[pos + 1]
  if second < 0x80:  # below 16384: most lengths of a record
    return (byte & 0x7f) | second << 7, pos + 2
  return _read_varint(buf, pos)


class Decoder:
  """decode_example restricted to `keys`, fast for the records
  encode_batch writes: it walks the feature map once, compares key bytes,
  and views each wanted array where it lies in the record; a record in
  any other layout (another writer's) goes through decode_example, with
  the same result and the same errors. `copy` as decode_example's."""

  def __init__(self, schema: schema_lib.Schema, keys, copy: bool = True):
    self.schema, self.copy = schema, copy
    specs = schema.as_dict()
    self.keys = tuple(keys)
    needed = set(self.keys) | {specs[k].length_key for k in self.keys
                               if specs[k].variable}
    self._order = tuple(sorted(k.encode('utf-8') for k in specs))
    self._lengths = tuple((k, specs[k].length_key) for k in self.keys
                          if specs[k].variable)
    # Length keys decoded for the check only, or another order: the
    # result is made again with the keys asked for, in their order.
    self._extra = tuple(sorted(needed)) != self.keys
    self._wanted = {}
    # {key bytes: (the bytes from its map entry's start to its value's
    # data, the data's size)} of each wanted feature of a fixed shape, from
    # the last record decoded field by field. Those bytes hold every
    # length of the entry, so a record whose bytes there are the same has
    # the same layout up to the entry's end, checked by one comparison:
    # in a dataset's records they repeat for each array, and for most
    # numbers and strings.
    self._prefixes = {}
    for key in sorted(needed):
      spec = specs[key]
      kind = {schema_lib.RAW_BYTES: 0x0a, schema_lib.BYTES_LIST: 0x0a,
              schema_lib.FLOAT_LIST: 0x12,
              schema_lib.INT64_LIST: 0x1a}[spec.encoding]
      dtype = (np.dtype('<f4') if spec.encoding == schema_lib.FLOAT_LIST
               else numpy_dtype(spec.dtype).newbyteorder('<')
               if spec.encoding == schema_lib.RAW_BYTES else None)
      self._wanted[key.encode('utf-8')] = (key, spec, kind, dtype,
                                           spec.row_size)

  def __call__(self, data) -> dict:
    """`data`: a record's bytes, or a memoryview of them (arrays are
    then views of the memory it views, unless `copy`)."""
    try:
      return self._fast(data)
    except (_Fallback, IndexError, ValueError, schema_lib.SchemaError):
      example = decode_example(bytes(data) if isinstance(data, memoryview)
                               else data, self.schema, self.copy)
      return {k: example[k] for k in self.keys}

  def _fast(self, buf) -> dict:
    n = len(buf)
    if not n or buf[0] != 0x0a:
      raise _Fallback
    size, pos = _varint_at(buf, 1)
    if pos + size != n:
      raise _Fallback
    out = {}
    wanted, prefixes = self._wanted, self._prefixes
    for expected in self._order:
      known = prefixes.get(expected)
      if known is not None:
        prefix, size = known
        start = pos + len(prefix)
        if buf[pos:start] == prefix:
          out[wanted[expected][0]] = self._data(buf, start, size,
                                                wanted[expected])
          pos = start + size
          continue
      if buf[pos] != 0x0a:
        raise _Fallback
      entry = pos
      size, pos = _varint_at(buf, pos + 1)
      end = pos + size
      size = buf[pos + 1]  # the key's length: keys are short
      if buf[pos] != 0x0a or size >= 0x80:
        raise _Fallback
      pos += 2
      if buf[pos:pos + size] != expected:
        raise _Fallback
      pos += size
      if buf[pos] != 0x12:
        raise _Fallback
      target = wanted.get(expected)
      if target is not None:
        start = self._locate(buf, pos, end, target)
        out[target[0]] = self._data(buf, start, end - start, target)
        if not target[1].variable:
          prefixes[expected] = (bytes(buf[entry:start]), end - start)
      pos = end
    if pos != n:
      raise _Fallback
    for key, length_key in self._lengths:
      if len(out[key]) != out[length_key]:
        raise _Fallback
    return {k: out[k] for k in self.keys} if self._extra else out

  def _data(self, buf, start: int, size: int, target):
    """A wanted feature's value from its data, `size` bytes at `start`."""
    _, spec, kind, dtype, _ = target
    if dtype is None:
      if kind == 0x0a:  # a string
        return str(buf[start:start + size], 'utf-8')
      value, end = _varint_at(buf, start)  # one int64
      if end != start + size:
        raise _Fallback
      return np.int64(_int64_of(value))
    count = size // dtype.itemsize
    values = np.frombuffer(buf, dtype, count, start)
    if self.copy:
      values = values.copy()
    if spec.shape == ():
      return values[0] if kind == 0x12 else values.reshape(())
    return values.reshape(_shape(spec, count))

  @staticmethod
  def _locate(buf, pos: int, end: int, target) -> int:
    """Where a wanted feature's data begins, in its Feature message at
    `pos` (its data ends at `end`), its size checked for an array."""
    _, spec, kind, dtype, row = target
    size, pos = _varint_at(buf, pos + 1)
    if pos + size != end or buf[pos] != kind:
      raise _Fallback
    size, pos = _varint_at(buf, pos + 1)
    if pos + size != end:
      raise _Fallback
    if size:  # one item, field 1 (an empty packed list has none)
      if buf[pos] != 0x0a:
        raise _Fallback
      size, pos = _varint_at(buf, pos + 1)
      if pos + size != end:
        raise _Fallback
    elif kind != 0x12:
      raise _Fallback
    if dtype is not None:
      count = size // dtype.itemsize
      if count * dtype.itemsize != size or (
          count % row if spec.variable and row else count != row):
        raise _Fallback  # decode_example names the size it expected
    return pos


def _check_size(key, spec, stored, itemsize, unit):
  """SchemaError unless `stored` (bytes or values) fits the spec: all
  of its values, or a whole number of rows of a variable-length array."""
  row = itemsize * spec.row_size
  if spec.variable:
    if row and stored % row == 0:
      return
    raise schema_lib.SchemaError(
        f'feature {key!r}: {stored} {unit}, not a whole number of '
        f'{spec.dtype}{list(spec.shape[1:])} rows of {row}')
  if stored != row:
    dtype = '' if unit == 'float32 values' else spec.dtype
    raise schema_lib.SchemaError(
        f'feature {key!r}: {stored} {unit}, {dtype}{list(spec.shape)} '
        f'needs {row}')


def _shape(spec: schema_lib.FeatureSpec, values: int):
  """The concrete shape of `values` values of `spec`."""
  if spec.variable:
    return (values // spec.row_size,) + spec.shape[1:]
  return spec.shape


_KINDS = {1: 'bytes_list', 2: 'float_list', 3: 'int64_list'}


def describe_example(data: bytes) -> dict:
  """Any serialized tf.train.Example -> {key: (kind, values, bytes of
  data)}: values counts list items (a raw-bytes array is one item), bytes
  are the values' own (8 per int64); no schema needed."""
  out = {}
  try:
    for number, wire, value in _fields(memoryview(data)):
      if number != 1 or wire != 2:
        continue
      for n2, w2, entry in _fields(value):
        if n2 != 1 or w2 != 2:
          continue
        fields = dict((n, v) for n, _, v in _fields(entry))
        key = bytes(fields.get(1, b'')).decode('utf-8', 'replace')
        kinds = list(_fields(fields.get(2, b'')))
        if not kinds:
          out[key] = ('empty', 0, 0)
          continue
        kind_number, _, payload = kinds[0]
        items = [v for n, _, v in _fields(payload) if n == 1]
        if kind_number == 3:
          count = len(_int64s(items[0])) if items else 0
          size = 8 * count
        elif kind_number == 2:
          size = sum(len(i) for i in items)
          count = size // 4
        else:
          count, size = len(items), sum(len(i) for i in items)
        out[key] = (_KINDS.get(kind_number, f'kind {kind_number}'), count,
                    size)
  except ValueError as e:
    raise schema_lib.SchemaError(f'not a tf.train.Example ({e})') from e
  return out
