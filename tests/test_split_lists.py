"""--split_lists, on a miniature Speech Commands layout: the same folder
and list-file names, generated audio."""

import json
import os
import subprocess
import sys

import pytest

from pipeline import config as config_lib
from pipeline.readers import numpy_dataset as numpy_reader
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def speech_commands(tmp_path_factory):
  """speech_commands_v0.02/{word}/{speaker}_nohash_{n}.wav plus its
  validation_list.txt and testing_list.txt."""
  root = tmp_path_factory.mktemp('sc') / 'speech_commands_v0.02'
  names = []
  for w, word in enumerate(('yes', 'no', 'up')):
    for s in range(4):
      name = f'{word}/{s:08x}_nohash_{w}.wav'
      H.write_wav(str(root / name), H.noise(16000, seed=10 * w + s))
      names.append(name)
  validation = [n for n in names if n.startswith('0000000' + '1')]
  testing = [n for n in names if n.startswith(('yes/00000002',
                                               'no/00000003'))]
  (root / 'validation_list.txt').write_text('\n'.join(validation) + '\n')
  (root / 'testing_list.txt').write_text('\n'.join(testing) + '\n')
  return root, names, validation, testing


def test_listed_files_go_to_their_split_the_rest_to_train(speech_commands):
  """The lists found relative to input_dir, the run started elsewhere (the
  whole Speech Commands recipe: tests/test_speech_commands.py)."""
  root, names, validation, testing = speech_commands
  validation = [n for n in names if '/00000001_' in n]
  (root / 'validation_list.txt').write_text('\n'.join(validation) + '\n')
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir', root.name,
       '--output_dir', 'sc', '--win_len', '16000', '--pad', '--split_lists',
       'validation=validation_list.txt,test=testing_list.txt'],
      cwd=root.parent, env=dict(os.environ, PYTHONPATH=ROOT),
      capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = str(root.parent / 'sc')
  meta = json.load(open(os.path.join(out, 'metadata.json')))
  assert sorted(meta['splits']) == ['test', 'train', 'validation']
  expected = {'validation': set(validation), 'test': set(testing)}
  expected['train'] = set(names) - expected['validation'] - expected['test']
  for split, wanted in expected.items():
    # filepath as the command names it: relative to where it ran
    got = {os.path.relpath(root.parent / e['filepath'], root): e['class']
           for e in numpy_reader.numpy_dataset(
               str(out), split, features=['filepath', 'class'])}
    assert set(got) == wanted, split
    assert all(cls == name.split('/')[0] for name, cls in got.items())
  assert meta['counts']['files_ok'] == len(names)


def test_bad_lists_fail_before_anything_runs(speech_commands, tmp_path):
  root, names, _, _ = speech_commands
  twice = tmp_path / 'twice.txt'
  twice.write_text(f'{names[0]}\n\n{names[1]}\n')
  other = tmp_path / 'other.txt'
  other.write_text(f'{names[1]}\n')
  outside = tmp_path / 'outside.txt'
  outside.write_text(f'{names[2]}\n{root / names[3]}\n')
  above = tmp_path / 'above.txt'
  above.write_text(f'./{names[2]}\nyes/../../x/{names[4]}\n')
  for lists, message in (
      (f'validation={twice},test={other}',
       f'{names[1]} is listed twice: {twice} line 3 (validation) and '
       f'{other} line 1 (test)'),
      (f'validation={outside}', f"{outside} line 2: '{root / names[3]}' is "
       'not a path below --input_dir: a list names files relative to it'),
      (f'validation={above}', f"{above} line 2: 'yes/../../x/{names[4]}' "
       'is not a path below --input_dir'),
      ('validation=no_such_list.txt', 'cannot read'),
      ('train=validation_list.txt', 'names a split twice'),
      ('validation', 'is not SPLIT=FILE')):
    out = tmp_path / 'out'
    proc = subprocess.run(
        [sys.executable, '-m', 'pipeline.run', '--input_dir', str(root),
         '--output_dir', str(out), '--split_lists', lists],
        capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 2, (lists, proc.stderr[-2000:])
    assert message in proc.stderr and '--split_lists' in proc.stderr, (
        lists, proc.stderr)
    assert not out.exists()
  with pytest.raises(config_lib.ConfigError, match='not both'):
    H.make_config(str(root), str(tmp_path / 'o'),
                  split_lists='validation=validation_list.txt',
                  splits='train=0.5,test=0.5')


def test_listed_files_missing_from_the_corpus_are_counted_and_reported(
    speech_commands, tmp_path):
  root, names, _, _ = speech_commands
  lists = tmp_path / 'test.txt'
  lists.write_text(f'{names[0]}\nyes//gone.wav\n./no/also_gone.wav\n')
  out = tmp_path / 'out'
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir', str(root),
       '--output_dir', str(out), '--split_lists', f'test={lists}',
       '--win_len', '16000'],
      capture_output=True, text=True, cwd=ROOT, timeout=600)
  assert proc.returncode == 0, proc.stderr[-2000:]
  meta = json.load(open(out / 'metadata.json'))
  counts = meta['counts']
  assert counts['files_seen'] == len(names) + 2
  assert counts['files_rejected'] == 2 and counts['files_ok'] == len(names)
  rejects = [json.loads(line) for line in open(out / 'rejects.jsonl')]
  assert sorted(r['path'] for r in rejects) == [
      str(root / 'no/also_gone.wav'), str(root / 'yes/gone.wav')]
  assert all(f'listed in {lists} line' in r['reason'] and
             'no such file under input_dir' in r['reason'] for r in rejects)
  assert '2 files rejected' in proc.stderr, proc.stderr[-2000:]


def test_a_byte_order_mark_is_not_part_of_the_first_name(speech_commands,
                                                         tmp_path):
  """Windows editors start a UTF-8 file with one: read as text, the first
  listed file would be a name no file has, and go to train."""
  from transforms.inputs import split_lists
  root, names, _, _ = speech_commands
  listed = tmp_path / 'bom.txt'
  listed.write_bytes(b'\xef\xbb\xbf' + f'{names[0]}\n{names[1]}\n'.encode())
  found = split_lists._read(str(root), (('test', str(listed)),))
  assert sorted(found) == sorted(names[:2])
  assert {split for split, _, _ in found.values()} == {'test'}
