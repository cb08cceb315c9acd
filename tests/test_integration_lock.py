"""The output folder's lock, and the names a run writes in the folder: a
symbolic link (or a FIFO, or a folder) planted at any of them is refused
before anything is written, so no write and no --overwrite can be aimed
outside the dataset by it; the folder itself may be a link the user made.
"""

import hashlib
import os
import shutil

import pytest

from pipeline.commands import run as run_lib
from pipeline.contract import naming
from tests import helpers as H

FLAGS = ['--win_len', '1000', '--hop_len', '1000', '--features', 'signal',
         '--splits', 'train=0.5,test=0.5', '--quiet']

# Names a run opens to write, or writes into as folders, in its output
# folder; each planted as a link to a victim file or folder outside it.
FILE_NAMES = ['.wavbeam-lock', 'metadata.json.tmp', 'rejects.jsonl.tmp',
              'sources.jsonl.tmp', 'schema.pbtxt.tmp', 'features.json.tmp',
              'dataset_info.json.tmp', 'class.labels.txt.tmp', 'parts.json',
              'parts.json.tmp', 'variants.json', 'variants.json.tmp']
FOLDER_NAMES = ['.wavbeam-incomplete', 'part-00001']


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
  root = tmp_path_factory.mktemp('corpus')
  for i in range(6):
    H.write_wav(str(root / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(3000, seed=i))
  return root


def _run(corpus, out, *more):
  return run_lib.main(['--input_dir', str(corpus), '--output_dir', str(out),
                       *FLAGS, *more])


def _digest(folder):
  """Every file under `folder` (links as their target names), hashed."""
  found = {}
  for root, dirs, files in os.walk(folder):
    for name in dirs + files:
      path = os.path.join(root, name)
      rel = os.path.relpath(path, folder)
      if os.path.islink(path):
        found[rel] = 'link ' + os.readlink(path)
      elif os.path.isfile(path):
        with open(path, 'rb') as f:
          found[rel] = hashlib.sha256(f.read()).hexdigest()
  return found


def _victims(tmp_path):
  victim_file = tmp_path / 'victim.txt'
  victim_file.write_text('not wavbeam\'s\n')
  victim_dir = tmp_path / 'victim_dir'
  victim_dir.mkdir()
  (victim_dir / 'keep.txt').write_text('keep me\n')
  return victim_file, victim_dir


@pytest.mark.parametrize('overwrite', [False, True])
@pytest.mark.parametrize('name', FILE_NAMES + FOLDER_NAMES)
def test_a_link_planted_at_a_written_name_is_refused(corpus, tmp_path, capsys,
                                                     name, overwrite):
  victim_file, victim_dir = _victims(tmp_path)
  out = tmp_path / 'out'
  out.mkdir()
  target = victim_dir if name in FOLDER_NAMES else victim_file
  os.symlink(target, out / name)
  before = _digest(tmp_path)
  code = _run(corpus, out, *(['--overwrite'] if overwrite else []))
  err = capsys.readouterr().err
  assert code == 2, err
  assert f'{out / name} is a symbolic link to {target}' in err
  # Nothing written anywhere: the victims, the link and the folder as
  # they were.
  assert _digest(tmp_path) == before


@pytest.mark.parametrize('kind', ['fifo', 'folder'])
def test_a_lock_that_is_no_regular_file_is_refused(corpus, tmp_path, capsys,
                                                   kind):
  out = tmp_path / 'out'
  out.mkdir()
  lock = out / '.wavbeam-lock'
  if kind == 'fifo':
    os.mkfifo(lock)
  else:
    lock.mkdir()
  code = _run(corpus, out)
  err = capsys.readouterr().err
  assert code == 2, err
  assert f'{lock} is a {"FIFO" if kind == "fifo" else "folder"}' in err
  assert sorted(os.listdir(out)) == ['.wavbeam-lock']


def test_a_link_planted_at_the_next_part_is_refused_by_append(
    corpus, tmp_path, capsys):
  out = tmp_path / 'out'
  assert _run(corpus, out) == 0
  other = tmp_path / 'other'  # another dataset, which must survive
  assert _run(corpus, other) == 0
  H.write_wav(str(corpus / 'a' / 'new.wav'), H.noise(3000, seed=9))
  try:
    os.symlink(other, out / 'part-00001')
    before = _digest(tmp_path)
    code = _run(corpus, out, '--append')
    err = capsys.readouterr().err
    assert code == 2, err
    assert f'{out / "part-00001"} is a symbolic link to {other}' in err
    assert _digest(tmp_path) == before
  finally:
    os.remove(corpus / 'a' / 'new.wav')


@pytest.mark.parametrize('overwrite', [False, True])
def test_a_link_planted_at_a_variant_folder_is_refused(corpus, tmp_path,
                                                       capsys, overwrite):
  variants = tmp_path / 'sweep.toml'
  variants.write_text('[v1]\nsignal_dtype = "int16"\n'
                      '[v2]\nsignal_dtype = "float32"\n')
  other = tmp_path / 'other'
  assert _run(corpus, other) == 0
  out = tmp_path / 'out'
  out.mkdir()
  os.symlink(other, out / 'v2')
  before = _digest(tmp_path)
  code = _run(corpus, out, '--variants', str(variants),
              *(['--overwrite'] if overwrite else []))
  err = capsys.readouterr().err
  assert code == 2, err
  assert f'{out / "v2"} is a symbolic link to {other}' in err
  assert _digest(tmp_path) == before


def test_an_output_folder_that_is_a_link_is_written_and_locked(
    corpus, tmp_path, capsys):
  """A link the user made to the output folder is the folder: the run
  writes through it, and a run given the other spelling (the real folder,
  `OUT/.`) meets the same lock."""
  real = tmp_path / 'real'
  real.mkdir()
  link = tmp_path / 'link'
  os.symlink(real, link)
  held = H.DrivenRun('prepared', 'hold', '--input_dir', str(corpus),
                     '--output_dir', str(link), *FLAGS, cwd=tmp_path)
  held.wait_until_there()
  for spelling in (real, f'{real}/.', f'{link}/.'):
    assert _run(corpus, spelling, '--overwrite') == 2
    err = capsys.readouterr().err
    assert f'process {held.pid} on ' in err, err
  held.release()
  code, printed = held.wait()
  assert code == 0, printed[-2000:]
  assert os.path.isfile(real / naming.METADATA_FILE)
  assert not os.path.exists(real / '.wavbeam-lock')
  dot = tmp_path / 'dot'
  assert _run(corpus, f'{dot}/.') == 0
  assert _digest(dot).keys() == _digest(real).keys()
  shutil.rmtree(dot)
