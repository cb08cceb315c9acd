"""The options of a manifest that lists the recordings (CSV, TSV or JSON
Lines, or Lhotse's recordings and supervisions): its columns, the
time-stamped segments it may give, and the splits its rows or folds
decide."""

import collections
import dataclasses
import os
import re
from typing import Mapping, Optional, Tuple

from pipeline.config.fields import check_choices, opt, split_list
from pipeline.config.splits import check_split_name
from pipeline.contract.errors import ConfigError
from pipeline.contract.schema import BASE_KEYS, NUM_FRAMES_KEY, NUM_SAMPLES_KEY
from transforms.features import registry

# The supervision fields stored when --manifest_extra_columns names none.
LHOTSE_DEFAULT_FIELDS = ('id', 'text', 'speaker', 'language')
SPLIT_UNITS = ('recording', 'segment')


@dataclasses.dataclass(frozen=True, kw_only=True)
class ManifestOptions:
  manifest: Tuple[Tuple[str, str], ...] = opt(
      'read the recordings from a manifest instead of labels and splits '
      'from paths: a CSV, TSV or JSON Lines file (by its extension) with '
      'one row per recording, its path relative to input_dir (or absolute, '
      'or a URI); comma-separated files, each optionally SPLIT=FILE to put '
      'all of its rows in that split (Common Voice: '
      'train=train.tsv,validation=dev.tsv,test=test.tsv). Files under '
      'input_dir without a row, and rows whose file is missing, are '
      'rejected with the reason (default: none)', default=())
  manifest_path_column: str = opt(
      "the manifest's column holding each recording's path, or a template "
      'of columns, e.g. "fold{fold}/{slice_file_name}" (UrbanSound8K)',
      default='path')
  manifest_audio_extension: Optional[str] = opt(
      'replace the extension of every manifest path with this one, e.g. wav '
      'when the .mp3 clips a manifest names were converted to WAV beside '
      'themselves', default=None)
  manifest_label_column: Optional[str] = opt(
      "the manifest's column holding the class (instead of --label_from)",
      default=None)
  manifest_split_column: Optional[str] = opt(
      "the manifest's column holding the split, or the fold with "
      '--fold_splits (instead of --splits)', default=None)
  manifest_extra_columns: Tuple[str, ...] = opt(
      'comma-separated manifest columns stored in every example of their '
      'recording: int64 when every value is an integer, else a string '
      '(e.g. sentence,client_id)', default=())
  manifest_start_column: Optional[str] = opt(
      "the manifest's column holding where a segment starts, in seconds: "
      'each row is then one time-stamped segment of its recording (rows '
      'may share a recording, and segments may overlap), with its own '
      'label and extra columns; give --manifest_end_column or '
      '--manifest_duration_column too', default=None)
  manifest_end_column: Optional[str] = opt(
      "the manifest's column holding where a segment ends, in seconds",
      default=None)
  manifest_duration_column: Optional[str] = opt(
      "the manifest's column holding a segment's duration, in seconds",
      default=None)
  split_by: Optional[str] = opt(
      'assign splits by a stable hash of this manifest column (or Lhotse '
      'supervision field) instead of the path, with the fractions of '
      '--splits, so that no value (a speaker, e.g. client_id) is in two '
      'splits; the segments of one recording must share their value',
      default=None)
  lhotse_recordings: Optional[str] = opt(
      "read the recordings from a Lhotse RecordingSet manifest (the "
      "recipes' recordings.jsonl.gz): each recording's source file (a path "
      'relative to input_dir, or absolute), sampling rate and channels, '
      'instead of --manifest (default: none)', default=None)
  lhotse_supervisions: Optional[str] = opt(
      "the Lhotse SupervisionSet of --lhotse_recordings (supervisions."
      "jsonl.gz): each supervision is a segment of its recording's channel "
      'with its start, duration and fields; --manifest_extra_columns picks '
      'the fields stored (id, recording_id, text, speaker, language, '
      'gender, or a custom key; default id,text,speaker,language) and '
      '--manifest_label_column may name one as the class (default: none)',
      default=None)
  split_unit: str = opt(
      'what one split holds whole: recording (every segment of a recording '
      'goes to one split, so no audio of it is in two) or segment (the '
      'segments of one recording may go to different splits by --split_by '
      'or the manifest\'s split, for speakers of one meeting: chosen '
      'knowingly, as a recording\'s room and channel are then in two '
      'splits; metadata.json reports what the splits share)',
      default='recording', choices=SPLIT_UNITS)
  allow_split_overlap: bool = opt(
      'with --split_unit segment, let segments of two splits overlap in '
      'time (the overlapping audio is then in both, and reported); refused '
      'without it', default=False)
  fold_splits: Tuple[Tuple[str, Tuple[str, ...]], ...] = opt(
      'splits made of the folds in --manifest_split_column, e.g. '
      '"train=1,2,3;validation=4;test=5" (default: none)', default=())

  @property
  def has_segments(self) -> bool:
    """The manifest gives time-stamped segments of its recordings."""
    return bool(self.manifest_start_column or self.lhotse_supervisions)

  def _segments_option(self) -> str:
    return (f'--manifest_start_column={self.manifest_start_column}'
            if self.manifest_start_column else
            f'--lhotse_supervisions={self.lhotse_supervisions}')

  def _normalise_manifest(self):
    if isinstance(self.manifest, str):
      object.__setattr__(self, 'manifest', _parse_manifest(self.manifest))
    object.__setattr__(self, 'manifest',
                       tuple((s, f) for s, f in self.manifest))
    if isinstance(self.manifest_extra_columns, str):
      object.__setattr__(self, 'manifest_extra_columns',
                         split_list(self.manifest_extra_columns))
    object.__setattr__(self, 'manifest_extra_columns',
                       tuple(self.manifest_extra_columns))
    if self.lhotse_supervisions and not self.manifest_extra_columns:
      object.__setattr__(self, 'manifest_extra_columns',
                         LHOTSE_DEFAULT_FIELDS)
    if isinstance(self.fold_splits, str):
      object.__setattr__(self, 'fold_splits',
                         _parse_fold_splits(self.fold_splits))
    object.__setattr__(self, 'fold_splits', tuple(
        (n, tuple(folds)) for n, folds in self.fold_splits))

  def _validate_manifest(self, written: Mapping[str, str]):
    self._validate_segments()
    text = written.get('manifest', ','.join(f'{s}={f}' if s else f
                                            for s, f in self.manifest))
    if not self.manifest:
      names = ['manifest_split_column', 'fold_splits',
               'manifest_audio_extension']
      if not self.lhotse_supervisions:
        names[:0] = ['manifest_label_column', 'manifest_extra_columns']
      for name in names:
        if getattr(self, name):
          raise ConfigError(name, getattr(self, name), 'needs --manifest' + (
              ' or --lhotse_supervisions' if name in (
                  'manifest_label_column', 'manifest_extra_columns') else ''))
      if self.lhotse_supervisions:
        self._check_extra_columns(written)
      return
    file_splits = [s for s, _ in self.manifest if s]
    if file_splits and len(file_splits) != len(self.manifest):
      raise ConfigError('manifest', text, 'give every file a split '
                        '(SPLIT=FILE) or none')
    for name in file_splits:
      check_split_name('manifest', text, name)
    if file_splits and self.manifest_split_column:
      raise ConfigError('manifest_split_column', self.manifest_split_column,
                        'give it or SPLIT=FILE in --manifest, not both')
    folds_text = written.get('fold_splits',
                             _fold_splits_text(self.fold_splits))
    if self.fold_splits and not self.manifest_split_column:
      raise ConfigError('fold_splits', folds_text,
                        'needs --manifest_split_column (the fold column)')
    if file_splits or self.manifest_split_column:
      if (self.split_from != 'hash' or self.splits != (('train', 1.0),) or
          self.split_lists):
        raise ConfigError('manifest', text, 'the manifest gives the splits: '
                          'leave out --splits, --split_from and '
                          '--split_lists')
    names = [n for n, _ in self.fold_splits]
    if len(set(names)) != len(names):
      raise ConfigError('fold_splits', folds_text, 'names a split twice')
    all_folds = [f for _, folds in self.fold_splits for f in folds]
    if len(set(all_folds)) != len(all_folds):
      raise ConfigError('fold_splits', folds_text, 'puts a fold in two '
                        'splits')
    for name in names:
      check_split_name('fold_splits', folds_text, name)
    if (self.manifest_audio_extension is not None and not re.fullmatch(
        r'[A-Za-z0-9]+', self.manifest_audio_extension)):
      raise ConfigError('manifest_audio_extension',
                        self.manifest_audio_extension, 'give the extension '
                        'alone, e.g. wav')
    if (self.manifest_audio_extension is not None and
        self.manifest_audio_extension.lower() not in self.audio_formats):
      formats = written.get('audio_formats', ','.join(self.audio_formats))
      raise ConfigError('manifest_audio_extension',
                        self.manifest_audio_extension, 'is not one of '
                        f'--audio_formats={formats}, so no listed file '
                        'would match a row')
    if '{' in self.manifest_path_column:
      try:
        self.manifest_path_column.format_map(collections.defaultdict(str))
      except (ValueError, IndexError) as e:
        raise ConfigError('manifest_path_column', self.manifest_path_column,
                          f'is not a template of {{column}} names ({e})')
    self._check_extra_columns(written)

  def _validate_segments(self):
    check_choices(self, ManifestOptions)
    if self.lhotse_supervisions and not self.lhotse_recordings:
      raise ConfigError('lhotse_supervisions', self.lhotse_supervisions,
                        'needs --lhotse_recordings (the recordings its '
                        'supervisions belong to)')
    if self.lhotse_recordings:
      if self.manifest:
        raise ConfigError('lhotse_recordings', self.lhotse_recordings,
                          'give --lhotse_recordings or --manifest, not both')
      for name in ('manifest_split_column', 'fold_splits',
                   'manifest_audio_extension', 'manifest_start_column',
                   'manifest_end_column', 'manifest_duration_column'):
        if getattr(self, name):
          raise ConfigError(name, getattr(self, name), 'is a --manifest '
                            'option; a Lhotse manifest gives its own '
                            'paths and times')
      if self.manifest_path_column != 'path':
        raise ConfigError('manifest_path_column', self.manifest_path_column,
                          'is a --manifest option; a Lhotse recording '
                          'names its own source')
    if not self.manifest:
      for name in ('manifest_start_column', 'manifest_end_column',
                   'manifest_duration_column'):
        if getattr(self, name):
          raise ConfigError(name, getattr(self, name), 'needs --manifest')
    columns = [getattr(self, name) for name in (
        'manifest_end_column', 'manifest_duration_column')]
    if self.manifest_start_column:
      if all(columns) or not any(columns):
        raise ConfigError('manifest_start_column',
                          self.manifest_start_column, 'needs one of '
                          '--manifest_end_column and '
                          '--manifest_duration_column')
    elif any(columns):
      name = ('manifest_end_column' if columns[0]
              else 'manifest_duration_column')
      raise ConfigError(name, getattr(self, name),
                        'needs --manifest_start_column')
    if self.split_by is not None:
      if not self.manifest and not self.lhotse_recordings:
        raise ConfigError('split_by', self.split_by, 'needs --manifest or '
                          '--lhotse_recordings (it names a column)')
      if (self.manifest_split_column or any(s for s, _ in self.manifest) or
          self.split_lists or self.split_from != 'hash'):
        raise ConfigError('split_by', self.split_by, 'assigns the splits '
                          'by --splits fractions: leave out '
                          '--manifest_split_column, SPLIT=FILE manifests, '
                          '--split_lists and --split_from')
      if not self.split_by.strip():
        raise ConfigError('split_by', self.split_by, 'name a column')
    if self.split_unit == 'segment':
      if not self.has_segments:
        raise ConfigError('split_unit', self.split_unit, 'needs segments '
                          '(--manifest_start_column or '
                          '--lhotse_supervisions)')
      if not (self.split_by or self.manifest_split_column or
              any(s for s, _ in self.manifest)):
        raise ConfigError('split_unit', self.split_unit, 'needs a split '
                          'per segment: --split_by, --manifest_split_column '
                          'or SPLIT=FILE manifests (a hash of the path would '
                          'put every segment of a recording in one split)')
      if self.silence_from:
        raise ConfigError('split_unit', self.split_unit, 'with '
                          '--silence_from: a silence recording\'s windows '
                          'are shared out whole (--silence_windows); leave '
                          'out one of the two')
    elif self.allow_split_overlap:
      raise ConfigError('allow_split_overlap', True, 'needs --split_unit '
                        'segment (a recording is otherwise in one split)')

  def _check_extra_columns(self, written: Mapping[str, str]):
    reserved = set(BASE_KEYS) | set(self.features) | (
        {NUM_SAMPLES_KEY, NUM_FRAMES_KEY} | set(registry.length_keys(self))
        if self.variable_length else set())
    for column in self.manifest_extra_columns:
      if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', column):
        raise ConfigError('manifest_extra_columns', column, 'a feature name '
                          'uses letters, digits and "_" only')
      if column in reserved:
        raise ConfigError('manifest_extra_columns', column, 'is a key every '
                          'example already has')
    if len(set(self.manifest_extra_columns)) != len(
        self.manifest_extra_columns):
      raise ConfigError('manifest_extra_columns', written.get(
          'manifest_extra_columns', ','.join(self.manifest_extra_columns)),
                        'lists a column twice')


def _parse_manifest(text: str) -> Tuple[Tuple[str, str], ...]:
  """[(split or '', file)]; a relative local file is made absolute here,
  so that the job's listing task finds it whatever its directory."""
  pairs = []
  for part in split_list(text):
    name, sep, path = part.partition('=')
    if sep and (not name.strip() or not path.strip()):
      raise ConfigError('manifest', text, f'{part!r} is not FILE or '
                        'SPLIT=FILE')
    name, path = (name.strip(), path.strip()) if sep else ('', part)
    if not re.match(r'[A-Za-z][A-Za-z0-9+.-]*://', path):
      path = os.path.abspath(path)
    pairs.append((name, path))
  return tuple(pairs)


def _parse_fold_splits(text: str) -> Tuple[Tuple[str, Tuple[str, ...]], ...]:
  pairs = []
  for part in (p.strip() for p in text.split(';') if p.strip()):
    name, sep, folds = part.partition('=')
    if not sep or not name.strip() or not split_list(folds):
      raise ConfigError('fold_splits', text, f'{part!r} is not '
                        'SPLIT=FOLD,FOLD,...')
    pairs.append((name.strip(), split_list(folds)))
  return tuple(pairs)


def _fold_splits_text(fold_splits) -> str:
  return ';'.join(f'{n}={",".join(f)}' for n, f in fold_splits)
