"""metadata.json: what a finished dataset holds. Standard library only.

The final pipeline step builds it (`build`); the reader checks it (`parse`).
A dataset is complete exactly when this file exists.
"""

import datetime
import json
from typing import Dict, List, Mapping, Optional, Sequence

from pipeline.contract import naming
from pipeline.contract import schema as schema_lib
from pipeline.contract.errors import WavbeamError

FORMAT = 'wavbeam'
# 2: float32 arrays are packed FloatLists (1 stored them as raw bytes; the
# schema of each dataset says which, so readers take both).
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)


class MetadataError(WavbeamError, ValueError):
  """metadata.json is missing, unreadable or inconsistent."""


# What differs between two runs of the same job on the same input.
RUN_KEYS = ('created', 'shards_written')


def build(*, name: str, version: str, created: str, config: Mapping,
          sample_rate: int,
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
      'label_key': schema_lib.LABEL_KEY,
      'compression': compression,
      'schema': schema.to_json(),
      'splits': dict(splits),
      'counts': dict(counts),
      'config': dict(config),
  }


def split_overlap_entry(shared: Mapping, sample_rate: int) -> List[Dict]:
  """What two splits share under --split_unit segment, per pair of
  splits: the recordings with examples in both, and the seconds of audio
  that segments of both cover (0 unless --allow_split_overlap)."""
  return [{'splits': [a, b], 'recordings': recordings,
           'overlap_seconds': round(frames / sample_rate, 6)}
          for (a, b), (recordings, frames) in sorted(shared.items())]


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


# shards_written's work times, summed over the shard tasks (each optional:
# datasets written before it have none).
WORK_SECONDS = ('feature_seconds', 'read_seconds', 'encode_seconds',
                'write_seconds')


def shards_written_entry(first_started_ms: int, last_finished_ms: int,
                         feature_seconds: Optional[float] = None,
                         read_seconds: Optional[float] = None,
                         encode_seconds: Optional[float] = None,
                         write_seconds: Optional[float] = None,
                         shards_kept: int = 0) -> Dict:
  """When shard writing ran, from the first shard task's start to the last
  one's end, on every runner: the phase whose speed scales with workers,
  without the runner's start-up and planning. The time the tasks spent,
  summed over them: `feature_seconds` computing features,
  `read_seconds` reading windows (decoding, resampling),
  `encode_seconds` encoding examples (columns, statistics, serialization)
  and `write_seconds` writing shard files. `shards_kept`: shards a
  resumed run (--resume) kept from the run it finished, written before
  this run's times."""
  def iso(ms):
    return datetime.datetime.fromtimestamp(
        ms / 1000, datetime.timezone.utc).isoformat(timespec='milliseconds')
  entry = {'first_started': iso(first_started_ms),
           'last_finished': iso(last_finished_ms),
           'seconds': round((last_finished_ms - first_started_ms) / 1000, 3)}
  spent = {'feature_seconds': feature_seconds, 'read_seconds': read_seconds,
           'encode_seconds': encode_seconds, 'write_seconds': write_seconds}
  for key in WORK_SECONDS:
    if spent[key] is not None:
      entry[key] = round(spent[key], 3)
  if shards_kept:
    entry['shards_kept'] = shards_kept
  return entry


def content(metadata: Mapping) -> Dict:
  """metadata without RUN_KEYS: equal for two runs of one job."""
  return {k: v for k, v in metadata.items() if k not in RUN_KEYS}


def dumps(metadata: Mapping) -> str:
  return json.dumps(metadata, indent=2, sort_keys=True) + '\n'


def parse(text: str, where: str) -> Dict:
  """metadata.json checked against its format before anything trusts it:
  types, keys, shard names, counts that add up, shapes that fit in the
  bytes. Raises MetadataError naming `where` (the file) and the entry."""
  try:
    obj = json.loads(text)
  except (json.JSONDecodeError, RecursionError, UnicodeDecodeError) as e:
    reason = ('nested too deeply' if isinstance(e, RecursionError)
              else str(e))
    raise MetadataError(f'{where}: not valid JSON ({reason})') from e
  if not isinstance(obj, dict) or obj.get('format') != FORMAT:
    raise MetadataError(f'{where}: not a wavbeam metadata file')
  if obj.get('format_version') not in READABLE_VERSIONS:
    raise MetadataError(
        f'{where}: format version {obj.get("format_version")!r} is not '
        f'supported by this reader (reads {list(READABLE_VERSIONS)})')
  _Checker(where).check(obj)
  return obj


class _Checker:
  """One pass over a parsed metadata.json; the first problem is raised."""

  def __init__(self, where: str):
    self.where = where

  def fail(self, key: str, problem: str):
    raise MetadataError(f'{self.where}: {key}: {problem}')

  def get(self, obj, key: str, kind, name: str = None):
    name = name or key
    if not isinstance(obj, dict) or key not in obj:
      self.fail(name, 'missing')
    value = obj[key]
    if kind is int:
      ok = isinstance(value, int) and not isinstance(value, bool)
      if ok and value < 0:
        self.fail(name, f'{value} is negative')
    else:
      ok = isinstance(value, kind)
    if not ok:
      wanted = ' or '.join(_KIND_NAMES[k] for k in (
          kind if isinstance(kind, tuple) else (kind,)))
      self.fail(name, f'expected {wanted}, got {value!r} '
                f'({_KIND_NAMES.get(type(value), type(value).__name__)})')
    return value

  def check(self, obj: Dict) -> None:
    name = self.get(obj, 'name', str)
    if not naming.is_dataset_name(name):
      self.fail('name', f'{name!r} is not a dataset name (use '
                f'{naming.DATASET_NAME_RULE}): file names made from it '
                'could lead outside the dataset folder')
    self.get(obj, 'version', str)
    self.get(obj, 'sample_rate', int)
    classes = self.get(obj, 'classes', list)
    if not all(isinstance(c, str) for c in classes):
      self.fail('classes', 'expected a list of strings')
    if self.get(obj, 'num_classes', int) != len(classes):
      self.fail('num_classes', f'{obj["num_classes"]}, but {len(classes)} '
                'classes are listed')
    if self.get(obj, 'compression', str) not in ('none', 'gzip'):
      self.fail('compression', f'{obj["compression"]!r} is not none or gzip')
    try:
      schema = schema_lib.Schema.from_json(self.get(obj, 'schema', dict))
    except (KeyError, TypeError, ValueError) as e:
      self.fail('schema', f'malformed ({e})')
    for key, spec in schema.features:
      if spec.variable and schema.as_dict().get(
          spec.length_key) != schema_lib.FeatureSpec('int64', ()):
        self.fail(f'schema.{key}.length_key', f'{spec.length_key!r} is not '
                  'an int64 scalar of the schema')
    for key in ('input_key', 'label_key'):
      value = self.get(obj, key, str)
      if schema.features and value not in schema.keys():
        self.fail(key, f'{value!r} is not a feature of the schema')
    min_bytes = _min_example_bytes(schema)
    for split, entry in self.get(obj, 'splits', dict).items():
      self.check_split(name, split, entry, min_bytes)
    total = sum(e['num_examples'] for e in obj['splits'].values())
    if not schema.features and total:
      self.fail('schema', f'empty, but the splits hold {total} examples')
    counts = self.get(obj, 'counts', dict)
    for key in COUNT_KEYS:
      self.get(counts, key, int, f'counts.{key}')
    for key in counts:
      self.get(counts, key, int, f'counts.{key}')
    overlap = self.check_split_overlap(obj)
    self.check_counts(obj['splits'], counts, overlap)
    self.get(obj, 'created', str)
    self.get(obj, 'config', dict)
    if obj.get('interop') is not None:
      self.get(obj, 'interop', dict)
    written = obj.get('shards_written')
    if written is not None:
      self.get(obj, 'shards_written', dict)
      seconds = self.get(written, 'seconds', (int, float),
                         'shards_written.seconds')
      if isinstance(seconds, bool) or not seconds >= 0:
        self.fail('shards_written.seconds', f'{seconds!r} is not a duration')
      for key in WORK_SECONDS:
        if key in written:
          spent = self.get(written, key, (int, float),
                           f'shards_written.{key}')
          if isinstance(spent, bool) or not spent >= 0:
            self.fail(f'shards_written.{key}', f'{spent!r} is not a duration')

  def check_split_overlap(self, obj) -> list:
    """split_overlap, when present: pairs of the dataset's splits."""
    if obj.get('split_overlap') is None:
      return []
    pairs = self.get(obj, 'split_overlap', list)
    for i, pair in enumerate(pairs):
      at = f'split_overlap[{i}]'
      names = self.get(pair, 'splits', list, f'{at}.splits')
      if len(names) != 2 or any(n not in obj['splits'] for n in names):
        self.fail(f'{at}.splits', f'{names!r} is not two of the splits')
      self.get(pair, 'recordings', int, f'{at}.recordings')
      seconds = self.get(pair, 'overlap_seconds', (int, float),
                         f'{at}.overlap_seconds')
      if isinstance(seconds, bool) or not seconds >= 0:
        self.fail(f'{at}.overlap_seconds', f'{seconds!r} is not a duration')
    return pairs

  def check_counts(self, splits, counts, overlap=()) -> None:
    """The relations between the counts metadata.json states."""
    total = sum(e['num_examples'] for e in splits.values())
    if counts['examples'] != total:
      self.fail('counts.examples', f'{counts["examples"]}, but the splits '
                f'hold {total}')
    # files_excluded (--exclude) is absent from datasets written before it.
    excluded = counts.get('files_excluded', 0)
    if counts['files_seen'] != (counts['files_ok'] + counts['files_rejected']
                                + excluded):
      self.fail('counts.files_seen', f'{counts["files_seen"]} files seen, '
                f'but {counts["files_ok"]} ok, {counts["files_rejected"]} '
                f'rejected and {excluded} excluded')
    files = [e.get('num_files') for e in splits.values()]
    # Under --split_unit segment a recording counts in each of its splits.
    shared = sum(p['recordings'] for p in overlap)
    if (all(n is not None for n in files) and
        not counts['files_ok'] <= sum(files) <= counts['files_ok'] + shared):
      self.fail('counts.files_ok', f'{counts["files_ok"]}, but the splits '
                f'hold {sum(files)} files')

  def check_split(self, name, split, entry, min_bytes) -> None:
    at = f'splits.{split}'
    if not naming.is_split_name(split):
      self.fail(at, f'{split!r} is not a split name (use '
                f'{naming.SPLIT_NAME_RULE}): file names made from it could '
                'lead outside the dataset folder')
    if not isinstance(entry, dict):
      self.fail(at, 'expected an object')
    shards = self.get(entry, 'shards', list, f'{at}.shards')
    num_examples = self.get(entry, 'num_examples', int, f'{at}.num_examples')
    num_bytes = self.get(entry, 'num_bytes', int, f'{at}.num_bytes')
    example_bytes = self.get(entry, 'example_bytes', int,
                             f'{at}.example_bytes')
    for i, shard in enumerate(shards):
      where = f'{at}.shards[{i}]'
      expected = naming.shard_name(name, split, i, len(shards))
      if self.get(shard, 'file', str, f'{where}.file') != expected:
        # Also what keeps a hand-edited '../../etc/passwd' from being read.
        self.fail(f'{where}.file', f'{shard["file"]!r} is not the shard '
                  f'name this dataset uses ({expected!r})')
      self.get(shard, 'num_examples', int, f'{where}.num_examples')
      self.get(shard, 'num_bytes', int, f'{where}.num_bytes')
      if 'records_crc32c' in shard:  # optional: without it, sizes and CRCs
        self.get(shard, 'records_crc32c', int, f'{where}.records_crc32c')
    if naming.ARRAY_RECORD in entry:  # --array_record's copies
      copies = self.get(entry, naming.ARRAY_RECORD, list,
                        f'{at}.{naming.ARRAY_RECORD}')
      if len(copies) != len(shards):
        self.fail(f'{at}.{naming.ARRAY_RECORD}', f'{len(copies)} files for '
                  f'{len(shards)} shards')
      for i, (copy, shard) in enumerate(zip(copies, shards)):
        where = f'{at}.{naming.ARRAY_RECORD}[{i}]'
        expected = naming.shard_name(name, split, i, len(shards),
                                     naming.ARRAY_RECORD)
        if self.get(copy, 'file', str, f'{where}.file') != expected:
          self.fail(f'{where}.file', f'{copy["file"]!r} is not the '
                    f'ArrayRecord name this dataset uses ({expected!r})')
        if self.get(copy, 'num_examples', int,
                    f'{where}.num_examples') != shard['num_examples']:
          self.fail(f'{where}.num_examples', 'differs from its shard\'s')
        self.get(copy, 'num_bytes', int, f'{where}.num_bytes')
        if 'crc32c' in copy:  # optional: without it, size and records
          self.get(copy, 'crc32c', int, f'{where}.crc32c')
    if 'num_files' in entry:
      self.get(entry, 'num_files', int, f'{at}.num_files')
    per_class = self.get(entry, 'examples_per_class', dict,
                         f'{at}.examples_per_class')
    for cls in per_class:
      self.get(per_class, cls, int, f'{at}.examples_per_class.{cls}')
    if sum(per_class.values()) != num_examples:
      self.fail(f'{at}.examples_per_class', f'adds up to '
                f'{sum(per_class.values())}, not its {num_examples} examples')
    stats = entry.get('statistics', {})
    if not isinstance(stats, dict):
      self.fail(f'{at}.statistics', 'expected an object')
    for key, moments in stats.items():
      self.check_moments(f'{at}.statistics.{key}', moments)
    if sum(s['num_examples'] for s in shards) != num_examples:
      self.fail(at, 'shard lengths do not add up to its num_examples')
    if sum(s['num_bytes'] for s in shards) != num_bytes:
      self.fail(at, 'shard sizes do not add up to its num_bytes')
    # One example cannot need more bytes than all of the split's together
    # (a shape of 10**12 would otherwise reach a reader's allocation).
    # Record counts are checked against the shards by the readers.
    if num_examples and min_bytes > example_bytes:
      self.fail(at, f'one example of the schema needs at least {min_bytes} '
                f'bytes, more than the split\'s {num_examples} examples hold '
                f'({example_bytes}): a shape is wrong')


  def check_moments(self, at, moments) -> None:
    self.get(moments, 'count', int, f'{at}.count')
    for key in ('mean', 'std', 'min', 'max'):
      value = self.get(moments, key, (int, float, type(None)), f'{at}.{key}')
      if isinstance(value, bool) or (value is None and moments['count'] and
                                     key in ('mean', 'std')):
        self.fail(f'{at}.{key}', f'expected a number, got {value!r}')


# Counts every dataset states (and the relations check_counts holds).
COUNT_KEYS = ('files_seen', 'files_ok', 'files_rejected', 'rejections',
              'examples')

_KIND_NAMES = {int: 'an integer', str: 'a string', list: 'a list',
               dict: 'an object', float: 'a number', bool: 'a boolean',
               type(None): 'null'}


def _min_example_bytes(schema: schema_lib.Schema) -> int:
  """The fewest serialized bytes an example of `schema` can take: its
  arrays' data alone."""
  total = 0
  for _, spec in schema.features:
    # A variable-length array can hold no rows.
    if spec.encoding in (schema_lib.RAW_BYTES,
                         schema_lib.FLOAT_LIST) and not spec.variable:
      size = _ITEMSIZE.get(spec.dtype, 1)
      for d in spec.shape:
        size *= d
      total += size
  return total


_ITEMSIZE = {'bool': 1, 'int8': 1, 'uint8': 1, 'int16': 2, 'uint16': 2,
             'float16': 2, 'bfloat16': 2, 'int32': 4, 'uint32': 4,
             'float32': 4, 'int64': 8, 'uint64': 8, 'float64': 8,
             'complex64': 8, 'complex128': 16}


def has_array_record(metadata: Mapping) -> bool:
  """Whether the dataset was written with --array_record."""
  return any(naming.ARRAY_RECORD in e for e in metadata['splits'].values())


def schema_of(metadata: Mapping) -> schema_lib.Schema:
  return schema_lib.Schema.from_json(metadata['schema'])
