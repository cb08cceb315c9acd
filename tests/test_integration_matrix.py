"""Every option with every other: each input recipe (class folders,
--manifest, --fold_splits, --split_lists) x fresh and --append (with new
recordings and with none) x both sinks x with and without --array_record
x gzip on and off either writes a dataset that verify accepts and every
reader reads with the same counts, or is refused before any work with a
message naming both options."""

import csv
import itertools
import json
import os
import shutil

import apache_beam as beam
import pytest

from pipeline import config as config_lib
from pipeline import numpy_reader
from pipeline import replay
from pipeline import run as run_lib
from pipeline import verify
from pipeline.config import ConfigError
from tests import helpers as H

pytestmark = pytest.mark.slow

RECIPES = ('folders', 'manifest', 'fold_splits', 'split_lists')
SINKS = ('shards', 'write_to_tfrecord')
FIRST, ADDED = 8, 3  # recordings before and after the new day


def _recording(root, i):
  """The i-th recording, named as each recipe's corpus names it."""
  path = root / ('a', 'b')[i % 2] / f'{i}.wav'
  H.write_wav(str(path), H.noise(2048 + 512 * (i % 3), seed=i))
  return path


def _corpus(root, recipe, count):
  """The corpus of the first `count` recordings, with the manifest or the
  split lists the recipe reads; returns the recipe's options."""
  for i in range(count):
    if not (root / ('a', 'b')[i % 2] / f'{i}.wav').exists():
      _recording(root, i)
  rows = [(f'{("a", "b")[i % 2]}/{i}.wav', ('owl', 'wren')[i % 2],
           ('train', 'test')[i % 3 == 0], 1 + i % 3) for i in range(count)]
  if recipe == 'folders':
    return {'splits': 'train=0.5,test=0.5'}
  if recipe == 'split_lists':
    (root / 'test_list.txt').write_text(
        ''.join(f'{r[0]}\n' for r in rows if r[2] == 'test'))
    return {'split_lists': 'test=test_list.txt'}
  with open(root / 'meta.csv', 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['path', 'label', 'split', 'fold'])
    writer.writerows(rows)
  if recipe == 'manifest':
    return {'manifest': str(root / 'meta.csv'),
            'manifest_label_column': 'label',
            'manifest_split_column': 'split'}
  return {'manifest': str(root / 'meta.csv'),
          'manifest_label_column': 'label',
          'manifest_split_column': 'fold',
          'fold_splits': 'train=1,2;test=3'}


def _argv(root, out, recipe_options, sink, array_record, compression,
          *more):
  argv = ['--input_dir', str(root), '--output_dir', str(out),
          '--win_len', '1024', '--features', 'signal,spectrogram',
          '--n_fft', '256', '--fft_hop', '128',
          '--max_examples_per_shard', '4', '--sink', sink,
          '--compression', compression]
  for name, value in recipe_options.items():
    argv += [f'--{name}', value]
  if array_record:
    argv.append('--array_record')
  return argv + list(more)


def _run(argv):
  config, beam_args = config_lib.parse_known_args(argv)
  return run_lib.run_config(config, beam_args)


CELLS = list(itertools.product(RECIPES, SINKS, (False, True),
                               ('none', 'gzip')))


def _refusal(recipe, sink, array_record):
  """The options that cannot go together, as config refuses them."""
  if recipe == 'manifest' and sink != 'shards':
    # Beam's sink names its files before the run; the split column's
    # values are known only when the rows are read.
    return ('sink', 'manifest_split_column')
  if array_record and sink != 'shards':
    return ('array_record', 'sink')
  return None


@pytest.mark.parametrize('recipe,sink,array_record,compression', CELLS)
def test_cell(tmp_path, recipe, sink, array_record, compression):
  root = tmp_path / 'in'
  options = _corpus(root, recipe, FIRST)
  out = tmp_path / 'out'
  argv = _argv(root, out, options, sink, array_record, compression)
  refused = _refusal(recipe, sink, array_record)
  if refused:
    for mode in ([], ['--append']):
      with pytest.raises(ConfigError) as e:
        config_lib.parse_known_args(argv + mode)
      for option in refused:
        assert f'--{option}' in str(e.value)
    assert not out.exists()
    return
  _run(argv)
  fresh = _check_dataset(out, FIRST, array_record, compression)
  # Every option value survives metadata.json and equals itself.
  config, _ = config_lib.parse_known_args(argv)
  stored = json.loads((out / 'metadata.json').read_text())['config']
  assert stored == json.loads(json.dumps(config.to_json()))
  assert stored == config.to_json()

  # --append with nothing new: nothing changes.
  before = {p: p.read_bytes() for p in out.rglob('*') if p.is_file()}
  outcome = _run(argv + ['--append'])
  assert outcome.part_dir is None and outcome.unchanged == FIRST
  assert {p: p.read_bytes() for p in out.rglob('*') if p.is_file()} == before

  # --append with a new day of recordings: a part, read with the rest.
  _corpus(root, recipe, FIRST + ADDED)
  outcome = _run(argv + ['--append'])
  assert outcome.part_dir is not None and outcome.new == ADDED, outcome
  appended = _check_dataset(out, FIRST + ADDED, array_record, compression)
  for split, n in fresh.items():
    assert appended[split] >= n


def _check_dataset(out, recordings, array_record, compression):
  """verify, then every reader: each split's example count, the same from
  all; returns {split: count}."""
  out = str(out)
  assert 'OK' in verify.verify(out)
  meta = numpy_reader.load_metadata(out)[1]
  assert meta['counts']['files_ok'] == recordings
  expected = {split: e['num_examples'] for split, e in meta['splits'].items()}
  assert sum(expected.values()) == meta['counts']['examples'] > 0
  for split, n in expected.items():
    assert sum(1 for _ in numpy_reader.numpy_dataset(out, split)) == n
    assert sum(int(b['target'].shape[0]) for b in replay.replay_dataset(
        out, split, batch_size=3)) == n
    from pipeline.torch_dataset import WavbeamIterableDataset
    assert sum(1 for _ in WavbeamIterableDataset(out, split)) == n
    if array_record:
      from pipeline.array_record_source import ArrayRecordSource
      source = ArrayRecordSource(out, split)
      assert len(source) == n
      assert sum(1 for i in range(n) if source[i] is not None) == n
  _check_tfds(out, meta, expected, compression)
  assert _beam_counts(out, meta) == expected
  return expected


def _check_tfds(out, meta, expected, compression):
  if compression != 'none':
    # TFDS cannot read compressed shards: its files are not written, and
    # the metadata says why.
    assert meta['interop']['tfds'].startswith('skipped')
    assert not os.path.exists(os.path.join(out, 'dataset_info.json'))
    return
  import tensorflow_datasets as tfds
  parts = meta.get('parts') or ['.']
  folders = [os.path.normpath(os.path.join(out, p)) for p in reversed(parts)]
  builder = (tfds.builder_from_directory(folders[0]) if len(folders) == 1
             else tfds.builder_from_directories(folders))
  for split, n in expected.items():
    if n:
      assert sum(1 for _ in builder.as_dataset(split=split)) == n


def _beam_counts(out, meta):
  """Each split's records counted by Beam's TFRecord reader and by TFXIO
  (TFX's reader) in one Beam pipeline."""
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2
  from tfx_bsl.public import tfxio
  gzip = meta['compression'] == 'gzip'
  schema = text_format.Parse(open(os.path.join(out, 'schema.pbtxt')).read(),
                             schema_pb2.Schema())
  compression = (beam.io.filesystem.CompressionTypes.GZIP if gzip
                 else beam.io.filesystem.CompressionTypes.UNCOMPRESSED)
  found = {}
  results = tmp = os.path.join(out, '..', 'counts')
  os.makedirs(tmp, exist_ok=True)
  with beam.Pipeline(runner='FnApiRunner') as p:
    for split, entry in meta['splits'].items():
      files = [os.path.join(out, s['file']) for s in entry['shards']]
      if not files:
        continue
      records = (p | f'{split} files' >> beam.Create(files)
                 | f'{split} read' >> beam.io.ReadAllFromTFRecord(
                     compression_type=compression))
      by_beam = records | f'{split} count' >> beam.combiners.Count.Globally()
      source = tfxio.TFExampleBeamRecord(
          physical_format='tfrecords_gzip' if gzip else 'tfrecord',
          schema=schema)
      by_tfxio = (records | f'{split} tfxio' >> source.BeamSource(
          batch_size=3)
                  | f'{split} rows' >> beam.Map(lambda b: b.num_rows)
                  | f'{split} sum' >> beam.CombineGlobally(sum))
      for name, counted in (('beam', by_beam), ('tfxio', by_tfxio)):
        _ = (counted | f'{split} {name} text' >> beam.Map(str)
             | f'{split} {name} write' >> beam.io.WriteToText(
                 os.path.join(results, f'{split}.{name}'),
                 shard_name_template=''))
  for split, entry in meta['splits'].items():
    counts = set()
    for name in ('beam', 'tfxio'):
      path = os.path.join(results, f'{split}.{name}')
      counts.add(int(open(path).read()) if os.path.exists(path) else 0)
    assert len(counts) == 1, (split, counts)
    found[split] = counts.pop()
  shutil.rmtree(results)
  return found
