"""A shard as written: which file, how many records, how many bytes."""

import dataclasses



@dataclasses.dataclass(frozen=True)
class ShardStats:
  split: str
  shard: int
  path: str          # where it was written (a temp name until finalized)
  num_examples: int
  num_bytes: int     # file size on disk
  # When this attempt started and finished (ms since the epoch): the first
  # start and last finish bound the phase that scales with workers.
  started_ms: int
  finished_ms: int
  # Shards of the split, when the writer chose it (WriteToTFRecord's
  # -of-NNNNN); 0 when the layout decided it.
  num_shards: int = 0
  # Its `tfrecord`-package index (naming.index_name), when uncompressed.
  index_path: str = ''
  # Its ArrayRecord copy (--array_record), and that file's size.
  array_record_path: str = ''
  array_record_bytes: int = 0
  array_record_crc32c: int = -1  # array_record_file.fingerprint

