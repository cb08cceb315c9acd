"""What probing and reading report about an input file: a probed file
(WavInfo), a rejection with its reason (Rejection), the error that becomes
one (BadWav).
No Beam: the planning and feature modules use them without I/O.
"""

import dataclasses
import re
import struct
from typing import Optional, Tuple

import crc32c
import soundfile as sf

from pipeline.contract.errors import WavbeamError
from pipeline.contract.rejects import EXCLUDED

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
  # The file as probed: a read that finds another size or modification
  # time rejects its windows instead of mixing two versions of a file.
  size: int = -1
  mtime: float = -1.0
  # Where the samples of a plain WAV start (plain_wav_header): such a file
  # is read without libsndfile. -1: read through libsndfile.
  data_offset: int = -1
  # CRC32C of the file's first HEAD_BYTES: with the size, its identity
  # (sources.jsonl), by which --append tells a new or changed recording.
  head_crc: int = -1


# What probing reads of every file: the header, and the start of the data.
HEAD_BYTES = 1 << 16


def head_crc(head: bytes) -> int:
  return crc32c.crc32c(head[:HEAD_BYTES])


NOTE = 'note'  # a Rejection stage: the file is used, with a remark
# EXCLUDED, a Rejection stage too: --exclude left the file out.
# A Rejection stage: one segment of a file is left out when planned (its
# frame range says which), the file's others are used.
SEGMENT = 'segment'


@dataclasses.dataclass(frozen=True)
class Rejection:
  path: str
  reason: str
  stage: str     # list, probe, plan, segment, read, note, exclude
  frame_range: Optional[Tuple[int, int]] = None  # set when part of a file
  split: str = ''   # for windows rejected when read: the file's split

  @property
  def is_note(self) -> bool:
    return self.stage == NOTE

  @property
  def is_excluded(self) -> bool:
    return self.stage == EXCLUDED

  def to_json(self) -> dict:
    if self.is_note:
      return {'path': self.path, 'note': self.reason}
    out = {'path': self.path, 'stage': self.stage, 'reason': self.reason}
    if self.frame_range is not None:
      out['frames'] = list(self.frame_range)
    return out


class BadWav(WavbeamError):
  """The file cannot be used; the message is the recorded reason."""


def short_error(e: Exception) -> str:
  text = ' '.join(str(e).split())
  # soundfile names the file object or descriptor (which differs between
  # runs), not the path; the record has the path.
  text = re.sub(r'^Error opening (<[^>]*>|\d+): ', '', text)
  return text[:300] or type(e).__name__


def unreadable(e: Exception) -> BadWav:
  """The BadWav an input error (INPUT_ERRORS) becomes."""
  return BadWav(f'unreadable: {short_error(e)}')
