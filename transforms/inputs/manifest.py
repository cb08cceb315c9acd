"""--manifest: the recordings of a corpus as its publisher lists them.

A manifest is a CSV, TSV or JSON Lines file with one row per recording: a
path (relative to input_dir, absolute, or a URI) and optional label, split
(or fold) and extra columns, as ESC-50's meta/esc50.csv, UrbanSound8K's
UrbanSound8K.csv and Common Voice's TSVs ship them. Each row becomes an
Entry that travels with its file through the listing (listing.index_blocks),
so no worker holds the whole manifest: the launcher reads it once to check
it, the listing task once to deal its rows.

With --manifest_start_column, a row is one time-stamped segment of its
recording instead (a Segment): rows may share a recording, its segments
may overlap, and each keeps its own label and extra columns.

A malformed manifest fails before anything runs, with its line number.
"""

import csv
import dataclasses
import decimal
import functools
import io
import json
import math
import os
import posixpath
import re
import stat
import string
from typing import Dict, Iterator, List, Optional, Tuple, Union

from apache_beam.io.filesystems import FileSystems
import crc32c

from pipeline.contract import json_lines
from pipeline.contract import naming
from pipeline.config import ConfigError, PipelineConfig, check_split_name
from transforms.runtime import filesystem
from transforms.inputs import splits as splits_lib
from transforms.inputs import patterns

OPTION = 'manifest'
INT64 = 'int64'
STRING = 'string'
# ASCII digits only: int() takes others too ('３', '٣'), which would store
# two values the splits tell apart as one number.
_INT = re.compile(r'-?[0-9]{1,19}')


def seconds_to_frames(seconds: float, rate: int) -> int:
  """Frames in `seconds` at `rate`, rounded half up after 8 decimals (as
  Lhotse counts samples, so that a supervision's span is the same here)."""
  return int(decimal.Decimal(round(seconds * rate, 8)).quantize(
      0, rounding=decimal.ROUND_HALF_UP))


@dataclasses.dataclass(frozen=True)
class Segment:
  """A time-stamped span of a recording, as a manifest row (or a Lhotse
  supervision) gives it: start and one of end and duration, in seconds."""
  line: int                   # where, for messages
  start: float
  end: Optional[float] = None
  duration: Optional[float] = None
  label: Optional[str] = None   # None: the recording's class
  extras: Tuple[Tuple[str, Union[str, int]], ...] = ()
  channel: Optional[int] = None  # None: --channels decides
  split: Optional[str] = None   # --split_unit segment: its own split

  def frames(self, rate: int) -> Tuple[int, int]:
    """[start, stop) in frames at `rate`."""
    start = seconds_to_frames(self.start, rate)
    if self.end is not None:
      return start, seconds_to_frames(self.end, rate)
    return start, start + seconds_to_frames(self.duration, rate)


@dataclasses.dataclass(frozen=True)
class Entry:
  """What a manifest row says about its recording."""
  line: int                   # where, for messages
  split: Optional[str]        # None: --splits or --split_lists decide
  label: Optional[str]        # None: --label_from decides
  extras: Tuple[Tuple[str, Union[str, int]], ...] = ()
  # With segments: every segment of the recording, in manifest order.
  segments: Tuple[Segment, ...] = ()
  channels: Optional[int] = None  # what the manifest says the file holds
  sample_rate: Optional[int] = None  # (a Lhotse recording), checked
  num_samples: Optional[int] = None  # against the file when probed


def segments_digest(entry: Optional[Entry]) -> Optional[int]:
  """A CRC32C of what the manifest says of a recording's segments (times,
  channels, labels and columns; not the line numbers), None without
  segments: what --append compares to tell a recording given other
  segments since it was added."""
  if entry is None or not entry.segments:
    return None
  said = [[g.start, g.end, g.duration, g.label, g.channel,
           [list(pair) for pair in g.extras]] + ([g.split] if g.split
                                                  else [])
          for g in entry.segments]
  return crc32c.crc32c(json.dumps(said).encode('utf-8'))


@dataclasses.dataclass(frozen=True)
class Manifest:
  entries: Dict[str, Entry]          # by listed path (input_dir joined)
  extra_types: Dict[str, str]        # column: int64 or string
  extra_widths: Dict[str, int]       # column: longest value, in bytes
  text: str                          # --manifest as given


def row_location(input_dir: str, path: str) -> str:
  """A row's path as the listing names files: input_dir joined unless
  absolute or a URI; a local path normalised (a//b.wav, ./a/b.wav and
  a/x/../b.wav are a/b.wav); an absolute path under input_dir (given
  relative, or through a link) by input_dir as given: the listing's one
  name for the file, which --exclude, the split's hash and the counts see."""
  path = path.strip()
  if FileSystems.get_scheme(path):
    return path
  path = posixpath.normpath(path)
  if path.startswith('/'):
    return _as_listed(input_dir, path)
  return naming.join(input_dir, path)


def _as_listed(input_dir: str, path: str) -> str:
  if FileSystems.get_scheme(input_dir):
    return path
  for root in (os.path.abspath(input_dir), os.path.realpath(input_dir)):
    root = root.rstrip('/') + '/'
    if path.startswith(root):
      return naming.join(input_dir, path[len(root):])
  return path


def same_file_key(location: str) -> str:
  """What two rows naming one recording share: the local file a path
  resolves to (symbolic links followed); a URI as it is."""
  if FileSystems.get_scheme(location):
    return location
  return os.path.realpath(location)


class FileKeys:
  """same_file_key of the rows' files, hard links too: a file under two
  real paths (a hard link) has its first row's key."""

  def __init__(self):
    self._first: Dict[object, str] = {}

  def __call__(self, location: str) -> str:
    key = same_file_key(location)
    return self._first.setdefault(_inode(location) or key, key)


def _inode(location: str) -> Optional[tuple]:
  """(device, inode) of a local regular file, or None."""
  if FileSystems.get_scheme(location):
    return None
  try:
    st = os.stat(location)
  except OSError:
    return None
  return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


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
    # Blank cells (a spreadsheet's empty columns) name no column to read.
    twice = sorted({h for h in header if h and header.count(h) > 1})
    if twice:
      raise ConfigError(OPTION, where, f'its header names the columns '
                        f'{twice} twice: which one is meant is not known')
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


def _cell(row, column) -> str:
  """`column=TEXT` of a row, its cell as written, for a message."""
  return f'{column}={row[column].strip()!r}'


def _seconds(row, column, number, where, positive=False) -> float:
  text = row[column].strip()
  try:
    value = float(text)
  except ValueError:
    value = math.nan
  if not math.isfinite(value) or value < 0 or (positive and value == 0):
    raise ConfigError(OPTION, where, f'line {number}: {column}={text!r} is '
                      f'not a number of seconds{" above" if positive else ","}'
                      f'{" 0" if positive else " at least 0"}')
  return value


def _segment(config: PipelineConfig, row, number, where) -> Segment:
  start = _seconds(row, config.manifest_start_column, number, where)
  if config.manifest_end_column:
    end = _seconds(row, config.manifest_end_column, number, where)
    if end <= start:
      # The cells as written: 1.9999999999 would show as 2, after 2.
      raise ConfigError(OPTION, where, f'line {number}: '
                        f'{_cell(row, config.manifest_end_column)} is not '
                        f'after {_cell(row, config.manifest_start_column)}')
    return Segment(number, start, end=end)
  return Segment(number, start, duration=_seconds(
      row, config.manifest_duration_column, number, where, positive=True))


def split_of_value(config: PipelineConfig, value: str) -> str:
  """--split_by: the split of a column's value, by a stable hash of it
  with the fractions of --splits."""
  return splits_lib.split_by_hash(value, config.splits)


def one_per_recording(option, where, firsts, recording, shown, what, value,
                      number):
  """ConfigError unless `value` (of `what`, on line `number` of `where`)
  is the one the recording's first row had. `firsts` keeps that row by
  `recording`, a key every spelling of the recording's path shares (its
  normalised path): keyed by the path as written, `a.wav` and `./a.wav`
  would be two recordings here and one in the dataset, whose segments
  could then go to two splits. `shown`: the recording as this row names
  it."""
  first, line, first_where, first_shown = firsts.setdefault(
      recording, (value, number, where, shown))
  if first != value:
    place = f'line {line}' + (f' of {first_where}' if first_where != where
                              else '')
    if first_shown != shown:
      place += f' (as {first_shown})'
    raise ConfigError(option, where, f'line {number}: {shown} has {what} '
                      f'{value!r} here and {first!r} on {place}; the '
                      'segments of one recording go to one split')


def _second_row(config: PipelineConfig, path: str, number: int,
                listed: str, key: str, place: str, other: str
                ) -> Optional[str]:
  """Why a row naming a file an earlier row (at `place`, as `other`) named
  is refused; None when it may be another segment of its recording. A
  recording has one row, or, with segments, rows naming it by one path
  however spelt: a second name of the file (a link) is listed too, and an
  entry under one name would leave the other without its rows."""
  segments = bool(config.manifest_start_column)
  if not segments:
    both = '' if other == listed else f' (both are {key})'
    return f'{path} is listed twice: {place} and line {number}{both}'
  if other != listed:
    first = patterns.relative_path(other, config.input_dir)
    return (f'line {number}: {path} and {first} ({place}) are one file '
            f'({key}): name the segments of one recording by one path')
  return None


def _read(config: PipelineConfig) -> Manifest:
  entries: Dict[str, Entry] = {}
  seen_at: Dict[str, Tuple[str, str]] = {}
  # The extra columns of each row as written, and by recording the rows
  # of its entry (its segments') in order: a line number alone does not
  # tell apart rows of two manifest files.
  extras_raw: List[Dict[str, str]] = []
  rows_of: Dict[str, List[int]] = {}
  segments = bool(config.manifest_start_column)
  firsts: Dict[str, tuple] = {}
  file_key = FileKeys()
  for file_split, location in config.manifest:
    kind = file_format(location)
    where = location
    columns_needed = [*path_columns(config.manifest_path_column),
                      config.manifest_label_column,
                      config.manifest_split_column,
                      config.manifest_start_column,
                      config.manifest_end_column,
                      config.manifest_duration_column, config.split_by,
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
      key = file_key(listed)
      if key in seen_at:
        refusal = _second_row(config, path, number, listed, key,
                              *seen_at[key])
        if refusal:
          raise ConfigError(OPTION, where, refusal)
      # A recording's rows may spell its path differently (a.wav, ./a.wav,
      # x/../a.wav): one entry, under the path they normalise to.
      seen_at.setdefault(key, (f'{where} line {number}', listed))
      split = file_split or None
      if config.manifest_split_column:
        value = row[config.manifest_split_column].strip()
        split = fold_split(config, value)
        if split is None:
          raise ConfigError(OPTION, where, f'line {number}: '
                            f'{config.manifest_split_column}={value!r} is '
                            'in no split of --fold_splits')
        check_split_name(OPTION, where, split, f'line {number}: ')
      if config.split_by:
        split = split_of_value(config, row[config.split_by].strip())
      label = None
      if config.manifest_label_column:
        label = row[config.manifest_label_column].strip()
      if not segments:
        entries[listed] = Entry(number, split, label)
      else:
        entry = entries.get(listed)
        if config.split_unit != 'segment':  # else each keeps its own
          what, value = ((config.split_by, row[config.split_by].strip())
                         if config.split_by else ('split', split))
          one_per_recording(OPTION, where, firsts, listed, path, what, value,
                            number)
        segment = dataclasses.replace(_segment(config, row, number, where),
                                      label=label)
        if config.split_unit == 'segment':
          segment, split = dataclasses.replace(segment, split=split), None
        entries[listed] = (Entry(number, split, None, (), (segment,))
                           if entry is None else dataclasses.replace(
                               entry, segments=entry.segments + (segment,)))
      if config.manifest_extra_columns:
        rows_of.setdefault(listed, []).append(len(extras_raw))
        extras_raw.append({c: row[c] for c in config.manifest_extra_columns})
  types, widths, values = typed_extras(config.manifest_extra_columns,
                                       extras_raw)
  if config.manifest_extra_columns:
    for listed, entry in list(entries.items()):
      own = [values[i] for i in rows_of[listed]]
      entries[listed] = (dataclasses.replace(entry, segments=tuple(
          dataclasses.replace(g, extras=extras)
          for g, extras in zip(entry.segments, own))) if entry.segments
                         else dataclasses.replace(entry, extras=own[0]))
  if config.split_unit == 'segment':
    check_split_overlap(config, entries, OPTION, manifest_text(
        config.manifest))
  return Manifest(entries, types, widths, manifest_text(config.manifest))


def split_overlaps(segments) -> Iterator[Tuple[Segment, Segment, float]]:
  """(a, b, seconds) for each two segments of one recording in different
  splits whose times overlap (whatever their channels: one room's audio
  reaches every microphone)."""
  spans = sorted(((g.start, _end(g), g) for g in segments),
                 key=lambda t: (t[0], t[1]))
  for i, (start, end, a) in enumerate(spans):
    for start_b, end_b, b in spans[i + 1:]:
      if start_b >= end:
        break
      if a.split != b.split:
        yield a, b, min(end, end_b) - start_b


def _end(segment: Segment) -> float:
  return (segment.end if segment.end is not None
          else segment.start + segment.duration)


def check_split_overlap(config: PipelineConfig, entries: Dict[str, Entry],
                        option: str, where: str) -> None:
  """--split_unit segment: ConfigError naming the first two segments of
  one recording in different splits that overlap in time, unless
  --allow_split_overlap."""
  if config.allow_split_overlap:
    return
  for listed, entry in entries.items():
    for a, b, seconds in split_overlaps(entry.segments):
      path = patterns.relative_path(listed, config.input_dir)
      raise ConfigError(option, where, f'{path}: the segment of line '
                        f'{a.line} ({a.split}) and that of line {b.line} '
                        f'({b.split}) overlap by {seconds:.3f} s, so that '
                        'audio would be in both splits; give '
                        '--allow_split_overlap to keep them, reported in '
                        'metadata.json')


def typed_extras(columns, rows: List[Dict[str, str]]):
  """({column: int64 or string}, {column: longest value in bytes},
  [((column, typed value), ...) per row]) of the extra columns' raw
  values."""
  types = {c: _column_type([r[c] for r in rows]) for c in columns}
  widths = {c: 1 for c in columns}
  values = []
  for raw in rows:
    row = []
    for column in columns:
      value = raw[column]
      if types[column] == INT64:
        row.append((column, int(value)))
      else:
        row.append((column, value))
        widths[column] = max(widths[column], len(value.encode('utf-8')))
    values.append(tuple(row))
  return types, widths, values


def _column_type(values: List[str]) -> str:
  """int64 when every value (and there is one) is an int64, else string."""
  if values and all(_INT.fullmatch(v.strip()) and -2**63 <= int(v) < 2**63
                    for v in values):
    return INT64
  return STRING


def manifest_text(manifest) -> str:
  return ','.join(f'{s}={f}' if s else f for s, f in manifest)


def read(config: PipelineConfig) -> Manifest:
  """The --manifest files of a run, read once per process (the launcher,
  to check them and learn the extra columns' types; the listing task, to
  deal their rows), and again once their files change (a process that
  runs again after a manifest was edited, as an --append does, reads the
  new rows). Lhotse's manifests are transforms/inputs/lhotse_manifest's; the
  listing chooses (listing.read_manifest)."""
  return _read_once(config, file_versions(config))


def has_manifest(config: PipelineConfig) -> bool:
  """The run's recordings come from a manifest (--manifest or Lhotse's)."""
  return bool(config.manifest or config.lhotse_recordings)


@functools.lru_cache(maxsize=2)
def _read_once(config: PipelineConfig, versions) -> Manifest:
  del versions  # part of the cache key only
  return _read(config)


def file_versions(config: PipelineConfig) -> tuple:
  """(size, modification time) of each manifest file; None for one that
  cannot be looked at (reading it says why)."""
  versions = []
  locations = [location for _, location in config.manifest] + [
      location for location in (config.lhotse_recordings,
                                config.lhotse_supervisions) if location]
  for location in locations:
    try:
      meta = filesystem.metadata(location)
      versions.append((meta.size_in_bytes, meta.last_updated_in_seconds))
    except Exception:  # pylint: disable=broad-except
      versions.append(None)
  return tuple(versions)
