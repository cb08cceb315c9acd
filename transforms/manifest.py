"""--manifest: the recordings of a corpus as its publisher lists them.

A manifest is a CSV, TSV or JSON Lines file with one row per recording: a
path (relative to input_dir, absolute, or a URI) and optional label, split
(or fold) and extra columns, as ESC-50's meta/esc50.csv, UrbanSound8K's
UrbanSound8K.csv and Common Voice's TSVs ship them. Each row becomes an
Entry that travels with its file through the listing (listing.index_blocks),
so no worker holds the whole manifest: the launcher reads it once to check
it, the listing task once to deal its rows.

A malformed manifest fails before anything runs, with its line number.
"""

import csv
import dataclasses
import functools
import io
import os
import posixpath
import re
import string
from typing import Dict, Iterator, List, Optional, Tuple, Union

from apache_beam.io.filesystems import FileSystems

from pipeline.contract import json_lines
from pipeline.contract import naming
from pipeline.config import ConfigError, PipelineConfig, check_split_name
from transforms import filesystem

OPTION = 'manifest'
INT64 = 'int64'
STRING = 'string'
_INT = re.compile(r'-?\d{1,19}')


@dataclasses.dataclass(frozen=True)
class Entry:
  """What a manifest row says about its recording."""
  line: int                   # where, for messages
  split: Optional[str]        # None: --splits or --split_lists decide
  label: Optional[str]        # None: --label_from decides
  extras: Tuple[Tuple[str, Union[str, int]], ...] = ()


@dataclasses.dataclass(frozen=True)
class Manifest:
  entries: Dict[str, Entry]          # by listed path (input_dir joined)
  extra_types: Dict[str, str]        # column: int64 or string
  extra_widths: Dict[str, int]       # column: longest value, in bytes
  text: str                          # --manifest as given


def row_location(input_dir: str, path: str) -> str:
  """A row's path as the listing names files: input_dir joined unless
  absolute or a URI; a local path normalised (a//b.wav, ./a/b.wav and
  a/x/../b.wav are a/b.wav)."""
  path = path.strip()
  if FileSystems.get_scheme(path):
    return path
  path = posixpath.normpath(path)
  if path.startswith('/'):
    return path
  return naming.join(input_dir, path)


def same_file_key(location: str) -> str:
  """What two rows naming one recording share: the local file a path
  resolves to (symbolic links followed); a URI as it is."""
  if FileSystems.get_scheme(location):
    return location
  return os.path.realpath(location)


def path_columns(path_column: str) -> List[str]:
  """The columns a --manifest_path_column names: one, or those of a
  template such as fold{fold}/{slice_file_name}."""
  if '{' not in path_column:
    return [path_column]
  return [name for _, name, _, _ in string.Formatter().parse(path_column)
          if name]


def row_path(config: PipelineConfig, row: Dict[str, str]) -> str:
  """A row's path: its path column, or the template filled in, with
  --manifest_audio_extension replacing the file's extension."""
  if '{' in config.manifest_path_column:
    path = config.manifest_path_column.format_map(
        {k: v.strip() for k, v in row.items()})
  else:
    path = row[config.manifest_path_column]
  path = path.strip()
  if path and config.manifest_audio_extension:
    head, dot, extension = path.rpartition('.')
    if dot and '/' not in extension:
      path = head
    path += '.' + config.manifest_audio_extension
  return path


def file_format(location: str) -> str:
  lower = location.lower()
  for suffix, kind in (('.csv', 'csv'), ('.tsv', 'tsv'), ('.jsonl', 'jsonl'),
                       ('.json', 'jsonl')):
    if lower.endswith(suffix):
      return kind
  raise ConfigError(OPTION, location, 'name a .csv, .tsv or .jsonl file (the '
                    'format is taken from the extension)')


def parse_rows(text: str, kind: str,
               where: str) -> Iterator[Tuple[int, Dict[str, str]]]:
  """(line number, {column: value}) of each row; ConfigError naming the
  line for a row that does not parse or has the wrong number of cells."""
  if kind == 'jsonl':
    try:
      for number, row in json_lines.values(text):
        if not isinstance(row, dict):
          raise ConfigError(OPTION, where, f'line {number} is not a JSON '
                            'object')
        yield number, {k: '' if v is None else str(v)
                       for k, v in row.items()}
    except json_lines.NotJson as e:
      raise ConfigError(OPTION, where, str(e)) from e
    return
  # Common Voice's TSVs hold sentences with quote marks: cells are not
  # quoted there, so TSVs are read with no quoting.
  reader = csv.reader(io.StringIO(text, newline=''),
                      **({'delimiter': '\t', 'quoting': csv.QUOTE_NONE}
                         if kind == 'tsv' else {}))
  try:
    header = next(reader, None)
    if header is None:
      raise ConfigError(OPTION, where, 'is empty (a header row is needed)')
    header = [h.strip() for h in header]
    for row in reader:
      number = reader.line_num
      if not row or row == ['']:
        continue
      if len(row) != len(header):
        raise ConfigError(OPTION, where, f'line {number} has {len(row)} '
                          f'cells, the header {len(header)}')
      yield number, dict(zip(header, row))
  except csv.Error as e:
    raise ConfigError(OPTION, where, f'line {reader.line_num}: {e}') from e


def _read_text(location: str) -> str:
  try:
    with FileSystems.open(location) as f:
      return f.read().decode('utf-8-sig')
  except (OSError, IOError, UnicodeDecodeError) as e:
    raise ConfigError(OPTION, location, f'cannot read it ({e})') from e


def fold_split(config: PipelineConfig, value: str) -> Optional[str]:
  """The split a split-column value goes to: through --fold_splits when
  given, else the value itself."""
  if not config.fold_splits:
    return value
  for split, folds in config.fold_splits:
    if value in folds:
      return split
  return None


def _read(config: PipelineConfig) -> Manifest:
  entries: Dict[str, Entry] = {}
  seen_at: Dict[str, Tuple[str, str]] = {}
  extras_raw: List[Tuple[str, int, Dict[str, str]]] = []
  for file_split, location in config.manifest:
    kind = file_format(location)
    where = location
    columns_needed = [*path_columns(config.manifest_path_column),
                      config.manifest_label_column,
                      config.manifest_split_column,
                      *config.manifest_extra_columns]
    for number, row in parse_rows(_read_text(location), kind, where):
      missing = [c for c in columns_needed if c and c not in row]
      if missing:
        raise ConfigError(OPTION, where, f'line {number} has no column '
                          f'{missing} (it has {sorted(row)}); name the '
                          'columns with --manifest_*_column')
      path = row_path(config, row)
      if not path:
        raise ConfigError(OPTION, where, f'line {number}: empty '
                          f'{config.manifest_path_column!r}')
      listed = row_location(config.input_dir, path)
      key = same_file_key(listed)
      if key in seen_at:
        place, other = seen_at[key]
        raise ConfigError(OPTION, where, f'{path} is listed twice: {place} '
                          f'and line {number}'
                          f'{"" if other == listed else f" (both are {key})"}')
      seen_at[key] = (f'{where} line {number}', listed)
      split = file_split or None
      if config.manifest_split_column:
        value = row[config.manifest_split_column].strip()
        split = fold_split(config, value)
        if split is None:
          raise ConfigError(OPTION, where, f'line {number}: '
                            f'{config.manifest_split_column}={value!r} is '
                            'in no split of --fold_splits')
        check_split_name(OPTION, where, split, f'line {number}: ')
      label = None
      if config.manifest_label_column:
        label = row[config.manifest_label_column].strip()
      entries[listed] = Entry(number, split, label)
      if config.manifest_extra_columns:
        extras_raw.append((listed, number, {
            c: row[c] for c in config.manifest_extra_columns}))
  types = {c: _column_type([r[c] for _, _, r in extras_raw])
           for c in config.manifest_extra_columns}
  widths = {c: 1 for c in config.manifest_extra_columns}
  for listed, number, raw in extras_raw:
    values = []
    for column in config.manifest_extra_columns:
      value = raw[column]
      if types[column] == INT64:
        values.append((column, int(value)))
      else:
        values.append((column, value))
        widths[column] = max(widths[column], len(value.encode('utf-8')))
    entries[listed] = dataclasses.replace(entries[listed],
                                          extras=tuple(values))
  return Manifest(entries, types, widths, manifest_text(config.manifest))


def _column_type(values: List[str]) -> str:
  """int64 when every value (and there is one) is an int64, else string."""
  if values and all(_INT.fullmatch(v.strip()) and -2**63 <= int(v) < 2**63
                    for v in values):
    return INT64
  return STRING


def manifest_text(manifest) -> str:
  return ','.join(f'{s}={f}' if s else f for s, f in manifest)


def read(config: PipelineConfig) -> Manifest:
  """The manifest of a run, read once per process (the launcher, to check
  it and learn its extra columns' types; the listing task, to deal its
  rows), and again once its files change (a process that runs again after
  the manifest was edited, as an --append does, reads the new rows)."""
  return _read_once(config, _versions(config))


@functools.lru_cache(maxsize=2)
def _read_once(config: PipelineConfig, versions) -> Manifest:
  del versions  # part of the cache key only
  return _read(config)


def _versions(config: PipelineConfig) -> tuple:
  """(size, modification time) of each manifest file; None for one that
  cannot be looked at (reading it says why)."""
  versions = []
  for _, location in config.manifest:
    try:
      meta = filesystem.metadata(location)
      versions.append((meta.size_in_bytes, meta.last_updated_in_seconds))
    except Exception:  # pylint: disable=broad-except
      versions.append(None)
  return tuple(versions)
