"""What was actually written: records and bytes per shard file."""

import dataclasses
import struct

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

_HEADER = 12  # uint64 length + masked crc32c of the length


@dataclasses.dataclass(frozen=True)
class ShardStats:
  path: str
  num_examples: int
  num_bytes: int  # file size on disk


class ShardFormatError(ValueError):
  pass


def count_records(path: str, compression: str) -> ShardStats:
  """Counts a TFRecord file's records by walking its framing."""
  ctype = (CompressionTypes.GZIP if compression == 'gzip'
           else CompressionTypes.UNCOMPRESSED)
  count = 0
  with FileSystems.open(path, compression_type=ctype) as f:
    while True:
      header = f.read(_HEADER)
      if not header:
        break
      if len(header) < _HEADER:
        raise ShardFormatError(f'{path}: record {count} has a cut header')
      (length,) = struct.unpack('<Q', header[:8])
      skip = length + 4
      if ctype == CompressionTypes.UNCOMPRESSED:
        f.seek(skip, 1)
      else:
        while skip:
          got = len(f.read(min(skip, 1 << 20)))
          if not got:
            break
          skip -= got
      count += 1
    if ctype == CompressionTypes.UNCOMPRESSED and f.tell() > _size(path):
      raise ShardFormatError(f'{path}: record {count - 1} is cut short')
  return ShardStats(path, count, _size(path))


def _size(path: str) -> int:
  return FileSystems.match([path])[0].metadata_list[0].size_in_bytes
