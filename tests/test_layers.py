"""The package's layers, read from the imports of every module: the dataset
contract (pipeline/contract) imports nothing above it, no Beam and no
TensorFlow; the readers import the contract and no Beam or transforms/;
transforms/ imports the contract and the config, never the graph, the
commands or the readers; the inference featurizer imports the numpy
modules of transforms/ and no Beam."""

import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READERS = ('replay', 'numpy_reader', 'torch_dataset', 'array_record_source',
           'batching', 'torch_batches')
# Modules without Beam, whatever they import: what the featurizer may use.
NUMPY_MODULES = ('transforms.plan', 'transforms.audio', 'transforms.features',
                 'transforms.file_reports', 'transforms.layout',
                 'transforms.sound_files', 'transforms.window_features')
FEATURIZER = ('featurizer', 'featurizer_tf')


def _imports(path):
  """Top-level names of every module a file imports (at any depth)."""
  tree = ast.parse(open(path, encoding='utf-8').read())
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found.update(a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      found.add(node.module)
      found.update(f'{node.module}.{a.name}' for a in node.names)
  return found


def _modules(folder):
  for name in sorted(os.listdir(os.path.join(ROOT, folder))):
    if name.endswith('.py'):
      yield name[:-3], os.path.join(ROOT, folder, name)


def _ours(imported):
  return {m for m in imported if m.split('.')[0] in ('pipeline', 'transforms')}


def test_the_contract_imports_nothing_above_it():
  for name, path in _modules('pipeline/contract'):
    imported = _imports(path)
    outside = {m for m in _ours(imported)
               if not m.startswith('pipeline.contract')}
    assert not outside, (name, outside)
    assert not {m for m in imported
                if m.split('.')[0] in ('apache_beam', 'tensorflow')}, name


def test_readers_import_the_contract_and_no_beam():
  for name in READERS:
    imported = _imports(os.path.join(ROOT, 'pipeline', name + '.py'))
    assert not {m for m in imported if m.startswith('transforms')}, name
    assert not {m for m in imported if m.startswith('apache_beam')}, name
    for module in _ours(imported) - {'pipeline'}:
      assert module.split('.')[1] in ('contract',) + READERS, (name, module)


def test_transforms_never_import_the_graph_commands_or_readers():
  for name, path in _modules('transforms'):
    for module in _ours(_imports(path)):
      if module.startswith('pipeline'):
        assert module.startswith(('pipeline.contract', 'pipeline.config')) \
            or module == 'pipeline', (name, module)


def test_the_numpy_modules_import_no_beam():
  """Planning, audio and features math, reading an open file, and the
  records they share, are tested and used without Beam (wav_io's I/O is
  Beam's file systems)."""
  code = (f'import sys; import {", ".join(NUMPY_MODULES)}; '
          "print(sorted({m.split('.')[0] for m in sys.modules} & "
          "{'apache_beam', 'tensorflow'}))")
  out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, text=True,
                       capture_output=True, check=True).stdout
  assert out.strip() == '[]'


def test_the_featurizer_imports_the_numpy_modules_and_no_beam():
  """Inference code runs the pipeline's own computation without Beam:
  from transforms/, only the modules that import none."""
  for name in FEATURIZER:
    imported = _imports(os.path.join(ROOT, 'pipeline', name + '.py'))
    assert not {m for m in imported if m.startswith('apache_beam')}, name
    for module in _ours(imported) - {'pipeline', 'transforms'}:
      if module.startswith('transforms'):
        assert '.'.join(module.split('.')[:2]) in NUMPY_MODULES, (name,
                                                                  module)
      else:
        assert module.split('.')[1] in ('config', 'contract') + FEATURIZER, \
            (name, module)
  code = ('import sys; import pipeline.featurizer; '
          "print(sorted({m.split('.')[0] for m in sys.modules} & "
          "{'apache_beam', 'tensorflow'}))")
  out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, text=True,
                       capture_output=True, check=True).stdout
  assert out.strip() == '[]'
