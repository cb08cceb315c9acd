"""--variants: a sweep of feature settings, each variant a complete
dataset equal, shard for shard, to a separate run with its options."""

import json
import os
import signal
import shutil
import subprocess
import sys

import numpy as np
import pytest

from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.readers import tf_dataset as replay
from pipeline import variants
from pipeline.commands import verify
from pipeline.contract import tfrecord
from pipeline.contract.errors import DatasetError
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMON = ['--win_len', '2048', '--hop_len', '1024', '--splits',
          'train=0.7,test=0.3', '--max_examples_per_shard', '9', '--quiet']
SWEEP = '''
[nfft256]
n_fft = 256
fft_hop = 128

[nfft512_hop64]
n_fft = 512
fft_hop = 64
features = ["signal", "spectrogram", "log_mel"]

[mfcc20]
features = "log_mel,mfcc,lpc"
n_mfcc = 20
n_mels = 40
fmin = 125
lpc_order = 8
'''
VARIANT_FLAGS = {
    'nfft256': ['--n_fft', '256', '--fft_hop', '128'],
    'nfft512_hop64': ['--n_fft', '512', '--fft_hop', '64', '--features',
                      'signal,spectrogram,log_mel'],
    'mfcc20': ['--features', 'log_mel,mfcc,lpc', '--n_mfcc', '20',
               '--n_mels', '40', '--fmin', '125.0', '--lpc_order', '8'],
}


def _cli(*args):
  return subprocess.run([sys.executable, '-m', 'pipeline.run', *args],
                        cwd=ROOT, capture_output=True, text=True,
                        timeout=600)


@pytest.fixture(scope='module')
def sweep(tmp_path_factory):
  d = tmp_path_factory.mktemp('variants')
  for i in range(8):
    H.write_wav(str(d / 'in' / ('owl', 'wren')[i % 2] / f'{i}.wav'),
                H.noise(6000 + 1500 * i, 1 + i % 2, seed=i))
  (d / 'sweep.toml').write_text(SWEEP)
  proc = _cli('--input_dir', str(d / 'in'), '--output_dir', str(d / 'out'),
              *COMMON, '--variants', str(d / 'sweep.toml'))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return d


def _files(folder):
  return {n: (folder / n).read_bytes() for n in sorted(os.listdir(folder))
          if '.tfrecord-' in n or '.tfindex-' in n}


def _metadata_without_run(folder):
  meta = json.loads((folder / 'metadata.json').read_text())
  for key in ('created', 'shards_written'):
    meta.pop(key)
  meta['config'].pop('output_dir')
  return meta


def _records_of(folder):
  records = []
  for name in sorted(os.listdir(folder)):
    if '.tfrecord-' in name:
      with open(folder / name, 'rb') as f:
        records += [data for _, data in tfrecord.read_records(f, name)]
  return records


def _split_statistics(meta):
  return {split: entry.pop('statistics')
          for split, entry in meta['splits'].items()}


def _assert_statistics_close(ours, alone):
  """Statistics merged over a shard's parts instead of its batches: equal
  counts and extremes, moments to rounding."""
  assert ours.keys() == alone.keys()
  for split in ours:
    assert ours[split].keys() == alone[split].keys()
    for key, m in ours[split].items():
      other = alone[split][key]
      assert (m['count'], m['min'], m['max']) == (
          other['count'], other['min'], other['max']), (split, key)
      assert m['mean'] == pytest.approx(other['mean'], rel=1e-9, abs=1e-12)
      assert m['std'] == pytest.approx(other['std'], rel=1e-9, abs=1e-12)


# Variants whose examples differ in size, so that under one byte cap each
# cuts its splits into a different number of shards: a segment of the sweep
# is then part of a shard, and shards are assembled from parts.
UNEVEN = {
    'fine': ['--n_fft', '256', '--fft_hop', '64'],
    'coarse': ['--n_fft', '1024', '--fft_hop', '512'],
    'signal': ['--features', 'signal'],
}


@pytest.mark.parametrize('flags', [[], ['--array_record'],
                                   ['--compression', 'gzip']],
                         ids=['plain', 'array_record', 'gzip'])
def test_variants_with_different_shard_counts_equal_separate_runs(
    sweep, tmp_path, flags):
  common = ['--win_len', '2048', '--hop_len', '1024', '--splits',
            'train=0.7,test=0.3', '--max_shard_bytes', '100000', '--quiet',
            *flags]
  (tmp_path / 'uneven.json').write_text(json.dumps({
      name: {f[2:]: v for f, v in zip(args[::2], args[1::2])}
      for name, args in UNEVEN.items()}))
  proc = _cli('--input_dir', str(sweep / 'in'), '--output_dir',
              str(tmp_path / 'out'), *common, '--variants',
              str(tmp_path / 'uneven.json'))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert sorted(os.listdir(tmp_path / 'out')) == sorted(
      [*UNEVEN, 'variants.json'])
  shard_counts = set()
  for name, args in UNEVEN.items():
    alone = tmp_path / f'alone-{name}'
    proc = _cli('--input_dir', str(sweep / 'in'), '--output_dir', str(alone),
                *common, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours = tmp_path / 'out' / name
    written = {n: (ours / n).read_bytes() for n in sorted(os.listdir(ours))
               if '-00' in n}
    assert written == {n: (alone / n).read_bytes()
                       for n in sorted(os.listdir(alone)) if '-00' in n}
    if flags == ['--array_record']:
      assert any(n.endswith('.array_record') or '.array_record-' in n
                 for n in written), sorted(written)
    meta, meta_alone = (_metadata_without_run(ours),
                        _metadata_without_run(alone))
    _assert_statistics_close(_split_statistics(meta),
                             _split_statistics(meta_alone))
    assert meta == meta_alone, name
    shard_counts.add(len(meta['splits']['train']['shards']))
    assert 'OK' in verify.verify(str(ours))
  assert len(shard_counts) == 3, shard_counts  # parts were assembled


def test_every_variant_equals_a_separate_run(sweep):
  index = json.loads((sweep / 'out' / 'variants.json').read_text())
  assert sorted(index['variants']) == sorted(VARIANT_FLAGS)
  assert index['differing_options'] == [
      'features', 'fft_hop', 'fmin', 'lpc_order', 'n_fft', 'n_mels',
      'n_mfcc']
  assert index['variants']['mfcc20']['differs']['n_mfcc'] == 20
  for name, flags in VARIANT_FLAGS.items():
    alone = sweep / f'alone-{name}'
    proc = _cli('--input_dir', str(sweep / 'in'), '--output_dir', str(alone),
                *COMMON, *flags)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours = sweep / 'out' / name
    assert _files(ours)
    _assert_same_dataset(ours, alone)
    assert _metadata_without_run(ours) == _metadata_without_run(alone), name
    assert 'OK' in verify.verify(str(ours))


def _assert_same_dataset(ours, alone):
  """Every file a separate run writes is in the variant's folder, the
  same bytes: shards, record indexes, rejects.jsonl, sources.jsonl, the
  TFDS and TFX files; metadata.json but for the run's times, its output
  folder and the statistics' last digits (merged over a shard's parts)."""
  assert sorted(os.listdir(ours)) == sorted(os.listdir(alone))
  for name in sorted(os.listdir(alone)):
    if name != 'metadata.json':
      assert (ours / name).read_bytes() == (alone / name).read_bytes(), (
          ours, name)
  meta, meta_alone = _metadata_without_run(ours), _metadata_without_run(
      alone)
  _assert_statistics_close(_split_statistics(meta),
                           _split_statistics(meta_alone))
  assert meta == meta_alone, ours


def _segments_manifest(folder, lengths):
  """Two segments of each recording, one of at most 0.2 s, one from
  0.05 s to its end: a path,start,end,label CSV."""
  rows = ['path,start,end,label']
  for i, n in enumerate(lengths):
    seconds = n / 16000
    rows.append(f'{i:02d}.wav,0,{min(seconds, 0.2)},{("owl", "wren")[i % 2]}')
    rows.append(f'{i:02d}.wav,0.05,{seconds},{("wren", "owl")[i % 2]}')
  (folder / 'segments.csv').write_text('\n'.join(rows) + '\n')


# Short clips (0.1-0.5 s, and 0.9 s), each unit's common options, and
# variants that differ in n_fft, fft_hop and features: under the file and
# segment units an STFT of 4096 cannot frame the shorter clips, which the
# other variants keep; --max_seconds rejects the longest in every variant.
CLIPS = [1600 + 560 * i for i in range(12)] + [14400]
UNIT_OPTIONS = {
    'window': ['--win_len', '4096', '--hop_len', '2048'],
    'file': ['--example_unit', 'file', '--max_seconds', '0.6',
             '--max_shard_bytes', '60000'],
    'segment': ['--example_unit', 'segment', '--max_seconds', '0.4',
                '--manifest_start_column', 'start',
                '--manifest_end_column', 'end', '--manifest_label_column',
                'label', '--max_shard_bytes', '40000'],
}
STFT_VARIANTS = {
    'big': ['--n_fft', '4096', '--fft_hop', '1024', '--features',
            'signal,log_mel'],
    'sig': ['--features', 'signal'],
    'small': ['--n_fft', '256', '--fft_hop', '128'],
}


@pytest.mark.parametrize('unit,common_variant', [
    ('window', None), ('file', None), ('segment', None), ('file', 'big')],
                         ids=['window', 'file', 'segment', 'file-big-common'])
def test_every_variant_holds_what_a_separate_run_holds(tmp_path, unit,
                                                       common_variant):
  """Every variant holds, file for file, what a separate run with its
  options holds, whatever the example unit, with its own rejections and
  counts. `common_variant`: the variant whose options are the run's own,
  which the others' overrides change."""
  for i, n in enumerate(CLIPS):
    folder = '' if unit == 'segment' else ('owl', 'wren')[i % 2] + '/'
    H.write_wav(str(tmp_path / 'in' / f'{folder}{i:02d}.wav'),
                H.noise(n, seed=i))
  (tmp_path / 'in' / 'broken.wav').write_bytes(b'not audio')
  common = ['--input_dir', str(tmp_path / 'in'), '--splits',
            'train=0.7,test=0.3', '--quiet', *UNIT_OPTIONS[unit]]
  if unit == 'segment':
    _segments_manifest(tmp_path, CLIPS)
    common += ['--manifest', str(tmp_path / 'segments.csv')]
  if common_variant:
    common += STFT_VARIANTS[common_variant]
  (tmp_path / 'v.json').write_text(json.dumps({
      name: {f[2:]: v for f, v in zip(args[::2], args[1::2])}
      if name != common_variant else {}
      for name, args in STFT_VARIANTS.items()}))
  proc = _cli(*common, '--output_dir', str(tmp_path / 'out'), '--variants',
              str(tmp_path / 'v.json'))
  assert proc.returncode == 0, proc.stderr[-3000:]
  counts = {}
  for name, args in STFT_VARIANTS.items():
    proc = _cli(*common, *args, '--output_dir', str(tmp_path / name))
    assert proc.returncode == 0, proc.stderr[-3000:]
    _assert_same_dataset(tmp_path / 'out' / name, tmp_path / name)
    counts[name] = json.loads(
        (tmp_path / name / 'metadata.json').read_text())['counts']
  # Each variant rejects what its own options reject, and only that.
  assert counts['sig'] == counts['small']
  if unit == 'window':
    assert counts['big'] == counts['sig']
  else:
    assert counts['big']['examples'] < counts['sig']['examples']
    rejects = (tmp_path / 'out' / 'big' / 'rejects.jsonl').read_text()
    assert '--n_fft=4096' in rejects
    assert '--n_fft' not in (tmp_path / 'out' / 'sig' /
                             'rejects.jsonl').read_text()
  lines = verify.verify(str(tmp_path / 'out')).splitlines()
  assert all(': OK, ' in line for line in lines[:-1]), lines
  assert ('in groups (big; sig; small)' in lines[-1]) == (unit != 'window')
  # The plot shows one example every variant holds: big's first.
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.inspect_dataset', str(tmp_path / 'out'),
       '--plot', str(tmp_path / 'sweep.png')], cwd=ROOT, capture_output=True,
      text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'under each of 3 variants' in proc.stdout


def test_verify_checks_every_variant_of_a_sweep(sweep):
  lines = verify.verify(str(sweep / 'out')).splitlines()
  assert [line.split(':')[0] for line in lines] == [
      str(sweep / 'out' / name) for name in sorted(VARIANT_FLAGS)] + [
          str(sweep / 'out')]
  assert all(': OK, ' in line for line in lines[:-1])
  assert 'the same windows of the same recordings' in lines[-1]


def test_verify_finds_variants_that_hold_other_recordings(sweep, tmp_path):
  shutil.copytree(sweep / 'out', tmp_path / 'out')
  fewer = tmp_path / 'fewer'
  shutil.copytree(sweep / 'in', fewer)
  os.remove(next(fewer.glob('owl/*.wav')))
  # A variant replaced by a dataset of fewer recordings (a run cannot
  # write into a sweep's variant: it is copied in).
  proc = _cli('--input_dir', str(fewer), '--output_dir',
              str(tmp_path / 'alone'), *COMMON, *VARIANT_FLAGS['mfcc20'])
  assert proc.returncode == 0, proc.stderr[-3000:]
  shutil.rmtree(tmp_path / 'out' / 'mfcc20')
  shutil.copytree(tmp_path / 'alone', tmp_path / 'out' / 'mfcc20')
  assert 'OK' in verify.verify(str(tmp_path / 'out' / 'mfcc20'))
  with pytest.raises(verify.VerifyError, match="variants 'mfcc20' and "
                     "'nfft256' do not hold the same windows"):
    verify.verify(str(tmp_path / 'out'))


def test_append_gives_every_variant_the_new_part(tmp_path):
  names = [('owl', 'wren')[i % 2] + f'/{i}.wav' for i in range(8)]
  for i, name in enumerate(names):
    H.write_wav(str(tmp_path / 'all' / name),
                H.noise(5000 + 1700 * i, 1 + i % 2, seed=i))
  for name in names[:5]:
    os.makedirs(os.path.dirname(tmp_path / 'in' / name), exist_ok=True)
    shutil.copy(tmp_path / 'all' / name, tmp_path / 'in' / name)
  common = ['--input_dir', str(tmp_path / 'in'), '--win_len', '2048',
            '--hop_len', '1024', '--splits', 'train=0.6,test=0.4',
            '--max_shard_bytes', '60000', '--quiet']
  variants = {'fine': ['--n_fft', '256', '--fft_hop', '64'],
              'coarse': ['--n_fft', '1024', '--fft_hop', '512']}
  (tmp_path / 'v.json').write_text(json.dumps({
      name: {f[2:]: v for f, v in zip(args[::2], args[1::2])}
      for name, args in variants.items()}))
  sweep_args = [*common, '--output_dir', str(tmp_path / 'out'), '--variants',
                str(tmp_path / 'v.json')]
  for name, args in variants.items():
    proc = _cli(*common, '--output_dir', str(tmp_path / name), *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
  proc = _cli(*sweep_args)
  assert proc.returncode == 0, proc.stderr[-3000:]
  for name in names[5:]:
    shutil.copy(tmp_path / 'all' / name, tmp_path / 'in' / name)
  for name, args in variants.items():
    proc = _cli(*common, '--output_dir', str(tmp_path / name), *args,
                '--append')
    assert proc.returncode == 0, proc.stderr[-3000:]
  proc = _cli(*sweep_args, '--append')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stderr.count('appended 3 new recordings') == 2, proc.stderr
  for name in variants:
    ours, alone = tmp_path / 'out' / name, tmp_path / name
    assert (ours / 'parts.json').read_text() == (
        alone / 'parts.json').read_text()
    assert _files(ours / 'part-00001') == _files(alone / 'part-00001')
    assert _files(ours / 'part-00001')
    meta, meta_alone = (_metadata_without_run(ours / 'part-00001'),
                        _metadata_without_run(alone / 'part-00001'))
    _assert_statistics_close(_split_statistics(meta),
                             _split_statistics(meta_alone))
    assert meta['splits'] == meta_alone['splits']
  lines = verify.verify(str(tmp_path / 'out')).splitlines()
  assert 'of 2 parts' in lines[0] and 'same windows' in lines[-1]
  assert len(numpy_reader.numpy_dataset(str(tmp_path / 'out'), 'train',
                                        variant='fine')) == len(
      numpy_reader.numpy_dataset(str(tmp_path / 'fine'), 'train'))
  proc = _cli(*sweep_args, '--append')  # nothing new
  assert proc.returncode == 0 and proc.stderr.count('nothing to append') == 2
  (tmp_path / 'other.json').write_text('{"fine": {"n_fft": 256, '
                                       '"fft_hop": 64}}')
  proc = _cli(*common, '--output_dir', str(tmp_path / 'out'), '--variants',
              str(tmp_path / 'other.json'), '--append')
  assert proc.returncode == 2 and "holds ['coarse', 'fine']" in proc.stderr


def test_readers_take_the_variant(sweep):
  out = str(sweep / 'out')
  by_name = [e['filepath'] for e in numpy_reader.numpy_dataset(
      out, 'train', variant='mfcc20', features=['filepath'])]
  by_folder = [e['filepath'] for e in numpy_reader.numpy_dataset(
      os.path.join(out, 'mfcc20'), 'train', features=['filepath'])]
  assert by_name == by_folder and by_name
  element = next(iter(replay.replay_dataset(out, 'train', variant='mfcc20')))
  assert element['mfcc'].shape[-1] == 20 and element['lpc'].shape[-1] == 8
  first = next(iter(numpy_reader.numpy_dataset(out, 'train',
                                               variant='mfcc20')))
  assert np.array_equal(first['mfcc'].shape, element['mfcc'].shape)
  with pytest.raises(DatasetError, match='not a variant name'):
    numpy_reader.numpy_dataset(out, 'train', variant='../alone-mfcc20')


def test_inspect_compares_the_variants(sweep):
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.inspect_dataset',
       str(sweep / 'out')], cwd=ROOT, capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr
  lines = proc.stdout.splitlines()
  assert 'a sweep of 3 variants' in lines[0]
  header = lines[1].split()
  assert header[:3] == ['variant', 'features', 'fft_hop']
  rows = {line.split()[0]: line for line in lines[2:]}
  assert 'mfcc[' in rows['mfcc20'] and 'lpc[' in rows['mfcc20']
  assert 'spectrogram[' in rows['nfft256']


def test_plot_draws_the_same_example_under_every_variant(sweep, tmp_path):
  from PIL import Image
  png = tmp_path / 'sweep.png'
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.inspect_dataset', str(sweep / 'out'),
       '--plot', str(png)], cwd=ROOT, capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr
  assert 'under each of 3 variants' in proc.stdout
  image = np.asarray(Image.open(png).convert('RGB'))
  # A row per variant; as many columns as the variant with most features.
  assert image.shape == (300 * 3, 500 * 3, 3)
  firsts = {name: next(iter(numpy_reader.numpy_dataset(
      str(sweep / 'out'), 'train', variant=name,
      features=['filepath', 'win_start_idx']))) for name in VARIANT_FLAGS}
  assert len({(str(e['filepath']), int(e['win_start_idx']))
              for e in firsts.values()}) == 1


def test_a_second_sweep_needs_overwrite(sweep):
  args = ['--input_dir', str(sweep / 'in'), '--output_dir',
          str(sweep / 'out'), *COMMON, '--variants', str(sweep / 'sweep.toml')]
  proc = _cli(*args)
  assert proc.returncode == 2 and 'pass --overwrite' in proc.stderr


@pytest.mark.parametrize('text,message', [
    ('[a]\nwin_len = 4096\n', "variant 'a': --win_len=4096: the windows are "
     'common to all variants'),
    ('[a]\nsplits = "train=1"\n', "variant 'a': --splits='train=1': only "
     'feature options may differ'),
    ('[a]\nn_fftt = 256\n', "variant 'a': --n_fftt=256: no such option"),
    ('["../a"]\nn_fft = 256\n', "variant name '../a'"),
    ('["variants.json"]\nn_fft = 256\n', "variant name 'variants.json'"),
    ('[a]\nfeatures = "mfcc"\nn_mfcc = 80\n', "variant 'a': --n_mfcc=80: "
     'must not exceed --n_mels=64'),
    ('[a]\nn_fft = "x"\n', "variant 'a': --n_fft='x': is not a number"),
    ('[a\n', 'is not valid'),
])
def test_bad_variants_are_refused_before_anything_runs(tmp_path, text,
                                                       message):
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(8192))
  (tmp_path / 'v.toml').write_text(text)
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir',
              str(tmp_path / 'out'), '--variants', str(tmp_path / 'v.toml'))
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert '--variants=' in proc.stderr and message in proc.stderr, \
      proc.stderr[-2000:]
  assert not (tmp_path / 'out').exists()


def test_a_sweep_and_a_dataset_never_share_a_folder(sweep, tmp_path):
  """A dataset is not written into a sweep's folder, nor a sweep into a
  dataset's, with --overwrite or without."""
  for extra in ([], ['--overwrite']):
    proc = _cli('--input_dir', str(sweep / 'in'), '--output_dir',
                str(sweep / 'out'), *COMMON, *extra)
    assert proc.returncode == 2 and 'holds a sweep of variants' in \
        proc.stderr, proc.stderr[-2000:]
  single = sweep / 'alone-nfft256'  # a dataset (written by another test)
  if not single.exists():
    proc = _cli('--input_dir', str(sweep / 'in'), '--output_dir',
                str(single), *COMMON)
    assert proc.returncode == 0, proc.stderr[-2000:]
  for extra in ([], ['--overwrite']):
    proc = _cli('--input_dir', str(sweep / 'in'), '--output_dir',
                str(single), *COMMON, '--variants',
                str(sweep / 'sweep.toml'), *extra)
    assert proc.returncode == 2 and 'holds a dataset' in proc.stderr, \
        proc.stderr[-2000:]
  assert 'OK' in verify.verify(str(single))


def test_a_variant_folder_is_not_written_on_its_own(sweep):
  """A run whose --output_dir is a variant the sweep above lists is
  refused, with --append, --overwrite or neither: it would leave the sweep
  inconsistent (its variants hold other windows, or other options than
  variants.json says)."""
  variant = sweep / 'out' / 'nfft256'
  before = {n: (variant / n).read_bytes() for n in sorted(os.listdir(variant))}
  for extra in ([], ['--overwrite'], ['--append']):
    proc = _cli('--input_dir', str(sweep / 'in'), '--output_dir',
                f'{variant}/', *COMMON, *VARIANT_FLAGS['nfft256'], *extra)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert (f"--output_dir='{variant}/': is variant 'nfft256' of the sweep "
            f"in {sweep / 'out'}") in proc.stderr, proc.stderr[-2000:]
  assert {n: (variant / n).read_bytes()
          for n in sorted(os.listdir(variant))} == before
  assert 'the same windows of the same recordings' in verify.verify(
      str(sweep / 'out')).splitlines()[-1]


def test_repeated_json_keys_and_impossible_frequencies(tmp_path):
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(8192))
  (tmp_path / 'v.json').write_text('{"a": {"n_fft": 512, "n_fft": 256}}')
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir',
              str(tmp_path / 'out'), '--variants', str(tmp_path / 'v.json'))
  assert proc.returncode == 2 and "['n_fft'] given twice" in proc.stderr
  (tmp_path / 'v.json').write_text('{"a": {"fmax": "nan"}}')
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir',
              str(tmp_path / 'out'), '--variants', str(tmp_path / 'v.json'))
  assert proc.returncode == 2 and '--fmax=nan' in proc.stderr
  # Above the Nyquist frequency of the corpus's 16 kHz: known only once
  # the data is seen, said in one line naming the variant's folder.
  (tmp_path / 'v.json').write_text(
      '{"a": {"features": "log_mel", "fmax": 9000}}')
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir',
              str(tmp_path / 'out'), '--variants', str(tmp_path / 'v.json'),
              '--win_len', '4096')
  assert proc.returncode == 2
  assert proc.stderr.splitlines() == [
      f"error: --fmax=9000.0: exceeds half the sample rate of the dataset in "
      f"{tmp_path / 'out' / 'a'} (16000 Hz); lower it, or give --sample_rate",
      f"nothing of this run is kept in {tmp_path / 'out'}; fix the option, "
      'then rerun'], proc.stderr[-3000:]
  assert not (tmp_path / 'out').exists()


def test_overwrite_replaces_the_whole_sweep(tmp_path):
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(8192))
  args = ['--input_dir', str(tmp_path / 'in'), '--output_dir',
          str(tmp_path / 'out'), '--win_len', '2048', '--quiet']
  (tmp_path / 'v.json').write_text('{"old": {"n_fft": 256}, "kept": {}}')
  assert _cli(*args, '--variants', str(tmp_path / 'v.json')).returncode == 0
  (tmp_path / 'v.json').write_text('{"kept": {"n_fft": 1024}}')
  proc = _cli(*args, '--variants', str(tmp_path / 'v.json'), '--overwrite')
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert sorted(os.listdir(tmp_path / 'out')) == ['kept', 'variants.json']
  with pytest.raises(DatasetError, match="variant 'old' is not in"):
    numpy_reader.numpy_dataset(str(tmp_path / 'out'), 'train', variant='old')
  os.remove(tmp_path / 'out' / 'variants.json')  # as an unfinished sweep
  with pytest.raises(DatasetError, match='holds no complete sweep'):
    replay.replay_dataset(str(tmp_path / 'out'), 'train', variant='kept')


@pytest.mark.parametrize('folder', ['../victim', 'kept', '/tmp'])
def test_a_sweep_index_that_leads_elsewhere_is_refused(tmp_path, folder):
  """A variant's folder in variants.json that is not its own name (an
  edited or forged index) is never followed: --overwrite deletes
  nothing outside the sweep, verify and inspect refuse the index."""
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(8192))
  (tmp_path / 'victim').mkdir()
  (tmp_path / 'victim' / 'keep.txt').write_text('precious')
  args = ['--input_dir', str(tmp_path / 'in'), '--output_dir',
          str(tmp_path / 'out'), '--win_len', '2048', '--quiet']
  (tmp_path / 'v.json').write_text('{"old": {"n_fft": 256}, "kept": {}}')
  assert _cli(*args, '--variants', str(tmp_path / 'v.json')).returncode == 0
  index = tmp_path / 'out' / 'variants.json'
  sweep = json.loads(index.read_text())
  sweep['variants']['old']['folder'] = folder
  index.write_text(json.dumps(sweep))
  (tmp_path / 'v.json').write_text('{"kept": {"n_fft": 1024}}')
  proc = _cli(*args, '--variants', str(tmp_path / 'v.json'), '--overwrite')
  assert proc.returncode == 2
  assert (f"variant 'old' in folder {folder!r}: a variant is named"
          in proc.stderr)
  assert (tmp_path / 'victim' / 'keep.txt').read_text() == 'precious'
  assert sorted(os.listdir(tmp_path / 'out')) == ['kept', 'old',
                                                  'variants.json']
  with pytest.raises(verify.VerifyError, match='refusing to follow it'):
    verify.verify(str(tmp_path / 'out'))
  proc = subprocess.run([sys.executable, '-m', 'pipeline.inspect_dataset',
                         str(tmp_path / 'out')], cwd=ROOT,
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 1 and 'refusing to follow it' in proc.stderr


def test_options_that_work_on_one_dataset_are_refused(tmp_path):
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(8192))
  (tmp_path / 'v.json').write_text('{"a": {"n_fft": 256}}')
  for flag in ('--tfds_layout',):
    proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir',
                str(tmp_path / 'out'), '--variants', str(tmp_path / 'v.json'),
                flag)
    assert proc.returncode == 2 and flag in proc.stderr, proc.stderr[-2000:]


# A sweep through Beam's sink: windows; and whole recordings, where the
# fine variant's STFT of 8192 cannot frame the two shortest (6000 and
# 7500 frames), which the other keeps.
SINK_SWEEPS = {
    'window': (['--win_len', '2048', '--hop_len', '1024'],
               {'fine': ['--n_fft', '256', '--fft_hop', '64'],
                'mel': ['--features', 'log_mel']}),
    'file': (['--example_unit', 'file'],
             {'fine': ['--n_fft', '8192', '--fft_hop', '2048'],
              'mel': ['--features', 'signal']}),
}


@pytest.mark.parametrize('unit', sorted(SINK_SWEEPS))
def test_a_sweep_through_beams_sink_holds_what_separate_runs_hold(
    sweep, tmp_path, unit):
  flags, variants = SINK_SWEEPS[unit]
  common = [*flags, '--quiet', '--sink', 'write_to_tfrecord']
  (tmp_path / 'v.json').write_text(json.dumps({
      name: {f[2:]: v for f, v in zip(args[::2], args[1::2])}
      for name, args in variants.items()}))
  proc = _cli('--input_dir', str(sweep / 'in'), '--output_dir',
              str(tmp_path / 'out'), *common, '--variants',
              str(tmp_path / 'v.json'))
  assert proc.returncode == 0, proc.stderr[-3000:]
  for name, args in variants.items():
    alone = tmp_path / f'alone-{name}'
    proc = _cli('--input_dir', str(sweep / 'in'), '--output_dir', str(alone),
                *common, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours = tmp_path / 'out' / name
    # Beam's sink chooses how records spread over its files: the same
    # records, each once.
    assert sorted(_records_of(ours)) == sorted(_records_of(alone))
    assert _records_of(ours)
    meta, meta_alone = (_metadata_without_run(ours),
                        _metadata_without_run(alone))
    for m in (meta, meta_alone):
      for entry in m['splits'].values():
        entry.pop('shards')
    assert meta == meta_alone, name
    for listing in ('rejects.jsonl', 'sources.jsonl'):
      assert (ours / listing).read_bytes() == (alone / listing).read_bytes()
  if unit == 'file':
    assert '--n_fft=8192' in (tmp_path / 'out' / 'fine' /
                              'rejects.jsonl').read_text()
    assert not (tmp_path / 'out' / 'mel' / 'rejects.jsonl').read_text()
    return
  # Each variant's records are in the order Beam's sink wrote them: verify
  # compares the sweep's windows, not their order.
  lines = verify.verify(str(tmp_path / 'out')).splitlines()
  assert [line.split(':')[0] for line in lines] == [
      str(tmp_path / 'out' / name) for name in ('fine', 'mel')] + [
          str(tmp_path / 'out')]
  assert lines[-1].endswith('the same windows of the same recordings, '
                            'split for split, each in its own order '
                            '(--sink write_to_tfrecord writes in no global '
                            'order)'), lines[-1]


def test_a_sweep_of_no_example_exits_1(tmp_path):
  """Clips shorter than a window: every variant completes, empty, each
  says so, and the sweep exits 1 as a run that wrote no example does."""
  for i in range(3):
    H.write_wav(str(tmp_path / 'in' / 'owl' / f'{i}.wav'),
                H.noise(600, seed=i))
  (tmp_path / 'v.json').write_text(json.dumps({
      'small': {'n_fft': 256, 'fft_hop': 128},
      'big': {'n_fft': 512, 'fft_hop': 256}}))
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir',
              str(tmp_path / 'out'), '--win_len', '1024', '--variants',
              str(tmp_path / 'v.json'), '--quiet')
  assert proc.returncode == 1, proc.stderr[-3000:]
  empty = sorted(line for line in proc.stderr.splitlines()
                 if 'EMPTY' in line)
  assert empty == [f'error: the dataset is EMPTY: no example was written to '
                   f'{tmp_path / "out" / name} (3 of 3 files rejected; '
                   f'reasons in {tmp_path / "out" / name}/rejects.jsonl)'
                   for name in ('big', 'small')]
  assert (tmp_path / 'out' / 'variants.json').exists()


def test_an_overwrite_removes_only_wavbeam_s_files_of_a_gone_variant(
    tmp_path):
  """A folder of the user's at a variant's path: the sweep writes its
  dataset beside the user's files, and an --overwrite by a sweep without
  that variant removes the dataset, not the folder with the user's
  files."""
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(8192))
  args = ['--input_dir', str(tmp_path / 'in'), '--output_dir',
          str(tmp_path / 'out'), '--win_len', '2048', '--quiet']
  (tmp_path / 'out' / 'kept').mkdir(parents=True)
  (tmp_path / 'out' / 'kept' / 'notes.txt').write_text('mine')
  (tmp_path / 'v.json').write_text('{"kept": {"n_fft": 256}, "gone": {}}')
  assert _cli(*args, '--variants', str(tmp_path / 'v.json')).returncode == 0
  (tmp_path / 'v2.json').write_text('{"other": {}}')
  proc = _cli(*args, '--variants', str(tmp_path / 'v2.json'), '--overwrite')
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert sorted(os.listdir(tmp_path / 'out')) == ['kept', 'other',
                                                  'variants.json']
  assert os.listdir(tmp_path / 'out' / 'kept') == ['notes.txt']


def test_a_refused_sweep_records_no_variant(tmp_path):
  """A variant's path taken by a file of the user's: refused before
  anything runs, and nothing left that would make a later --overwrite
  take that file for a stopped sweep's variant."""
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(8192))
  args = ['--input_dir', str(tmp_path / 'in'), '--output_dir',
          str(tmp_path / 'out'), '--win_len', '2048', '--quiet']
  (tmp_path / 'out').mkdir()
  (tmp_path / 'out' / 'taken').write_text('mine')
  (tmp_path / 'v.json').write_text('{"taken": {}, "b": {}}')
  proc = _cli(*args, '--variants', str(tmp_path / 'v.json'))
  assert proc.returncode == 2 and 'taken' in proc.stderr, proc.stderr
  assert sorted(os.listdir(tmp_path / 'out')) == ['taken']
  (tmp_path / 'v2.json').write_text('{"b": {}}')
  proc = _cli(*args, '--variants', str(tmp_path / 'v2.json'), '--overwrite')
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert (tmp_path / 'out' / 'taken').read_text() == 'mine'


def test_a_sweep_does_not_replace_a_stopped_run_of_one_dataset(tmp_path):
  """Its finished shards, which --resume would keep, are refused like
  any earlier run's: replaced only with --overwrite."""
  for i in range(3):
    H.write_wav(str(tmp_path / 'in' / 'a' / f'{i}.wav'), H.noise(8192,
                                                                 seed=i))
  out = tmp_path / 'out'
  args = ['--input_dir', str(tmp_path / 'in'), '--output_dir', str(out),
          '--win_len', '2048']
  code, log = H.DrivenRun('prepared', 'kill', *args, cwd=tmp_path).wait()
  assert code == -signal.SIGKILL, log[-2000:]
  def files():  # the lock's file is no run's data: a lock may remove it
    return sorted(str(p.relative_to(out)) for p in out.rglob('*')
                  if p.name != '.wavbeam-lock')

  before = files()
  assert before
  (tmp_path / 'v.json').write_text('{"a": {}, "b": {"n_fft": 256}}')
  proc = _cli(*args, '--quiet', '--variants', str(tmp_path / 'v.json'))
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert 'incomplete earlier run of one dataset' in proc.stderr
  assert files() == before
  proc = _cli(*args, '--quiet', '--variants', str(tmp_path / 'v.json'),
              '--overwrite')
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert sorted(os.listdir(out)) == ['a', 'b', 'variants.json']


def test_an_append_to_a_sweep_without_its_variants_says_how(sweep):
  proc = _cli('--input_dir', str(sweep / 'in'), '--output_dir',
              str(sweep / 'out'), *COMMON, '--append')
  assert proc.returncode == 2
  assert (f'{sweep / "out"} holds a sweep of variants (variants.json): '
          'append to every variant with --variants') in proc.stderr


def test_tfds_layout_with_variants_says_what_works_instead(tmp_path):
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(8192))
  (tmp_path / 'v.json').write_text('{"a": {}}')
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir',
              str(tmp_path / 'out'), '--variants', str(tmp_path / 'v.json'),
              '--tfds_layout')
  assert proc.returncode == 2
  assert 'tfds.builder_from_directory loads a variant' in proc.stderr
  assert not (tmp_path / 'out').exists()


def test_an_overwrite_with_another_dataset_name_removes_a_gone_variant(
    tmp_path):
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(8192))
  args = ['--input_dir', str(tmp_path / 'in'), '--output_dir',
          str(tmp_path / 'out'), '--win_len', '2048', '--quiet']
  (tmp_path / 'v.json').write_text('{"kept": {}, "gone": {"n_fft": 256}}')
  proc = _cli(*args, '--variants', str(tmp_path / 'v.json'),
              '--dataset_name', 'first')
  assert proc.returncode == 0, proc.stderr[-2000:]
  (tmp_path / 'v2.json').write_text('{"kept": {}}')
  proc = _cli(*args, '--variants', str(tmp_path / 'v2.json'),
              '--dataset_name', 'second', '--overwrite')
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert sorted(os.listdir(tmp_path / 'out')) == ['kept', 'variants.json']


def test_a_sweep_refused_by_a_variant_s_folder_keeps_the_stopped_one(
    tmp_path):
  """A rerun without --overwrite naming one variant more, refused where
  the stopped sweep's first variant holds its files: the stopped sweep
  still resumes with its own variants."""
  for i in range(3):
    H.write_wav(str(tmp_path / 'in' / 'a' / f'{i}.wav'),
                H.noise(8192, seed=i))
  args = ['--input_dir', str(tmp_path / 'in'), '--output_dir',
          str(tmp_path / 'out'), '--win_len', '2048']
  (tmp_path / 'v.json').write_text('{"a": {}, "b": {"n_fft": 256}}')
  code, log = H.DrivenRun('prepared', 'kill', *args, '--variants',
                          str(tmp_path / 'v.json'), cwd=tmp_path).wait()
  assert code == -signal.SIGKILL, log[-2000:]
  (tmp_path / 'more.json').write_text(
      '{"a": {}, "b": {"n_fft": 256}, "c": {"n_fft": 1024}}')
  proc = _cli(*args, '--quiet', '--variants', str(tmp_path / 'more.json'))
  assert proc.returncode == 2, proc.stderr[-2000:]
  proc = _cli(*args, '--quiet', '--resume', '--variants',
              str(tmp_path / 'v.json'))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert sorted(os.listdir(tmp_path / 'out')) == ['a', 'b', 'variants.json']


def test_variants_needing_as_many_samples_are_planned_together():
  """--example_unit file: a group per count of samples the features need;
  a Kaldi frame follows the data's rate, so without --sample_rate it is
  told by its option."""
  from pipeline.config import PipelineConfig

  def configs(**kw):
    base = dict(input_dir='in', output_dir='out', example_unit='file', **kw)
    return {
        'mel': PipelineConfig(features=('log_mel',), **base),
        'mel_whisper': PipelineConfig(
            features=('log_mel', 'whisper_log_mel'), **base),
        'mel_kaldi': PipelineConfig(features=('log_mel', 'kaldi_fbank'),
                                    **base),
        'kaldi_long': PipelineConfig(
            features=('log_mel', 'kaldi_fbank'), kaldi_frame_length=50.0,
            **base)}

  assert variants.planning_groups(configs()) == [
      ('kaldi_long',), ('mel', 'mel_whisper'), ('mel_kaldi',)]
  # At 16 kHz a Kaldi frame of 25 ms is 400 samples, under n_fft's 512;
  # one of 50 ms is 800.
  assert variants.planning_groups(configs(sample_rate=16000)) == [
      ('kaldi_long',), ('mel', 'mel_kaldi', 'mel_whisper')]


@pytest.mark.parametrize('unit', ['window', 'file'])
def test_a_sweep_has_the_same_steps_for_any_number_of_variants(
    sweep, tmp_path, unit):
  """Every step around the writing is one step for all the variants of a
  group: six variants build the graph two build, so a sweep's start-up
  and finishing do not grow with its variants. Under --example_unit file
  variants that keep other recordings are a group of their own, with
  steps of their own."""
  import apache_beam as beam
  from apache_beam.options.pipeline_options import PipelineOptions
  from pipeline import config as config_lib
  from pipeline import graph

  def steps(variants_text):
    (tmp_path / 'v.json').write_text(json.dumps(variants_text))
    windows = COMMON[:4] if unit == 'window' else []
    config, _ = config_lib.parse_known_args([
        '--input_dir', str(sweep / 'in'), '--output_dir',
        str(tmp_path / 'out'), *windows, '--example_unit', unit,
        '--variants', str(tmp_path / 'v.json')])
    # As a run builds it (pipeline.run: no type hints to check).
    p = beam.Pipeline(options=PipelineOptions(['--no_pipeline_type_check']))
    graph.build_sweep_pipeline(p, config, variants.configs(config))
    return sorted(t.unique_name for t in
                  p.to_runner_api().components.transforms.values())

  mels = {f'mel{n}': {'features': 'log_mel', 'n_mels': n}
          for n in (16, 24, 32, 40, 48, 56)}
  two = steps(dict(list(mels.items())[:2]))
  assert steps(mels) == two
  assert len([s for s in two if s.startswith('Finalize')]) == 1
  # A variant whose STFT needs more samples than some recordings hold.
  grouped = steps({**mels, 'long': {'features': 'log_mel', 'n_fft': 2048}})
  assert len([s for s in grouped if '/' not in s and
              s.startswith('Finalize')]) == (2 if unit == 'file' else 1)
