"""Writing one shard as the dataset holds it (ShardFile): examples made
by a segment task (sweep_writer) appended to a TFRecord file under a temp
name, with its `tfrecord`-package index and, with --array_record, its
ArrayRecord copy; or the pieces of a shard copied together."""

import contextlib
import dataclasses
import itertools
import os
import time
import uuid
from typing import Optional

from apache_beam.io.filesystems import FileSystems

from pipeline.contract import array_record_file
from pipeline.contract import naming
from pipeline.contract import tfrecord
from pipeline.config import PipelineConfig
from transforms.runtime import counters
from transforms.runtime import filesystem
from transforms.runtime import output_lock as run_marker
from transforms.inputs import audio_io
from transforms.writing.stats import ShardStats


def count_written(item) -> None:
  """Beam's counters for one result of a shard task: they exist only in a
  worker, so the DoFn counts what its shard work returned."""
  if isinstance(item, ShardStats):
    counters.counter(counters.SHARDS_WRITTEN).inc()
    counters.counter(counters.EXAMPLES_WRITTEN).inc(item.num_examples)
    counters.counter(counters.BYTES_WRITTEN).inc(item.num_bytes)
  elif isinstance(item, audio_io.Rejection):
    counters.counter(counters.WINDOWS_REJECTED).inc()


def shard_order(refs):
  """A task's window refs (plan, window, sort key), each once, in sort-key
  order: a runner may deliver a reference twice (Beam's DaskRunner does)."""
  return sorted(set(map(tuple, refs)), key=lambda ref: ref[2])


class ShardFile:
  """One shard as the dataset holds it, written under a temp name in the
  dataset's temp folder: the TFRecord file (compressed as configured), its
  `tfrecord`-package index and, with --array_record, its ArrayRecord copy.
  `stats` (ShardStats) once closed."""

  def __init__(self, config: PipelineConfig, run_id: Optional[str],
               split: str, shard: int, started_ms: int):
    self.config = config
    self.run_id = run_id
    self.split, self.shard, self.started_ms = split, shard, started_ms
    self.sizes = []
    self.digest = tfrecord.RecordsDigest()
    self.stats = None
    # A fresh name per attempt: two attempts at one shard (retries, or
    # DaskRunner recomputing a branch) never write into the same file.
    run_marker.check_marker(config.dataset_dir, run_id)
    self.path = naming.join(run_marker.temp_dir(config.dataset_dir),
                            f'{split}-{shard:05d}-{uuid.uuid4().hex}')

  def plain_local(self) -> bool:
    """Plain TFRecord in a local folder: records can be appended as bytes."""
    return self._direct and not self.config.array_record

  def __enter__(self):
    self._stack = contextlib.ExitStack()
    self._file = self._stack.enter_context(FileSystems.create(
        self.path, compression_type=filesystem.beam_compression(
            self.config.compression)))
    # Records go to the kernel straight from where they lie.
    self._direct = (self.config.compression == 'none' and
                    filesystem.is_local(self.path))
    self._copy = (self._stack.enter_context(array_record_file.Writer(
        self.path + '.' + naming.ARRAY_RECORD))
                  if self.config.array_record else None)
    return self

  def write(self, record: bytes) -> None:
    self.write_records((record,))

  def write_records(self, records) -> None:
    """Appends records (a batch's) in order."""
    self.sizes += tfrecord.write_records(self._file, records, self.digest,
                                         self._direct)
    if self._copy is not None:
      for record in records:
        self._copy.write(record)

  def copy_framed(self, path: str, record_sizes) -> None:
    """Appends the records of a plain TFRecord file (framed sizes given),
    those records and nothing past them: their bytes as they are, copied
    by the kernel, when this shard is plain and local too. A link or a
    FIFO planted at the name is refused (filesystem.NotAFile), not read."""
    if self.plain_local():
      self._file.flush()
      with filesystem.open_regular_file(path, os.O_RDONLY, 'rb') as f:
        left = sum(record_sizes)
        while left > 0:
          done = os.copy_file_range(f.fileno(), self._file.fileno(), left)
          if done == 0:
            raise OSError(f'{path}: ended {left} bytes early')
          left -= done
        self.digest.add_stored(f, record_sizes, path)
      self.sizes.extend(record_sizes)
      return
    with FileSystems.open(path, compression_type='uncompressed') as f:
      for _, record in itertools.islice(
          tfrecord.read_records(f, path, check_crc=False),
          len(record_sizes)):
        self.write(record)

  def __exit__(self, kind, value, traceback):
    self._stack.__exit__(kind, value, traceback)
    if kind is not None:
      return
    config, path = self.config, self.path
    index = write_index(path + '.' + naming.INDEX_FORMAT, self.sizes,
                        config.compression)
    run_marker.check_marker(config.dataset_dir, self.run_id)
    written = ShardStats(self.split, self.shard, path, len(self.sizes),
                         filesystem.metadata(path).size_in_bytes,
                         self.started_ms, int(time.time() * 1000),
                         index_path=index,
                         records_crc32c=self.digest.value)
    if self._copy is not None:
      written = dataclasses.replace(
          written, array_record_path=self._copy.path,
          array_record_bytes=filesystem.metadata(
              self._copy.path).size_in_bytes,
          array_record_crc32c=array_record_file.fingerprint(self._copy.path))
    self.stats = written


def write_index(path: str, record_sizes, compression: str) -> str:
  """Writes a shard's `tfrecord`-package index at `path`; returns the path
  ('' for compressed shards, whose offsets that package cannot use)."""
  if compression != 'none':
    return ''
  with FileSystems.create(path) as f:
    f.write(tfrecord.index_text(record_sizes).encode('ascii'))
  return path
