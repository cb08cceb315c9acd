"""pipeline.verify catches corrupt, cut, missing and miscounted shards."""

import json
import re
import os
import shutil
import subprocess
import sys

import pytest

from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
  d = tmp_path_factory.mktemp('verify')
  for i in range(6):
    H.write_wav(str(d / 'in' / 'c' / f'{i}.wav'), H.noise(4096, seed=i))
  config = H.make_config(d / 'in', d / 'good', win_len=1024,
                         max_examples_per_shard=8, n_fft=256, fft_hop=128)
  meta = H.run_pipeline(config)
  return d / 'good', meta


def _verify(out):
  return subprocess.run([sys.executable, '-m', 'pipeline.verify', str(out)],
                        capture_output=True, text=True, cwd=ROOT)


def _copy(dataset, tmp_path):
  out = tmp_path / 'copy'
  shutil.copytree(dataset[0], out)
  return out, dataset[1]['splits']['train']['shards']


def test_a_good_dataset_verifies(dataset):
  proc = _verify(dataset[0])
  assert proc.returncode == 0, proc.stderr
  assert 'OK, 24 examples in 3 shards' in proc.stdout


def test_a_flipped_byte_names_file_and_record(dataset, tmp_path):
  out, shards = _copy(dataset, tmp_path)
  path = out / shards[1]['file']
  data = bytearray(path.read_bytes())
  record_size = len(data) // shards[1]['num_examples']
  data[record_size * 3 + 500] ^= 0x01  # inside the 4th record's data
  path.write_bytes(bytes(data))
  proc = _verify(out)
  assert proc.returncode == 1
  assert f'{path}: record 3 at byte' in proc.stderr
  assert 'data CRC mismatch' in proc.stderr


def test_a_shard_of_other_records_of_the_same_sizes_is_found(dataset,
                                                             tmp_path):
  """Another dataset's shard of the same options copied over one of
  these: sizes, counts, CRCs, schema, classes and index all agree; the
  digest of its records does not."""
  from pipeline.contract import tfrecord
  out, shards = _copy(dataset, tmp_path)
  path = out / shards[0]['file']
  with open(path, 'rb') as f:
    records = [bytearray(data) for _, data in tfrecord.read_records(f)]
  records[2][len(records[2]) // 2] ^= 0x01  # inside an array's bytes
  with open(path, 'wb') as f:
    for data in records:
      tfrecord.write_record(f, bytes(data))
  assert os.path.getsize(path) == shards[0]['num_bytes']
  proc = _verify(out)
  assert proc.returncode == 1, proc.stdout
  assert f'{path}: not the records that were written there' in proc.stderr


def test_a_truncated_shard_and_a_deleted_shard(dataset, tmp_path):
  out, shards = _copy(dataset, tmp_path)
  path = out / shards[0]['file']
  path.write_bytes(path.read_bytes()[:-100])
  proc = _verify(out)
  assert proc.returncode == 1 and f'{path}:' in proc.stderr
  assert 'metadata.json says' in proc.stderr
  (out / shards[2]['file']).unlink()
  path.write_bytes((dataset[0] / shards[0]['file']).read_bytes())
  proc = _verify(out)
  assert proc.returncode == 1
  assert f'{out / shards[2]["file"]}: listed in metadata.json but missing' \
      in proc.stderr


def _count_consistently(meta, split, delta):
  """Changes every count a changed shard count enters, so that only the
  shard's records can tell the lie."""
  meta['splits'][split]['num_examples'] += delta
  per_class = meta['splits'][split]['examples_per_class']
  per_class[sorted(per_class)[0]] += delta
  meta['counts']['examples'] += delta


def test_a_miscounted_shard_and_a_missing_metadata(dataset, tmp_path):
  out, shards = _copy(dataset, tmp_path)
  meta = json.load(open(out / 'metadata.json'))
  first = meta['splits']['train']['shards'][0]
  first['num_examples'] += 1
  _count_consistently(meta, 'train', +1)
  (out / 'metadata.json').write_text(json.dumps(meta))
  proc = _verify(out)
  assert proc.returncode == 1
  assert (f'{out / first["file"]}: {first["num_examples"] - 1} records, '
          f'metadata.json says {first["num_examples"]}') in proc.stderr
  (out / 'metadata.json').unlink()
  proc = _verify(out)
  assert proc.returncode == 1 and 'did not finish' in proc.stderr


def _replay_error(out, **kw):
  import tensorflow as tf
  from pipeline.readers import tf_dataset as replay
  with pytest.raises((tf.errors.OpError, replay.DatasetError)) as e:
    for _ in replay.replay_dataset(str(out), 'train', **kw):
      pass
  return str(e.value)


@pytest.mark.parametrize('engine', ['tf', 'numpy'])
@pytest.mark.parametrize('batch_size,features,where', [
    (None, None, 'data'), (5, None, 'data'), (5, ['target'], 'data'),
    (None, None, 'header'), (3, ['index'], 'header')])
def test_replay_names_the_shard_with_a_corrupt_record(dataset, tmp_path,
                                                      batch_size, features,
                                                      where, engine):
  out, shards = _copy(dataset, tmp_path)
  path = out / shards[1]['file']
  data = bytearray(path.read_bytes())
  record_size = len(data) // shards[1]['num_examples']
  # Same size, so only the CRCs can tell: a payload byte of the 6th record,
  # or the length field of the 3rd.
  offset = record_size * 5 + 300 if where == 'data' else record_size * 2 + 1
  data[offset] ^= 0x01
  path.write_bytes(bytes(data))
  message = _replay_error(out, batch_size=batch_size, features=features,
                          engine=engine)
  if engine == 'tf':
    assert f'wavbeam: shard {path} holds fewer records than metadata.json ' \
        'says' in message
  else:  # numpy_reader's words, which name the record
    record, crc = (5, 'data') if where == 'data' else (2, 'length')
    assert f'DatasetError: shard {path}: record {record} at byte ' in message
    assert f'{crc} CRC mismatch' in message


@pytest.mark.parametrize('engine', ['tf', 'numpy'])
def test_replay_names_a_shard_with_more_or_fewer_records_than_listed(
    dataset, tmp_path, engine):
  for delta, says in ((-1, 'more'), (+1, 'fewer')):
    out, shards = _copy(dataset, tmp_path / says)
    meta = json.load(open(out / 'metadata.json'))
    entry = meta['splits']['train']['shards'][2]
    entry['num_examples'] += delta
    _count_consistently(meta, 'train', delta)
    (out / 'metadata.json').write_text(json.dumps(meta))
    message = _replay_error(out, shuffle=True, seed=1, engine=engine)
    assert (f'shard {out / entry["file"]} holds {says} records '
            'than') in message


def test_replay_names_a_cut_shard_before_reading(dataset, tmp_path):
  out, shards = _copy(dataset, tmp_path)
  cut = out / shards[0]['file']
  cut.write_bytes(cut.read_bytes()[:-100])
  message = _replay_error(out)
  assert str(cut) in message and 'metadata.json says' in message


def test_replay_of_a_good_dataset_reads_each_example_once(dataset):
  from pipeline.readers import tf_dataset as replay
  keys = [(e['filepath'].numpy(), int(e['win_start_idx'])) for e in
          replay.replay_dataset(str(dataset[0]), 'train', shuffle=True,
                                seed=3, features=['filepath', 'win_start_idx'])]
  assert len(keys) == len(set(keys)) == 24


def test_a_format_1_dataset_reads_the_same_everywhere(dataset, tmp_path):
  """Version 1 stored float32 arrays as raw bytes: replay_dataset, verify
  and inspect read such a dataset to the same values."""
  import numpy as np
  from pipeline.commands import inspect as inspect_lib
  from pipeline.commands import verify
  out, meta = dataset
  old = tmp_path / 'v1'
  H.to_format_1(str(out), str(old))
  assert json.load(open(old / 'metadata.json'))['schema']['spectrogram'][
      'encoding'] == 'raw_bytes'
  assert (old / meta['splits']['train']['shards'][0]['file']).read_bytes() != \
      (out / meta['splits']['train']['shards'][0]['file']).read_bytes()
  new_elements, old_elements = H.replayed(str(out)), H.replayed(str(old))
  assert sorted(new_elements) == sorted(old_elements)
  for key, element in new_elements.items():
    for name, value in element.items():
      assert np.array_equal(old_elements[key][name], value), (key, name)
  n = meta['splits']['train']['num_examples']
  assert f'OK, {n} examples' in verify.verify(str(old))
  metadata = inspect_lib.load(str(old))
  assert '(raw_bytes)' in inspect_lib.summary_text(str(old), metadata)
  assert 'spectrogram' in inspect_lib.show_text(str(old), metadata, 'train', 1)


def _edit_metadata(out, edit):
  path = out / 'metadata.json'
  text = path.read_text()
  path.write_text(edit(text, json.loads(text)))


def _set(update):
  """An edit that changes the parsed metadata with update(meta)."""
  def edit(_, meta):
    update(meta)
    return json.dumps(meta)
  return edit


DAMAGED = {
    'invalid JSON': (lambda text, _: text[:-20], 'not valid JSON'),
    'empty file': (lambda *_: '', 'not valid JSON'),
    'deep nesting': (lambda *_: '[' * 200000 + ']' * 200000,
                     'nested too deeply'),
    'missing key': (_set(lambda m: m.pop('splits')), 'splits: missing'),
    'number as a string': (
        _set(lambda m: m['splits']['train']['shards'][0].update(
            num_bytes=str(m['splits']['train']['shards'][0]['num_bytes']))),
        "splits.train.shards[0].num_bytes: expected an integer, got '"),
    'digest as a string': (
        _set(lambda m: m['splits']['train']['shards'][1].update(
            records_crc32c='12')),
        "splits.train.shards[1].records_crc32c: expected an integer, got '"),
    'absurd shape': (
        _set(lambda m: m['schema']['signal'].update(shape=[10 ** 12])),
        'a shape is wrong'),
    'shard outside the dataset': (
        _set(lambda m: m['splits']['train']['shards'][0].update(
            file='../../../etc/passwd')),
        "'../../../etc/passwd' is not the shard name"),
    'unknown version': (_set(lambda m: m.update(format_version=99)),
                        'format version 99 is not supported'),
    'classes miscounted': (_set(lambda m: m.update(num_classes=7)),
                           'num_classes: 7, but'),
    'gzip said, none written': (_set(lambda m: m.update(compression='gzip')),
                                'cannot be read with compression gzip'),
}


@pytest.mark.parametrize('case', sorted(DAMAGED))
def test_damaged_metadata_gets_one_clear_error_everywhere(dataset, tmp_path,
                                                          case):
  """verify (exit 1), inspect (exit 1) and replay_dataset (DatasetError)
  refuse damaged metadata.json with one line that says what is wrong, and
  no traceback."""
  edit, message = DAMAGED[case]
  out, _ = _copy(dataset, tmp_path)
  _edit_metadata(out, edit)
  proc = _verify(out)
  assert proc.returncode == 1, (case, proc.stderr[-2000:])
  assert message in proc.stderr and 'Traceback' not in proc.stderr, \
      (case, proc.stderr[-2000:])
  if case == 'gzip said, none written':
    return  # a valid metadata.json: only reading the shards finds it
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.inspect_dataset', str(out)],
      capture_output=True, text=True, cwd=ROOT)
  assert proc.returncode == 1, (case, proc.stderr[-2000:])
  assert message in proc.stderr and 'Traceback' not in proc.stderr, \
      (case, proc.stderr[-2000:])
  from pipeline.readers import tf_dataset as replay
  with pytest.raises(replay.DatasetError, match=re.escape(message)):
    replay.replay_dataset(str(out), 'train')


def _swap_shape(meta):
  spec = meta['schema']['spectrogram']
  spec['shape'] = spec['shape'][::-1]


def _sign(meta):
  meta['schema']['signal']['dtype'] = 'u' + meta['schema']['signal']['dtype']


EDITED = {
    # Every record keeps its size: only the options tell these apart.
    'shape transposed': (_swap_shape, 'schema: spectrogram: dtype '
                         "'float32', shape [129, 7]; the dataset's options "
                         "give dtype 'float32', shape [7, 129]"),
    'signed made unsigned': (_sign, "schema: signal: dtype 'uint32'"),
    'class renamed': (lambda m: m.update(classes=['d']),
                      "record 0: class 'c' with target 0, where "
                      "metadata.json's classes give 'd'"),
}


@pytest.mark.parametrize('case', sorted(EDITED))
def test_an_edit_every_record_still_fits_is_found(dataset, tmp_path, case):
  """A reader decodes by metadata.json: an edited shape, dtype or class
  list would give every example wrong values without an error."""
  update, message = EDITED[case]
  out, _ = _copy(dataset, tmp_path)
  _edit_metadata(out, _set(update))
  proc = _verify(out)
  assert proc.returncode == 1, (case, proc.stdout, proc.stderr[-2000:])
  assert message in proc.stderr, (case, proc.stderr[-2000:])


def test_a_shard_metadata_json_does_not_list_is_named(dataset, tmp_path):
  """A copy named as a shard: readers go by the list, but a glob over the
  shards (TFX's file_pattern) would read its examples twice."""
  out, shards = _copy(dataset, tmp_path)
  extra = out / shards[0]['file'].replace('-of-', '9-of-')
  shutil.copy(out / shards[0]['file'], extra)
  proc = _verify(out)
  assert proc.returncode == 1
  assert f'{extra}: named as a shard of the dataset, and metadata.json ' \
      'does not list it' in proc.stderr, proc.stderr[-2000:]


def test_windows_in_any_order_differ_only_as_a_multiset():
  """The digest of a split's windows written by Beam's sink (in no global
  order): the same for the same windows in any order, different for other
  windows, or for one window more or twice."""
  from pipeline.commands.verify import _Windows

  def digest(keys, ordered=False):
    windows = _Windows(ordered)
    for key in keys:
      windows.update(key)
    return windows.hexdigest()

  keys = [repr((f'in/a/{i}.wav', 1024 * j)).encode() for i in range(3)
          for j in range(2)]
  assert digest(keys) == digest(keys[::-1]) == digest(sorted(keys))
  assert digest(keys) != digest(keys[:-1])
  assert digest(keys) != digest(keys + keys[:1])
  assert digest(keys) != digest(keys[:-1] + [b"('in/a/9.wav', 0)"])
  assert digest(keys[:2] + keys[:2]) != digest(keys[2:4] + keys[2:4])
  # In record order, the order counts.
  assert digest(keys, True) != digest(keys[::-1], True)
  assert digest(keys, True) == digest(list(keys), True)



def test_a_dataset_at_another_rate_verifies(tmp_path):
  """kaldi_fbank's frames are in milliseconds: its shape follows the
  rate, which the options check takes from the data, as the run did."""
  for i in range(2):
    H.write_wav(str(tmp_path / 'in' / 'a' / f'{i}.wav'),
                H.noise(16000, seed=i), rate=8000)
  H.run_pipeline(H.make_config(tmp_path / 'in', tmp_path / 'out',
                               win_len=8000,
                               features=('kaldi_fbank', 'log_mel')))
  proc = _verify(tmp_path / 'out')
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert 'kaldi_fbank, log_mel: the dtypes and shapes' in proc.stdout
