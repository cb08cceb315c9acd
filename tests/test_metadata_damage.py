"""What the metadata validator accepts, every reader and inspect handle:
each damage of a real metadata.json (a key removed, a value of another
type or sign) is either refused by metadata.parse, naming the entry, or
read by inspect, numpy_reader and replay_dataset (normalized) without an
error; where the data contradicts it (verify fails), they fail as verify
does, with wavbeam's error naming the file, never a crash."""

import copy
import json

import pytest

from pipeline.commands import inspect as inspect_lib
from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.readers import tf_dataset as replay
from pipeline.commands import verify
from pipeline.contract.errors import WavbeamError
from pipeline.contract import metadata as metadata_lib
from tests import helpers as H

REPLACEMENTS = (None, 'x', -1, 1.5, True, [], {})


@pytest.fixture(scope='module')
def written(tmp_path_factory):
  d = tmp_path_factory.mktemp('damage')
  for i in range(6):
    H.write_wav(str(d / 'in' / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(2048 * (2 + i % 2), seed=i))
  H.run_pipeline(H.make_config(
      d / 'in', d / 'out', win_len=1024, splits='train=0.5,test=0.5',
      features=('signal', 'spectrogram'), n_fft=256, fft_hop=128))
  return d / 'out'


def _paths(value, at=()):
  """Every place in a JSON value (the first element of lists)."""
  yield at
  if isinstance(value, dict):
    for key, child in value.items():
      yield from _paths(child, at + (key,))
  elif isinstance(value, list) and value:
    yield from _paths(value[0], at + (0,))


def _damages(meta):
  for at in _paths(meta):
    if not at:
      continue
    for replacement in ('<removed>',) + REPLACEMENTS:
      damaged = copy.deepcopy(meta)
      parent = damaged
      for key in at[:-1]:
        parent = parent[key]
      if replacement == '<removed>':
        if isinstance(parent, dict):
          del parent[at[-1]]
        else:
          parent.pop(at[-1])
      else:
        parent[at[-1]] = replacement
      yield at, replacement, damaged


def test_every_damage_is_refused_or_read(written, capsys):
  text = (written / 'metadata.json').read_text()
  meta = json.loads(text)
  refused = read = 0
  for at, replacement, damaged in _damages(meta):
    (written / 'metadata.json').write_text(json.dumps(damaged))
    try:
      metadata_lib.parse(json.dumps(damaged), 'metadata.json')
    except metadata_lib.MetadataError as e:
      refused += 1
      assert 'metadata.json: ' in str(e)
      continue
    read += 1
    where = f'{"/".join(map(str, at))} = {replacement!r}'
    try:
      verify.verify(str(written))
      verified = True
    except verify.VerifyError:
      verified = False  # the data contradicts it: readers may say so
    code = inspect_lib.main([str(written)])
    capsys.readouterr()
    assert code == 0 or (code == 1 and not verified), where
    try:
      for split, entry in damaged['splits'].items():
        n = sum(1 for _ in numpy_reader.numpy_dataset(str(written), split))
        assert n == entry['num_examples'], where
      if damaged['splits'].get('train', {}).get('num_examples'):
        try:
          normalized = replay.replay_dataset(
              str(written), 'train', batch_size=4, normalize=['spectrogram'])
        except WavbeamError as e:  # what it needs is gone: it says so
          assert 'no statistics' in str(e), where
        else:
          for _ in normalized:
            pass
    except WavbeamError:
      assert not verified, where
  (written / 'metadata.json').write_text(text)
  assert refused > 100 and read > 10, (refused, read)


@pytest.mark.parametrize('damage,entry', [
    (lambda m: m['counts'].update(files_seen=m['counts']['files_seen'] + 1),
     'counts.files_seen'),
    (lambda m: m['counts'].update(files_ok=m['counts']['files_ok'] + 1,
                                  files_seen=m['counts']['files_seen'] + 1),
     'counts.files_ok'),
    (lambda m: m['splits']['train']['examples_per_class'].update(zzz=1),
     'splits.train.examples_per_class'),
    (lambda m: m['counts'].update(files_excluded=1),
     'counts.files_seen'),
    (lambda m: m['counts'].update(files_excluded=-1),
     'counts.files_excluded'),
])
def test_verify_checks_every_count_relation(written, tmp_path, damage,
                                            entry):
  import shutil
  copy_dir = tmp_path / 'copy'
  shutil.copytree(written, copy_dir)
  meta = json.loads((copy_dir / 'metadata.json').read_text())
  assert verify.verify(str(copy_dir))
  damage(meta)
  (copy_dir / 'metadata.json').write_text(json.dumps(meta))
  with pytest.raises(verify.VerifyError, match=entry.replace('.', r'\.')):
    verify.verify(str(copy_dir))
