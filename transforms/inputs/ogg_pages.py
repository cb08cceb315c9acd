"""Checks the pages of an Ogg file (Vorbis, Opus) before it is decoded.

libvorbisfile and libopusfile skip a page whose CRC does not match and go
on decoding after it, without an error: a flipped byte gives shorter audio
whose samples after the damage are not those of the recording, and the
frame count libsndfile reports already leaves the page out. Each page
carries a CRC-32 of itself (RFC 3533), so the damage is found by
recomputing them.
"""

import struct
import zlib
from typing import Optional, Tuple

CAPTURE = b'OggS'
_HEADER = struct.Struct('<4sBBqIIIB')  # RFC 3533 section 6, 27 bytes
_EOS = 0x04
# Ogg's CRC-32 (polynomial 0x04C11DB7, initial value 0, no reflection, no
# final xor) is zlib's reflected CRC-32 of the bit-reversed bytes, itself
# bit-reversed: zlib's C loop instead of a Python one per byte.
_REVERSED_BITS = bytes(int(f'{b:08b}'[::-1], 2) for b in range(256))


def page_crc(page: bytes) -> int:
  """The CRC an Ogg page header holds for `page` (its CRC field zeroed)."""
  raw = zlib.crc32(page.translate(_REVERSED_BITS), 0xFFFFFFFF) ^ 0xFFFFFFFF
  return int(f'{raw:032b}'[::-1], 2)


def check(data: bytes) -> Tuple[Optional[str], Optional[str]]:
  """(problem, note) for a whole Ogg file's bytes.

  A problem (the file cannot be decoded faithfully): bytes that are not a
  page, a page whose CRC does not match, a missing page (a gap in a
  stream's page sequence numbers), a last page cut short. A note (the
  audio is whole as far as it goes): no stream ends with an end-of-stream
  page, so the file may have been cut at a page boundary.
  """
  pos, expected, ended = 0, {}, set()
  view = memoryview(data)
  while pos < len(data):
    if len(data) - pos < _HEADER.size:
      return f'Ogg file cut: {len(data) - pos} bytes after the last page', None
    capture, _, flags, _, serial, sequence, crc, segments = \
        _HEADER.unpack_from(data, pos)
    if capture != CAPTURE:
      return f'damaged Ogg file: no page starts at byte {pos}', None
    body = pos + _HEADER.size + segments
    end = body + sum(view[pos + _HEADER.size:body])
    if end > len(data):
      return (f'Ogg file cut: the page at byte {pos} needs {end - pos} '
              f'bytes, {len(data) - pos} are left'), None
    page = bytearray(view[pos:end])
    page[22:26] = b'\0\0\0\0'
    if page_crc(bytes(page)) != crc:
      return (f'damaged Ogg page at byte {pos} (its CRC does not match): '
              'decoders skip it silently'), None
    if serial in expected and sequence != expected[serial]:
      return (f'Ogg page {expected[serial]} of stream {serial} is missing '
              f'(byte {pos} holds page {sequence})'), None
    expected[serial] = sequence + 1
    if flags & _EOS:
      ended.add(serial)
    pos = end
  if not expected:
    return 'empty Ogg file: no pages', None
  if not ended:
    return None, ('no Ogg end-of-stream page: the file may have been cut '
                  'at a page boundary; read the pages it holds')
  return None, None
