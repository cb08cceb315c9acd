"""--array_record: the same Example bytes as ArrayRecord files, read by
tfds.data_source, Grain and a PyTorch map-style Dataset, element by
element against replay_dataset."""

import json
import os
import re
import shutil
import subprocess
import sys

import grain
import numpy as np
import pytest
import torch

from pipeline import config as config_lib
from pipeline.contract import naming
from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.readers import tf_dataset as replay
from pipeline.commands import verify
from pipeline.readers.array_record import ArrayRecordSource
from pipeline.contract.errors import DatasetError
from pipeline.readers.torch_dataset import WavbeamMapDataset, collate
from tests import helpers as H
from pipeline.contract import array_record_file
from pipeline.contract import tfrecord

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
  d = tmp_path_factory.mktemp('array_record')
  for i in range(12):
    H.write_wav(str(d / 'in' / ('owl', 'wren', 'kite')[i % 3] / f'{i}.wav'),
                H.noise(4096 + 700 * i, seed=i))
  config = H.make_config(str(d / 'in'), str(d / 'out'), win_len=1024,
                         hop_len=1024, n_fft=256, fft_hop=128,
                         features=('signal', 'spectrogram'),
                         splits='train=0.8,test=0.2',
                         max_examples_per_shard=7, array_record=True)
  H.run_pipeline(config)
  return str(d / 'out')


def _replayed_in_order(dataset, split='train'):
  """replay_dataset's elements in the shards' record order (numpy_reader,
  which reads shard after shard, gives the order; replay the values)."""
  by_key = {_key(e): dict(e) for e in replay.replay_dataset(
      dataset, split, shuffle=False).as_numpy_iterator()}
  order = [_key(e) for e in numpy_reader.numpy_dataset(
      dataset, split, features=['filepath', 'win_start_idx'])]
  assert sorted(order) == sorted(by_key)
  return [by_key[k] for k in order]


def _key(example):
  path = example['filepath']
  return (path.decode() if isinstance(path, bytes) else str(path),
          int(example['win_start_idx']))


def _assert_equal(got, expected):
  assert sorted(got) == sorted(expected)
  for k, value in expected.items():
    mine = got[k]
    if isinstance(value, bytes):
      mine = mine if isinstance(mine, bytes) else str(mine).encode()
      assert mine == value, k
    else:
      assert np.array_equal(np.asarray(mine), value), k
      assert np.asarray(mine).dtype == np.asarray(value).dtype or (
          np.asarray(value).ndim == 0), k


def test_copies_hold_the_shards_records_and_verify_checks_them(dataset):
  meta = replay.load_metadata(dataset)
  for split, entry in meta['splits'].items():
    copies = entry[naming.ARRAY_RECORD]
    assert len(copies) == len(entry['shards']) > 0
    for shard, copy in zip(entry['shards'], copies):
      assert copy['file'] == shard['file'].replace('.tfrecord-',
                                                   '.array_record-')
      with open(os.path.join(dataset, shard['file']), 'rb') as f:
        records = [bytes(r) for _, r in tfrecord.read_records(f)]
      assert array_record_file.read_all(
          os.path.join(dataset, copy['file'])) == records
      assert copy['num_bytes'] == os.path.getsize(
          os.path.join(dataset, copy['file']))
  assert 'ArrayRecord copies' in verify.verify(dataset)


def test_verify_refuses_a_copy_out_of_order(dataset, tmp_path):
  broken = tmp_path / 'broken'
  shutil.copytree(dataset, broken)
  meta = replay.load_metadata(str(broken))
  copy = meta['splits']['train'][naming.ARRAY_RECORD][0]['file']
  records = array_record_file.read_all(str(broken / copy))
  os.remove(broken / copy)
  with array_record_file.Writer(str(broken / copy)) as w:
    for record in reversed(records):
      w.write(record)
  with pytest.raises(verify.VerifyError, match='CRC32C differs'):
    verify.verify(str(broken))
  _forget_crcs(broken)  # a copy listed without its CRC32C
  with pytest.raises(verify.VerifyError, match='record 0 differs'):
    verify.verify(str(broken))


def test_tfds_data_source_is_random_access_and_equal(dataset):
  import tensorflow_datasets as tfds
  source = tfds.builder_from_directory(dataset).as_data_source('train')
  expected = _replayed_in_order(dataset)
  assert len(source) == len(expected) > 7
  for i in np.random.default_rng(0).permutation(len(expected)):
    _assert_equal(dict(source[int(i)]), expected[i])


def test_array_record_source_equals_replay(dataset):
  for split in ('train', 'test'):
    source = ArrayRecordSource(dataset, split)
    expected = _replayed_in_order(dataset, split)
    assert len(source) == len(expected)
    for i, example in enumerate(source.__getitems__(
        list(range(len(source)))[::-1])):
      _assert_equal(example, expected[len(expected) - 1 - i])
    assert _key(source[-1]) == _key(expected[-1])
    with pytest.raises(IndexError):
      source[len(source)]


def test_grain_shuffled_sharded_checkpointed(dataset):
  source = ArrayRecordSource(dataset, 'train')
  reference = {_key(e): e for e in _replayed_in_order(dataset)}
  shuffled = grain.MapDataset.source(source).shuffle(seed=5)
  parts = [shuffled[i::2] for i in range(2)]  # e.g. one per host
  keys = [[_key(e) for e in part] for part in parts]
  assert sorted(keys[0] + keys[1]) == sorted(reference)
  assert keys[0] + keys[1] != sorted(keys[0] + keys[1])  # shuffled
  for part in parts:
    for e in part:
      _assert_equal(e, reference[_key(e)])
  # Checkpoint after 3 elements; a new iterator resumed from the state
  # yields exactly the rest.
  iterator = iter(parts[0].to_iter_dataset())
  for _ in range(3):
    next(iterator)
  state = iterator.get_state()
  rest = [_key(e) for e in iterator]
  resumed = iter(parts[0].to_iter_dataset())
  resumed.set_state(state)
  assert [_key(e) for e in resumed] == rest == keys[0][3:]


@pytest.mark.parametrize('collate_fn', [None, collate])
def test_pytorch_map_style_dataset_shuffles_each_example_once(dataset,
                                                              collate_fn):
  """With DataLoader's default_collate and with wavbeam's collate (reused
  buffers handed over once; every batch kept here, so none is reused
  under one still held)."""
  data = WavbeamMapDataset(dataset, 'train')
  reference = {_key(e): e for e in _replayed_in_order(dataset)}
  loader = torch.utils.data.DataLoader(
      data, batch_size=3, shuffle=True, num_workers=2,
      multiprocessing_context='spawn', collate_fn=collate_fn,
      generator=torch.Generator().manual_seed(0))
  seen = []
  batches = list(loader)
  for batch in batches:
    assert batch['spectrogram'].dtype == torch.float32
    for i, path in enumerate(batch['filepath']):
      key = (path, int(batch['win_start_idx'][i]))
      seen.append(key)
      assert np.array_equal(batch['spectrogram'][i].numpy(),
                            reference[key]['spectrogram'])
      assert int(batch['target'][i]) == int(reference[key]['target'])
  assert sorted(seen) == sorted(reference) and seen != sorted(seen)


def test_readers_refuse_missing_or_changed_copies(dataset, tmp_path):
  plain = tmp_path / 'plain'
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(4096))
  H.run_pipeline(H.make_config(str(tmp_path / 'in'), str(plain),
                               win_len=1024))
  with pytest.raises(DatasetError, match='without --array_record'):
    ArrayRecordSource(str(plain), 'train')
  changed = tmp_path / 'changed'
  shutil.copytree(dataset, changed)
  copy = replay.load_metadata(str(changed))['splits']['train'][
      naming.ARRAY_RECORD][1]['file']
  with open(changed / copy, 'ab') as f:
    f.write(b'x')
  with pytest.raises(DatasetError, match='changed or cut after writing'):
    ArrayRecordSource(str(changed), 'train')


def test_option_is_refused_where_it_cannot_work(tmp_path):
  with pytest.raises(config_lib.ConfigError, match='--sink shards'):
    H.make_config(str(tmp_path), str(tmp_path / 'o'), array_record=True,
                  sink='write_to_tfrecord', splits='train=1')
  H.write_wav(str(tmp_path / 'a' / 'x.wav'), H.noise(4096))
  temp = tmp_path / 'temp'
  temp.mkdir()
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir', str(tmp_path),
       '--output_dir', 'gs://bucket/out', '--array_record'],
      capture_output=True, text=True, cwd=ROOT, timeout=300,
      env=dict(os.environ, TMPDIR=str(temp)))
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert 'local folders only' in proc.stderr
  # Refused after Beam's Pipeline() was made: its temp folder went too.
  assert os.listdir(temp) == []


def _forget_crcs(dataset_dir):
  meta_path = dataset_dir / naming.METADATA_FILE
  meta = json.loads(meta_path.read_text())
  for entry in meta['splits'].values():
    for copy in entry[naming.ARRAY_RECORD]:
      del copy['crc32c']
  meta_path.write_text(json.dumps(meta))


def _copy_path(dataset_dir, split='train', index=0):
  return os.path.join(dataset_dir, replay.load_metadata(dataset_dir)[
      'splits'][split][naming.ARRAY_RECORD][index]['file'])


def test_a_foreign_file_of_the_same_size_is_refused(dataset, tmp_path):
  """The same records in another order: another ArrayRecord file of the
  same size, which only the recorded CRC32C tells from the real one."""
  foreign = tmp_path / 'foreign'
  shutil.copytree(dataset, foreign)
  path = _copy_path(str(foreign))
  records = array_record_file.read_all(path)
  size = os.path.getsize(path)
  os.remove(path)
  with array_record_file.Writer(path) as w:
    for record in records[1:] + records[:1]:
      w.write(record)
  assert os.path.getsize(path) == size
  with pytest.raises(DatasetError, match='content is not the one'):
    ArrayRecordSource(str(foreign), 'train')[0]
  with pytest.raises(verify.VerifyError, match='CRC32C differs'):
    verify.verify(str(foreign))


@pytest.mark.parametrize('recorded_crc', [True, False])
def test_a_damaged_file_is_named_in_the_error(dataset, tmp_path,
                                              recorded_crc):
  damaged = tmp_path / 'damaged'
  shutil.copytree(dataset, damaged)
  path = _copy_path(str(damaged))
  with open(path, 'r+b') as f:
    f.seek(os.path.getsize(path) // 2)
    byte = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([byte[0] ^ 0xFF]))
  if not recorded_crc:
    _forget_crcs(damaged)
  source = ArrayRecordSource(str(damaged), 'train')
  with pytest.raises(DatasetError, match=os.path.basename(path)):
    source.__getitems__(list(range(len(source))))


def test_every_reader_takes_a_pathlib_path(dataset):
  import pathlib
  from pipeline.readers.metadata import load_metadata
  from pipeline.readers.torch_dataset import WavbeamIterableDataset
  folder = pathlib.Path(dataset)
  count = load_metadata(dataset)['splits']['train']['num_examples']
  assert load_metadata(folder)['splits']['train']['num_examples'] == count
  assert len(list(numpy_reader.numpy_dataset(folder, 'train'))) == count
  assert len(ArrayRecordSource(folder, 'train')) == count
  assert len(WavbeamMapDataset(folder, 'train')) == count
  assert len(list(WavbeamIterableDataset(folder, 'train'))) == count
  assert sum(1 for _ in replay.replay_dataset(folder, 'train')) == count


def test_an_index_that_is_not_an_integer_is_refused(dataset):
  """Not rounded (1.7 would give example 1) nor parsed ('2')."""
  source = ArrayRecordSource(dataset, 'train')
  assert source[np.int64(1)]['win_start_idx'] == source[1]['win_start_idx']
  for index in (1.7, '2', slice(0, 2), True):
    with pytest.raises(TypeError, match=f'index {re.escape(repr(index))}: '
                       'give an integer'):
      source[index]


@pytest.mark.parametrize('features, message', [
    ([], 'name at least one feature'),
    ('signal', "give a list of feature names, e.g. \\['signal'\\]")])
def test_features_name_at_least_one_feature(dataset, features, message):
  for reader in (numpy_reader.numpy_dataset, ArrayRecordSource,
                 replay.replay_dataset):
    with pytest.raises(DatasetError, match=(
        f'features={re.escape(repr(features))}: {message}')):
      reader(dataset, 'train', features=features)
