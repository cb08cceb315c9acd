"""Progress display, --quiet, and the CLI's errors and exit codes."""

import io
import os
import subprocess
import sys

import pytest

from pipeline import progress
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_status_line_numbers():
  plan = {'files_seen': 10, 'files_planned': 8, 'examples': 200,
          'shards': 4, 'example_bytes': 1000}
  line = progress.status_line(plan, written=50_000, elapsed=12.0,
                              write_started=2.0, now=12.0, width=10)
  assert '8/10 files planned (2 rejected)' in line
  assert '~50/200 examples (25%) in 4 shards' in line
  assert '[##........]' in line
  # 0.05 MB in 10 s = 0.005 MB/s; 150 examples of 1 kB left -> 30 s.
  assert 'ETA 30 s' in line and 'elapsed 12 s' in line
  assert 'planning' in progress.status_line(None, 0, 3.0, None, 3.0)


def test_progress_follows_a_real_run(tmp_path):
  for i in range(8):
    H.write_wav(str(tmp_path / f'in/c/{i}.wav'), H.noise(16000 * 4, seed=i))
  config = H.make_config(tmp_path / 'in', tmp_path / 'out', win_len=2048,
                         max_examples_per_shard=20)
  stream = io.StringIO()
  with progress.Progress(config.dataset_dir, stream=stream, interval=0.02):
    H.run_pipeline(config)
  lines = stream.getvalue().splitlines()
  assert lines and all(line.startswith('wavbeam: ') for line in lines)
  planned = [line for line in lines if 'files planned' in line]
  assert planned, lines
  assert '8/8 files planned (0 rejected)' in planned[-1]
  assert '/248 examples' in planned[-1] and 'in 13 shards' in planned[-1]


def _cli(*argv):
  return subprocess.run([sys.executable, '-m', 'pipeline.run', *argv],
                        cwd=ROOT, capture_output=True, text=True)


def test_quiet_prints_only_the_summary(tmp_path):
  H.write_wav(str(tmp_path / 'in/c/a.wav'), H.noise(8192))
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir',
              str(tmp_path / 'out'), '--win_len', '1024', '--quiet')
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout == ''
  assert proc.stderr.startswith('wavbeam: 8 examples in 1 shards')
  assert len(proc.stderr.splitlines()) == 1, proc.stderr


@pytest.mark.parametrize('mode', ['multi_threading', 'multi_processing'])
def test_a_default_run_prints_only_its_own_lines(tmp_path, mode):
  """No Beam, gRPC or absl chatter: every line on stderr is wavbeam's
  (progress, summary), nothing on stdout; --verbose brings Beam's back."""
  for i in range(3):
    H.write_wav(str(tmp_path / f'in/c{i % 2}/{i}.wav'), H.noise(30000, seed=i))
  flags = ['--input_dir', str(tmp_path / 'in'), '--win_len', '1024',
           '--direct_num_workers', '2', '--direct_running_mode', mode]
  proc = _cli(*flags, '--output_dir', str(tmp_path / 'out'))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout == ''
  lines = proc.stderr.splitlines()
  assert lines and all(line.startswith('wavbeam: ') for line in lines), lines
  assert 'examples in' in lines[-1]
  loud = _cli(*flags, '--output_dir', str(tmp_path / 'loud'), '--verbose')
  assert loud.returncode == 0
  assert 'INFO:apache_beam' in loud.stderr


def test_demo_prints_nothing_on_stderr(tmp_path):
  """The demo imports TensorFlow: its start-up lines (and the cuInit
  error on machines without a GPU) are held back."""
  proc = subprocess.run([sys.executable, '-m', 'pipeline.demo'], cwd=tmp_path,
                        capture_output=True, text=True, timeout=600,
                        env=dict(os.environ, PYTHONPATH=ROOT))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stderr == ''
  assert '== one replayed element' in proc.stdout


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
    (['--features', 'signal,mfcc'], 2, "--features='signal,mfcc': unknown"),
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


def test_readme_lists_every_option_as_help_does():
  from pipeline import config as config_lib
  with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
    readme = f.read()
  assert config_lib.options_markdown() in readme
  assert '`--quiet`' in readme


@pytest.mark.parametrize('launcher,args', [
    ('local', ['in', 'out']), ('dask', ['in', 'out', 'tcp://127.0.0.1:8786']),
    ('dataflow', ['gs://b/in', 'gs://b/out']), ('flink', ['in', 'out'])])
def test_every_launcher_passes_only_known_flags(launcher, args):
  """Unknown flags are errors now; each launcher's command must pass."""
  import shlex
  from pipeline import config as config_lib
  from pipeline import run as run_lib
  env = dict(os.environ, PRINT_ONLY='1', PROJECT='p', BUCKET='b',
             FLINK_MASTER='localhost:8081', WORKERS='2')
  proc = subprocess.run([os.path.join(ROOT, 'launch', launcher), *args],
                        cwd=ROOT, env=env, capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr
  argv = shlex.split(proc.stdout.strip().splitlines()[-1])
  argv = argv[argv.index('pipeline.run') + 1:]
  _, beam_args = config_lib.parse_known_args(argv)
  run_lib.pipeline_options(beam_args)   # raises ConfigError on unknown flags
