"""Opening a dataset folder: its metadata.json and the files it lists.

Every reader and command opens a dataset here, with the file system calls
it has (`LOCAL` here; TensorFlow's gfile in replay; Beam's FileSystems in
the commands):

- `open_dataset` finds the folder (or the TFDS layout inside it), tells a
  missing dataset from an incomplete one, checks metadata.json
  (metadata.parse) and merges the parts --append added (parts.load);
- `split_entry` is a split's entry in that metadata, `feature_keys` the
  features to read of it (an unknown split or feature refused);
- `shard_files` and `array_record_files` are a split's files,
  `listed_file` one file the metadata lists, `index_file` a shard's
  index; each checked by `check_file` before anything opens it: inside
  the folder (symbolic links followed), present, a plain file (a FIFO
  would block the reader) and the size metadata.json lists.

One failure behaviour: DatasetError, naming the folder or file and what is
wrong, worded as the caller's other errors are (`READER_WORDS`,
`COMMAND_WORDS`).
"""

import dataclasses
import glob
import json
import os
import stat as stat_lib
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

from pipeline.contract import metadata as metadata_lib
from pipeline.contract import naming
from pipeline.contract import parts as parts_lib
from pipeline.contract.errors import DatasetError


@dataclasses.dataclass(frozen=True)
class FileInfo:
  size: int
  regular: bool  # a plain file (no folder, FIFO or device)


@dataclasses.dataclass(frozen=True)
class FileSystem:
  """The file system calls a caller has. `stat` gives None for a file the
  file system reports missing, and raises OSError for one it cannot
  look at."""
  exists: Callable[[str], bool]
  read_text: Callable[[str], str]
  glob: Callable[[str], List[str]]
  stat: Callable[[str], Optional[FileInfo]]


def _read_local(path: str) -> str:
  with open(path, encoding='utf-8') as f:
    return f.read()


def _stat_local(path: str) -> FileInfo:
  # One call, no exists() first: os.stat's error says why the file cannot
  # be opened (missing, no permission, a loop of links).
  info = os.stat(path)
  return FileInfo(info.st_size, stat_lib.S_ISREG(info.st_mode))


LOCAL = FileSystem(os.path.exists, _read_local, glob.glob, _stat_local)


@dataclasses.dataclass(frozen=True)
class Wording:
  """The texts of the refusals below, as format strings of `kind` (shard,
  ArrayRecord file, index file), `path`, `outside` (outside's reason),
  `error`, `size`, `num_bytes`, `split`, `dataset_dir` and `splits`."""
  unknown_split: str
  outside: str
  missing: str
  unreadable: str
  not_plain: str
  size: str


# The readers (numpy_reader, array_record_source, replay) name the kind of
# file first, as their record errors do.
READER_WORDS = Wording(
    unknown_split='unknown split {split!r} in {dataset_dir}; it has {splits}',
    outside='{kind} {outside}',
    missing='{kind} {path} listed in metadata.json is missing',
    unreadable='{kind} {path} listed in metadata.json cannot be read '
    '({error})',
    not_plain='{kind} {path} is not a plain file',
    size='{kind} {path} is {size} bytes but metadata.json says {num_bytes}: '
    'it was changed or cut after writing')

# The commands (verify, inspect) print the path first, as their other
# errors do.
COMMAND_WORDS = Wording(
    unknown_split='unknown split {split!r}; the dataset has {splits}',
    outside='{outside}',
    missing='{path}: listed in metadata.json but missing',
    unreadable='{path}: listed in metadata.json but cannot be read '
    '({error})',
    not_plain='{path}: not a plain file',
    size='{path}: {size} bytes, metadata.json says {num_bytes}')


def outside(dataset_dir: str, path: str) -> Optional[str]:
  """Why a file the metadata lists may not be opened, when, resolved
  (symbolic links followed), it lies outside the dataset folder, resolved;
  else None. Object stores (URIs) have no links: their names were checked
  when the metadata was read."""
  if '://' in path:
    return None
  folder = os.path.realpath(dataset_dir)
  real = os.path.realpath(path)
  if os.path.commonpath([folder, real]) != folder:
    return (f'{path}: listed in the dataset\'s metadata, but it leads '
            f'outside the dataset folder {folder} (to {real}); refusing to '
            'read it')
  return None


def open_dataset(output_dir: str, fs: FileSystem = LOCAL, parts=None,
                 whole: bool = True) -> Tuple[str, Dict]:
  """(dataset folder, its checked metadata: with `whole`, merged with its
  parts, all or those `parts` names); DatasetError otherwise."""
  found = naming.find_dataset_dir(output_dir, fs.exists, fs.glob)
  path = naming.join(found, naming.METADATA_FILE)
  if not fs.exists(path):
    if fs.exists(naming.temp_dir(found)) or naming.within(
        found, fs.glob(naming.pattern_under(found, '*.tfrecord-*'))):
      raise DatasetError(
          f'{found} is an incomplete dataset (no {naming.METADATA_FILE}): the '
          'run that wrote it did not finish; rerun the pipeline with '
          '--overwrite')
    raise DatasetError(f'no wavbeam dataset at {found} ({path} not found)')
  _refuse_unfinished_variant(found, fs)
  try:
    try:
      text = fs.read_text(path)
    except UnicodeDecodeError as e:
      raise metadata_lib.MetadataError(f'{path}: not UTF-8 text ({e})') from e
    base = metadata_lib.parse(text, path)
    if not whole:
      return found, base
    return found, parts_lib.load(found, base, fs.exists, fs.read_text, parts)
  except metadata_lib.MetadataError as e:
    raise DatasetError(str(e)) from e


def split_entry(dataset_dir: str, metadata: Dict, split: str,
                words: Wording = READER_WORDS) -> Dict:
  """metadata's entry of `split`; DatasetError for a split it has not."""
  splits = metadata['splits']
  if split not in splits:
    raise DatasetError(words.unknown_split.format(
        split=split, dataset_dir=dataset_dir, splits=sorted(splits)))
  return splits[split]


def feature_keys(dataset_dir: str, specs: Dict,
                 features: Optional[Sequence[str]]) -> List[str]:
  """The features to read: `features`, or all of `specs` (the schema's);
  DatasetError for one the schema has not."""
  if isinstance(features, str):  # 'signal' would be read as 6 names
    raise DatasetError(f'features={features!r}: give a list of feature '
                       f'names, e.g. [{features!r}]')
  keys = list(features) if features is not None else sorted(specs)
  if not keys:
    raise DatasetError(f'features={features!r}: name at least one feature '
                       f'(or None for all of {sorted(specs)})')
  unknown = [k for k in keys if k not in specs]
  if unknown:
    raise DatasetError(f'unknown feature {unknown} in {dataset_dir}; it has '
                       f'{sorted(specs)}')
  return keys


def check_file(fs: FileSystem, dataset_dir: str, path: str,
               num_bytes: Optional[int], kind: str = 'shard',
               words: Wording = READER_WORDS) -> None:
  """DatasetError when a file of dataset_dir's metadata may not be opened:
  outside the folder, missing, not a plain file, or not `num_bytes` long
  (None skips the size)."""
  reason = outside(dataset_dir, path)
  if reason:
    raise DatasetError(words.outside.format(kind=kind, outside=reason))
  try:
    info = fs.stat(path)
  except OSError as e:
    raise DatasetError(words.unreadable.format(kind=kind, path=path,
                                               error=e)) from e
  if info is None:
    raise DatasetError(words.missing.format(kind=kind, path=path))
  if not info.regular:
    raise DatasetError(words.not_plain.format(kind=kind, path=path))
  if num_bytes is not None and info.size != num_bytes:
    raise DatasetError(words.size.format(kind=kind, path=path,
                                         size=info.size, num_bytes=num_bytes))


def listed_file(fs: FileSystem, dataset_dir: str, listed: Dict,
                kind: str = 'shard', words: Wording = READER_WORDS) -> str:
  """The path of a file metadata lists (an entry with `file` and
  `num_bytes`), checked."""
  path = naming.join(dataset_dir, listed['file'])
  check_file(fs, dataset_dir, path, listed['num_bytes'], kind, words)
  return path


def listed_files(fs: FileSystem, dataset_dir: str, listed: List[Dict],
                 kind: str = 'shard',
                 words: Wording = READER_WORDS) -> List[str]:
  return [listed_file(fs, dataset_dir, entry, kind, words)
          for entry in listed]


def shard_files(fs: FileSystem, dataset_dir: str, metadata: Dict,
                split: str, words: Wording = READER_WORDS) -> List[str]:
  """Paths of a split's TFRecord shards, each checked."""
  entry = split_entry(dataset_dir, metadata, split, words)
  return listed_files(fs, dataset_dir, entry['shards'], 'shard', words)


def array_record_files(fs: FileSystem, dataset_dir: str, metadata: Dict,
                       split: str) -> List[str]:
  """Paths of a split's ArrayRecord copies (--array_record), each
  checked; DatasetError when the dataset was written without them."""
  entry = split_entry(dataset_dir, metadata, split)
  if naming.ARRAY_RECORD not in entry:
    raise DatasetError(
        f'{dataset_dir} has no ArrayRecord files (it was written '
        'without --array_record); rerun the pipeline with --array_record '
        'for random access, or read it with numpy_reader')
  return listed_files(fs, dataset_dir, entry[naming.ARRAY_RECORD],
                      'ArrayRecord file')


def index_file(fs: FileSystem, dataset_dir: str, shard_path: str,
               words: Wording = READER_WORDS) -> Optional[str]:
  """The path of a shard's `tfrecord`-package index (its current name or
  the older one), checked, or None when it has none. metadata.json does
  not list indexes, so their size is not checked."""
  path = next((p for p in (naming.index_name(shard_path),
                           naming.old_index_name(shard_path))
               if fs.exists(p)), None)
  if path is not None:
    check_file(fs, dataset_dir, path, None, 'index file', words)
  return path


def _refuse_unfinished_variant(folder: str, fs: FileSystem) -> None:
  """DatasetError when `folder` is a variant of a sweep that did not
  finish (the sweep's temporary folder names it, and it has no
  variants.json): its siblings may be missing or older than it."""
  parent, name = parts_lib.parent_and_name(folder)
  if parent is None or fs.exists(naming.join(parent, naming.VARIANTS_FILE)):
    return
  started = naming.join(naming.temp_dir(parent), naming.SWEEP_STARTED_FILE)
  if not fs.exists(started):
    return
  try:
    names = json.loads(fs.read_text(started))
  except (ValueError, OSError):
    return  # not a record a sweep wrote
  if isinstance(names, list) and name in names:
    raise DatasetError(
        f'{folder} is variant {name!r} of a sweep in {parent} that did not '
        f'finish (no {naming.VARIANTS_FILE}): rerun the sweep with '
        '--overwrite')


def variant_folder(output_dir: Union[str, os.PathLike],
                   variant: Optional[str], fs: FileSystem = LOCAL) -> str:
  """The folder of one variant of a sweep (--variants): OUT/<variant>;
  output_dir itself without a variant (a pathlib.Path as its str: every
  reader comes here first). Raises DatasetError for a name that is not a
  variant's (it could lead outside the sweep), for a sweep whose
  variants.json is missing (it did not finish) and for a variant it does
  not list (a folder left by an earlier sweep)."""
  output_dir = os.fspath(output_dir)
  if variant is None:
    return output_dir
  if not naming.is_variant_name(variant):
    raise DatasetError(f'variant {variant!r}: not a variant name '
                       f'({naming.VARIANT_NAME_RULE})')
  index = naming.join(output_dir, naming.VARIANTS_FILE)
  if not fs.exists(index):
    raise DatasetError(f'{output_dir} holds no complete sweep (no '
                       f'{naming.VARIANTS_FILE}): its run did not finish')
  try:
    listed = json.loads(fs.read_text(index))['variants']
  except (ValueError, KeyError, TypeError) as e:
    raise DatasetError(f'{index}: not a sweep index ({e})') from e
  if variant not in listed:
    raise DatasetError(f'variant {variant!r} is not in {index}; it lists '
                       f'{sorted(listed)}')
  return naming.join(output_dir, variant)
