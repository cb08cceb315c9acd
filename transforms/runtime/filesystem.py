"""Known paths on Beam's file systems, taken literally.

Beam's `FileSystems.match` reads a path as a glob pattern, and so do
`LocalFileSystem.delete` and `GCSFileSystem.delete` underneath: `rec[1].wav`
would be `rec1.wav`, and a folder `out[1]` could not be deleted at all.
Every call on one known file or folder goes through here.
"""

import errno
import os
import re
import shutil
import stat
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


class NotAFile(OSError):
  """A name wavbeam writes is taken by something it must not write through
  (a symbolic link, a FIFO, a folder)."""

  def __init__(self, path: str):
    super().__init__(f'{path} is {kind_of(path)}, not a regular file: '
                     'wavbeam writes that name itself, never through a '
                     'link or into a special file; remove it')
    self.path = path


def kind_of(path: str) -> str:
  """What a local path is, in words ('a symbolic link to /x', 'a FIFO')."""
  try:
    mode = os.lstat(path).st_mode
  except FileNotFoundError:
    return 'missing'
  if stat.S_ISLNK(mode):
    return f'a symbolic link to {os.readlink(path)}'
  for test, name in ((stat.S_ISDIR, 'a folder'), (stat.S_ISFIFO, 'a FIFO'),
                     (stat.S_ISSOCK, 'a socket'), (stat.S_ISCHR, 'a device'),
                     (stat.S_ISBLK, 'a device'), (stat.S_ISREG, 'a file')):
    if test(mode):
      return name
  return 'not a regular file'


def open_regular(path: str, flags: int, mode: int = 0o666) -> int:
  """os.open(path, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) of a
  regular file: NotAFile naming what is there instead (a symbolic link
  planted at the name would otherwise send the write to its target; a
  FIFO would block the open until some reader came)."""
  try:
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                 mode)
  except OSError as e:
    if e.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
      raise NotAFile(path) from None
    raise
  if not stat.S_ISREG(os.fstat(fd).st_mode):
    os.close(fd)
    raise NotAFile(path)
  return fd


def open_regular_file(path: str, flags: int, mode: str,
                      permissions: int = 0o666):
  """open_regular's file, blocking from then on, as a file object opened
  in `mode` ('rb', 'wb', ...)."""
  fd = open_regular(path, flags, permissions)
  os.set_blocking(fd, True)
  return os.fdopen(fd, mode)


def create(path: str):
  """FileSystems.create(path), except that a local file is opened without
  following a symbolic link at its name (NotAFile then, as for a FIFO or
  a folder there): nothing wavbeam writes in an output folder can be
  aimed elsewhere by a link planted in it."""
  if not is_local(path):
    return FileSystems.create(path)
  folder = os.path.dirname(path)
  if folder:
    os.makedirs(folder, exist_ok=True)
  return open_regular_file(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 'wb')


def move_into_place(tmp: str, path: str) -> None:
  """Renames the finished file `tmp` to `path`, replacing what is there:
  locally by one rename, so a reader (or a kill) finds the old file or the
  new one, never neither; on object stores, by a delete and a rename."""
  if is_local(path):
    os.replace(tmp, path)
    return
  if FileSystems.exists(path):
    delete([path])
  FileSystems.rename([tmp], [path])


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
