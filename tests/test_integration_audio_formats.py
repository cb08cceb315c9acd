"""A corpus of FLAC, Opus, Vorbis, MP3 and WAV files (--audio_formats):
every example bit-exact against one whole decode of its file, on the local
file system (libsndfile reads descriptors) and on mem:// (file objects)."""

import io
import json
import os

import apache_beam as beam
import numpy as np
import pytest
import soundfile as sf

from pipeline import graph, output_folder
from pipeline.commands import run as run_lib
from pipeline.contract import example_codec, metadata as metadata_lib
from pipeline.contract import tfrecord
from tests import helpers as H

RATE = 48000  # Opus's only rate; the others are resampled to it
WIN = 4096
ALL = 'wav,flac,opus,ogg,mp3'
# (class/name, soundfile format, subtype, rate, channels)
FILES = [('bird/a.flac', 'FLAC', 'PCM_24', RATE, 1),
         ('bird/b.opus', 'OGG', 'OPUS', RATE, 2),
         ('bird/c.ogg', 'OGG', 'VORBIS', RATE, 1),
         ('dog/d.mp3', 'MP3', 'MPEG_LAYER_III', RATE, 2),
         ('dog/e.mp3', 'MP3', 'MPEG_LAYER_III', 16000, 1),   # MPEG-2
         ('dog/f.wav', 'WAV', 'PCM_16', RATE, 1),
         ('dog/g.ogg', 'OGG', 'VORBIS', 22050, 2)]


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
  d = tmp_path_factory.mktemp('formats')
  for i, (name, fmt, subtype, rate, channels) in enumerate(FILES):
    os.makedirs(d / os.path.dirname(name), exist_ok=True)
    sf.write(str(d / name), H.noise(int(rate * (0.4 + 0.15 * i)), channels,
                                    seed=i, scale=0.3),
             rate, format=fmt, subtype=subtype)
  (d / 'dog' / 'notes.txt').write_text('not audio')
  return d


def _config(input_dir, output_dir, **kw):
  return H.make_config(input_dir, output_dir, audio_formats=ALL, win_len=WIN,
                       hop_len=WIN // 2, pad=True, sample_rate=RATE,
                       features=('signal', 'spectrogram', 'log_mel'), **kw)


def test_every_format_is_bit_exact_against_a_whole_decode(corpus, tmp_path):
  config = _config(corpus, tmp_path / 'out')
  meta = H.run_pipeline(config)
  paths = sorted(str(corpus / name) for name, *_ in FILES)
  H.assert_matches_reference(str(tmp_path / 'out'), config, paths,
                             ['bird', 'dog'], RATE)
  assert meta['counts']['files_seen'] == len(FILES)   # not notes.txt
  assert meta['counts']['files_rejected'] == 0


def test_only_the_formats_given_are_read(corpus, tmp_path):
  meta = H.run_pipeline(H.make_config(corpus, tmp_path / 'out', win_len=WIN,
                                      audio_formats='mp3,flac'))
  assert meta['counts']['files_seen'] == 3
  assert meta['sample_rate'] == RATE   # e.mp3's 16 kHz is rejected
  assert meta['counts']['files_rejected'] == 1


def test_file_objects_decode_as_descriptors_do(corpus, tmp_path):
  """mem:// gives libsndfile a Python file object instead of a descriptor:
  the same samples, so the same examples."""
  from tests import memfs
  for name, *_ in FILES:
    memfs.put(f'mem://formats/{name}', (corpus / name).read_bytes())
  local = tmp_path / 'local'
  H.run_pipeline(_config(corpus, local))
  config = _config('mem://formats', 'mem://formats-out')
  p = beam.Pipeline(options=run_lib.pipeline_options([]))
  graph.build_pipeline(p, config)
  output_folder.prepare(config, 'run-1')
  p.run().wait_until_finish()
  meta = json.loads(memfs.get('mem://formats-out/metadata.json'))
  schema = metadata_lib.schema_of(meta)
  compared = 0
  for entry in meta['splits'].values():
    for shard in entry['shards']:

      remote = tfrecord.read_records(io.BytesIO(
          memfs.get(f'mem://formats-out/{shard["file"]}')))
      with open(local / shard['file'], 'rb') as f:
        for (_, a), (_, b) in zip(remote, tfrecord.read_records(f)):
          a = example_codec.decode_example(a, schema)
          b = example_codec.decode_example(b, schema)
          for key in ('signal', 'spectrogram', 'log_mel', 'win_start_idx'):
            assert np.array_equal(a[key], b[key]), key
          compared += 1
  assert compared == meta['counts']['examples'] > len(FILES)
