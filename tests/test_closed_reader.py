"""A reader that closes the pipe early (`wavbeam inspect OUT | head`):
inspect, verify, demo and `wavbeam` itself end there, quietly, killed by
SIGPIPE as `git log | head` is; no traceback, no 'Broken pipe'."""

import os
import signal
import subprocess
import sys

import pytest

from tests import helpers as H

pytestmark = pytest.mark.slow  # each test starts a process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# As `python -m pipeline.X` and as the installed `wavbeam X` (its entry
# point, pipeline.cli's command).
ENTRIES = {'module': lambda name: ['-m', f'pipeline.{name}'],
           'wavbeam': lambda name: ['-m', 'pipeline.cli', {
               'inspect_dataset': 'inspect'}.get(name, name)]}
NOISE = ('Traceback', 'Broken pipe', 'Errno', 'Exception ignored', 'error')


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
  """600 windows: `inspect --show 600` prints 170 KB, more than a pipe
  holds (64 KiB), so it writes to the closed pipe whenever the reader
  goes."""
  d = tmp_path_factory.mktemp('closed_reader')
  H.write_wav(str(d / 'in' / 'owl' / 'a.wav'), H.noise(512 * 600))
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir', str(d / 'in'),
       '--output_dir', str(d / 'out'), '--win_len', '512', '--features',
       'signal', '--quiet'], cwd=ROOT, capture_output=True, text=True,
      timeout=600)
  assert proc.returncode == 0, proc.stderr[-2000:]
  return d / 'out'


def _read_lines_then_close(args, lines: int):
  """Runs `args`, reads `lines` lines of its stdout, closes it: (exit
  status, stderr)."""
  proc = subprocess.Popen([sys.executable, *args], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
  try:
    for _ in range(lines):
      proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    return proc.wait(timeout=300), err
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()


def _assert_quiet(code, err):
  assert code == -signal.SIGPIPE, (code, err[-2000:])
  for word in NOISE:
    assert word not in err, err[-2000:]


@pytest.mark.parametrize('entry', sorted(ENTRIES))
def test_inspect_show_ends_quietly_when_its_reader_goes(dataset, entry):
  _assert_quiet(*_read_lines_then_close(
      [*ENTRIES[entry]('inspect_dataset'), str(dataset), '--show', '600'], 1))


@pytest.mark.parametrize('entry', sorted(ENTRIES))
def test_verify_ends_quietly_when_its_reader_goes(dataset, entry):
  # Its one line comes once every record is checked: the reader has gone
  # by then.
  _assert_quiet(*_read_lines_then_close(
      [*ENTRIES[entry]('verify'), str(dataset)], 0))


@pytest.mark.parametrize('args', [
    ['-m', 'pipeline.cli', '--help'],
    ['-m', 'pipeline.cli', 'inspect', '--help'],
    ['-m', 'pipeline.demo', '--help'],
    ['-m', 'pipeline.cli', 'demo', '--help'],
])
def test_help_ends_quietly_when_its_reader_goes(args):
  _assert_quiet(*_read_lines_then_close(args, 0))
