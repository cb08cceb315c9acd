"""A dataset in parts: what --append adds, and how readers find it.

The first run writes a dataset into its folder as always. Each --append
run writes the recordings that were not in it yet as a complete dataset
of its own (shards, metadata.json, rejects.jsonl, TFDS and TFX files) in a
part folder inside it, `part-00001`, `part-00002`, ..., then lists the
part in `parts.json`, written last by a rename: a part that is not listed
there is not part of the dataset (an interrupted append), and readers
never see it. With no parts.json the dataset is its folder alone. The
variants of a sweep (--variants) take their parts from the sweep's
variants.json instead, which one rename replaces for all of them.

    {"format": "wavbeam-parts", "parts": [".", "part-00001"]}

Standard library only: every reader imports it.
"""

import json
import re
from typing import Callable, List

from pipeline.contract import metadata as metadata_lib
from pipeline.contract import naming

INDEX_FILE = 'parts.json'
FORMAT = 'wavbeam-parts'
BASE = '.'
_PART = re.compile(r'part-\d{5}')


class PartsError(metadata_lib.MetadataError):
  """A parts index, or parts, that cannot be read together."""


def part_name(number: int) -> str:
  return f'part-{number:05d}'


def is_part_name(name: str) -> bool:
  return bool(_PART.fullmatch(name))


def dumps(parts: List[str]) -> str:
  return json.dumps({'format': FORMAT, 'parts': list(parts)}, indent=2) + '\n'


def parse(text: str, where: str) -> List[str]:
  """The part folders parts.json lists, checked: the base first, then
  part-00001, part-00002, ... in order (no other names: a reader joins
  them to the dataset's folder)."""
  try:
    data = json.loads(text)
  except ValueError as e:
    raise PartsError(f'{where}: not JSON ({e})') from e
  if not isinstance(data, dict) or data.get('format') != FORMAT:
    raise PartsError(f'{where}: not a wavbeam parts index')
  parts = data.get('parts')
  expected = [BASE] + [part_name(n) for n in range(1, len(parts or []))]
  if parts != expected:
    raise PartsError(f'{where}: parts {parts!r} are not {expected!r}')
  return parts


def part_names(dataset_dir: str, exists: Callable[[str], bool],
               read_text: Callable[[str], str]) -> List[str]:
  """The parts of a dataset, with the caller's file system calls: of a
  variant of a sweep, those the sweep's variants.json lists for all its
  variants (an --append to a sweep is committed to every variant at once,
  by one rename of that file); else those parts.json lists (['.'] when
  there is none)."""
  sweep = sweep_part_names(dataset_dir, exists, read_text)
  if sweep is not None:
    return sweep
  index = naming.join(dataset_dir, INDEX_FILE)
  if not exists(index):
    return [BASE]
  return parse(read_text(index), index)


def parent_and_name(folder: str):
  """(the folder above `folder`, `folder`'s own name), for local paths
  (`OUT/v/`, `OUT/v/.`) and URIs alike."""
  path = folder.rstrip('/')
  while path.endswith('/.'):
    path = path[:-2].rstrip('/')
  parent, _, name = path.rpartition('/')
  if not name or name in ('.', '..'):
    return None, None
  return parent or ('/' if path.startswith('/') else '.'), name


def sweep_part_names(dataset_dir: str, exists: Callable[[str], bool],
                     read_text: Callable[[str], str]):
  """The parts variants.json lists for the sweep `dataset_dir` is a
  variant of, or None when it is no variant of a sweep (or of a sweep
  written before variants.json listed parts: its variants' parts.json
  then says)."""
  parent, name = parent_and_name(dataset_dir)
  if parent is None:
    return None
  index = naming.join(parent, naming.VARIANTS_FILE)
  if not exists(index):
    return None
  try:
    data = json.loads(read_text(index))
    listed = name in data['variants'] and 'parts' in data
  except (ValueError, KeyError, TypeError) as e:
    raise PartsError(f'{index}: not a sweep index ({e!r})') from e
  if not listed:
    return None
  return parse(json.dumps({'format': FORMAT, 'parts': data['parts']}),
               f'{index} ("parts")')


def part_dir(dataset_dir: str, name: str) -> str:
  return dataset_dir if name == BASE else naming.join(dataset_dir, name)


def part_dirs(dataset_dir: str, exists: Callable[[str], bool],
              read_text: Callable[[str], str]) -> List[str]:
  """The folders of a dataset's parts, the dataset's own folder first."""
  return [part_dir(dataset_dir, n)
          for n in part_names(dataset_dir, exists, read_text)]


def load(dataset_dir: str, base: dict, exists: Callable[[str], bool],
         read_text: Callable[[str], str], wanted=None) -> dict:
  """The metadata a reader reads by: `base` (the dataset folder's own,
  checked) alone, or merged with its parts' (each checked; `wanted`
  selects parts, see select). PartsError or MetadataError otherwise."""
  names = part_names(dataset_dir, exists, read_text)
  if names == [BASE] and wanted is None:
    return base
  chosen = select(names, wanted)
  metas = []
  for i in chosen:
    if names[i] == BASE:
      metas.append(base)
      continue
    path = naming.join(part_dir(dataset_dir, names[i]), naming.METADATA_FILE)
    if not exists(path):
      raise PartsError(f'{dataset_dir}: parts.json lists {names[i]}, which '
                       f'has no {naming.METADATA_FILE}')
    metas.append(metadata_lib.parse(read_text(path), path))
  return merge(metas, [names[i] for i in chosen])


def select(names: List[str], wanted) -> List[int]:
  """Positions of the `wanted` parts (names as parts.json gives them, or
  numbers: 0 is the base); all when `wanted` is None."""
  if wanted is None:
    return list(range(len(names)))
  chosen = []
  for part in wanted:
    name = part if isinstance(part, str) else (
        part_name(part) if part else BASE)
    if name not in names:
      raise PartsError(f'unknown part {part!r}; the dataset has {names}')
    chosen.append(names.index(name))
  return sorted(set(chosen))


def merge(metadatas: List[dict], names: List[str]) -> dict:
  """One metadata for the listed parts (each checked on its own): their
  splits' shards in part order, each file named from the dataset's folder
  (part-00001/...), counts and examples per class summed, statistics
  pooled, the classes of the last part (an append adds classes after the
  others, so every part's targets hold). PartsError if the parts'
  schemas differ."""
  last = metadatas[-1]
  merged = dict(last, parts=list(names))
  splits: dict = {}
  for meta, name in zip(metadatas, names):
    if meta['schema'] != metadatas[0]['schema']:
      first = metadatas[0]['schema']
      differ = sorted(k for k in set(meta['schema']) | set(first)
                      if meta['schema'].get(k) != first.get(k))
      raise PartsError(f'part {name} stores other features than part '
                       f'{names[0]}: {differ} differ')
    prefix = '' if name == BASE else name + '/'
    for split, entry in meta['splits'].items():
      into = splits.setdefault(split, {
          'num_examples': 0, 'num_bytes': 0, 'example_bytes': 0,
          'examples_per_class': {}, 'shards': [], 'num_files': 0,
          'statistics': {}, '_array_record': []})
      for key in ('num_examples', 'num_bytes', 'example_bytes', 'num_files'):
        into[key] += entry.get(key, 0)
      for cls, n in entry['examples_per_class'].items():
        into['examples_per_class'][cls] = (
            into['examples_per_class'].get(cls, 0) + n)
      into['shards'] += [dict(s, file=prefix + s['file'])
                         for s in entry['shards']]
      copies = entry.get('array_record')
      into['_array_record'].append(
          None if copies is None else
          [dict(c, file=prefix + c['file']) for c in copies])
      for key, stats in entry.get('statistics', {}).items():
        into['statistics'].setdefault(key, []).append(stats)
  for entry in splits.values():
    copies = entry.pop('_array_record')
    if copies and all(c is not None for c in copies):
      entry['array_record'] = [c for part in copies for c in part]
    entry['examples_per_class'] = dict(sorted(
        entry['examples_per_class'].items()))
    entry['statistics'] = {k: pooled(v) for k, v in
                           sorted(entry['statistics'].items())}
  merged['splits'] = splits
  merged['counts'] = {k: sum(m['counts'].get(k, 0) for m in metadatas)
                      for k in last['counts']}
  if any(m.get('split_overlap') is not None for m in metadatas):
    merged['split_overlap'] = _merged_overlap(metadatas)
  return merged


def _merged_overlap(metadatas: List[dict]) -> List[dict]:
  """The parts' split_overlap summed per pair of splits: a recording is
  in one part, so the parts share none."""
  pairs: dict = {}
  for meta in metadatas:
    for pair in meta.get('split_overlap') or []:
      into = pairs.setdefault(tuple(pair['splits']), [0, 0.0])
      into[0] += pair['recordings']
      into[1] += pair['overlap_seconds']
  return [{'splits': list(key), 'recordings': n,
           'overlap_seconds': round(seconds, 6)}
          for key, (n, seconds) in sorted(pairs.items())]


def pooled(stats: List[dict]) -> dict:
  """Statistics of the union of parts from each part's count, mean, std,
  min and max."""
  stats = [s for s in stats if s['count']]
  n = sum(s['count'] for s in stats)
  if not n:
    return {'count': 0, 'mean': 0.0, 'std': 0.0, 'min': None, 'max': None}
  mean = sum(s['count'] * s['mean'] for s in stats) / n
  second = sum(s['count'] * (s['std'] ** 2 + (s['mean'] - mean) ** 2)
               for s in stats) / n
  return {'count': n, 'mean': mean, 'std': second ** 0.5,
          'min': min(s['min'] for s in stats),
          'max': max(s['max'] for s in stats)}
