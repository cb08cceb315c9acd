"""Opening a dataset folder: the one reader of metadata.json.

Every reader and command opens a dataset through `open_dataset`, with the
file system calls it has (`LOCAL` here; TensorFlow's gfile in replay;
Beam's FileSystems in the commands): it finds the folder (or the TFDS
layout inside it), tells a missing dataset from an incomplete one, checks
metadata.json (metadata.parse) and merges the parts --append added
(parts.load). One failure behaviour: DatasetError, naming the folder or
file and what is wrong.
"""

import dataclasses
import glob
import os
from typing import Callable, Dict, List, Optional, Tuple

from pipeline.contract import metadata as metadata_lib
from pipeline.contract import naming
from pipeline.contract import parts as parts_lib
from pipeline.contract.errors import DatasetError


@dataclasses.dataclass(frozen=True)
class FileSystem:
  exists: Callable[[str], bool]
  read_text: Callable[[str], str]
  glob: Callable[[str], List[str]]


def _read_local(path: str) -> str:
  with open(path, encoding='utf-8') as f:
    return f.read()


LOCAL = FileSystem(os.path.exists, _read_local, glob.glob)


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
