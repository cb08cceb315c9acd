import re

import numpy as np
import pytest
import tensorflow as tf

from pipeline.contract import schema as schema_lib
from pipeline.contract import example_codec
from tests import helpers as H


def _element():
  rng = np.random.default_rng(0)
  return {
      'signal': rng.integers(-2**31, 2**31 - 1, 300, dtype=np.int32),
      'spectrogram': rng.standard_normal((3, 5)).astype(np.float32),
      'big_endian': np.arange(4, dtype='>i2'),
      'f64_scalar': np.float64(1 / 3),
      'index': 7,
      'negative': -123456789012,
      'gain': np.float32(0.25),
      'class': 'passenger ✓',
      'empty': np.zeros((0, 3), np.float32),
  }


def test_tensorflow_parses_every_encoding_exactly():
  element = _element()
  schema = H.schema_of(element)
  data = H.encode_example(element, schema)
  proto = tf.train.Example.FromString(data)
  f = proto.features.feature
  assert sorted(f.keys()) == sorted(element)
  assert f['index'].int64_list.value == [7]
  assert f['negative'].int64_list.value == [-123456789012]
  assert f['gain'].float_list.value == [0.25]
  assert f['class'].bytes_list.value == ['passenger ✓'.encode()]
  for key in ('spectrogram', 'empty'):
    # float32 arrays: a packed FloatList, row-major, parsed natively.
    assert schema[key].encoding == schema_lib.FLOAT_LIST
    assert np.array_equal(np.array(f[key].float_list.value, np.float32),
                          element[key].ravel()), key
    parsed = tf.io.parse_single_example(data, {key: tf.io.FixedLenFeature(
        element[key].shape, tf.float32)})[key].numpy()
    assert np.array_equal(parsed, element[key]), key
  for key in ('signal', 'big_endian', 'f64_scalar'):
    spec = schema[key]
    assert spec.encoding == schema_lib.RAW_BYTES
    raw = f[key].bytes_list.value[0]
    decoded = tf.io.decode_raw(raw, tf.as_dtype(spec.dtype), little_endian=True)
    decoded = tf.reshape(decoded, spec.shape).numpy()
    assert decoded.dtype == np.dtype(spec.dtype)
    assert np.array_equal(decoded, element[key]), key
  # Same bytes as TensorFlow would write for the same content.
  assert len(data) == proto.ByteSize()


def test_encoding_is_deterministic_and_key_order_free():
  element = _element()
  shuffled = dict(reversed(list(element.items())))
  assert (H.encode_example(element) ==
          H.encode_example(shuffled))


def test_schema_mismatch_names_the_key_and_both_values():
  element = _element()
  schema = H.schema_of(element)
  element['spectrogram'] = np.zeros((3, 6), np.float32)
  with pytest.raises(schema_lib.SchemaError, match="'spectrogram'"):
    H.encode_example(element, schema)
  other = H.schema_of(element)
  with pytest.raises(
      schema_lib.SchemaError,
      match=r"'spectrogram'.*float32\[3, 5\] vs float32\[3, 6\]"):
    schema.merge(other)


def test_schema_json_round_trip_and_rules():
  schema = H.schema_of(_element())
  assert schema_lib.Schema.from_json(schema.to_json()) == schema
  assert schema['index'].encoding == schema_lib.INT64_LIST
  assert schema['f64_scalar'].encoding == schema_lib.RAW_BYTES
  with pytest.raises(schema_lib.SchemaError, match='encoding'):
    schema_lib.FeatureSpec.from_json(
        {'dtype': 'int32', 'shape': [3], 'encoding': 'int64_list'})
  assert schema.merge(schema_lib.Schema()) == schema
  with pytest.raises(schema_lib.SchemaError, match='keys'):
    schema.merge(schema_lib.Schema.of(
        {'index': schema_lib.FeatureSpec('int64', ())}))


def test_decode_is_the_inverse_of_encode_and_checks_the_schema():
  element = _element()
  schema = H.schema_of(element)
  decoded = example_codec.decode_example(
      H.encode_example(element), schema)
  assert decoded.keys() == element.keys()
  for key, value in element.items():
    if isinstance(value, str):
      assert decoded[key] == value
    else:
      assert np.array_equal(decoded[key], value), key
      assert decoded[key].dtype.name == np.asarray(
          example_codec.to_array(value)).dtype.name, key
  # TensorFlow's own serialization decodes too.
  proto = tf.train.Example.FromString(H.encode_example(element))
  again = example_codec.decode_example(proto.SerializeToString(), schema)
  assert np.array_equal(again['signal'], element['signal'])
  short = dict(element, spectrogram=np.zeros((3, 4), np.float32))
  with pytest.raises(
      schema_lib.SchemaError,
      match=r"'spectrogram': 12 float32 values, \[3, 5\] needs 15"):
    example_codec.decode_example(
        H.encode_example(short), schema)
  with pytest.raises(schema_lib.SchemaError, match=r"missing \['index'\]"):
    example_codec.decode_example(H.encode_example(
        {k: v for k, v in element.items() if k != 'index'}), schema)
  with pytest.raises(schema_lib.SchemaError, match='not a tf.train.Example'):
    example_codec.decode_example(b'\x0a\xff\xff', schema)


def test_format_1_float_arrays_as_raw_bytes_still_decode():
  """Datasets of format version 1 stored float32 arrays as raw bytes; their
  schema says so, and the decoder follows it."""
  spectrogram = np.random.default_rng(1).standard_normal((3, 5)).astype(
      np.float32)
  legacy = schema_lib.Schema.of({'spectrogram': schema_lib.FeatureSpec(
      'float32', (3, 5), schema_lib.RAW_BYTES)})
  assert schema_lib.Schema.from_json(legacy.to_json()) == legacy
  # The same bytes version 1 wrote: the array's bytes in one BytesList item.
  data = H.encode_example(
      {'spectrogram': spectrogram.view(np.uint8)})
  decoded = example_codec.decode_example(data, legacy)['spectrogram']
  assert decoded.dtype == np.float32
  assert np.array_equal(decoded, spectrogram)
  with pytest.raises(schema_lib.SchemaError, match='stored kind'):
    example_codec.decode_example(
        H.encode_example({'spectrogram': spectrogram}), legacy)
  with pytest.raises(schema_lib.SchemaError, match='encoding'):
    schema_lib.FeatureSpec('float64', (3,), schema_lib.FLOAT_LIST)


def test_variable_length_arrays_round_trip_with_their_length():
  """Examples of one schema with a variable first dimension: each
  decodes to its own length, TensorFlow parses the same values, and a
  length that disagrees with the array, or a partial row, is refused."""
  schema = None
  records, elements = [], []
  for n in (0, 1, 5):
    element = {'signal': np.arange(n * 3, dtype=np.int16) - 4,
               'spectrogram': np.full((n, 4), n, np.float32),
               'num_samples': n * 3, 'num_frames': n}
    one = H.schema_of(element).with_lengths(
        {'signal': 'num_samples', 'spectrogram': 'num_frames'})
    schema = one if schema is None else schema.merge(one)
    records.append(H.encode_example(element))
    elements.append(element)
  assert schema['signal'] == schema_lib.FeatureSpec(
      'int16', (-1,), 'raw_bytes', 'num_samples')
  again = schema_lib.Schema.from_json(schema.to_json())
  assert again == schema
  for record, element in zip(records, elements):
    decoded = example_codec.decode_example(record, again)
    for key in ('signal', 'spectrogram'):
      assert decoded[key].dtype == element[key].dtype
      assert decoded[key].shape == element[key].shape
      assert np.array_equal(decoded[key], element[key])
    parsed = tf.io.parse_single_example(record, {
        'spectrogram': tf.io.FixedLenSequenceFeature(
            [4], tf.float32, allow_missing=True)})
    assert np.array_equal(parsed['spectrogram'].numpy(),
                          element['spectrogram'])
  lying = H.encode_example(dict(elements[2], num_frames=4))
  with pytest.raises(schema_lib.SchemaError, match="'spectrogram': 5 rows, "
                     "its length 'num_frames' says 4"):
    example_codec.decode_example(lying, schema)
  partial = H.encode_example(dict(elements[2],
                                  spectrogram=np.zeros(18, np.float32)))
  with pytest.raises(schema_lib.SchemaError, match=r"'spectrogram': 18 "
                     r'float32 values, not a whole number of float32\[4\] '
                     'rows'):
    example_codec.decode_example(partial, schema)
  with pytest.raises(schema_lib.SchemaError, match='needs the key of its '
                     'length'):
    schema_lib.FeatureSpec('float32', (-1, 4))
  with pytest.raises(schema_lib.SchemaError, match='only the first may be'):
    schema_lib.FeatureSpec('float32', (4, -1), length_key='n')


def _same(a, b):
  assert list(a) == list(b)
  for key in a:
    if isinstance(a[key], str):
      assert a[key] == b[key]
    else:
      assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape
      assert np.array_equal(a[key], b[key]), key


@pytest.mark.parametrize('copy', [True, False])
def test_the_fast_decoder_gives_what_decode_example_gives(copy):
  """Decoder (what the numpy reader uses) on every encoding, on any
  subset of keys, on variable lengths and on another writer's records
  (TensorFlow's): the same arrays, dtypes and shapes as decode_example,
  writable when copied; the same errors."""
  element = _element()
  schema = H.schema_of(element)
  records = [H.encode_example(element),
             tf.train.Example.FromString(
                 H.encode_example(element)).SerializeToString()]
  for keys in (sorted(element), ['spectrogram', 'class'], ['empty'],
               ['negative', 'f64_scalar', 'gain', 'big_endian']):
    decode = example_codec.Decoder(schema, keys, copy)
    # The records encode_batch writes take the fast path (no fallback).
    _same(decode._fast(records[0]), decode(records[1]))  # pylint: disable=protected-access
    for record in records:
      got = decode(record)
      whole = example_codec.decode_example(record, schema, copy)
      _same(got, {k: whole[k] for k in keys})
      if copy:
        assert all(v.flags.writeable for v in got.values()
                   if isinstance(v, np.ndarray) and v.ndim)
  variable = {'signal': np.arange(15, dtype=np.int16),
              'spectrogram': np.full((5, 4), 2, np.float32),
              'num_samples': 15, 'num_frames': 5}
  schema = H.schema_of(variable).with_lengths(
      {'signal': 'num_samples', 'spectrogram': 'num_frames'})
  decode = example_codec.Decoder(schema, ['spectrogram'], copy)
  _same(decode(H.encode_example(variable)),
        {'spectrogram': variable['spectrogram']})
  lying = H.encode_example(dict(variable, num_frames=4))
  with pytest.raises(schema_lib.SchemaError, match="'spectrogram': 5 rows, "
                     "its length 'num_frames' says 4"):
    decode(lying)
  short = H.encode_example(dict(variable, signal=np.arange(3, dtype=np.int8)))
  with pytest.raises(schema_lib.SchemaError, match='signal'):
    example_codec.Decoder(schema, ['signal'], copy)(short)
  with pytest.raises(schema_lib.SchemaError, match='not a tf.train.Example'):
    decode(b'\x0a\xff\xff')


@pytest.mark.parametrize('copy', [True, False])
def test_the_fast_decoder_follows_records_whose_layout_changes(copy):
  """Decoder learns each feature's layout from the records it decodes:
  records whose numbers, strings and arrays change size between them
  (longer varints, other string lengths, another writer's record in
  between, a damaged one) decode as decode_example decodes them, read
  from bytes or from a memoryview, in any order."""
  rng = np.random.default_rng(1)
  base = _element()
  elements = []
  for i in range(40):
    element = dict(base)
    element['index'] = int(rng.choice([0, 5, 200, 70000, 2**40]))
    element['negative'] = -int(rng.integers(1, 2**50))
    element['class'] = ''.join(rng.choice(list('ab✓'), rng.integers(0, 6)))
    element['gain'] = np.float32(rng.standard_normal())
    element['signal'] = rng.integers(-9, 9, 300, dtype=np.int32)
    elements.append(element)
  schema = H.schema_of(base)
  records = [H.encode_example(e) for e in elements]
  records[7] = tf.train.Example.FromString(records[7]).SerializeToString()
  for keys in (sorted(base), ['index', 'class', 'signal']):
    decode = example_codec.Decoder(schema, keys, copy)
    for order in (range(len(records)), rng.permutation(len(records))):
      for i in order:
        data = records[i] if i % 2 else memoryview(records[i])
        whole = example_codec.decode_example(records[i], schema, copy)
        _same(decode(data), {k: whole[k] for k in keys})
    damaged = bytearray(records[3])
    damaged[-5] ^= 0xff  # inside the last feature's bytes
    try:
      want = example_codec.decode_example(bytes(damaged), schema, copy)
    except schema_lib.SchemaError as e:
      with pytest.raises(schema_lib.SchemaError, match=re.escape(str(e)[:20])):
        decode(bytes(damaged))
    else:
      _same(decode(bytes(damaged)), {k: want[k] for k in keys})


def test_a_batch_holds_what_tensorflow_serializes_for_each_row():
  """Scalar entries are encoded once per worker and reused: a value seen
  before, in another row, batch or column, must still give its own row's
  bytes. Each record equals TensorFlow's serialization of the row."""
  rows = [{'class': 'bird ✓', 'index': 3, 'label': 1, 'start': 0,
           'gain': 0.0},
          {'class': 'bird ✓', 'index': 3, 'label': 1, 'start': -1,
           'gain': -0.0},
          {'class': '3', 'index': 2**63 - 1, 'label': 0, 'start': 2**40,
           'gain': 1.5},
          {'class': '', 'index': -2**63, 'label': 1, 'start': 3,
           'gain': -0.0}]
  # Strings longer than the cache keeps are encoded each time.
  for row, text in zip(rows, ['ü' * 300, 'ü' * 300, 'short', 'a' * 257]):
    row['text'] = text
  audio = np.arange(4 * 6, dtype=np.int32).reshape(4, 6)
  columns = {key: [row[key] for row in rows] for key in rows[0]}
  columns['audio'] = audio
  example_codec._cached_entry.cache_clear()
  cold = example_codec.encode_batch(columns, 4)
  warm = example_codec.encode_batch(columns, 4)  # every entry cached
  halves = (example_codec.encode_batch(
      {k: v[:2] for k, v in columns.items()}, 2) +
            example_codec.encode_batch(
                {k: v[2:] for k, v in columns.items()}, 2))
  assert cold == warm == halves
  for row, values, record in zip(rows, audio, cold):
    feature = {key: tf.train.Feature(int64_list=tf.train.Int64List(
        value=[row[key]])) for key in ('index', 'label', 'start')}
    feature.update({key: tf.train.Feature(bytes_list=tf.train.BytesList(
        value=[value])) for key, value in (
            ('class', row['class'].encode()), ('text', row['text'].encode()),
            ('audio', values.astype('<i4').tobytes()))})
    feature['gain'] = tf.train.Feature(float_list=tf.train.FloatList(
        value=[row['gain']]))
    expected = tf.train.Example(features=tf.train.Features(feature=feature))
    assert tf.train.Example.FromString(record) == expected
    assert len(record) == expected.ByteSize()
  # -0.0 keeps its sign bit: not the entry of 0.0.
  gain_of = [tf.train.Example.FromString(r).features.feature['gain']
             .float_list.value[0] for r in cold]
  assert [np.signbit(g) for g in gain_of] == [False, True, False, True]
