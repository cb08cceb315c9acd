"""`pip install .` gives a working tool with a `wavbeam` command, under
the Apache-2.0 license, for the Python versions the README names."""

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile

import numpy as np
import pytest

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
  assert flags.stdout.startswith('usage: wavbeam run '), flags.stdout
  meta = subprocess.run(
      [str(bin_dir / 'python'), '-c',
       'from importlib import metadata; d = metadata.distribution("wavbeam");'
       ' m = d.metadata; print(m["License"], m["Requires-Python"]);'
       ' print(d.read_text("LICENSE"))'],
      capture_output=True, text=True, cwd=work, env=env)
  assert meta.stdout.startswith('Apache-2.0 >=3.11\n'), meta.stdout
  with open(os.path.join(ROOT, 'LICENSE'), encoding='utf-8') as f:
    assert meta.stdout.split('\n', 1)[1] == f.read() + '\n'
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
  _an_embedding_run(wavbeam, work, env)


def _an_embedding_run(wavbeam: str, work, env) -> None:
  """`wavbeam run --features signal,embedding` with a TorchScript model,
  as `pip install '.[embeddings]'` allows (torch from the pinned set)."""
  torch = pytest.importorskip('torch')
  import soundfile as sf

  class Frames(torch.nn.Module):
    def __init__(self):
      super().__init__()
      self.conv = torch.nn.Conv1d(1, 4, 400, stride=320)

    def forward(self, x):
      return self.conv(x[:, None]).transpose(1, 2)

  torch.jit.script(Frames().eval()).save(str(work / 'net.pt'))
  (work / 'in' / 'a').mkdir(parents=True)
  sf.write(str(work / 'in' / 'a' / 'x.wav'),
           np.sin(np.arange(32000) / 7.0) * 0.3, 16000)
  run = subprocess.run(
      [wavbeam, 'run', '--input_dir', 'in', '--output_dir', 'emb',
       '--features', 'signal,embedding', '--embedding_model', 'net.pt',
       '--win_len', '16000', '--quiet'],
      capture_output=True, text=True, cwd=work, env=env, timeout=600)
  assert run.returncode == 0, run.stderr[-3000:]
  with open(work / 'emb' / 'metadata.json', encoding='utf-8') as f:
    schema = json.load(f)['schema']
  assert schema['embedding']['shape'] == [49, 1, 4]


def test_the_source_distribution_ships_the_license(tmp_path):
  """`setup.py sdist` (in a copy of the checkout, leaving it untouched):
  LICENSE is in the archive, PKG-INFO names Apache-2.0 and its classifier
  and the Python floor the README states."""
  copy = tmp_path / 'checkout'
  shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(
      '.venv', '.git', 'scratch', 'build', '*.egg-info', '__pycache__',
      '.pytest_cache'))
  proc = subprocess.run(
      [sys.executable, 'setup.py', '-q', 'sdist', '--dist-dir',
       str(tmp_path / 'dist')], cwd=copy, capture_output=True, text=True,
      timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  with tarfile.open(tmp_path / 'dist' / 'wavbeam-0.1.0.tar.gz') as tar:
    names = tar.getnames()
    assert 'wavbeam-0.1.0/LICENSE' in names, names
    shipped = tar.extractfile('wavbeam-0.1.0/LICENSE').read().decode()
    info = tar.extractfile('wavbeam-0.1.0/PKG-INFO').read().decode()
  with open(os.path.join(ROOT, 'LICENSE'), encoding='utf-8') as f:
    assert shipped == f.read()
  assert 'Apache License\n                           Version 2.0' in shipped
  assert 'License: Apache-2.0\n' in info
  assert ('Classifier: License :: OSI Approved :: Apache Software License'
          in info)
  floor = re.search(r'^Requires-Python: >=(\d+\.\d+)$', info, re.M).group(1)
  with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
    assert f'Python {floor} or newer' in f.read()


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
  """`pip install '.[tf]'`: no matplotlib (the [inspect] extra), no
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
          "'.[inspect]' (in the wavbeam checkout) draws the figures"
          ) in proc.stdout
  assert 'WARNING' not in proc.stdout
