"""transforms/wav_io: the plain-WAV header reader against libsndfile."""

import os
import struct

import numpy as np
import soundfile as sf

from tests import helpers as H
from tests import hostile
from transforms import wav_io

SUBTYPES = ('PCM_U8', 'PCM_16', 'PCM_24', 'PCM_32', 'FLOAT', 'DOUBLE')


def _plain(path):
  with open(path, 'rb') as f:
    head = f.read(1 << 16)
  return wav_io.plain_wav_header(head, os.path.getsize(path))


def _libsndfile(path):
  with open(path, 'rb') as raw, sf.SoundFile(raw) as f:
    return f.frames, f.samplerate, f.channels, f.subtype


def _chunk(name, body):
  return name + struct.pack('<I', len(body)) + body + b'\0' * (len(body) & 1)


def _riff(*chunks):
  body = b'WAVE' + b''.join(chunks)
  return b'RIFF' + struct.pack('<I', len(body)) + body


def _fmt(tag=1, channels=2, rate=22050, bits=16, extra=b''):
  align = channels * bits // 8
  return _chunk(b'fmt ', struct.pack('<HHIIHH', tag, channels, rate,
                                     rate * align, align, bits) + extra)


def test_plain_header_reads_what_libsndfile_reads(tmp_path):
  plain = []
  for subtype in SUBTYPES:
    for channels in (1, 2, 3, 6):
      for frames, rate in ((1, 8000), (17, 44100), (1000, 16000)):
        path = H.write_wav(str(tmp_path / f'{subtype}_{channels}_{frames}.wav'),
                           H.noise(frames, channels, seed=frames),
                           rate=rate, subtype=subtype)
        plain.append((path, True if channels <= 2 else None))
  hand = {  # name: (bytes, takes the plain path)
      'list_before_data': (_riff(_fmt(),
                                 _chunk(b'LIST', b'INFOISFT\4\0\0\0abc\0'),
                                 _chunk(b'data', bytes(4 * 9))), True),
      'fact_and_fmt18': (_riff(_fmt(tag=3, bits=32, extra=b'\0\0'),
                               _chunk(b'fact', struct.pack('<I', 5)),
                               _chunk(b'data', bytes(8 * 5))), True),
      'partial_last_frame': (_riff(_fmt(), _chunk(b'data', bytes(4 * 7 + 2))),
                             True),
      'data_after_more_data': (_riff(_fmt(), _chunk(b'data', bytes(40))) +
                               bytes(100), True),
      'odd_chunk_before_data': (_riff(_fmt(), _chunk(b'junk', b'abc'),
                                      _chunk(b'data', bytes(40))), False),
      'data_past_the_end': (_riff(_fmt(), _chunk(b'data', bytes(40)))[:-8],
                            False),
      'extensible': (_riff(_fmt(tag=0xFFFE, extra=bytes(24))[:8] +
                           _fmt(tag=0xFFFE, extra=b'\x16\0' + bytes(22))[8:],
                           _chunk(b'data', bytes(40))), False),
      'mu_law': (_riff(_fmt(tag=7, bits=8), _chunk(b'data', bytes(40))), False),
      'padded_24_in_32': (_riff(_chunk(b'fmt ', struct.pack(
          '<HHIIHH', 1, 1, 8000, 32000, 4, 24)), _chunk(b'data', bytes(40))),
                          False),
  }
  full_scale = np.array([[-1.0, 1 - 2.0**-23], [0.5, -2.0**-23]])
  for subtype in SUBTYPES:  # the extremes of every sample type
    path = H.write_wav(str(tmp_path / f'extremes_{subtype}.wav'), full_scale,
                       subtype=subtype)
    plain.append((path, True))
  nan = tmp_path / 'nan_inf.wav'
  sf.write(str(nan), np.array([np.nan, np.inf, -np.inf, 1e30, -0.0],
                              np.float32), 8000, subtype='FLOAT')
  plain.append((str(nan), True))
  for name, (data, expected) in hand.items():
    path = tmp_path / f'{name}.wav'
    path.write_bytes(data)
    plain.append((str(path), expected))
  hostile.write_catalogue(str(tmp_path / 'catalogue'))
  for root, _, names in os.walk(tmp_path / 'catalogue'):
    plain += [(os.path.join(root, n), None) for n in names
              if n.lower().endswith('.wav') and
              os.path.isfile(os.path.join(root, n))]
  taken = 0
  for path, expected in plain:
    got = _plain(path)
    if expected is not None:
      assert (got is not None) == expected, path
    if got is not None:
      taken += 1
      assert got[:4] == _libsndfile(path), path
      _assert_reads_like_libsndfile(path)
  assert taken >= len(SUBTYPES) * 2 * 3 + 4


def _assert_reads_like_libsndfile(path):
  """Frame ranges read without libsndfile equal libsndfile's, bit for bit
  (NaN payloads included)."""
  info, _ = wav_io.probe(0, path)
  assert info.data_offset > 0
  with open(path, 'rb') as raw, sf.SoundFile(raw) as f:
    expected = f.read(dtype='float64', always_2d=True)
  n = info.frames
  with wav_io.OpenFiles() as files:
    for start, count in ((0, n), (n // 3, n - n // 3), (n - 1, 1),
                         (n // 2, min(5, n - n // 2))):
      got = files.read_range(path, start, count, info)
      assert got.dtype == np.float64 and got.shape == (count, info.channels)
      assert np.array_equal(got.view(np.uint64),
                            expected[start:start + count].view(np.uint64)), (
                                path, start, count)
    try:
      files.read_range(path, n - 1, 2, info)
      raise AssertionError('read past the end')
    except wav_io.BadWav as e:
      assert 'read 1 of 2 frames' in str(e)


def test_probe_of_a_plain_file_equals_the_libsndfile_probe(tmp_path):
  path = H.write_wav(str(tmp_path / 'a.wav'), H.noise(4001, 2), rate=22050,
                     subtype='PCM_24')
  info, note = wav_io.probe(3, path)
  assert note is None
  assert (info.index, info.path, info.size) == (3, path,
                                                os.path.getsize(path))
  assert (info.frames, info.sample_rate, info.channels,
          info.subtype) == _libsndfile(path) == (4001, 22050, 2, 'PCM_24')
  assert info.mtime == os.stat(path).st_mtime
  assert np.array_equal(wav_io.read_range(path, 4000, 1),
                        sf.read(path, start=4000, always_2d=True)[0])
