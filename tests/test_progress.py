"""Progress display and --quiet: what a run prints while it works."""

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
  plan.update(files_excluded=1)  # --exclude: seen, neither planned nor rejected
  line = progress.status_line(plan, 0, 1.0, None, 1.0)
  assert '8/10 files planned (1 rejected, 1 excluded)' in line


def test_progress_follows_a_real_run(tmp_path, monkeypatch):
  """What the status line shows while a real run is on its last step
  (the plan it wrote read then, as the progress thread reads it), and the
  thread's own lines: no timing decides what the test sees."""
  from transforms.writing import finalize
  for i in range(8):
    H.write_wav(str(tmp_path / f'in/c/{i}.wav'), H.noise(16000 * 4, seed=i))
  config = H.make_config(tmp_path / 'in', tmp_path / 'out', win_len=2048,
                         max_examples_per_shard=20)
  seen_file = tmp_path / 'seen.txt'  # Beam runs a pickled copy of the step
  original = finalize.finalize_dataset

  def status_before(*args, **kwargs):
    plan = progress._read_plan(config.dataset_dir)  # pylint: disable=protected-access
    with open(seen_file, 'a') as f:
      f.write(progress.status_line(plan, 0, 1.0, None, 1.0) + '\n')
    return original(*args, **kwargs)
  monkeypatch.setattr(finalize, 'finalize_dataset', status_before)
  stream = io.StringIO()
  with progress.Progress(config.dataset_dir, stream=stream, interval=0.02):
    H.run_pipeline(config)
  seen = seen_file.read_text().splitlines()
  assert len(seen) == 1
  assert '8/8 files planned (0 rejected)' in seen[0]
  assert '/248 examples' in seen[0] and 'in 13 shards' in seen[0]
  lines = stream.getvalue().splitlines()
  assert all(line.startswith('wavbeam: ') for line in lines), lines


def _cli(*argv):
  return subprocess.run([sys.executable, '-m', 'pipeline.run', *argv],
                        cwd=ROOT, capture_output=True, text=True)


def test_quiet_prints_only_the_summary(tmp_path):
  H.write_wav(str(tmp_path / 'in/c/a.wav'), H.noise(8192))
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir',
              str(tmp_path / 'out'), '--win_len', '1024', '--quiet')
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout == ''
  assert proc.stderr.startswith('wavbeam: 8 examples in 1 shard ')
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
