"""Reading WAV files through Beam's FileSystems: listing, probing, ranges.

Every path goes through `FileSystems`, so `gs://` and other Beam file systems
work like local folders; soundfile reads from the file object it returns.
"""

import collections
import contextlib
import dataclasses
import io
import os
import re
import struct
from typing import List, Optional, Tuple

import numpy as np
import soundfile as sf
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.localfilesystem import LocalFileSystem

# Errors that mean "this input is bad", as opposed to bugs in our code.
INPUT_ERRORS = (sf.LibsndfileError, RuntimeError, OSError, ValueError,
                EOFError, struct.error)


@dataclasses.dataclass(frozen=True)
class WavInfo:
  index: int          # position in the sorted corpus listing
  path: str
  frames: int
  sample_rate: int
  channels: int
  subtype: str


@dataclasses.dataclass(frozen=True)
class Rejection:
  path: str
  reason: str
  stage: str                                  # probe, plan or read
  frame_range: Optional[Tuple[int, int]] = None  # set when part of a file

  def to_json(self) -> dict:
    out = {'path': self.path, 'stage': self.stage, 'reason': self.reason}
    if self.frame_range is not None:
      out['frames'] = list(self.frame_range)
    return out


class BadWav(Exception):
  """The file cannot be used; the message is the recorded reason."""


def list_wav_files(input_dir: str) -> List[str]:
  """All .wav files (any case) under input_dir, recursively, sorted.

  Directories are searched, not listed, whatever their name. On a local
  disk, names Beam's listing skips because they cannot be stat'ed (broken
  symbolic links) are listed too, so that probing rejects them with a
  reason instead of losing them silently.
  """
  pattern = input_dir.rstrip('/') + '/**'
  result = FileSystems.match([pattern])[0]
  paths = {m.path for m in result.metadata_list}
  if isinstance(FileSystems.get_filesystem(input_dir), LocalFileSystem):
    paths.update(os.path.join(d, name)
                 for d, _, names in os.walk(input_dir) for name in names)
  return sorted(p for p in paths if p.lower().endswith('.wav'))


def open_binary(path: str):
  return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


@contextlib.contextmanager
def open_wav(path: str):
  with open_binary(path) as raw:
    try:
      # A local file: libsndfile reads the descriptor FileSystems opened,
      # natively, with the GIL released. Other file systems (gs://) give a
      # file object, read through Python callbacks.
      source = raw.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
      source = raw
    with sf.SoundFile(source, closefd=False) if isinstance(source, int) \
        else sf.SoundFile(raw) as wav:
      yield wav


def declared_data_bytes(head: bytes) -> Optional[Tuple[int, int]]:
  """(data offset, declared data size) from a RIFF/RIFX header, or None.

  None when the header is not plain RIFF/RIFX WAVE (RF64, other containers)
  or the size is the 'unknown' marker used by streaming writers.
  """
  if len(head) < 12 or head[8:12] != b'WAVE' or head[:4] not in (b'RIFF',
                                                                b'RIFX'):
    return None
  fmt = '<I' if head[:4] == b'RIFF' else '>I'
  pos = 12
  while pos + 8 <= len(head):
    chunk_id = head[pos:pos + 4]
    (size,) = struct.unpack(fmt, head[pos + 4:pos + 8])
    if chunk_id == b'data':
      return (None if size in (0, 0xFFFFFFFF) else (pos + 8, size))
    pos += 8 + size + (size & 1)
  return None


def probe(index: int, path: str) -> WavInfo:
  """Reads the header (and one frame at the end); raises BadWav."""
  try:
    with open_binary(path) as raw:
      head = raw.read(1 << 16)
    size = FileSystems.match([path])[0].metadata_list[0].size_in_bytes
    if size == 0:
      raise BadWav('empty file (0 bytes)')
    with open_wav(path) as wav:
      info = WavInfo(index, path, wav.frames, wav.samplerate, wav.channels,
                     wav.subtype)
      if info.frames > 0:
        wav.seek(info.frames - 1)
        if wav.read(1, dtype='float64', always_2d=True).shape[0] != 1:
          raise BadWav('unreadable: last frame cannot be read')
  except BadWav:
    raise
  except INPUT_ERRORS as e:
    raise BadWav(f'unreadable: {_short(e)}') from e
  if info.frames == 0:
    raise BadWav('empty: no audio frames')
  declared = declared_data_bytes(head)
  if declared is not None:
    offset, data_bytes = declared
    if offset + data_bytes > size:
      raise BadWav(
          f'truncated: header declares {data_bytes} data bytes, the file '
          f'holds {max(0, size - offset)}')
  return info


def _read(wav, start: int, count: int) -> np.ndarray:
  wav.seek(start)
  block = wav.read(count, dtype='float64', always_2d=True)
  if block.shape[0] != count:
    raise BadWav(f'read {block.shape[0]} of {count} frames from {start}')
  return block


def read_range(path: str, start: int, count: int) -> np.ndarray:
  """Frames [start, start + count) as a (frames, channels) float64 array.

  float64 holds every PCM sample exactly (32-bit included); samples are full
  scale, [-1, 1) for PCM.
  """
  with open_wav(path) as wav:
    return _read(wav, start, count)


class OpenFiles:
  """Keeps up to `max_open` WAV files open, least recently used closed first.

  A shard reads windows scattered over many files; reopening a file (and
  re-parsing its header) for every window would cost more than the read.
  Not shared between threads: one per shard task.
  """

  def __init__(self, max_open: int = 256):
    self.max_open = max_open
    self._open = collections.OrderedDict()  # path -> (stack, SoundFile)

  def read_range(self, path: str, start: int, count: int) -> np.ndarray:
    if path in self._open:
      self._open.move_to_end(path)
    else:
      if len(self._open) >= self.max_open:
        _, (stack, _) = self._open.popitem(last=False)
        stack.close()
      stack = contextlib.ExitStack()
      try:
        wav = stack.enter_context(open_wav(path))
      except BaseException:
        stack.close()
        raise
      self._open[path] = (stack, wav)
    return _read(self._open[path][1], start, count)

  def close(self):
    while self._open:
      _, (stack, _) = self._open.popitem()
      stack.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def _short(e: Exception) -> str:
  text = ' '.join(str(e).split())
  # soundfile names the file object or descriptor (which differs between
  # runs), not the path; the record has the path.
  text = re.sub(r'^Error opening (<[^>]*>|\d+): ', '', text)
  return text[:300] or type(e).__name__
