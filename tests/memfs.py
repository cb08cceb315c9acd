"""mem://: an in-memory Beam FileSystem, for tests only.

Importing this module registers it (Beam finds FileSystem subclasses by
their scheme). Folders are path prefixes. Shared by every thread of the
process, so it works with the in-process local runner.
"""

import io
import threading

from apache_beam.io.filesystem import (BeamIOError, CompressedFile,
                                       CompressionTypes, FileMetadata,
                                       FileSystem)

_FILES = {}
DELETED = []  # every path deleted, in order, for tests of ordering
_LOCK = threading.Lock()


class _Writer(io.BytesIO):

  def __init__(self, path):
    super().__init__()
    self._path = path

  def close(self):
    if not self.closed:
      with _LOCK:
        _FILES[self._path] = self.getvalue()
    super().close()


def _compressed(f, path, compression_type, mode):
  if compression_type == CompressionTypes.AUTO:
    compression_type = CompressionTypes.detect_compression_type(path)
  if compression_type == CompressionTypes.UNCOMPRESSED:
    return f
  return CompressedFile(f, compression_type)


class InMemoryFileSystem(FileSystem):

  @classmethod
  def scheme(cls):
    return 'mem'

  def join(self, basepath, *paths):
    return '/'.join([basepath.rstrip('/')] + [p.strip('/') for p in paths])

  def split(self, path):
    head, _, tail = path.rstrip('/').rpartition('/')
    return head, tail

  def mkdirs(self, path):
    pass

  def has_dirs(self):
    return False

  def _list(self, dir_or_prefix):
    with _LOCK:
      items = sorted(_FILES.items())
    for path, data in items:
      if path.startswith(dir_or_prefix):
        yield FileMetadata(path, len(data), 0.0)

  def create(self, path, mime_type='application/octet-stream',
             compression_type=CompressionTypes.AUTO):
    return _compressed(_Writer(path), path, compression_type, 'wb')

  def open(self, path, mime_type='application/octet-stream',
           compression_type=CompressionTypes.AUTO):
    with _LOCK:
      if path not in _FILES:
        raise BeamIOError(f'{path} not found', {path: FileNotFoundError()})
      data = _FILES[path]
    return _compressed(io.BytesIO(data), path, compression_type, 'rb')

  def copy(self, source_file_names, destination_file_names):
    with _LOCK:
      for a, b in zip(source_file_names, destination_file_names):
        _FILES[b] = _FILES[a]

  def rename(self, source_file_names, destination_file_names):
    with _LOCK:
      for a, b in zip(source_file_names, destination_file_names):
        _FILES[b] = _FILES.pop(a)

  def exists(self, path):
    with _LOCK:
      prefix = path.rstrip('/') + '/'
      return path in _FILES or any(p.startswith(prefix) for p in _FILES)

  def size(self, path):
    with _LOCK:
      return len(_FILES[path])

  def last_updated(self, path):
    return 0.0

  def checksum(self, path):
    return str(self.size(path))

  def metadata(self, path):
    return FileMetadata(path, self.size(path), 0.0)

  def delete(self, paths):
    with _LOCK:
      for path in paths:
        prefix = path.rstrip('/') + '/'
        for p in [p for p in _FILES if p == path or p.startswith(prefix)]:
          del _FILES[p]
          DELETED.append(p)


def put(path, data: bytes):
  with _LOCK:
    _FILES[path] = data


def get(path) -> bytes:
  with _LOCK:
    return _FILES[path]


def listing(prefix):
  with _LOCK:
    return sorted(p for p in _FILES if p.startswith(prefix))
