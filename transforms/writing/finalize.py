"""The last step: rejects.jsonl, then metadata.json, once all else is done."""

import collections
import datetime
import logging
from typing import Iterable, List

from apache_beam.io.filesystems import FileSystems

from pipeline.contract import metadata as metadata_lib
from pipeline.contract import naming
from pipeline.contract import tfds_info
from pipeline.contract import tfx_schema
from transforms.runtime import timeline
from pipeline.config import PipelineConfig
from pipeline.contract.errors import WavbeamError
from transforms.runtime import filesystem
from transforms.planning import block_rejects
from transforms.inputs import sources
from transforms.runtime import output_lock as run_marker
from transforms.features import registry
from transforms.writing import kept_shards
from transforms.writing.stats import RunSummary, SplitSummary

class IncompleteRun(WavbeamError, RuntimeError):
  """The written shards do not account for every example produced."""


def write_text(path: str, text: str) -> None:
  """Writes via a temporary name and a rename, so readers never see half."""
  write_lines(path, [text])


def write_lines(path: str, lines: Iterable[str]) -> None:
  """write_text of lines that come one at a time (written in chunks of
  about 1 MB: a write per line cost half of writing 20,000 lines)."""
  tmp = path + '.tmp'
  with filesystem.create(tmp) as f:
    chunk, size = [], 0
    for line in lines:
      chunk.append(line)
      size += len(line)
      if size >= 1 << 20:
        f.write(''.join(chunk).encode('utf-8'))
        chunk, size = [], 0
    if chunk:
      f.write(''.join(chunk).encode('utf-8'))
  filesystem.move_into_place(tmp, path)


def default_input_key(features) -> str:
  """The model input for as_supervised: the first feature past the signal."""
  return next((f for f in features if f != 'signal'), features[0])


def _shard_phase_start(summary: RunSummary) -> int:
  """The first shard's start, or the first encoding's where shards were
  written as examples were encoded (--sink write_to_tfrecord: a shard
  file's time is when it was finished)."""
  starts = [s.started_ms for s in summary.shards.values()]
  starts += [unit.started_ms for split in summary.splits.values()
             for unit in split.shards.values() if unit.started_ms]
  return min(starts)


def _work_seconds(split_stats, config: PipelineConfig) -> dict:
  """shards_written's read, encode and write seconds, summed over the
  shard tasks; no write time with --sink write_to_tfrecord, whose files
  Beam writes."""
  split_stats = list(split_stats)
  names = ['read', 'encode'] + (
      [] if config.sink == 'write_to_tfrecord' else ['write'])
  return {f'{name}_seconds': sum(s.work_ns(f'{name}_ns')
                                 for s in split_stats) / 1e9
          for name in names}


def finalize_dataset(summary: RunSummary, *, config: PipelineConfig,
                     class_names, sample_rate, layouts,
                     expected_schema=None, run_id=None, created=None,
                     provenance=None) -> str:
  """Checks the run's accounting, publishes the shards, writes metadata.

  `expected_schema` stands in for the examples' own when none was written.
  `provenance`: registry.provenance of the run, with what the caller gave
  its features (else computed from the config).

  Raises IncompleteRun (and publishes nothing) when a shard is missing or
  the counts do not add up.
  """
  out = config.dataset_dir
  run_marker.check_marker(out, run_id)
  files_seen = summary.files_seen

  parts = summary.block_rejects.values()
  # Files --exclude left out are seen, and neither ok nor rejected.
  files_excluded = len({r.path for r in summary.rejections
                        if r.is_excluded})
  held = [r for r in summary.rejections
          if not r.is_note and not r.is_excluded]
  # A planned file is ok unless one of its windows was rejected when read;
  # files rejected earlier (listed, probed or planned) were never planned.
  read_rejected = {(r.split, r.path) for r in held if r.stage == 'read'}
  early_rejected = (sum(p.files_rejected for p in parts) +
                    len({r.path for r in held if r.stage != 'read'}))
  read_paths = {path for _, path in read_rejected}
  files_rejected = early_rejected + len(read_paths)
  num_rejections = sum(p.rejections for p in parts) + len(held)
  num_notes = sum(p.notes for p in parts) + len(
      [r for r in summary.rejections if r.is_note])
  planned = summary.planned_by_split()
  files_ok = collections.Counter(planned)
  for split, _ in read_rejected:
    files_ok[split] -= 1
  one_split_each = config.split_unit != 'segment'
  if (summary.files_planned() + early_rejected + files_excluded != files_seen
      or (one_split_each and len(read_rejected) != len(read_paths))):
    raise IncompleteRun(
        f'{files_seen} files seen but {sum(files_ok.values())} ok, '
        f'{files_rejected} rejected and {files_excluded} excluded')
  stats = summary.splits
  split_names = config.split_names or sorted(layouts)
  by_split = {name: {} for name in split_names}
  for (split, shard), s in summary.shards.items():
    by_split[split][shard] = s
  renames, splits, schema = [], {}, None
  for name in split_names:
    shards = [by_split[name][k] for k in sorted(by_split[name])]
    split_stats = stats.get(name) or SplitSummary(split=name)
    if shards and shards[0].num_shards:  # the writer chose how many
      if split_stats.num_examples == 0:
        shards = []  # the file-based sink's one empty file for an empty split
      expected = shards[0].num_shards if shards else 0
    else:
      expected = layouts[name].num_shards if name in layouts else 0
    if [s.shard for s in shards] != list(range(expected)):
      raise IncompleteRun(f'split {name!r}: expected shards 0..{expected - 1}'
                          f', got {[s.shard for s in shards]}')
    if sum(s.num_examples for s in shards) != split_stats.num_examples:
      raise IncompleteRun(f'split {name!r}: shards hold '
                          f'{sum(s.num_examples for s in shards)} records, '
                          f'{split_stats.num_examples} were encoded')
    schema = split_stats.schema if schema is None else schema.merge(
        split_stats.schema)
    entries, copies = [], []
    for s in shards:
      final = naming.shard_name(config.dataset_name, name, s.shard,
                                len(shards))
      renames.append((s.path, naming.join(out, final)))
      if s.index_path:
        renames.append((s.index_path,
                        naming.join(out, naming.index_name(final))))
      entries.append({'file': final, 'num_examples': s.num_examples,
                      'num_bytes': s.num_bytes,
                      **({'records_crc32c': s.records_crc32c}
                         if s.records_crc32c >= 0 else {})})
      if config.array_record:
        copy = naming.shard_name(config.dataset_name, name, s.shard,
                                 len(shards), naming.ARRAY_RECORD)
        renames.append((s.array_record_path, naming.join(out, copy)))
        copies.append({'file': copy, 'num_examples': s.num_examples,
                       'num_bytes': s.array_record_bytes,
                       'crc32c': s.array_record_crc32c})
    splits[name] = metadata_lib.split_entry(
        entries, split_stats.example_bytes, split_stats.per_class)
    if config.array_record:
      splits[name][naming.ARRAY_RECORD] = copies
    splits[name]['num_files'] = files_ok[name]
    splits[name]['statistics'] = {
        key: m.to_json() for key, m in sorted(split_stats.moments.items())}
  if renames:
    # Its undo, for a resume of a run stopped between the renames.
    kept_shards.record_publishing(out, renames)
    FileSystems.rename([a for a, _ in renames], [b for _, b in renames])
  write_lines(naming.join(out, naming.REJECTS_FILE),
              block_rejects.lines(parts, summary.rejections))
  write_lines(naming.join(out, sources.FILE_NAME),
              sources.lines(summary.stores, config.input_dir))
  examples = sum(v['num_examples'] for v in splits.values())
  metadata = metadata_lib.build(
      name=config.dataset_name, version=config.dataset_version,
      created=created or datetime.datetime.now(
          datetime.timezone.utc).isoformat(timespec='seconds'),
      config=config.to_json(), sample_rate=sample_rate,
      class_names=class_names,
      schema=(schema if schema is not None and schema.features
              else expected_schema or metadata_lib.schema_lib.Schema()),
      input_key=default_input_key(config.features), splits=splits,
      counts={'files_seen': files_seen,
              'files_ok': summary.files_planned() - len(read_paths),
              'files_rejected': files_rejected,
              'files_excluded': files_excluded,
              'rejections': num_rejections, 'notes': num_notes,
              **({'segments_rejected': sum(p.segments_rejected
                                           for p in parts)}
                 if config.has_segments else {}),
              'examples': examples},
      compression=config.compression,
      shards_written=metadata_lib.shards_written_entry(
          _shard_phase_start(summary),
          max(s.finished_ms for s in summary.shards.values()),
          sum(s.feature_ns for s in stats.values()) / 1e9,
          **_work_seconds(stats.values(), config),
          shards_kept=sum(getattr(s, 'kept', False)
                          for s in summary.shards.values()))
      if summary.shards else None)
  if config.split_unit == 'segment':
    metadata['split_overlap'] = metadata_lib.split_overlap_entry(
        summary.split_overlap(), sample_rate)
  features = (provenance if provenance is not None
              else registry.provenance(config))
  if features:
    metadata['features'] = features
  metadata['interop'] = write_interop_files(out, metadata)
  path = naming.join(out, naming.METADATA_FILE)
  write_text(path, metadata_lib.dumps(metadata))
  # Last: until metadata.json is written, a stop leaves what --resume
  # finishes from (the run's record, the shards' records, the renames).
  run_marker.remove_temp_dir(out)
  timeline.mark(timeline.FINALISED)
  logging.info('wrote %s: %d examples in %d shards, %d files rejected', path,
               examples, sum(len(e["shards"]) for e in splits.values()),
               files_rejected)
  return path


def finalize_variants(summaries, *, configs, run_ids, expected_schemas,
                      provenances, class_names, sample_rate,
                      layouts) -> List[str]:
  """finalize_dataset of each of a sweep group's variants, in the order of
  `configs` ({variant: config}; summaries, run ids, schemas, provenances
  and layouts: {variant: ...}) -> their metadata paths."""
  return [finalize_dataset(summaries[name], config=config,
                           class_names=class_names, sample_rate=sample_rate,
                           layouts=layouts[name],
                           expected_schema=expected_schemas[name],
                           run_id=run_ids[name],
                           provenance=provenances[name])
          for name, config in configs.items()]


def write_interop_files(out: str, metadata) -> dict:
  """TFDS and TFX metadata where they will work; says what was written."""
  written = {}
  reason = tfds_info.skip_reason(metadata['name'], metadata['compression'],
                                 metadata['splits'])
  if reason:
    logging.getLogger('wavbeam').warning('TFDS metadata not written: %s',
                                         reason)
    written['tfds'] = f'skipped: {reason}'
  else:
    tfds_files, empty = tfds_info.files(metadata)
    for name, text in tfds_files:
      write_text(naming.join(out, name), text)
    written['tfds'] = 'written'
    if empty:
      logging.getLogger('wavbeam').warning(
          'TFDS metadata leaves out empty splits %s', empty)
      written['tfds'] += f' (empty splits left out: {", ".join(empty)})'
  write_text(naming.join(out, tfx_schema.FILE_NAME), tfx_schema.text(metadata))
  written['tfx'] = tfx_schema.FILE_NAME
  return written
