"""metadata.json: what a finished dataset holds. Standard library only.

The final pipeline step builds it (`build`); the reader checks it (`parse`).
A dataset is complete exactly when this file exists.
"""

import json
from typing import Dict, List, Mapping, Sequence

from pipeline import schema as schema_lib

FORMAT = 'wavbeam'
FORMAT_VERSION = 1


class MetadataError(ValueError):
  """metadata.json is missing, unreadable or inconsistent."""


def build(*, name: str, version: str, created: str, config: Mapping, sample_rate: int,
          class_names: Sequence[str], schema: schema_lib.Schema,
          input_key: str, splits: Mapping[str, Mapping],
          counts: Mapping[str, int], compression: str) -> Dict:
  return {
      'format': FORMAT,
      'format_version': FORMAT_VERSION,
      'name': name,
      'version': version,
      'created': created,
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
  if obj.get('format_version') != FORMAT_VERSION:
    raise MetadataError(
        f'{where}: format version {obj.get("format_version")} is not '
        f'supported by this reader (expects {FORMAT_VERSION})')
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
