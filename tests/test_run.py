"""pipeline/run, the CLI: its errors and exit codes, and the launchers'
flags."""

import os
import subprocess
import sys

import pytest

from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(*argv):
  return subprocess.run([sys.executable, '-m', 'pipeline.run', *argv],
                        cwd=ROOT, capture_output=True, text=True)


@pytest.fixture(scope='module')
def small_input(tmp_path_factory):
  d = tmp_path_factory.mktemp('cli')
  H.write_wav(str(d / 'in/c/a.wav'), H.noise(8192))
  done = d / 'done'
  assert _cli('--input_dir', str(d / 'in'), '--output_dir', str(done),
              '--win_len', '1024', '--quiet').returncode == 0
  return d


@pytest.mark.parametrize('argv,code,message', [
    (['--win_len', 'abc'], 2, "argument --win_len: invalid int value: 'abc'"),
    (['--win_len', '0'], 2, '--win_len=0: must be a positive integer'),
    (['--features', 'signal,chroma'], 2, "--features='signal,chroma': unknown"),
    (['--splits', 'train=0.5'], 2, "--splits='train=0.5': fractions must "
     'sum to 1'),
    (['--input_dir', '{d}/missing'], 2, "--input_dir='{d}/missing': does not "
     'exist'),
    (['--input_dir', '{d}/done'], 2, "--input_dir='{d}/done': holds no .wav "
     'files'),
    (['--output_dir', '{d}/done'], 2, "--output_dir='{d}/done': already holds "
     'a complete dataset'),
    (['--runner', 'Nope'], 2, "--runner='Nope': Unexpected pipeline runner"),
    (['--win_lenn', '5'], 2,
     'unrecognized: --win_lenn (did you mean --win_len?)'),
])
def test_cli_errors_name_the_option_and_exit_2(small_input, argv, code,
                                               message):
  d = str(small_input)
  base = {'--input_dir': f'{d}/in', '--output_dir': f'{d}/new'}
  argv = [a.format(d=d) for a in argv]
  for flag, value in base.items():
    if flag not in argv:
      argv += [flag, value]
  proc = _cli(*argv, '--win_len', '1024') if '--win_len' not in argv \
      else _cli(*argv)
  assert proc.returncode == code, proc.stderr[-1500:]
  assert message.format(d=d) in proc.stderr, proc.stderr[-1500:]
  assert not os.path.exists(f'{d}/new/metadata.json')
  # wavbeam's own lines only (it names an unknown flag itself).
  assert 'Discarding unparseable args' not in proc.stderr


def _unlabeled(d, kind):
  """Flat clips with transcripts and no class: a Common Voice TSV, a
  segment manifest, or the folder alone; the options that read it."""
  for i in range(3):
    H.write_wav(str(d / 'clips' / f'c{i}.wav'), H.noise(8000, seed=i))
  if kind == 'folder':
    return ['--win_len', '1024']
  if kind == 'common_voice':
    (d / 'train.tsv').write_text('path\tsentence\nc0.wav\thi\nc1.wav\tyo\n')
    (d / 'test.tsv').write_text('path\tsentence\nc2.wav\tsay "no"\n')
    return ['--manifest', f'train={d / "train.tsv"},test={d / "test.tsv"}',
            '--manifest_extra_columns', 'sentence', '--example_unit', 'file']
  (d / 'turns.csv').write_text('path,start,end,text\n' + ''.join(
      f'c{i}.wav,0,0.2,turn {i}\n' for i in range(3)))
  return ['--manifest', str(d / 'turns.csv'), '--manifest_start_column',
          'start', '--manifest_end_column', 'end', '--manifest_extra_columns',
          'text', '--example_unit', 'segment']


@pytest.mark.parametrize('kind', ['common_voice', 'segments', 'folder'])
def test_an_unlabeled_corpus_stops_before_the_run_naming_the_fix(tmp_path,
                                                                  kind):
  """Without --label_from none, --label_from subdir finds no class in any
  file: exit 2 before anything runs, with the options that fit, rather
  than a dataset of nothing."""
  options = _unlabeled(tmp_path, kind)
  proc = _cli('--input_dir', str(tmp_path / 'clips'), '--output_dir',
              str(tmp_path / 'out'), *options, '--quiet')
  assert proc.returncode == 2, proc.stderr[-1500:]
  assert ("error: --label_from='subdir': finds no class in any of the 3 "
          'files (e.g. c0.wav)') in proc.stderr, proc.stderr[-1500:]
  assert ('For an unlabeled corpus give --label_from none; with a manifest, '
          '--manifest_label_column COLUMN') in proc.stderr
  assert not (tmp_path / 'out').exists()
  proc = _cli('--input_dir', str(tmp_path / 'clips'), '--output_dir',
              str(tmp_path / 'out'), *options, '--label_from', 'none',
              '--quiet')
  assert proc.returncode == 0, proc.stderr[-1500:]


def test_a_run_prints_its_warnings_as_its_own_lines(small_input):
  d = str(small_input)
  proc = _cli('--input_dir', f'{d}/in', '--output_dir', f'{d}/gz',
              '--win_len', '1024', '--compression', 'gzip', '--quiet')
  assert proc.returncode == 0, proc.stderr[-1500:]
  lines = proc.stderr.splitlines()
  assert ('wavbeam: WARNING: TFDS metadata not written: --compression=gzip: '
          'TFDS cannot read compressed shards') in lines
  assert all(line.startswith('wavbeam: ') for line in lines), lines


@pytest.mark.parametrize('launcher,args', [
    ('local', ['in', 'out']), ('dask', ['in', 'out', 'tcp://127.0.0.1:8786']),
    ('dataflow', ['gs://b/in', 'gs://b/out']),
    ('dataflow_gpu', ['gs://b/in', 'gs://b/out']), ('flink', ['in', 'out'])])
def test_every_launcher_passes_only_known_flags(launcher, args):
  """Unknown flags are errors now; each launcher's command must pass."""
  import shlex
  from pipeline import config as config_lib
  from pipeline.commands import run as run_lib
  env = dict(os.environ, PRINT_ONLY='1', PROJECT='p', BUCKET='b',
             FLINK_MASTER='localhost:8081', WORKERS='2',
             MODEL='gs://b/models/hubert-base')
  proc = subprocess.run([os.path.join(ROOT, 'launch', launcher), *args],
                        cwd=ROOT, env=env, capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr
  argv = shlex.split(proc.stdout.strip().splitlines()[-1])
  argv = argv[argv.index('pipeline.run') + 1:]
  _, beam_args = config_lib.parse_known_args(argv)
  run_lib.pipeline_options(beam_args)   # raises ConfigError on unknown flags
