"""The one description of what a stored example holds.

Every feature key maps to a `FeatureSpec` (dtype, shape, encoding). The
encoder (`pipeline.contract.example_codec`), the metadata writer and the reader
(`pipeline.replay`) all derive what they do from it, so a dtype or shape is
never spelled twice. Standard library only: the reader imports it without
Beam or numpy.
"""

import dataclasses
from typing import Dict, Mapping, Tuple

from pipeline.contract.errors import WavbeamError

# How a value is stored inside a tf.train.Example.
RAW_BYTES = 'raw_bytes'    # little-endian array bytes in one BytesList entry
INT64_LIST = 'int64_list'  # a scalar int64
FLOAT_LIST = 'float_list'  # float32 values, packed, row-major (any shape)
BYTES_LIST = 'bytes_list'  # a UTF-8 string
ENCODINGS = (RAW_BYTES, INT64_LIST, FLOAT_LIST, BYTES_LIST)

# The keys every example has, whatever its features; the label is the
# class's position in metadata's `classes`.
CLASS_KEY = 'class'
LABEL_KEY = 'target'
BASE_KEYS = (CLASS_KEY, 'filepath', 'index', 'num_classes', LABEL_KEY,
             'win_start_idx')
# A first dimension that differs between examples (--example_unit file:
# one example per recording). As TFDS writes an unknown dimension.
VARIABLE = -1
# The int64 keys that hold, per example, the first dimension of the
# variable-length arrays: samples of the signal, STFT frames of the
# features computed from them.
NUM_SAMPLES_KEY = 'num_samples'
NUM_FRAMES_KEY = 'num_frames'
# What a reader adds to a batch of variable-length arrays, per feature:
# each example's own length before padding to the longest in the batch.
LENGTH_SUFFIX = '_length'

STRING = 'string'
NUMERIC_DTYPES = (
    'bool', 'int8', 'uint8', 'int16', 'uint16', 'int32', 'uint32', 'int64',
    'uint64', 'float16', 'bfloat16', 'float32', 'float64', 'complex64',
    'complex128')
# The float dtypes a feature may be stored in (--feature_dtype); bfloat16
# is numpy's through ml_dtypes (example_codec.numpy_dtype).
FLOAT_DTYPES = ('float16', 'bfloat16', 'float32', 'float64')


class SchemaError(WavbeamError, ValueError):
  """Two parts of a dataset disagree on what a feature is."""


def encoding_for(dtype: str, shape: Tuple[int, ...]) -> str:
  """The storage encoding of a value; the only place this rule lives.

  float32 values of any shape are a packed FloatList, which every
  TFRecord tool reads as numbers (TFX and TFDV compute statistics of them)
  and `tf.io.parse_example` decodes 4.6x faster than raw bytes, at the same
  size. An int64 scalar is an Int64List. Every other numeric value (integer
  arrays, float64, which a FloatList would narrow) is raw bytes, which keep
  dtype and shape exact.
  """
  if dtype == STRING:
    if shape != ():
      raise SchemaError(f'string features must be scalars, got shape {shape}')
    return BYTES_LIST
  if dtype not in NUMERIC_DTYPES:
    raise SchemaError(f'unsupported dtype {dtype!r}')
  if shape == () and dtype == 'int64':
    return INT64_LIST
  if dtype == 'float32':
    return FLOAT_LIST
  return RAW_BYTES


def _encodings_allowed(dtype: str, shape: Tuple[int, ...]) -> Tuple[str, ...]:
  """Encodings a stored dataset may use: today's, and raw bytes for
  float32 arrays, as format version 1 stored them."""
  current = encoding_for(dtype, shape)
  if current == FLOAT_LIST and shape != ():
    return (current, RAW_BYTES)
  return (current,)


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
  """dtype, shape and storage encoding of a feature. The encoding defaults
  to `encoding_for` (what this version writes); a dataset written by an
  earlier version states its own."""
  dtype: str
  shape: Tuple[int, ...]
  encoding: str = ''
  # Of a variable-length array (first dimension VARIABLE): the int64 key
  # of the same example that holds its length.
  length_key: str = ''

  def __post_init__(self):
    object.__setattr__(self, 'shape', tuple(int(d) for d in self.shape))
    if any(d < 0 for d in self.shape[1:]) or (
        self.shape and self.shape[0] < VARIABLE):
      raise SchemaError(f'negative dimension in shape {self.shape} (only '
                        f'the first may be {VARIABLE}, variable)')
    if self.variable != bool(self.length_key):
      raise SchemaError(f'shape {self.shape} with length key '
                        f'{self.length_key!r}: a variable first dimension '
                        'needs the key of its length, and only it')
    allowed = _encodings_allowed(self.dtype, self.shape)  # checks dtype
    if not self.encoding:
      object.__setattr__(self, 'encoding', allowed[0])
    elif self.encoding not in allowed:
      raise SchemaError(
          f'encoding {self.encoding!r} does not match dtype {self.dtype} '
          f'and shape {self.shape} (expected {allowed[0]!r})')

  @property
  def variable(self) -> bool:
    """Whether the first dimension differs between examples."""
    return bool(self.shape) and self.shape[0] == VARIABLE

  @property
  def row_size(self) -> int:
    """Values per step of the first dimension (all values, fixed)."""
    size = 1
    for d in self.shape[1 if self.variable else 0:]:
      size *= d
    return size

  def to_json(self) -> dict:
    out = {'dtype': self.dtype, 'shape': list(self.shape),
           'encoding': self.encoding}
    if self.length_key:
      out['length_key'] = self.length_key
    return out

  @classmethod
  def from_json(cls, obj: Mapping) -> 'FeatureSpec':
    return cls(dtype=obj['dtype'], shape=tuple(obj['shape']),
               encoding=obj.get('encoding', ''),
               length_key=obj.get('length_key', ''))


@dataclasses.dataclass(frozen=True)
class Schema:
  """Feature key -> FeatureSpec, kept in key order."""
  features: Tuple[Tuple[str, FeatureSpec], ...] = ()

  @classmethod
  def of(cls, specs: Mapping[str, FeatureSpec]) -> 'Schema':
    return cls(tuple(sorted(specs.items())))

  def as_dict(self) -> Dict[str, FeatureSpec]:
    return dict(self.features)

  def keys(self) -> Tuple[str, ...]:
    return tuple(k for k, _ in self.features)

  def __getitem__(self, key: str) -> FeatureSpec:
    for k, spec in self.features:
      if k == key:
        return spec
    raise KeyError(key)

  def merge(self, other: 'Schema') -> 'Schema':
    """The union of two schemas; a key described differently is an error."""
    if not self.features or not other.features:
      return self if self.features else other
    if set(self.keys()) != set(other.keys()):
      differing = sorted(set(self.keys()) ^ set(other.keys()))
      raise SchemaError(f'examples differ in their keys: {differing}')
    for key, spec in other.features:
      if self[key] != spec:
        raise SchemaError(
            f'feature {key!r} disagrees between examples: '
            f'{_describe(self[key])} vs {_describe(spec)}')
    return self

  def variable_keys(self) -> Tuple[str, ...]:
    """The variable-length arrays, in key order."""
    return tuple(k for k, spec in self.features if spec.variable)

  def with_lengths(self, lengths: Mapping[str, str]) -> 'Schema':
    """This schema with the arrays in `lengths` ({key: length key})
    made variable in their first dimension: what one example's concrete
    shapes say of a dataset whose examples differ in length."""
    specs = self.as_dict()
    for key, length_key in lengths.items():
      spec = specs[key]
      if not spec.shape:
        raise SchemaError(f'feature {key!r} is a scalar: it has no length')
      if specs.get(length_key) != FeatureSpec('int64', ()):
        raise SchemaError(f'feature {key!r}: its length key '
                          f'{length_key!r} is not an int64 scalar')
      specs[key] = FeatureSpec(spec.dtype, (VARIABLE,) + spec.shape[1:],
                               spec.encoding, length_key)
    return Schema.of(specs)

  def to_json(self) -> dict:
    return {key: spec.to_json() for key, spec in self.features}

  @classmethod
  def from_json(cls, obj: Mapping) -> 'Schema':
    return cls.of({k: FeatureSpec.from_json(v) for k, v in obj.items()})


def _describe(spec: FeatureSpec) -> str:
  return f'{spec.dtype}{list(spec.shape)}'


def length_key_of(key: str) -> str:
  """The key a batch holds `key`'s per-example lengths under."""
  return key + LENGTH_SUFFIX
