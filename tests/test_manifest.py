"""--manifest on miniature copies of published layouts (ESC-50,
UrbanSound8K, Common Voice: the same folder, file and column names,
generated audio, MP3 where the corpus ships MP3), each run with the exact
command docs/corpora.md prints; and the manifest's parsing and checks on their
own."""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from pipeline import config as config_lib
from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.config import ConfigError
from tests import helpers as H
from transforms.inputs import audio
from transforms.inputs import manifest as manifest_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def examples_by_split(out, features):
  meta = json.load(open(os.path.join(out, 'metadata.json')))
  return meta, {split: list(numpy_reader.numpy_dataset(
      out, split, features=features)) for split in meta['splits']}


def rejects(out):
  with open(os.path.join(out, 'rejects.jsonl'), encoding='utf-8') as f:
    return {os.path.basename(r['path']): r['reason']
            for r in map(json.loads, f)}


def test_esc50(tmp_path):
  root = tmp_path / 'ESC-50-master'
  categories = ['dog', 'rooster', 'rain', 'sea_waves']
  rows = []
  for i in range(20):
    fold, target = 1 + i % 5, i % 4
    name = f'{fold}-{100032 + i}-A-{target}.wav'
    # 1.5 s at 44.1 kHz (ESC-50's rate), resampled by the command
    H.write_wav(str(root / 'audio' / name), H.noise(66150, seed=i),
                rate=44100)
    rows.append([name, fold, target, categories[target],
                 str(i % 3 == 0), 100032 + i, 'A'])
  H.write_wav(str(root / 'audio' / 'stray.wav'), H.noise(66150), rate=44100)
  rows.append(['5-999-A-0.wav', 5, 0, 'dog', 'False', 999, 'A'])  # no file
  (root / 'meta').mkdir()
  with open(root / 'meta' / 'esc50.csv', 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['filename', 'fold', 'target', 'category', 'esc10',
                     'src_file', 'take'])
    writer.writerows(rows)
  out = H.run_documented_command('ESC-50', tmp_path)
  meta, splits = examples_by_split(
      out, ['filepath', 'class', 'fold', 'esc10', 'src_file', 'target'])
  by_name = {r[0]: r for r in rows}
  fold_split = {1: 'train', 2: 'train', 3: 'train', 4: 'validation',
                5: 'test'}
  seen = set()
  for split, examples in splits.items():
    for e in examples:
      name = os.path.basename(e['filepath'])
      row = by_name[name]
      assert split == fold_split[row[1]]
      assert e['class'] == row[3]
      assert e['target'] == sorted(categories).index(row[3])
      assert e['fold'].dtype.name == 'int64' and int(e['fold']) == row[1]
      assert e['esc10'] == row[4] and int(e['src_file']) == row[5]
      seen.add(name)
  assert seen == {r[0] for r in rows[:20]}
  assert sum(len(v) for v in splits.values()) == 40  # two windows each
  reasons = rejects(out)
  assert 'no row in the manifest' in reasons['stray.wav']
  assert 'line 22 of the manifest' in reasons['5-999-A-0.wav']
  assert meta['counts']['files_seen'] == 22
  assert meta['counts']['files_rejected'] == 2
  assert meta['schema']['esc10']['dtype'] == 'string'
  info = json.load(open(os.path.join(out, 'features.json')))
  assert {'fold', 'esc10', 'src_file'} <= set(
      info['featuresDict']['features'])
  pbtxt = open(os.path.join(out, 'schema.pbtxt')).read()
  assert 'name: "src_file"' in pbtxt


def test_urbansound8k(tmp_path):
  root = tmp_path / 'UrbanSound8K'
  classes = ['air_conditioner', 'car_horn', 'children_playing', 'dog_bark']
  rows = []
  for i in range(20):
    fold, class_id = 1 + i % 10, i % 4
    name = f'{1000 + i}-{class_id}-0-{i}.wav'
    rate = (22050, 44100, 48000, 16000)[i % 4]
    H.write_wav(str(root / 'audio' / f'fold{fold}' / name),
                H.noise(rate + rate // 2, 1 + i % 2, seed=i), rate=rate)
    rows.append([name, 1000 + i, 0.0, 1.5, 1 + i % 2, fold, class_id,
                 classes[class_id]])
  (root / 'metadata').mkdir()
  with open(root / 'metadata' / 'UrbanSound8K.csv', 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['slice_file_name', 'fsID', 'start', 'end', 'salience',
                     'fold', 'classID', 'class'])
    writer.writerows(rows)
  out = H.run_documented_command('UrbanSound8K', tmp_path)
  meta, splits = examples_by_split(
      out, ['filepath', 'class', 'target', 'fold', 'fsID', 'salience'])
  by_name = {r[0]: r for r in rows}
  names = set()
  for split, examples in splits.items():
    for e in examples:
      row = by_name[os.path.basename(e['filepath'])]
      assert e['filepath'].endswith(f'fold{row[5]}/{row[0]}')
      assert split == ('test' if row[5] == 10 else 'validation'
                       if row[5] == 9 else 'train')
      assert e['class'] == row[7] and int(e['target']) == row[6]
      assert (int(e['fold']), int(e['fsID']), int(e['salience'])) == (
          row[5], row[1], row[4])
      names.add(row[0])
  assert names == set(by_name)
  assert meta['counts']['files_rejected'] == 0
  assert sorted(meta['splits']) == ['test', 'train', 'validation']


def test_common_voice(tmp_path):
  base = tmp_path / 'cv-corpus-17.0' / 'en'
  header = ['client_id', 'path', 'sentence', 'up_votes', 'down_votes', 'age',
            'gender', 'accents', 'locale', 'segment']
  sentences = ['He said "hello" twice.', 'Ça va, naïve café?',
               "It's 3 o'clock", 'A, B; C']
  tsvs = {'train': [], 'dev': [], 'test': [], 'other': []}
  (base / 'clips').mkdir(parents=True)
  for i in range(12):
    name = f'common_voice_en_{4000 + i}.mp3'
    sf.write(str(base / 'clips' / name),
             H.noise(24000 + 6000 * i, seed=i, scale=0.3), 48000,
             format='MP3', subtype='MPEG_LAYER_III')
    tsv = ('train', 'train', 'dev', 'test', 'train', 'other')[i % 6]
    tsvs[tsv].append([f'{i % 3:064x}', name, sentences[i % 4], str(i % 3),
                      '0', 'twenties', '', '', 'en', ''])
  for tsv, rows in tsvs.items():
    with open(base / f'{tsv}.tsv', 'w', encoding='utf-8') as f:
      f.write('\t'.join(header) + '\n')
      f.writelines('\t'.join(row) + '\n' for row in rows)
  out = H.run_documented_command('Common Voice', tmp_path)
  meta, splits = examples_by_split(
      out, ['filepath', 'sentence', 'client_id', 'up_votes', 'class',
            'signal', 'num_samples'])
  expected = {}
  for tsv, split in (('train', 'train'), ('dev', 'validation'),
                     ('test', 'test')):
    for row in tsvs[tsv]:
      expected[row[1]] = (split, row)
  got = {}
  config = H.make_config('-', '-', win_len=160000, pad=True,
                         max_windows_per_signal=1)
  for split, examples in splits.items():
    for e in examples:
      name = os.path.basename(e['filepath'])
      got[name] = got.get(name, 0) + 1
      want_split, row = expected[name]
      assert split == want_split
      assert e['sentence'] == row[2] and e['client_id'] == row[0]
      assert int(e['up_votes']) == int(row[3]) and e['class'] == ''
      # the MP3 decoded whole, resampled to 16 kHz, bit for bit: the
      # recording's one example (--example_unit file)
      _, windows = H.reference_windows(
          os.path.join(tmp_path, e['filepath']), config, 16000)
      whole = audio.to_signal_dtype(windows, 'int32')[0]
      n = len(e['signal'])
      assert n == int(e['num_samples']) > 0
      assert np.array_equal(e['signal'], whole[:n])
      assert not whole[n:].any()  # all of the recording, then padding
  assert got == {name: 1 for name in expected}  # one example per clip
  assert meta['schema']['up_votes']['dtype'] == 'int64'
  other = [row[1] for row in tsvs['other']]
  reasons = rejects(out)
  assert all('no row in the manifest' in reasons[n] for n in other)
  assert meta['counts']['files_seen'] == 12


def _config(tmp_path, text, name='m.csv', **kw):
  path = tmp_path / name
  path.write_text(text, encoding='utf-8')
  (tmp_path / 'in').mkdir(exist_ok=True)
  return H.make_config(tmp_path / 'in', tmp_path / 'out',
                       manifest=str(path), **kw)


def test_rows_in_every_format(tmp_path):
  csv_text = 'path,label\n"a,1.wav",x\n./b.wav,y\n\n'
  config = _config(tmp_path, csv_text, manifest_label_column='label')
  entries = manifest_lib.read(config).entries
  root = str(tmp_path / 'in')
  assert {k: v.label for k, v in entries.items()} == {
      root + '/a,1.wav': 'x', root + '/b.wav': 'y'}
  tsv = 'path\tsentence\na.wav\tsay "hi"\n'
  config = _config(tmp_path, tsv, 'm.tsv', manifest_extra_columns='sentence')
  assert list(manifest_lib.read(config).entries.values())[0].extras == (
      ('sentence', 'say "hi"'),)
  jsonl = '{"path": "a.wav", "n": 3}\n{"path": "/abs/b.wav", "n": -4}\n'
  config = _config(tmp_path, jsonl, 'm.jsonl', manifest_extra_columns='n')
  found = manifest_lib.read(config)
  assert found.extra_types == {'n': 'int64'}
  assert found.entries['/abs/b.wav'].extras == (('n', -4),)


def test_blank_header_cells_name_no_column(tmp_path):
  """A spreadsheet's empty columns: two blank names are no repeated
  column."""
  text = 'path,label,,\na.wav,x,,\n'
  found = manifest_lib.read(_config(tmp_path, text,
                                    manifest_label_column='label'))
  assert [e.label for e in found.entries.values()] == ['x']


@pytest.mark.parametrize('digits', ['３', '٣', '3\u0663'])
def test_a_column_of_other_digits_stays_text(tmp_path, digits):
  """int() reads '３' (full width) and '٣' (Arabic-Indic) as 3: stored as
  numbers, a speaker '３' and a speaker '3', which the splits tell apart,
  would read back as one."""
  text = f'path,spk\na.wav,3\nb.wav,{digits}\n'
  found = manifest_lib.read(_config(tmp_path, text,
                                    manifest_extra_columns='spk'))
  assert found.extra_types == {'spk': 'string'}
  root = str(tmp_path / 'in')
  assert [found.entries[f'{root}/{n}'].extras for n in ('a.wav', 'b.wav')
          ] == [(('spk', '3'),), (('spk', digits),)]


@pytest.mark.parametrize('text,name,kw,message', [
    ('path,fold\na.wav,1\nb.wav\n', 'm.csv', {}, 'line 3 has 1 cells'),
    ('path\na.wav\n./a.wav\n', 'm.csv', {}, 'listed twice: .* line 2 and '
     'line 3'),
    ('path\nx/a.wav\nx//a.wav\n', 'm.csv', {}, 'listed twice: .* line 2 '
     'and line 3'),
    ('path\nx/a.wav\ny/../x/a.wav\n', 'm.csv', {}, 'listed twice: .* line '
     '2 and line 3'),
    ('{"path": "a.wav"}\nnot json\n', 'm.jsonl', {}, 'line 2 is not JSON'),
    ('file\na.wav\n', 'm.csv', {}, r"line 2 has no column \['path'\]"),
    ('path,fold\na.wav,1\nb.wav,7\n', 'm.csv',
     {'manifest_split_column': 'fold', 'fold_splits': 'train=1;test=2'},
     "line 3: fold='7' is in no split"),
    ('path,split\na.wav,dev set\n', 'm.csv',
     {'manifest_split_column': 'split'}, "split name 'dev set'"),
    ('path\n', 'm.txt', {}, 'name a .csv, .tsv or .jsonl'),
    # json and csv would keep one of the two: which is not what was meant
    ('path,label,label,,\na.wav,x,y,,\n', 'm.csv', {},
     r"header names the columns \['label'\] twice"),
    ('path\tn\tn\na.wav\t1\t2\n', 'm.tsv', {},
     r"header names the columns \['n'\] twice"),
    ('{"path": "a.wav", "label": "x", "label": "y"}\n', 'm.jsonl', {},
     r"line 1 is not JSON \(the keys \['label'\] are given twice\)"),
])
def test_a_malformed_manifest_names_the_line(tmp_path, text, name, kw,
                                             message):
  with pytest.raises(ConfigError, match=message):
    manifest_lib.read(_config(tmp_path, text, name, **kw))


def test_rows_naming_one_file_by_a_link_are_refused(tmp_path):
  """A symbolic link and its file are one recording: in two rows, it
  could go to train and to test."""
  H.write_wav(str(tmp_path / 'in' / 'a' / 'take.wav'), H.noise(4096))
  os.makedirs(tmp_path / 'in' / 'b')
  os.symlink('../a/take.wav', tmp_path / 'in' / 'b' / 'same.wav')
  config = _config(tmp_path, 'path,split\na/take.wav,train\n'
                   'b/same.wav,test\n', manifest_split_column='split')
  with pytest.raises(ConfigError, match='listed twice: .*m.csv line 2 and '
                     'line 3 .both are .*/in/a/take.wav'):
    manifest_lib.read(config)


@pytest.mark.parametrize('segments', [False, True])
def test_rows_naming_one_file_by_a_hard_link_are_refused(tmp_path,
                                                         segments):
  """A hard link is one file under two real paths: two rows naming it
  stop the run before it starts, as a symbolic link does."""
  H.write_wav(str(tmp_path / 'in' / 'a.wav'), H.noise(4096))
  os.link(tmp_path / 'in' / 'a.wav', tmp_path / 'in' / 'hard.wav')
  if segments:
    config = _config(tmp_path, 'path,start,end\na.wav,0,0.1\n'
                     'hard.wav,0.1,0.2\n', **SEGMENT_COLUMNS)
    message = (f'line 3: hard.wav and a.wav \\({tmp_path / "m.csv"} line '
               f'2\\) are one file \\({tmp_path / "in" / "a.wav"}\\)')
  else:
    config = _config(tmp_path, 'path,split\na.wav,train\nhard.wav,test\n',
                     manifest_split_column='split')
    message = (f'hard.wav is listed twice: .*m.csv line 2 and line 3 '
               f'.both are {tmp_path / "in" / "a.wav"}')
  with pytest.raises(ConfigError, match=message):
    manifest_lib.read(config)


SEGMENT_COLUMNS = {'manifest_start_column': 'start',
                   'manifest_end_column': 'end', 'label_from': 'none'}


def _two_manifests(tmp_path, splits, first, second, **kw):
  """A config of two segment manifests, `splits` (a, b) giving theirs."""
  (tmp_path / 'in').mkdir(exist_ok=True)
  (tmp_path / 'a.csv').write_text(first)
  (tmp_path / 'b.csv').write_text(second)
  return H.make_config(
      tmp_path / 'in', tmp_path / 'out', manifest=(
          f'{splits[0]}={tmp_path / "a.csv"},{splits[1]}={tmp_path / "b.csv"}'),
      **SEGMENT_COLUMNS, **kw)


def test_a_recording_in_two_split_files_names_both_files(tmp_path):
  config = _two_manifests(tmp_path, ('train', 'test'),
                          'path,start,end\ns/r.wav,0,1\n',
                          'path,start,end\n./s/r.wav,1,2\n')
  with pytest.raises(ConfigError) as e:
    manifest_lib.read(config)
  assert str(e.value) == (
      f"--manifest='{tmp_path / 'b.csv'}': line 2: ./s/r.wav has split "
      f"'test' here and 'train' on line 2 of {tmp_path / 'a.csv'} (as "
      "s/r.wav); the segments of one recording go to one split")


def test_segments_of_one_recording_in_two_files_keep_their_columns(
    tmp_path):
  """Two files' rows of one recording on the same line number: each
  segment keeps its own row's extra columns."""
  config = _two_manifests(tmp_path, ('train', 'train'),
                          'path,start,end,text\nr.wav,0,1,first\n',
                          'path,start,end,text\n./r.wav,1,2,second\n',
                          manifest_extra_columns='text')
  entry, = manifest_lib.read(config).entries.values()
  assert [(g.start, g.extras) for g in entry.segments] == [
      (0.0, (('text', 'first'),)), (1.0, (('text', 'second'),))]


def test_segment_rows_naming_one_file_by_a_link_are_refused(tmp_path):
  H.write_wav(str(tmp_path / 'long.wav'), H.noise(4096))
  (tmp_path / 'in' / 'x').mkdir(parents=True)
  for name in ('one.wav', 'two.wav'):
    os.symlink(tmp_path / 'long.wav', tmp_path / 'in' / 'x' / name)
  config = _config(tmp_path, 'path,start,end\nx/one.wav,0,0.1\n'
                   './x/one.wav,0.1,0.2\nx/two.wav,0.1,0.2\n',
                   **SEGMENT_COLUMNS)
  with pytest.raises(ConfigError, match=(
      f'line 4: x/two.wav and x/one.wav \\({tmp_path / "m.csv"} line 2\\) '
      f'are one file \\({tmp_path / "long.wav"}\\)')):
    manifest_lib.read(config)


def test_row_paths_are_normalised_as_the_listing_names_files(tmp_path):
  config = _config(tmp_path, 'path,label\nx//a.wav,1\n./y/./b.wav,2\n'
                   'z/../c.wav,3\n', manifest_label_column='label')
  root = str(tmp_path / 'in')
  assert sorted(manifest_lib.read(config).entries) == [
      root + '/c.wav', root + '/x/a.wav', root + '/y/b.wav']


@pytest.mark.parametrize('kw,option', [
    ({'manifest_label_column': 'c'}, 'manifest_label_column'),
    ({'manifest': 'm.csv', 'label_from': 'suffix',
      'manifest_label_column': 'c'}, 'label_from'),
    ({'manifest': 'm.csv', 'manifest_split_column': 's',
      'splits': 'train=0.5,test=0.5'}, 'manifest'),
    ({'manifest': 'm.csv', 'fold_splits': 'train=1'}, 'fold_splits'),
    ({'manifest': 'm.csv', 'manifest_split_column': 's',
      'fold_splits': 'train=1;test=1'}, 'fold_splits'),
    ({'manifest': 'm.csv', 'manifest_extra_columns': 'target'},
     'manifest_extra_columns'),
    ({'manifest': 'train=a.csv,b.csv'}, 'manifest'),
    ({'manifest': 'train=a.csv', 'manifest_split_column': 's'},
     'manifest_split_column'),
    ({'manifest': 'm.csv', 'manifest_audio_extension': '.wav'},
     'manifest_audio_extension'),
])
def test_conflicting_options_name_the_option(kw, option):
  with pytest.raises(ConfigError) as e:
    config_lib.PipelineConfig(input_dir='in', output_dir='out', **kw)
  assert e.value.option == option


def test_a_bad_manifest_stops_the_cli_before_anything_runs(tmp_path):
  H.write_wav(str(tmp_path / 'in' / 'a.wav'), H.noise(4096))
  (tmp_path / 'm.csv').write_text('path,label\na.wav,x\na.wav,y\n')
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir',
       str(tmp_path / 'in'), '--output_dir', str(tmp_path / 'out'),
       '--manifest', str(tmp_path / 'm.csv'), '--manifest_label_column',
       'label'], cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 2
  assert 'listed twice' in proc.stderr and 'line 3' in proc.stderr
  assert not (tmp_path / 'out').exists()


def test_a_row_naming_a_fifo_is_rejected_without_blocking(tmp_path):
  H.write_wav(str(tmp_path / 'in' / 'a.wav'), H.noise(4096))
  os.mkfifo(tmp_path / 'elsewhere.wav')
  (tmp_path / 'm.csv').write_text(
      f'path,label\na.wav,x\n{tmp_path / "elsewhere.wav"},y\n')
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir',
       str(tmp_path / 'in'), '--output_dir', str(tmp_path / 'out'),
       '--manifest', str(tmp_path / 'm.csv'), '--manifest_label_column',
       'label', '--win_len', '1024'], cwd=ROOT, capture_output=True,
      text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  rejects = [json.loads(line) for line in open(tmp_path / 'out' /
                                                'rejects.jsonl')]
  assert [(r['path'], r['reason'].split(';')[0]) for r in rejects] == [
      (str(tmp_path / 'elsewhere.wav'), 'not a regular file: a FIFO')]


def test_class_names_with_control_characters_are_rejected(tmp_path):
  """A class is one line of target.labels.txt (TFDS reads the names one a
  line): a folder or manifest class with a line break or a tab is no class
  name; its file is rejected with the reason, from either source."""
  for i, folder in enumerate(('alpha', 'new\nline', 'zulu', 'tab\there')):
    H.write_wav(str(tmp_path / 'in' / folder / 'a.wav'), H.noise(4096, seed=i))
  meta = H.run_pipeline(H.make_config(tmp_path / 'in', tmp_path / 'out',
                                      win_len=1024))
  assert meta['classes'] == ['alpha', 'zulu']
  assert (tmp_path / 'out' / 'target.labels.txt').read_text() == \
      'alpha\nzulu\n'
  reasons = {os.path.dirname(os.path.relpath(path, tmp_path / 'in')): why
             for path, why in _reject_reasons(tmp_path / 'out')}
  assert reasons == {
      folder: f'no label: its class {folder!r} is not a class name (no '
      'control characters, such as line breaks and tabs)'
      for folder in ('new\nline', 'tab\there')}
  rows = [['path', 'label']] + [[f'{folder}/a.wav', label] for folder, label
                                in (('alpha', 'one'), ('zulu', 'two\nlines'),
                                    ('new\nline', 'three'))]
  manifest = tmp_path / 'm.csv'
  with open(manifest, 'w', newline='', encoding='utf-8') as f:
    csv.writer(f).writerows(rows)
  meta = H.run_pipeline(H.make_config(
      tmp_path / 'in', tmp_path / 'out2', win_len=1024,
      manifest=str(manifest), manifest_label_column='label'))
  assert meta['classes'] == ['one', 'three']
  assert {os.path.dirname(os.path.relpath(path, tmp_path / 'in')): why
          for path, why in _reject_reasons(tmp_path / 'out2')
          if 'not a class name' in why} == {
      'zulu': "no label: its class 'two\\nlines' is not a class name (no "
      'control characters, such as line breaks and tabs)'}


def _reject_reasons(out):
  with open(os.path.join(out, 'rejects.jsonl'), encoding='utf-8') as f:
    return [(r['path'], r['reason']) for r in map(json.loads, f)]


def test_a_row_leading_out_of_the_input_folder_is_rejected_saying_so(
    tmp_path):
  """A relative row names a file below input_dir; one that climbs out of
  it is rejected with that reason (a file elsewhere is given by its
  absolute path, and then read)."""
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(4096, seed=1))
  for i, name in enumerate(('y.wav', 'z.wav')):
    H.write_wav(str(tmp_path / 'elsewhere' / name), H.noise(4096, seed=i))
  manifest = tmp_path / 'm.csv'
  manifest.write_text('path,label\na/x.wav,one\n../elsewhere/y.wav,two\n'
                      f'{tmp_path / "elsewhere" / "z.wav"},three\n')
  meta = H.run_pipeline(H.make_config(
      tmp_path / 'in', tmp_path / 'out', win_len=1024,
      manifest=str(manifest), manifest_label_column='label'))
  assert meta['classes'] == ['one', 'three']
  assert rejects(tmp_path / 'out') == {
      'y.wav': 'listed on line 3 of the manifest as a path that leads out '
      'of input_dir: give a file elsewhere by its absolute path'}


@pytest.mark.slow
def test_absolute_rows_under_a_relative_input_dir_are_its_files(
    tmp_path, monkeypatch):
  """Rows naming files under --input_dir by absolute paths, --input_dir
  given relative: each file is one recording under the listing's name,
  so --exclude matches it, it is counted once and its split is the one
  relative rows give it."""
  monkeypatch.chdir(tmp_path)
  names = [f'f{i}.wav' for i in range(12)] + ['x/skip.wav']
  for i, name in enumerate(names):
    H.write_wav(str(tmp_path / 'in' / name), H.noise(4096, seed=i))
  assigned = {}
  for spelling in ('absolute', 'relative'):
    rows = [str(tmp_path / 'in' / n) if spelling == 'absolute' else n
            for n in names]
    (tmp_path / f'{spelling}.csv').write_text(
        'path\n' + ''.join(f'{r}\n' for r in rows))
    config = H.make_config('in', f'out_{spelling}', win_len=4096,
                           manifest=f'{spelling}.csv', label_from='none',
                           exclude=('x/*',), splits='train=0.5,test=0.5')
    meta = H.run_pipeline(config)
    assert meta['counts']['files_seen'] == 13, spelling
    assert meta['counts']['files_excluded'] == 1, spelling
    assert meta['counts']['files_ok'] == 12, spelling
    assigned[spelling] = {
        split: sorted(e['filepath'] for e in numpy_reader.numpy_dataset(
            f'out_{spelling}', split, features=['filepath']))
        for split in meta['splits']}
  assert assigned['absolute'] == assigned['relative']
  assert sum(map(len, assigned['absolute'].values())) == 12
  assert all(p.startswith('in/f') for ps in assigned['absolute'].values()
             for p in ps)
