"""pipeline/contract/dataset: a split, and the files metadata.json lists,
checked before anything opens them, in the readers' and the commands'
words."""

import os

import pytest

from pipeline.contract import dataset
from pipeline.contract.errors import DatasetError

READER, COMMAND = dataset.READER_WORDS, dataset.COMMAND_WORDS


def _folder(tmp_path, data=b'x' * 10):
  folder = tmp_path / 'out'
  folder.mkdir()
  (folder / 's-00000').write_bytes(data)
  meta = {'splits': {'train': {'shards': [
      {'file': 's-00000', 'num_bytes': len(data)}]}}}
  return str(folder), meta


def _refusal(fs, folder, path, num_bytes, words, kind='shard'):
  with pytest.raises(DatasetError) as e:
    dataset.check_file(fs, folder, path, num_bytes, kind, words)
  return str(e.value)


def test_a_split_s_shards_are_found_and_checked(tmp_path):
  folder, meta = _folder(tmp_path)
  assert dataset.shard_files(dataset.LOCAL, folder, meta, 'train') == [
      folder + '/s-00000']
  for words, text in ((READER, f"unknown split 'dev' in {folder}; it has "
                       "['train']"),
                      (COMMAND, "unknown split 'dev'; the dataset has "
                       "['train']")):
    with pytest.raises(DatasetError) as e:
      dataset.shard_files(dataset.LOCAL, folder, meta, 'dev', words)
    assert str(e.value) == text


def test_each_problem_in_both_wordings(tmp_path):
  folder, _ = _folder(tmp_path)
  path = folder + '/s-00000'
  assert _refusal(dataset.LOCAL, folder, path, 11, READER) == (
      f'shard {path} is 10 bytes but metadata.json says 11: it was changed '
      'or cut after writing')
  assert _refusal(dataset.LOCAL, folder, path, 11, COMMAND) == (
      f'{path}: 10 bytes, metadata.json says 11')
  gone = folder + '/gone'
  assert _refusal(dataset.LOCAL, folder, gone, 1, READER).startswith(
      f'shard {gone} listed in metadata.json cannot be read ([Errno 2]')
  reports_missing = dataset.FileSystem(os.path.exists, None, None,
                                       lambda p: None)
  assert _refusal(reports_missing, folder, gone, 1, READER,
                  'ArrayRecord file') == (
      f'ArrayRecord file {gone} listed in metadata.json is missing')
  assert _refusal(reports_missing, folder, gone, 1, COMMAND) == (
      f'{gone}: listed in metadata.json but missing')
  fifo = folder + '/fifo'
  os.mkfifo(fifo)
  assert _refusal(dataset.LOCAL, folder, fifo, 0, READER) == (
      f'shard {fifo} is not a plain file')
  assert _refusal(dataset.LOCAL, folder, fifo, 0, COMMAND) == (
      f'{fifo}: not a plain file')
  (tmp_path / 'secret').write_bytes(b'x' * 10)
  os.symlink(tmp_path / 'secret', folder + '/link')
  for words, start in ((READER, 'shard '), (COMMAND, '')):
    text = _refusal(dataset.LOCAL, folder, folder + '/link', 10, words)
    assert text.startswith(start + folder + '/link: listed in the dataset')
    assert 'leads outside the dataset folder' in text


def test_a_shard_s_index_is_found_and_checked_without_its_size(tmp_path):
  folder, _ = _folder(tmp_path)
  shard = folder + '/s.tfrecord-00000-of-00001'
  assert dataset.index_file(dataset.LOCAL, folder, shard) is None
  index = folder + '/s.tfindex-00000-of-00001'
  with open(index, 'w') as f:
    f.write('0 26\n')
  assert dataset.index_file(dataset.LOCAL, folder, shard) == index
  os.remove(index)
  os.mkfifo(index)
  with pytest.raises(DatasetError, match='index file .* is not a plain file'):
    dataset.index_file(dataset.LOCAL, folder, shard)


def test_the_features_to_read(tmp_path):
  specs = {'b': None, 'a': None}
  assert dataset.feature_keys('out', specs, None) == ['a', 'b']
  assert dataset.feature_keys('out', specs, ['b']) == ['b']
  with pytest.raises(DatasetError) as e:
    dataset.feature_keys('out', specs, ['b', 'mfcc'])
  assert str(e.value) == "unknown feature ['mfcc'] in out; it has ['a', 'b']"
