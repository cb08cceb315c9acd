"""TFRecord framing: write records and walk them back, with CRC checks.

Each record is: uint64 length, masked crc32c(length), data, masked
crc32c(data), little-endian, as TensorFlow reads them.
"""

import os
import struct
from typing import BinaryIO, Iterator, List, Optional, Tuple

import crc32c

from pipeline.contract.errors import WavbeamError

_MASK_DELTA = 0xA282EAD8


def masked_crc(data) -> int:
  """TFRecord's masked CRC32C of bytes, a memoryview or an array, in
  place. From 32 KiB on, the GIL is released meanwhile: other threads
  run (numpy_reader checks a batch's records while it copies them)."""
  crc = crc32c.crc32c(data)
  return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _head(size: int) -> bytes:
  """A record's framing before its data: the length, its masked CRC."""
  length = struct.pack('<Q', size)
  return length + struct.pack('<I', masked_crc(length))


def framed(data) -> bytes:
  """One record as it is stored: its data with the framing around it."""
  return b''.join((_head(len(data)), data,
                   struct.pack('<I', masked_crc(data))))


def write_record(f: BinaryIO, data: bytes,
                 digest: Optional['RecordsDigest'] = None) -> int:
  """Writes one record, added to `digest` if given; returns the bytes
  written (data + 16 of framing)."""
  f.write(_head(len(data)))
  f.write(data)
  data_crc = masked_crc(data)
  f.write(struct.pack('<I', data_crc))
  if digest is not None:
    digest.add(data_crc)
  return len(data) + 16


# Buffers one os.writev call takes at most (Linux's IOV_MAX).
_IOV_MAX = 1024


def write_records(f: BinaryIO, records,
                  digest: Optional['RecordsDigest'] = None,
                  direct: bool = False) -> List[int]:
  """Writes records one after another, as write_record does each, added to
  `digest` if given; returns the bytes each took (data + 16 of framing).

  `direct`: `f` is a plain local file, its fileno() the file these bytes
  end up in (no compression between): the batch goes to the kernel in
  one os.writev per _IOV_MAX buffers, each record's bytes read where
  they lie, not first copied into f's buffer or joined with its
  framing."""
  parts, sizes = [], []
  for data in records:
    data_crc = masked_crc(data)
    parts += (_head(len(data)), data, _FOOTER.pack(data_crc))
    sizes.append(len(data) + 16)
    if digest is not None:
      digest.add(data_crc)
  if not direct:
    for part in parts:
      f.write(part)
    return sizes
  f.flush()  # what f holds goes first
  fd = f.fileno()
  while parts:
    done = os.writev(fd, parts[:_IOV_MAX])
    if done == 0:
      raise OSError(f'{getattr(f, "name", fd)}: nothing written')
    # Whole buffers written are dropped; a buffer written in part keeps
    # its rest (a full disk can end a write short).
    kept = 0
    while kept < len(parts) and done >= len(parts[kept]):
      done -= len(parts[kept])
      kept += 1
    parts = parts[kept:]
    if done:
      parts[0] = memoryview(parts[0])[done:]
  return sizes


class RecordsDigest:
  """What tells a shard's records from other records of the same sizes:
  CRC32C over the masked data CRCs its framing stores, 4 bytes each as
  stored, in record order. A writer adds the CRCs it writes; a reader of
  the framing, the CRCs it finds stored; a check that reads the data,
  each record's CRC once more (add_record)."""

  def __init__(self):
    self.value = 0

  def add(self, data_crc: int) -> None:
    self.value = crc32c.crc32c(_FOOTER.pack(data_crc), self.value)

  def add_record(self, data) -> None:
    self.add(masked_crc(data))

  def add_stored(self, f: BinaryIO, record_sizes, where: str = '') -> None:
    """Adds the records of an uncompressed file of these framed sizes, from
    the CRC stored after each one's data: a seek and a 4-byte read per
    record, the data left unread (and its CRC unchecked)."""
    offset = 0
    for index, size in enumerate(record_sizes):
      f.seek(offset + size - 4)
      footer = f.read(4)
      if len(footer) < 4:
        raise CorruptRecord(f'{where}: record {index} at byte {offset}: '
                            'file ends inside the record')
      self.add(_FOOTER.unpack(footer)[0])
      offset += size


def index_text(record_sizes) -> str:
  """The `tfrecord` package's index of a shard: `offset length` per record,
  framing included (what its tfrecord2idx writes)."""
  lines, offset = [], 0
  for size in record_sizes:
    lines.append(f'{offset} {size}\n')
    offset += size
  return ''.join(lines)


class CorruptRecord(WavbeamError, ValueError):
  pass


def _read_length(f: BinaryIO, index: int, offset: int, where: str,
                 check_crc: bool) -> Optional[int]:
  """The length in the next record header; None at the end of the file."""
  header = f.read(12)
  if not header:
    return None
  if len(header) < 12:
    raise CorruptRecord(f'{where}: record {index} at byte {offset}: file '
                        'ends inside the record header')
  (length,) = struct.unpack('<Q', header[:8])
  if check_crc and masked_crc(header[:8]) != struct.unpack('<I', header[8:])[0]:
    raise CorruptRecord(f'{where}: record {index} at byte {offset}: '
                        'length CRC mismatch')
  return length


def skip_records(f: BinaryIO, count: int, where: str = '') -> None:
  """Moves past `count` records by their headers (length CRCs checked;
  the data is not read, so its CRC is not either)."""
  offset = f.tell()
  for index in range(count):
    length = _read_length(f, index, offset, where, True)
    if length is None:
      raise CorruptRecord(f'{where}: the file ends after {index} records')
    offset += 16 + length
    f.seek(offset)


def record_sizes(f: BinaryIO, size: int, where: str = '',
                 digest: Optional['RecordsDigest'] = None) -> List[int]:
  """The framed size of each record of a whole uncompressed file of `size`
  bytes, from the headers alone: a seek and a 12-byte read per record,
  length CRCs checked, the data skipped (its CRC unchecked). With
  `digest`, each record's stored data CRC is added to it, read with the
  header that follows it."""
  sizes, offset = [], 0
  f.seek(0)
  while offset < size:
    length = _read_length(f, len(sizes), offset, where, True)
    if length is None or offset + 16 + length > size:
      raise CorruptRecord(f'{where}: record {len(sizes)} at byte {offset}: '
                          'file ends inside the record')
    sizes.append(16 + length)
    offset += 16 + length
    if digest is None:
      f.seek(offset)
    else:
      f.seek(offset - 4)
      digest.add(_FOOTER.unpack(f.read(4))[0])
  return sizes


_HEADER = struct.Struct('<QI')
_FOOTER = struct.Struct('<I')


def mapped_records(buf, where: str = '', first_index: int = 0,
                   offset: int = 0, check_crc: bool = True,
                   data_crc: bool = True
                   ) -> Iterator[Tuple[int, memoryview]]:
  """read_records over a whole file in memory (an mmap): (offset, data)
  from record `first_index` at byte `offset`, data a memoryview of the
  record where it lies (no reads, no seeks, no copy: CRCs are computed
  in place); CorruptRecord as read_records raises it. `data_crc=False`
  leaves the data CRCs to the caller, who checks each record with
  data_crc_matches before using it (while it is still in the CPU's cache).
  The views keep `buf` alive: close it only once they are gone, or let
  it go."""
  index, size = first_index, len(buf)
  view = memoryview(buf)
  while offset < size:
    if offset + 12 > size:
      raise CorruptRecord(f'{where}: record {index} at byte {offset}: file '
                          'ends inside the record header')
    length, length_crc = _HEADER.unpack_from(buf, offset)
    if check_crc and masked_crc(buf[offset:offset + 8]) != length_crc:
      raise CorruptRecord(f'{where}: record {index} at byte {offset}: '
                          'length CRC mismatch')
    stop = offset + 12 + length
    if stop + 4 > size:
      raise CorruptRecord(f'{where}: record {index} at byte {offset}: file '
                          'ends inside the record')
    data = view[offset + 12:stop]
    if check_crc and data_crc and not data_crc_matches(buf, data, stop):
      raise CorruptRecord(f'{where}: record {index} at byte {offset}: data '
                          'CRC mismatch')
    yield offset, data
    index += 1
    offset = stop + 4


def data_crc_matches(buf, data, stop: int) -> bool:
  """Whether a record's `data` (a view of `buf`, ending at byte `stop`)
  has the CRC that follows it."""
  return masked_crc(data) == _FOOTER.unpack_from(buf, stop)[0]


def mapped_skip(buf, count: int, where: str = '') -> int:
  """skip_records over a file in memory: the offset of record `count`."""
  offset, size = 0, len(buf)
  for index in range(count):
    if offset + 12 > size:
      raise CorruptRecord(f'{where}: the file ends after {index} records')
    length, length_crc = _HEADER.unpack_from(buf, offset)
    if masked_crc(buf[offset:offset + 8]) != length_crc:
      raise CorruptRecord(f'{where}: record {index} at byte {offset}: '
                          'length CRC mismatch')
    offset += 16 + length
  return offset


def read_records(f: BinaryIO, where: str = '', check_crc: bool = True,
                 first_index: int = 0) -> Iterator[Tuple[int, bytes]]:
  """Yields (offset, data); raises CorruptRecord naming record and offset.
  From the start of f, or from where skip_records left it, the record
  numbered `first_index`."""
  index, offset = first_index, f.tell() if first_index else 0
  while True:
    length = _read_length(f, index, offset, where, check_crc)
    if length is None:
      return
    data = f.read(length)
    footer = f.read(4)
    if len(data) < length or len(footer) < 4:
      raise CorruptRecord(f'{where}: record {index} at byte {offset}: file '
                          'ends inside the record')
    if check_crc and masked_crc(data) != struct.unpack('<I', footer)[0]:
      raise CorruptRecord(f'{where}: record {index} at byte {offset}: data '
                          'CRC mismatch')
    yield offset, data
    index += 1
    offset += 16 + length
