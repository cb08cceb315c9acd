"""pipeline/contract/batch_decode: records located many at a time give
what example_codec.Decoder gives one at a time, bit for bit."""

import io
import mmap

import numpy as np
import pytest
import tensorflow as tf

from pipeline.contract import batch_decode
from pipeline.contract import example_codec
from pipeline.contract import schema as schema_lib
from pipeline.contract import tfrecord
from tests import helpers as H


def _elements(n, seed=0):
  """Records whose numbers and strings change size between them."""
  rng = np.random.default_rng(seed)
  out = []
  for i in range(n):
    out.append({
        'signal': rng.integers(-2**31, 2**31 - 1, 300, dtype=np.int32),
        'spectrogram': rng.standard_normal((3, 5)).astype(np.float32),
        'big_endian': rng.integers(-9, 9, 4).astype('>i2'),
        'f64_scalar': np.float64(rng.standard_normal()),
        'index': int(rng.choice([0, 5, 200, 70000, 2**40, 2**63 - 1])),
        'negative': -int(rng.integers(1, 2**62)) if i % 5 else -2**63,
        'gain': np.float32(rng.standard_normal()),
        'class': ''.join(rng.choice(list('ab✓'), rng.integers(0, 6))),
        'long_text': 'x' * int(rng.integers(100, 300)),
    })
  return out


def _mapped(records):
  """A TFRecord file of `records` in memory: (uint8 array, data starts,
  data stops)."""
  f = io.BytesIO()
  for record in records:
    tfrecord.write_record(f, record)
  buf = mmap.mmap(-1, len(f.getvalue()))
  buf.write(f.getvalue())
  starts, stops = [], []
  for offset, data in tfrecord.mapped_records(buf):
    starts.append(offset + 12)
    stops.append(offset + 12 + len(data))
  return np.frombuffer(buf, np.uint8), np.array(starts), np.array(stops)


def _filled(located, decoder, octets, starts, stops, first, end):
  """Records first..end-1 filled into a batch laid out as the reader
  lays it out: {key: array or list}."""
  example = decoder(memoryview(octets)[starts[first]:stops[first]])
  rows, strings = {}, {}
  for key, value in example.items():
    if isinstance(value, str):
      strings[key] = []
    else:
      value = np.asarray(value)
      rows[key] = np.full((end - first,) + value.shape, 0x55, value.dtype)
  seen = []
  located.fill(rows, strings, 0, first, end, before=seen.append)
  assert seen == list(range(first, end))
  return {**rows, **strings}


@pytest.mark.parametrize('keys', [None, ['index', 'class', 'signal'],
                                  ['long_text', 'negative'], ['gain']])
def test_located_records_are_what_the_decoder_gives(keys):
  elements = _elements(70)
  schema = H.schema_of(elements[0])
  keys = keys or sorted(elements[0])
  octets, starts, stops = _mapped([H.encode_example(e) for e in elements])
  decoder = example_codec.Decoder(schema, keys, copy=False)
  batch = batch_decode.BatchDecoder(schema, keys)
  assert batch.usable
  # Twice: the second pass goes by what the first learned.
  for _ in range(2):
    located = batch.locate(octets, starts, stops)
    assert located is not None
    for first, end in [(0, 70), (3, 4), (10, 45)]:
      got = _filled(located, decoder, octets, starts, stops, first, end)
      for i in range(first, end):
        want = decoder(memoryview(octets)[starts[i]:stops[i]])
        assert list(want) == keys
        for key, value in want.items():
          row = got[key][i - first]
          if isinstance(value, str):
            assert row == value
          else:
            assert row.dtype == np.asarray(value).dtype
            assert row.tobytes() == np.asarray(value).tobytes(), key


def test_another_layout_is_not_located():
  """Records this does not read (another writer's entry order, an empty
  list, a damaged length, a key 128 bytes long, a variable length) are
  left to the one-at-a-time decoder."""
  elements = _elements(6)
  schema = H.schema_of(elements[0])
  keys = sorted(elements[0])
  batch = batch_decode.BatchDecoder(schema, keys)
  ours = [H.encode_example(e) for e in elements]
  octets, starts, stops = _mapped(ours)
  assert batch.locate(octets, starts, stops) is not None
  theirs = tf.train.Example.FromString(ours[2]).SerializeToString()
  if theirs != ours[2]:
    assert batch.locate(*_mapped(ours[:2] + [theirs])) is None
  damaged = bytearray(ours[1])
  damaged[1] ^= 0x01  # the length of the whole Example
  assert batch.locate(*_mapped([ours[0], bytes(damaged)])) is None
  empty = dict(elements[0], spectrogram=np.zeros((0, 5), np.float32))
  assert batch_decode.BatchDecoder(H.schema_of(empty), ['index']).locate(
      *_mapped([H.encode_example(empty)])) is None
  long_key = {'k' * 128: 1}
  assert not batch_decode.BatchDecoder(H.schema_of(long_key),
                                       ['k' * 128]).usable
  variable = {'signal': np.arange(15, dtype=np.int16), 'num_samples': 15}
  schema = H.schema_of(variable).with_lengths({'signal': 'num_samples'})
  assert not batch_decode.BatchDecoder(schema, ['signal']).usable
  assert batch_decode.BatchDecoder(schema, ['num_samples']).usable


def test_a_feature_whose_bytes_are_wrong_is_not_located():
  """An array of another size than the schema's, or a number whose varint
  runs past its entry, is not located (the decoder names the error)."""
  elements = _elements(3)
  schema = H.schema_of(elements[0])
  short = dict(elements[1], signal=elements[1]['signal'][:299])
  records = [H.encode_example(e) for e in (elements[0], short)]
  decoder = example_codec.Decoder(schema, ['signal'], copy=False)
  with pytest.raises(schema_lib.SchemaError, match='signal'):
    decoder(records[1])
  assert batch_decode.BatchDecoder(schema, ['signal']).locate(
      *_mapped(records)) is None


def test_an_int64_varint_with_bits_past_64_is_read_as_tensorflow_reads_it():
  """A 10-byte varint whose last byte carries bits past the 64th: its low
  64 bits, located or decoded one by one, as TensorFlow parses it."""
  element = dict(_elements(1)[0], index=-1)
  schema = H.schema_of(element)
  record = bytearray(H.encode_example(element))
  at = bytes(record).index(b'\xff' * 9 + b'\x01') + 9
  record[at] = 0x03
  parsed = tf.io.parse_single_example(
      bytes(record), {'index': tf.io.FixedLenFeature([], tf.int64)})
  assert int(parsed['index']) == -1
  decoder = example_codec.Decoder(schema, ['index'], copy=False)
  assert decoder(bytes(record))['index'] == -1
  assert example_codec.decode_example(bytes(record), schema)['index'] == -1
  octets, starts, stops = _mapped([bytes(record)])
  located = batch_decode.BatchDecoder(schema, ['index']).locate(
      octets, starts, stops)
  assert located.numbers['index'].tolist() == [-1]
