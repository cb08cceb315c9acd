"""lean_beam: the run command imports Beam without pandas and pyarrow, and
both stay importable for whatever asks for them later."""

import os
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(code: str) -> str:
  done = subprocess.run(
      [sys.executable, '-c', textwrap.dedent(code)], capture_output=True,
      text=True, timeout=120, cwd=REPO,
      env={**os.environ, 'PYTHONPATH': REPO})
  assert done.returncode == 0, done.stderr
  return done.stdout.strip()


def test_run_module_imports_beam_without_dataframe_libraries():
  out = _python("""
      import sys
      import pipeline.run
      print(sorted(n for n in ('pandas', 'pyarrow') if n in sys.modules))
      import pandas, pyarrow
      print(int(pandas.DataFrame({'a': [1, 2]}).a.sum()),
            pyarrow.array([3, 4]).to_pylist())
      """)
  assert out.splitlines() == ['[]', '3 [3, 4]']


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
