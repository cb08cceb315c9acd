"""The pipeline's configuration: one frozen dataclass, validated on creation.

The command line is generated from the fields below (name, type, default and
help live in one place), and every invalid value fails here, before any
pipeline is built, with a message naming the option and the value.
"""

import argparse
import collections
import fnmatch
import json
import os
import dataclasses
import re
from typing import Mapping, Optional, Sequence, Tuple

from pipeline.contract import naming
from pipeline.contract.errors import ConfigError  # noqa: F401  (re-exported)
from pipeline.contract.schema import BASE_KEYS, NUM_FRAMES_KEY, NUM_SAMPLES_KEY
from transforms.features import registry

LABEL_MODES = ('subdir', 'suffix', 'none')
CHANNEL_POLICIES = ('mean', 'first')
COMPRESSIONS = ('none', 'gzip')
SINKS = ('shards', 'write_to_tfrecord')
SPLIT_SOURCES = ('hash', 'subdir')
EXAMPLE_UNITS = ('window', 'file', 'segment')
# The units whose examples differ in length (a recording's, a segment's).
VARIABLE_UNITS = ('file', 'segment')
# What --example_unit file and segment leave out: the window options (and
# the features of whole windows, registry.Feature.window_only).
WINDOW_ONLY_OPTIONS = ('win_len', 'hop_len', 'pad', 'max_windows_per_signal')
# --example_unit file holds a whole recording, and its features, in memory
# at once: 60 s of 48 kHz audio is 23 MB as float64 and its 257-bin
# spectrogram 29 MB; the cap can be raised up to MAX_FILE_SECONDS.
DEFAULT_MAX_SECONDS = 60.0
# The supervision fields stored when --manifest_extra_columns names none.
LHOTSE_DEFAULT_FIELDS = ('id', 'text', 'speaker', 'language')
MAX_FILE_SECONDS = 600.0
# File extensions read, of what libsndfile decodes. Lossy files are
# decoded whole (transforms/inputs/audio_io.WHOLE_DECODE_SUBTYPES).
AUDIO_FORMATS = ('wav', 'flac', 'opus', 'ogg', 'mp3', 'aiff', 'aif')
# With --split_lists, the split of every file no list names.
REST_SPLIT = 'train'
DEFAULT_SHARD_BYTES = 150 * 2**20  # TFRecord advice: shards of 100-200 MB
# Upper bounds, past which a value is a typo rather than a choice. A shard
# task holds 32 windows as float64: 2**22 samples (95 s at 44.1 kHz) make
# 1 GB; --win_len 99999999999 used to try to allocate 745 GiB.
MAX_WIN_LEN = 2**22
MAX_SAMPLE_RATE = 10**7       # 10 MHz: ultrasound, not a typo of 16000
MAX_SHARDS = 10**6
MAX_SHARD_BYTES = 2**40
MAX_COUNT = 2**62             # window and example counts, seeds
# --label_map's key for every class the map does not name.
OTHER_CLASSES = '*'
SILENCE_LABEL = '_silence_'   # --silence_label's default
GLOB_CHARS = '*?['


def _opt(help_text, **kw):
  return dataclasses.field(metadata={'help': help_text, **kw}, **{
      k: v for k, v in kw.items() if k in ('default', 'default_factory')})


def _with_feature_options(cls):
  """Adds a field for every option of the built-in features (each declared
  by its feature, transforms/features/), after `feature_options`: the flat
  names `PipelineConfig(n_fft=1024)`, the flags and metadata.json use."""
  annotations = {}
  for name, kind in cls.__annotations__.items():
    annotations[name] = kind
    if name != 'feature_options':
      continue
    for option in registry.options(builtin=True):
      annotations[option.name] = (Optional[option.type] if option.optional
                                  else option.type)
      setattr(cls, option.name, _opt(
          option.help, default=option.default, feature_option=option,
          **({'choices': option.choices} if option.choices else {})))
  cls.__annotations__ = annotations
  return cls


@dataclasses.dataclass(frozen=True)
@_with_feature_options
class PipelineConfig:
  input_dir: str = _opt('folder (or URI) searched recursively for audio '
                        'files (--audio_formats)', required=True)
  output_dir: str = _opt('folder (or URI) the dataset is written to',
                         required=True)
  audio_formats: Tuple[str, ...] = _opt(
      'comma-separated extensions of the files read (any case), from '
      + ','.join(AUDIO_FORMATS) + '; lossy files (MP3, Vorbis, Opus) are '
      'decoded whole, so each must decode to at most 256 MiB (70 min of '
      '16 kHz mono)', default=('wav',))
  exclude: Tuple[str, ...] = _opt(
      'leave out the files whose path relative to input_dir matches this '
      'glob (fnmatch: * and ? also match "/", so _background_noise_/* '
      'takes the whole folder); repeatable or comma-separated. Excluded '
      'files are not read but counted (counts.files_excluded) and listed in '
      'rejects.jsonl; a pattern that matches no file stops the run '
      '(default: none)', default=(), repeatable=True)
  dataset_name: str = _opt('name used in shard file names', default='wavbeam')
  label_from: str = _opt(
      'where the class comes from: subdir (parent folder name), suffix (text '
      'after the last "_" of the file stem) or none', default='subdir',
      choices=LABEL_MODES)
  label_map: Tuple[Tuple[str, str], ...] = _opt(
      'rename classes: a JSON file mapping class to class, or a '
      'comma-separated list of CLASS=NEW (a bare CLASS keeps its name), '
      'where *=NEW renames every class the map does not name, e.g. '
      'yes,no,*=_unknown_; applied wherever a label is made (targets, '
      'classes, per-class counts, TFDS labels). Naming a class no file has '
      'stops the run (default: none)', default=())
  silence_from: Tuple[str, ...] = _opt(
      'files whose path relative to input_dir matches this glob (as '
      '--exclude) are long recordings whose windows (under --example_unit '
      'file, whole recordings) become examples of --silence_label, '
      'whatever their folder; repeatable or '
      'comma-separated. A file also matched by --exclude is excluded '
      '(default: none)', default=(), repeatable=True)
  silence_label: str = _opt('the class of the --silence_from examples',
                            default=SILENCE_LABEL)
  silence_windows: Optional[int] = _opt(
      'keep at most this many --silence_from windows in all, shared as '
      'evenly as their lengths allow between the recordings, each giving '
      'its first ones (default: every window at --hop_len)', default=None)
  win_len: int = _opt('window length in samples', default=32768)
  hop_len: Optional[int] = _opt(
      'samples between window starts (default: win_len)', default=None)
  pad: bool = _opt('zero-pad the last partial window instead of dropping it',
                   default=False)
  max_windows_per_signal: Optional[int] = _opt(
      'keep at most this many windows of each file (of each segment, where '
      'a manifest gives segments; default: all)',
      default=None)
  example_unit: str = _opt(
      'what one example is: window (a --win_len window of a recording, or '
      'of each of its segments, cut every --hop_len), file (a whole '
      'recording after channel mixing and resampling) or segment (one '
      'time-stamped span of a recording, from --manifest_start_column or '
      '--lhotse_supervisions); file and segment store variable-length '
      'arrays with their length, and --win_len, --hop_len, --pad, '
      '--max_windows_per_signal and the fft feature do not apply to them',
      default='window', choices=EXAMPLE_UNITS)
  max_seconds: float = _opt(
      f'--example_unit file or segment: reject (rejects.jsonl) recordings '
      f'or segments longer than this, at most {MAX_FILE_SECONDS:g}; an '
      'example and its features are held in memory whole',
      default=DEFAULT_MAX_SECONDS)
  min_seconds: float = _opt(
      '--example_unit file or segment: reject (rejects.jsonl) recordings or '
      'segments shorter than this', default=0.0)
  num_elems: Optional[int] = _opt(
      'stop after this many examples, taken in file order; not with '
      '--append (default: all)',
      default=None)
  channels: str = _opt('multi-channel files: mean (average to mono) or first',
                       default='mean', choices=CHANNEL_POLICIES)
  sample_rate: Optional[int] = _opt(
      'resample every file to this rate; by default the dataset keeps the '
      "corpus's most common rate and rejects files at other rates",
      default=None)
  features: Tuple[str, ...] = _opt(
      'comma-separated features to compute, from the registered ones ('
      + ', '.join(registry.BUILTINS) + ', and those of --feature_module)',
      default=('signal', 'spectrogram'))
  feature_module: Tuple[str, ...] = _opt(
      'comma-separated Python modules to import first, whose features '
      '(transforms/features/registry.py) --features may then name, with '
      'their options as flags; importable wherever the job runs '
      '(default: none)', default=())
  feature_options: Tuple[Tuple[str, object], ...] = _opt(
      'the options of the --feature_module features, given as their own '
      'flags (default: their defaults)', default=(), internal=True)
  splits: Tuple[Tuple[str, float], ...] = _opt(
      'split names and fractions, e.g. train=0.8,validation=0.1,test=0.1; '
      'a file goes to one split by a stable hash of its path relative to '
      'input_dir', default=(('train', 1.0),))
  split_from: str = _opt(
      'hash (assign files by --splits) or subdir (the top-level folder under '
      'input_dir names the split: DIR/train/..., DIR/test/...)',
      default='hash', choices=SPLIT_SOURCES)
  split_lists: Tuple[Tuple[str, str], ...] = _opt(
      'files named in list files go to that split and all others to train, '
      'as Speech Commands ships its official splits: e.g. '
      'validation=validation_list.txt,test=testing_list.txt; a list holds '
      'one path relative to input_dir per line, and a list file is found '
      'relative to input_dir unless absolute or a URI; instead of --splits '
      '(default: none)', default=())
  manifest: Tuple[Tuple[str, str], ...] = _opt(
      'read the recordings from a manifest instead of labels and splits '
      'from paths: a CSV, TSV or JSON Lines file (by its extension) with '
      'one row per recording, its path relative to input_dir (or absolute, '
      'or a URI); comma-separated files, each optionally SPLIT=FILE to put '
      'all of its rows in that split (Common Voice: '
      'train=train.tsv,validation=dev.tsv,test=test.tsv). Files under '
      'input_dir without a row, and rows whose file is missing, are '
      'rejected with the reason (default: none)', default=())
  manifest_path_column: str = _opt(
      "the manifest's column holding each recording's path, or a template "
      'of columns, e.g. "fold{fold}/{slice_file_name}" (UrbanSound8K)',
      default='path')
  manifest_audio_extension: Optional[str] = _opt(
      'replace the extension of every manifest path with this one, e.g. wav '
      'when the .mp3 clips a manifest names were converted to WAV beside '
      'themselves', default=None)
  manifest_label_column: Optional[str] = _opt(
      "the manifest's column holding the class (instead of --label_from)",
      default=None)
  manifest_split_column: Optional[str] = _opt(
      "the manifest's column holding the split, or the fold with "
      '--fold_splits (instead of --splits)', default=None)
  manifest_extra_columns: Tuple[str, ...] = _opt(
      'comma-separated manifest columns stored in every example of their '
      'recording: int64 when every value is an integer, else a string '
      '(e.g. sentence,client_id)', default=())
  manifest_start_column: Optional[str] = _opt(
      "the manifest's column holding where a segment starts, in seconds: "
      'each row is then one time-stamped segment of its recording (rows '
      'may share a recording, and segments may overlap), with its own '
      'label and extra columns; give --manifest_end_column or '
      '--manifest_duration_column too', default=None)
  manifest_end_column: Optional[str] = _opt(
      "the manifest's column holding where a segment ends, in seconds",
      default=None)
  manifest_duration_column: Optional[str] = _opt(
      "the manifest's column holding a segment's duration, in seconds",
      default=None)
  split_by: Optional[str] = _opt(
      'assign splits by a stable hash of this manifest column (or Lhotse '
      'supervision field) instead of the path, with the fractions of '
      '--splits, so that no value (a speaker, e.g. client_id) is in two '
      'splits; the segments of one recording must share their value',
      default=None)
  lhotse_recordings: Optional[str] = _opt(
      "read the recordings from a Lhotse RecordingSet manifest (the "
      "recipes' recordings.jsonl.gz): each recording's source file (a path "
      'relative to input_dir, or absolute), sampling rate and channels, '
      'instead of --manifest (default: none)', default=None)
  lhotse_supervisions: Optional[str] = _opt(
      "the Lhotse SupervisionSet of --lhotse_recordings (supervisions."
      "jsonl.gz): each supervision is a segment of its recording's channel "
      'with its start, duration and fields; --manifest_extra_columns picks '
      'the fields stored (id, recording_id, text, speaker, language, '
      'gender, or a custom key; default id,text,speaker,language) and '
      '--manifest_label_column may name one as the class (default: none)',
      default=None)
  fold_splits: Tuple[Tuple[str, Tuple[str, ...]], ...] = _opt(
      'splits made of the folds in --manifest_split_column, e.g. '
      '"train=1,2,3;validation=4;test=5" (default: none)', default=())
  no_shuffle: bool = _opt(
      'write examples in input order (file, then window) instead of a '
      'deterministic pseudo-random order that mixes files and classes in '
      'every shard', default=False)
  shuffle_seed: int = _opt('seed of the write order', default=0)
  num_shards: Optional[int] = _opt(
      'write this many shards per split (at most one per example; '
      '--sink write_to_tfrecord writes this many, empty ones included)',
      default=None)
  max_examples_per_shard: Optional[int] = _opt(
      'start a new shard after this many examples', default=None)
  max_shard_bytes: int = _opt(
      'start a new shard after this many bytes (the default sharding)',
      default=DEFAULT_SHARD_BYTES)
  compression: str = _opt('shard compression', default='none',
                          choices=COMPRESSIONS)
  sink: str = _opt(
      "shards: wavbeam's own shard writer (deterministic layout and global "
      "shuffle); write_to_tfrecord: Beam's WriteToTFRecord with "
      'runner-chosen sharding (or --num_shards), fused with the feature '
      'work, in no global order (no shuffle of any kind, no --shuffle_seed)',
      default='shards', choices=SINKS)
  array_record: bool = _opt(
      'also write every shard as ArrayRecord (the same Example bytes, '
      'uncompressed, one record per group) for random access: '
      'tfds.data_source, Grain, PyTorch map-style datasets; local output '
      'only, --sink shards only; needs the array-record package '
      "(pip install '.[array_record]')", default=False)
  overwrite: bool = _opt('replace a dataset already in output_dir',
                         default=False)
  append: bool = _opt(
      'add to the complete dataset in output_dir the recordings of '
      'input_dir it does not hold yet, as a new part (part-00001, ...; '
      'listed in parts.json), with the same options it was written with; a '
      'recording whose content changed since is reported, not read again',
      default=False)
  dataset_version: str = _opt('version recorded for TFDS (x.y.z)',
                              default='1.0.0')
  tfds_layout: bool = _opt(
      'write into OUT/{dataset_name}/{dataset_version}/ so that '
      'tfds.load(dataset_name, data_dir=OUT) finds it', default=False)
  variants: Optional[str] = _opt(
      'a JSON or TOML file mapping variant names to feature options (e.g. '
      '[mfcc20] features = "log_mel,mfcc", n_mfcc = 20): each variant is a '
      'complete dataset in OUT/<variant>/ with the run\'s other options, '
      'and OUT/variants.json lists them and what differs (default: none)',
      default=None)

  def __post_init__(self):
    # The list options given as text (the command line's), as written:
    # messages show them so, not as parsed (sorted, paths made absolute,
    # fractions and extensions normalised, a file's pairs for its name).
    written = {f.name: getattr(self, f.name).strip()
               for f in dataclasses.fields(self)
               if f.type not in (str, Optional[str])
               and isinstance(getattr(self, f.name), str)}
    if self.hop_len is None:
      object.__setattr__(self, 'hop_len', self.win_len)
    if isinstance(self.features, str):
      object.__setattr__(self, 'features', _split_list(self.features))
    object.__setattr__(self, 'features', tuple(self.features))
    if isinstance(self.feature_module, str):
      object.__setattr__(self, 'feature_module',
                         _split_list(self.feature_module))
    object.__setattr__(self, 'feature_module', tuple(self.feature_module))
    options = self.feature_options
    if isinstance(options, Mapping):
      options = options.items()
    object.__setattr__(self, 'feature_options', tuple(sorted(
        (str(k), v) for k, v in options)))
    if isinstance(self.audio_formats, str):
      object.__setattr__(self, 'audio_formats',
                         _split_list(self.audio_formats))
    object.__setattr__(self, 'audio_formats',
                       tuple(f.lower().lstrip('.') for f in
                             self.audio_formats))
    for name in ('exclude', 'silence_from'):
      patterns = getattr(self, name)
      if isinstance(patterns, str):
        patterns = _split_list(patterns)
      object.__setattr__(self, name, tuple(_normal_pattern(p)
                                           for p in patterns))
    if isinstance(self.label_map, str):
      object.__setattr__(self, 'label_map', _parse_label_map(self.label_map))
    object.__setattr__(self, 'label_map', tuple(sorted(
        (str(k), str(v)) for k, v in self.label_map)))
    if isinstance(self.splits, str):
      object.__setattr__(self, 'splits', _parse_splits(self.splits))
    object.__setattr__(self, 'splits',
                       tuple((n, float(f)) for n, f in self.splits))
    if isinstance(self.split_lists, str):
      object.__setattr__(self, 'split_lists',
                         _parse_split_lists(self.split_lists))
    object.__setattr__(self, 'split_lists',
                       tuple((n, f) for n, f in self.split_lists))
    if isinstance(self.manifest, str):
      object.__setattr__(self, 'manifest', _parse_manifest(self.manifest))
    object.__setattr__(self, 'manifest',
                       tuple((s, f) for s, f in self.manifest))
    if isinstance(self.manifest_extra_columns, str):
      object.__setattr__(self, 'manifest_extra_columns',
                         _split_list(self.manifest_extra_columns))
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
    self._validate(written)

  def _validate(self, written: Mapping[str, str]):
    for name in ('input_dir', 'output_dir'):
      if not getattr(self, name):
        raise ConfigError(name, getattr(self, name), 'is required')
    if not re.fullmatch(r'\d+\.\d+\.\d+', self.dataset_version):
      raise ConfigError('dataset_version', self.dataset_version,
                        'must look like 1.0.0')
    if not naming.is_dataset_name(self.dataset_name):
      raise ConfigError('dataset_name', self.dataset_name,
                        f'use {naming.DATASET_NAME_RULE} only')
    for name in ('win_len', 'hop_len', 'max_shard_bytes'):
      _positive(name, getattr(self, name))
    for name in ('max_windows_per_signal', 'num_elems', 'num_shards',
                 'max_examples_per_shard', 'sample_rate'):
      if getattr(self, name) is not None:
        _positive(name, getattr(self, name))
    _at_most('win_len', self.win_len, MAX_WIN_LEN,
             'a shard task holds 32 windows as float64')
    _at_most('hop_len', self.hop_len, MAX_WIN_LEN * 1024)
    _at_most('max_shard_bytes', self.max_shard_bytes, MAX_SHARD_BYTES)
    for name, bound in (('sample_rate', MAX_SAMPLE_RATE),
                        ('num_shards', MAX_SHARDS),
                        ('max_windows_per_signal', MAX_COUNT),
                        ('num_elems', MAX_COUNT),
                        ('max_examples_per_shard', MAX_COUNT)):
      if getattr(self, name) is not None:
        _at_most(name, getattr(self, name), bound)
    for field in dataclasses.fields(self):
      choices = field.metadata.get('choices')
      if choices and getattr(self, field.name) not in choices:
        raise ConfigError(field.name, getattr(self, field.name),
                          f'must be one of {", ".join(choices)}')
    formats = written.get('audio_formats', ','.join(self.audio_formats))
    if not self.audio_formats:
      raise ConfigError('audio_formats', formats,
                        'name at least one extension')
    unknown = [f for f in self.audio_formats if f not in AUDIO_FORMATS]
    if unknown:
      raise ConfigError('audio_formats', formats, f'unknown {unknown}; '
                        f'choose from {", ".join(AUDIO_FORMATS)}')
    if len(set(self.audio_formats)) != len(self.audio_formats):
      raise ConfigError('audio_formats', formats, 'lists a repeat')
    self._validate_features(written)
    names = [name for name, _ in self.splits]
    if self.split_from == 'hash':
      text = written.get('splits', splits_text(self.splits))
      if not self.splits:
        raise ConfigError('splits', text, 'name at least one split')
      if len(set(names)) != len(names):
        raise ConfigError('splits', text, 'names a split twice')
      for name, fraction in self.splits:
        check_split_name('splits', text, name)
        if not 0 < fraction <= 1:
          raise ConfigError('splits', text, f'fraction of {name!r} must be '
                            'in (0, 1]')
      if abs(sum(f for _, f in self.splits) - 1.0) > 1e-9:
        raise ConfigError('splits', text, 'fractions must sum to 1')
    if not 0 <= self.shuffle_seed <= MAX_COUNT:
      raise ConfigError('shuffle_seed', self.shuffle_seed,
                        f'must be in [0, {MAX_COUNT}]')
    if self.sink == 'write_to_tfrecord':
      if self.split_from != 'hash':
        raise ConfigError('sink', self.sink, 'needs the split names before '
                          'the run (one WriteToTFRecord per split): use '
                          '--splits, or --sink shards with --split_from '
                          'subdir')
      if self.shuffle_seed != 0:
        raise ConfigError('shuffle_seed', self.shuffle_seed,
                          '--sink write_to_tfrecord writes in no global '
                          'order, so there is nothing to seed; use --sink '
                          'shards for a shuffled layout')
    if self.split_lists:
      text = written.get('split_lists', ','.join(
          f'{n}={f}' for n, f in self.split_lists))
      names = [n for n, _ in self.split_lists]
      if self.split_from != 'hash' or self.splits != (('train', 1.0),):
        raise ConfigError('split_lists', text, 'give --split_lists or '
                          '--splits / --split_from subdir, not both')
      if len(set(names)) != len(names) or REST_SPLIT in names:
        raise ConfigError('split_lists', text, 'names a split twice (the '
                          f'files of no list go to {REST_SPLIT!r})')
      for name in names:
        check_split_name('split_lists', text, name)
    self._validate_manifest(written)
    self._validate_labels_and_patterns(written)
    if self.array_record and self.sink != 'shards':
      raise ConfigError('array_record', True, 'needs --sink shards (the '
                        "ArrayRecord files are written beside wavbeam's own "
                        'shards)')
    if self.append and self.overwrite:
      raise ConfigError('append', True, 'give --append or --overwrite, not '
                        'both')
    if self.append and self.num_elems is not None:
      raise ConfigError('num_elems', self.num_elems, 'stops a run partway '
                        'through its recordings, and --append skips every '
                        'recording the dataset has seen, those past the '
                        'stop too: append to a dataset written without it')
    if self.variants:
      for name in ('tfds_layout',):
        if getattr(self, name):
          raise ConfigError(name, True, f'works on one dataset, and '
                            f'--variants={self.variants} writes one per '
                            'variant: run it on each variant\'s folder')
    if self.num_shards is not None and self.max_examples_per_shard is not None:
      raise ConfigError('num_shards', self.num_shards,
                        'give either --num_shards or --max_examples_per_shard')

  def _validate_features(self, written: Mapping[str, str]):
    """The features, from the registry (with --feature_module's), and
    every feature option: each by its own rules, then those of the
    features in use that go with other options."""
    modules = written.get('feature_module', ','.join(self.feature_module))
    if len(set(self.feature_module)) != len(self.feature_module):
      raise ConfigError('feature_module', modules, 'lists a repeat')
    registry.load_modules(self.feature_module)
    features = written.get('features', ','.join(self.features))
    if not self.features:
      raise ConfigError('features', features, 'name at least one feature')
    known = registry.names()
    unknown = [f for f in self.features if f not in known]
    if unknown:
      raise ConfigError('features', features,
                        f'unknown {unknown}; choose from {", ".join(known)}'
                        + ('' if self.feature_module else
                           ' (or a feature of a --feature_module)'))
    if len(set(self.features)) != len(self.features):
      raise ConfigError('features', features, 'lists a repeat')
    plugin = {o.name: o for o in registry.options(builtin=False)}
    for name, value in self.feature_options:
      if name not in plugin:
        raise ConfigError(name, value, 'is an option of no feature of '
                          f'--feature_module={modules or "(none)"}')
    for option in registry.options():
      option.check(registry.option_value(self, option.name))
    self._validate_example_unit(features)
    if (self.example_unit == 'window' and self.uses_stft and
        self.n_fft > self.win_len):
      raise ConfigError('n_fft', self.n_fft,
                        f'must not exceed --win_len={self.win_len}')
    for name in registry.in_use(self.features):
      registry.get(name).check(self)
    if self.fmax is not None:
      if self.fmax <= self.fmin:
        raise ConfigError('fmax', self.fmax,
                          f'must exceed --fmin={self.fmin}')
      if self.sample_rate is not None and self.fmax > self.sample_rate / 2:
        raise ConfigError('fmax', self.fmax, 'must not exceed half of '
                          f'--sample_rate={self.sample_rate}')

  def _validate_labels_and_patterns(self, written: Mapping[str, str]):
    for name in ('exclude', 'silence_from'):
      patterns = getattr(self, name)
      text = written.get(name, ','.join(patterns))
      for pattern in patterns:
        if (not pattern or pattern.startswith('/') or
            re.match(r'[A-Za-z][A-Za-z0-9+.-]*:/', pattern) or
            '..' in pattern.split('/')):
          raise ConfigError(name, text, f'pattern {pattern!r}: give a glob '
                            'relative to input_dir, e.g. '
                            '_background_noise_/*')
      if len(set(patterns)) != len(patterns):
        raise ConfigError(name, text, 'lists a pattern twice')
    for silence in self.silence_from:
      for excluded in self.exclude:
        if silence == excluded or (
            not any(c in silence for c in GLOB_CHARS) and
            fnmatch.fnmatchcase(silence, excluded)):
          raise ConfigError('silence_from', silence, f'every file it '
                            f'matches is left out by --exclude={excluded}: '
                            'a file cannot be both')
    no_classes = (self.label_from == 'none' and
                  not self.manifest_label_column)
    if self.label_map:
      text = written.get('label_map', label_map_text(self.label_map))
      if no_classes:
        raise ConfigError('label_map', text, '--label_from none gives no '
                          'classes to rename')
      # Given as text, each pair was checked as it was read (naming the
      # pair as written, or the file and the key).
      for old, new in self.label_map:
        problem = _label_pair_problem(old, new)
        if problem:
          raise ConfigError('label_map', text, f'{old}={new}: {problem}')
      olds = [old for old, _ in self.label_map]
      if len(set(olds)) != len(olds):
        raise ConfigError('label_map', text, 'renames a class twice')
    if not self.silence_from:
      if self.silence_windows is not None:
        raise ConfigError('silence_windows', self.silence_windows,
                          'needs --silence_from')
      if self.silence_label != SILENCE_LABEL:
        raise ConfigError('silence_label', self.silence_label,
                          'needs --silence_from')
      return
    if no_classes:
      raise ConfigError('silence_from', written.get(
          'silence_from', ','.join(self.silence_from)),
                        '--label_from none gives no classes, so windows '
                        'cannot be labelled silence')
    if not naming.is_class_name(self.silence_label):
      raise ConfigError('silence_label', self.silence_label, 'give a class '
                        f'name ({naming.CLASS_NAME_RULE})')
    if self.silence_windows is not None:
      _positive('silence_windows', self.silence_windows)
      _at_most('silence_windows', self.silence_windows, MAX_COUNT)

  def _validate_example_unit(self, features: str):
    defaults = {f.name: f.default for f in dataclasses.fields(self)}
    for name in ('max_seconds', 'min_seconds'):
      value = getattr(self, name)
      if (isinstance(value, bool) or not isinstance(value, (int, float))
          or not 0 <= value < float('inf')):
        raise ConfigError(name, value, 'must be a number of seconds, at '
                          'least 0')
    unit = self.example_unit
    if unit == 'segment' and not self.has_segments:
      raise ConfigError('example_unit', unit, 'needs segments: a manifest '
                        'with --manifest_start_column, or '
                        '--lhotse_supervisions')
    if unit == 'file' and self.has_segments:
      raise ConfigError('example_unit', unit, 'makes one example of a '
                        'whole recording, and the manifest gives segments '
                        f'({self._segments_option()}): use --example_unit '
                        'segment, or window for windows cut inside them')
    if unit == 'window':
      for name in ('max_seconds', 'min_seconds'):
        if getattr(self, name) != defaults[name]:
          raise ConfigError(name, getattr(self, name), 'applies to '
                            '--example_unit file or segment only (windows '
                            'have --win_len samples)')
      return
    what = 'a whole recording' if unit == 'file' else 'a whole segment'
    for name in WINDOW_ONLY_OPTIONS:
      value = getattr(self, name)
      default = self.win_len if name == 'hop_len' else defaults[name]
      if value != default:
        raise ConfigError(name, value, f'does not apply to --example_unit '
                          f'{unit} (an example is {what}); leave it out, or '
                          'use --example_unit window')
    for name in self.features:
      if registry.get(name).window_only:
        raise ConfigError('features', features, f'{name} is one spectrum '
                          'of a whole window, with a length of its own per '
                          f'example under --example_unit {unit}; use '
                          'spectrogram')
    if not 0 < self.max_seconds <= MAX_FILE_SECONDS:
      raise ConfigError('max_seconds', self.max_seconds, 'must be more than '
                        f'0 and at most {MAX_FILE_SECONDS:g} (a recording '
                        'and its features are held in memory whole)')
    if self.min_seconds > self.max_seconds:
      raise ConfigError('min_seconds', self.min_seconds, 'must not exceed '
                        f'--max_seconds={self.max_seconds:g}')

  @property
  def has_segments(self) -> bool:
    """The manifest gives time-stamped segments of its recordings."""
    return bool(self.manifest_start_column or self.lhotse_supervisions)

  def _segments_option(self) -> str:
    return (f'--manifest_start_column={self.manifest_start_column}'
            if self.manifest_start_column else
            f'--lhotse_supervisions={self.lhotse_supervisions}')

  def _validate_segments(self):
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
        self._check_label_source()
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
    self._check_label_source()
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
    if (self.sink == 'write_to_tfrecord' and self.manifest_split_column and
        not self.fold_splits):
      raise ConfigError('sink', self.sink, 'needs the split names before '
                        'the run, which --manifest_split_column='
                        f'{self.manifest_split_column} leaves to the rows: '
                        'map its values with --fold_splits, or use --sink '
                        'shards')

  def _check_label_source(self):
    if self.manifest_label_column and self.label_from != 'subdir':
      raise ConfigError('label_from', self.label_from, 'the manifest gives '
                        'the labels (--manifest_label_column): leave out '
                        '--label_from')

  def _check_extra_columns(self, written: Mapping[str, str]):
    reserved = set(BASE_KEYS) | set(self.features) | (
        {NUM_SAMPLES_KEY, NUM_FRAMES_KEY} if self.variable_length
        else set())
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

  @property
  def variable_length(self) -> bool:
    """Examples differ in length: whole recordings or segments."""
    return self.example_unit in VARIABLE_UNITS

  @property
  def uses_stft(self) -> bool:
    """A feature in use frames the STFT (--n_fft applies)."""
    return registry.uses_stft(self.features)

  def option(self, name: str):
    """The value of a feature's option: a field, or one of
    feature_options (a --feature_module feature's)."""
    return registry.option_value(self, name)

  @property
  def dataset_dir(self) -> str:
    """Where the dataset's files go: output_dir, or the TFDS layout in it."""
    if self.tfds_layout:
      return '/'.join([self.output_dir.rstrip('/'), self.dataset_name,
                       self.dataset_version])
    return self.output_dir

  @property
  def split_names(self) -> Tuple[str, ...]:
    """Known up front for hash splits, split lists, fold splits and
    per-file manifests; None when folders or a split column decide."""
    if self.fold_splits:
      return tuple(n for n, _ in self.fold_splits)
    if any(s for s, _ in self.manifest):
      return tuple(dict.fromkeys(s for s, _ in self.manifest))
    if self.manifest_split_column:
      return None
    if self.split_lists:
      return (REST_SPLIT, *(n for n, _ in self.split_lists))
    return tuple(n for n, _ in self.splits) if self.split_from == 'hash' \
        else None

  def to_json(self) -> dict:
    """The options as JSON values (tuples as lists, at every depth), so
    that what metadata.json gives back compares equal to them."""
    out = {k: _as_json(v) for k, v in dataclasses.asdict(self).items()}
    # [name, fraction] pairs in their order, which assigns files (a JSON
    # object would lose it: metadata.json sorts its keys).
    out['splits'] = [[n, f] for n, f in self.splits]
    return out

  @classmethod
  def from_json(cls, options: Mapping) -> 'PipelineConfig':
    """The config to_json gave (a dataset's metadata.json keeps it as
    `config`), validated as a run's is. An option missing from it (a
    dataset written before the option existed) takes its default;
    ConfigError for one this version does not know, since it could have
    changed what was computed."""
    known = {f.name for f in dataclasses.fields(cls)}
    for name in sorted(set(options) - known):
      raise ConfigError(name, options[name], 'is not an option of this '
                        'wavbeam (written by a later version?)')
    values = dict(options)
    if isinstance(values.get('splits'), Mapping):  # an object: no order
      values['splits'] = tuple(values['splits'].items())
    elif isinstance(values.get('splits'), list):
      values['splits'] = tuple(tuple(pair) for pair in values['splits'])
    return cls(**values)


def _as_json(value):
  if isinstance(value, (tuple, list)):
    return [_as_json(v) for v in value]
  return value


def splits_text(splits) -> str:
  """--splits as given: every fraction with all of its digits."""
  def fraction(f):
    text = repr(float(f))
    return text[:-2] if text.endswith('.0') else text
  return ','.join(f'{n}={fraction(f)}' for n, f in splits)


def check_split_name(option: str, value, name: str, where: str = '') -> None:
  """ConfigError unless `name` can name a split (it names shard files)."""
  if not naming.is_split_name(name):
    raise ConfigError(option, value, f'{where}split name {name!r}: use '
                      f'{naming.SPLIT_NAME_RULE} only')


def _at_most(name, value, bound, why=''):
  if value > bound:
    raise ConfigError(name, value, f'must be at most {bound}' +
                      (f' ({why})' if why else ''))


def _positive(name, value):
  if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
    raise ConfigError(name, value, 'must be a positive integer')


def _split_list(text: str) -> Tuple[str, ...]:
  return tuple(p.strip() for p in text.split(',') if p.strip())


def _normal_pattern(pattern: str) -> str:
  """A glob as the listing's relative paths are spelled: './a/*' and
  'a//*' are 'a/*'."""
  pattern = re.sub('/+', '/', str(pattern).strip())
  while pattern.startswith('./'):
    pattern = pattern[2:]
  return pattern


def label_map_text(label_map) -> str:
  """--label_map as an inline list."""
  return ','.join(old if old == new else f'{old}={new}'
                  for old, new in label_map)


def _parse_label_map(text: str) -> Tuple[Tuple[str, str], ...]:
  """[(class, new class)] from a .json file or an inline list. A file is
  read now, so that the map itself is the option a dataset records (and
  --append compares), not a file that may change."""
  text = text.strip()
  if not text:
    return ()
  if text.lower().endswith('.json'):
    return _read_label_map(text)
  pairs = []
  for part in _split_list(text):
    old, sep, new = part.partition('=')
    old, new = old.strip(), new.strip()
    if sep and (not old or not new):
      raise ConfigError('label_map', text, f'{part!r} is not CLASS=NEW or '
                        'CLASS')
    problem = _label_pair_problem(old, new if sep else old)
    if problem:
      raise ConfigError('label_map', text, f'{part!r}: {problem}')
    pairs.append((old, new if sep else old))
  return tuple(pairs)


def _label_pair_problem(old: str, new: str) -> Optional[str]:
  """Why a --label_map pair cannot rename class `old` to `new`; None when
  it can."""
  if not old or not new or new == OTHER_CLASSES:
    return f'give CLASS=NEW with a NEW class name (or {OTHER_CLASSES}=NEW)'
  if not (naming.is_class_name(old) and naming.is_class_name(new)):
    return f'a class name holds {naming.CLASS_NAME_RULE}'
  return None


def _read_label_map(path: str) -> Tuple[Tuple[str, str], ...]:
  # Imported here: this module is imported by the modules that must work
  # without Beam (tests/test_layers.py), which never read a label map file.
  from apache_beam.io.filesystems import FileSystems
  try:
    with FileSystems.open(path) as f:
      data = f.read().decode('utf-8')
  except (OSError, IOError, UnicodeDecodeError) as e:
    raise ConfigError('label_map', path, f'cannot be read ({e})') from e
  try:
    found = json.loads(data, object_pairs_hook=_label_pairs)
  except ValueError as e:
    raise ConfigError('label_map', path, f'is not valid ({e})') from e
  if not isinstance(found, _Pairs) or not all(
      isinstance(k, str) and isinstance(v, str) for k, v in found):
    raise ConfigError('label_map', path, 'must be a JSON object mapping '
                      'class names to class names')
  for old, new in found:
    if not old or not new or new == OTHER_CLASSES:
      raise ConfigError('label_map', path, f'key {old!r} maps to {new!r}: '
                        'map a class name to a new class name (the key '
                        f'{OTHER_CLASSES!r} stands for every other class)')
    if not (naming.is_class_name(old) and naming.is_class_name(new)):
      raise ConfigError('label_map', path, f'key {old!r} maps to {new!r}: '
                        f'a class name holds {naming.CLASS_NAME_RULE}')
  return tuple(found)


class _Pairs(list):
  """A JSON object's (key, value) pairs, in order."""


def unique_pairs(pairs):
  """A JSON object's pairs (json's object_pairs_hook); ValueError naming
  the keys given twice, which json.loads would silently keep the last of."""
  keys = [k for k, _ in pairs]
  repeated = sorted({k for k in keys if keys.count(k) > 1})
  if repeated:
    raise ValueError(f'{repeated} given twice')
  return pairs


def _label_pairs(pairs):
  return _Pairs(unique_pairs(pairs))


def _parse_splits(text: str) -> Tuple[Tuple[str, float], ...]:
  pairs = []
  for part in _split_list(text):
    name, sep, fraction = part.partition('=')
    try:
      pairs.append((name.strip(), float(fraction)))
    except ValueError:
      raise ConfigError('splits', text, f'{part!r} is not NAME=FRACTION')
    if not sep:
      raise ConfigError('splits', text, f'{part!r} is not NAME=FRACTION')
  return tuple(pairs)


def _parse_split_lists(text: str) -> Tuple[Tuple[str, str], ...]:
  pairs = []
  for part in _split_list(text):
    name, sep, path = part.partition('=')
    if not sep or not name.strip() or not path.strip():
      raise ConfigError('split_lists', text, f'{part!r} is not SPLIT=FILE')
    pairs.append((name.strip(), path.strip()))
  return tuple(pairs)


def _parse_manifest(text: str) -> Tuple[Tuple[str, str], ...]:
  """[(split or '', file)]; a relative local file is made absolute here,
  so that the job's listing task finds it whatever its directory."""
  pairs = []
  for part in _split_list(text):
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
    if not sep or not name.strip() or not _split_list(folds):
      raise ConfigError('fold_splits', text, f'{part!r} is not '
                        'SPLIT=FOLD,FOLD,...')
    pairs.append((name.strip(), _split_list(folds)))
  return tuple(pairs)


def _fold_splits_text(fold_splits) -> str:
  return ';'.join(f'{n}={",".join(f)}' for n, f in fold_splits)


def _optional_int(text: str) -> Optional[int]:
  return None if text.lower() in ('', 'none') else int(text)


def _optional_float(text: str) -> Optional[float]:
  return None if text.lower() in ('', 'none') else float(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """Adds one flag per config field, with its help and default, and one
  per option of a --feature_module feature (registered before)."""
  for field in dataclasses.fields(PipelineConfig):
    meta, flag = field.metadata, '--' + field.name
    if meta.get('internal'):
      continue
    if field.type is bool:
      parser.add_argument(flag, action='store_true',
                          help=meta['help'] + ' (default: off)')
      continue
    default = field.default
    kwargs = {'help': meta['help']}
    if field.name == 'features':  # with those --feature_module registered
      kwargs['help'] = ('comma-separated features to compute, from '
                        + ', '.join(registry.names()))
    if meta.get('required'):
      kwargs['required'] = True
    else:
      if field.name == 'splits':
        default = splits_text(default)
      elif field.name in ('split_lists', 'manifest', 'fold_splits',
                          'label_map'):
        default = ''
      elif isinstance(default, tuple):
        default = ','.join(default)
      if '(default:' not in kwargs['help']:  # else the help says it better
        shown = 'unset' if default is None else default
        kwargs['help'] += f' (default: {shown})'
      kwargs['default'] = default
    if field.type is int:
      kwargs['type'] = int
    elif field.type is float:
      kwargs['type'] = float
    elif field.type == Optional[int]:
      kwargs['type'] = _optional_int
    elif field.type == Optional[float]:
      kwargs['type'] = _optional_float
    elif 'choices' in meta:
      kwargs['choices'] = meta['choices']
    if meta.get('repeatable'):
      # Each use adds to the list (from_args joins them with commas).
      kwargs.update(action='append', default=None)
    parser.add_argument(flag, **kwargs)


  for option in registry.options(builtin=False):
    kwargs = {'help': f'{option.help} (default: {option.default}; a '
              'feature of --feature_module)', 'default': option.default}
    if option.choices:
      kwargs['choices'] = option.choices
    elif option.type is not str:
      kwargs['type'] = {(int, False): int, (float, False): float,
                        (int, True): _optional_int,
                        (float, True): _optional_float}[option.type,
                                                        option.optional]
    parser.add_argument('--' + option.name, **kwargs)


def from_args(args: argparse.Namespace) -> PipelineConfig:
  values = {'feature_options': {o.name: getattr(args, o.name)
                                for o in registry.options(builtin=False)}}
  for field in dataclasses.fields(PipelineConfig):
    if field.metadata.get('internal'):
      continue
    value = getattr(args, field.name)
    if field.metadata.get('repeatable'):
      value = ','.join(value or ())
    values[field.name] = value
  return PipelineConfig(**values)


def features_markdown() -> str:
  """The feature table of docs/options.md, from the registry."""
  rows = ['| feature | its options | what it is |', '|---|---|---|']
  for name in registry.names():
    feature = registry.get(name)
    own = [o.name for o in feature.options]
    if feature.uses_stft:
      own += [o.name for o in registry.STFT_OPTIONS]
    for required in feature.requires:
      own += [n for n in registry.get(required).depends_on() if n not in own]
    shown = ', '.join(f'`--{n}`' for n in own) or '-'
    rows.append(f'| `{name}` | {shown} | {feature.help} |')
  return '\n'.join(rows)


def options_markdown() -> str:
  """The option table of docs/options.md, from the same fields as --help."""
  rows = ['| option | default | what it does |', '|---|---|---|']
  for field in dataclasses.fields(PipelineConfig):
    meta = field.metadata
    if meta.get('internal'):
      continue
    if meta.get('required'):
      default = 'required'
    elif field.type is bool:
      default = 'off'
    elif field.name == 'splits':
      default = splits_text(field.default)
    elif isinstance(field.default, tuple):
      default = ','.join(field.default)
    else:
      default = 'unset' if field.default is None else str(field.default)
    text = meta['help']
    if 'choices' in meta:
      text += f' ({" / ".join(meta["choices"])})'
    rows.append(f'| `--{field.name}` | {default} | {text} |')
  return '\n'.join(rows)


def parse_known_args(
    argv: Sequence[str], prog: str = 'python -m pipeline.run'
) -> Tuple[PipelineConfig, Sequence[str]]:
  """Our flags -> PipelineConfig; the rest is left for Beam's options.
  `prog`: the command's name in --help and errors (`wavbeam run` from
  the installed command)."""
  # --feature_module first: its features' options are flags too.
  modules = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
  modules.add_argument('--feature_module', default='')
  registry.load_modules(_split_list(
      modules.parse_known_args(argv)[0].feature_module))
  parser = argparse.ArgumentParser(
      prog=prog, allow_abbrev=False,
      description='Turn a folder of WAV files into a sharded TFRecord '
      'dataset. Flags not listed here (--runner, --direct_num_workers, ...) '
      "are passed to Beam's PipelineOptions.")
  add_arguments(parser)
  # The launcher's own flags (pipeline.run reads them first); listed for
  # --help.
  parser.add_argument('--quiet', action='store_true',
                      help='no progress display; the final summary, '
                      'warnings and errors are still printed')
  parser.add_argument('--verbose', action='store_true',
                      help="Beam's, gRPC's and wavbeam's INFO logs too "
                      '(by default only warnings and errors are logged)')
  args, beam_args = parser.parse_known_args(argv)
  return from_args(args), beam_args
