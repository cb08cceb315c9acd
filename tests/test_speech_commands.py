"""The Speech Commands recipe of docs/corpora.md, run as printed on a
miniature copy of the corpus (its folder, file and list names; generated
audio): the 12-class task, with --label_map, --silence_from and
--split_lists; then --exclude, --silence_windows and --append on the same
corpus, and the refusals of labels and patterns that name nothing."""

import collections
import json
import os
import subprocess
import sys

import pytest

from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.commands import verify
from pipeline.contract import parts as parts_lib
from pipeline.output_folder import read_whole_metadata
from tests import helpers as H
from transforms.inputs import audio

ROOT = H.ROOT
WORDS = ('yes', 'no', 'up', 'down', 'left', 'right', 'on', 'off', 'stop',
         'go')
EXTRA_WORDS = ('bed', 'marvin', 'visual')
# name: seconds, of the corpus's long noise recordings.
BACKGROUND = {'doing_the_dishes.wav': 3.3, 'running_tap.wav': 2.5,
              'white_noise.wav': 2.0}
WIN, HOP = 16000, 2000  # the recipe's --win_len and --hop_len
TWELVE = sorted(WORDS + ('_unknown_', '_silence_'))


def _build(root):
  """speech_commands_v0.02 as published, in miniature: {word}/
  {speaker}_nohash_{n}.wav clips of one second (some shorter), the
  _background_noise_ folder (and its README.md), and the two lists.
  Returns ({path relative to root: split}, {background name: frames})."""
  splits = {}
  for w, word in enumerate(WORDS + EXTRA_WORDS):
    for s in range(3 if word in WORDS else 2):
      rel = f'{word}/{s:08x}_nohash_{w % 2}.wav'
      frames = 16000 if (w + s) % 3 else 11000  # shorter clips are padded
      H.write_wav(str(root / rel), H.noise(frames, seed=100 * w + s))
      splits[rel] = ('validation' if s == 1 else
                     'test' if s == 2 or word == 'visual' else 'train')
  frames = {}
  for i, (name, seconds) in enumerate(sorted(BACKGROUND.items())):
    frames[name] = int(seconds * 16000)
    rel = f'_background_noise_/{name}'
    H.write_wav(str(root / rel), H.noise(frames[name], seed=7 + i,
                                         scale=0.1))
    splits[rel] = 'train'  # in no list
  (root / '_background_noise_' / 'README.md').write_text('noise\n')
  (root / 'LICENSE').write_text('CC BY 4.0\n')
  for split, name in (('validation', 'validation_list.txt'),
                      ('test', 'testing_list.txt')):
    (root / name).write_text(''.join(
        f'{rel}\n' for rel, s in sorted(splits.items()) if s == split))
  return splits, frames


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
  where = tmp_path_factory.mktemp('sc')
  root = where / 'speech_commands_v0.02'
  splits, frames = _build(root)
  return where, root, splits, frames


def _run(argv, cwd):
  env = dict(os.environ, PYTHONPATH=ROOT)
  return subprocess.run(argv, cwd=cwd, env=env, capture_output=True,
                        text=True, timeout=600)


def _recipe(out, *extra):
  """The documented command with another output folder, and `extra`."""
  argv = H.documented_command('Speech Commands')
  argv[argv.index('--output_dir') + 1] = str(out)
  return argv + list(extra)


def _examples(out, root, where):
  """{split: [(path relative to root, class, target, win_start_idx)]}."""
  meta = read_whole_metadata(str(out))
  found = {}
  for split in meta['splits']:
    found[split] = [
        (os.path.relpath(where / e['filepath'], root),
         e['class'], int(e['target']), int(e['win_start_idx']))
        for e in numpy_reader.numpy_dataset(
            str(out), split, features=['filepath', 'class', 'target',
                                       'win_start_idx'])]
  return meta, found


def _expected_class(rel):
  folder = rel.split('/')[0]
  if folder == '_background_noise_':
    return '_silence_'
  return folder if folder in WORDS else '_unknown_'


def _silence_windows(seconds_frames):
  return audio.window_count(seconds_frames, WIN, HOP, True)


def test_the_recipe_makes_the_12_class_task(corpus):
  where, root, splits, frames = corpus
  out = H.run_documented_command('Speech Commands', where)
  meta, found = _examples(out, root, where)

  assert meta['classes'] == TWELVE and meta['num_classes'] == 12
  assert '_background_noise_' not in meta['classes']
  with open(os.path.join(out, 'target.labels.txt')) as f:
    assert f.read().splitlines() == TWELVE
  features = json.load(open(os.path.join(out, 'features.json')))
  target = features['featuresDict']['features']['target']
  assert target['classLabel']['numClasses'] == '12', target

  # Every file once per window, in the split its list gives, with the
  # class of the 12-class task; targets index the classes.
  per_file = collections.Counter()
  for split, examples in found.items():
    per_class = collections.Counter()
    for rel, cls, tgt, _ in examples:
      assert splits[rel] == split, (rel, split)
      assert cls == _expected_class(rel), rel
      assert tgt == TWELVE.index(cls)
      per_file[rel] += 1
      per_class[cls] += 1
    assert meta['splits'][split]['examples_per_class'] == dict(per_class)
  assert set(per_file) == set(splits)
  assert all(per_file[rel] == 1 for rel in splits
             if not rel.startswith('_background_noise_/'))
  unknown = {rel for split in found.values() for rel, cls, _, _ in split
             if cls == '_unknown_'}
  assert {rel.split('/')[0] for rel in unknown} == set(EXTRA_WORDS)

  # _silence_: every window of the noise recordings at the run's hop, and
  # nothing else.
  silence = collections.defaultdict(list)
  for rel, cls, _, start in found['train']:
    if cls == '_silence_':
      silence[rel].append(start)
  assert sorted(silence) == sorted(f'_background_noise_/{n}'
                                   for n in BACKGROUND)
  for name, n in frames.items():
    starts = sorted(silence[f'_background_noise_/{name}'])
    assert starts == [HOP * i for i in range(_silence_windows(n))], name
  assert not any(cls == '_silence_' for split in ('validation', 'test')
                 for _, cls, _, _ in found[split])

  counts = meta['counts']
  assert counts['files_seen'] == len(splits) == counts['files_ok']
  assert counts['files_rejected'] == counts['files_excluded'] == 0
  assert counts['examples'] == sum(map(len, found.values()))


def test_excluded_files_are_counted_and_silence_is_capped(corpus, tmp_path):
  """--exclude on top of the recipe: one word (one of its files is in a
  list) and one noise recording (matched by --silence_from too:
  excluded wins); --silence_windows shares its cap between the two
  recordings left. Then --append: an excluded new file starts no part,
  and is counted by the next part."""
  where, root, splits, frames = corpus
  out = tmp_path / 'sc'
  options = ['--exclude', 'marvin/*', '--exclude',
             '_background_noise_/white_noise.wav', '--silence_windows', '15']
  proc = _run(_recipe(out, *options), where)
  assert proc.returncode == 0, proc.stderr[-3000:]
  excluded = {rel for rel in splits if rel.startswith('marvin/')}
  excluded.add('_background_noise_/white_noise.wav')
  assert f'{len(excluded)} excluded (--exclude)' in proc.stderr

  meta, found = _examples(out, root, where)
  counts = meta['counts']
  assert counts['files_seen'] == len(splits)
  assert counts['files_excluded'] == len(excluded)
  assert counts['files_ok'] == len(splits) - len(excluded)
  assert counts['files_rejected'] == counts['rejections'] == 0
  used = {rel for split in found.values() for rel, _, _, _ in split}
  assert used == set(splits) - excluded
  assert sum(meta['splits'][s]['num_files'] for s in found) == len(used)
  with open(out / 'rejects.jsonl') as f:
    records = [json.loads(line) for line in f]
  assert sorted(os.path.relpath(where / r['path'], root) for r in records) == \
      sorted(excluded)
  assert all(r['stage'] == 'exclude' for r in records)
  assert all(r['reason'].startswith('excluded: matches --exclude ')
             for r in records)
  assert meta['classes'] == TWELVE  # bed and visual are still unknown

  # 15 silence windows: 8 from the first recording, 7 from the other,
  # each its first windows.
  silence = collections.defaultdict(list)
  for rel, cls, _, start in found['train']:
    if cls == '_silence_':
      silence[rel].append(start)
  assert {rel: sorted(s) for rel, s in silence.items()} == {
      '_background_noise_/doing_the_dishes.wav': [HOP * i for i in range(8)],
      '_background_noise_/running_tap.wav': [HOP * i for i in range(7)]}

  inspect = _run([sys.executable, '-m', 'pipeline.inspect_dataset',
                  str(out)], where)
  assert inspect.returncode == 0, inspect.stderr
  assert f'{len(excluded)} excluded (--exclude)' in inspect.stdout
  assert f'excluded ({len(excluded)}, files --exclude left out)' in \
      inspect.stdout

  # A new word clip and a new excluded clip: one part, counting both.
  H.write_wav(str(root / 'yes/feedface_nohash_0.wav'), H.noise(16000))
  H.write_wav(str(root / 'marvin/feedface_nohash_0.wav'), H.noise(16000))
  try:
    proc = _run(_recipe(out, *options, '--append'), where)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'appended 1 new recordings' in proc.stderr, proc.stderr
    part = json.load(open(out / parts_lib.part_name(1) / 'metadata.json'))
    assert part['counts']['files_seen'] == 2
    assert part['counts']['files_ok'] == part['counts']['files_excluded'] == 1
    whole = read_whole_metadata(str(out))
    assert 'OK' in verify.verify(str(out))  # every part, counts checked
    assert whole['counts']['files_excluded'] == len(excluded) + 1
    assert whole['counts']['files_seen'] == len(splits) + 2
    assert whole['classes'] == TWELVE

    # Only an excluded file is new: nothing to append, and the next part
    # will count it.
    H.write_wav(str(root / 'marvin/0badcafe_nohash_0.wav'), H.noise(16000))
    proc = _run(_recipe(out, *options, '--append'), where)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'nothing to append' in proc.stderr, proc.stderr
    assert not (out / parts_lib.part_name(2)).exists()
  finally:
    for name in ('yes/feedface_nohash_0.wav', 'marvin/feedface_nohash_0.wav',
                 'marvin/0badcafe_nohash_0.wav'):
      if (root / name).exists():
        os.remove(root / name)


@pytest.mark.parametrize('options, message', [
    (['--label_map', 'yes,yse,*=_unknown_'],
     "--label_map='*=_unknown_,yes,yse': names 'yse', which no file of the "
     'corpus has as its class'),
    (['--exclude', '_background_noise/*'],
     "--exclude='_background_noise/*': matches no file under"),
    (['--exclude', '_background_noise_/*'],
     "--silence_from='_background_noise_/*': every file it matches is left "
     'out by --exclude'),
])
def test_names_that_match_nothing_stop_the_run(corpus, tmp_path, options,
                                               message):
  where, _, _, _ = corpus
  out = tmp_path / 'sc'
  proc = _run(_recipe(out, *options), where)
  assert proc.returncode in (1, 2), proc.stderr[-3000:]
  assert message in proc.stderr, proc.stderr[-3000:]
  assert not (out / 'metadata.json').exists()


def test_exclude_and_label_map_with_a_manifest(tmp_path):
  """A manifest's rows and the files under input_dir: an excluded file
  needs no row, an excluded row needs no file, and --label_map renames the
  manifest's labels."""
  root = tmp_path / 'clips'
  rows = [('a.wav', 'dog'), ('b.wav', 'cat'), ('c.wav', 'cow'),
          ('skip/d.wav', 'dog'), ('skip/gone.wav', 'cat')]
  for name, _ in rows[:4]:
    H.write_wav(str(root / name), H.noise(8000))
  H.write_wav(str(root / 'skip' / 'norow.wav'), H.noise(8000))
  H.write_wav(str(root / 'stray.wav'), H.noise(8000))  # no row: rejected
  manifest = tmp_path / 'rows.csv'
  manifest.write_text('path,label\n' + ''.join(f'{p},{c}\n' for p, c in rows))
  config = H.make_config(root, tmp_path / 'out', win_len=4000,
                         manifest=str(manifest),
                         manifest_label_column='label', exclude='skip/*',
                         label_map='dog,*=other')
  meta = H.run_pipeline(config)
  assert meta['classes'] == ['dog', 'other']
  assert meta['splits']['train']['examples_per_class'] == {'dog': 2,
                                                           'other': 4}
  counts = meta['counts']
  assert (counts['files_seen'], counts['files_ok'], counts['files_rejected'],
          counts['files_excluded']) == (7, 3, 1, 3)
  with open(tmp_path / 'out' / 'rejects.jsonl') as f:
    stages = {os.path.relpath(r['path'], root): r['stage']
              for r in map(json.loads, f)}
  assert stages == {'skip/d.wav': 'exclude', 'skip/gone.wav': 'exclude',
                    'skip/norow.wav': 'exclude', 'stray.wav': 'list'}
