"""End-to-end runs of the pipeline on generated WAV corpora."""

import datetime
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from pipeline.commands import console
from pipeline.readers import tf_dataset as replay
from pipeline.contract import naming
from pipeline.commands import run as run_lib
from pipeline.commands.console import plural
from tests import helpers as H

RATE = 16000
WIN = 2048


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
  """Two classes, several encodings and lengths, one file spanning chunks."""
  d = tmp_path_factory.mktemp('corpus')
  files = [
      ('bird/a.wav', H.noise(WIN * 5 + 100, seed=1), 'PCM_16', 'WAV'),
      ('bird/b.wav', H.noise(WIN * 3, 2, seed=2), 'PCM_24', 'WAV'),
      ('bird/c.wav', H.noise(WIN, seed=3), 'FLOAT', 'WAV'),   # one window
      ('dog/d.wav', H.noise(WIN * 2 + 7, 3, seed=4), 'PCM_32', 'WAVEX'),
      ('dog/e.wav', H.noise(WIN * 4, seed=5), 'DOUBLE', 'WAV'),
      ('dog/f.wav', H.noise(WIN * 3, seed=6), 'PCM_U8', 'WAV'),
  ]
  for name, data, subtype, fmt in files:
    H.write_wav(str(d / name), data, RATE, subtype, fmt)
  return d


def _paths(d):
  from transforms.inputs.audio_io import list_audio_files
  return list_audio_files(str(d))


def test_replay_is_bit_exact_against_independent_reference(corpus, tmp_path):
  config = H.make_config(corpus, tmp_path / 'out', win_len=WIN,
                         hop_len=WIN // 2,
                         features=('signal', 'spectrogram', 'log_mel', 'fft'))
  meta = H.run_pipeline(config)
  paths = _paths(corpus)
  got = H.assert_matches_reference(str(tmp_path / 'out'), config, paths,
                                   ['bird', 'dog'], RATE)
  assert meta['counts'] == {'examples': len(got), 'files_ok': 6,
                            'files_rejected': 0, 'files_seen': 6,
                            'files_excluded': 0, 'rejections': 0,
                            'notes': 0}
  assert meta['classes'] == ['bird', 'dog'] and meta['sample_rate'] == RATE
  schema = meta['schema']
  assert schema['signal'] == {'dtype': 'int32', 'shape': [WIN],
                              'encoding': 'raw_bytes'}
  assert schema['spectrogram']['shape'] == [(WIN - 512) // 256 + 1, 257]
  assert schema['log_mel']['shape'] == [(WIN - 512) // 256 + 1, 64]
  assert schema['fft']['shape'] == [WIN // 2 + 1]
  assert schema['target'] == {'dtype': 'int64', 'shape': [],
                              'encoding': 'int64_list'}


def test_mfcc_and_lpc_with_mel_band_limits(corpus, tmp_path):
  """The cepstral and linear-prediction features, with --fmin/--fmax,
  --n_mfcc and --lpc_order, against the reference; their schema and
  statistics."""
  config = H.make_config(corpus, tmp_path / 'out', win_len=WIN,
                         features=('log_mel', 'mfcc', 'lpc'), n_mels=40,
                         fmin=125.0, fmax=7000.0, n_mfcc=20, lpc_order=10)
  meta = H.run_pipeline(config)
  H.assert_matches_reference(str(tmp_path / 'out'), config, _paths(corpus),
                             ['bird', 'dog'], RATE)
  frames = (WIN - 512) // 256 + 1
  schema = meta['schema']
  assert schema['mfcc']['shape'] == [frames, 20]
  assert schema['lpc']['shape'] == [frames, 10]
  assert schema['mfcc']['dtype'] == schema['lpc']['dtype'] == 'float32'
  for name in ('mfcc', 'lpc'):
    moments = meta['splits']['train']['statistics'][name]
    assert moments['count'] == meta['counts']['examples'] * frames * (
        20 if name == 'mfcc' else 10)


def test_long_file_is_split_into_chunks_that_join_exactly(tmp_path,
                                                          monkeypatch):
  # Small chunks so one file becomes many work units, read in blocks.
  from transforms.planning import rules as plan
  monkeypatch.setattr(plan, 'CHUNK_SAMPLES', 2 * 4 * 384)  # 2 channels
  path = H.write_wav(str(tmp_path / 'in/x/long.wav'),
                     H.noise(512 * 40 + 300, 2, seed=9), RATE, 'PCM_24')
  config = H.make_config(tmp_path / 'in', tmp_path / 'out', win_len=512,
                         hop_len=384, pad=True, n_fft=256, fft_hop=128,
                         features=('signal', 'spectrogram'))
  meta = H.run_pipeline(config)
  got = H.assert_matches_reference(str(tmp_path / 'out'), config, [path],
                                   ['x'], RATE)
  assert len(got) == meta['counts']['examples'] == 54


def test_shard_lengths_are_exact(corpus, tmp_path):
  out = tmp_path / 'out'
  config = H.make_config(corpus, out, win_len=WIN, max_examples_per_shard=3,
                         features=('signal',))
  meta = H.run_pipeline(config)
  shards = meta['splits']['train']['shards']
  total = 0
  for shard in shards:
    path = str(out / shard['file'])
    records = sum(1 for _ in tf.data.TFRecordDataset(path))
    assert records == shard['num_examples'] <= 3
    assert os.path.getsize(path) == shard['num_bytes']
    assert shard['file'].startswith('wavbeam-train.tfrecord-')
    total += records
  assert total == meta['splits']['train']['num_examples'] == \
      meta['counts']['examples'] == 18
  n = len(shards)
  assert [s['file'] for s in shards] == [
      f'wavbeam-train.tfrecord-{i:05d}-of-{n:05d}' for i in range(n)]
  assert sorted(os.listdir(out)) == sorted(
      [s['file'] for s in shards] +
      [naming.index_name(s['file']) for s in shards] +  # the tfrecord package's
      ['metadata.json', 'rejects.jsonl', 'dataset_info.json', 'features.json',
       'target.labels.txt', 'schema.pbtxt', 'sources.jsonl'])
  ds = replay.replay_dataset(str(out), batch_size=4)
  assert ds.cardinality().numpy() == 5  # ceil(18 / 4): Keras sees the steps


def test_fixed_shard_count_and_gzip(corpus, tmp_path):
  out = tmp_path / 'out'
  config = H.make_config(corpus, out, win_len=WIN, num_shards=2,
                         compression='gzip', features=('signal',))
  meta = H.run_pipeline(config)
  shards = meta['splits']['train']['shards']
  assert len(shards) == 2 and meta['compression'] == 'gzip'
  for shard in shards:
    records = sum(1 for _ in tf.data.TFRecordDataset(
        str(out / shard['file']), compression_type='GZIP'))
    assert records == shard['num_examples']
  assert len(H.replayed(str(out))) == 18


@pytest.mark.parametrize('mode,names,expected', [
    ('suffix', ['x/1561965276.252_1561965582.106_24346_passenger.wav',
                'x/1_2_truck.wav', 'y/3_passenger.wav'],
     ['passenger', 'truck', 'passenger']),
    ('subdir', ['b/1.wav', 'a/2.wav', 'a/deep/3.wav'], ['b', 'a', 'deep']),
    ('none', ['a/1.wav', 'b/2.wav', 'c/3.wav'], ['', '', '']),
])
def test_label_modes(tmp_path, mode, names, expected):
  for i, name in enumerate(names):
    H.write_wav(str(tmp_path / 'in' / name), H.noise(1024, seed=i))
  config = H.make_config(tmp_path / 'in', tmp_path / 'out', win_len=1024,
                         label_from=mode, features=('signal',))
  meta = H.run_pipeline(config)
  classes = sorted(set(expected) - {''})
  assert meta['classes'] == classes and meta['num_classes'] == len(classes)
  by_path = {e['filepath'].decode(): e
             for e in H.replayed(str(tmp_path / 'out')).values()}
  for name, label in zip(names, expected):
    e = by_path[str(tmp_path / 'in' / name)]
    assert e['class'].decode() == label
    assert e['target'] == (classes.index(label) if label else -1)
  if mode == 'none':
    with pytest.raises(replay.DatasetError, match='label_from none'):
      replay.replay_dataset(str(tmp_path / 'out'), as_supervised=True)


def test_window_edge_cases(tmp_path):
  d = tmp_path / 'in'
  H.write_wav(str(d / 'k/exact.wav'), H.noise(1024, seed=1))
  H.write_wav(str(d / 'k/short.wav'), H.noise(1023, seed=2))
  H.write_wav(str(d / 'k/zero.wav'), np.zeros(0))
  H.write_wav(str(d / 'k/long.wav'), H.noise(1024 * 6 + 5, seed=3))
  # Drop the partial window: one sample short is too short.
  config = H.make_config(d, tmp_path / 'a', win_len=1024, features=('signal',))
  meta = H.run_pipeline(config)
  rejects = _rejects(tmp_path / 'a')
  assert rejects[str(d / 'k/short.wav')].startswith('too short: 1023 frames')
  assert rejects[str(d / 'k/zero.wav')].startswith('empty')
  assert meta['counts']['examples'] == 1 + 6
  # Pad: the short file gives one zero-padded window, long.wav a 7th.
  config = H.make_config(d, tmp_path / 'b', win_len=1024, pad=True,
                         max_windows_per_signal=5, features=('signal',))
  meta = H.run_pipeline(config)
  got = H.replayed(str(tmp_path / 'b'))
  short = [e for e in got.values() if e['filepath'].endswith(b'short.wav')]
  assert len(short) == 1 and short[0]['signal'][-1] == 0
  assert meta['counts']['examples'] == 1 + 1 + 5
  assert meta['counts']['files_rejected'] == 1  # zero.wav


def test_num_elems_takes_the_first_windows_in_file_order(corpus, tmp_path):
  config = H.make_config(corpus, tmp_path / 'out', win_len=WIN, num_elems=7,
                         features=('signal',))
  meta = H.run_pipeline(config)
  got = H.replayed(str(tmp_path / 'out'))
  assert meta['counts']['examples'] == len(got) == 7
  # a.wav (index 0) has 5 windows, b.wav (index 1) gives the other 2.
  assert sorted(got) == [(0, s * WIN) for s in range(5)] + [(1, 0), (1, WIN)]


def _rejects(out):
  with open(os.path.join(out, 'rejects.jsonl')) as f:
    return {r['path']: r['reason'] for r in map(json.loads, f)}


def test_bad_inputs_are_recorded_and_counts_add_up(tmp_path):
  d = tmp_path / 'in'
  H.write_wav(str(d / 'ok/good.wav'), H.noise(4096, seed=1))
  H.write_wav(str(d / 'ok/good2.wav'), H.noise(4096, seed=2))
  (d / 'bad').mkdir(parents=True)
  (d / 'bad/garbage.wav').write_bytes(b'this is not audio at all')
  (d / 'bad/empty.wav').write_bytes(b'')
  H.write_wav(str(d / 'bad/zero_frames.wav'), np.zeros(0))
  H.write_wav(str(d / 'bad/short.wav'), H.noise(100))
  H.write_wav(str(d / 'bad/rate.wav'), H.noise(4096), rate=22050)
  whole = H.write_wav(str(d / 'bad/truncated.wav'), H.noise(4096, seed=3))
  data = open(whole, 'rb').read()
  open(whole, 'wb').write(data[:len(data) - 1000])
  nan = H.noise(4096, seed=4)
  nan[3000] = np.nan
  H.write_wav(str(d / 'bad/nan.wav'), nan, subtype='FLOAT')
  (d / 'bad/notes.txt').write_text('not a wav, not listed')
  config = H.make_config(d, tmp_path / 'out', win_len=1024,
                         features=('signal',))
  meta = H.run_pipeline(config)
  rejects = _rejects(tmp_path / 'out')
  reasons = {os.path.basename(p): r.split(':')[0] for p, r in rejects.items()}
  assert reasons == {
      'garbage.wav': 'unreadable', 'empty.wav': 'empty file (0 bytes)',
      'zero_frames.wav': 'empty', 'short.wav': 'too short',
      'rate.wav': 'sample rate 22050 Hz differs from the dataset\'s 16000 Hz '
                  '(pass --sample_rate to resample instead)',
      'truncated.wav': 'truncated',
      'nan.wav': 'non-finite samples (NaN or Inf)'}
  counts = meta['counts']
  assert counts['files_seen'] == 9 == counts['files_ok'] + \
      counts['files_rejected']
  # nan.wav: the window holding the NaN is rejected, its 3 others written.
  assert counts['files_ok'] == 2 and counts['examples'] == 8 + 3
  with open(tmp_path / 'out/rejects.jsonl') as f:
    nan_record = [r for r in map(json.loads, f) if 'nan' in r['path']][0]
  assert nan_record['stage'] == 'read' and nan_record['frames'] == [2048, 3072]
  got = H.replayed(str(tmp_path / 'out'))
  nan_starts = sorted(s for (i, s), e in got.items()
                      if e['filepath'].endswith(b'nan.wav'))
  assert nan_starts == [0, 1024, 3072]


def test_resampling_to_a_given_rate(tmp_path):
  d = tmp_path / 'in'
  a = H.write_wav(str(d / 'x/a.wav'), H.noise(22050, seed=1), rate=22050)
  b = H.write_wav(str(d / 'x/b.wav'), H.noise(8000, seed=2), rate=8000)
  c = H.write_wav(str(d / 'x/c.wav'), H.noise(16000, seed=3), rate=16000)
  config = H.make_config(d, tmp_path / 'out', win_len=4096, sample_rate=16000,
                         features=('signal', 'spectrogram'))
  meta = H.run_pipeline(config)
  assert meta['sample_rate'] == 16000 and meta['counts']['files_rejected'] == 0
  H.assert_matches_reference(str(tmp_path / 'out'), config, [a, b, c], ['x'],
                             16000)


def _zero_crossings(windows, sample_rate):
  return np.count_nonzero(np.diff(np.signbit(windows), axis=1), axis=1)


def test_extra_user_feature(corpus, tmp_path):
  config = H.make_config(corpus, tmp_path / 'out', win_len=WIN,
                         features=('signal',))
  meta = H.run_pipeline(config, extra_features={'zcr': _zero_crossings})
  assert meta['schema']['zcr'] == {'dtype': 'int64', 'shape': [],
                                   'encoding': 'int64_list'}
  for e in H.replayed(str(tmp_path / 'out')).values():
    w = e['signal'].astype(np.float64) / 2**31
    assert e['zcr'] == np.count_nonzero(np.diff(np.signbit(w)))


def test_cli_multi_processing_workers(corpus, tmp_path):
  out = tmp_path / 'out'
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir', str(corpus),
       '--output_dir', str(out), '--win_len', str(WIN), '--hop_len', '1000',
       '--features', 'signal,log_mel', '--signal_dtype', 'int16',
       '--direct_num_workers=2', '--direct_running_mode=multi_processing'],
      capture_output=True, text=True, timeout=600,
      cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  assert proc.returncode == 0, proc.stderr[-3000:]
  meta = json.load(open(out / 'metadata.json'))
  assert (f'wavbeam: {meta["counts"]["examples"]} examples in 1 shard '
          in proc.stderr), proc.stderr
  config = H.make_config(corpus, out, win_len=WIN, hop_len=1000,
                         features=('signal', 'log_mel'), signal_dtype='int16')
  H.assert_matches_reference(str(out), config, _paths(corpus),
                             ['bird', 'dog'], RATE)


def test_beam_metrics_count_what_metadata_records(corpus, tmp_path):
  d = tmp_path / 'in'
  for name in ('bird/a.wav', 'dog/d.wav', 'dog/e.wav'):
    (d / name).parent.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes((corpus / name).read_bytes())
  (d / 'dog/broken.wav').write_bytes(b'RIFF')
  out = tmp_path / 'out'
  before = datetime.datetime.now(datetime.timezone.utc)
  result = run_lib.run(['--input_dir', str(d), '--output_dir', str(out),
                        '--win_len', str(WIN), '--features', 'signal'])
  after = datetime.datetime.now(datetime.timezone.utc)
  metrics = H.job_metrics(result)
  meta = replay.load_metadata(str(out))
  shards = meta['splits']['train']['shards']
  assert metrics['files_probed'] == meta['counts']['files_seen'] == 4
  assert metrics['files_rejected'] == meta['counts']['files_rejected'] == 1
  assert metrics['examples_written'] == meta['counts']['examples'] > 0
  assert metrics['shards_written'] == len(shards)
  assert metrics['bytes_written'] == sum(
      os.path.getsize(out / s['file']) for s in shards)
  # When the shards were written, on every runner (Beam metrics are not).
  written = meta['shards_written']
  first = datetime.datetime.fromisoformat(written['first_started'])
  last = datetime.datetime.fromisoformat(written['last_finished'])
  assert before - datetime.timedelta(milliseconds=1) <= first <= last <= after
  assert written['seconds'] == round((last - first).total_seconds(), 3) > 0
  line = console.summary(str(out), 1.0)
  examples = meta['counts']['examples']
  assert (f'{plural(examples, "example")} in '
          f'{plural(len(shards), "shard")}') in line
  assert f'shards written in {max(written["seconds"], 0.001):.2f} s' in line


@pytest.mark.parametrize('workers,sink', [(1, 'shards'), (2, 'shards'),
                                          (1, 'write_to_tfrecord')])
def test_shard_tasks_record_where_their_time_went(corpus, tmp_path, workers,
                                                  sink):
  out = tmp_path / 'out'
  run_lib.run(['--input_dir', str(corpus), '--output_dir', str(out),
               '--win_len', str(WIN), '--sink', sink,
               f'--direct_num_workers={workers}'])
  written = replay.load_metadata(str(out))['shards_written']
  keys = ['read_seconds', 'feature_seconds', 'encode_seconds']
  if sink == 'shards':
    keys.append('write_seconds')
  else:  # Beam's sink writes the files: not timed by the tasks
    assert 'write_seconds' not in written
  spent = [written[k] for k in keys]
  assert all(isinstance(s, float) and s >= 0 for s in spent)
  assert sum(spent) > 0
  # The tasks' summed time fits in the shard phase times the workers that
  # ran tasks side by side (rounding: 1 ms per timestamp, 0.5 ms a value).
  assert sum(spent) <= workers * written['seconds'] + 0.002 * workers + 0.003
