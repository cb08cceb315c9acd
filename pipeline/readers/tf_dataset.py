"""Read a wavbeam dataset back as a tf.data.Dataset. TensorFlow only.

    ds = replay_dataset('out/', 'train', batch_size=32)

Elements equal what the pipeline produced (same keys, dtypes, shapes and
values, bit-exact), and the dataset knows its cardinality from the shard
lengths in metadata.json (bucketed batches: from the examples' lengths).
Two engines build the same elements:
- 'numpy' (local folders): numpy_reader locates the records in the mapped
  shards and copies each array once, straight into its batch, which
  tf.data takes over (`numpy_function`): no parse, no second copy.
- 'tf' (any file system TensorFlow reads, gzip, or a dataset made of
  TensorFlow ops only): shards read in parallel by tf.data, records parsed
  a batch at a time.
"""

import atexit
import collections
import dataclasses
import itertools
import os
import re
import threading
import time
import weakref
from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.contract import metadata as metadata_lib
from pipeline.contract import dataset as dataset_lib
from pipeline.contract import schema as schema_lib
from pipeline.contract.errors import DatasetError  # noqa: F401  (re-exported)
from pipeline.readers import metadata as reader_metadata
from pipeline.readers.metadata import load_metadata  # noqa: F401  (re-exported)

_PARSE_BATCH = 64  # records decoded together when not batching
_LENGTHS_BATCH = 1024  # records whose lengths are decoded together
_SHUFFLE_BUFFER = 1024
ENGINES = ('auto', 'numpy', 'tf')

# Every function given to tf.data here branches on Python values only:
# AutoGraph's rewrite of their source would change nothing and costs
# 0.3-0.6 s per replay_dataset call.
_as_is = tf.autograph.experimental.do_not_convert


# Every path through gfile, as tf.data reads the shards.
_GFILE = reader_metadata.gfile_system()

# The readers' wording, except that a shard outside the folder is refused
# with outside()'s reason as it stands (it names the file already).
_WORDS = dataclasses.replace(dataset_lib.READER_WORDS, outside='{outside}')


def _checked_shard(path, pattern, num_examples,
                   compression) -> tf.data.Dataset:
  """A shard's records: exactly `num_examples` of them, or an error that
  names the shard.

  The checks are native tf.data ops (a per-record `filter` or `scan` cost
  15-35% of reading speed here; this costs 0-3%, bench.readers):
  - more records: the records are zipped with positions 0..n-1 followed by
    a dataset that fails; zip reads a record before its position, so the
    failure is reached only when record n exists.
  - fewer records (a corrupt record ends the shard's stream): the stream is
    topped up with marker records and cut at n by a second zip, which reads
    one element past the n-th and so lets the first check run. A marker is
    not an Example (its first byte, 'w', is an invalid protobuf tag):
    parsing it fails with TensorFlow's "Could not parse example input,
    value: '<marker>'", and the marker's text names the shard.
  - a shard gone since the dataset was made: ignore_errors would retry
    opening it forever, so it is looked for first (`pattern`, the path
    with glob characters escaped).
  """
  shard = tf.strings.join(['wavbeam: shard ', path])
  present = tf.debugging.Assert(
      tf.size(tf.io.matching_files(pattern)) > 0,
      [shard, ' is missing: it was removed after replay_dataset opened the'
       ' dataset'])
  with tf.control_dependencies([present]):
    path = tf.identity(path)

  def fail(_):
    message = tf.strings.join([
        shard, ' holds more records than the ',
        tf.strings.as_string(num_examples), ' metadata.json says'])
    with tf.control_dependencies([tf.debugging.Assert(False, [message])]):
      return tf.constant(-1, tf.int64)

  marker = tf.strings.join([
      shard, ' holds fewer records than metadata.json says'
      ' (a record is corrupt or missing); run python -m pipeline.verify on'
      ' the dataset to find it'])
  positions = tf.data.Dataset.range(num_examples)
  at_most_n = tf.data.Dataset.zip((
      tf.data.TFRecordDataset(path, compression_type=compression,
                              buffer_size=1 << 20).ignore_errors(),
      positions.concatenate(
          tf.data.Dataset.from_tensors(num_examples).map(_as_is(fail)))))
  topped_up = at_most_n.concatenate(
      tf.data.Dataset.from_tensors((marker, num_examples)).repeat())
  # Dropping the positions here measured cheaper than batching them.
  return tf.data.Dataset.zip((topped_up, positions)).map(
      _as_is(lambda record_and_position, _: record_and_position[0]))


def _parse_spec(spec: schema_lib.FeatureSpec) -> tf.io.FixedLenFeature:
  if spec.encoding == schema_lib.FLOAT_LIST and spec.variable:
    # Parsed a batch at a time, zero-padded to the batch's longest.
    return tf.io.FixedLenSequenceFeature(spec.shape[1:], tf.float32,
                                         allow_missing=True,
                                         default_value=0.0)
  if spec.encoding == schema_lib.FLOAT_LIST:
    return tf.io.FixedLenFeature(spec.shape, tf.float32)
  storage = {schema_lib.RAW_BYTES: tf.string, schema_lib.BYTES_LIST: tf.string,
             schema_lib.INT64_LIST: tf.int64}[spec.encoding]
  return tf.io.FixedLenFeature([], storage)


def _normalizers(metadata, normalize, split, keys_read, output_dir):
  """{feature: (mean, std)} from metadata's statistics of `split`."""
  scale = {}
  for key in normalize:
    if key not in keys_read:
      raise DatasetError(f'cannot normalize {key!r}: it is not among the '
                         f'features read ({sorted(keys_read)})')
    stats = metadata['splits'].get(split, {}).get('statistics', {}).get(key)
    if not stats or not stats['count']:
      raise DatasetError(f'{output_dir} has no statistics for {key!r} in '
                         f'split {split!r} to normalize with')
    scale[key] = (stats['mean'], stats['std'] or 1.0)
  return scale


def _decoder(specs: Dict[str, schema_lib.FeatureSpec], all_specs=None):
  """A batch of serialized records -> dict of batched tensors. A
  variable-length array is zero-padded to the batch's longest and its
  per-example lengths are added as `<key>_length` (from its stored length
  key, parsed whether read or not)."""
  all_specs = all_specs or specs
  parse_specs = {k: _parse_spec(s) for k, s in specs.items()}
  for spec in specs.values():
    if spec.variable:
      parse_specs[spec.length_key] = _parse_spec(all_specs[spec.length_key])

  def decode(serialized):
    parsed = tf.io.parse_example(serialized, parse_specs)
    out = {}
    for key, spec in specs.items():
      value = parsed[key]
      if spec.encoding == schema_lib.RAW_BYTES:
        # Zero-padded to the longest too (fixed_length pads with zeros).
        longest = tf.reduce_max(tf.strings.length(value)) if spec.variable \
            else None
        dtype = tf.as_dtype(spec.dtype)
        # TensorFlow decodes no float16 padded: its bits as uint16 do.
        bits = tf.uint16 if dtype == tf.float16 else dtype
        value = tf.io.decode_raw(value, bits, little_endian=True,
                                 fixed_length=longest)
        if bits != dtype:
          value = tf.bitcast(value, dtype)
        value = tf.reshape(value, [tf.shape(serialized)[0], *spec.shape]
                           if spec.variable else [-1, *spec.shape])
      if spec.variable:
        out[schema_lib.length_key_of(key)] = parsed[spec.length_key]
      out[key] = value
    return out

  return _as_is(decode)


def _standardizer(specs: Dict[str, schema_lib.FeatureSpec], scale):
  """A decoded batch -> the same with the `scale` features standardized,
  (x - mean) / std as float32; padding stays 0."""
  def standardize(batch):
    out = dict(batch)
    for key, (mean, std) in scale.items():
      value = (tf.cast(batch[key], tf.float64) - mean) / std
      value = tf.cast(value, tf.float32)
      if specs[key].variable:
        lengths = batch[schema_lib.length_key_of(key)]
        mask = tf.sequence_mask(lengths, tf.shape(value)[1])
        mask = tf.reshape(mask, tf.concat(
            [tf.shape(mask), tf.ones([len(specs[key].shape) - 1], tf.int32)],
            0))
        value = tf.where(mask, value, tf.zeros_like(value))
      out[key] = value
    return out
  return _as_is(standardize)


def _caster(specs: Dict[str, schema_lib.FeatureSpec], dtype):
  """A decoded batch -> the same with its float features as `dtype`
  (replay_dataset's dtype=)."""
  def cast(batch):
    return {key: (tf.cast(value, dtype) if key in specs and
                  specs[key].dtype in schema_lib.FLOAT_DTYPES else value)
            for key, value in batch.items()}
  return _as_is(cast)


def _numpy_batches(output_dir: str, split: str, specs, *, rows: int,
                   drop_remainder: bool, shuffle: bool, seed, buffer_size,
                   parts) -> tf.data.Dataset:
  """Decoded batches of `rows` examples (the last short unless
  `drop_remainder`), read by numpy_reader, with its checks; a new epoch
  (a new order, when shuffling) each time the dataset is iterated."""
  reader = numpy_reader.NumpyDataset(
      output_dir, split, features=list(specs), batch_size=rows,
      shuffle=shuffle, seed=seed, drop_remainder=drop_remainder,
      shuffle_buffer_size=buffer_size, parts=parts)
  first = rows if drop_remainder else None
  signature = {}
  for key, spec in specs.items():
    dtype = tf.string if spec.dtype == 'string' else tf.as_dtype(spec.dtype)
    if spec.variable:
      signature[key] = tf.TensorSpec([first, None, *spec.shape[1:]], dtype)
      signature[schema_lib.length_key_of(key)] = tf.TensorSpec([first],
                                                               tf.int64)
    else:
      signature[key] = tf.TensorSpec([first, *spec.shape], dtype)
  passes = _Passes(reader, list(signature))
  # tf.data may keep the function it calls after the dataset is gone: that
  # holds the passes (their reader: its mapped shards, a file descriptor
  # each) weakly; the dataset, which its iterators keep alive, holds them.
  held = weakref.ref(passes)

  def batch_at(token, index):
    if not _CALLS.begin():
      raise StopIteration  # the program is exiting (_EngineCalls)
    try:
      kept = held()
      if kept is None:
        raise DatasetError('the dataset replay_dataset made is gone: keep '
                           'it while iterating')
      return kept.batch_at(int(token), int(index))
    finally:
      _CALLS.end()

  def step(token, index):
    token, *columns = tf.numpy_function(
        batch_at, [token, index],
        [tf.int64, *(s.dtype for s in signature.values())], stateful=True)
    return token, {key: tf.ensure_shape(column, spec.shape)
                   for (key, spec), column in zip(signature.items(),
                                                  columns)}

  ds = tf.data.Dataset.range(len(reader)).scan(
      tf.constant(-1, tf.int64), _as_is(step)).apply(
          tf.data.experimental.assert_cardinality(len(reader)))
  ds._wavbeam_passes = passes  # pylint: disable=protected-access
  return ds


class _Passes:
  """The numpy engine's batches, for `Dataset.range(batches).scan(...)`:
  batch `index` of the pass named `token`. Index 0 begins a pass over the
  reader (a new order, when shuffling) and names it; scan hands the name
  on to the same iterator's next batches, so each iterator reads a pass of
  its own, in the order the reader gives it.

  Why not `from_generator`: it builds a dataset for every pass and hands
  each batch on through `flat_map`: batches of 64 windows of 32768 samples
  took 8.8 ms each that way, 5.4 ms this way.

  Nothing tells when an iterator is dropped unfinished (`take`, a loop
  left early): its pass stays open until MOST_OPEN passes begun or read
  since have pushed it out, or the dataset goes (each open pass keeps its
  reading's CRC thread).
  """
  MOST_OPEN = 32

  def __init__(self, reader: numpy_reader.NumpyDataset, keys):
    self._reader = reader
    self._keys = keys
    self._last = len(reader) - 1
    self._lock = threading.Lock()  # one reader: its passes read in turn
    self._open = collections.OrderedDict()  # token: batches, oldest first
    self._failed = collections.OrderedDict()  # token: its error, newest last
    self._tokens = itertools.count()

  def batch_at(self, token: int, index: int) -> list:
    with self._lock:
      if index == 0:
        token = next(self._tokens)
        self._open[token] = iter(self._reader)
        self._keep_newest(self._open)
      batches = self._open.get(token)
      if batches is None:
        raise DatasetError(self._gone(token))
      self._open.move_to_end(token)
      try:
        batch = next(batches, None)
        if batch is None:
          raise DatasetError(f'the reader ended its pass before batch '
                             f'{index} of its length')
      except Exception as e:
        del self._open[token]
        self._failed[token] = f'{type(e).__name__}: {e}'
        self._keep_newest(self._failed)
        raise
      if index == self._last:
        del self._open[token]
      return [token, *(batch[key] for key in self._keys)]

  def _keep_newest(self, table: collections.OrderedDict) -> None:
    while len(table) > self.MOST_OPEN:
      table.popitem(last=False)

  def _gone(self, token: int) -> str:
    """Why an iterator's pass cannot go on."""
    if token < 0:  # scan keeps its first token when batch 0 failed
      return ("replay_dataset(engine='numpy'): this iterator's pass ended "
              'at an error in its first batch, raised then')
    if token in self._failed:
      return ("replay_dataset(engine='numpy'): this iterator's pass ended "
              f'at an error: {self._failed[token]}')
    return (f"replay_dataset(engine='numpy'): this iterator's pass was "
            f'dropped: {self.MOST_OPEN} passes were begun or read since it '
            "last was (iterators left unfinished count); iterate fewer at "
            "once, or use engine='tf'")


class _EngineCalls:
  """The numpy engine's calls from tf.data's threads, stopped as the
  program exits, before Python finalizes: a thread that asks for the GIL
  after that is ended on the spot, and the iterator it was filling (a
  prefetch left running by a loop left early) then waits for it for
  ever as Python destroys it. Stopped, calls fail at once, so tf.data's
  buffers fill and its threads go idle (as at the end of a pass: tf.data
  logs no error for it)."""
  QUIET = 0.05      # seconds without a call: the buffers are full
  MOST_WAIT = 5.0   # for a call under way (a batch read from a slow disk)

  def __init__(self):
    self._lock = threading.Lock()
    self._running = 0
    self._last = 0.0
    self._stopped = False

  def begin(self) -> bool:
    """Whether a call may go on (then end() it); False once stopped."""
    with self._lock:
      self._last = time.monotonic()
      if self._stopped:
        return False
      self._running += 1
      return True

  def end(self) -> None:
    with self._lock:
      self._running -= 1
      self._last = time.monotonic()

  def stop(self) -> None:
    with self._lock:
      self._stopped = True
    deadline = time.monotonic() + self.MOST_WAIT
    while time.monotonic() < deadline:
      with self._lock:
        if (self._running == 0 and
            time.monotonic() - self._last >= self.QUIET):
          return
      time.sleep(0.01)


_CALLS = _EngineCalls()
atexit.register(_CALLS.stop)


def _checked_engine(engine: str) -> None:
  if engine not in ENGINES:
    raise DatasetError(f'engine={engine!r}: one of {", ".join(ENGINES)}')


def _uses_numpy(engine: str, output_dir: str, metadata: Dict) -> bool:
  local = '://' not in output_dir
  if engine == 'numpy' and not local:
    raise DatasetError(f"engine='numpy' reads local folders, not "
                       f"{output_dir}: use engine='tf'")
  # Built while a function is traced (tf.function, Dataset.interleave's
  # function), the dataset's Python object, which holds the reader, is
  # gone when the function runs.
  traced = not tf.executing_eagerly()
  if engine == 'numpy' and traced:
    raise DatasetError("engine='numpy' builds its dataset eagerly, not in a "
                       "traced function (tf.function, Dataset.interleave's "
                       "function): build it outside, or use engine='tf'")
  return engine == 'numpy' or (engine == 'auto' and local and not traced and
                               metadata['compression'] != 'gzip')


def _unpadded(specs: Dict[str, schema_lib.FeatureSpec]):
  """One example of a padded batch, unbatched, cut to its own lengths:
  the `<key>_length` entries go."""
  def cut(element):
    out = {}
    for key, value in element.items():
      spec = specs.get(key)
      if spec is not None and spec.variable:
        value = value[:element[schema_lib.length_key_of(key)]]
      out[key] = value
    return {k: v for k, v in out.items() if k in specs}
  return _as_is(cut)


def _bucket_key(schema, keys, bucket_key, input_key, output_dir):
  """The variable-length feature whose length buckets examples."""
  variable = [k for k in keys if schema[k].variable]
  if bucket_key is None:
    bucket_key = input_key if input_key in variable else (
        variable[0] if variable else None)
  if bucket_key is None or bucket_key not in variable:
    raise DatasetError(
        f'bucket_boundaries: {output_dir} has no variable-length feature '
        f'{bucket_key!r} among those read ({sorted(keys)}) to bucket by '
        '(it was written with --example_unit window?)' if bucket_key else
        f'bucket_boundaries: no variable-length feature among those read '
        f'({sorted(keys)}): examples of {output_dir} all have one length')
  return bucket_key


def bucketed_batches(lengths, boundaries: Sequence[int], batch_size: int,
                     drop_remainder: bool) -> int:
  """The batches tf.data's bucket_by_sequence_length makes of examples of
  these lengths, in whatever order: bucket i holds the lengths from
  boundaries[i - 1] (the first from 0) up to, not including, boundaries[i]
  (the last has no end), and each bucket is batched on its own, its last
  batch short, or dropped with `drop_remainder`. Lengths are taken as
  int32, as replay_dataset hands them to the bucketing."""
  buckets = np.searchsorted(np.asarray(boundaries, np.int64),
                            np.asarray(lengths, np.int64).astype(np.int32),
                            side='right')
  sizes = np.bincount(buckets, minlength=len(boundaries) + 1)
  full, rest = np.divmod(sizes, batch_size)
  return int(full.sum() + (0 if drop_remainder else np.count_nonzero(rest)))


def _example_lengths(use_numpy: bool, output_dir: str, split: str,
                     length_key: str, parts, schema, files, shards,
                     total: int, compression: str) -> np.ndarray:
  """Every example's stored length (`length_key`, e.g. num_frames) in the
  split: a pass over its records that decodes that key alone, by the
  engine's own reader, with its checks."""
  if use_numpy:
    reader = numpy_reader.NumpyDataset(
        output_dir, split, features=[length_key], parts=parts,
        batch_size=_LENGTHS_BATCH)
    return np.concatenate([np.zeros(0, np.int64)] + [
        np.asarray(batch[length_key], np.int64) for batch in reader])
  # Eagerly, also where the dataset is built inside a tf.function: the
  # count is a number the dataset is made with.
  with tf.init_scope():
    lengths = _records(files, shards, total, compression, False, None, True,
                       _SHUFFLE_BUFFER, False).batch(_LENGTHS_BATCH).map(
                           _decoder({length_key: schema[length_key]}, schema))
    return np.concatenate([np.zeros(0, np.int64)] + [
        batch[length_key].numpy() for batch in lengths])


def replay_dataset(output_dir: str, split: str = 'train', *,
                   features: Optional[Sequence[str]] = None,
                   batch_size: Optional[int] = None, shuffle: bool = False,
                   seed: Optional[int] = None, deterministic: bool = True,
                   as_supervised: bool = False,
                   label_key: str = schema_lib.LABEL_KEY,
                   input_key: Optional[str] = None, repeat: bool = False,
                   drop_remainder: bool = False,
                   normalize: Sequence[str] = (),
                   statistics_split: str = 'train',
                   shuffle_buffer_size: int = _SHUFFLE_BUFFER,
                   parts: Optional[Sequence] = None,
                   variant: Optional[str] = None,
                   bucket_boundaries: Optional[Sequence[int]] = None,
                   bucket_key: Optional[str] = None,
                   engine: str = 'auto', dtype=None) -> tf.data.Dataset:
  """The examples of `split` as a tf.data.Dataset.

  Args:
    features: keys to read (default: all). Only these are decoded.
    batch_size: batch elements (decoded a batch at a time either way).
    shuffle: shuffle shard order and examples (buffer `shuffle_buffer_size`).
    seed, deterministic: as in tf.data; deterministic=False lets the 'tf'
      engine reorder elements across shards for speed.
    as_supervised: yield (input, label) pairs: `input_key` (default: the
      metadata's input_key, the first computed feature) and `label_key`.
    repeat: repeat forever (cardinality becomes infinite).
    normalize: features to standardize, (x - mean) / std as float32, with
      the statistics of `statistics_split` (computed by the pipeline over
      all values of the feature).
    parts: of a dataset --append extended, the parts to read (names from
      parts.json, or numbers: 0 is the first); default all.
    variant: of a sweep written with --variants, the variant to read (its
      folder, OUT/<variant>, is the same dataset).
    bucket_boundaries: with batch_size, of a dataset written with
      --example_unit file: batch examples of similar length together
      (tf.data's bucket_by_sequence_length), bucketed by the length of
      `bucket_key` (default: the input key if it varies, else the first
      variable-length feature read) at these boundaries, in its own units
      (samples of a signal, frames of a spectrogram). Less padding; the
      batches come in another order. The batches the buckets make are
      counted (the dataset's cardinality) from every example's stored
      length, read when the dataset is made: a pass over the split that
      decodes the length alone.

    engine: 'numpy' (local folders: numpy_reader's batches, handed to
      tf.data without a copy), 'tf' (TensorFlow ops only: any file system
      tf.io.gfile reads, gzip, the tf.data service, iterator checkpoints)
      or 'auto': 'numpy' for an uncompressed local dataset built eagerly
      (not inside a tf.function), else 'tf'. The same elements;
      unshuffled, 'numpy' reads shards one after another, 'tf' interleaves
      them a record at a time.
    dtype: the float features as this dtype (a tf.DType or its name, e.g.
      'float32' for a dataset stored with --feature_dtype float16); by
      default as stored (normalize= gives float32 either way).

  Variable-length arrays (--example_unit file) come whole per example;
  batched, each is zero-padded to the longest of its batch and
  `<key>_length` (int64) gives every example's own length.
  """
  _checked_engine(engine)
  output_dir = os.fspath(output_dir)
  numpy_reader.check_sizes(batch_size=batch_size,
                           shuffle_buffer_size=shuffle_buffer_size)
  output_dir, metadata = dataset_lib.open_dataset(
      dataset_lib.variant_folder(output_dir, variant, _GFILE), _GFILE, parts)
  schema = metadata_lib.schema_of(metadata).as_dict()
  if as_supervised:
    input_key = input_key or metadata['input_key']
    if metadata['num_classes'] == 0 and label_key == schema_lib.LABEL_KEY:
      raise DatasetError(f'{output_dir} was written with --label_from none: '
                         'there is no label for as_supervised')
    features = [input_key, label_key]
  keys = dataset_lib.feature_keys(output_dir, schema, features)
  scale = _normalizers(metadata, normalize, statistics_split, keys,
                       output_dir)
  files = dataset_lib.shard_files(_GFILE, output_dir, metadata, split,
                                  _WORDS)
  total = metadata['splits'][split]['num_examples']
  specs = {k: schema[k] for k in keys}
  variable = any(spec.variable for spec in specs.values())
  if bucket_boundaries is not None:
    if batch_size is None:
      raise DatasetError('bucket_boundaries needs a batch_size')
    bucket_key = _bucket_key(schema, keys, bucket_key,
                             input_key or metadata['input_key'], output_dir)
    boundaries = [int(b) for b in bucket_boundaries]
    if not boundaries or boundaries != sorted(set(boundaries)) or \
        boundaries[0] <= 0:
      raise DatasetError(f'bucket_boundaries={list(bucket_boundaries)}: '
                         'give increasing positive lengths')
  use_numpy = _uses_numpy(engine, output_dir, metadata)
  # Batches as asked for, or decoded _PARSE_BATCH records at a time and
  # handed out one by one, bucketed, or batched again: the numpy engine's
  # batches end with each pass, and repeated batches run across passes
  # (tf.data's repeat().batch()).
  as_batched = batch_size is not None and bucket_boundaries is None
  rebatched = as_batched and repeat and use_numpy
  rows = batch_size if as_batched and not rebatched else _PARSE_BATCH
  drop = drop_remainder and as_batched and not rebatched
  if use_numpy:
    ds = _numpy_batches(output_dir, split, specs, rows=rows,
                        drop_remainder=drop, shuffle=shuffle, seed=seed,
                        buffer_size=shuffle_buffer_size, parts=parts)
    if repeat:
      ds = ds.repeat()
  else:
    ds = _records(files, metadata['splits'][split]['shards'], total,
                  metadata['compression'], shuffle, seed, deterministic,
                  shuffle_buffer_size, repeat)
    ds = ds.batch(rows, drop_remainder=drop).map(
        _decoder(specs, schema), num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic)
  if scale:
    ds = ds.map(_standardizer(specs, scale),
                num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=deterministic)
  if dtype is not None:
    ds = ds.map(_caster(specs, tf.as_dtype(dtype)),
                num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=deterministic)
  # Examples cut out of padded batches, keeping their lengths to be
  # batched again.
  cut_keeping_lengths = _unpadded({
      **specs, **{schema_lib.length_key_of(k): None
                  for k, s in specs.items() if s.variable}})
  if bucket_boundaries is not None:
    length_of = schema_lib.length_key_of(bucket_key)
    ds = ds.unbatch().map(cut_keeping_lengths)
    ds = ds.bucket_by_sequence_length(
        _as_is(lambda d: tf.cast(d[length_of], tf.int32)), boundaries,
        [batch_size] * (len(boundaries) + 1),
        drop_remainder=drop_remainder)
    # tf.data cannot tell how many batches the buckets make (-2, unknown):
    # the examples' lengths can.
    ds = ds.apply(tf.data.experimental.assert_cardinality(
        tf.data.INFINITE_CARDINALITY if repeat else bucketed_batches(
            _example_lengths(use_numpy, output_dir, split,
                             schema[bucket_key].length_key, parts, schema,
                             files, metadata['splits'][split]['shards'],
                             total, metadata['compression']),
            boundaries, batch_size, drop_remainder)))
  elif rebatched and variable:
    ds = ds.unbatch().map(cut_keeping_lengths).padded_batch(
        batch_size, drop_remainder=drop_remainder)
  elif rebatched:
    ds = ds.unbatch().batch(batch_size, drop_remainder=drop_remainder)
  elif not as_batched:
    ds = ds.unbatch()
    if variable:
      ds = ds.map(_unpadded(specs))
    if not repeat:
      ds = ds.apply(tf.data.experimental.assert_cardinality(total))
  if as_supervised:
    ds = ds.map(_as_is(lambda d: (d[input_key], d[label_key])))
  return ds.prefetch(tf.data.AUTOTUNE)


def _records(files, shards, total, compression, shuffle, seed,
             deterministic, shuffle_buffer_size, repeat) -> tf.data.Dataset:
  """The split's serialized records, read by tf.data (the 'tf' engine):
  shards in parallel, each checked (_checked_shard)."""
  counts = [s['num_examples'] for s in shards]
  compression = 'GZIP' if compression == 'gzip' else ''
  patterns = [re.sub(r'([*?\[\]\\])', r'\\\1', f) for f in files]
  # Typed constants: an empty split has no file to infer a dtype from.
  ds = tf.data.Dataset.from_tensor_slices(
      (tf.constant(list(files), tf.string), tf.constant(patterns, tf.string),
       tf.constant(counts, tf.int64)))
  if shuffle:
    ds = ds.shuffle(max(1, len(files)), seed=seed)
  ds = ds.interleave(
      _as_is(lambda f, p, n: _checked_shard(f, p, n, compression)),
      cycle_length=max(1, min(len(files), 8)), block_length=1,
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
  ds = ds.apply(tf.data.experimental.assert_cardinality(total))
  if shuffle:
    ds = ds.shuffle(shuffle_buffer_size, seed=seed)
  if repeat:
    ds = ds.repeat()
  return ds
