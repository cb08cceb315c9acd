"""--audio_formats: FLAC, Opus, Vorbis and MP3 read by
transforms/inputs/audio_io exactly as one whole decode of the file gives
them."""

import numpy as np
import pytest
import soundfile as sf

from pipeline import config as config_lib
from tests import helpers as H
from transforms.inputs import file_reports
from transforms.inputs import sound_files
from transforms.inputs import audio_io

# (extension, soundfile format, subtype, rate)
FORMATS = [('flac', 'FLAC', 'PCM_16', 16000), ('opus', 'OGG', 'OPUS', 48000),
           ('ogg', 'OGG', 'VORBIS', 44100),
           ('mp3', 'MP3', 'MPEG_LAYER_III', 16000),   # MPEG-2
           ('mp3', 'MP3', 'MPEG_LAYER_III', 48000)]   # MPEG-1


def _write(path, rate, fmt, subtype, seconds=4.0, channels=1, seed=0):
  data = H.noise(int(rate * seconds), channels, seed=seed, scale=0.3)
  sf.write(str(path), data, rate, format=fmt, subtype=subtype)
  return str(path)


def whole_decode(path):
  """The reference: one read of the whole file, from its start. (Not
  soundfile.read, which seeks to frame 0 first: after a seek, even to 0,
  an MPEG-2 MP3 decodes to other values.)"""
  with open(path, 'rb') as f, sf.SoundFile(f) as audio:
    return audio.read(dtype='float64', always_2d=True)


@pytest.mark.parametrize('ext,fmt,subtype,rate', FORMATS)
@pytest.mark.parametrize('channels', [1, 2])
def test_every_read_equals_the_whole_decode(tmp_path, ext, fmt, subtype,
                                            rate, channels):
  path = _write(tmp_path / f'a.{ext}', rate, fmt, subtype, channels=channels)
  full = whole_decode(path)
  info, note = audio_io.probe(0, path)
  assert note is None
  assert (info.frames, info.sample_rate, info.channels) == (
      len(full), rate, channels)
  rng = np.random.default_rng(1)
  starts = [0, len(full) - 700] + rng.integers(0, len(full) - 700, 30).tolist()
  with audio_io.OpenFiles() as files:
    for start in starts:
      assert np.array_equal(files.read_range(path, start, 700, info),
                            full[start:start + 700]), start
  for start in starts[:3]:
    assert np.array_equal(audio_io.read_range(path, start, 700),
                          full[start:start + 700])


def test_mp3_and_vorbis_seeks_are_not_exact_so_they_are_decoded_whole(
    tmp_path):
  """Why WHOLE_DECODE_SUBTYPES exists: libsndfile's own seek into these
  formats (Opus, Vorbis, MP3) gives other samples than a decode from the
  start."""
  for ext, fmt, subtype, rate in FORMATS[1:4]:
    path = _write(tmp_path / f'b.{ext}', rate, fmt, subtype, seconds=10)
    full = whole_decode(path)
    differ = 0
    with open(path, 'rb') as raw, sf.SoundFile(raw) as f:
      for start in np.random.default_rng(2).integers(0, len(full) - 700,
                                                     200).tolist():
        f.seek(start)
        differ += not np.array_equal(
            f.read(700, dtype='float64', always_2d=True),
            full[start:start + 700])
    assert differ, ext
    assert subtype in audio_io.WHOLE_DECODE_SUBTYPES


def test_a_file_too_long_to_decode_whole_is_rejected_at_probe(tmp_path,
                                                              monkeypatch):
  path = _write(tmp_path / 'long.mp3', 16000, 'MP3', 'MPEG_LAYER_III',
                seconds=3)
  monkeypatch.setattr(sound_files, 'MAX_DECODED_BYTES', 16000 * 4 * 2)
  with pytest.raises(file_reports.BadWav, match=r'decoded whole .* 3\.0 s of '
                     r'1-channel 16000 Hz .* convert it to FLAC or WAV'):
    audio_io.probe(0, path)
  flac = _write(tmp_path / 'long.flac', 16000, 'FLAC', 'PCM_16', seconds=3)
  assert audio_io.probe(0, flac)[0].frames == 48000  # seeks: no limit


def test_decoded_files_are_kept_within_a_memory_budget(tmp_path):
  paths = [_write(tmp_path / f'{i}.ogg', 16000, 'OGG', 'VORBIS', seconds=2,
                  seed=i) for i in range(4)]
  one = 32000 * 4
  with audio_io.OpenFiles(max_decoded_bytes=2 * one) as files:
    for round_ in range(2):
      for path in paths:
        info, _ = audio_io.probe(0, path)
        assert np.array_equal(files.read_range(path, 100, 500, info),
                              whole_decode(path)[100:600])
        assert files._decoded_bytes <= 2 * one
        assert len(files._open) <= 2
    assert round_ == 1


def test_a_decode_shorter_than_its_header_is_refused(tmp_path):
  path = _write(tmp_path / 'cut.mp3', 48000, 'MP3', 'MPEG_LAYER_III',
                seconds=3)
  data = open(path, 'rb').read()
  open(path, 'wb').write(data[:len(data) * 2 // 3])
  info, _ = audio_io.probe(0, path)
  assert info.frames == 3 * 48000   # as its Xing header says
  with pytest.raises(file_reports.BadWav, match='decoded .* frames where the '
                     'header declares 144000'):
    with audio_io.OpenFiles() as files:
      files.read_range(path, info.frames - 100, 100, info)


def test_a_first_read_decodes_only_as_far_as_it_ends(tmp_path):
  path = _write(tmp_path / 'a.mp3', 16000, 'MP3', 'MPEG_LAYER_III',
                seconds=5)
  full = whole_decode(path)
  with audio_io.open_audio(path) as decoded:
    decoded.seek(20000)
    assert np.array_equal(decoded.read(1000), full[20000:21000])
    assert len(decoded.samples) == 21000      # a prefix, not all 80000
    decoded.seek(100)
    assert np.array_equal(decoded.read(50), full[100:150])
    assert len(decoded.samples) == 21000
    decoded.seek(79000)
    assert np.array_equal(decoded.read(5000), full[79000:])
    assert len(decoded.samples) == 80000      # then the whole file


def test_listing_takes_the_extensions_given(tmp_path):
  for name in ('a.wav', 'b.WAV', 'c.flac', 'd.Mp3', 'e.ogg', 'f.txt',
               'g.opus', 'h.flac.bak'):
    (tmp_path / name).write_bytes(b'')

  def listed(*exts):
    return [p.rsplit('/', 1)[1]
            for p in audio_io.list_audio_files(str(tmp_path), exts)]

  assert listed('wav') == ['a.wav', 'b.WAV']
  assert listed('flac', 'mp3') == ['c.flac', 'd.Mp3']
  assert listed('wav', 'flac', 'opus', 'ogg', 'mp3') == [
      'a.wav', 'b.WAV', 'c.flac', 'd.Mp3', 'e.ogg', 'g.opus']


@pytest.mark.parametrize('kw,message', [
    ({'audio_formats': 'wav,m4a'}, "unknown ['m4a']"),
    ({'audio_formats': ''}, 'name at least one extension'),
    ({'audio_formats': 'wav,WAV'}, 'lists a repeat'),
    ({'audio_formats': 'mp3', 'manifest': 'm.tsv',
      'manifest_audio_extension': 'wav'}, 'is not one of --audio_formats'),
])
def test_bad_audio_formats_name_the_option(kw, message):
  with pytest.raises(config_lib.ConfigError, match=message.replace(
      '[', r'\[').replace(']', r'\]')):
    H.make_config('in', 'out', **kw)


def test_audio_formats_are_normalised():
  config = H.make_config('in', 'out', audio_formats='.FLAC, mp3')
  assert config.audio_formats == ('flac', 'mp3')
