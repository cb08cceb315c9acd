"""The output loads as-is in TFDS, TFX (TFXIO) and Keras."""

import dataclasses
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from pipeline.readers import tf_dataset as replay
from pipeline.commands import run as run_lib
from pipeline.config import ConfigError
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLASSES = ('bus', 'car', 'truck')


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
  d = tmp_path_factory.mktemp('interop')
  for i in range(30):
    cls = CLASSES[i % 3]
    H.write_wav(str(d / 'in' / f'{i}_{cls}.wav'),
                H.noise(1024 * (2 + i % 3), seed=i))
  config = H.make_config(d / 'in', d / 'out', win_len=1024, label_from='suffix',
                         splits='train=0.7,validation=0.15,test=0.15',
                         max_examples_per_shard=8, n_fft=256, fft_hop=128,
                         features=('signal', 'spectrogram'))
  meta = H.run_pipeline(config)
  return d / 'out', meta


def _key(e):
  return (int(e['index']), int(e['win_start_idx']))


def _as_numpy(element):
  return {k: np.asarray(v) for k, v in element.items()}


def test_tfds_loads_every_split_with_exact_values_and_slicing(dataset):
  import tensorflow_datasets as tfds
  out, meta = dataset
  builder = tfds.builder_from_directory(str(out))
  info = builder.info
  assert info.supervised_keys == ('spectrogram', 'target')
  assert info.features['target'].names == list(CLASSES)
  assert info.features['signal'].dtype == tf.int32
  assert info.features['spectrogram'].shape == tuple(
      meta['schema']['spectrogram']['shape'])
  for split, entry in meta['splits'].items():
    assert info.splits[split].num_examples == entry['num_examples']
    ours = H.replayed(str(out), split)
    theirs = {}
    for e in builder.as_dataset(split=split):
      e = _as_numpy(tfds.as_numpy(e))
      theirs[_key(e)] = e
    assert sorted(theirs) == sorted(ours)
    for key, e in theirs.items():
      for name, value in ours[key].items():
        got = e[name]
        if isinstance(value, bytes):
          got = got.item() if got.dtype == object else got
        assert np.array_equal(got, value), (split, key, name)
  # Slicing: TFDS reads shards in order, so train[75%:] is the tail of the
  # shard sequence; compare with our shards read in order.
  n = meta['splits']['train']['num_examples']
  ordered = []
  for shard in meta['splits']['train']['shards']:
    for record in tf.data.TFRecordDataset(str(out / shard['file'])):
      f = tf.train.Example.FromString(record.numpy()).features.feature
      ordered.append((f['index'].int64_list.value[0],
                      f['win_start_idx'].int64_list.value[0]))
  tail = builder.as_dataset(split='train[75%:]')
  got = sorted(_key(_as_numpy(tfds.as_numpy(e))) for e in tail)
  start = int(round(75 * n / 100.0))  # TFDS's default 'closest' rounding
  assert got == sorted(ordered[start:])
  assert len(got) == n - start


def _tfds_features(meta):
  """The dataset's features built with TFDS's own classes from the schema."""
  import tensorflow_datasets as tfds
  out = {}
  for key, spec in meta['schema'].items():
    if key == 'target':
      out[key] = tfds.features.ClassLabel(names=meta['classes'])
    elif spec['dtype'] == 'string':
      out[key] = tfds.features.Text()
    else:
      out[key] = tfds.features.Tensor(
          shape=tuple(spec['shape']), dtype=np.dtype(spec['dtype']),
          encoding='bytes' if spec['encoding'] == 'raw_bytes' else 'none')
  return out


def test_tfds_files_equal_what_tfds_itself_writes(dataset, tmp_path):
  """dataset_info.json and features.json against TFDS's write_metadata for
  the same shards, features and splits (compared as JSON: key order and
  indentation are free)."""
  import json
  import shutil
  import tensorflow_datasets as tfds
  out, meta = dataset
  for entry in meta['splits'].values():
    for shard in entry['shards']:
      shutil.copy(out / shard['file'], tmp_path / shard['file'])
  splits = [tfds.core.SplitInfo(
      name=name, shard_lengths=[s['num_examples'] for s in entry['shards']],
      num_bytes=entry['example_bytes'])
      for name, entry in meta['splits'].items()]
  ours_info = json.loads((out / 'dataset_info.json').read_text())
  tfds.folder_dataset.write_metadata(
      data_dir=tmp_path, features=_tfds_features(meta), split_infos=splits,
      supervised_keys=(meta['input_key'], 'target'),
      description=ours_info['description'], check_data=True)
  for name in ('dataset_info.json', 'features.json', 'target.labels.txt'):
    theirs = (tmp_path / name).read_text()
    ours = (out / name).read_text()
    if name.endswith('.json'):
      theirs, ours = json.loads(theirs), json.loads(ours)
      if name == 'dataset_info.json':
        theirs['splits'].sort(key=lambda split: split['name'])
    assert ours == theirs, name


def test_tfds_load_with_tfds_layout(dataset, tmp_path):
  import tensorflow_datasets as tfds
  out, _ = dataset
  config = H.make_config(out.parent / 'in', tmp_path, win_len=1024,
                         label_from='suffix', dataset_name='vehicles',
                         tfds_layout=True, features=('signal',))
  meta = H.run_pipeline(config)
  assert os.path.exists(tmp_path / 'vehicles' / '1.0.0' / 'metadata.json')
  ds = tfds.load('vehicles', data_dir=str(tmp_path), split='train')
  assert sum(1 for _ in ds) == meta['splits']['train']['num_examples']
  # replay_dataset finds the nested dataset from the top folder too.
  assert replay.replay_dataset(str(tmp_path)).cardinality().numpy() == \
      meta['splits']['train']['num_examples']
  # So do verify and inspect.
  from pipeline.commands import inspect as inspect_lib
  from pipeline.commands import verify
  n = meta['splits']['train']['num_examples']
  assert f'OK, {n} examples' in verify.verify(str(tmp_path))
  nested = str(tmp_path / 'vehicles' / '1.0.0')
  assert inspect_lib.resolve_dataset_dir(str(tmp_path)) == nested


def test_a_folder_holds_one_layout_at_a_time(dataset, tmp_path):
  """A dataset written into the folder and one in its OUT/name/version
  (--tfds_layout) never share it: readers given the folder would read
  one of the two, and --overwrite replaces only its own; either run is
  refused, the folder left as it was."""
  out, _ = dataset
  flat = H.make_config(out.parent / 'in', tmp_path / 'out', win_len=1024,
                       label_from='suffix', features=('signal',))
  nested = dataclasses.replace(flat, tfds_layout=True, overwrite=True)
  H.run_pipeline(flat)
  before = sorted(os.listdir(tmp_path / 'out'))
  with pytest.raises(ConfigError, match='holds a dataset of its own'):
    H.run_pipeline(nested)
  assert sorted(os.listdir(tmp_path / 'out')) == before
  # The command locks OUT/other/1.0.0 first: the folders it made go too.
  with pytest.raises(ConfigError, match='holds a dataset of its own'):
    run_lib.run(dataclasses.replace(nested, dataset_name='other'),
                ['--runner=FnApiRunner'])
  assert sorted(os.listdir(tmp_path / 'out')) == before
  shutil.rmtree(tmp_path / 'out')
  H.run_pipeline(nested)
  with pytest.raises(ConfigError, match='holds a --tfds_layout dataset'):
    H.run_pipeline(dataclasses.replace(flat, overwrite=True))
  assert os.listdir(tmp_path / 'out') == ['wavbeam']
  H.run_pipeline(nested)  # the same layout replaces its own


def test_tfds_metadata_is_skipped_where_it_cannot_work(dataset, tmp_path):
  out, _ = dataset
  config = H.make_config(out.parent / 'in', tmp_path / 'gz', win_len=1024,
                         label_from='suffix', compression='gzip',
                         features=('signal',))
  meta = H.run_pipeline(config)
  assert meta['interop']['tfds'].startswith('skipped: --compression=gzip')
  assert not os.path.exists(tmp_path / 'gz' / 'dataset_info.json')
  assert len(H.replayed(str(tmp_path / 'gz'))) == \
      meta['splits']['train']['num_examples']


def test_tfxio_reads_the_shards_into_record_batches(dataset):
  import apache_beam as beam
  from apache_beam.testing.util import assert_that
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2
  from tfx_bsl.public import tfxio

  out, meta = dataset
  schema = text_format.Parse(open(out / 'schema.pbtxt').read(),
                             schema_pb2.Schema())
  signal = [f for f in schema.feature if f.name == 'signal'][0]
  assert 'wavbeam.dtype:int32' in signal.annotation.tag
  target = [f for f in schema.feature if f.name == 'target'][0]
  assert target.int_domain.max == len(CLASSES) - 1
  assert target.int_domain.is_categorical
  label = [f for f in schema.feature if f.name == 'class'][0]
  assert list(label.string_domain.value) == list(CLASSES)
  spectrogram = [f for f in schema.feature if f.name == 'spectrogram'][0]
  assert spectrogram.type == schema_pb2.FLOAT
  assert [d.size for d in spectrogram.shape.dim] == \
      meta['schema']['spectrogram']['shape']
  source = tfxio.TFExampleRecord(
      file_pattern=[str(out / s['file'])
                    for s in meta['splits']['test']['shards']],
      schema=schema)
  expected = H.replayed(str(out), 'test')

  def check(batches):
    rows = 0
    for batch in batches:
      for i in range(batch.num_rows):
        key = (batch.column('index')[i][0].as_py(),
               batch.column('win_start_idx')[i][0].as_py())
        raw = batch.column('signal')[i][0].as_py()
        assert np.array_equal(np.frombuffer(raw, '<i4'),
                              expected[key]['signal'])
        floats = np.array(batch.column('spectrogram')[i].as_py(), np.float32)
        assert np.array_equal(floats, expected[key]['spectrogram'].ravel())
        rows += 1
    assert rows == len(expected)

  with beam.Pipeline(runner='FnApiRunner') as p:
    batches = p | source.BeamSource(batch_size=4)
    assert_that(batches | beam.combiners.ToList(),
                lambda lists: [check(lists[0])])
  adapter = source.TensorAdapter()
  assert adapter.TypeSpecs()['spectrogram'].shape.as_list() == [
      None, *meta['schema']['spectrogram']['shape']]
  assert adapter.TypeSpecs()['spectrogram'].dtype == tf.float32


def test_schema_pbtxt_escapes_any_feature_key(dataset):
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2
  from pipeline.contract import tfx_schema
  _, meta = dataset
  key = 'quote" back\\slash \\" ünï ✓'
  odd = dict(meta, schema=dict(meta['schema'],
                               **{key: meta['schema']['index']}))
  parsed = text_format.Parse(tfx_schema.text(odd), schema_pb2.Schema())
  assert key in [f.name for f in parsed.feature]
  assert len(parsed.feature) == len(odd['schema'])


def test_keras_example_trains_one_epoch(dataset):
  out, _ = dataset
  proc = subprocess.run(
      [sys.executable, 'examples/train_keras.py', '--data', str(out),
       '--epochs', '1', '--batch_size', '8'],
      capture_output=True, text=True, cwd=ROOT, timeout=600,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'validation accuracy' in proc.stdout


def test_bucketing_is_refused_for_windows_of_one_length(dataset):
  out, _ = dataset
  with pytest.raises(replay.DatasetError, match='no variable-length feature '
                     'among those read'):
    replay.replay_dataset(str(out), batch_size=4, bucket_boundaries=[10])
