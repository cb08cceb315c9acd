"""Opening and reading audio files with libsndfile: no Beam.

The pipeline (transforms/inputs/audio_io) opens its files through Beam's file
systems and hands the open file here; the inference featurizer
(pipeline/featurizer) opens local files here directly. Both then read the
same samples the same way, so a recording featurized at inference equals
the dataset's examples of it bit for bit.
"""

import contextlib
import io
import os
import stat
from typing import Callable, Optional

import numpy as np
import soundfile as sf

from transforms.inputs.file_reports import BadWav

_NOT_REGULAR = ((stat.S_ISFIFO, 'a FIFO'), (stat.S_ISSOCK, 'a socket'),
                (stat.S_ISCHR, 'a character device'),
                (stat.S_ISBLK, 'a block device'), (stat.S_ISDIR, 'a folder'))


def _check_regular(mode: int) -> None:
  if not stat.S_ISREG(mode):
    kind = next((name for test, name in _NOT_REGULAR if test(mode)),
                'not a regular file')
    raise BadWav(f'not a regular file: {kind}; only regular files are read')


def open_local(path: str):
  """A local file, opened for reading; raises BadWav, without blocking,
  when the path (or the file a symbolic link leads to) is not a regular
  file: reading a FIFO or a terminal would wait forever."""
  # Checked before opening (a socket cannot be opened) and on the
  # descriptor opened (a file swapped meanwhile); O_NONBLOCK, because
  # opening a FIFO waits for a writer without it.
  _check_regular(os.stat(path).st_mode)
  fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, 'O_CLOEXEC', 0))
  try:
    _check_regular(os.fstat(fd).st_mode)
    os.set_blocking(fd, True)
    return os.fdopen(fd, 'rb')  # what Beam's LocalFileSystem.open returns
  except BaseException:
    os.close(fd)
    raise


@contextlib.contextmanager
def open_sound(raw):
  """The SoundFile of an open binary file."""
  try:
    # A local file: libsndfile reads the descriptor, natively, with the
    # GIL released. Other file systems (gs://) give a file object, read
    # through Python callbacks.
    source = raw.fileno()
  except (AttributeError, OSError, io.UnsupportedOperation):
    source = raw
  with sf.SoundFile(source, closefd=False) if isinstance(source, int) \
      else sf.SoundFile(raw) as wav:
    yield wav


# libsndfile's lossy decoders (MPEG, Vorbis, Opus) do not seek to the
# exact sample: after a seek (even to frame 0, as soundfile.read does),
# samples differ by a float32 step or more from a decode from the start,
# and an MP3's values even move with the block size read (soundfile 0.14,
# libsndfile 1.2.2; tests/test_audio_formats.py). Such a file is decoded
# whole, in one read of the just-opened file, whichever windows are wanted.
WHOLE_DECODE_SUBTYPES = frozenset(
    {'MPEG_LAYER_I', 'MPEG_LAYER_II', 'MPEG_LAYER_III', 'VORBIS', 'OPUS'})
# The float32 samples of one such file (70 min of 16 kHz mono), and of all
# those a shard task keeps decoded at once (audio_io.OpenFiles).
MAX_DECODED_BYTES = 256 * 2**20
MAX_DECODED_CACHE_BYTES = 2 * MAX_DECODED_BYTES

# path -> an open binary file: open_local, or audio_io's Beam file systems.
Opener = Callable[[str], object]


def decoded_bytes(frames: int, channels: int) -> int:
  return frames * channels * np.dtype(np.float32).itemsize


class DecodedWhole:
  """A file of WHOLE_DECODE_SUBTYPES, decoded from its start as far as
  reads need; seek and read as on a SoundFile.

  One read from the start of the just-opened file gives the first n frames
  of the whole decode (tested), so the first read decodes only up to where
  it ends (a shuffled shard usually wants one window of a clip: on 5-s MP3
  clips in 5 windows, decoding each clip whole for every window made the
  shuffled run 0.89x the plain loop, against 1.09x); a read past that
  decodes the whole file again, in one read, opened with `open_binary`.
  """

  def __init__(self, path: str, wav, open_binary: Opener = open_local):
    self.path, self._wav = path, wav   # wav: opened, nothing read yet
    self._open_binary = open_binary
    self.frames, self.channels = wav.frames, wav.channels
    self.samplerate, self.subtype = wav.samplerate, wav.subtype
    self.nbytes = decoded_bytes(self.frames, self.channels)
    check_decodable(wav.subtype, self.frames, wav.samplerate, self.channels)
    self.samples = np.empty((0, self.channels), np.float32)
    self._frame = 0

  def seek(self, frame: int) -> None:
    self._frame = frame

  def read(self, count: int, dtype='float64', always_2d=True) -> np.ndarray:
    del dtype, always_2d  # always float64, (frames, channels)
    stop = min(self._frame + count, self.frames)
    if stop > len(self.samples):
      self._decode(stop if self._wav is not None else None)
    block = self.samples[self._frame:stop]
    self._frame += len(block)
    # The decoders produce float32: float64 holds those values exactly.
    return block.astype(np.float64)

  def _decode(self, stop: Optional[int]) -> None:
    """The first `stop` frames, or (None) the whole file."""
    frames = -1 if stop is None else stop
    if self._wav is not None:
      wav, self._wav = self._wav, None
      samples = wav.read(frames, dtype='float32', always_2d=True)
    else:
      with self._open_binary(self.path) as raw, open_sound(raw) as wav:
        samples = wav.read(frames, dtype='float32', always_2d=True)
    wanted = self.frames if stop is None else stop
    if len(samples) != wanted:
      raise BadWav(f'decoded {len(samples)} frames where the header '
                   f'declares {self.frames}')
    self.samples = samples


def check_decodable(subtype: str, frames: int, rate: int,
                    channels: int) -> None:
  """Raises BadWav when a file decoded whole would exceed
  MAX_DECODED_BYTES."""
  if decoded_bytes(frames, channels) > MAX_DECODED_BYTES:
    raise BadWav(
        f'{subtype} audio is decoded whole (its seeks are not sample-exact)'
        f', up to {MAX_DECODED_BYTES >> 20} MiB of float32 samples; this '
        f'file has {frames / rate:.1f} s of {channels}-channel {rate} Hz '
        f'({decoded_bytes(frames, channels) >> 20} MiB): convert it to '
        'FLAC or WAV')


@contextlib.contextmanager
def open_audio(path: str, open_binary: Opener = open_local):
  """For reading samples: the open SoundFile, or a DecodedWhole for the
  formats that cannot seek exactly."""
  with open_binary(path) as raw, open_sound(raw) as wav:
    yield (DecodedWhole(path, wav, open_binary)
           if wav.subtype in WHOLE_DECODE_SUBTYPES else wav)


def read_frames(wav, start: int, count: int) -> np.ndarray:
  """Frames [start, start + count) of an open file (a SoundFile, a
  DecodedWhole or audio_io.PlainWav) as (frames, channels) float64;
  BadWav when the file ends first."""
  wav.seek(start)
  block = wav.read(count, dtype='float64', always_2d=True)
  if block.shape[0] != count:
    raise BadWav(f'read {block.shape[0]} of {count} frames from {start}')
  return block
