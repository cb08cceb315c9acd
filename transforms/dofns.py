"""The pipeline's DoFns: small, stateless between elements, pickle-safe."""

import collections
import contextlib
import dataclasses
import time
import uuid
from typing import Optional

import apache_beam as beam
from apache_beam.internal import pickler
from apache_beam.io.filesystems import FileSystems

from pipeline.contract import naming
from pipeline.contract import schema as schema_lib
from pipeline import config as config_lib
from pipeline.config import PipelineConfig
from transforms import allocator
from pipeline.contract import array_record_file
from transforms import block_store
from transforms import counters
from pipeline.contract import example_codec
from transforms import filesystem
from transforms import labels
from transforms import launch_processes
from transforms import manifest as manifest_lib
from transforms import layout as layout_lib
from transforms import plan as plan_lib
from transforms import reject_parts
from transforms import run_marker
from transforms import split_lists
from transforms import splits
from transforms import stats as stats_lib
from pipeline.contract import tfrecord
from transforms import wav_io
from transforms.extract import FeatureExtractor, read_windows
from transforms.shards import ShardStats
from transforms.stats import ExampleStats

# Windows read together. The grouping decides where reads seek, and a
# compressed stream (MP3 content named .wav) decodes differently after a
# seek, so it stays fixed: the hostile-input test checks those bytes.
BATCH_WINDOWS = 32
# Samples computed together: 4 windows of 32768 (4 x 127 STFT frames) still
# vectorize the FFT, and each array (~0.5-1 MB) fits a core's own 1 MB L2
# cache, so two worker processes do not evict each other's data from the
# shared L3. Against 8 such windows: shard phase 4% faster with 1 worker
# process, 18% with 2 (1.89x instead of 1.65x the 1-worker rate); 32 at
# once is slower still (bench.fft). Shorter windows go more at a time,
# the same samples per batch, so per-batch costs do not grow per example.
COMPUTE_SAMPLES = 4 * 32768


def compute_windows(win_len: int) -> int:
  """Windows per feature batch (rows never interact: any batching gives
  the same bytes)."""
  return max(1, min(BATCH_WINDOWS, COMPUTE_SAMPLES // win_len))


# DoFns with several kinds of output yield them all on the main output, as
# distinct types, and the graph splits them with SplitByType: Beam 2.77's
# DaskRunner merges a ParDo's tagged outputs into one stream.


def index_blocks(paths, entries=None, refused=None):
  """Sorted paths -> ([(block, ((index, path, entry), ...))], [Rejection]):
  consecutive indices in blocks of plan.block_size, and a rejection for
  each name that is not UTF-8 or is in `refused` ({path: reason}); they
  keep their indices, so others keep theirs. `entries` maps paths to
  their manifest rows (entry: a manifest.Entry, else None).

  A name that is not valid UTF-8 cannot be written in an example, a
  rejection or a Beam coder's string; it is shown with its bytes as \\xNN
  and counted like any other file.
  """
  indexed, unusable = [], []
  refused = refused or {}
  for index, path in enumerate(paths):
    shown = wav_io.undecodable_name(path)
    if shown is not None:
      unusable.append(wav_io.Rejection(
          shown, 'file name is not valid UTF-8 (shown with its bytes as '
          '\\xNN): rename the file', 'list'))
    elif path in refused:
      unusable.append(wav_io.Rejection(path, refused[path], 'list'))
    else:
      indexed.append((index, path, entries and entries.get(path)))
  size = plan_lib.block_size(len(paths))
  blocks = [(b, tuple(indexed[start:start + size]))
            for b, start in enumerate(range(0, len(indexed), size))]
  return blocks, unusable


def input_paths(config: PipelineConfig):
  """(sorted paths, manifest entries or None, {path: why it is refused}):
  the audio files under input_dir (--audio_formats); with --manifest,
  those and the manifest's rows, where a file without a row, and a row
  under input_dir without its file, are refused (rows elsewhere, absolute
  or URIs, are probed); with --split_lists, a listed path without its file
  is refused too, so that it is counted and reported like a file."""
  paths = wav_io.list_audio_files(config.input_dir, config.audio_formats)
  formats = f'--audio_formats={",".join(config.audio_formats)}'
  if config.split_lists:
    listed = set(paths)
    missing = {}
    for name, where in split_lists.listed_places(config).items():
      path = naming.join(config.input_dir, name)
      if path not in listed:
        missing[path] = (f'listed in {where} of --split_lists, but there is '
                         f'no such file under input_dir (of {formats})')
    return sorted(listed | set(missing)), None, missing
  if not config.manifest:
    return paths, None, {}
  found = manifest_lib.read(config)
  listed = set(paths)
  every = sorted(listed | set(found.entries))
  root = config.input_dir.rstrip('/') + '/'
  refused = {}
  for path in every:
    entry = found.entries.get(path)
    if entry is None:
      refused[path] = f'no row in the manifest ({found.text})'
    elif path not in listed and path.startswith(root):
      refused[path] = (f'listed on line {entry.line} of the manifest, but '
                       f'there is no such file under input_dir (of '
                       f'{formats})')
  return every, found.entries, refused


def list_input(config: PipelineConfig, base=None):
  """(files seen, blocks, rejections) of the run's input (input_paths);
  for an --append part, `base` (append.AppendBase) holds the paths to
  read, chosen by the launcher, and those refused."""
  if base is None:
    every, entries, refused = input_paths(config)
  else:
    every, refused = list(base.paths), dict(base.refused)
    entries = manifest_lib.read(config).entries if config.manifest else None
  entries = _with_split_lists(config, every, entries)
  blocks, unusable = index_blocks(every, entries, refused)
  return len(every), blocks, unusable


def _with_split_lists(config: PipelineConfig, paths, entries):
  """--split_lists as rows dealt with their files, as a manifest's are (a
  manifest's rows get their split), so that planning reads no list."""
  if not config.split_lists:
    return entries
  listed = split_lists.listed_splits(config)
  out = dict(entries or {})
  for path in paths:
    split = listed.get(splits.relative_path(path, config.input_dir),
                       config_lib.REST_SPLIT)
    entry = out.get(path)
    out[path] = (dataclasses.replace(entry, split=split) if entry is not None
                 else manifest_lib.Entry(0, split, None))
  return out


class ListBlocks(beam.DoFn):
  """(config, append base or None) -> the listing in blocks, a Rejection
  per unusable name (or, with --manifest, a file without a row, a row
  without a file; with --append, a changed file) and one ListedFiles with
  the count: the paths are listed by the job, not carried in its graph."""

  def process(self, listing):
    count, blocks, unusable = list_input(*listing)
    yield from blocks
    yield from unusable
    yield stats_lib.ListedFiles(count)


class ProbeBlock(beam.DoFn):
  """(block, ((index, path), ...)) -> one StoredBlock: the probes of the
  files that open, and a Rejection (or a note) per file that needs one,
  stored (see block_store) for PlanBlock."""

  def __init__(self, dataset_dir: str):
    self.dataset_dir = dataset_dir

  def process(self, block):
    processes = launch_processes.current()
    stored = (probe_block(self.dataset_dir, block) if processes is None else
              launch_processes.call(processes, probe_block, self.dataset_dir,
                                    block))
    counters.counter(counters.FILES_PROBED).inc(len(block[1]))
    counters.counter(counters.FILES_REJECTED).inc(stored.files_rejected)
    yield stored


def probe_block(dataset_dir: str, block) -> plan_lib.StoredBlock:
  """ProbeBlock's work: the block's probes stored with a Rejection or note
  per file that needs one (PlanBlock writes those out)."""
  number, files = block
  rejections, infos = [], []
  entries = {index: entry for index, _, entry in files if entry is not None}
  for index, path, _ in files:
    try:
      info, note = wav_io.probe(index, path)
    except wav_io.BadWav as e:
      rejections.append(wav_io.Rejection(path, str(e), 'probe'))
      continue
    infos.append(info)
    if note:
      rejections.append(wav_io.Rejection(path, note, wav_io.NOTE))
  rates = collections.Counter(info.sample_rate for info in infos)
  return plan_lib.StoredBlock(
      number, block_store.write(dataset_dir, number, infos, rejections,
                                entries),
      tuple(sorted(rates.items())), len(files) - len(infos))


class PlanBlock(beam.DoFn):
  """StoredBlock -> its planned files per split (PlannedFiles), its
  windows (BlockWindows), and, when any file of the block was rejected
  (by probing, or here: wrong rate, too short, no label) or noted, its
  RejectPart."""

  def __init__(self, config: PipelineConfig):
    self.config = config

  def process(self, stored, dataset_rate):
    infos, probe_rejections, entries = block_store.read_all(stored.path)
    planned, rejected = plan_lib.plan_block(stored.block, infos, self.config,
                                            dataset_rate, entries)
    rejections = probe_rejections + tuple(
        wav_io.Rejection(path, reason, 'plan') for path, reason in rejected)
    if rejections:
      yield reject_parts.write(self.config.dataset_dir, stored.block,
                               rejections)
    counters.counter(counters.FILES_REJECTED).inc(len(rejected))
    yield stats_lib.PlannedFiles(
        stored.block, tuple(sorted(planned.files_by_split().items())),
        stored.path)
    yield plan_lib.BlockWindows(stored.block, planned.counts())


def planned_block(stored, config: PipelineConfig, dataset_rate: int,
                  allowed=None) -> plan_lib.PlannedBlock:
  """A StoredBlock planned again (rejections were recorded by PlanBlock),
  limited to its first allowed[block] windows when --num_elems is set."""
  infos, _, entries = block_store.read_all(stored.path)
  planned, _ = plan_lib.plan_block(stored.block, infos, config, dataset_rate,
                                   entries)
  if allowed is not None:
    planned = plan_lib.limit_block(planned, allowed[stored.block])
  return planned


def stored_block_refs(stored, config: PipelineConfig, dataset_rate: int,
                      layouts, allowed=None):
  """((split, shard), (plan, window, sort key)) for a StoredBlock's
  windows (layout.block_refs)."""
  return layout_lib.block_refs(
      stored.block, planned_block(stored, config, dataset_rate,
                                  allowed).plans,
      layouts, shuffle=not config.no_shuffle, seed=config.shuffle_seed)


class ExampleMaker:
  """Reads windows, computes their features and encodes their examples:
  the work of a shard task (WriteShard) or of a work unit (EncodeExamples).
  Not a DoFn: built in a DoFn's setup, one per worker thread, or in a
  launch process. Counts nothing: Beam's counters exist only in a worker,
  so the DoFns count what it returns."""

  def __init__(self, config: PipelineConfig, extra_features=None):
    self.config = config
    self._extractor = FeatureExtractor(config, extra_features)

  def examples(self, split, refs, class_names, stats: ExampleStats):
    """Serialized examples of refs [(FilePlan, window, key)], in the order
    given, and a Rejection (with its split) per window that cannot be
    used; `stats` counts what is yielded."""
    plans = {plan.info.index: plan for plan, _, _ in refs}
    refs = [(plan.info.index, window) for plan, window, _ in refs]
    with wav_io.OpenFiles() as files:
      for start in range(0, len(refs), BATCH_WINDOWS):
        batch = refs[start:start + BATCH_WINDOWS]
        windows, kept, rejections = read_windows(batch, plans, self.config,
                                                 files)
        for rejection in rejections:
          yield dataclasses.replace(rejection, split=split)
        kept_refs = [batch[i] for i in kept]
        step = compute_windows(self.config.win_len)
        for part in range(0, len(kept_refs), step):
          yield from self._encode(stats, kept_refs[part:part + step],
                                  windows[part:part + step], plans,
                                  class_names)

  def _encode(self, stats, refs, windows, plans, class_names):
    columns = self._columns(refs, plans, class_names)
    arrays = self._extractor.compute(windows, plans[refs[0][0]].sample_rate)
    stats.add_moments(arrays)
    columns.update(arrays)
    # Scalar columns have fixed types: a batch's schema can only change
    # with its arrays' dtypes or shapes.
    signature = tuple((k, a.dtype.str, a.shape[1:])
                      for k, a in sorted(arrays.items()))
    if signature != stats.schema_signature:
      stats.schema = stats.schema.merge(example_codec.batch_schema(columns))
      stats.schema_signature = signature
    for ref, record in zip(refs, example_codec.encode_batch(columns,
                                                            len(refs))):
      stats.add(plans[ref[0]].label, len(record))
      yield record

  def _columns(self, refs, plans, class_names):
    rows = [plans[index] for index, _ in refs]
    extras = {name: [dict(p.extras)[name] for p in rows]
              for name in self.config.manifest_extra_columns}
    return {
        **extras,
        schema_lib.CLASS_KEY: [p.label for p in rows],
        'filepath': [p.info.path for p in rows],
        'index': [p.info.index for p in rows],
        'num_classes': [len(class_names)] * len(rows),
        schema_lib.LABEL_KEY: [class_names.index(p.label) if p.label
                               else labels.NO_LABEL_TARGET for p in rows],
        'win_start_idx': [w * self.config.hop_len for _, w in refs],
    }


class WriteShard(beam.DoFn):
  """((split, shard, salt), window refs) -> one shard file, under a temp name.

  A ref is (FilePlan, window, sort key): everything needed to read the
  window travels with it, so no task holds the plans of other files.
  Reads the shard's windows in their sort-key order, computes features a
  batch at a time, encodes and appends the records. Emits a ShardStats, one
  ExampleStats and a Rejection per window that could not be used.
  """

  def __init__(self, config: PipelineConfig, extra_features=None,
               run_id: Optional[str] = None):
    self.config = config
    self.extra_features = extra_features
    self.run_id = run_id

  def setup(self):
    allocator.keep_freed_memory()  # per worker process; see allocator.py
    self._maker = ExampleMaker(self.config, self.extra_features)
    self._pickled = None

  def process(self, keyed_refs, class_names):
    processes = launch_processes.current()
    if processes is None:
      items = write_shard(self._maker, self.config, self.run_id, keyed_refs,
                          class_names)
    else:
      items = launch_processes.call(processes, _write_shard_there,
                                    self._state(), self.run_id, keyed_refs,
                                    class_names)
    for item in items:
      if isinstance(item, ShardStats):
        counters.counter(counters.SHARDS_WRITTEN).inc()
        counters.counter(counters.EXAMPLES_WRITTEN).inc(item.num_examples)
        counters.counter(counters.BYTES_WRITTEN).inc(item.num_bytes)
      elif isinstance(item, wav_io.Rejection):
        counters.counter(counters.WINDOWS_REJECTED).inc()
      yield item

  def _state(self) -> bytes:
    if self._pickled is None:
      self._pickled = pickler.dumps((self.config, self.extra_features))
    return self._pickled


_makers = {}  # in a launch process: pickled (config, features) -> maker


def _write_shard_there(state: bytes, run_id: Optional[str], keyed_refs,
                       class_names) -> list:
  """write_shard in a launch process (transforms/launch_processes.py)."""
  if state not in _makers:
    _makers.clear()
    allocator.keep_freed_memory()
    _makers[state] = ExampleMaker(*pickler.loads(state))
  maker = _makers[state]
  return write_shard(maker, maker.config, run_id, keyed_refs, class_names)


def write_shard(maker: 'ExampleMaker', config: PipelineConfig,
                run_id: Optional[str], keyed_refs, class_names) -> list:
  """Writes one shard file under a temp name: [a Rejection per window
  that could not be used, ..., its ShardStats, its ExampleStats]."""
  started_ms = int(time.time() * 1000)
  (split, shard, _), refs = keyed_refs  # _: transforms/balance.py's salt
  # set(): a runner may deliver a reference twice (Beam's DaskRunner does).
  refs = sorted(set(map(tuple, refs)), key=lambda ref: ref[2])
  # A fresh name per attempt: two attempts at one shard (retries, or
  # DaskRunner recomputing a branch) never write into the same file.
  run_marker.check_marker(config.dataset_dir, run_id)
  path = naming.join(run_marker.temp_dir(config.dataset_dir),
                     f'{split}-{shard:05d}-{uuid.uuid4().hex}')
  compression = filesystem.beam_compression(config.compression)
  stats = ExampleStats(split=split, shard=shard)
  items, sizes = [], []
  copy = (array_record_file.Writer(path + '.' + naming.ARRAY_RECORD)
          if config.array_record else contextlib.nullcontext())
  with FileSystems.create(path, compression_type=compression) as f, copy:
    for item in maker.examples(split, refs, class_names, stats):
      if isinstance(item, wav_io.Rejection):
        items.append(item)
      else:
        sizes.append(tfrecord.write_record(f, item))
        if config.array_record:
          copy.write(item)
  index = write_index(path + '.' + naming.INDEX_FORMAT, sizes,
                      config.compression)
  run_marker.check_marker(config.dataset_dir, run_id)
  written = ShardStats(split, shard, path, stats.num_examples,
                       filesystem.metadata(path).size_in_bytes, started_ms,
                       int(time.time() * 1000), index_path=index)
  if config.array_record:
    written = dataclasses.replace(
        written, array_record_path=copy.path,
        array_record_bytes=filesystem.metadata(copy.path).size_in_bytes,
        array_record_crc32c=array_record_file.fingerprint(copy.path))
  items.append(written)
  items.append(stats)
  return items


def write_index(path: str, record_sizes, compression: str) -> str:
  """Writes a shard's `tfrecord`-package index at `path`; returns the path
  ('' for compressed shards, whose offsets that package cannot use)."""
  if compression != 'none':
    return ''
  with FileSystems.create(path) as f:
    f.write(tfrecord.index_text(record_sizes).encode('ascii'))
  return path


# Window references per work unit of the write_to_tfrecord sink: one
# compute batch's worth at least, few enough that units spread over
# workers.
UNIT_WINDOWS = 64
_UNIT_PARTS = 1 << 24  # unit number = block * _UNIT_PARTS + part


def work_units(stored, config: PipelineConfig, dataset_rate: int,
               allowed=None):
  """((split, unit), refs) for a StoredBlock's windows, in file order, in
  parts of UNIT_WINDOWS: the write_to_tfrecord sink's elements. Unit
  numbers are unique and ordered by block, so statistics merge in the same
  order whatever the bundling."""
  planned = planned_block(stored, config, dataset_rate, allowed)
  by_split = {}
  for plan in planned.plans:
    refs = by_split.setdefault(plan.split, [])
    refs.extend((plan, w, len(refs)) for w in range(plan.num_windows))
  for split, refs in sorted(by_split.items()):
    for part, start in enumerate(range(0, len(refs), UNIT_WINDOWS)):
      yield ((split, stored.block * _UNIT_PARTS + part),
             refs[start:start + UNIT_WINDOWS])


class EncodeExamples(beam.DoFn):
  """A work unit ((split, unit), refs) -> (split, serialized example) per
  window, one ExampleStats (keyed by the unit) and a Rejection per window
  that could not be used: the write_to_tfrecord sink's ParDo."""

  def __init__(self, config: PipelineConfig, extra_features=None):
    self.config = config
    self.extra_features = extra_features

  def setup(self):
    allocator.keep_freed_memory()
    self._maker = ExampleMaker(self.config, self.extra_features)
    self._examples = counters.counter(counters.EXAMPLES_WRITTEN)
    self._windows_rejected = counters.counter(counters.WINDOWS_REJECTED)

  def process(self, unit, class_names):
    (split, number), refs = unit
    stats = ExampleStats(split=split, shard=number,
                         started_ms=int(time.time() * 1000))
    for item in self._maker.examples(split, refs, class_names, stats):
      if isinstance(item, wav_io.Rejection):
        self._windows_rejected.inc()
        yield item
      else:
        self._examples.inc()
        yield split, item
    yield stats


class CountShard(beam.DoFn):
  """A shard file written by WriteToTFRecord (its final name,
  ...-SSSSS-of-NNNNN) -> ShardStats, its records counted from the framing
  (lengths and CRCs checked)."""

  def __init__(self, split: str, compression: str):
    self.split = split
    self.compression = compression

  def process(self, path):
    shard, num_shards = naming.shard_numbers(path)
    with FileSystems.open(path, compression_type=filesystem.beam_compression(
        self.compression)) as f:
      sizes = [len(data) + 16 for _, data in tfrecord.read_records(f, path)]
    count = len(sizes)
    index = write_index(naming.index_name(path), sizes, self.compression)
    meta = filesystem.metadata(path)
    # Written while the features were computed: the shard phase spans the
    # files' completion times.
    done_ms = int(meta.last_updated_in_seconds * 1000)
    yield ShardStats(self.split, shard, path, count, meta.size_in_bytes,
                     done_ms, done_ms, num_shards, index)
