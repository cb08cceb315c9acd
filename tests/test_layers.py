"""The package's layers, read from the imports of every module: the dataset
contract (pipeline/contract) imports nothing above it, no Beam and no
TensorFlow; the readers import the contract and no Beam or transforms/;
transforms/ imports the contract and the config, never the graph, the
commands or the readers."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READERS = ('replay', 'numpy_reader', 'torch_dataset', 'array_record_source',
           'batching', 'torch_batches')


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
  """Planning, audio and features math, and the records they share, are
  tested and used without Beam (wav_io's I/O is Beam's file systems)."""
  import subprocess
  import sys
  code = ('import sys; import transforms.plan, transforms.audio, '
          'transforms.features, transforms.file_reports, transforms.layout; '
          "print(sorted({m.split('.')[0] for m in sys.modules} & "
          "{'apache_beam', 'tensorflow'}))")
  out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, text=True,
                       capture_output=True, check=True).stdout
  assert out.strip() == '[]'
