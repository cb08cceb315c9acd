"""Every variant's shards from one read of each window: a sweep's
(--variants), and a single run's, its one variant's.

The variants of a sweep hold the same windows in the same splits and sort
order, but each variant's shard boundaries follow its own example size. So
a split's sort keys are cut at variants' shard boundaries into segments
(segment_bounds), and the window references are grouped by segment. A
segment task reads its windows once and, for every variant, computes the
features and encodes the examples. A shard of a variant inside the
segment it writes as the dataset holds it (shard_writer.ShardFile); of a
shard the segment's ends cut, it writes a piece (plain TFRecord framing),
and the shard is assembled from its pieces in key order once they are all
written. Either way a shard holds the records, in the order, that a
separate run with the variant's options writes.
"""

import bisect
import contextlib
import dataclasses
import itertools
import time
import uuid
from typing import Dict, List, Mapping, Optional, Tuple

import apache_beam as beam
from apache_beam.internal import pickler
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows

from pipeline.config import PipelineConfig
from pipeline.contract import naming
from pipeline.contract import tfrecord
from transforms.runtime import allocator
from transforms.runtime import filesystem
from transforms.runtime import forked_workers
from transforms.planning import passes as planning
from transforms.runtime import output_lock as run_marker
from transforms.inputs import audio_io
from transforms.writing import kept_shards
from transforms.writing.extract import (BATCH_WINDOWS, ExampleMaker,
                                        read_batches, timed)
from transforms.planning.layout import SplitLayout
from transforms.writing.shard_writer import (ShardFile, count_written,
                                             shard_order)
from transforms.writing.stats import ExampleStats

# {variant: {split: SplitLayout}}
SweepLayouts = Mapping[str, Mapping[str, SplitLayout]]


def segment_bounds(layouts: SweepLayouts,
                   segments: Optional[int] = None) -> Dict[str, List[int]]:
  """{split: sorted keys where a segment starts, then the split's total}.

  Without `segments`, every variant's shard start: each segment lies in
  one shard of every variant, as many tasks as a runner can spread. With
  it (the local worker processes), about that many segments a split, cut
  where most variants' shards start near equal shares of the windows: a
  segment task writes the shards inside it whole, and only the shards its
  ends cut are written in pieces and copied together (cutting at every
  start, a four-variant sweep of 4 h copied 7 of its 9 shards). Where no
  shard starts near a share's end (variants of a few shards), the cut is
  made there all the same: copying the shards it cuts costs less than a
  worker left idle; variants whose shards all start alike are cut on
  their batch grid, as a single run is (_cuts). Keys where every
  variant's shard starts are bounds too (a single run's: each shard a
  segment of its own, but for those cut near a share's end). The variants
  plan the same windows, so a split has one total."""
  starts: Dict[str, Dict[int, int]] = {}
  totals: Dict[str, set] = {}
  for variant_layouts in layouts.values():
    for split, layout in variant_layouts.items():
      shared = starts.setdefault(split, {})
      for key in layout.shard_starts():
        shared[key] = shared.get(key, 0) + 1
      totals.setdefault(split, set()).add(layout.total)
  for split, total in totals.items():
    if len(total) != 1:
      raise ValueError(f'split {split!r}: the variants planned '
                       f'{sorted(total)} windows')
  if not segments:
    return {split: sorted(keys) for split, keys in starts.items()}
  return {split: _cuts(keys, next(iter(totals[split])), len(layouts),
                       segments)
          for split, keys in starts.items()}


# How far from an equal share's end a cut may fall at a shard start, as a
# fraction of a share; farther, it is cut at the share's end, inside
# shards. A segment an eighth longer than its share keeps the other
# workers waiting for an eighth of the segment phase.
CUT_SLACK = 1 / 8


def _cuts(shared: Mapping[int, int], total: int, variants: int,
          segments: int) -> List[int]:
  """A split's segment bounds: 0, about `segments` - 1 cuts, then
  `total`. Each cut is the shard start (`shared`: start -> variants
  whose shard starts there) nearest an equal share's end, or one hardly
  farther (a sixteenth of a share) that fewer variants' shards cross;
  where none lies within CUT_SLACK of a share, the share's end itself
  (where every variant's shards start alike, as a single run's do, on
  their batch grid: _batch_aligned). Keys where every variant's shard
  starts are cuts too."""
  inside = sorted(k for k in shared if 0 < k < total)
  share = total / segments
  # Where every variant's shard starts, no shard is cut: a cut there
  # costs nothing, and smaller tasks balance better.
  cuts = {0, total, *(k for k in inside if shared[k] == variants)}
  one_grid = all(shared[k] == variants for k in inside)
  for i in range(1, segments if total else 0):
    ideal = i * share
    nearest = min((abs(k - ideal) for k in inside), default=total)
    if nearest > share * CUT_SLACK:
      cuts.add(_batch_aligned(ideal, [0, *inside, total]) if one_grid
               else round(ideal))
      continue
    near = [k for k in inside if abs(k - ideal) <= nearest + share / 16]
    cuts.add(min(near, key=lambda k: (variants - shared[k],
                                      abs(k - ideal), k)))
  return sorted(cuts)


def _batch_aligned(ideal: float, starts: List[int]) -> int:
  """A cut inside a shard near `ideal`, a whole number of read batches
  (BATCH_WINDOWS) after the start of the shard it cuts (`starts`, sorted,
  0 and the total among them, the same for every variant): the pieces
  read and compute the batches the shard written whole does, so that its
  statistics, folded batch by batch, and a model's forward passes come
  out the same to the last digit (stats.ExampleStats.merge) as a run
  that does not cut it. (Where variants' shards start apart, no cut lies
  on all their grids.)"""
  low = starts[bisect.bisect_right(starts, ideal) - 1]
  high = starts[bisect.bisect_right(starts, low)]
  return min(high, low + round((ideal - low) / BATCH_WINDOWS) *
             BATCH_WINDOWS)


def segment_sizes(bounds: List[int]) -> List[int]:
  """A split's segment bounds -> windows per segment (for balance)."""
  return [b - a for a, b in zip(bounds, bounds[1:])]


def segment_refs(stored, config: PipelineConfig, dataset_rate: int,
                 layouts: SweepLayouts, bounds: Mapping[str, List[int]],
                 group_keys, allowed=None):
  """(group key of its segment, WindowRefs) for a StoredBlock's windows,
  one element per segment the block has windows in. Sort keys do not
  depend on the variant: any variant's layouts give them."""
  some_layouts = next(iter(layouts.values()))
  return planning.refs_by_key(
      (group_keys[(split, bisect.bisect_right(bounds[split], ref[2]) - 1)],
       ref)
      for (split, _), ref in planning.stored_block_refs(
          stored, config, dataset_rate, some_layouts, allowed))


@dataclasses.dataclass(frozen=True)
class Piece:
  """Part of a variant's shard written by one segment task: the records of
  sort keys [start, stop), plain TFRecord framing, under a temp name."""
  split: str
  shard: int
  start: int
  stop: int
  shard_start: int
  shard_stop: int
  path: str
  record_sizes: Tuple[int, ...]  # framed, in order
  started_ms: int
  stats: Optional[ExampleStats] = None


class PieceFile:
  """Writes a Piece into the variant's temp folder; `piece` once closed."""

  def __init__(self, config: PipelineConfig, run_id: Optional[str],
               split: str, shard: int, keys: Tuple[int, int],
               shard_keys: Tuple[int, int], started_ms: int):
    run_marker.check_marker(config.dataset_dir, run_id)
    self.config, self.run_id = config, run_id
    self.path = naming.join(
        run_marker.temp_dir(config.dataset_dir),
        f'piece-{split}-{shard:05d}-{keys[0]:012d}-{uuid.uuid4().hex}')
    self.piece = Piece(split, shard, *keys, *shard_keys, self.path, (),
                       started_ms)
    self.sizes = []

  def __enter__(self):
    self._file = FileSystems.create(  # plain TFRecord framing
        self.path, compression_type=filesystem.beam_compression('none'))
    self._direct = filesystem.is_local(self.path)
    return self

  def write_records(self, records) -> None:
    """Appends records (a batch's) in order."""
    self.sizes += tfrecord.write_records(self._file, records,
                                         direct=self._direct)

  def __exit__(self, kind, value, traceback):
    self._file.close()
    if kind is None:
      run_marker.check_marker(self.config.dataset_dir, self.run_id)
      self.piece = dataclasses.replace(self.piece,
                                       record_sizes=tuple(self.sizes))


@dataclasses.dataclass(frozen=True)
class Target:
  """What a segment task writes of one variant's shard: the shard whole,
  or a piece of it."""
  variant: str
  shard: int
  shard_keys: Tuple[int, int]  # the shard's sort keys [start, stop)
  keys: Tuple[int, int]        # those in the segment
  # Of a piece: where each piece of the shard starts, under this cut of
  # the split (what an earlier attempt's record must name to be kept).
  pieces: Tuple[int, ...] = ()

  def whole(self) -> bool:
    return tuple(self.keys) == tuple(self.shard_keys)

  def holds(self, key: int) -> bool:
    return self.keys[0] <= key < self.keys[1]


def targets(layouts: SweepLayouts, split: str, keys: Tuple[int, int],
            bounds: List[int]) -> List[Target]:
  """Each variant's shards that hold sort keys of the segment [start,
  stop) of the split's segment `bounds` (segment_bounds'), by variant,
  then in key order."""
  found = []
  for variant, variant_layouts in sorted(layouts.items()):
    starts = variant_layouts[split].shard_starts()
    shard = bisect.bisect_right(starts, keys[0]) - 1
    while shard + 1 < len(starts) and starts[shard] < keys[1]:
      low, high = starts[shard], starts[shard + 1]
      part = (max(keys[0], low), min(keys[1], high))
      if low < high:
        found.append(Target(variant, shard, (low, high), part, () if part == (
            low, high) else (low, *(b for b in bounds if low < b < high))))
      shard += 1
  return found


def write_segment(makers: Mapping[str, ExampleMaker],
                  run_ids: Mapping[str, Optional[str]], split: str,
                  segment_targets: List[Target], ref_lists,
                  class_names) -> list:
  """Reads a segment's windows (lists of refs, one per block) once; for
  each variant writes the shards (whole ones) or pieces of its targets.
  Returns (variant, item) pairs: per target, a Rejection per window of
  its keys that could not be used, then ShardStats and ExampleStats, or
  a Piece carrying its ExampleStats."""
  refs = shard_order(itertools.chain.from_iterable(ref_lists))
  sort_keys = [ref[2] for ref in refs]
  # A resumed sweep keeps what a variant's record says was finished
  # (kept_shards), and writes the rest.
  earlier, records, todo = {}, {}, []
  for target in segment_targets:
    config = makers[target.variant].config
    target_refs = _refs_of(refs, sort_keys, target.keys)
    path = kept_shards.record_path(config.dataset_dir, split, target.shard,
                                   None if target.whole() else
                                   target.keys[0])
    digest = kept_shards.task_digest(
        config, split, target.shard, target_refs, class_names,
        '' if target.whole() else
        repr((tuple(target.keys), tuple(target.shard_keys))))
    found = kept_shards.kept(config, path, digest, target.pieces)
    if found is None:
      todo.append(target)
      records[target] = (path, digest, kept_shards.inputs_of(target_refs))
    else:
      earlier[target] = found
  written = _write_targets(makers, run_ids, split, todo, refs, sort_keys,
                           class_names, records) if todo else {}
  items = []
  for target in segment_targets:
    if target in earlier:
      run_marker.check_marker(makers[target.variant].config.dataset_dir,
                              run_ids[target.variant])
    items.extend((target.variant, item) for item in (
        earlier[target] if target in earlier else written[target]))
  return items


def _refs_of(refs, sort_keys: List[int], keys: Tuple[int, int]) -> list:
  """The refs (in sort-key order) of keys [start, stop)."""
  return refs[bisect.bisect_left(sort_keys, keys[0]):
              bisect.bisect_left(sort_keys, keys[1])]


def _runs_of_targets(segment_targets: List[Target]):
  """(keys [start, stop), the targets holding them) of each run of keys
  that no target's bound cuts, in key order."""
  bounds = sorted({k for t in segment_targets for k in t.keys})
  for start, stop in zip(bounds, bounds[1:]):
    holding = [t for t in segment_targets if t.holds(start)]
    if holding:
      yield (start, stop), holding


def _write_targets(makers, run_ids, split, segment_targets, refs, sort_keys,
                   class_names, records) -> Dict[Target, list]:
  """write_segment's work for the targets it writes: {target: its
  results}. The keys are read a run at a time (_runs_of_targets), each
  run once for all variants, into every variant's file open there. A
  target's record (`records`: target -> path, digest, inputs) is written
  as its file closes, so that a resume keeps what was finished before
  the segment was."""
  results = {target: [] for target in segment_targets}
  outs, stats, closing = {}, {}, {}
  with contextlib.ExitStack() as all_open:
    for keys, holding in _runs_of_targets(segment_targets):
      for target in holding:
        if target not in outs:
          config = makers[target.variant].config
          run_id = run_ids[target.variant]
          started_ms = int(time.time() * 1000)
          stats[target] = ExampleStats(
              split=split, shard=target.shard,
              moment_batches=None if target.whole() else [])
          # Its own stack, closed where its keys end; the run's, unwound
          # on an error, closes it with the error.
          closing[target] = all_open.enter_context(contextlib.ExitStack())
          opening = time.perf_counter_ns()
          outs[target] = closing[target].enter_context(
              ShardFile(config, run_id, split, target.shard, started_ms)
              if target.whole() else
              PieceFile(config, run_id, split, target.shard, target.keys,
                        target.shard_keys, started_ms))
          stats[target].write_ns += time.perf_counter_ns() - opening
      run_refs = _refs_of(refs, sort_keys, keys)
      some_config = makers[holding[0].variant].config
      # The windows are read once: their time goes to the first variant.
      for batch in timed(read_batches(some_config, split, run_refs),
                         stats[holding[0]]):
        if isinstance(batch, audio_io.Rejection):
          for target in holding:
            results[target].append(batch)
          continue
        shared = {}  # what variants have in common, computed once a batch
        for target in holding:
          out, spent = outs[target], stats[target]
          encoded = list(makers[target.variant].encode(
              spent, batch, class_names, shared))
          writing = time.perf_counter_ns()
          out.write_records(encoded)
          spent.write_ns += time.perf_counter_ns() - writing
      for target in holding:
        if target.keys[1] == keys[1]:
          closing_ns = time.perf_counter_ns()
          closing[target].close()  # the shard's index, ArrayRecord copy
          stats[target].write_ns += time.perf_counter_ns() - closing_ns
          _add_written(results[target], outs[target], stats[target])
          kept_shards.write_record(makers[target.variant].config.dataset_dir,
                                   *records[target], results[target])
  return results


def _add_written(results: list, out, spent: ExampleStats) -> None:
  """What a target's closed file adds to its results."""
  if isinstance(out, ShardFile):
    results.extend([out.stats, spent])
  else:
    results.append(dataclasses.replace(out.piece, stats=spent))


class WriteSegment(forked_workers.CallsInBundles, beam.DoFn):
  """((split, segment, salt), lists of window refs) -> (variant, item):
  each variant's shards and pieces of the segment (write_segment)."""

  def __init__(self, configs: Mapping[str, PipelineConfig],
               extra_features=None,
               run_ids: Optional[Mapping[str, str]] = None):
    self.configs = dict(configs)
    self.extra_features = extra_features
    self.run_ids = dict(run_ids or {name: None for name in configs})

  def setup(self):
    allocator.keep_freed_memory()
    self._makers = None
    self._pickled = None

  def start_bundle(self):
    super().start_bundle()
    self._held = {}  # (variant, split, shard) -> its pieces written so far
    self._joined = set()  # shards assembled in this bundle

  def process(self, keyed_refs, bounds, layouts, class_names):
    (split, segment, _), ref_lists = keyed_refs
    keys = (bounds[split][segment], bounds[split][segment + 1])
    segment_targets = targets(layouts, split, keys, bounds[split])
    if self.calls is None:
      if self._makers is None:
        self._makers = _makers_for(self.configs, self.extra_features)
      yield from _counted(write_segment(self._makers, self.run_ids, split,
                                        segment_targets, ref_lists,
                                        class_names))
    else:
      if self._pickled is None:
        self._pickled = pickler.dumps((self.configs, self.extra_features))
      ref_lists = list(ref_lists)
      self.calls.largest_first(sum(map(len, ref_lists)), self._written,
                               _write_segment_there, self._pickled,
                               self.run_ids, split, segment_targets,
                               ref_lists, class_names)

  def _written(self, items):
    """A segment task's items, where forked workers run it: a shard whose
    pieces are all written is assembled at once, in a worker, while
    other segments are still computed (not after all of them, behind
    AssembleShards' GroupByKey); pieces of the shards left go on to
    AssembleShards when the bundle ends."""
    for variant, item in _counted(items):
      if not isinstance(item, Piece):
        yield variant, item
        continue
      shard = (variant, item.split, item.shard)
      if shard in self._joined:
        continue  # a piece come twice, its shard already assembled
      pieces = in_key_order([*self._held.get(shard, ()), item])
      if not covers_shard(pieces):
        self._held[shard] = pieces
        continue
      self._held.pop(shard, None)
      self._joined.add(shard)
      self.calls.start_now(_counted, assemble_shard, self.configs[variant],
                           self.run_ids[variant], variant, item.split,
                           item.shard, pieces, True)  # remove_pieces

  def finish_bundle(self):
    yield from super().finish_bundle()
    for (variant, _, _), pieces in sorted(self._held.items()):
      for piece in pieces:
        yield GlobalWindows.windowed_value((variant, piece))
    self._held, self._joined = {}, set()


def _counted(items):
  for variant, item in items:
    count_written(item)
    yield variant, item


def _makers_for(configs, extra_features) -> Dict[str, ExampleMaker]:
  return {name: ExampleMaker(config, extra_features)
          for name, config in configs.items()}


_forked_makers = {}  # in a forked worker: pickled (configs, features) -> makers


def _write_segment_there(state: bytes, *args) -> list:
  """write_segment in a forked worker (transforms/runtime/forked_workers.py)."""
  if state not in _forked_makers:
    _forked_makers.clear()
    allocator.keep_freed_memory()
    _forked_makers[state] = _makers_for(*pickler.loads(state))
  return write_segment(_forked_makers[state], *args)


def piece_key(variant_item):
  """(variant, Piece) -> ((variant, split, shard), Piece)."""
  variant, piece = variant_item
  return (variant, piece.split, piece.shard), piece


class AssembleShard(forked_workers.CallsInBundles, beam.DoFn):
  """((variant, split, shard), Pieces) -> (variant, ShardStats) and
  (variant, ExampleStats): the shard written from its pieces in key order,
  as a separate run writes it (assemble_shard). Where forked workers run
  the segment tasks, WriteSegment has assembled every shard whose pieces
  its bundle wrote: only the others come here, and are assembled in those
  workers, several at once, largest first (the launcher's one thread
  would copy them one after another).
  """

  def __init__(self, configs: Mapping[str, PipelineConfig],
               run_ids: Optional[Mapping[str, str]] = None):
    self.configs = dict(configs)
    self.run_ids = dict(run_ids or {name: None for name in configs})

  def process(self, keyed_pieces):
    (variant, split, shard), pieces = keyed_pieces
    pieces = list(pieces)
    args = (self.configs[variant], self.run_ids[variant], variant, split,
            shard, pieces)
    if self.calls is None:
      yield from _counted(assemble_shard(*args))
    else:
      # This machine's forked workers assemble each shard once: its pieces
      # go as soon as it is written, in the workers, not in the launcher's
      # final step (0.4 s of a four-variant sweep of 4 h: freeing a
      # gigabyte of written pages).
      size = sum(sum(piece.record_sizes) for piece in pieces)
      self.calls.largest_first(size, _counted, assemble_shard, *args,
                               True)  # remove_pieces


def in_key_order(pieces) -> List[Piece]:
  """A shard's pieces by start key, one of each (a piece may come twice:
  a retried segment task, or a runner that repeats outputs)."""
  by_start = {}
  for piece in sorted(pieces, key=lambda p: (p.start, p.path)):
    by_start.setdefault(piece.start, piece)
  return [by_start[k] for k in sorted(by_start)]


def covers_shard(ordered: List[Piece]) -> bool:
  """Whether pieces in key order (in_key_order) hold every key of their
  shard, each once."""
  end = ordered[0].shard_start
  for piece in ordered:
    if piece.start != end:
      return False
    end = piece.stop
  return end == ordered[0].shard_stop


def assemble_shard(config: PipelineConfig, run_id: Optional[str],
                   variant: str, split: str, shard: int, pieces,
                   remove_pieces: bool = False) -> list:
  """A variant's shard written from its pieces in key order: [(variant,
  ShardStats), (variant, ExampleStats)].

  A piece may come twice (a retried segment task, or a runner that repeats
  outputs): one of each is used. Raises ValueError when the pieces do not
  cover the shard's keys exactly, which the final step would otherwise
  find as missing records. `remove_pieces`: the pieces are deleted once
  the shard and its record are written, where no other attempt at the
  shard can be reading them.
  """
  ordered = in_key_order(pieces)
  if not covers_shard(ordered):
    raise ValueError(
        f'{config.dataset_dir}: split {split!r}, shard {shard}: pieces '
        f'{[(p.start, p.stop) for p in ordered]} do not cover its keys '
        f'[{ordered[0].shard_start}, {ordered[0].shard_stop})')
  record = kept_shards.record_path(config.dataset_dir, split, shard)
  digest = kept_shards.pieces_digest(config, split, shard, ordered)
  earlier = kept_shards.kept(config, record, digest)
  if earlier is not None:
    run_marker.check_marker(config.dataset_dir, run_id)
    return [(variant, item) for item in earlier]
  stats = ExampleStats(split=split, shard=shard)
  # Elsewhere pieces stay until the final step removes the temp folder: a
  # runner may assemble a shard twice (Beam's DaskRunner repeats outputs,
  # others retry), and each time finds them as they were.
  with ShardFile(config, run_id, split, shard,
                 min(p.started_ms for p in ordered)) as out:
    for piece in ordered:
      out.copy_framed(piece.path, piece.record_sizes)
      stats.merge(piece.stats)
  kept_shards.write_record(config.dataset_dir, record, digest, [],
                           [out.stats, stats], [p.start for p in ordered])
  if remove_pieces:
    filesystem.delete([piece.path for piece in ordered])
  return [(variant, out.stats), (variant, stats)]


class AssembleShards(beam.PTransform):
  """(variant, item) from WriteSegment -> (variant, item) with every
  Piece replaced by the shards assembled from them."""

  def __init__(self, configs, run_ids=None):
    super().__init__()
    self.configs = configs
    self.run_ids = run_ids

  def expand(self, written):
    pieces = (written
              | 'OnlyPieces' >> beam.Filter(
                  lambda item: isinstance(item[1], Piece))
              | 'KeyByShard' >> beam.Map(piece_key)
              | 'GroupByShard' >> beam.GroupByKey()
              | 'Assemble' >> beam.ParDo(AssembleShard(self.configs,
                                                       self.run_ids)))
    rest = written | 'NotPieces' >> beam.Filter(
        lambda item: not isinstance(item[1], Piece))
    return (rest, pieces) | 'Shards' >> beam.Flatten()
