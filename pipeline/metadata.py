"""metadata.json: what a finished dataset holds. Standard library only.

The final pipeline step builds it (`build`); the reader checks it (`parse`).
A dataset is complete exactly when this file exists.
"""

import datetime
import json
from typing import Dict, List, Mapping, Optional, Sequence

from pipeline import schema as schema_lib

FORMAT = 'wavbeam'
# 2: float32 arrays are packed FloatLists (1 stored them as raw bytes; the
# schema of each dataset says which, so readers take both).
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)


class MetadataError(ValueError):
  """metadata.json is missing, unreadable or inconsistent."""


# What differs between two runs of the same job on the same input.
RUN_KEYS = ('created', 'shards_written')


def build(*, name: str, version: str, created: str, config: Mapping, sample_rate: int,
          class_names: Sequence[str], schema: schema_lib.Schema,
          input_key: str, splits: Mapping[str, Mapping],
          counts: Mapping[str, int], compression: str,
          shards_written: Optional[Mapping] = None) -> Dict:
  """shards_written: shards_written_entry(...), or None if none were."""
  return {
      'format': FORMAT,
      'format_version': FORMAT_VERSION,
      'name': name,
      'version': version,
      'created': created,
      'shards_written': None if shards_written is None
                        else dict(shards_written),
      'sample_rate': sample_rate,
      'classes': list(class_names),
      'num_classes': len(class_names),
      'input_key': input_key,
      'label_key': 'target',
      'compression': compression,
      'schema': schema.to_json(),
      'splits': dict(splits),
      'counts': dict(counts),
      'config': dict(config),
  }


def split_entry(shards: Sequence[Mapping], example_bytes: int,
                examples_per_class: Mapping[str, int]) -> Dict:
  """shards: [{'file': base name, 'num_examples': n, 'num_bytes': b}] in
  shard order."""
  return {
      'num_examples': sum(s['num_examples'] for s in shards),
      'num_bytes': sum(s['num_bytes'] for s in shards),
      'example_bytes': example_bytes,
      'examples_per_class': dict(sorted(examples_per_class.items())),
      'shards': list(shards),
  }


def shards_written_entry(first_started_ms: int, last_finished_ms: int
                         ) -> Dict:
  """When shard writing ran, from the first shard task's start to the last
  one's end, on every runner: the phase whose speed scales with workers,
  without the runner's start-up and planning."""
  def iso(ms):
    return datetime.datetime.fromtimestamp(
        ms / 1000, datetime.timezone.utc).isoformat(timespec='milliseconds')
  return {'first_started': iso(first_started_ms),
          'last_finished': iso(last_finished_ms),
          'seconds': round((last_finished_ms - first_started_ms) / 1000, 3)}


def content(metadata: Mapping) -> Dict:
  """metadata without RUN_KEYS: equal for two runs of one job."""
  return {k: v for k, v in metadata.items() if k not in RUN_KEYS}


def dumps(metadata: Mapping) -> str:
  return json.dumps(metadata, indent=2, sort_keys=True) + '\n'


def parse(text: str, where: str) -> Dict:
  """Checks the structure; errors name `where` (the file)."""
  try:
    obj = json.loads(text)
  except json.JSONDecodeError as e:
    raise MetadataError(f'{where}: not valid JSON ({e})') from e
  if not isinstance(obj, dict) or obj.get('format') != FORMAT:
    raise MetadataError(f'{where}: not a wavbeam metadata file')
  if obj.get('format_version') not in READABLE_VERSIONS:
    raise MetadataError(
        f'{where}: format version {obj.get("format_version")} is not '
        f'supported by this reader (reads {list(READABLE_VERSIONS)})')
  try:
    schema_lib.Schema.from_json(obj['schema'])
    for split, entry in obj['splits'].items():
      shards: List = entry['shards']
      if sum(s['num_examples'] for s in shards) != entry['num_examples']:
        raise MetadataError(f'{where}: split {split!r} shard lengths do not '
                            'add up to its num_examples')
  except (KeyError, TypeError, schema_lib.SchemaError) as e:
    raise MetadataError(f'{where}: malformed ({e!r})') from e
  return obj


def schema_of(metadata: Mapping) -> schema_lib.Schema:
  return schema_lib.Schema.from_json(metadata['schema'])
