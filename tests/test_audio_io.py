"""transforms/inputs/audio_io: the plain-WAV header reader against
libsndfile."""

import os
import struct

import numpy as np
import soundfile as sf

from tests import helpers as H
from tests import hostile
from transforms.inputs import audio
from transforms.inputs import audio_io

SUBTYPES = ('PCM_U8', 'PCM_16', 'PCM_24', 'PCM_32', 'FLOAT', 'DOUBLE')


def _plain(path):
  with open(path, 'rb') as f:
    head = f.read(1 << 16)
  return audio_io.plain_wav_header(head, os.path.getsize(path))


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
  info, _ = audio_io.probe(0, path)
  assert info.data_offset > 0
  with open(path, 'rb') as raw, sf.SoundFile(raw) as f:
    expected = f.read(dtype='float64', always_2d=True)
  n = info.frames
  with audio_io.OpenFiles() as files:
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
    except audio_io.BadWav as e:
      assert 'read 1 of 2 frames' in str(e)
    # Decoded straight into a caller's array: mono files only.
    rows = np.full((2, n // 2), 7.0)
    if info.channels != 1:
      assert not files.read_mono_into(path, 0, rows, info)
      assert (rows == 7.0).all()
      return
    assert files.read_mono_into(path, n - 2 * (n // 2), rows, info)
    assert np.array_equal(rows.ravel().view(np.uint64),
                          expected[n - 2 * (n // 2):, 0].view(np.uint64))
    try:
      files.read_mono_into(path, n - 1, np.empty(2), info)
      raise AssertionError('read past the end')
    except audio_io.BadWav as e:
      assert 'read 1 of 2 frames' in str(e)
    # Into int16 rows: a 16-bit file's stored values, other files none.
    values = np.full((2, n // 2), 7, np.int16)
    if info.subtype != 'PCM_16':
      assert not files.read_mono_into(path, 0, values, info)
      assert (values == 7).all()
      return
    assert files.read_mono_into(path, n - 2 * (n // 2), values, info)
    assert np.array_equal(audio.full_scale(values).ravel().view(np.uint64),
                          expected[n - 2 * (n // 2):, 0].view(np.uint64))
    k = min(3, n - 1)
    column = np.full((k, 2), 7, np.int16)[:, 0]  # not one block of memory
    assert files.read_mono_into(path, 1, column, info)
    assert np.array_equal(audio.full_scale(column), expected[1:k + 1, 0])
    for into in (np.empty(2, np.int16), np.empty((3, 2), np.int16)[:2, 0]):
      try:
        files.read_mono_into(path, n - 1, into, info)
        raise AssertionError('read past the end')
      except audio_io.BadWav as e:
        assert 'read 1 of 2 frames' in str(e)


def test_probe_of_a_plain_file_equals_the_libsndfile_probe(tmp_path):
  path = H.write_wav(str(tmp_path / 'a.wav'), H.noise(4001, 2), rate=22050,
                     subtype='PCM_24')
  info, note = audio_io.probe(3, path)
  assert note is None
  assert (info.index, info.path, info.size) == (3, path,
                                                os.path.getsize(path))
  assert (info.frames, info.sample_rate, info.channels,
          info.subtype) == _libsndfile(path) == (4001, 22050, 2, 'PCM_24')
  assert info.mtime == os.stat(path).st_mtime
  assert np.array_equal(audio_io.read_range(path, 4000, 1),
                        sf.read(path, start=4000, always_2d=True)[0])


def _windows_read(path, win_len, hop_len, refs, files, info=None):
  from transforms.writing import extract
  from transforms.planning import rules as plan_lib
  info = info or audio_io.probe(0, path)[0]
  count = (info.frames - win_len) // hop_len + 1
  file_plan = plan_lib.FilePlan(info, 'train', 'a', info.sample_rate,
                                info.frames, count)
  config = H.make_config('in', 'out', win_len=win_len, hop_len=hop_len)
  return extract.read_windows([(file_plan.key, w) for w in refs],
                              {file_plan.key: file_plan}, config, files)


def test_windows_decoded_straight_into_the_batch_equal_the_general_read(
    tmp_path):
  """A mono PCM recording's windows are decoded straight into the batch's
  rows, back-to-back ones together, others one by one; they equal
  libsndfile's samples cut by hand, as do the windows of every other case
  (stereo, overlapping, float, shuffled rows), which take the general
  path."""
  win = 4096
  frames = 3 * (1 << 20) // 4 + 77  # chunks of 256 windows: 3 runs
  cases = [('PCM_16', 1, win, None), ('PCM_24', 1, win, None),
           ('PCM_U8', 1, win, None), ('PCM_16', 2, win, None),
           ('FLOAT', 1, win, None), ('PCM_16', 1, win // 2, None),
           ('PCM_16', 1, win, 'shuffled'), ('PCM_16', 1, win, 'alternate'),
           ('PCM_16', 2, win, 'alternate'), ('FLOAT', 1, win, 'alternate')]
  for subtype, channels, hop, order in cases:
    path = H.write_wav(str(tmp_path / f'{subtype}_{channels}_{hop}.wav'),
                       H.noise(frames, channels, seed=channels),
                       subtype=subtype)
    # --channels mean (the default) mixes a stereo file's channels.
    samples = sf.read(path, dtype='float64', always_2d=True)[0].mean(axis=1)
    count = (frames - win) // hop + 1
    refs = list(range(count))
    if order == 'shuffled':
      refs = list(np.random.default_rng(0).permutation(count))
    elif order == 'alternate':  # each window read on its own
      refs = refs[::2]
    expected = np.stack([samples[w * hop:w * hop + win] for w in refs])
    with audio_io.OpenFiles() as files:
      got, kept, rejected = _windows_read(path, win, hop, refs, files)
    assert (kept, rejected) == (list(range(len(refs))), [])
    # A mono 16-bit recording's windows are the values it stores.
    assert got.dtype == (np.int16 if (subtype, channels) == ('PCM_16', 1)
                         else np.float64), (subtype, channels)
    assert np.array_equal(audio.full_scale(got).view(np.uint64),
                          expected.view(np.uint64)), (
                              subtype, channels, hop, order)
    without_files, _, _ = _windows_read(path, win, hop, refs, None)
    assert without_files.dtype == got.dtype
    assert np.array_equal(got, without_files)


def test_a_recording_cut_after_probing_is_rejected_not_read_straight(
    tmp_path):
  path = H.write_wav(str(tmp_path / 'a.wav'), H.noise(8 * 1024), rate=16000)
  info, _ = audio_io.probe(0, path)
  with open(path, 'r+b') as f:  # the last 3 windows' samples go
    f.truncate(info.data_offset + 2 * 5 * 1024)
  with audio_io.OpenFiles() as files:
    got, kept, rejected = _windows_read(path, 1024, 1024, list(range(8)),
                                        files, info)
  assert kept == [] and len(got) == 0
  assert len(rejected) == 1 and rejected[0].reason.startswith(
      'changed since it was probed (size 16428 -> 10284 bytes')
  assert rejected[0].frame_range == (0, 8 * 1024)
