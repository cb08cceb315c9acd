"""Files that carry a forked worker's output to the launcher, reused.

A worker writes what it made into a file of the spool folder and returns
the file's path; the launcher reads it and releases the file, which a
worker's next write takes over. Kept files keep their page-cache pages:
1.8 GB written, read and deleted in 12 MB files cost 0.75 s of CPU here,
written over in files already there 0.2 s. Only local folders (the forked
workers' condition): a file is claimed by renaming it, which one process
wins.
"""

import os
import shutil
import time
import uuid

from transforms.runtime import filesystem

_FREE = 'free-'  # a released file's name begins so


def make(parent: str, prefix: str) -> str:
  """A new folder in `parent` (made if missing), of a name no earlier
  file or link there can hold: `prefix`-(a random id)."""
  os.makedirs(parent, exist_ok=True)
  folder = os.path.join(parent, f'{prefix}-{uuid.uuid4().hex}')
  os.mkdir(folder, 0o700)
  return folder


def claim(folder: str) -> str:
  """The path of a file this process alone may write: a released one of
  `folder`, renamed, or else a new name in it. FileNotFoundError when the
  folder is gone: its reader has stopped."""
  mine = os.path.join(folder, f'{os.getpid()}-{uuid.uuid4().hex}')
  for name in [e.name for e in os.scandir(folder)
               if e.name.startswith(_FREE)]:
    try:
      os.rename(os.path.join(folder, name), mine)
      return mine
    except FileNotFoundError:  # another process took it first
      continue
  return mine


def open_claimed(path: str):
  """A claimed file opened to be written from its start, its old bytes
  (cut at close_claimed) left in place until written over; NotAFile for
  a link or anything else but a file there."""
  return filesystem.open_regular_file(path, os.O_WRONLY | os.O_CREAT, 'wb',
                                      0o600)


def close_claimed(f) -> None:
  """Ends a file opened by open_claimed where its writing ended."""
  f.truncate(f.tell())
  f.close()


def release(path: str) -> None:
  """Hands a file read to the end back to the folder's writers."""
  folder, _ = os.path.split(path)
  os.rename(path, os.path.join(folder, _FREE + uuid.uuid4().hex))


def remove(folder: str) -> None:
  """The folder and every file in it. Renamed first: a worker still
  making a file there (a unit nobody waits for now) then finds no folder.
  One whose call had already found it may still add a file as the folder
  is emptied (one call a worker: it finds no folder next), so emptying
  is tried again until the folder goes."""
  gone = f'{folder}.{uuid.uuid4().hex}.removed'
  try:
    os.rename(folder, gone)
  except FileNotFoundError:
    return
  for pause in (0.0, 0.001, 0.01, 0.1):
    time.sleep(pause)
    shutil.rmtree(gone, ignore_errors=True)
    if not os.path.lexists(gone):
      return
