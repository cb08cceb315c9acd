"""Read a wavbeam dataset back as numpy arrays: no TensorFlow, no Beam.

    for example in numpy_dataset('out/', 'train'):
      example['spectrogram']   # np.ndarray, float32, (127, 257)

    for batch in numpy_dataset('out/', 'train', batch_size=32, shuffle=True,
                               seed=0):
      batch['signal']          # (32, 32768) int32; strings as lists

The same elements, bit for bit, as replay_dataset (same keys, dtypes and
shapes), from the same shards; for PyTorch, JAX or plain numpy training
code. Every record's CRCs are checked, every shard must hold exactly the
records metadata.json lists and be the size it lists, and any problem
raises DatasetError naming the shard and the record. Local files (or any
mounted file system).
"""

import atexit
from concurrent import futures
import contextlib
import gzip
import mmap
import numbers
import os
import types
from typing import Dict, Iterator, List, Optional, Sequence, Tuple
import weakref
import zlib

import numpy as np

from pipeline.readers import batching
from pipeline.readers import duration_batches
from pipeline.contract import batch_decode
from pipeline.contract import dataset as dataset_lib
from pipeline.contract import metadata as metadata_lib
from pipeline.contract import schema as schema_lib
from pipeline.contract.errors import DatasetError  # noqa: F401  (re-exported)
from pipeline.readers.metadata import load_metadata  # noqa: F401  (re-exported)
from pipeline.contract import example_codec
from pipeline.contract import tfrecord

_SHUFFLE_BUFFER = 1024
# Records located together when batched (batch_decode): numpy's cost per
# call is spread over this many.
_CHUNK_RECORDS = 1024
# Batched records this large (on average) are checked against their CRCs
# on a second thread while they are copied; smaller ones where they are
# copied (crc32c keeps the GIL below 32 KiB: a thread would only wait).
_CHECKED_APART = 32 << 10
# Shards stay mapped between passes, as a memory-mapped Arrow table stays
# mapped, up to this many bytes a reader: mapping a shard again and
# faulting its pages in took a sixth of a warm pass over 1-s clips.
KEPT_MAPPED_BYTES = 8 << 30
# and up to this many shards: each mapping holds a file descriptor open,
# and processes commonly may open 1,024.
KEPT_MAPPED_FILES = 256
# The passes handed out and not finished yet (see closed_at_exit).
_UNFINISHED = weakref.WeakSet()



def open_dataset(output_dir: str, parts=None) -> Tuple[str, Dict]:
  """(dataset folder, its checked metadata.json, merged with the parts
  --append added: all, or those `parts` names); DatasetError otherwise."""
  return dataset_lib.open_dataset(output_dir, dataset_lib.LOCAL, parts)


def open_split(output_dir: str, split: str,
               features: Optional[Sequence[str]] = None, parts=None):
  """(dataset folder, metadata, schema, feature keys to read) of a split;
  DatasetError for a missing dataset, an unknown split or feature."""
  found, metadata = open_dataset(output_dir, parts)
  dataset_lib.split_entry(found, metadata, split)
  schema = metadata_lib.schema_of(metadata)
  keys = dataset_lib.feature_keys(found, schema.as_dict(), features)
  return found, metadata, schema, keys


class NumpyDataset:
  """An iterable over a split's examples (or batches) as numpy arrays, with
  len() from metadata.json. Iterating again reads again (a new epoch; with
  shuffle, in a new order unless `seed` fixes it). A dataset --append
  extended is read whole, or the `parts` named (0 or '.' is the first).
  """

  def __init__(self, output_dir: str, split: str = 'train', *,
               features: Optional[Sequence[str]] = None,
               batch_size: Optional[int] = None, shuffle: bool = False,
               seed: Optional[int] = None, drop_remainder: bool = False,
               shuffle_buffer_size: int = _SHUFFLE_BUFFER, parts=None,
               variant: Optional[str] = None, dtype=None,
               max_duration: Optional[float] = None,
               num_buckets: Optional[int] = None):
    (self.output_dir, self.metadata, self.schema,
     self.keys) = open_split(dataset_lib.variant_folder(output_dir, variant),
                             split, features, parts)
    check_sizes(batch_size=batch_size,
                shuffle_buffer_size=shuffle_buffer_size)
    # Checked here, not where the seed is first drawn from.
    if seed is not None and (not isinstance(seed, numbers.Integral) or
                             isinstance(seed, bool)):
      raise DatasetError(f'seed={seed!r}: give an integer, or None for an '
                         'order of its own each pass')
    if seed is not None:
      seed = int(seed)  # numpy's integers overflow in the seeding below
    # dtype=: the float features as this dtype, else as stored.
    self.dtype = batching.float_dtype_name(dtype)
    check_buckets(max_duration, num_buckets)
    if max_duration is not None and num_buckets is None:
      num_buckets = duration_batches.NUM_BUCKETS
    self.max_duration, self.num_buckets = max_duration, num_buckets
    # Keys read for max_duration= alone, not handed out.
    self.unasked: Tuple[str, ...] = ()
    self.max_samples: Optional[int] = None
    if max_duration is not None:
      try:
        duration_batches.check_options(max_duration, num_buckets)
      except ValueError as e:
        raise DatasetError(str(e)) from None
      if batch_size is not None:
        raise DatasetError(f'batch_size={batch_size!r} and max_duration='
                           f'{max_duration!r}: give one of them')
      if drop_remainder:
        raise DatasetError('drop_remainder=True and max_duration=: every '
                           'batch of max_duration is kept (a bucket left '
                           'at the end of a pass is a batch)')
      try:
        key, self._samples = duration_batches.samples_of(self.metadata,
                                                         self.schema)
      except ValueError as e:
        raise DatasetError(str(e)) from None
      # Batches are cut in whole samples (duration_batches).
      self.max_samples = duration_batches.samples_within(
          max_duration, self.metadata['sample_rate'])
      if key is not None and key not in self.keys:
        # Read for the batching, not handed out.
        self.keys, self.unasked = (*self.keys, key), (key,)
    self.split = split
    self.variable = variable_keys(self.schema, self.keys)
    self.shards = self.metadata['splits'][split]['shards']
    self.batch_size = batch_size
    self.shuffle, self.seed = shuffle, seed
    self.drop_remainder = drop_remainder
    self.shuffle_buffer_size = shuffle_buffer_size
    self._epoch = 0
    self._mapped = {}  # path -> (its os.stat identity, its mmap)
    self._batch_decoder = batch_decode.BatchDecoder(self.schema, self.keys)
    self._layout_decoder = example_codec.Decoder(self.schema, self.keys,
                                                 copy=False)
    self._float_keys = batching.float_keys(self.schema, self.keys)

  def __getstate__(self):  # mappings stay with the process that made them
    return dict(self.__dict__, _mapped={})

  def __len__(self) -> int:
    """Examples (or batches) one pass yields."""
    if self.max_duration is not None:
      raise TypeError('batches of max_duration= seconds: how many depends '
                      "on the epoch's order")
    n = sum(s['num_examples'] for s in self.shards)
    if self.batch_size is None:
      return n
    return n // self.batch_size if self.drop_remainder else -(
        -n // self.batch_size)

  def __iter__(self) -> Iterator:
    items = self._items()
    if self.dtype is None:
      return items
    return closed_at_exit(batching.cast_floats(item, self._float_keys,
                                               self.dtype)
                          for item in items)

  def _items(self) -> Iterator:
    # Any integer seeds (tf.data takes negative ones too).
    rng = np.random.default_rng(
        None if self.seed is None else [self.seed % 2**64, self._epoch])
    self._epoch += 1
    if self.max_duration is not None:
      examples = self._examples(rng, copy=False)
      if self.shuffle:
        examples = buffer_shuffle(examples, self.shuffle_buffer_size, rng)
      buffers = batching.BatchBuffers()
      return closed_at_exit(
          next(buffers.batches(group, len(group), False, self.variable))
          for group in duration_batches.batches(
              self.timed(examples), self.max_samples, self.num_buckets))
    if self.batch_size is not None and self.chunks_batch():
      return closed_at_exit(self._located_batches(rng))
    # Examples batched as they come need no copy of their own (shuffled,
    # they wait in the buffer as views of their records).
    examples = self._examples(rng, copy=self.batch_size is None)
    if self.shuffle:
      examples = buffer_shuffle(examples, self.shuffle_buffer_size, rng)
    if self.batch_size is None:
      return closed_at_exit(examples)
    return closed_at_exit(batching.BatchBuffers().batches(
        examples, self.batch_size, self.drop_remainder, self.variable))

  def timed(self, examples: Iterator[Dict]) -> Iterator[Tuple[int, Dict]]:
    """(samples of audio, example) of each example, for max_duration=
    batches (of max_samples); without the keys read for that alone."""
    for e in examples:
      samples = self._samples(e)
      for key in self.unasked:
        e = dict(e)
        del e[key]
      yield samples, e

  def _examples(self, rng, copy: bool) -> Iterator[Dict]:
    for shard in self._shards_in_order(rng):
      yield from self.read_shard(shard, copy)

  def _shards_in_order(self, rng) -> Iterator[Dict]:
    """The shards, in a new order drawn from `rng` when shuffling (drawn
    when the first is asked for, as the records' shuffle draws next)."""
    order = list(range(len(self.shards)))
    if self.shuffle:
      rng.shuffle(order)
    for i in order:
      yield self.shards[i]

  def chunks_batch(self) -> bool:
    """Whether batches are filled from records read a chunk at a time
    (chunked_records): arrays of fixed shapes, uncompressed shards."""
    return (self._batch_decoder.usable and
            self.metadata['compression'] != 'gzip')

  def _located_batches(self, rng) -> Iterator[Dict]:
    """The batches below, of records located a chunk at a time and copied
    straight into the batch (the same batches, in the same order)."""
    with crc_checker() as checker:
      records = (record for shard in self._shards_in_order(rng)
                 for record in self.chunked_records(
                     shard, 0, shard['num_examples'], checker))
      if self.shuffle:
        records = buffer_shuffle(records, self.shuffle_buffer_size, rng)
      yield from batching.BatchBuffers().batches_of_chunks(
          records, self.batch_size, self.drop_remainder, first_example)

  def chunked_records(self, shard: Dict, start: int, stop: int, checker
                      ) -> Iterator[Tuple['_Chunk', int]]:
    """(chunk, i) per record start..stop-1 of a shard, checked as
    read_records checks them (data CRCs as each is filled into a batch,
    on `checker`, an executor with one thread, when large): chunks of up
    to _CHUNK_RECORDS records, located by batch_decode (or, in another
    layout, decoded one by one). Their batches:
    batching.BatchBuffers.batches_of_chunks with first_example."""
    first, offsets, views = start, [], []
    try:
      for index, offset, view in self._checked_records(
          shard, start, stop, data_crc=False):
        if not views:
          first = index
        offsets.append(offset + 12)  # the data, past its header
        views.append(view)
        if len(views) == _CHUNK_RECORDS:
          yield from self._chunk(shard, first, offsets, views, checker)
          offsets, views = [], []
    except DatasetError:
      # The records before the bad one are handed out first, as
      # read_shard hands them out.
      yield from self._chunk(shard, first, offsets, views, checker)
      raise
    yield from self._chunk(shard, first, offsets, views, checker)

  def _chunk(self, shard: Dict, first: int, offsets: List[int],
             views: List[memoryview], checker):
    if not views:
      return
    starts = np.array(offsets, np.int64)
    sizes = np.fromiter(map(len, views), np.int64, len(views))
    stops = starts + sizes
    chunk = _Chunk(self, shard, first, views, stops.tolist(), sizes,
                   checker)
    # The views' memory: the shard's mapping.
    chunk.located = self._batch_decoder.locate(
        np.frombuffer(views[0].obj, np.uint8), starts, stops)
    for i in range(len(views)):
      yield chunk, i

  def read_shard(self, shard: Dict, copy: bool = True) -> Iterator[Dict]:
    """A shard's examples, checked: size, CRCs, record count, schema
    (`copy` as read_records')."""
    return self.read_records(shard, 0, shard['num_examples'], copy)

  def read_records(self, shard: Dict, start: int, stop: int,
                   copy: bool = True) -> Iterator[Dict]:
    """Examples start..stop-1 of a shard, checked like read_shard; the
    records before `start` are skipped by their headers (length CRCs
    checked). The reader whose range ends the shard checks that it ends
    there, so readers that split a split between them check every shard.
    `copy=False`: arrays are read-only views of the record, for a caller
    that copies them into a batch at once (a copy fewer)."""
    decode = example_codec.Decoder(self.schema, self.keys, copy)
    for index, _, data in self._checked_records(shard, start, stop):
      try:
        example = decode(data)
      except schema_lib.SchemaError as e:
        path = dataset_lib.listed_file(dataset_lib.LOCAL, self.output_dir,
                                       shard)
        raise DatasetError(f'shard {path}: record {index}: {e}') from e
      yield example

  def _checked_records(self, shard: Dict, start: int, stop: int,
                       data_crc: bool = True):
    """(index, offset, data) of records start..stop-1 of a shard, with
    read_records' checks: size, CRCs, record count (`data_crc=False`:
    data CRCs left to the caller, as tfrecord.mapped_records does)."""
    path = dataset_lib.listed_file(dataset_lib.LOCAL, self.output_dir, shard)
    where = f'shard {path}'
    count = start
    with contextlib.ExitStack() as stack:
      try:
        records = self._records(stack, path, start, where,
                                whole=start == 0 and
                                stop == shard['num_examples'],
                                data_crc=data_crc)
        while count < stop:
          item = next(records, None)
          if item is None:
            break
          count += 1
          yield count - 1, item[0], item[1]
        if stop == shard['num_examples'] and next(records, None):
          raise DatasetError(f'shard {path} holds more records than the '
                             f'{shard["num_examples"]} metadata.json says')
      except tfrecord.CorruptRecord as e:  # its message names the shard
        raise DatasetError(f'{e} (run python -m pipeline.verify on the '
                           'dataset)') from e
      except (OSError, EOFError, zlib.error) as e:  # reading, or gzip's
        raise DatasetError(f'shard {path}: {e} (run python -m '
                           'pipeline.verify on the dataset)') from e
    if count != stop:
      raise DatasetError(f'shard {path} holds fewer records than the '
                         f'{shard["num_examples"]} metadata.json says: '
                         f'{count}')

  def _records(self, stack, path: str, start: int, where: str,
               whole: bool = False, data_crc: bool = True):
    """(offset, data) of a shard's records from record `start`: an
    uncompressed shard mapped into memory (each record a view of it,
    its CRC computed in place; with `whole`, every page filled at once),
    a gzip one read through gzip."""
    if self.metadata['compression'] == 'gzip':
      f = stack.enter_context(gzip.open(path, 'rb'))
      tfrecord.skip_records(f, start, where)
      return tfrecord.read_records(f, where, first_index=start)
    buf = self._mapping(stack, path, whole)
    if buf is None:
      return iter(())
    return tfrecord.mapped_records(buf, where, start,
                                   tfrecord.mapped_skip(buf, start, where),
                                   data_crc=data_crc)

  def _mapping(self, stack, path: str, whole: bool):
    """The shard mapped into memory (None if empty): the mapping an
    earlier pass made while the file is the same file (inode, size,
    modification time), else a new one, kept within KEPT_MAPPED_BYTES and
    KEPT_MAPPED_FILES.
    Never closed here: records are views of it, and so are arrays decoded
    without a copy; it is unmapped when the last of them goes."""
    f = stack.enter_context(open(path, 'rb'))
    stat = os.fstat(f.fileno())
    identity = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    kept = self._mapped.get(path)
    if kept is not None and kept[0] == identity:
      return kept[1]
    self._mapped.pop(path, None)
    if stat.st_size == 0:
      return None
    # Mapped with its pages filled at once (read in order, every one of
    # them is touched): a fault per page came to a third of the reading.
    populate = getattr(mmap, 'MAP_POPULATE', 0) if whole else 0
    buf = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED | populate,
                    prot=mmap.PROT_READ)
    if (len(self._mapped) < KEPT_MAPPED_FILES and
        sum(len(m) for _, m in self._mapped.values()) + len(buf)
        <= KEPT_MAPPED_BYTES):
      self._mapped[path] = (identity, buf)
    return buf


def closed_at_exit(iterator: Iterator) -> Iterator:
  """A pass over records (`iterator`, as a generator), closed when the
  program exits if it is still unfinished then (a loop left early, an
  iterator kept in a global): otherwise Python closes its generators
  after it has torn down the modules their code uses, and prints a
  traceback for each."""
  if not isinstance(iterator, types.GeneratorType):
    iterator = _generator_of(iterator)
  _UNFINISHED.add(iterator)
  return iterator


def _generator_of(iterator: Iterator) -> Iterator:
  yield from iterator


@atexit.register
def _close_unfinished() -> None:
  for generator in list(_UNFINISHED):
    try:
      generator.close()
    except Exception:  # pylint: disable=broad-except
      pass  # one running in another thread, or failing as it closes


def crc_checker() -> futures.ThreadPoolExecutor:
  """The thread that checks batched records' CRCs (chunked_records), for
  one reading: use it in a `with`, so that it ends with the reading."""
  return futures.ThreadPoolExecutor(1, thread_name_prefix='wavbeam-crc')


def first_example(chunk: '_Chunk', i: int) -> Dict:
  """Record i of a chunk (chunked_records), decoded: what lays a batch
  out."""
  return chunk.example(i)


class _Chunk:
  """Records of a shard read together (`views` of each, in its mapping),
  filled into batches (batching.BatchBuffers.batches_of_chunks) by
  batch_decode (`located`) or, in another layout, decoded one by one;
  each checked against its data CRC just before it is used."""

  def __init__(self, dataset: NumpyDataset, shard: Dict, first: int,
               views: List[memoryview], stops: List[int], sizes: np.ndarray,
               checker: futures.Executor):
    self.dataset, self.shard, self.first = dataset, shard, first
    self.views, self.stops, self.sizes = views, stops, sizes
    self.checker = checker
    self.located: Optional[batch_decode.Located] = None
    self._checked = -1  # the record last checked

  def fill(self, rows: Dict, strings: Dict, row: int, first: int,
           end: int) -> None:
    if self.located is not None and (self.sizes[first:end].mean()
                                     < _CHECKED_APART):
      self.located.fill(rows, strings, row, first, end, self.check)
      return
    if self.located is not None:
      # The batch goes out only once every CRC matched.
      checking = self.checker.submit(self._first_mismatch, first, end)
      try:
        self.located.fill(rows, strings, row, first, end)
      finally:
        bad = checking.result()
      if bad is not None:
        self.check(bad)  # raises
      return
    for i in range(first, end):
      for key, value in self.example(i).items():
        if key in strings:
          strings[key].append(value)
        else:
          rows[key][row + i - first] = value

  def example(self, i: int) -> Dict:
    """Record i, decoded (arrays are views of it)."""
    self.check(i)
    try:
      return self.dataset._layout_decoder(self.views[i])  # pylint: disable=protected-access
    except schema_lib.SchemaError as e:
      raise DatasetError(f'shard {self._path()}: record {self.first + i}: '
                         f'{e}') from e

  def _first_mismatch(self, first: int, end: int) -> Optional[int]:
    for i in range(first, end):
      view = self.views[i]
      if i != self._checked and not tfrecord.data_crc_matches(
          view.obj, view, self.stops[i]):
        return i
    return None

  def check(self, i: int) -> None:
    view = self.views[i]
    if i == self._checked or tfrecord.data_crc_matches(view.obj, view,
                                                       self.stops[i]):
      self._checked = i
      return
    raise DatasetError(
        f'shard {self._path()}: record {self.first + i} at byte '
        f'{self.stops[i] - 12 - len(view)}: data CRC mismatch (run python '
        '-m pipeline.verify on the dataset)')

  def _path(self) -> str:
    return dataset_lib.listed_file(dataset_lib.LOCAL,
                                   self.dataset.output_dir, self.shard)


def check_sizes(**sizes) -> None:
  """DatasetError for a size (batch_size=, ...) given that is not a
  positive integer."""
  for name, value in sizes.items():
    if value is not None and (not isinstance(value, numbers.Integral) or
                              isinstance(value, bool) or value < 1):
      raise DatasetError(f'{name}={value!r}: give a positive integer')


def check_buckets(max_duration, num_buckets) -> None:
  """DatasetError for a num_buckets= that is not a positive integer, or
  one given without max_duration= (it buckets those batches alone)."""
  if num_buckets is None:
    return
  check_sizes(num_buckets=num_buckets)
  if max_duration is None:
    raise DatasetError(f'num_buckets={num_buckets!r} without max_duration=: '
                       'buckets group batches of max_duration= seconds; '
                       'give max_duration, or leave num_buckets out')


def variable_keys(schema: schema_lib.Schema,
                  keys: Sequence[str]) -> Tuple[str, ...]:
  """The variable-length arrays among `keys`: what a batch pads."""
  return tuple(k for k in keys if schema[k].variable)


def record_ranges(counts: Sequence[int], start: int,
                  stop: int) -> List[Tuple[int, int, int]]:
  """(shard, first, end) record ranges that cover records start..stop-1 of
  shards holding `counts` records, read one after another."""
  ranges, base = [], 0
  for shard, count in enumerate(counts):
    first, end = max(start - base, 0), min(stop - base, count)
    if first < end:
      ranges.append((shard, first, end))
    base += count
  return ranges


def numpy_dataset(output_dir: str, split: str = 'train',
                  **kwargs) -> NumpyDataset:
  """The examples of `split` as dicts of numpy arrays (see NumpyDataset):
  features=, batch_size= (or max_duration= seconds of audio per batch,
  bucketed by length: pipeline/readers/duration_batches.py; num_buckets=,
  10 if not given),
  shuffle=, seed=, drop_remainder=, variant=
  (one variant of a sweep written with --variants), dtype= (the float
  features as this dtype, e.g. 'float32' for a dataset stored with
  --feature_dtype float16; else as stored)."""
  return NumpyDataset(output_dir, split, **kwargs)


def buffer_shuffle(items: Iterator, size: int, rng) -> Iterator:
  buffer: List = []
  for item in items:
    if len(buffer) < size:
      buffer.append(item)
      continue
    i = int(rng.integers(size))
    yield buffer[i]
    buffer[i] = item
  rng.shuffle(buffer)
  yield from buffer
