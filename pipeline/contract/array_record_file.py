"""ArrayRecord files: the random-access copy of each shard (--array_record).

The same serialized Examples as the TFRecord shard, in the same order, one
record per group and uncompressed, as TFDS writes them for
`as_data_source`: reading record i then costs one seek and one read.
The array-record package is imported only when used (an optional extra);
its writer takes local paths only.
"""

import os

import crc32c


def _module():
  try:
    from array_record.python import array_record_module  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ImportError(
        '--array_record needs the array-record package: pip install '
        "'.[array_record]' in the wavbeam checkout (or "
        'array-record==0.8.6)') from e
  return array_record_module


OPTIONS = 'group_size:1,uncompressed'


def available() -> bool:
  try:
    _module()
  except ImportError:
    return False
  return True


class Writer:
  """Appends records to a new local ArrayRecord file; a context manager."""

  def __init__(self, path: str):
    self.path = path
    self._writer = _module().ArrayRecordWriter(os.fspath(path), OPTIONS)

  def write(self, record: bytes) -> None:
    self._writer.write(record)

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self._writer.close()


def reader(path: str, options: str = ''):
  """An open ArrayRecordReader (read([i, ...]), num_records(), close())."""
  return _module().ArrayRecordReader(os.fspath(path), options)


def read_all(path: str):
  """Every record of a file, in order (for verify)."""
  opened = reader(path)
  try:
    return opened.read_all()
  finally:
    opened.close()


def fingerprint(path: str) -> int:
  """CRC32C of the whole file: recorded in metadata.json beside its size,
  checked before a reader serves the file (a file of the same size from
  another dataset would otherwise be read as this one)."""
  crc = 0
  with open(path, 'rb') as f:
    for block in iter(lambda: f.read(1 << 22), b''):
      crc = crc32c.crc32c(block, crc)
  return crc
