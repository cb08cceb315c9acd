"""The last step: rejects.jsonl, then metadata.json, once all else is done."""

import datetime
import json
import logging

from apache_beam.io.filesystems import FileSystems

from pipeline import metadata as metadata_lib
from pipeline import naming
from pipeline.config import PipelineConfig

DEFAULT_SPLIT = 'train'


class IncompleteRun(RuntimeError):
  """The written shards do not account for every example produced."""


def write_text(path: str, text: str) -> None:
  """Writes via a temporary name and a rename, so readers never see half."""
  tmp = path + '.tmp'
  with FileSystems.create(tmp) as f:
    f.write(text.encode('utf-8'))
  if FileSystems.exists(path):
    FileSystems.delete([path])
  FileSystems.rename([tmp], [path])


def default_input_key(features) -> str:
  """The model input for as_supervised: the first feature past the signal."""
  return next((f for f in features if f != 'signal'), features[0])


def write_dataset_metadata(_, *, config: PipelineConfig, files_seen: int,
                           shard_stats, stats, rejects, planned_paths,
                           class_names, sample_rate, created=None) -> str:
  shards = sorted(shard_stats, key=lambda s: s.path)
  written = sum(s.num_examples for s in shards)
  if written != stats.num_examples:
    raise IncompleteRun(
        f'shards hold {written} records but {stats.num_examples} examples '
        f'were produced: {[s.path for s in shards]}')
  rejects = sorted(rejects, key=lambda r: (r.path, r.frame_range or (0, 0)))
  rejected_paths = {r.path for r in rejects}
  files_ok = len(set(planned_paths) - rejected_paths)
  if files_ok + len(rejected_paths) != files_seen:
    raise IncompleteRun(
        f'{files_seen} files seen but {files_ok} ok and '
        f'{len(rejected_paths)} rejected')
  out = config.output_dir
  write_text(naming.join(out, naming.REJECTS_FILE),
             ''.join(json.dumps(r.to_json(), sort_keys=True) + '\n'
                     for r in rejects))
  split = metadata_lib.split_entry(
      [{'file': s.path.rsplit('/', 1)[-1], 'num_examples': s.num_examples,
        'num_bytes': s.num_bytes} for s in shards],
      stats.example_bytes, stats.per_class)
  metadata = metadata_lib.build(
      name=config.dataset_name,
      created=created or datetime.datetime.now(
          datetime.timezone.utc).isoformat(timespec='seconds'),
      config=config.to_json(), sample_rate=sample_rate,
      class_names=class_names, schema=stats.schema,
      input_key=default_input_key(config.features),
      splits={DEFAULT_SPLIT: split},
      counts={'files_seen': files_seen, 'files_ok': files_ok,
              'files_rejected': len(rejected_paths),
              'rejections': len(rejects), 'examples': written},
      compression=config.compression)
  path = naming.join(out, naming.METADATA_FILE)
  write_text(path, metadata_lib.dumps(metadata))
  logging.info('wrote %s: %d examples in %d shards, %d files rejected', path,
               written, len(shards), len(rejected_paths))
  return path
