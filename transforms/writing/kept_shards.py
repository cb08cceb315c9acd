"""A finished shard's record, by which a resumed run (--resume) keeps it.

Every shard task, once its files are closed, writes a record beside them
in the run's temporary folder: what it was asked to write (a digest of its
windows, the files they come from as probed, the class names and the
options), and what it wrote (its ShardStats, ExampleStats and the
Rejections of its windows). The record is written by a rename, after the
shard, so a record always describes a whole shard.

A task finds the record of its shard before writing it. When the digest
is the same and the files still hold what the record says (sizes, every
record's CRCs, the index, the ArrayRecord copy's CRC32C), the task yields
the recorded results instead of computing them: the shard is kept, with
the bytes the earlier attempt wrote. Anything else (no record, another
digest, a damaged file) and the shard is written anew, as on a fresh run.
A fresh run's temporary folder holds no record, so this costs it one
lookup per shard.

Records are JSON, never pickles: the output folder is data, not code.
"""

import collections
import dataclasses
import hashlib
import json
import logging
import os
import re
import time
import uuid
from typing import List, Mapping, Optional, Sequence

from apache_beam.io.filesystems import FileSystems

from pipeline.config import PipelineConfig
from pipeline.contract import array_record_file
from pipeline.contract import naming
from pipeline.contract import schema as schema_lib
from pipeline.contract import tfrecord
from transforms.inputs.file_reports import Rejection
from transforms.runtime import filesystem
from transforms.writing.stats import ExampleStats, Moments, ShardStats

RECORD_PREFIX = 'kept-'
# The final step's renames, written before it makes them (record_publishing).
PUBLISHING_FILE = 'publishing.json'
# A shard file's name in the temporary folder (shard_writer.ShardFile), or
# a piece of one (sweep_writer.PieceFile).
_TEMP_SHARD = re.compile(
    r'(piece-[^/]+-\d{5}-\d{12}|[^/]+-\d{5})-[0-9a-f]{32}')


def run_options(config: PipelineConfig) -> dict:
  """The options that decide a run's bytes: all but where the dataset
  goes and what a run does with an earlier one."""
  options = config.to_json()
  for name in ('output_dir', 'overwrite', 'append'):
    options.pop(name, None)
  return options


def options_digest(config: PipelineConfig) -> str:
  return _sha(json.dumps(run_options(config), sort_keys=True, default=str))


def _sha(text: str) -> str:
  return hashlib.sha256(text.encode('utf-8')).hexdigest()


def pieces_digest(config: PipelineConfig, split: str, shard: int,
                  pieces) -> str:
  """The digest of a shard assembled from `pieces` (in order)."""
  return _sha(repr((options_digest(config), split, shard,
                    [(p.start, p.stop, tuple(p.record_sizes))
                     for p in pieces])))


def task_digest(config: PipelineConfig, split: str, shard: int, refs,
                class_names, extra: str = '') -> str:
  """The digest of what a shard task is asked to write: its window refs
  in order (each file's plan once: its probe gives the file's size,
  modification time and head CRC), the class names, the options."""
  plans, windows = {}, []
  for plan, window, key in refs:
    plans.setdefault(plan.key, plan)
    windows.append((plan.key, window, key))
  return _sha(repr((options_digest(config), split, shard, extra,
                    sorted(plans.items()), windows, list(class_names))))


def inputs_of(refs) -> List[dict]:
  """The files a task read, as probed: what a resume checks first."""
  seen = {}
  for plan, _, _ in refs:
    info = plan.info
    seen.setdefault(info.path, {'index': info.index, 'path': info.path,
                                'size': info.size, 'mtime': info.mtime})
  return [seen[p] for p in sorted(seen)]


def record_path(dataset_dir: str, split: str, shard: int,
                piece_start: Optional[int] = None) -> str:
  piece = '' if piece_start is None else f'-piece-{piece_start:012d}'
  return naming.join(naming.temp_dir(dataset_dir),
                     f'{RECORD_PREFIX}{split}-{shard:05d}{piece}.json')


def record_paths(dataset_dir: str) -> List[str]:
  """The records in a run's temporary folder."""
  temp = naming.temp_dir(dataset_dir)
  try:
    found = FileSystems.match([naming.pattern_under(
        temp, RECORD_PREFIX + '*.json')])[0].metadata_list
  except Exception:  # no temporary folder
    return []
  return sorted(naming.within(temp, [m.path for m in found]))


def read_record(path: str) -> Optional[dict]:
  try:
    with FileSystems.open(path) as f:
      record = json.loads(f.read().decode('utf-8'))
  except Exception:  # missing, being replaced, or damaged: not kept
    return None
  return record if isinstance(record, dict) else None


def write_record(dataset_dir: str, path: str, digest: str, inputs,
                 items: Sequence, pieces: Sequence[int] = ()) -> None:
  """Writes a task's record (by a rename: whole or not at all). `items`:
  what the task yields (Rejections, ShardStats, ExampleStats); `pieces`:
  where the pieces a shard was assembled from start."""
  record = {'digest': digest, 'inputs': list(inputs),
            'items': [_item_json(dataset_dir, item) for item in items]}
  if pieces:
    record['pieces'] = list(pieces)
  # A name of its own: two attempts at one shard (a retry, a runner that
  # repeats work) may record it at once.
  tmp = f'{path}.{uuid.uuid4().hex}.tmp'
  with filesystem.create(tmp) as f:
    f.write(json.dumps(record, sort_keys=True).encode('utf-8'))
  filesystem.move_into_place(tmp, path)


def kept(config: PipelineConfig, path: str, digest: str,
         pieces: Sequence[int] = ()) -> Optional[list]:
  """The results the record at `path` holds, when it was written for
  `digest` and its files are whole; else None (and the task writes the
  shard anew). Of a piece, `pieces`: where this run's pieces of
  its shard start (_assembled_from)."""
  if not FileSystems.exists(path):
    return None
  record = read_record(path)
  if record is None or record.get('digest') != digest:
    if record is not None:
      logging.getLogger('wavbeam').warning(
          '%s: written for other windows, or for its shard cut elsewhere '
          '(another worker count); the shard is written again', path)
    return None
  try:
    items = [_item_from_json(config.dataset_dir, obj)
             for obj in record['items']]
  except (KeyError, TypeError, ValueError) as e:
    logging.getLogger('wavbeam').warning('%s: unreadable (%s); the shard '
                                         'is written again', path, e)
    return None
  now = int(time.time() * 1000)
  out = []
  for item in items:
    if _is_piece(item):
      problem = _piece_damage(item)
      if problem and not _assembled_from(config, item, pieces):
        logging.getLogger('wavbeam').warning(
            'a piece of a shard of the earlier run is damaged (%s); it is '
            'written again', problem)
        return None
      # Its shard is assembled by this run, which spent no time on the
      # piece: the shard's span starts no earlier than this run.
      item = dataclasses.replace(item, started_ms=now)
    if isinstance(item, ShardStats):
      problem = damage(config, item)
      if problem:
        logging.getLogger('wavbeam').warning(
            'a shard of the earlier run is damaged (%s); it is written '
            'again', problem)
        return None
      # This run spent no time on it: its times are the check's.
      item = dataclasses.replace(item, started_ms=now, finished_ms=now,
                                 kept=True)
    out.append(item)
  return out


def damage(config: PipelineConfig, stats: ShardStats) -> Optional[str]:
  """What is wrong with a recorded shard's files, or None when each holds
  what was written: its size, every record's CRCs, their digest and
  count, the index, the ArrayRecord copy's size and CRC32C."""
  path = stats.path
  for name in (path, stats.index_path, stats.array_record_path):
    if name and filesystem.is_local(name) and os.path.islink(name):
      return f'{name} is a symbolic link, not the file that was written'
  try:
    if filesystem.metadata(path).size_in_bytes != stats.num_bytes:
      return f'{path}: not {stats.num_bytes} bytes'
    sizes, records = [], tfrecord.RecordsDigest()
    with FileSystems.open(path, compression_type=filesystem.beam_compression(
        config.compression)) as f:
      for _, data in tfrecord.read_records(f, path, check_crc=True):
        sizes.append(len(data) + 16)
        records.add_record(data)
    if len(sizes) != stats.num_examples:
      return f'{path}: {len(sizes)} records, not {stats.num_examples}'
    if stats.records_crc32c not in (-1, records.value):
      return f'{path}: not the records that were written'
    if stats.index_path:
      with FileSystems.open(stats.index_path) as f:
        if f.read().decode('ascii') != tfrecord.index_text(sizes):
          return f'{stats.index_path}: not the index of its shard'
    if stats.array_record_path:
      copy = stats.array_record_path
      if (filesystem.metadata(copy).size_in_bytes !=
          stats.array_record_bytes or array_record_file.fingerprint(copy)
          != stats.array_record_crc32c):
        return f'{copy}: not the ArrayRecord file that was written'
  except Exception as e:  # missing, unreadable, a bad CRC
    return f'{path}: {" ".join(str(e).split())[:200]}'
  return None


def _is_piece(item) -> bool:
  return hasattr(item, 'record_sizes') and hasattr(item, 'shard_start')


def _assembled_from(config: PipelineConfig, piece,
                    pieces: Sequence[int]) -> bool:
  """Whether a piece went into its shard, which this run keeps:
  the shard's record says it was assembled from pieces starting where
  this run's (`pieces`) start, the piece among them, and the shard is
  whole. The piece is then needed no more (sweep_writer.assemble_shard
  removes it). Pieces cut elsewhere (a resume with another worker count)
  make a shard of other pieces: this one is written again for it."""
  record = read_record(record_path(config.dataset_dir, piece.split,
                                   piece.shard))
  if (record is None or piece.start not in pieces or
      list(record.get('pieces', ())) != list(pieces)):
    return False
  try:
    shards = [item for item in (_item_from_json(config.dataset_dir, obj)
                                for obj in record['items'])
              if isinstance(item, ShardStats)]
  except (KeyError, TypeError, ValueError):
    return False
  return len(shards) == 1 and damage(config, shards[0]) is None


def _piece_damage(piece) -> Optional[str]:
  """What is wrong with a recorded piece file, or None."""
  if filesystem.is_local(piece.path) and os.path.islink(piece.path):
    return f'{piece.path} is a symbolic link, not the file that was written'
  try:
    if filesystem.metadata(piece.path).size_in_bytes != sum(
        piece.record_sizes):
      return f'{piece.path}: not {sum(piece.record_sizes)} bytes'
    with FileSystems.open(piece.path, compression_type='uncompressed') as f:
      sizes = tuple(len(data) + 16 for _, data in tfrecord.read_records(
          f, piece.path, check_crc=True))
    if sizes != tuple(piece.record_sizes):
      return f'{piece.path}: not the records that were written'
  except Exception as e:  # missing, unreadable, a bad CRC
    return f'{piece.path}: {" ".join(str(e).split())[:200]}'
  return None


def _name_in_temp(dataset_dir: str, name: str, suffix: str = '') -> str:
  """A recorded file name as a path in this folder's temporary folder;
  ValueError for anything but a shard name there."""
  if not name:
    return ''
  if not (_TEMP_SHARD.fullmatch(name[:len(name) - len(suffix)]) and
          name.endswith(suffix)):
    raise ValueError(f'{name!r} is not a shard name')
  return naming.join(naming.temp_dir(dataset_dir), name)


def _base(path: str) -> str:
  return path.rsplit('/', 1)[-1] if path else ''


def _item_json(dataset_dir: str, item) -> dict:
  if isinstance(item, ShardStats):
    obj = dataclasses.asdict(item)
    for key in ('path', 'index_path', 'array_record_path'):
      obj[key] = _base(obj[key])
    obj.pop('kept')
    return {'shard': obj}
  if _is_piece(item):
    obj = {f.name: getattr(item, f.name) for f in dataclasses.fields(item)
           if f.name != 'stats'}
    obj['path'] = _base(obj['path'])
    obj['record_sizes'] = list(obj['record_sizes'])
    obj['stats'] = _item_json(dataset_dir, item.stats)['examples']
    return {'piece': obj}
  if isinstance(item, ExampleStats):
    obj = {'split': item.split, 'shard': item.shard,
           'schema': item.schema.to_json(), 'num_examples': item.num_examples,
           'example_bytes': item.example_bytes,
           'per_class': list(item.per_class.items()),
           'moments': _moments_json(item.moments)}
    if item.moment_batches is not None:
      obj['moment_batches'] = [_moments_json(batch)
                               for batch in item.moment_batches]
    return {'examples': obj}
  if isinstance(item, Rejection):
    return {'rejection': dataclasses.asdict(item)}
  raise TypeError(f'a shard task yields no {type(item).__name__}')


def _item_from_json(dataset_dir: str, obj: Mapping):
  if 'shard' in obj:
    values = dict(obj['shard'])
    values['path'] = _name_in_temp(dataset_dir, values['path'])
    values['index_path'] = _name_in_temp(
        dataset_dir, values['index_path'], '.' + naming.INDEX_FORMAT)
    values['array_record_path'] = _name_in_temp(
        dataset_dir, values['array_record_path'], '.' + naming.ARRAY_RECORD)
    return ShardStats(**values)
  if 'piece' in obj:
    from transforms.writing.sweep_writer import Piece  # it imports this
    values = dict(obj['piece'])
    values['path'] = _name_in_temp(dataset_dir, values['path'])
    values['record_sizes'] = tuple(values['record_sizes'])
    values['stats'] = _item_from_json(dataset_dir,
                                      {'examples': values['stats']})
    return Piece(**values)
  if 'examples' in obj:
    values = obj['examples']
    return ExampleStats(
        split=values['split'], shard=values['shard'],
        schema=schema_lib.Schema.from_json(values['schema']),
        num_examples=values['num_examples'],
        example_bytes=values['example_bytes'],
        per_class=collections.Counter(dict(values['per_class'])),
        moments=_moments_from_json(values['moments']),
        moment_batches=None if values.get('moment_batches') is None else
        [_moments_from_json(batch) for batch in values['moment_batches']])
  if 'rejection' in obj:
    values = dict(obj['rejection'])
    if values.get('frame_range') is not None:
      values['frame_range'] = tuple(values['frame_range'])
    return Rejection(**values)
  raise ValueError(f'an unknown entry {sorted(obj)}')


# A task of many batches records the moments of each (moment_batches):
# read field by field, as dataclasses.asdict's deep copy is 20 times slower.
_MOMENT_FIELDS = tuple(f.name for f in dataclasses.fields(Moments))


def _moments_json(moments) -> dict:
  return {k: {name: getattr(m, name) for name in _MOMENT_FIELDS}
          for k, m in moments.items()}


def _moments_from_json(obj: Mapping) -> dict:
  return {k: Moments(**m) for k, m in obj.items()}


def record_publishing(dataset_dir: str, renames) -> None:
  """Before the final step renames shards into place: the renames, by
  name, so that a resume can move them back (pipeline/resume.py)."""
  path = naming.join(naming.temp_dir(dataset_dir), PUBLISHING_FILE)
  with filesystem.create(path) as f:
    f.write(json.dumps([[src.rsplit('/', 1)[-1], dst.rsplit('/', 1)[-1]]
                        for src, dst in renames]).encode('utf-8'))
