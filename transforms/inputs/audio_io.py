"""Reading WAV files through Beam's FileSystems: listing, probing, ranges.

Every path goes through `FileSystems`, so `gs://` and other Beam file systems
work like local folders; soundfile reads from the file object it returns.
"""

import collections
import contextlib
import itertools
import os
import struct
import sys
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.contract import naming
from transforms.runtime import filesystem
from transforms.inputs import ogg_pages
from transforms.inputs import sound_files
from transforms.inputs.file_reports import (  # noqa: F401  (reachable here)
    EXCLUDED, HEAD_BYTES, INPUT_ERRORS, NOTE, BadWav, Rejection, WavInfo,
    head_crc, short_error, unreadable)
from transforms.inputs.sound_files import (  # noqa: F401  (reachable here)
    MAX_DECODED_BYTES, MAX_DECODED_CACHE_BYTES, WHOLE_DECODE_SUBTYPES,
    DecodedWhole, check_decodable, decoded_bytes, read_frames)

# The records probing and reading make live in
# transforms/inputs/file_reports, and what opens and reads a file once it
# is open in transforms/inputs/sound_files (no Beam in either); their names
# stay reachable here.


def list_audio_files(input_dir: str,
                     extensions: Sequence[str] = ('wav',)) -> List[str]:
  """All files with one of `extensions` (any case) under input_dir,
  recursively, sorted.

  Directories are searched, not listed, whatever their name. On a local
  disk the tree is walked here, without recursion (Python's os.walk, under
  Beam's listing, recurses and fails past about 1,000 levels), and names
  that cannot be stat'ed (broken symbolic links), which Beam's listing
  skips, are listed too, so that probing rejects them with a reason
  instead of losing them silently. Symbolic links to folders are not
  followed, as in Beam's listing. Elsewhere, Beam's listing of the folder
  with its name escaped, so that [, ], * and ? in it are plain characters.
  """
  return sorted(iter_audio_files(input_dir, extensions))


def iter_audio_files(input_dir: str,
                     extensions: Sequence[str] = ('wav',)) -> Iterator[str]:
  """list_audio_files's names, unsorted, one at a time (a local walk holds
  only the folders still to visit)."""
  endings = tuple('.' + e.lower() for e in extensions)
  if filesystem.is_local(input_dir):
    folders = [input_dir]
    while folders:
      with os.scandir(folders.pop()) as entries:
        for entry in entries:
          if entry.is_dir(follow_symlinks=False):
            folders.append(entry.path)
          elif (entry.name.lower().endswith(endings) and
                not (entry.is_symlink() and os.path.isdir(entry.path))):
            yield entry.path
  else:
    pattern = naming.pattern_under(input_dir, '**')
    yield from (p for p in naming.within(input_dir, [
        m.path for m in FileSystems.match([pattern])[0].metadata_list])
                if p.lower().endswith(endings))


def count_audio_files(input_dir: str, extensions: Sequence[str],
                      up_to: int) -> int:
  """How many audio files input_dir holds, counting no further than up_to."""
  return sum(1 for _ in itertools.islice(
      iter_audio_files(input_dir, extensions), up_to))


def undecodable_name(path: str) -> Optional[str]:
  """For a path that is not valid UTF-8 (the OS gives its bytes as lone
  surrogates), the path with those bytes as \\xNN; else None."""
  try:
    path.encode('utf-8')
    return None
  except UnicodeEncodeError:
    return os.fsencode(path).decode('utf-8', 'backslashreplace')


def open_binary(path: str):
  """The file, opened for reading; raises BadWav, without blocking, when
  a local path (or the file a symbolic link leads to) is not a regular
  file: reading a FIFO or a terminal would wait forever."""
  if not filesystem.is_local(path):
    return FileSystems.open(path,
                            compression_type=CompressionTypes.UNCOMPRESSED)
  return sound_files.open_local(path)


@contextlib.contextmanager
def open_wav(path: str):
  with open_binary(path) as raw, sound_files.open_sound(raw) as wav:
    yield wav


def open_audio(path: str):
  """For reading samples: the open SoundFile, or a DecodedWhole for the
  formats that cannot seek exactly."""
  return sound_files.open_audio(path, open_binary)


# Data sizes that writers streaming to a pipe put in the header, meaning
# "unknown": 0xFFFFFFFF, and values near 2**31 (espeak writes 0x7FFFF000).
# libsndfile reads what the file holds after them.
STREAMING_SIZE_MIN = 0x7FFF0000


def declared_data_bytes(head: bytes) -> Optional[Tuple[int, int]]:
  """(data offset, declared data size) from a RIFF/RIFX header, or None.

  None when the header is not plain RIFF/RIFX WAVE (RF64, other
  containers).
  An 'unknown' size that streaming writers put there (0xFFFFFFFF among
  them) is returned as it is: see STREAMING_SIZE_MIN.
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
      return pos + 8, size
    pos += 8 + size + (size & 1)
  return None


# libsndfile's subtype of 16-bit PCM: such a file's windows can be read as
# the int16 values it stores.
PCM_16 = 'PCM_16'

# (format tag, bits per sample) -> libsndfile's subtype, for the plain
# little-endian WAVs that plain_wav_header reads itself.
_PLAIN_SUBTYPES = {(1, 8): 'PCM_U8', (1, 16): 'PCM_16', (1, 24): 'PCM_24',
                   (1, 32): 'PCM_32', (3, 32): 'FLOAT', (3, 64): 'DOUBLE'}


def plain_wav_header(head: bytes,
                     size: int) -> Optional[Tuple[int, int, int, str, int]]:
  """(frames, sample rate, channels, subtype, data offset) of a plain WAV,
  from its first bytes and its size; None for anything else, left to
  libsndfile.

  Plain: RIFF, a 16- or 18-byte fmt chunk of PCM or IEEE float with packed
  samples, no odd-sized chunk before the data, and the whole declared data
  chunk in the file. That is most WAVs, and libsndfile reports the same
  four values for them (tested); opening them with libsndfile took 30
  times as long per file as this (227 against 7 us per 1-s clip).
  """
  if len(head) < 12 or head[:4] != b'RIFF' or head[8:12] != b'WAVE':
    return None
  fmt, pos = None, 12
  while pos + 8 <= len(head):
    chunk_id = head[pos:pos + 4]
    (chunk_size,) = struct.unpack_from('<I', head, pos + 4)
    body = pos + 8
    if chunk_id == b'fmt ':
      if fmt is not None or chunk_size not in (16, 18) or \
          body + chunk_size > len(head):
        return None
      fmt = struct.unpack_from('<HHIIHH', head, body)
    elif chunk_id == b'data':
      if fmt is None:
        return None
      tag, channels, rate, _, block_align, bits = fmt
      subtype = _PLAIN_SUBTYPES.get((tag, bits))
      if (subtype is None or channels < 1 or rate < 1 or
          block_align != channels * bits // 8 or
          body + chunk_size > size or chunk_size < block_align):
        return None
      return chunk_size // block_align, rate, channels, subtype, body
    elif chunk_size & 1:
      return None  # writers disagree on the pad byte: libsndfile decides
    pos = body + chunk_size
  return None


def probe(index: int, path: str) -> Tuple[WavInfo, Optional[str]]:
  """Reads the header (and, unless the file is plain, one frame at the
  end): (info, a note on the file or None); raises BadWav."""
  try:
    note = None
    with open_binary(path) as raw:
      head = raw.read(HEAD_BYTES)
      if head[:4] == ogg_pages.CAPTURE:
        # Decoders skip a damaged page without an error: check them all.
        problem, note = ogg_pages.check(head + raw.read())
        if problem:
          raise BadWav(problem)
    meta = filesystem.metadata(path)
    size = meta.size_in_bytes
    if size == 0:
      raise BadWav('empty file (0 bytes)')
    plain = plain_wav_header(head, size)
    if plain is not None:
      frames, rate, channels, subtype, offset = plain
      return WavInfo(index, path, frames, rate, channels, subtype, size,
                     meta.last_updated_in_seconds, offset,
                     head_crc(head)), None
    with open_wav(path) as wav:
      info = WavInfo(index, path, wav.frames, wav.samplerate, wav.channels,
                     wav.subtype, size, meta.last_updated_in_seconds,
                     head_crc=head_crc(head))
      if info.subtype in WHOLE_DECODE_SUBTYPES:
        # The length is checked when decoded (DecodedWhole): a Vorbis seek
        # to the last frame fails on good files.
        check_decodable(info.subtype, info.frames, info.sample_rate,
                        info.channels)
      elif info.frames > 0:
        wav.seek(info.frames - 1)
        if wav.read(1, dtype='float64', always_2d=True).shape[0] != 1:
          raise BadWav('unreadable: last frame cannot be read')
  except BadWav:
    raise
  except INPUT_ERRORS as e:
    raise unreadable(e) from e
  declared = declared_data_bytes(head)
  if info.frames == 0:
    if declared is not None and declared[1] == 0 and size > declared[0]:
      raise BadWav(
          f'empty: header declares 0 data bytes, {size - declared[0]} bytes '
          'follow (a streaming writer left the size unset; rewrite the '
          'header, e.g. with sox)')
    raise BadWav('empty: no audio frames')
  if declared is not None:
    offset, data_bytes = declared
    if offset + data_bytes > size:
      if data_bytes >= STREAMING_SIZE_MIN:
        return info, (f'data size unknown (header declares {data_bytes} '
                      'bytes, a streaming placeholder): read the '
                      f'{info.frames} frames the file holds')
      # A size that is no placeholder and runs past the end: the file was
      # cut (an interrupted copy), so its recording is incomplete.
      raise BadWav(
          f'truncated: header declares {data_bytes} data bytes, the file '
          f'holds {max(0, size - offset)}')
  return info, note


# subtype -> (stored sample dtype, zero, scale to full scale). libsndfile's
# conversions to float64 are these same exact operations (powers of two).
_PLAIN_SAMPLES = {'PCM_U8': ('u1', 128, 2.0**-7),
                  'PCM_16': ('<i2', 0, 2.0**-15),
                  'PCM_24': ('<i4', 0, 2.0**-31),
                  'PCM_32': ('<i4', 0, 2.0**-31),
                  'FLOAT': ('<f4', 0, 1.0), 'DOUBLE': ('<f8', 0, 1.0)}


def decode_plain(data: bytes, subtype: str, channels: int) -> np.ndarray:
  """A plain WAV's sample bytes -> (frames, channels) float64, the values
  libsndfile gives (tested bit for bit)."""
  out = np.empty(len(data) // _sample_bytes(subtype), np.float64)
  decode_plain_into(data, subtype, out)
  return out.reshape(-1, channels)


def decode_plain_into(data: bytes, subtype: str, out: np.ndarray) -> None:
  """decode_plain's samples written into `out` (float64, one value per
  sample, any shape), converted and scaled in one pass."""
  dtype, zero, scale = _PLAIN_SAMPLES[subtype]
  if subtype == 'PCM_24':  # 3 bytes a sample: into the top of an int32
    packed = np.frombuffer(data, np.uint8).reshape(-1, 3)
    wide = np.zeros((len(packed), 4), np.uint8)
    wide[:, 1:] = packed
    samples = wide.view(dtype).ravel()
  else:
    samples = np.frombuffer(data, dtype)
  samples = samples.reshape(out.shape)
  if zero:
    np.subtract(samples, zero, out=out, dtype=np.float64)
    out *= scale
  elif scale != 1.0:
    np.multiply(samples, scale, out=out, dtype=np.float64)
  else:
    np.copyto(out, samples)


def always_finite(subtype: str) -> bool:
  """Integer PCM: every sample decodes to a finite value."""
  return subtype.startswith('PCM_')


def _sample_bytes(subtype: str) -> int:
  return 3 if subtype == 'PCM_24' else np.dtype(
      _PLAIN_SAMPLES[subtype][0]).itemsize


class PlainWav:
  """Reads frames of a plain WAV (WavInfo.data_offset set) from an open
  binary file, without libsndfile: 17 instead of 77 us per 1-s clip."""

  def __init__(self, raw, info: WavInfo):
    self.raw, self.info = raw, info
    self.frame_bytes = info.channels * _sample_bytes(info.subtype)

  def seek(self, frame: int) -> None:
    self.raw.seek(self.info.data_offset + frame * self.frame_bytes)

  def read(self, count: int, dtype='float64', always_2d=True) -> np.ndarray:
    del dtype, always_2d  # always float64, (frames, channels)
    count = max(0, min(count, self.info.frames - self._frame()))
    data = self.raw.read(count * self.frame_bytes)
    data = data[:len(data) - len(data) % self.frame_bytes]
    return decode_plain(data, self.info.subtype, self.info.channels)

  def read_into(self, out: np.ndarray) -> None:
    """The next out.size // channels frames decoded into `out` (float64),
    or, for int16 `out` and a PCM_16 file, their stored values; BadWav
    when the recording ends first."""
    start = self._frame()
    wanted = out.size // self.info.channels
    size = max(0, min(wanted, self.info.frames - start)) * self.frame_bytes
    stored = out.dtype == np.int16
    if stored and self.info.subtype != PCM_16:
      raise ValueError(f'int16 values of {self.info.subtype} samples')
    if stored and out.flags.c_contiguous and size == out.nbytes:
      done = _read_straight_into(self.raw, out)
      if done == size:
        return
    else:
      data = self.raw.read(size)
      done = len(data)
    if done != wanted * self.frame_bytes:
      raise BadWav(f'read {done // self.frame_bytes} of {wanted} '
                   f'frames from {start}')
    if stored:
      out[...] = np.frombuffer(data, '<i2').reshape(out.shape)
    else:
      decode_plain_into(data, self.info.subtype, out)

  def _frame(self) -> int:
    return (self.raw.tell() - self.info.data_offset) // self.frame_bytes


def _read_straight_into(raw, out: np.ndarray) -> int:
  """Fills `out` (contiguous int16) with the next bytes of `raw`, the
  little-endian values a PCM_16 file stores, without a copy in between;
  the number of bytes read (fewer where the file ends first)."""
  view, done = memoryview(out.reshape(-1).view(np.uint8)), 0
  while done < out.nbytes:
    got = raw.readinto(view[done:])
    if not got:
      break
    done += got
  if sys.byteorder != 'little':
    out.byteswap(inplace=True)
  return done


def read_range(path: str, start: int, count: int) -> np.ndarray:
  """Frames [start, start + count) as a (frames, channels) float64 array.

  float64 holds every PCM sample exactly (32-bit included); samples are full
  scale, [-1, 1) for PCM.
  """
  with open_audio(path) as wav:
    return read_frames(wav, start, count)


class OpenFiles:
  """Keeps up to `max_open` WAV files open, least recently used closed first.

  A shard reads windows scattered over many files; reopening a file (and
  re-parsing its header) for every window would cost more than the read.
  Files decoded whole (DecodedWhole) count against a memory budget too.
  Not shared between threads: one per shard task.
  """

  def __init__(self, max_open: int = 256,
               max_decoded_bytes: int = MAX_DECODED_CACHE_BYTES):
    self.max_open, self.max_decoded_bytes = max_open, max_decoded_bytes
    self._open = collections.OrderedDict()  # path -> (stack, SoundFile)
    self._decoded_bytes = 0

  def read_range(self, path: str, start: int, count: int,
                 probed: Optional[WavInfo] = None) -> np.ndarray:
    """As read_range(path, ...); with `probed`, raises BadWav when the file
    is no longer the one probed (checked when it is opened)."""
    return read_frames(self._opened(path, probed), start, count)

  def read_mono_into(self, path: str, start: int, out: np.ndarray,
                     probed: WavInfo) -> bool:
    """Frames [start, start + out.size) of a mono plain WAV decoded
    straight into `out`, the values read_range gives (float64 `out`), or
    the values the file stores (int16 `out`, a PCM_16 file); False, and
    nothing read, for any other file."""
    if probed.data_offset < 0 or probed.channels != 1 or (
        out.dtype == np.int16 and probed.subtype != PCM_16):
      return False
    wav = self._opened(path, probed)
    if not isinstance(wav, PlainWav):  # opened earlier without `probed`
      return False
    wav.seek(start)
    wav.read_into(out)
    return True

  def _opened(self, path: str, probed: Optional[WavInfo]):
    if path in self._open:
      self._open.move_to_end(path)
      return self._open[path][1]
    if probed is not None:
      check_unchanged(probed)
    if len(self._open) >= self.max_open:
      self._close_oldest()
    stack = contextlib.ExitStack()
    try:
      if probed is not None and probed.data_offset >= 0:
        wav = PlainWav(stack.enter_context(open_binary(path)), probed)
      else:
        wav = stack.enter_context(open_audio(path))
    except BaseException:
      stack.close()
      raise
    self._open[path] = (stack, wav)
    if isinstance(wav, DecodedWhole):
      self._decoded_bytes += wav.nbytes
      while (self._decoded_bytes > self.max_decoded_bytes and
             len(self._open) > 1):
        self._close_oldest()
    return wav

  def _close_oldest(self):
    _, (stack, wav) = self._open.popitem(last=False)
    if isinstance(wav, DecodedWhole):
      self._decoded_bytes -= wav.nbytes
    stack.close()

  def close(self):
    while self._open:
      self._close_oldest()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def check_unchanged(probed: WavInfo) -> None:
  """Raises BadWav when the file's size or modification time differ from
  when it was probed (rewritten in between, even to the same size)."""
  if probed.size < 0:
    return
  try:
    now = filesystem.metadata(probed.path)
  except INPUT_ERRORS as e:
    raise unreadable(e) from e
  if (now.size_in_bytes, now.last_updated_in_seconds) != (probed.size,
                                                          probed.mtime):
    raise BadWav(
        f'changed since it was probed (size {probed.size} -> '
        f'{now.size_in_bytes} bytes, modified {probed.mtime} -> '
        f'{now.last_updated_in_seconds}): rerun on a stable copy')
