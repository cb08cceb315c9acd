"""lean_beam: the run command imports Beam without pandas and pyarrow, and
both stay importable for whatever asks for them later; a program that
imports wavbeam gets Beam whole."""

import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(code: str) -> str:
  done = subprocess.run(
      [sys.executable, '-c', textwrap.dedent(code)], capture_output=True,
      text=True, timeout=120, cwd=REPO,
      env={**os.environ, 'PYTHONPATH': REPO})
  assert done.returncode == 0, done.stderr
  return done.stdout.strip()


def test_the_run_command_imports_beam_without_dataframe_libraries():
  out = _python("""
      import sys
      from pipeline import cli
      cli.load('run')
      print(sorted(n for n in ('pandas', 'pyarrow') if n in sys.modules))
      import pandas, pyarrow
      print(int(pandas.DataFrame({'a': [1, 2]}).a.sum()),
            pyarrow.array([3, 4]).to_pylist())
      """)
  assert out.splitlines() == ['[]', '3 [3, 4]']


def _imported_by_command(argv, tmp_path):
  """Modules a command's process imported (python -X importtime)."""
  done = subprocess.run(
      [sys.executable, '-X', 'importtime', *argv, '--input_dir',
       str(tmp_path / 'none'), '--output_dir', str(tmp_path / 'out')],
      capture_output=True, text=True, timeout=120, cwd=REPO,
      env={**os.environ, 'PYTHONPATH': REPO})
  assert done.returncode == 2, done.stderr  # the input folder is missing
  assert 'does not exist' in done.stderr
  return {line.rsplit('|', 1)[1].strip() for line in done.stderr.splitlines()
          if line.startswith('import time:')}


@pytest.mark.parametrize('argv', [
    ['-m', 'pipeline.run'],
    ['-c', 'import sys; from pipeline.cli import command; '
           "sys.argv[1:1] = ['run']; command()"]])
def test_the_commands_never_import_dataframe_libraries(argv, tmp_path):
  imported = _imported_by_command(argv, tmp_path)
  assert 'apache_beam' in imported
  # importtime lists the hidden attempts too: a real import has parts.
  assert not [name for name in imported
              if name.startswith(('pandas.', 'pyarrow.'))]


def test_a_program_importing_wavbeam_keeps_beam_whole():
  out = _python("""
      import sys
      import pipeline.run
      print('pandas' in sys.modules, 'pyarrow' in sys.modules,
            'apache_beam.typehints.pandas_type_compatibility' in sys.modules)
      """)
  assert out == 'True True True'


def test_beam_runs_when_pandas_comes_later():
  out = _python("""
      from pipeline import lean_beam
      beam = lean_beam.import_beam()
      import pandas
      with beam.Pipeline(runner='FnApiRunner') as p:
        _ = (p | beam.Create([1, 2, 3])
             | beam.Map(lambda x: int(pandas.Series([x, x]).sum()))
             | beam.combiners.ToList()
             | beam.Map(lambda xs: print(sorted(xs))))
      """)
  assert out.splitlines()[-1] == '[2, 4, 6]'


def test_nothing_hidden_when_pandas_came_first():
  out = _python("""
      import sys
      import pandas
      from pipeline import lean_beam
      lean_beam.import_beam()
      print('apache_beam.typehints.pandas_type_compatibility' in sys.modules,
            'pyarrow' in sys.modules)
      """)
  assert out == 'True True'


@pytest.mark.parametrize('load', [
    'from pipeline import cli; cli.load("run")', 'import pipeline.run'])
def test_openblas_has_one_thread_when_numpy_loads(load):
  out = _python(f"""
      import os, sys
      os.environ.pop('OPENBLAS_NUM_THREADS', None)
      class Watch:
        def find_spec(self, name, path=None, target=None):
          if name == 'numpy':
            print(os.environ.get('OPENBLAS_NUM_THREADS'))
            sys.meta_path.remove(self)
      sys.meta_path.insert(0, Watch())
      {load}
      """)
  assert out == '1'
