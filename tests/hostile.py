"""A catalogue of hostile and odd WAV inputs, written as real files.

Each case: a relative path, a function that writes it, and the outcome the
pipeline documents for it (docs/failures.md, "Bad and odd input"):
('ok', examples) or ('rejected', reason prefix). Windows are WIN samples,
hop WIN.
"""

import io
import os
import socket
import struct

import numpy as np
import soundfile as sf

WIN = 1024
RATE = 16000


def _pcm16(n, seed=0):
  rng = np.random.default_rng(seed)
  return rng.uniform(-0.5, 0.5, n)


def wav_bytes(samples=None, channels=1, rate=RATE, bits=16, tag=1,
              riff=b'RIFF', wave=b'WAVE', with_fmt=True, with_data=True,
              data_size=None):
  """A PCM WAV built by hand, so that every header field can be wrong."""
  samples = _pcm16(WIN * 2) if samples is None else samples
  data = (np.clip(samples, -1, 1) * 32767).astype('<i2').tobytes()
  chunks = b''
  if with_fmt:
    block_align = max(channels, 1) * bits // 8
    fmt = struct.pack('<HHIIHH', tag, channels, rate, rate * block_align,
                      block_align, bits)
    chunks += b'fmt ' + struct.pack('<I', len(fmt)) + fmt
  if with_data:
    size = len(data) if data_size is None else data_size
    chunks += b'data' + struct.pack('<I', size) + data
  return riff + struct.pack('<I', 4 + len(chunks)) + wave + chunks


def _bytes(content):
  def write(path):
    with open(path, 'wb') as f:
      f.write(content)
  return write


def _sf(data, subtype=None, fmt='WAV', endian=None, rate=RATE):
  def write(path):
    sf.write(path, data, rate, subtype=subtype, format=fmt, endian=endian)
  return write


def _dir_with_wav(path):
  os.makedirs(path)
  sf.write(os.path.join(path, 'inside.wav'), _pcm16(WIN, 9), RATE,
           subtype='PCM_16')


def _broken_symlink(path):
  os.symlink(path + '.missing-target', path)


def _fifo(path):
  os.mkfifo(path)


def _socket(path):
  # A bound socket leaves its file behind when closed.
  with socket.socket(socket.AF_UNIX) as s:
    s.bind(path)


def _symlink_to(target):
  def write(path):
    os.symlink(target, path)
  return write


def ogg_bytes(samples):
  out = io.BytesIO()
  sf.write(out, samples, RATE, format='OGG', subtype='VORBIS')
  return out.getvalue()


def ogg_page_starts(data):
  return [i for i in range(len(data)) if data.startswith(b'OggS', i)]


def _ogg_damaged():
  """One flipped byte in a middle page: libvorbisfile skips that page
  and decodes shorter audio without an error."""
  data = bytearray(ogg_bytes(_pcm16(WIN * 64, 34)))
  data[len(data) // 2] ^= 0xFF
  return bytes(data)


def _ogg_cut_at_a_page():
  data = ogg_bytes(_pcm16(WIN * 16, 35))
  return data[:ogg_page_starts(data)[-1]]


def _nan_inf():
  x = _pcm16(WIN * 4, 3)
  x[10] = np.nan          # window 0
  x[2 * WIN + 5] = np.inf   # window 2
  return x


def _hot():
  x = _pcm16(WIN * 2, 4)
  x[7] = 1.5
  x[WIN + 3] = -3.0
  return x


def _eight_channels():
  return np.stack([_pcm16(WIN * 2, 10 + c) for c in range(8)], axis=1)


def catalogue():
  """[(relative path, writer(path), expected outcome)]."""
  truncated = wav_bytes(_pcm16(WIN * 4, 5))
  return [
      ('x/zero_byte.wav', _bytes(b''), ('rejected', 'empty file (0 bytes)')),
      ('x/text.wav', _bytes(b'not audio, just some text\n' * 40),
       ('rejected', 'unreadable')),
      ('x/random.wav', _bytes(np.random.default_rng(1).bytes(8192)),
       ('rejected', 'unreadable')),
      ('x/bad_riff_magic.wav', _bytes(wav_bytes(riff=b'RIFZ')),
       ('rejected', 'unreadable')),
      ('x/bad_wave_magic.wav', _bytes(wav_bytes(wave=b'WAVX')),
       ('rejected', 'unreadable')),
      ('x/zero_channels.wav', _bytes(wav_bytes(channels=0)),
       ('rejected', 'unreadable')),
      ('x/zero_hz.wav', _bytes(wav_bytes(rate=0)),
       ('rejected', 'unreadable')),
      ('x/no_fmt.wav', _bytes(wav_bytes(with_fmt=False)),
       ('rejected', 'unreadable')),
      ('x/no_data.wav', _bytes(wav_bytes(with_data=False)),
       ('rejected', 'unreadable')),
      ('x/unknown_codec.wav', _bytes(wav_bytes(tag=0x7777)),
       ('rejected', 'unreadable')),
      ('x/truncated.wav', _bytes(truncated[:len(truncated) - 1000]),
       ('rejected', 'truncated')),
      ('x/header_only.wav', _bytes(wav_bytes(np.zeros(0))),
       ('rejected', 'empty')),
      ('x/one_sample.wav', _sf(_pcm16(1), 'PCM_16'), ('rejected', 'too short')),
      ('x/one_short.wav', _sf(_pcm16(WIN - 1), 'PCM_16'),
       ('rejected', 'too short')),
      ('x/one_window.wav', _sf(_pcm16(WIN, 6), 'PCM_16'), ('ok', 1)),
      ('x/nan_inf.wav', _sf(_nan_inf(), 'FLOAT'), ('partial', 2)),
      ('x/hot_float.wav', _sf(_hot(), 'FLOAT'), ('ok', 2)),
      ('x/eight_channels.wav', _sf(_eight_channels(), 'PCM_24'), ('ok', 2)),
      ('x/mu_law.wav', _sf(_pcm16(WIN * 2, 11), 'ULAW'), ('ok', 2)),
      ('x/a_law.wav', _sf(_pcm16(WIN * 2, 12), 'ALAW'), ('ok', 2)),
      ('x/ima_adpcm.wav', _sf(_pcm16(WIN * 2, 13), 'IMA_ADPCM'), ('ok', 2)),
      ('x/ms_adpcm.wav', _sf(_pcm16(WIN * 2, 14), 'MS_ADPCM'), ('ok', 2)),
      ('x/rf64.wav', _sf(_pcm16(WIN * 2, 15), 'PCM_16', fmt='RF64'),
       ('ok', 2)),
      ('x/rifx.wav', _sf(_pcm16(WIN * 2, 16), 'PCM_16', endian='BIG'),
       ('ok', 2)),
      ('x/flac_inside.wav', _sf(_pcm16(WIN * 2, 17), 'PCM_16', fmt='FLAC'),
       ('ok', 2)),
      ('x/ogg_inside.wav', _sf(_pcm16(WIN * 2, 18), 'VORBIS', fmt='OGG'),
       ('ok', 2)),
      ('x/mp3_inside.wav', _sf(_pcm16(WIN * 2, 19), 'MPEG_LAYER_III',
                               fmt='MP3'), ('ok', 2)),
      ('x/dir.wav', _dir_with_wav, ('dir', 0)),
      ('x/dir.wav/inside.wav', None, ('ok', 1)),
      ('x/broken_link.wav', _broken_symlink, ('rejected', 'unreadable')),
      ('x/with space.wav', _sf(_pcm16(WIN, 20), 'PCM_16'), ('ok', 1)),
      ('x/comma,name.wav', _sf(_pcm16(WIN, 21), 'PCM_16'), ('ok', 1)),
      ('x/ünïcödé 音.wav', _sf(_pcm16(WIN, 22), 'PCM_16'), ('ok', 1)),
      ('x/UPPER.WAV', _sf(_pcm16(WIN, 23), 'PCM_16'), ('ok', 1)),
      # Glob characters are plain characters in a path: rec[1].wav is not
      # rec1.wav (a pattern [1] matches "1"), nor is a folder bracket[1].
      ('x/take[1].wav', _sf(_pcm16(WIN, 24), 'PCM_16'), ('ok', 1)),
      ('x/rec1.wav', _sf(_pcm16(WIN, 25), 'PCM_16'), ('ok', 1)),
      ('x/rec[1].wav', _sf(_pcm16(WIN * 3, 26), 'PCM_16'), ('ok', 3)),
      ('x/star*.wav', _sf(_pcm16(WIN, 27), 'PCM_16'), ('ok', 1)),
      ('x/what?.wav', _sf(_pcm16(WIN, 28), 'PCM_16'), ('ok', 1)),
      ('bracket[1]/inside.wav', _sf(_pcm16(WIN * 2, 29), 'PCM_16'),
       ('ok', 2)),
      # Bytes that are not UTF-8 in a name (the OS hands them over as lone
      # surrogates): rejected, shown as \xNN.
      ('x/\udcff\udcfe.wav', _bytes(wav_bytes(_pcm16(WIN, 30))),
       ('rejected', 'file name is not valid UTF-8')),
      # Data sizes streaming writers leave in the header.
      ('x/stream_7ffff000.wav',
       _bytes(wav_bytes(_pcm16(WIN * 2, 31), data_size=0x7FFFF000)),
       ('ok', 2)),
      ('x/stream_ffffffff.wav',
       _bytes(wav_bytes(_pcm16(WIN * 2, 32), data_size=0xFFFFFFFF)),
       ('ok', 2)),
      # Only regular files are opened: the others would block or never end.
      ('x/fifo.wav', _fifo, ('rejected', 'not a regular file: a FIFO')),
      ('x/socket.wav', _socket, ('rejected', 'not a regular file: a socket')),
      ('x/link_to_fifo.wav', _symlink_to('fifo.wav'),
       ('rejected', 'not a regular file: a FIFO')),
      ('x/dev_null.wav', _symlink_to('/dev/null'),
       ('rejected', 'not a regular file: a character device')),
      # The run's stdin is a pipe that nobody writes to.
      ('x/dev_stdin.wav', _symlink_to('/dev/stdin'),
       ('rejected', 'not a regular file: a FIFO')),
      ('x/ogg_damaged.wav', _bytes(_ogg_damaged()),
       ('rejected', 'damaged Ogg page at byte')),
      ('x/ogg_cut_at_a_page.wav', _bytes(_ogg_cut_at_a_page()), ('ok', 13)),
      ('x/stream_zero.wav',
       _bytes(wav_bytes(_pcm16(WIN * 2, 33), data_size=0)),
       ('rejected', 'empty: header declares 0 data bytes')),
  ]


# Files used with a remark in rejects.jsonl: {relative path: note prefix}.
NOTES = {'x/stream_7ffff000.wav': 'data size unknown',
         'x/stream_ffffffff.wav': 'data size unknown',
         'x/ogg_cut_at_a_page.wav': 'no Ogg end-of-stream page'}


def write_catalogue(root):
  cases = catalogue()
  for rel, writer, _ in cases:
    if writer is not None:
      path = os.path.join(root, rel)
      os.makedirs(os.path.dirname(path), exist_ok=True)
      writer(path)
  return cases
