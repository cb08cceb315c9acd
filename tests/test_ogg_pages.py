"""Ogg page checks against a bit-by-bit CRC and files libsndfile writes."""

import io
import os

import numpy as np
import pytest
import soundfile as sf

from tests import hostile
from transforms.inputs import ogg_pages


def _bitwise_crc(data: bytes) -> int:
  """RFC 3533's CRC-32: polynomial 0x04C11DB7, MSB first, init 0."""
  crc = 0
  for byte in data:
    crc ^= byte << 24
    for _ in range(8):
      crc = ((crc << 1) ^ 0x04C11DB7 if crc & 0x80000000 else crc << 1)
      crc &= 0xFFFFFFFF
  return crc


@pytest.mark.parametrize('size', [0, 1, 7, 255, 4096])
def test_crc_equals_the_bitwise_definition(size):
  data = np.random.default_rng(size).bytes(size)
  assert ogg_pages.page_crc(data) == _bitwise_crc(data)


def _ogg(subtype, seconds=3, rate=48000):
  out = io.BytesIO()
  sf.write(out, np.random.default_rng(0).uniform(-0.5, 0.5, rate * seconds),
           rate, format='OGG', subtype=subtype)
  return out.getvalue()


@pytest.mark.parametrize('subtype', ['VORBIS', 'OPUS'])
def test_files_libsndfile_writes_pass(subtype):
  assert ogg_pages.check(_ogg(subtype)) == (None, None)


@pytest.mark.parametrize('subtype', ['VORBIS', 'OPUS'])
def test_every_flipped_byte_is_found(subtype):
  data = _ogg(subtype)
  for position in range(0, len(data), max(1, len(data) // 97)):
    damaged = bytearray(data)
    damaged[position] ^= 0x10
    problem, _ = ogg_pages.check(bytes(damaged))
    assert problem is not None, position


def test_missing_cut_and_unterminated_files():
  data = _ogg('VORBIS')
  starts = hostile.ogg_page_starts(data)
  assert len(starts) > 4
  missing = data[:starts[3]] + data[starts[4]:]
  assert 'Ogg page 3 of stream' in ogg_pages.check(missing)[0]
  cut = data[:starts[-1] + 40]
  assert ogg_pages.check(cut)[0].startswith('Ogg file cut')
  problem, note = ogg_pages.check(data[:starts[-1]])
  assert problem is None and 'no Ogg end-of-stream page' in note
  assert ogg_pages.check(b'')[0].startswith('empty Ogg file')
  assert 'no page starts at byte' in ogg_pages.check(data + b'x' * 40)[0]


def test_probe_rejects_a_damaged_page_and_a_fifo(tmp_path):
  from transforms.inputs import audio_io
  path = tmp_path / 'damaged.ogg'
  data = bytearray(_ogg('VORBIS'))
  data[len(data) // 2] ^= 0xFF
  path.write_bytes(bytes(data))
  with pytest.raises(audio_io.BadWav, match='damaged Ogg page'):
    audio_io.probe(0, str(path))
  fifo = tmp_path / 'fifo.wav'
  os.mkfifo(fifo)
  with pytest.raises(audio_io.BadWav, match='not a regular file: a FIFO'):
    audio_io.probe(0, str(fifo))
