"""No name in a dataset folder leads a reader outside it: the dataset's
name, its split names, its part names and its file names are checked when
metadata.json is read, and every file is opened only where it resolves
inside the folder (symbolic links followed)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.readers import tf_dataset as replay
from pipeline.readers.array_record import ArrayRecordSource
from pipeline.contract.errors import DatasetError
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def written(tmp_path_factory):
  d = tmp_path_factory.mktemp('names')
  for i in range(6):
    H.write_wav(str(d / 'in' / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(2048 * (2 + i % 2), seed=i))
  meta = H.run_pipeline(H.make_config(
      d / 'in', d / 'good', win_len=1024, splits='train=0.5,test=0.5',
      features=('signal',), array_record=True))
  return d / 'good', meta


def _victim_and_attacker(written, tmp_path):
  """A copy of the dataset (the folder a hostile metadata points at) and a
  folder beside it whose metadata.json names the copy's files."""
  good, _ = written
  other = tmp_path / 'other'
  shutil.copytree(good, other)
  attacker = tmp_path / 'attacker'
  attacker.mkdir()
  meta = json.loads((good / 'metadata.json').read_text())
  return other, attacker, meta


def _write(folder, meta):
  (folder / 'metadata.json').write_text(json.dumps(meta))


def _refused_everywhere(folder, what):
  """Every reader and command refuses the folder, naming `what`."""
  for read in (lambda: list(numpy_reader.numpy_dataset(str(folder), 'train')),
               lambda: list(replay.replay_dataset(str(folder), 'train',
                                                  batch_size=2)),
               lambda: ArrayRecordSource(str(folder), 'train')[0]):
    with pytest.raises(DatasetError) as e:
      read()
    assert what in str(e.value)
  for command in ('pipeline.verify', 'pipeline.inspect_dataset'):
    proc = subprocess.run([sys.executable, '-m', command, str(folder)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode != 0, (command, proc.stdout)
    assert what in proc.stderr, (command, proc.stderr[-2000:])
    assert 'Traceback' not in proc.stderr


def test_a_dataset_name_with_a_path_is_refused(written, tmp_path):
  _, attacker, meta = _victim_and_attacker(written, tmp_path)
  name = '../other/wavbeam'
  meta['name'] = name
  for entry in meta['splits'].values():
    for key in ('shards', 'array_record'):
      for f in entry[key]:
        f['file'] = f['file'].replace('wavbeam', name, 1)
  _write(attacker, meta)
  # The names do lead to the other folder's files:
  first = meta['splits']['train']['shards'][0]['file']
  assert (attacker / first).resolve().is_file()
  _refused_everywhere(attacker, "name: '../other/wavbeam' is not a dataset")


def test_a_split_name_with_a_path_is_refused(written, tmp_path):
  _, attacker, meta = _victim_and_attacker(written, tmp_path)
  entry = meta['splits'].pop('test')
  split = '../other/wavbeam-test'
  for key in ('shards', 'array_record'):
    for f in entry[key]:
      f['file'] = f['file'].replace('-test.', '-' + split + '.', 1)
  meta['splits'][split] = entry
  _write(attacker, meta)
  _refused_everywhere(attacker, "'../other/wavbeam-test' is not a split")


def test_a_shard_linked_outside_the_folder_is_refused(written, tmp_path):
  other, attacker, meta = _victim_and_attacker(written, tmp_path)
  _write(attacker, meta)
  for entry in meta['splits'].values():
    for key in ('shards', 'array_record'):
      for f in entry[key]:
        os.symlink(other / f['file'], attacker / f['file'])
  _refused_everywhere(attacker, 'leads outside the dataset folder')


def test_a_part_folder_linked_outside_the_folder_is_refused(written,
                                                            tmp_path):
  other, attacker, meta = _victim_and_attacker(written, tmp_path)
  shutil.copytree(written[0], attacker, dirs_exist_ok=True)
  os.symlink(other, attacker / 'part-00001')
  (attacker / 'parts.json').write_text(json.dumps(
      {'format': 'wavbeam-parts', 'parts': ['.', 'part-00001']}))
  _refused_everywhere(attacker, 'leads outside the dataset folder')


def test_links_inside_the_folder_are_read(written, tmp_path):
  """A dataset reached through a link, or holding links to its own files,
  reads as usual."""
  good, meta = written
  link = tmp_path / 'link'
  os.symlink(good, link)
  n = meta['splits']['train']['num_examples']
  assert sum(1 for _ in numpy_reader.numpy_dataset(str(link), 'train')) == n
  proc = subprocess.run([sys.executable, '-m', 'pipeline.verify', str(link)],
                        capture_output=True, text=True, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize('name', ['..', '.hidden', 'a/b', ''])
def test_the_dataset_name_option_takes_no_path(tmp_path, name):
  from pipeline.config import ConfigError
  with pytest.raises(ConfigError, match='dataset_name'):
    H.make_config(tmp_path, tmp_path / 'out', dataset_name=name)
