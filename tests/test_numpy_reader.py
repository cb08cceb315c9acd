"""pipeline/numpy_reader: the TensorFlow-free reader, against replay_dataset."""

import mmap
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.contract import tfrecord
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
  d = tmp_path_factory.mktemp('npreader')
  for i in range(14):
    cls = ('bus', 'car')[i % 2]
    H.write_wav(str(d / 'in' / cls / f'{i}.wav'),
                H.noise(1024 * (2 + i % 3), 1 + i % 2, seed=i))
  config = H.make_config(d / 'in', d / 'out', win_len=1024,
                         splits='train=0.7,test=0.3', max_examples_per_shard=5,
                         n_fft=256, fft_hop=128,
                         features=('signal', 'spectrogram', 'log_mel'))
  H.run_pipeline(config)
  return d / 'out'


@pytest.fixture(scope='module')
def large_records(tmp_path_factory):
  """Records of 64 KiB and more: batched, their CRCs are checked on a
  second thread."""
  d = tmp_path_factory.mktemp('npreader_large')
  for i in range(6):
    H.write_wav(str(d / 'in' / 'a' / f'{i}.wav'), H.noise(16384 * 3, 1,
                                                          seed=i))
  H.run_pipeline(H.make_config(d / 'in', d / 'out', win_len=16384,
                               max_examples_per_shard=5, n_fft=256,
                               fft_hop=128))
  return d / 'out'


def _key(e):
  return int(e['index']), int(e['win_start_idx'])


@pytest.mark.parametrize('split', ['train', 'test'])
def test_same_elements_as_replay_dataset_bit_for_bit(dataset, split):
  theirs = H.replayed(str(dataset), split)
  ours = {_key(e): e for e in numpy_reader.numpy_dataset(str(dataset), split)}
  assert ours.keys() == theirs.keys()
  for key, e in ours.items():
    assert e.keys() == theirs[key].keys()
    for name, value in e.items():
      want = theirs[key][name]
      if isinstance(value, str):
        assert value.encode() == want
      else:
        assert value.dtype == want.dtype and value.shape == want.shape
        assert np.asarray(value).tobytes() == np.asarray(want).tobytes()


def test_never_imports_tensorflow_or_beam(dataset):
  code = (
      'import sys\n'
      'for name in ("tensorflow", "apache_beam"): sys.modules[name] = None\n'
      'from pipeline import numpy_reader\n'
      f'ds = numpy_reader.numpy_dataset({str(dataset)!r}, "train",\n'
      '                                 batch_size=4, shuffle=True, seed=3)\n'
      'n = sum(len(b["index"]) for b in ds)\n'
      'print(n, len(ds), sorted(m for m in sys.modules\n'
      '      if m.startswith(("tensorflow", "apache_beam"))\n'
      '      and sys.modules[m]))\n')
  proc = subprocess.run([sys.executable, '-c', code], capture_output=True,
                        text=True, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr[-2000:]
  n = len(numpy_reader.numpy_dataset(str(dataset), 'train'))
  assert proc.stdout.split() == [str(n), str(-(-n // 4)), '[]']


def test_batches_shuffle_and_features(dataset):
  plain = [_key(e) for e in numpy_reader.numpy_dataset(str(dataset))]
  ds = numpy_reader.numpy_dataset(str(dataset), batch_size=4, shuffle=True,
                                  seed=7, shuffle_buffer_size=6,
                                  features=['index', 'win_start_idx', 'class'])
  first = [list(zip(b['index'].tolist(), b['win_start_idx'].tolist()))
           for b in ds]
  second = [list(zip(b['index'].tolist(), b['win_start_idx'].tolist()))
            for b in ds]
  assert len(first) == len(ds) == -(-len(plain) // 4)
  flat = [k for b in first for k in b]
  assert sorted(flat) == sorted(plain) and flat != plain
  assert first != second  # a new order each epoch
  again = numpy_reader.numpy_dataset(str(dataset), batch_size=4, shuffle=True,
                                     seed=7, shuffle_buffer_size=6,
                                     features=['index', 'win_start_idx'])
  assert [list(zip(b['index'].tolist(), b['win_start_idx'].tolist()))
          for b in again] == first  # seeded: reproducible
  batch = next(iter(numpy_reader.numpy_dataset(
      str(dataset), batch_size=3, features=['signal', 'class'])))
  assert batch['signal'].shape == (3, 1024) and len(batch['class']) == 3


def test_kept_batches_hold_the_examples_bit_for_bit(dataset):
  """Batches are filled into reused buffers (pipeline.batching) from
  examples decoded without a copy of their own: every batch kept stays
  the examples it was made of."""
  plain = list(numpy_reader.numpy_dataset(str(dataset)))
  batches = list(numpy_reader.numpy_dataset(str(dataset), batch_size=3))
  assert len(batches) == -(-len(plain) // 3) > 3
  for i, example in enumerate(plain):
    batch = batches[i // 3]
    for key, value in example.items():
      got = batch[key][i % 3]
      if isinstance(value, str):
        assert got == value
      else:
        assert got.dtype == value.dtype and got.shape == np.shape(value)
        assert got.tobytes() == np.asarray(value).tobytes()
  assert all(a.flags.writeable for a in batches[0].values()
             if isinstance(a, np.ndarray))


@pytest.mark.parametrize('records', ['dataset', 'large_records'])
@pytest.mark.parametrize('options', [
    dict(batch_size=1), dict(batch_size=4, drop_remainder=True),
    dict(batch_size=5, shuffle=True, seed=2, shuffle_buffer_size=3),
    dict(batch_size=64, features=['spectrogram', 'class', 'index'])])
def test_batches_are_the_examples_stacked(records, options, request):
  """Batched reading (records located a chunk at a time and copied into
  the batch: pipeline/contract/batch_decode) gives the examples read one
  at a time, stacked, in the same order (shuffled by the same seed)."""
  dataset = request.getfixturevalue(records)
  one_by_one = dict(options, batch_size=None, drop_remainder=False)
  plain = list(numpy_reader.numpy_dataset(str(dataset), **one_by_one))
  batches = list(numpy_reader.numpy_dataset(str(dataset), **options))
  size = options['batch_size']
  if options.get('drop_remainder'):
    plain = plain[:len(plain) // size * size]
  assert sum(len(b['class']) for b in batches) == len(plain)
  for i, example in enumerate(plain):
    batch = batches[i // size]
    assert list(batch) == list(example)
    for key, value in example.items():
      got = batch[key][i % size]
      if isinstance(value, str):
        assert got == value
      else:
        assert got.dtype == value.dtype and got.shape == np.shape(value)
        assert got.tobytes() == np.asarray(value).tobytes()


def test_records_in_another_layout_are_batched_the_same(dataset, tmp_path):
  """A shard whose records another writer serialized (TensorFlow's, entry
  order of its own) is read record by record into the same batches."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  out, shard = _copy(dataset, tmp_path)
  path = out / shard['file']
  with open(path, 'rb') as f:
    records = [r for _, r in tfrecord.read_records(f)]
  theirs = [tf.train.Example.FromString(r).SerializeToString()
            for r in records]
  assert all(len(a) == len(b) for a, b in zip(records, theirs))
  with open(path, 'wb') as f:
    for record in theirs:
      tfrecord.write_record(f, record)
  want = list(numpy_reader.numpy_dataset(str(dataset), batch_size=4))
  got = list(numpy_reader.numpy_dataset(str(out), batch_size=4))
  assert len(got) == len(want)
  for a, b in zip(got, want):
    assert list(a) == list(b)
    for key in a:
      if isinstance(a[key], list):
        assert a[key] == b[key]
      else:
        assert a[key].dtype == b[key].dtype
        assert a[key].tobytes() == b[key].tobytes()


@pytest.mark.parametrize('records', ['dataset', 'large_records'])
def test_a_flipped_data_bit_stops_batches_at_its_record(records, tmp_path,
                                                        request):
  """Batched, a record's data CRC is checked before its batch goes out
  (small records just before each is copied, large ones on a second
  thread while they are copied): the batches before its own come out,
  then the error names it; the thread ends with the reading."""
  out, shard = _copy(request.getfixturevalue(records), tmp_path)
  path = out / shard['file']
  data = bytearray(path.read_bytes())
  offsets = [o for o, _ in tfrecord.mapped_records(bytes(data))]
  data[offsets[2] + 200] ^= 0x10  # inside record 2's data
  path.write_bytes(bytes(data))
  reader = numpy_reader.numpy_dataset(str(out), batch_size=2)
  assert (records == 'large_records') == all(
      size > numpy_reader._CHECKED_APART for size in np.diff(offsets))  # pylint: disable=protected-access
  before = sum(s['num_examples'] for s in reader.shards[:reader.shards.index(
      shard)])
  seen = 0
  with pytest.raises(numpy_reader.DatasetError) as e:
    for batch in reader:
      seen += len(batch['class'])
  assert seen == (before + 2) // 2 * 2
  assert f'shard {path}: record 2 at byte {offsets[2]}: data CRC ' \
      'mismatch' in str(e.value)
  assert not [t for t in threading.enumerate()
              if t.name.startswith('wavbeam-crc')]


@pytest.mark.parametrize('records', ['dataset', 'large_records'])
def test_a_dropped_remainder_is_checked_too(records, tmp_path, request):
  """drop_remainder drops the last short batch, not its checks: a damaged
  record there still stops the reading, naming it."""
  out, _ = _copy(request.getfixturevalue(records), tmp_path)
  reader = numpy_reader.numpy_dataset(str(out), batch_size=2)
  shard = reader.shards[-1]
  path = out / shard['file']
  data = bytearray(path.read_bytes())
  offsets = [o for o, _ in tfrecord.mapped_records(bytes(data))]
  data[offsets[-1] + 100] ^= 0x10
  path.write_bytes(bytes(data))
  total = len(numpy_reader.numpy_dataset(str(out)))
  with pytest.raises(numpy_reader.DatasetError,
                     match=f'record {len(offsets) - 1} at byte '
                     f'{offsets[-1]}: data CRC mismatch'):
    list(numpy_reader.numpy_dataset(str(out), batch_size=total - 1,
                                    drop_remainder=True))


def _memory_of(array):
  base = array
  while isinstance(base, np.ndarray):
    base = base.base
  return base.obj if isinstance(base, memoryview) else base


def test_views_of_a_mapped_shard_outlive_its_reading(dataset):
  """Without a copy, arrays are views of the mapped shard: reading that
  stops early, or moves on to the next shard, leaves them whole (the
  mapping goes with the last view, not with the reader)."""
  reader = numpy_reader.NumpyDataset(str(dataset))
  shards = reader.shards
  plain = [list(reader.read_shard(shard)) for shard in shards[:2]]
  first = reader.read_shard(shards[0], copy=False)
  held = next(first)
  first.close()  # stops mid-shard
  rest = list(reader.read_shard(shards[1], copy=False))
  for example, want in [(held, plain[0][0])] + list(zip(rest, plain[1])):
    for key, value in want.items():
      if isinstance(value, np.ndarray):
        got = example[key]
        assert not got.flags.writeable
        assert isinstance(_memory_of(got), mmap.mmap)  # no copy made
        assert got.tobytes() == value.tobytes()
      else:
        assert example[key] == value
  assert all(v.flags.writeable for v in plain[0][0].values()
             if isinstance(v, np.ndarray) and v.ndim)


def test_a_shard_stays_mapped_until_its_file_changes(dataset, tmp_path):
  """Passes over one reader reuse its shards' mappings, and map a shard
  again once its file is another (replaced) or changed in place: a
  flipped bit is found either way."""
  out, shard = _copy(dataset, tmp_path)
  path = out / shard['file']
  reader = numpy_reader.NumpyDataset(str(out))
  first = [e['index'] for e in reader]
  mapped = dict(reader._mapped)  # pylint: disable=protected-access
  assert len(mapped) == len(reader.shards)
  assert [e['index'] for e in reader] == first
  assert all(reader._mapped[p][1] is m for p, (_, m) in mapped.items())  # pylint: disable=protected-access
  data = bytearray(path.read_bytes())
  data[len(data) // 2] ^= 0x10
  replaced = tmp_path / 'replacement'
  replaced.write_bytes(bytes(data))
  os.replace(replaced, path)  # a new file under the shard's name
  with pytest.raises(numpy_reader.DatasetError, match='CRC mismatch'):
    list(reader)
  data[len(data) // 2] ^= 0x10
  path.write_bytes(bytes(data))  # mended in place: the same inode
  os.utime(path, ns=(1, 1))
  assert [e['index'] for e in reader] == first


def _copy(dataset, tmp_path):
  import shutil
  out = tmp_path / 'copy'
  shutil.copytree(dataset, out)
  meta = numpy_reader.load_metadata(str(out))
  return out, meta['splits']['train']['shards'][1]


def test_a_flipped_bit_names_the_shard_and_record(dataset, tmp_path):
  out, shard = _copy(dataset, tmp_path)
  path = out / shard['file']
  data = bytearray(path.read_bytes())
  data[len(data) // 2] ^= 0x10
  path.write_bytes(bytes(data))
  with pytest.raises(numpy_reader.DatasetError) as e:
    list(numpy_reader.numpy_dataset(str(out)))
  assert shard['file'] in str(e.value) and 'CRC mismatch' in str(e.value)
  assert 'record ' in str(e.value)


def test_a_cut_or_grown_shard_is_refused(dataset, tmp_path):
  out, shard = _copy(dataset, tmp_path)
  path = out / shard['file']
  data = path.read_bytes()
  path.write_bytes(data[:-10])
  with pytest.raises(numpy_reader.DatasetError, match='changed or cut'):
    list(numpy_reader.numpy_dataset(str(out)))
  path.write_bytes(data + data[:100])
  with pytest.raises(numpy_reader.DatasetError, match='bytes but'):
    list(numpy_reader.numpy_dataset(str(out)))


def test_unknown_split_or_feature(dataset):
  with pytest.raises(numpy_reader.DatasetError, match='unknown split'):
    numpy_reader.numpy_dataset(str(dataset), 'dev')
  with pytest.raises(numpy_reader.DatasetError, match='unknown feature'):
    numpy_reader.numpy_dataset(str(dataset), features=['mfcc'])


@pytest.mark.parametrize('arguments, message', [
    ({'shuffle': True, 'seed': 'a'}, "seed='a': give an integer"),
    ({'shuffle': True, 'seed': 1.5}, 'seed=1.5: give an integer'),
    ({'shuffle': True, 'seed': True}, 'seed=True: give an integer'),
    ({'dtype': 'bogus'}, "dtype='bogus': give a float dtype"),
    ({'dtype': np.int16}, "dtype=<class 'numpy.int16'>: give a float dtype"),
    ({'num_buckets': 0}, 'num_buckets=0: give a positive integer'),
    ({'num_buckets': 4}, 'num_buckets=4 without max_duration='),
    ({'max_duration': 1.0, 'num_buckets': True},
     'num_buckets=True: give a positive integer'),
])
def test_bad_arguments_are_refused_when_built(dataset, arguments, message):
  """Not at the first example, where numpy's own error names none."""
  with pytest.raises(numpy_reader.DatasetError, match=message):
    numpy_reader.numpy_dataset(str(dataset), **arguments)


def test_arguments_that_are_taken(dataset):
  for arguments in ({'shuffle': True, 'seed': -3},
                    {'shuffle': True, 'seed': np.int64(2)},
                    {'dtype': np.float16}, {'dtype': 'bfloat16'},
                    {'max_duration': 1.0, 'num_buckets': 2}):
    assert next(iter(numpy_reader.numpy_dataset(str(dataset),
                                                **arguments)))


def test_a_shard_that_is_not_a_plain_file_is_refused(dataset, tmp_path):
  out, shard = _copy(dataset, tmp_path)
  path = out / shard['file']
  path.unlink()
  os.mkfifo(path)
  with pytest.raises(numpy_reader.DatasetError, match='not a plain file'):
    list(numpy_reader.numpy_dataset(str(out)))


def test_record_ranges():
  assert numpy_reader.record_ranges([5, 5, 3], 0, 13) == [
      (0, 0, 5), (1, 0, 5), (2, 0, 3)]
  assert numpy_reader.record_ranges([5, 5, 3], 4, 11) == [
      (0, 4, 5), (1, 0, 5), (2, 0, 1)]
  assert numpy_reader.record_ranges([5, 0, 3], 5, 6) == [(2, 0, 1)]
  assert numpy_reader.record_ranges([5, 5], 3, 3) == []


def test_a_shard_read_in_parts_is_the_whole_shard(dataset):
  reader = numpy_reader.NumpyDataset(str(dataset), 'train')
  for shard in reader.shards:
    whole = [_key(e) for e in reader.read_shard(shard)]
    n = shard['num_examples']
    assert len(whole) == n
    for cut in range(n + 1):
      parts = [_key(e) for e in reader.read_records(shard, 0, cut)]
      parts += [_key(e) for e in reader.read_records(shard, cut, n)]
      assert parts == whole


def test_a_skipped_record_header_is_still_checked(dataset, tmp_path):
  out, shard = _copy(dataset, tmp_path)
  path = out / shard['file']
  data = bytearray(path.read_bytes())
  with open(path, 'rb') as f:
    offsets = [o for o, _ in tfrecord.read_records(f)]
  data[offsets[1]] ^= 0x01  # record 1's length
  path.write_bytes(bytes(data))
  reader = numpy_reader.NumpyDataset(str(out), 'train')
  assert len(list(reader.read_records(shard, 0, 1))) == 1
  with pytest.raises(numpy_reader.DatasetError,
                     match=r'record 1 at byte \d+: length CRC mismatch'):
    list(reader.read_records(shard, 3, shard['num_examples']))


def test_the_reader_that_ends_a_shard_checks_it_ends_there(dataset,
                                                           tmp_path):
  """A shard holding a record more than metadata.json says (its size
  edited to match): the part that ends the shard refuses it."""
  out, shard = _copy(dataset, tmp_path)
  path = out / shard['file']
  data = path.read_bytes()
  with open(path, 'rb') as f:
    first = next(tfrecord.read_records(f))[1]
  path.write_bytes(data + data[:16 + len(first)])
  shard = dict(shard, num_bytes=len(data) + 16 + len(first))
  reader = numpy_reader.NumpyDataset(str(out), 'train')
  n = shard['num_examples']
  assert len(list(reader.read_records(shard, 0, n - 1))) == n - 1
  with pytest.raises(numpy_reader.DatasetError, match='holds more records'):
    list(reader.read_records(shard, n - 1, n))


@pytest.mark.parametrize('where', ['deflate stream', 'gzip trailer'])
def test_a_damaged_gzip_shard_is_a_dataset_error_naming_it(tmp_path, where):
  """zlib's error inside the stream, gzip's CRC check at its end: both
  DatasetErrors that name the shard, as a damaged plain shard's are."""
  for i in range(2):
    H.write_wav(str(tmp_path / 'in' / 'a' / f'{i}.wav'), H.noise(8192, seed=i))
  config = H.make_config(tmp_path / 'in', tmp_path / 'out', win_len=2048,
                         compression='gzip')
  meta = H.run_pipeline(config)
  shard = tmp_path / 'out' / meta['splits']['train']['shards'][0]['file']
  data = bytearray(shard.read_bytes())
  data[20 if where == 'deflate stream' else -6] ^= 0x40
  shard.write_bytes(bytes(data))
  with pytest.raises(numpy_reader.DatasetError,
                     match=f'^shard {shard}: .*pipeline.verify'):
    list(numpy_reader.numpy_dataset(str(tmp_path / 'out'), 'train'))
