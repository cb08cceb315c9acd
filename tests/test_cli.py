"""`wavbeam COMMAND --help` names the command as typed: `usage: wavbeam
run ...`, through the function the installed `wavbeam` script calls
(pipeline.cli's command); `python -m pipeline.X` keeps its own name."""

import os
import subprocess
import sys

import pytest

from pipeline.commands import cli

pytestmark = pytest.mark.slow  # each test starts a process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What the console script pip writes for `wavbeam = pipeline.cli:command`
# does: argv[0] is the script, then the entry point is called.
WAVBEAM = ('import sys; sys.argv[0] = "wavbeam"; '
           'from pipeline.cli import command; sys.exit(command())')


def _wavbeam(*args):
  return subprocess.run([sys.executable, '-c', WAVBEAM, *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize('command', sorted(cli.COMMANDS))
def test_help_names_the_wavbeam_command(command):
  proc = _wavbeam(command, '--help')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.startswith(f'usage: wavbeam {command}'), proc.stdout
  assert 'python -m' not in proc.stdout, proc.stdout


@pytest.mark.parametrize('command, args, said', [
    ('run', ['--input_dir', 'in'], 'wavbeam run: error: the following '
     'arguments are required: --output_dir'),
    ('inspect', [], 'wavbeam inspect: error: the following arguments are '
     'required: path'),
    ('verify', [], 'wavbeam verify: error: the following arguments are '
     'required: output_dir'),
    ('demo', ['--frobnicate'], 'usage: wavbeam demo: no flags'),
])
def test_usage_errors_name_the_wavbeam_command(command, args, said):
  proc = _wavbeam(command, *args)
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert said in proc.stderr, proc.stderr
  assert 'python -m' not in proc.stderr, proc.stderr


# The name each command has under `python -m`, as the docs give it.
PYTHON_M = {'run': 'pipeline.run', 'inspect': 'pipeline.inspect_dataset',
            'verify': 'pipeline.verify', 'demo': 'pipeline.demo'}


@pytest.mark.parametrize('command', sorted(cli.COMMANDS))
def test_python_m_keeps_its_own_name(command):
  module = PYTHON_M[command]
  proc = subprocess.run([sys.executable, '-m', module, '--help'], cwd=ROOT,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.startswith(f'usage: python -m {module}'), proc.stdout
