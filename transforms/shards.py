"""Shards as written: which file, how many records, how many bytes."""

import dataclasses

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms import tfrecord


@dataclasses.dataclass(frozen=True)
class ShardStats:
  split: str
  shard: int
  path: str          # where it was written (a temp name until finalized)
  num_examples: int
  num_bytes: int     # file size on disk


def count_records(path: str, compression: str, check_crc=False) -> int:
  """Records in a TFRecord file, by walking its framing."""
  ctype = (CompressionTypes.GZIP if compression == 'gzip'
           else CompressionTypes.UNCOMPRESSED)
  with FileSystems.open(path, compression_type=ctype) as f:
    return sum(1 for _ in tfrecord.read_records(f, path, check_crc))
