"""Names of the files a dataset is made of (shards, metadata, rejects)."""

import re

METADATA_FILE = 'metadata.json'
# A sweep's index (--variants), in the folder that holds its variants.
VARIANTS_FILE = 'variants.json'
REJECTS_FILE = 'rejects.jsonl'
TEMP_DIR = '.wavbeam-incomplete'  # shards before the run succeeds
STARTED_FILE = 'started'  # in TEMP_DIR: the run could write here
# In a sweep's TEMP_DIR while it runs: the variants it writes (a JSON list).
SWEEP_STARTED_FILE = 'variants'


# The names that become parts of paths: a dataset's name (in its file names,
# and a folder with --tfds_layout) and its splits' (in file names). Checked
# where they are chosen and again where a reader reads them, so that no
# name in a dataset folder leads outside it: no '/', no '..'.
DATASET_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_.]*')
SPLIT_NAME = re.compile(r'[A-Za-z0-9_]+')
DATASET_NAME_RULE = 'letters, digits, "_" and "." (not first)'
SPLIT_NAME_RULE = 'letters, digits and "_"'
# A variant of a sweep names a folder beside the sweep's files: no dot, so
# that it can never be variants.json or a temporary file.
VARIANT_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_-]{0,99}')
VARIANT_NAME_RULE = 'letters, digits, "_" and "-" (not first)'
# A class name is one line of the labels file TFDS reads (one name a line).
CLASS_NAME_RULE = 'no control characters, such as line breaks and tabs'
_CONTROL_CHARACTER = re.compile(r'[\x00-\x1f\x7f]')


def is_dataset_name(name) -> bool:
  return isinstance(name, str) and bool(DATASET_NAME.fullmatch(name))


def is_variant_name(name) -> bool:
  return isinstance(name, str) and bool(VARIANT_NAME.fullmatch(name))


def is_split_name(name) -> bool:
  return isinstance(name, str) and bool(SPLIT_NAME.fullmatch(name))


def is_class_name(name) -> bool:
  return (isinstance(name, str) and bool(name) and
          not _CONTROL_CHARACTER.search(name))


# shard_name in TFDS's template language (dataset_info.json).
TFDS_FILEPATH_TEMPLATE = '{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}'


def shard_name(dataset_name: str, split: str, shard: int,
               num_shards: int, file_format: str = 'tfrecord') -> str:
  return (f'{shard_prefix(dataset_name, split, file_format)}-{shard:05d}'
          f'-of-{num_shards:05d}')


# Beside each uncompressed shard, its index: one `offset length` line per
# record, the index format of the `tfrecord` package (PyTorch's TFRecord
# reader), which it needs to give each DataLoader worker its own records.
# Named like the shard with `tfindex` for the format, so that no pattern
# for the shards (`NAME-SPLIT.tfrecord*`, `*.tfrecord-*`) matches it.
INDEX_FORMAT = 'tfindex'
# Where datasets written before that name kept it: SHARD + this suffix.
OLD_INDEX_SUFFIX = '.tfindex'
_SHARD_FORMAT = re.compile(r'\.tfrecord(-\d{5,}-of-\d{5,})$')


def index_name(shard_file: str) -> str:
  """The index of a shard (a name or a path ending in shard_name's)."""
  indexed, found = _SHARD_FORMAT.subn(rf'.{INDEX_FORMAT}\1', shard_file)
  if not found:
    raise ValueError(f'{shard_file}: not a shard name (...'
                     '.tfrecord-SSSSS-of-NNNNN)')
  return indexed


def old_index_name(shard_file: str) -> str:
  return shard_file + OLD_INDEX_SUFFIX


# What Beam's file-based sink's shard_name_template makes shard_name's
# suffix.
SHARD_NAME_TEMPLATE = '-SSSSS-of-NNNNN'


_SHARD_NUMBERS = re.compile(r'-(\d{5,})-of-(\d{5,})$')


def shard_stem(path: str):
  """A shard's name (or path) less its -SSSSS-of-NNNNN: its split's
  prefix; None for a name that is not a shard's."""
  stem, found = _SHARD_NUMBERS.subn('', path)
  return stem if found else None


def shard_numbers(path: str):
  """(shard, num_shards) from a shard's name (...-00002-of-00005)."""
  match = _SHARD_NUMBERS.search(path)
  if match is None:
    raise ValueError(f'{path}: not a shard name (...-SSSSS-of-NNNNN)')
  return int(match.group(1)), int(match.group(2))


# The random-access copy of each shard (--array_record), named as TFDS
# names that format.
ARRAY_RECORD = 'array_record'


def shard_prefix(dataset_name: str, split: str,
                 file_format: str = 'tfrecord') -> str:
  """File-name prefix of a split's shards, as TFDS names them."""
  return f'{dataset_name}-{split}.{file_format}'


def escape_pattern(path: str) -> str:
  """`path` as a Beam file pattern that matches it literally: [, *, ? are
  glob characters there. Beam's patterns cannot quote, so [ becomes the
  class [\\[], which also matches a backslash: callers keep only results
  under the exact folder they asked for (`within`)."""
  return re.sub(r'([*?])', r'[\1]', path.replace('[', '[\\[]'))


def pattern_under(folder: str, pattern: str) -> str:
  """A glob pattern for names under `folder`, the folder's own name taken
  literally."""
  return escape_pattern(folder.rstrip('/')) + '/' + pattern


def within(folder: str, paths):
  """The paths that lie under `folder`, compared as strings."""
  prefix = folder.rstrip('/') + '/'
  return [p for p in paths if p.startswith(prefix)]


def temp_dir(dataset_dir: str) -> str:
  """The folder a run writes into until it succeeds (TEMP_DIR)."""
  return join(dataset_dir, TEMP_DIR)


def join(directory: str, name: str) -> str:
  """Joins for local paths and URIs (gs://...) alike."""
  return directory.rstrip('/') + '/' + name


def find_dataset_dir(output_dir: str, exists, glob) -> str:
  """output_dir, or the one OUT/{name}/{version} inside it (--tfds_layout).

  `exists` and `glob` are the caller's file system calls: the reader uses
  tf.io.gfile (no Beam), the pipeline's tools Beam's FileSystems.
  """
  if exists(join(output_dir, METADATA_FILE)):
    return output_dir
  nested = within(output_dir,
                  glob(pattern_under(output_dir, '*/*/' + METADATA_FILE)))
  if len(nested) == 1:
    return nested[0][:-len(METADATA_FILE) - 1]
  return output_dir
