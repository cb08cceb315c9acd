"""The one description of what a stored example holds.

Every feature key maps to a `FeatureSpec` (dtype, shape, encoding). The
encoder (`transforms.example_codec`), the metadata writer and the reader
(`pipeline.replay`) all derive what they do from it, so a dtype or shape is
never spelled twice. Standard library only: the reader imports it without
Beam or numpy.
"""

import dataclasses
from typing import Dict, Mapping, Tuple

# How a value is stored inside a tf.train.Example.
RAW_BYTES = 'raw_bytes'    # little-endian array bytes in one BytesList entry
INT64_LIST = 'int64_list'  # a scalar int64
FLOAT_LIST = 'float_list'  # a scalar float32
BYTES_LIST = 'bytes_list'  # a UTF-8 string
ENCODINGS = (RAW_BYTES, INT64_LIST, FLOAT_LIST, BYTES_LIST)

STRING = 'string'
NUMERIC_DTYPES = (
    'bool', 'int8', 'uint8', 'int16', 'uint16', 'int32', 'uint32', 'int64',
    'uint64', 'float16', 'float32', 'float64', 'complex64', 'complex128')


class SchemaError(ValueError):
  """Two parts of a dataset disagree on what a feature is."""


def encoding_for(dtype: str, shape: Tuple[int, ...]) -> str:
  """The storage encoding of a value; the only place this rule lives.

  Scalars whose dtype a typed list holds exactly (int64, float32) use that
  list, so they are readable by any TFRecord tool; every other numeric value
  is stored as raw bytes, which keeps its dtype and shape exact.
  """
  if dtype == STRING:
    if shape != ():
      raise SchemaError(f'string features must be scalars, got shape {shape}')
    return BYTES_LIST
  if dtype not in NUMERIC_DTYPES:
    raise SchemaError(f'unsupported dtype {dtype!r}')
  if shape == () and dtype == 'int64':
    return INT64_LIST
  if shape == () and dtype == 'float32':
    return FLOAT_LIST
  return RAW_BYTES


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
  dtype: str
  shape: Tuple[int, ...]

  def __post_init__(self):
    object.__setattr__(self, 'shape', tuple(int(d) for d in self.shape))
    if any(d < 0 for d in self.shape):
      raise SchemaError(f'negative dimension in shape {self.shape}')
    encoding_for(self.dtype, self.shape)  # validates dtype and shape

  @property
  def encoding(self) -> str:
    return encoding_for(self.dtype, self.shape)

  def to_json(self) -> dict:
    return {'dtype': self.dtype, 'shape': list(self.shape),
            'encoding': self.encoding}

  @classmethod
  def from_json(cls, obj: Mapping) -> 'FeatureSpec':
    spec = cls(dtype=obj['dtype'], shape=tuple(obj['shape']))
    if obj.get('encoding', spec.encoding) != spec.encoding:
      raise SchemaError(
          f'encoding {obj["encoding"]!r} does not match dtype {spec.dtype} '
          f'and shape {spec.shape} (expected {spec.encoding!r})')
    return spec


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

  def to_json(self) -> dict:
    return {key: spec.to_json() for key, spec in self.features}

  @classmethod
  def from_json(cls, obj: Mapping) -> 'Schema':
    return cls.of({k: FeatureSpec.from_json(v) for k, v in obj.items()})


def _describe(spec: FeatureSpec) -> str:
  return f'{spec.dtype}{list(spec.shape)}'
