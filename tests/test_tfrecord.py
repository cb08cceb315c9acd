"""pipeline/contract/tfrecord: the record framing, against TensorFlow's
reader and writer, and its errors."""

import io
import os

import pytest
import tensorflow as tf

from pipeline.contract import tfrecord

RECORDS = [b'', b'a', b'\x00' * 1000, bytes(range(256)) * 300]


def _framed(records):
  f = io.BytesIO()
  sizes = [tfrecord.write_record(f, r) for r in records]
  return f.getvalue(), sizes


def test_tensorflow_reads_what_we_write_and_we_read_what_it_writes(tmp_path):
  data, sizes = _framed(RECORDS)
  assert sizes == [16 + len(r) for r in RECORDS] and sum(sizes) == len(data)
  path = str(tmp_path / 'ours.tfrecord')
  open(path, 'wb').write(data)
  assert [r.numpy() for r in tf.data.TFRecordDataset(path)] == RECORDS
  theirs = str(tmp_path / 'theirs.tfrecord')
  with tf.io.TFRecordWriter(theirs) as writer:
    for r in RECORDS:
      writer.write(r)
  assert open(theirs, 'rb').read() == data  # bit for bit
  offsets = [0]
  for size in sizes[:-1]:
    offsets.append(offsets[-1] + size)
  assert list(tfrecord.read_records(io.BytesIO(data))) == list(
      zip(offsets, RECORDS))


def test_skipping_then_reading_numbers_records_from_the_start():
  data, sizes = _framed(RECORDS)
  f = io.BytesIO(data)
  tfrecord.skip_records(f, 2)
  assert [(o, r) for o, r in tfrecord.read_records(f, first_index=2)] == [
      (sizes[0] + sizes[1], RECORDS[2]),
      (sizes[0] + sizes[1] + sizes[2], RECORDS[3])]
  with pytest.raises(tfrecord.CorruptRecord, match='ends after 4 records'):
    tfrecord.skip_records(io.BytesIO(data), 5, 'here')


@pytest.mark.parametrize('where,message', [
    (0, 'record 0 at byte 0: length CRC mismatch'),
    (16 + 12, 'record 1 at byte 16: data CRC mismatch'),
])
def test_a_flipped_bit_names_the_record_and_offset(where, message):
  data = bytearray(_framed(RECORDS)[0])
  data[where] ^= 0x04
  with pytest.raises(tfrecord.CorruptRecord, match=message):
    list(tfrecord.read_records(io.BytesIO(bytes(data)), 'shard x'))
  # Unchecked, the framing still walks (verify's callers choose).
  if where:
    assert len(list(tfrecord.read_records(io.BytesIO(bytes(data)),
                                          check_crc=False))) == 4


def test_a_cut_file_is_named():
  data = _framed(RECORDS)[0]
  with pytest.raises(tfrecord.CorruptRecord, match='inside the record$'):
    list(tfrecord.read_records(io.BytesIO(data[:-1])))
  with pytest.raises(tfrecord.CorruptRecord, match='inside the record header'):
    list(tfrecord.read_records(io.BytesIO(data + b'\x01\x02')))


def test_index_text_is_offset_and_length_per_record():
  assert tfrecord.index_text([16, 20, 17]) == '0 16\n16 20\n36 17\n'


def test_record_sizes_walk_the_headers_alone():
  data, sizes = _framed(RECORDS)
  assert tfrecord.record_sizes(io.BytesIO(data), len(data), 'x') == sizes
  assert tfrecord.record_sizes(io.BytesIO(b''), 0, 'x') == []
  # The data is not read: a flipped data byte goes unseen, as documented.
  flipped = bytearray(data)
  third = sizes[0] + sizes[1]
  flipped[third + 12 + 1] ^= 1  # inside the third record's data
  assert tfrecord.record_sizes(io.BytesIO(bytes(flipped)), len(data),
                               'x') == sizes
  # A length whose CRC does not match, or a file cut inside a record, or
  # inside a header, is an error naming the record.
  bad = bytearray(data)
  bad[third + 2] ^= 1  # the third record's length
  with pytest.raises(tfrecord.CorruptRecord, match='record 2 .*length CRC'):
    tfrecord.record_sizes(io.BytesIO(bytes(bad)), len(bad), 'x')
  for cut in (len(data) - 1, len(data) - sizes[-1] + 5):
    with pytest.raises(tfrecord.CorruptRecord, match='record 3 .*ends inside'):
      tfrecord.record_sizes(io.BytesIO(data[:cut]), cut, 'x')


def test_the_records_digest_is_the_same_however_it_is_computed(tmp_path):
  """As written, from the stored CRCs (the data unread) and from the data
  read back: one value, and another for other records of the same sizes."""
  path = tmp_path / 'shard'
  records = [b'a' * 5, b'', b'bc' * 300]
  written = tfrecord.RecordsDigest()
  with open(path, 'wb') as f:
    sizes = [tfrecord.write_record(f, r, written) for r in records]
  stored, read = tfrecord.RecordsDigest(), tfrecord.RecordsDigest()
  walked = tfrecord.RecordsDigest()
  with open(path, 'rb') as f:
    stored.add_stored(f, sizes, str(path))
    assert tfrecord.record_sizes(f, os.path.getsize(path), str(path),
                                 walked) == sizes
    f.seek(0)
    for _, data in tfrecord.read_records(f):
      read.add_record(data)
  assert written.value == stored.value == walked.value == read.value != 0
  other = tfrecord.RecordsDigest()
  for r in [b'a' * 5, b'', b'cb' * 300]:
    other.add_record(r)
  assert other.value != written.value
  with open(path, 'rb') as f:
    with pytest.raises(tfrecord.CorruptRecord, match='record 3 at byte'):
      tfrecord.RecordsDigest().add_stored(f, sizes + [20], str(path))


def _short_writes(monkeypatch, most, total):
  """os.writev as a kernel that writes at most `most` bytes a call (a
  full disk, a signal), the bytes really written; a writer that asks for
  more calls than `total` bytes take (one that does not move on past what
  was written) fails instead of writing forever."""
  writev = os.writev
  calls = []

  def short(fd, buffers):
    calls.append(fd)
    assert len(calls) <= -(-total // most) + 10, 'os.writev made no progress'
    left, taken = most, []
    for b in buffers:
      if left <= 0:
        break
      taken.append(memoryview(b)[:left])
      left -= len(taken[-1])
    return writev(fd, taken)
  monkeypatch.setattr(tfrecord.os, 'writev', short)


@pytest.mark.parametrize('most', [None, 7, 1000])
def test_a_batch_written_at_once_is_the_records_written_one_by_one(
    tmp_path, monkeypatch, most):
  """Written straight to the file's descriptor (more buffers than one
  os.writev takes; short writes resumed where they stopped) or through
  the file object: TensorFlow's bytes, the same sizes and digest, and
  what the file object held before the batch stays ahead of it."""
  records = RECORDS * 90  # 360 records: 1,080 buffers
  expected, sizes = _framed(records)
  if most is not None:
    _short_writes(monkeypatch, most, len(expected))
  one_by_one = tfrecord.RecordsDigest()
  for r in records:
    one_by_one.add_record(r)
  for direct in (True, False):
    path = tmp_path / f'{direct}.tfrecord'
    digest = tfrecord.RecordsDigest()
    with open(path, 'wb') as f:
      f.write(b'ahead')
      assert tfrecord.write_records(f, records[:5], digest, direct) == \
          sizes[:5]
      assert tfrecord.write_records(f, records[5:], digest, direct) == \
          sizes[5:]
      assert tfrecord.write_records(f, [], digest, direct) == []
    assert path.read_bytes() == b'ahead' + expected
    assert digest.value == one_by_one.value
