"""--append: a day of new recordings added as a part, against a full
rebuild of the union; nothing new; a changed recording; an interrupted
append; the options it refuses."""

import collections
import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.readers.array_record import ArrayRecordSource
from pipeline.readers.torch_dataset import WavbeamIterableDataset
from pipeline.readers.torch_dataset import WavbeamMapDataset
from pipeline.contract import parts as parts_lib
from pipeline.commands import verify
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = ['--win_len', '1024', '--hop_len', '768', '--splits',
         'train=0.6,test=0.4', '--max_examples_per_shard', '7',
         '--n_fft', '256', '--fft_hop', '128', '--array_record']


def _day(folder, first, count, classes):
  for i in range(first, first + count):
    H.write_wav(str(folder / classes[i % len(classes)] / f'{i}.wav'),
                H.noise(3000 + 611 * i, 1 + i % 2, seed=i))


def _cli(*args, check=True):
  proc = subprocess.run([sys.executable, '-m', 'pipeline.run', *args],
                        capture_output=True, text=True, cwd=ROOT,
                        timeout=600)
  if check:
    assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def _examples(out, **kw):
  """Every example of every split, as comparable tuples (the target apart:
  a rebuild numbers classes afresh)."""
  meta = numpy_reader.load_metadata(str(out), kw.get('parts'))
  found = collections.Counter()
  for split in meta['splits']:
    for e in numpy_reader.numpy_dataset(str(out), split, **kw):
      assert meta['classes'][int(e['target'])] == e['class']
      found[(split, e['filepath'], int(e['win_start_idx']), e['class'],
             e['signal'].tobytes(), e['spectrogram'].tobytes())] += 1
  return found


@pytest.fixture()
def corpus(tmp_path):
  _day(tmp_path / 'in', 0, 10, ['owl', 'wren'])
  _cli('--input_dir', str(tmp_path / 'in'), '--output_dir',
       str(tmp_path / 'out'), '--quiet', *FLAGS)
  return tmp_path


def test_a_day_appended_equals_a_rebuild_of_the_union(corpus):
  before = _examples(corpus / 'out')
  _day(corpus / 'in', 10, 5, ['kite', 'owl'])  # kite: a new class
  proc = _cli('--input_dir', str(corpus / 'in'), '--output_dir',
              str(corpus / 'out'), *FLAGS, '--append')
  assert 'appended 5 new recordings' in proc.stderr
  assert '10 already in the dataset were skipped' in proc.stderr
  _cli('--input_dir', str(corpus / 'in'), '--output_dir',
       str(corpus / 'rebuild'), '--quiet', *FLAGS)
  assert _examples(corpus / 'out') == _examples(corpus / 'rebuild')
  # The first part is untouched and still readable on its own.
  assert _examples(corpus / 'out', parts=[0]) == before
  meta = numpy_reader.load_metadata(str(corpus / 'out'))
  assert meta['classes'] == ['owl', 'wren', 'kite']  # none renumbered
  assert meta['parts'] == ['.', 'part-00001']
  rebuilt = numpy_reader.load_metadata(str(corpus / 'rebuild'))
  assert meta['counts'] == rebuilt['counts']
  for split, entry in meta['splits'].items():
    assert entry['num_examples'] == rebuilt['splits'][split]['num_examples']
    for key, stats in entry['statistics'].items():
      want = rebuilt['splits'][split]['statistics'][key]
      assert stats['count'] == want['count']
      np.testing.assert_allclose([stats['mean'], stats['std']],
                                 [want['mean'], want['std']], rtol=1e-9)
  assert 'of 2 parts' in verify.verify(str(corpus / 'out'))
  # Random access and PyTorch see the same examples.
  source = ArrayRecordSource(str(corpus / 'out'), 'train',
                             features=['filepath', 'win_start_idx'])
  by_key = collections.Counter(
      (e['filepath'], int(e['win_start_idx']))
      for e in numpy_reader.numpy_dataset(
          str(corpus / 'out'), 'train',
          features=['filepath', 'win_start_idx']))
  assert collections.Counter(
      (source[i]['filepath'], int(source[i]['win_start_idx']))
      for i in range(len(source))) == by_key
  assert len(WavbeamIterableDataset(str(corpus / 'out'), 'train')) == sum(
      by_key.values())
  # Each reader reads the parts it is given, the same examples.
  for parts in ([0], ['part-00001'], ['.', 1]):
    keys = ['filepath', 'win_start_idx']
    want = sorted((e['filepath'], int(e['win_start_idx']))
                  for e in numpy_reader.numpy_dataset(
                      str(corpus / 'out'), 'train', features=keys,
                      parts=parts))
    source = ArrayRecordSource(str(corpus / 'out'), 'train', features=keys,
                               parts=parts)
    assert sorted((e['filepath'], int(e['win_start_idx']))
                  for e in source.__getitems__(range(len(source)))) == want
    mapped = WavbeamMapDataset(str(corpus / 'out'), 'train', features=keys,
                               parts=parts)
    assert sorted((mapped[i]['filepath'], int(mapped[i]['win_start_idx']))
                  for i in range(len(mapped))) == want
    assert sorted((e['filepath'], int(e['win_start_idx']))
                  for e in WavbeamIterableDataset(
                      str(corpus / 'out'), 'train', features=keys,
                      parts=parts)) == want


def test_tensorflow_readers_read_every_part(corpus):
  from pipeline.readers import tf_dataset as replay  # pylint: disable=import-outside-toplevel
  import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
  _day(corpus / 'in', 10, 4, ['kite'])
  _cli('--input_dir', str(corpus / 'in'), '--output_dir',
       str(corpus / 'out'), '--quiet', *FLAGS, '--append')
  out = str(corpus / 'out')
  meta = replay.load_metadata(out)
  for split, entry in meta['splits'].items():
    found = [e['filepath'].numpy() for e in replay.replay_dataset(
        out, split, features=['filepath'])]
    assert len(found) == entry['num_examples']
    mine = numpy_reader.numpy_dataset(out, split, features=['filepath'])
    assert sorted(found) == sorted(e['filepath'].encode() for e in mine)
  first = replay.replay_dataset(out, 'train', parts=['.'])
  assert len(list(first)) == numpy_reader.load_metadata(
      out, [0])['splits']['train']['num_examples']
  # TFDS: the parts' folders, the last first (its features know every
  # class), as docs/corpora.md says.
  builder = tfds.builder_from_directories(
      [os.path.join(out, 'part-00001'), out])
  assert builder.info.features['target'].num_classes == 3
  assert sum(1 for _ in builder.as_dataset(split='train')) == (
      meta['splits']['train']['num_examples'])


def test_nothing_new_is_a_no_op_that_says_so(corpus):
  listing = sorted(os.listdir(corpus / 'out'))
  proc = _cli('--input_dir', str(corpus / 'in'), '--output_dir',
              str(corpus / 'out'), *FLAGS, '--append')
  assert 'nothing to append' in proc.stderr
  assert 'unchanged (10 recordings already in it)' in proc.stderr
  assert sorted(os.listdir(corpus / 'out')) == listing


def test_a_part_of_rejected_recordings_only_exits_1(corpus):
  """New recordings all rejected: the part is written with its rejects
  and listed, and the command exits 1, as a run that wrote no example
  does; the next append finds nothing new."""
  for i in range(2):
    H.write_wav(str(corpus / 'in' / 'owl' / f'short{i}.wav'), H.noise(100))
  args = ['--input_dir', str(corpus / 'in'), '--output_dir',
          str(corpus / 'out'), *FLAGS, '--append', '--quiet']
  proc = _cli(*args, check=False)
  part = corpus / 'out' / 'part-00001'
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert (f'error: the dataset is EMPTY: no example was written to {part} '
          '(2 of 2 files rejected') in proc.stderr
  assert len((part / 'rejects.jsonl').read_text().splitlines()) == 2
  assert numpy_reader.load_metadata(str(corpus / 'out'))['parts'] == [
      '.', 'part-00001']
  proc = _cli(*args)
  assert 'nothing to append' in proc.stderr


def test_files_rejected_at_listing_or_probing_are_seen_once(tmp_path):
  """A name that is not UTF-8 and a FIFO: rejected by the first run, and
  known to every --append after it (nothing new to append)."""
  _day(tmp_path / 'in', 0, 4, ['owl', 'wren'])
  H.write_wav(str(tmp_path / 'in' / 'owl' / 'x.wav'), H.noise(3000))
  os.rename(tmp_path / 'in' / 'owl' / 'x.wav',
            os.fsencode(str(tmp_path / 'in' / 'owl')) + b'/caf\xe9.wav')
  os.mkfifo(tmp_path / 'in' / 'wren' / 'pipe.wav')
  args = ['--input_dir', str(tmp_path / 'in'), '--output_dir',
          str(tmp_path / 'out'), *FLAGS]
  _cli(*args)
  rejects = [json.loads(line) for line in open(
      tmp_path / 'out' / 'rejects.jsonl')]
  assert sorted(r['reason'].split(' (')[0].split(';')[0]
                for r in rejects) == ['file name is not valid UTF-8',
                                      'not a regular file: a FIFO']
  for _ in range(2):
    proc = _cli(*args, '--append')
    assert 'nothing to append' in proc.stderr, proc.stderr[-2000:]
    assert 'unchanged (6 recordings already in it)' in proc.stderr
  assert not (tmp_path / 'out' / 'part-00001').exists()


def test_a_changed_recording_is_reported_not_read_again(corpus):
  before = _examples(corpus / 'out')
  H.write_wav(str(corpus / 'in' / 'owl' / '0.wav'), H.noise(5000, seed=99))
  proc = _cli('--input_dir', str(corpus / 'in'), '--output_dir',
              str(corpus / 'out'), *FLAGS, '--append')
  assert 'nothing to append' in proc.stderr
  assert '1 recordings changed' in proc.stderr and '0.wav' in proc.stderr
  _day(corpus / 'in', 10, 2, ['owl'])
  proc = _cli('--input_dir', str(corpus / 'in'), '--output_dir',
              str(corpus / 'out'), *FLAGS, '--append')
  assert 'appended 2 new recordings' in proc.stderr
  rejects = [json.loads(line) for line in open(
      corpus / 'out' / 'part-00001' / 'rejects.jsonl')]
  assert [r['path'].endswith('owl/0.wav') for r in rejects] == [True]
  assert 'changed since it was added' in rejects[0]['reason']
  after = _examples(corpus / 'out')
  assert sum(after.values()) > sum(before.values())
  assert not before - after  # the old examples stay as they were


def test_an_interrupted_append_leaves_the_dataset_complete(corpus):
  before = _examples(corpus / 'out')
  _day(corpus / 'in', 10, 6, ['owl', 'wren'])
  part = corpus / 'out' / 'part-00001'
  # Killed (with its forked workers) as its part's last step begins.
  code, _ = H.DrivenRun('finalizing', 'kill', '--input_dir',
                        str(corpus / 'in'), '--output_dir',
                        str(corpus / 'out'), *FLAGS, '--append', '--quiet',
                        cwd=corpus).wait()
  assert code == -signal.SIGKILL
  assert (part / '.wavbeam-incomplete').exists()
  assert not (corpus / 'out' / parts_lib.INDEX_FILE).exists()
  assert not (part / 'metadata.json').exists()
  assert _examples(corpus / 'out') == before
  assert 'OK' in verify.verify(str(corpus / 'out'))
  # The next append replaces the interrupted part.
  _cli('--input_dir', str(corpus / 'in'), '--output_dir',
       str(corpus / 'out'), '--quiet', *FLAGS, '--append')
  assert numpy_reader.load_metadata(str(corpus / 'out'))['parts'] == [
      '.', 'part-00001']
  assert len(_examples(corpus / 'out')) > len(before)


def test_refusals(corpus, tmp_path):
  before = sorted(os.listdir(corpus / 'out'))
  proc = _cli('--input_dir', str(corpus / 'in'), '--output_dir',
              str(corpus / 'out'), *FLAGS[:-3], '--fft_hop', '64',
              '--append', check=False)
  assert proc.returncode == 2
  assert '--fft_hop=64' in proc.stderr and 'written with 128' in proc.stderr
  proc = _cli('--input_dir', str(corpus / 'in'), '--output_dir',
              str(tmp_path / 'none'), *FLAGS, '--append', check=False)
  assert proc.returncode == 2 and 'no complete dataset' in proc.stderr
  proc = _cli('--input_dir', str(corpus / 'in'), '--output_dir',
              str(corpus / 'out'), *FLAGS, '--append', '--overwrite',
              check=False)
  assert proc.returncode == 2 and 'not both' in proc.stderr
  # The same fractions in another order would send files to other splits.
  reordered = [f if f != 'train=0.6,test=0.4' else 'test=0.4,train=0.6'
               for f in FLAGS]
  proc = _cli('--input_dir', str(corpus / 'in'), '--output_dir',
              str(corpus / 'out'), *reordered, '--append', check=False)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert ("--splits='test=0.4,train=0.6': the dataset at "
          f"{corpus / 'out'} was written with train=0.6,test=0.4: the order "
          'of the splits decides which files each gets') in proc.stderr
  proc = _cli('--input_dir', str(corpus / 'in'), '--output_dir',
              str(corpus / 'out'), *FLAGS, '--append', '--num_elems', '5',
              check=False)
  assert proc.returncode == 2 and '--num_elems=5: stops a run partway' in \
      proc.stderr, proc.stderr[-2000:]
  assert sorted(os.listdir(corpus / 'out')) == before
  shutil.rmtree(corpus / 'out')


def test_a_part_folder_is_not_written_on_its_own(corpus):
  """A run whose --output_dir is a part --append added (listed in
  parts.json or not) is refused: it would leave the dataset above
  inconsistent."""
  _day(corpus / 'in', 10, 3, ['owl', 'wren'])
  _cli('--input_dir', str(corpus / 'in'), '--output_dir', str(corpus / 'out'),
       *FLAGS, '--append', '--quiet')
  part = corpus / 'out' / 'part-00001'
  before = sorted(os.listdir(part))
  for folder in (part, corpus / 'out' / 'part-00002'):
    for extra in ([], ['--overwrite'], ['--append']):
      proc = _cli('--input_dir', str(corpus / 'in'), '--output_dir',
                  str(folder), *FLAGS, *extra, check=False)
      assert proc.returncode == 2, proc.stderr[-2000:]
      assert (f"--output_dir='{folder}': is a part of the dataset in "
              f"{corpus / 'out'}") in proc.stderr, proc.stderr[-2000:]
  assert sorted(os.listdir(part)) == before
  assert not (corpus / 'out' / 'part-00002').exists()
  assert 'OK' in verify.verify(str(corpus / 'out'))


def test_a_part_whose_features_would_differ_is_refused(tmp_path):
  """A manifest's extra column is typed by its values: a new row whose
  value is no longer a whole number would store it as a string in the
  new part, which no reader could merge with the dataset's int64 one.
  The append is refused before anything is written; the other way round
  (string stays string) appends."""
  _day(tmp_path / 'in', 0, 3, ['a'])
  rows = ''.join(f'a/{i}.wav,x,{i + 1}\n' for i in range(3))
  (tmp_path / 'm.csv').write_text('path,label,fold\n' + rows)
  args = ['--input_dir', str(tmp_path / 'in'), '--output_dir',
          str(tmp_path / 'out'), '--win_len', '1024', '--quiet',
          '--manifest', str(tmp_path / 'm.csv'),
          '--manifest_label_column', 'label',
          '--manifest_extra_columns', 'fold']
  _cli(*args)
  before = sorted(os.listdir(tmp_path / 'out'))
  _day(tmp_path / 'in', 3, 1, ['a'])
  with open(tmp_path / 'm.csv', 'a', encoding='utf-8') as f:
    f.write('a/3.wav,x,extra\n')
  proc = _cli(*args, '--append', check=False)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert ("feature 'fold' disagrees between the dataset and this part: "
          'int64[] vs string' in proc.stderr), proc.stderr[-2000:]
  assert sorted(os.listdir(tmp_path / 'out')) == before
  verify.verify(str(tmp_path / 'out'))  # the dataset is as it was
  (tmp_path / 'm.csv').write_text('path,label,fold\n' + rows +
                                  'a/3.wav,x,4\n')
  _cli(*args, '--append')
  assert len(list(numpy_reader.numpy_dataset(str(tmp_path / 'out')))) > len(
      list(numpy_reader.numpy_dataset(str(tmp_path / 'out'), parts=[0])))
