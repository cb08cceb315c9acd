"""`pip install .` gives a working tool with a `wavbeam` command."""

import os
import subprocess
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_installed_package_runs_its_command_outside_the_checkout(tmp_path):
  """A fresh virtualenv, the checkout installed into it (not editable,
  offline: the pinned dependencies come from this environment through a
  .pth file, as a wheel cache would provide them), then `wavbeam --help`,
  `wavbeam run --help` and `wavbeam demo` from a folder that is not the
  checkout."""
  venv = tmp_path / 'venv'
  subprocess.run([sys.executable, '-m', 'venv', str(venv)], check=True)
  bin_dir = venv / 'bin'
  child_site = subprocess.run(
      [str(bin_dir / 'python'), '-c',
       'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
      capture_output=True, text=True, check=True).stdout.strip()
  with open(os.path.join(child_site, 'pinned_deps.pth'), 'w') as f:
    f.write(sysconfig.get_paths()['purelib'] + '\n')
  install = subprocess.run(
      [str(bin_dir / 'python'), '-m', 'pip', 'install', '--quiet', '--no-deps',
       '--no-index', '--no-build-isolation', ROOT],
      capture_output=True, text=True, cwd=tmp_path)
  assert install.returncode == 0, install.stderr[-3000:]
  # Every install_requires pin is met by the pinned set.
  check = subprocess.run([str(bin_dir / 'python'), '-m', 'pip', 'check'],
                         capture_output=True, text=True)
  assert 'wavbeam' not in check.stdout, check.stdout
  work = tmp_path / 'work'
  work.mkdir()
  env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
  where = subprocess.run(
      [str(bin_dir / 'python'), '-c',
       'import pipeline; print(pipeline.__file__)'],
      capture_output=True, text=True, cwd=work, env=env)
  assert where.stdout.startswith(child_site), where.stdout + where.stderr
  wavbeam = str(bin_dir / 'wavbeam')
  top = subprocess.run([wavbeam, '--help'], capture_output=True, text=True,
                       cwd=work, env=env)
  assert top.returncode == 0 and 'run,inspect,verify,demo' in top.stdout
  flags = subprocess.run([wavbeam, 'run', '--help'], capture_output=True,
                         text=True, cwd=work, env=env)
  assert flags.returncode == 0 and '--input_dir' in flags.stdout
  bad = subprocess.run([wavbeam, 'frobnicate'], capture_output=True,
                       text=True, cwd=work, env=env)
  assert bad.returncode == 2 and 'unknown command' in bad.stderr
  demo = subprocess.run([wavbeam, 'demo'], capture_output=True, text=True,
                        cwd=work, env=env, timeout=600)
  assert demo.returncode == 0, demo.stderr[-3000:]
  assert demo.stderr == ''
  assert '== one replayed element' in demo.stdout
  dataset = work / 'scratch' / 'demo' / 'dataset'
  verify = subprocess.run([wavbeam, 'verify', str(dataset)],
                          capture_output=True, text=True, cwd=work, env=env)
  assert verify.returncode == 0 and 'OK' in verify.stdout


_WITHOUT = '''
import importlib.abc
import sys

MISSING = {missing!r}


class _Missing(importlib.abc.MetaPathFinder):
  def find_spec(self, name, path, target=None):
    if any(name == m or name.startswith(m + '.') for m in MISSING):
      raise ModuleNotFoundError(f'No module named {{name!r}}', name=name)
    return None


sys.meta_path.insert(0, _Missing())
'''


def test_the_demo_after_the_smallest_install_it_needs(tmp_path):
  """`pip install 'wavbeam[tf]'`: no matplotlib (the [inspect] extra), no
  Beam [gcp] extra, no PyTorch, Grain or ArrayRecord (simulated by a
  sitecustomize that makes them missing). The demo ends with exit 0, says
  in one line which extra draws the figure, and nothing but its own lines
  reach the console."""
  hide = tmp_path / 'hide'
  hide.mkdir()
  (hide / 'sitecustomize.py').write_text(_WITHOUT.format(missing=[
      'matplotlib', 'apitools', 'google.cloud', 'google.api_core', 'torch',
      'grain', 'array_record', 'dask', 'distributed']))
  env = dict(os.environ, PYTHONPATH=f'{hide}:{ROOT}')
  proc = subprocess.run([sys.executable, '-m', 'pipeline.demo'], cwd=tmp_path,
                        env=env, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stderr == ''
  assert ("== no picture: matplotlib is not installed: pip install "
          "'wavbeam[inspect]' draws the figures") in proc.stdout
  assert 'WARNING' not in proc.stdout
