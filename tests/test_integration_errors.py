"""Invalid options fail before the pipeline starts; readers fail clearly."""

import json
import os
import re
import subprocess
import sys

import pytest

from pipeline import config as config_lib
from pipeline.readers import tf_dataset as replay
from pipeline.commands import run as run_lib
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize('flags,message', [
    (['--win_len', '0'], '--win_len=0: must be a positive integer'),
    (['--hop_len', '-5'], '--hop_len=-5: must be a positive integer'),
    (['--win_len', '256'], '--n_fft=512: must not exceed --win_len=256'),
    (['--features', 'signal,chroma'], "--features='signal,chroma': unknown"),
    (['--features', ''], "--features='': name at least one feature"),
    (['--num_shards', '2', '--max_examples_per_shard', '5'],
     '--num_shards=2: give either'),
    (['--dataset_name', 'a/b'], "--dataset_name='a/b'"),
    (['--win_len', '99999999999'],
     '--win_len=99999999999: must be at most 4194304'),
    (['--sample_rate', '160000000'], '--sample_rate=160000000: must be at'),
    (['--num_shards', '99999999'], '--num_shards=99999999: must be at most'),
    (['--features', 'log_mel', '--n_mels', '300'],
     '--n_mels=300: must not exceed the 257 frequency bins'),
    (['--direct_num_workers=-3'], '--direct_num_workers=-3: must be in'),
    (['--splits', 'train=0.3000001,test=0.7'],
     "--splits='train=0.3000001,test=0.7': fractions must sum to 1"),
    (['--features', 'log_mel', '--sample_rate', '16000', '--fmin', '8000'],
     '--fmin=8000.0: must be below half of --sample_rate=16000'),
])
def test_invalid_options_name_option_and_value(tmp_path, flags, message):
  argv = ['--input_dir', str(tmp_path), '--output_dir', str(tmp_path / 'o')]
  with pytest.raises(config_lib.ConfigError) as e:
    run_lib.run(argv + flags)
  assert message in str(e.value)


def test_input_dir_problems_fail_before_running(tmp_path):
  out = str(tmp_path / 'out')
  with pytest.raises(config_lib.ConfigError, match='does not exist'):
    run_lib.run(['--input_dir', str(tmp_path / 'missing'), '--output_dir', out])
  (tmp_path / 'empty').mkdir()
  with pytest.raises(config_lib.ConfigError, match='holds no .wav files'):
    run_lib.run(['--input_dir', str(tmp_path / 'empty'), '--output_dir', out])
  (tmp_path / 'txt').mkdir()
  (tmp_path / 'txt/a.txt').write_text('x')
  with pytest.raises(config_lib.ConfigError, match='holds no .wav files'):
    run_lib.run(['--input_dir', str(tmp_path / 'txt'), '--output_dir', out])
  assert not os.path.exists(out)


def test_cli_reports_errors_and_documents_every_option():
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir', '/nonexistent',
       '--output_dir', '/tmp/x'], capture_output=True, text=True, cwd=ROOT)
  assert proc.returncode == 2
  assert "--input_dir='/nonexistent': does not exist" in proc.stderr
  proc = subprocess.run([sys.executable, '-m', 'pipeline.run', '--help'],
                        capture_output=True, text=True, cwd=ROOT)
  assert proc.returncode == 0
  import dataclasses
  for field in dataclasses.fields(config_lib.PipelineConfig):
    # An internal field has no flag: feature_options is given as each
    # --feature_module option's own flag.
    if not field.metadata.get('internal'):
      assert '--' + field.name in proc.stdout
  assert '(default: 32768)' in proc.stdout
  # Each option's default is stated once (hop_len's help names win_len).
  blocks = re.split(r'\n  (?=--)', proc.stdout.split('options:')[1])
  assert len(blocks) > 30
  for block in blocks:
    assert block.count('(default:') <= 1, block
  assert '(default: None)' not in proc.stdout


@pytest.mark.parametrize('wrong, right', [
    # above the corpus's Nyquist frequency: its mel bands would be empty
    (['--features', 'log_mel', '--fmin', '8000'],
     ['--features', 'log_mel', '--fmin', '7000']),
    (['--features', 'log_mel', '--fmax', '9000'],
     ['--features', 'log_mel', '--fmax', '8000']),
    (['--exclude', 'nothing/*'], ['--exclude', 'b/*']),
    (['--features', 'kaldi_fbank', '--kaldi_high_freq', '9000'],
     ['--features', 'kaldi_fbank', '--kaldi_high_freq', '7000']),
])
def test_an_option_the_data_shows_wrong_keeps_nothing(tmp_path, wrong,
                                                      right):
  """Found only once the files are seen: one line naming the option and
  its value, exit 2 as for any bad option, and nothing of the run left, so
  that the corrected command runs without --overwrite."""
  for label in ('a', 'b'):
    H.write_wav(str(tmp_path / 'in' / label / 'x.wav'), H.noise(8192))
  out = tmp_path / 'out'
  out.mkdir()  # made beforehand: it stays, as it was
  args = [sys.executable, '-m', 'pipeline.run', '--input_dir',
          str(tmp_path / 'in'), '--output_dir', str(out), '--win_len',
          '4096', '--quiet']
  proc = subprocess.run(args + wrong, capture_output=True, text=True,
                        cwd=ROOT, timeout=300)
  assert proc.returncode == 2, proc.stderr[-3000:]
  lines = proc.stderr.splitlines()
  assert lines[0].startswith(f'error: --{wrong[-2][2:]}='), lines
  assert lines[1:] == [f'nothing of this run is kept in {out}; fix the '
                       'option, then rerun']
  assert os.listdir(out) == []
  proc = subprocess.run(args + right, capture_output=True, text=True,
                        cwd=ROOT, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert (out / 'metadata.json').exists()


def test_reader_imports_without_beam():
  code = ('import sys; import pipeline.replay; '
          'print(any(m.startswith("apache_beam") for m in sys.modules))')
  proc = subprocess.run([sys.executable, '-c', code], capture_output=True,
                        text=True, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.strip() == 'False'


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
  d = tmp_path_factory.mktemp('ds')
  for i in range(3):
    H.write_wav(str(d / f'in/c/{i}.wav'), H.noise(4096, seed=i))
  config = H.make_config(d / 'in', d / 'out', win_len=1024,
                         max_examples_per_shard=5, features=('signal',))
  H.run_pipeline(config)
  return config


def test_output_dir_with_a_dataset_is_refused_unless_overwrite(dataset):
  with pytest.raises(config_lib.ConfigError,
                     match='already holds a complete dataset'):
    H.run_pipeline(dataset)
  config = H.make_config(dataset.input_dir, dataset.output_dir, win_len=2048,
                         features=('signal',), overwrite=True)
  meta = H.run_pipeline(config)
  assert meta['counts']['examples'] == 6
  files = os.listdir(dataset.output_dir)
  assert len([f for f in files if '.tfrecord-' in f]) == len(
      meta['splits']['train']['shards'])  # old shards are gone
  assert meta['schema']['signal']['shape'] == [2048]


def test_reader_errors_name_the_problem(tmp_path):
  with pytest.raises(replay.DatasetError, match='no wavbeam dataset'):
    replay.replay_dataset(str(tmp_path))
  for i in range(2):
    H.write_wav(str(tmp_path / f'in/c/{i}.wav'), H.noise(4096, seed=i))
  out = tmp_path / 'out'
  config = H.make_config(tmp_path / 'in', out, win_len=1024,
                         max_examples_per_shard=3, features=('signal',))
  meta = H.run_pipeline(config)
  with pytest.raises(replay.DatasetError, match=r"unknown split 'test'.*train"):
    replay.replay_dataset(str(out), 'test')
  with pytest.raises(replay.DatasetError, match=r"unknown feature \['nope'\]"):
    replay.replay_dataset(str(out), features=['signal', 'nope'])
  only = replay.replay_dataset(str(out), features=['signal'])
  assert list(only.element_spec) == ['signal']
  shard = out / meta['splits']['train']['shards'][1]['file']
  data = shard.read_bytes()
  shard.write_bytes(data[:-10])
  with pytest.raises(replay.DatasetError, match=f'shard {shard} is'):
    replay.replay_dataset(str(out))
  shard.unlink()
  with pytest.raises(replay.DatasetError, match=f'shard {shard} listed'):
    replay.replay_dataset(str(out))
  os.remove(out / 'metadata.json')
  with pytest.raises(replay.DatasetError, match='did not finish'):
    replay.replay_dataset(str(out))
  (out / 'metadata.json').write_text(json.dumps({'format': 'other'}))
  with pytest.raises(replay.DatasetError, match='not a wavbeam metadata'):
    replay.load_metadata(str(out))


def test_a_dataset_at_another_rate(tmp_path):
  path = H.write_wav(str(tmp_path / 'in/c/a.wav'), H.noise(44100, 2, seed=1),
                     rate=44100, subtype='PCM_24', fmt='WAVEX')
  config = H.make_config(tmp_path / 'in', tmp_path / 'out', win_len=8192,
                         features=('signal', 'log_mel'), channels='first')
  meta = H.run_pipeline(config)
  assert meta['sample_rate'] == 44100
  H.assert_matches_reference(str(tmp_path / 'out'), config, [path], ['c'],
                             44100)


def test_local_runner_defaults():
  from apache_beam.options.pipeline_options import DirectOptions
  from apache_beam.options.pipeline_options import StandardOptions
  for args in ([], ['--runner=DirectRunner']):
    options = run_lib.pipeline_options(args)
    assert options.view_as(StandardOptions).runner == 'FnApiRunner'
    direct = options.view_as(DirectOptions)
    assert direct.direct_running_mode == (
        'multi_threading' if os.cpu_count() > 1 else 'in_memory')
    assert direct.direct_num_workers == os.cpu_count()
  options = run_lib.pipeline_options(['--direct_num_workers=1'])
  assert options.view_as(DirectOptions).direct_num_workers == 1
  assert options.view_as(DirectOptions).direct_running_mode == 'in_memory'
  options = run_lib.pipeline_options(['--runner=DataflowRunner'])
  assert options.view_as(StandardOptions).runner == 'DataflowRunner'
  assert options.view_as(DirectOptions).direct_num_workers == 1
  from apache_beam.options.pipeline_options import TypeOptions
  assert options.view_as(TypeOptions).pipeline_type_check is False


def test_every_error_has_one_root():
  """`except WavbeamError` catches every error wavbeam raises on purpose;
  the older bases still catch them too."""
  from pipeline import config
  from pipeline.commands import inspect as inspect_dataset
  from pipeline.readers import numpy_dataset as numpy_reader
  from pipeline.readers import tf_dataset as replay
  from pipeline.commands import verify
  from pipeline.contract import errors, metadata, parts, schema, tfrecord
  from transforms.inputs import file_reports
  from transforms.writing import finalize
  from transforms.runtime import output_lock as run_marker
  classes = [config.ConfigError, inspect_dataset.InspectError,
             inspect_dataset.NoFigures, metadata.MetadataError,
             numpy_reader.DatasetError, replay.DatasetError,
             schema.SchemaError, verify.VerifyError, finalize.IncompleteRun,
             run_marker.OutputChanged, tfrecord.CorruptRecord,
             file_reports.BadWav, parts.PartsError]
  assert all(issubclass(c, errors.WavbeamError) for c in classes)
  assert replay.DatasetError is numpy_reader.DatasetError
  for c in (config.ConfigError, metadata.MetadataError, schema.SchemaError,
            replay.DatasetError, tfrecord.CorruptRecord):
    assert issubclass(c, ValueError)
  assert issubclass(finalize.IncompleteRun, RuntimeError)
  assert issubclass(run_marker.OutputChanged, RuntimeError)


def _corpus(folder, files=4, samples=8000):
  for i in range(files):
    H.write_wav(str(folder / 'a' / f'{i}.wav'), H.noise(samples, seed=i))


@pytest.mark.parametrize('closed', [(1,), (2,), (0, 1, 2)])
def test_closed_standard_streams_change_nothing(tmp_path, closed):
  """`wavbeam run ... 2>&-` (or `>&-`, `<&-`): the same exit code and the
  same dataset as with the streams open."""
  _corpus(tmp_path / 'in')
  outs = []
  for name, shut in (('open', ()), ('closed', closed)):
    out = tmp_path / name
    proc = subprocess.run(
        [sys.executable, '-m', 'pipeline.run', '--input_dir',
         str(tmp_path / 'in'), '--output_dir', str(out), '--win_len', '1024'],
        cwd=ROOT, timeout=600, capture_output=not shut,
        preexec_fn=(lambda: [os.close(fd) for fd in shut]) if shut else None)
    assert proc.returncode == 0, name
    outs.append(out)
  assert (json.loads((outs[0] / 'metadata.json').read_text())['counts'] ==
          json.loads((outs[1] / 'metadata.json').read_text())['counts'])
  shard = 'wavbeam-train.tfrecord-00000-of-00001'
  assert (outs[0] / shard).read_bytes() == (outs[1] / shard).read_bytes()


@pytest.fixture()
def small_disk(tmp_path):
  """A 300 kB file system of its own (tmpfs), mounted for the test."""
  disk = tmp_path / 'disk'
  disk.mkdir()
  mounted = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=300k',
                            'tmpfs', str(disk)], capture_output=True)
  if mounted.returncode != 0:
    pytest.skip('mounting a tmpfs needs root: '
                f'{mounted.stderr.decode().strip()}')
  yield disk
  subprocess.run(['umount', '-l', str(disk)], check=True)


def test_a_full_disk_is_one_line_and_exit_1(tmp_path, small_disk):
  _corpus(tmp_path / 'in', files=20, samples=16000 * 4)
  out = small_disk / 'out'
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir',
       str(tmp_path / 'in'), '--output_dir', str(out), '--win_len', '1024'],
      cwd=ROOT, timeout=600, capture_output=True, text=True)
  assert proc.returncode == 1
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1, proc.stderr[-3000:]
  assert re.fullmatch(
      rf'error: the disk holding {re.escape(str(out))} is full \([0-9.]+ MB '
      r'free of [0-9.]+ MB\): .* holds no complete dataset \(no '
      r'metadata.json\); free some space, then rerun with --resume',
      lines[0]), lines[0]
