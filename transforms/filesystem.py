"""Known paths on Beam's file systems, taken literally.

Beam's `FileSystems.match` reads a path as a glob pattern, and so do
`LocalFileSystem.delete` and `GCSFileSystem.delete` underneath: `rec[1].wav`
would be `rec1.wav`, and a folder `out[1]` could not be deleted at all.
Every call on one known file or folder goes through here.
"""

import os
import re
import shutil
from typing import Iterable

from apache_beam.io.filesystem import (BeamIOError, CompressionTypes,
                                       FileMetadata)
from apache_beam.io.filesystems import FileSystems

from pipeline.contract import naming

_GLOB = re.compile(r'[\[*?]')


def is_local(path: str) -> bool:
  # Beam gives a path without a scheme to its LocalFileSystem. Asking
  # FileSystems.get_filesystem instead walks every registered file system
  # class, a few percent of a shard task on short clips.
  return FileSystems.get_scheme(path) is None


def metadata(path: str):
  """Beam's FileMetadata (path, size_in_bytes, last_updated_in_seconds)."""
  if is_local(path):
    st = os.stat(path)  # one stat, where Beam's takes two
    return FileMetadata(path, st.st_size, st.st_mtime)
  return FileSystems.get_filesystem(path).metadata(path)


def delete(paths: Iterable[str]) -> None:
  """Deletes files, and folders with what they hold, at exactly these paths;
  raises BeamIOError naming those that could not be deleted."""
  failed, others = {}, []
  for path in paths:
    if not is_local(path):
      # Object stores delete by pattern: escape the name (a backslash in
      # the place of a [ would match too; Beam's patterns cannot quote).
      others.append(naming.escape_pattern(path) if _GLOB.search(path)
                    else path)
      continue
    try:
      if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
      else:
        os.remove(path)
    except OSError as e:
      failed[path] = e
  if others:
    FileSystems.delete(others)
  if failed:
    raise BeamIOError('Delete operation failed', failed)


def beam_compression(compression: str) -> str:
  """The --compression name ('none' or 'gzip') as Beam's CompressionTypes."""
  return (CompressionTypes.GZIP if compression == 'gzip'
          else CompressionTypes.UNCOMPRESSED)
