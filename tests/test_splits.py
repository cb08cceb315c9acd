"""Splits without leakage, a deterministic global shuffle, repeatable bytes."""

import hashlib
import json
import os

import numpy as np
import pytest

from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.commands import verify
from pipeline.contract import metadata
from tests import helpers as H

SPLITS = 'train=0.6,validation=0.2,test=0.2'


def _corpus(d, n_files=24, classes=('a', 'b', 'c', 'd'), windows=3):
  paths = []
  for i in range(n_files):
    cls = classes[i % len(classes)]
    paths.append(H.write_wav(str(d / cls / f'{cls}_{i:03d}.wav'),
                             H.noise(512 * windows, seed=i)))
  return paths


def _files_by_split(out):
  by_split = {}
  meta = json.load(open(os.path.join(out, 'metadata.json')))
  for split in meta['splits']:
    for e in H.replayed(str(out), split).values():
      by_split.setdefault(split, set()).add(e['filepath'].decode())
  return meta, by_split


@pytest.fixture(scope='module')
def split_run(tmp_path_factory):
  d = tmp_path_factory.mktemp('splits')
  paths = _corpus(d / 'in')
  config = H.make_config(d / 'in', d / 'out', win_len=512, splits=SPLITS,
                         max_examples_per_shard=10, features=('signal',))
  meta = H.run_pipeline(config)
  return d, paths, config, meta


def test_no_recording_in_two_splits_and_counts_per_split(split_run):
  d, paths, _, meta = split_run
  meta, by_split = _files_by_split(d / 'out')
  assert set(meta['splits']) == {'train', 'validation', 'test'}
  seen = [p for files in by_split.values() for p in files]
  assert len(seen) == len(set(seen)) == len(paths)
  for split, files in by_split.items():
    entry = meta['splits'][split]
    assert entry['num_files'] == len(files)
    assert entry['num_examples'] == 3 * len(files)
    classes = {os.path.basename(os.path.dirname(p)) for p in files}
    assert sum(entry['examples_per_class'].values()) == entry['num_examples']
    assert set(entry['examples_per_class']) == classes
  assert len(by_split['train']) > len(by_split['test'])


def test_adding_files_does_not_move_existing_ones(split_run, tmp_path):
  d, paths, _, _ = split_run
  _, before = _files_by_split(d / 'out')
  # Same corpus plus new files, in another folder: relative paths decide.
  import shutil
  shutil.copytree(d / 'in', tmp_path / 'in')
  for i in range(24, 40):
    H.write_wav(str(tmp_path / 'in' / 'e' / f'e_{i}.wav'),
                H.noise(1536, seed=i))
  config = H.make_config(tmp_path / 'in', tmp_path / 'out', win_len=512,
                         splits=SPLITS, features=('signal',))
  H.run_pipeline(config)
  _, after = _files_by_split(tmp_path / 'out')
  rel = lambda p, root: os.path.relpath(p, root)  # noqa: E731
  for split in before:
    old = {rel(p, d / 'in') for p in before[split]}
    new = {rel(p, tmp_path / 'in') for p in after[split]}
    assert old <= new, split


def test_shards_mix_files_and_classes_and_no_shuffle_keeps_order(split_run,
                                                                 tmp_path):
  import tensorflow as tf
  d, _, config, meta = split_run
  for shard in meta['splits']['train']['shards']:
    records = [tf.train.Example.FromString(r.numpy()) for r in
               tf.data.TFRecordDataset(str(d / 'out' / shard['file']))]
    classes = {r.features.feature['class'].bytes_list.value[0]
               for r in records}
    assert len(classes) >= 3, shard['file']
  ordered = H.make_config(config.input_dir, tmp_path / 'ordered', win_len=512,
                          splits=SPLITS, max_examples_per_shard=10,
                          no_shuffle=True, features=('signal',))
  meta2 = H.run_pipeline(ordered)
  keys = []
  for shard in meta2['splits']['train']['shards']:
    for r in tf.data.TFRecordDataset(str(tmp_path / 'ordered' /
                                         shard['file'])):
      f = tf.train.Example.FromString(r.numpy()).features.feature
      keys.append((f['index'].int64_list.value[0],
                   f['win_start_idx'].int64_list.value[0]))
  assert keys == sorted(keys) and len(keys) == \
      meta2['splits']['train']['num_examples']


def _digests(out):
  return {name: hashlib.sha256(open(os.path.join(out, name), 'rb').read())
          .hexdigest() for name in sorted(os.listdir(out))}


def test_reruns_give_identical_bytes_and_split_from_subdir(tmp_path):
  for split in ('train', 'test'):
    for cls in ('x', 'y'):
      for i in range(3):
        H.write_wav(str(tmp_path / 'in' / split / cls / f'{i}.wav'),
                    H.noise(2048, 2, seed=100 * (split == 'test') +
                            10 * (cls == 'y') + i),
                    subtype='PCM_24')
  H.write_wav(str(tmp_path / 'in' / 'loose.wav'), H.noise(2048))
  digests = []
  for run in ('a', 'b'):
    config = H.make_config(tmp_path / 'in', tmp_path / run, win_len=512,
                           split_from='subdir', max_examples_per_shard=7,
                           features=('signal', 'spectrogram'), n_fft=256,
                           fft_hop=128)
    meta = H.run_pipeline(config, options=None if run == 'a' else
                          ['--direct_num_workers=1'])
    digests.append(_digests(tmp_path / run))
  meta_a = json.load(open(tmp_path / 'a' / 'metadata.json'))
  meta_b = json.load(open(tmp_path / 'b' / 'metadata.json'))
  for m in (meta_a, meta_b):
    del m['config']['output_dir']
  assert metadata.content(meta_a) == metadata.content(meta_b)
  assert {k: v for k, v in digests[0].items() if k != 'metadata.json'} == \
      {k: v for k, v in digests[1].items() if k != 'metadata.json'}
  assert sorted(meta['splits']) == ['test', 'train']
  assert meta['classes'] == ['x', 'y']
  assert meta['splits']['test']['num_files'] == 6
  assert meta['counts']['files_rejected'] == 1  # loose.wav: no split folder
  rejects = open(tmp_path / 'a' / 'rejects.jsonl').read()
  assert 'no split' in rejects and 'loose.wav' in rejects


def test_statistics_equal_numpy_over_replayed_data(split_run):
  d, _, _, _ = split_run
  out = d / 'stats'
  config = H.make_config(d / 'in', out, win_len=512, splits=SPLITS,
                         features=('signal', 'spectrogram', 'log_mel'),
                         n_fft=256, fft_hop=128)
  meta = H.run_pipeline(config)
  for split, entry in meta['splits'].items():
    got = H.replayed(str(out), split)
    for key in ('signal', 'spectrogram', 'log_mel'):
      values = np.concatenate([e[key].astype(np.float64).ravel()
                               for e in got.values()])
      stats = entry['statistics'][key]
      assert stats['count'] == values.size
      np.testing.assert_allclose(stats['mean'], values.mean(), rtol=1e-10,
                                 atol=1e-12 * abs(values).max())
      np.testing.assert_allclose(stats['std'], values.std(), rtol=1e-10)
      assert stats['min'] == values.min() and stats['max'] == values.max()
  # Standardized with the train split's statistics.
  train = meta['splits']['train']['statistics']['spectrogram']
  from pipeline.readers import tf_dataset as replay
  raw = next(iter(replay.replay_dataset(str(out), 'test', features=[
      'spectrogram', 'index', 'win_start_idx'])))
  norm = next(iter(replay.replay_dataset(
      str(out), 'test', features=['spectrogram', 'index', 'win_start_idx'],
      normalize=['spectrogram'])))
  assert norm['spectrogram'].dtype.name == 'float32'
  expected = ((raw['spectrogram'].numpy().astype(np.float64) - train['mean'])
              / train['std']).astype(np.float32)
  assert np.array_equal(norm['spectrogram'].numpy(), expected)
  with pytest.raises(replay.DatasetError, match="normalize 'signal'"):
    replay.replay_dataset(str(out), features=['spectrogram'],
                          normalize=['signal'])


def _run_cli(argv):
  import subprocess
  import sys
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  return subprocess.run([sys.executable, '-m', 'pipeline.run', *argv],
                        cwd=root, capture_output=True, text=True)


@pytest.mark.parametrize('files, config, why', [
    (0, {}, 'no file was assigned to it (too few files for --splits, or '
     'all of its files rejected)'),
    (1, {'num_elems': 5}, '--num_elems=5 took its examples from other files '
     'than its 1 file'),
    (3, {'silence_windows': 'drop'}, 'its 3 files gave no example'),
])
def test_an_empty_split_s_warning_says_why(files, config, why):
  from pipeline.commands import console
  meta = {'counts': {'examples': 4}, 'config': config, 'splits': {
      'test': {'num_examples': 0, 'num_files': files},
      'train': {'num_examples': 4, 'num_files': 2}}}
  assert console.empty_warnings('out', meta) == [
      f"wavbeam: WARNING: split 'test' is EMPTY: {why}"]


def test_an_empty_split_reads_as_an_empty_dataset_and_is_announced(tmp_path):
  H.write_wav(str(tmp_path / 'in' / 'a' / 'only.wav'), H.noise(2048))
  proc = _run_cli(['--input_dir', str(tmp_path / 'in'), '--output_dir',
                   str(tmp_path / 'out'), '--win_len', '512', '--splits',
                   'train=0.5,test=0.5', '--quiet'])
  assert proc.returncode == 0, proc.stderr[-2000:]
  meta = metadata.parse(open(tmp_path / 'out' / 'metadata.json').read(), '')
  empty = [s for s, e in meta['splits'].items() if e['num_examples'] == 0]
  full = [s for s, e in meta['splits'].items() if e['num_examples'] == 4]
  assert len(empty) == len(full) == 1
  assert f"WARNING: split '{empty[0]}' is EMPTY" in proc.stderr
  from pipeline.readers import tf_dataset as replay
  ds = replay.replay_dataset(str(tmp_path / 'out'), empty[0], batch_size=2)
  assert ds.cardinality().numpy() == 0 and list(ds) == []
  assert ds.element_spec == replay.replay_dataset(
      str(tmp_path / 'out'), full[0], batch_size=2).element_spec


def test_a_run_with_every_file_rejected_exits_1_and_keeps_its_schema(
    tmp_path):
  """A complete dataset of nothing: its rejects and metadata written, an
  error line, and exit 1 for scripts and CI to notice."""
  H.write_wav(str(tmp_path / 'in' / 'a' / 'short.wav'), H.noise(100))
  out = tmp_path / 'out'
  proc = _run_cli(['--input_dir', str(tmp_path / 'in'), '--output_dir',
                   str(out), '--win_len', '512', '--quiet'])
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert (f'error: the dataset is EMPTY: no example was written to {out} '
          f'(1 of 1 files rejected; reasons in {out}/rejects.jsonl)'
          ) in proc.stderr.splitlines()
  rejects = [json.loads(line) for line in open(out / 'rejects.jsonl')]
  assert [r['reason'].split(':')[0] for r in rejects] == ['too short']
  from pipeline.readers import tf_dataset as replay
  ds = replay.replay_dataset(str(tmp_path / 'out'), 'train')
  assert list(ds) == []
  assert ds.element_spec['signal'].shape.as_list() == [512]
  assert ds.element_spec['spectrogram'].shape.as_list() == [1, 257]
  assert ds.element_spec['class'].dtype.name == 'string'


def test_split_assignment_is_stable_and_follows_fractions():
  from transforms.inputs import splits
  spec = (('train', 0.8), ('validation', 0.1), ('test', 0.1))
  names = [splits.split_by_hash(f'c/{i}.wav', spec) for i in range(5000)]
  counts = {n: names.count(n) / 5000 for n, _ in spec}
  assert abs(counts['train'] - 0.8) < 0.03 and abs(counts['test'] - 0.1) < 0.02
  # Known values: the same on every machine and Python version.
  assert splits.split_by_hash('c/0.wav', spec) == names[0]
  assert splits.stable_unit('x') == int(
      ' 2d711642b726b044'.replace(' ', ''), 16) / 2**64
  assert splits.split_from_folder('train/dog/a.wav') == 'train'
  assert splits.split_from_folder('a.wav') is None


def test_split_folders_that_cannot_name_a_split_are_rejected(tmp_path):
  """--split_from subdir: a top folder whose name could not name a split
  (it names shard files) gives no split; its files are rejected with the
  reason, and the rest is a dataset every reader reads."""
  for split in ('train', 'my test', 'x.y'):
    for i in range(2):
      H.write_wav(str(tmp_path / 'in' / split / 'c' / f'{i}.wav'),
                  H.noise(2048, seed=i))
  meta = H.run_pipeline(H.make_config(tmp_path / 'in', tmp_path / 'out',
                                      win_len=512, split_from='subdir'))
  assert sorted(meta['splits']) == ['train']
  assert meta['counts']['files_rejected'] == 4
  rejects = [json.loads(line) for line in open(tmp_path / 'out' /
                                               'rejects.jsonl')]
  assert sorted((os.path.relpath(r['path'], tmp_path / 'in'), r['reason'])
                for r in rejects) == [
      (f'{folder}/c/{i}.wav', f'no split: its folder {folder!r} is not a '
       'split name (--split_from=subdir; use letters, digits and "_" only)')
      for folder in ('my test', 'x.y') for i in range(2)]
  assert 'OK' in verify.verify(str(tmp_path / 'out'))


def test_one_file_under_several_names_is_one_recording(tmp_path):
  """A file also reached by a symbolic link or a hard link is read once,
  under its first name; the other names are rejected saying which file
  they are, so its audio is in one split only and the counts add up. (A
  linked folder is not searched.)"""
  root = tmp_path / 'in'
  for i in range(8):
    H.write_wav(str(root / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(4096, seed=i))
  os.symlink(root / 'a' / '0.wav', root / 'b' / 'link.wav')
  os.symlink(root / 'a', root / 'c')  # not searched: a/ is not listed twice
  os.link(root / 'b' / '1.wav', root / 'b' / 'hard.wav')
  meta = H.run_pipeline(H.make_config(
      root, tmp_path / 'out', win_len=1024, hop_len=1024,
      features=('signal',), splits=(('train', 0.5), ('test', 0.5))))
  rejects = [json.loads(line) for line in
             open(tmp_path / 'out' / 'rejects.jsonl')]
  duplicates = {os.path.relpath(r['path'], root): r['reason']
                for r in rejects}
  assert sorted(duplicates) == ['b/hard.wav', 'b/link.wav']
  assert duplicates['b/link.wav'].startswith(
      f'the same file as {root / "a" / "0.wav"} ')
  assert duplicates['b/hard.wav'].startswith(
      f'the same file as {root / "b" / "1.wav"} ')
  counts = meta['counts']
  assert counts['files_ok'] == 8 and counts['files_rejected'] == 2
  assert counts['files_seen'] == 10
  paths = set()
  for split in meta['splits']:
    for e in numpy_reader.numpy_dataset(str(tmp_path / 'out'), split,
                                        features=['filepath']):
      paths.add(str(e['filepath']))
  assert sorted(os.path.relpath(p, root) for p in paths) == sorted(
      f'{("a", "b")[i % 2]}/{i}.wav' for i in range(8))
