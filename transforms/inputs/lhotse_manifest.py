"""--lhotse_recordings / --lhotse_supervisions: a corpus as Lhotse's recipes
describe it, read as a manifest (manifest.Manifest) without Lhotse itself.

A RecordingSet file (recordings.jsonl or .jsonl.gz) holds one recording per
line: its id, its sources (here one file holding every channel), its
sampling rate, sample count and channel ids. A SupervisionSet file holds
the time-stamped supervisions of those recordings: id, recording_id,
start and duration in seconds, channel, and text, speaker, language,
gender and custom fields. Each recording becomes an Entry, each
supervision a Segment of it; what the pipeline cannot reproduce (several
sources per recording, transforms such as speed perturbation, audio held
in memory) is refused before anything runs, naming the line.
"""

import dataclasses
import functools
import math
from typing import Dict, List, Optional, Tuple

from apache_beam.io.filesystems import FileSystems

from pipeline.config import ConfigError, PipelineConfig
from pipeline.contract import json_lines
from transforms.inputs import manifest as manifest_lib

RECORDINGS = 'lhotse_recordings'
SUPERVISIONS = 'lhotse_supervisions'
# A supervision's own fields that --manifest_extra_columns may name; any
# other name is looked up in its `custom` fields.
FIELDS = ('id', 'recording_id', 'text', 'speaker', 'language', 'gender')


def _lines(option: str, location: str):
  try:
    with FileSystems.open(location) as f:  # .gz is decompressed
      text = f.read().decode('utf-8-sig')
  except (OSError, IOError, UnicodeDecodeError, EOFError) as e:
    raise ConfigError(option, location, f'cannot read it ({e})') from e
  try:
    for number, value in json_lines.values(text):
      if not isinstance(value, dict):
        raise ConfigError(option, location, f'line {number} is not a JSON '
                          'object')
      yield number, value
  except json_lines.NotJson as e:
    raise ConfigError(option, location, str(e)) from e


def _need(option, location, number, value, key, kind):
  found = value.get(key)
  if not isinstance(found, kind) or isinstance(found, bool):
    raise ConfigError(option, location, f'line {number}: {key!r} is '
                      f'{found!r}, not {kind.__name__}')
  return found


def _recording(config: PipelineConfig, number: int, value: dict):
  """(listed path, Entry, channel ids) of one recording line."""
  where = config.lhotse_recordings
  rid = _need(RECORDINGS, where, number, value, 'id', str)
  if value.get('transforms'):
    raise ConfigError(RECORDINGS, where, f'line {number}: recording {rid!r} '
                      'has transforms (e.g. speed perturbation), which are '
                      'not reproduced; write the manifest before them')
  sources = value.get('sources')
  if not isinstance(sources, list) or len(sources) != 1:
    raise ConfigError(RECORDINGS, where, f'line {number}: recording {rid!r} '
                      f'has {len(sources) if isinstance(sources, list) else 0}'
                      ' sources; one file holding every channel is read')
  source = sources[0]
  if not isinstance(source, dict) or source.get('type') not in ('file',
                                                                 'url'):
    raise ConfigError(RECORDINGS, where, f'line {number}: recording {rid!r} '
                      f'has a source of type {source.get("type")!r} '
                      "(file or url are read)")
  path = source.get('source')
  if not isinstance(path, str) or not path.strip():
    raise ConfigError(RECORDINGS, where, f'line {number}: recording {rid!r} '
                      'names no source file')
  rate = _need(RECORDINGS, where, number, value, 'sampling_rate', int)
  samples = _need(RECORDINGS, where, number, value, 'num_samples', int)
  channel_ids = value.get('channel_ids', source.get('channels'))
  if (not isinstance(channel_ids, list) or not channel_ids or
      channel_ids != list(range(len(channel_ids)))):
    raise ConfigError(RECORDINGS, where, f'line {number}: recording {rid!r} '
                      f'has channel_ids {channel_ids!r}; 0..n-1 of its one '
                      'file are read')
  entry = manifest_lib.Entry(number, None, None, channels=len(channel_ids),
                             sample_rate=rate, num_samples=samples)
  return rid, manifest_lib.row_location(config.input_dir, path), entry


def _field(value: dict, name: str):
  if name in FIELDS:
    return value.get(name)
  custom = value.get('custom')
  return custom.get(name) if isinstance(custom, dict) else None


def _channel(where, number, sid, channel, channels) -> Optional[int]:
  """A supervision's channel: None when it spans every channel of its
  recording (--channels mixes them), else the one it names."""
  if isinstance(channel, list):
    if sorted(channel) == list(range(channels)):
      return None
    if len(channel) == 1:
      channel = channel[0]
  if channel is None and channels == 1:
    return None
  if (not isinstance(channel, int) or isinstance(channel, bool) or
      not 0 <= channel < channels):
    raise ConfigError(SUPERVISIONS, where, f'line {number}: supervision '
                      f'{sid!r} is on channel {channel!r} of a recording of '
                      f'{channels}; one channel, or all, is read')
  return None if channels == 1 else channel


def _seconds(where, number, value, key, positive=False) -> float:
  found = value.get(key)
  if (isinstance(found, bool) or not isinstance(found, (int, float)) or
      not math.isfinite(found) or found < 0 or (positive and found == 0)):
    raise ConfigError(SUPERVISIONS, where, f'line {number}: {key}={found!r} '
                      'is not a number of seconds' +
                      (' above 0' if positive else ', at least 0'))
  return float(found)


def read(config: PipelineConfig) -> manifest_lib.Manifest:
  """The run's Lhotse manifests as a manifest_lib.Manifest, read once per
  process and again once their files change (as manifest_lib.read)."""
  return _read_once(config, manifest_lib.file_versions(config))


@functools.lru_cache(maxsize=2)
def _read_once(config: PipelineConfig, versions) -> manifest_lib.Manifest:
  del versions  # part of the cache key only
  return _read(config)


def _read(config: PipelineConfig) -> manifest_lib.Manifest:
  """The Manifest of a Lhotse RecordingSet and, when given, its
  SupervisionSet; ConfigError naming the file and line of anything that
  cannot be read as Lhotse means it."""
  by_id: Dict[str, Tuple[str, manifest_lib.Entry]] = {}
  files: Dict[str, str] = {}
  file_key = manifest_lib.FileKeys()
  for number, value in _lines(RECORDINGS, config.lhotse_recordings):
    rid, listed, entry = _recording(config, number, value)
    if rid in by_id:
      raise ConfigError(RECORDINGS, config.lhotse_recordings, f'line '
                        f'{number}: recording id {rid!r} again (line '
                        f'{by_id[rid][1].line})')
    key = file_key(listed)
    if key in files:
      raise ConfigError(RECORDINGS, config.lhotse_recordings, f'line '
                        f'{number}: {listed} is the source of recordings '
                        f'{files[key]!r} and {rid!r}')
    files[key] = rid
    by_id[rid] = (listed, entry)
  text = config.lhotse_recordings
  if not config.lhotse_supervisions:
    return manifest_lib.Manifest(dict(by_id.values()), {}, {}, text)
  where = config.lhotse_supervisions
  segments: Dict[str, List[manifest_lib.Segment]] = {}
  splits: Dict[str, str] = {}
  values: Dict[str, tuple] = {}
  raw: List[Dict[str, str]] = []
  present = set()
  for number, value in _lines(SUPERVISIONS, where):
    sid = value.get('id')
    rid = value.get('recording_id')
    if rid not in by_id:
      raise ConfigError(SUPERVISIONS, where, f'line {number}: supervision '
                        f'{sid!r} is of recording {rid!r}, which '
                        f'{config.lhotse_recordings} does not hold')
    entry = by_id[rid][1]
    start = _seconds(where, number, value, 'start')
    duration = _seconds(where, number, value, 'duration', positive=True)
    channel = _channel(where, number, sid, value.get('channel'),
                       entry.channels)
    label = split = None
    if config.manifest_label_column:
      found = _field(value, config.manifest_label_column)
      label = '' if found is None else str(found)
    if config.split_by:
      found = _field(value, config.split_by)
      if found is None:
        raise ConfigError(SUPERVISIONS, where, f'line {number}: supervision '
                          f'{sid!r} has no {config.split_by!r} '
                          '(--split_by)')
      split = manifest_lib.split_of_value(config, str(found))
      if config.split_unit != 'segment':
        manifest_lib.one_per_recording(SUPERVISIONS, where, values, rid,
                                       f'recording {rid!r}',
                                       config.split_by, str(found), number)
        splits[rid] = split
    row = {}
    for name in config.manifest_extra_columns:
      found = _field(value, name)
      if found is not None:
        present.add(name)
      row[name] = '' if found is None else str(found)
    raw.append(row)
    segments.setdefault(rid, []).append(manifest_lib.Segment(
        number, start, duration=duration, label=label, channel=channel,
        split=split if config.split_unit == 'segment' else None))
  missing = [c for c in config.manifest_extra_columns
             if c not in present and c not in FIELDS]
  if missing and raw:
    raise ConfigError('manifest_extra_columns',
                      ','.join(config.manifest_extra_columns),
                      f'{missing} is no field of any supervision in {where} '
                      f'(its own fields are {", ".join(FIELDS)}; others are '
                      'looked up in custom)')
  types, widths, values = manifest_lib.typed_extras(
      config.manifest_extra_columns, raw)
  values = iter(values)
  entries = {}
  for rid, (listed, entry) in by_id.items():
    found = segments.get(rid, [])
    entries[listed] = dataclasses.replace(
        entry, split=splits.get(rid), segments=tuple(found))
  # Extras in supervision order, which `raw` kept.
  order = sorted(((g.line, rid) for rid, gs in segments.items()
                  for g in gs))
  extras_by_line = {line: next(values) for line, _ in order}
  for listed, entry in entries.items():
    entries[listed] = dataclasses.replace(entry, segments=tuple(
        dataclasses.replace(g, extras=extras_by_line[g.line])
        for g in entry.segments))
  if config.split_unit == 'segment':
    manifest_lib.check_split_overlap(config, entries, SUPERVISIONS, where)
  return manifest_lib.Manifest(entries, types, widths,
                               f'{text},{where}')
