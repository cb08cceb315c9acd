"""The package's layers, read from the imports of every module:
- the dataset contract (pipeline/contract) imports nothing above it, no
  Beam and no TensorFlow;
- the readers (pipeline/readers) import the contract and each other, no
  Beam, no transforms/, no commands;
- the config (pipeline/config) imports the contract and the feature
  registry of transforms/, nothing else of wavbeam;
- the featurizer (pipeline/featurizer) imports the config, the contract
  and the numpy modules of transforms/, no Beam and no commands;
- transforms/ imports the contract and the config, never the writer's
  graph, the commands, the readers or the featurizer; its stages (runtime,
  inputs, planning, features, writing) each import only those before;
- the writer's modules at the top of pipeline/ never import the commands;
- the modules that keep an old path (pipeline/replay.py, run.py, ...)
  hold nothing but that."""

import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Modules without Beam, whatever they import: what the featurizer may use.
# (transforms.features: every module of it, the feature plug-ins too.)
NUMPY_MODULES = ('transforms.planning.rules', 'transforms.inputs.audio',
                 'transforms.inputs.labels', 'transforms.inputs.patterns',
                 'transforms.inputs.splits', 'transforms.features',
                 'transforms.inputs.file_reports', 'transforms.planning.layout',
                 'transforms.inputs.sound_files', 'transforms.inputs.blocks')


def _numpy_module(module: str) -> bool:
  return any(module == m or module.startswith(m + '.')
             for m in NUMPY_MODULES)
# transforms/ in the order data passes through it: a stage imports only the
# stages before it (runtime: the lock, the worker pool, file system calls,
# metrics, which every stage uses).
STAGES = ('runtime', 'inputs', 'planning', 'features', 'writing')
# The old module paths: each the module that holds its code now.
OLD_PATHS = {
    'replay': 'pipeline.readers.tf_dataset',
    'numpy_reader': 'pipeline.readers.numpy_dataset',
    'torch_dataset': 'pipeline.readers.torch_dataset',
    'array_record_source': 'pipeline.readers.array_record',
    'featurizer_tf': 'pipeline.featurizer.tf_graph',
    'run': 'pipeline.commands.run',
    'verify': 'pipeline.commands.verify',
    'inspect_dataset': 'pipeline.commands.inspect',
    'demo': 'pipeline.commands.demo',
    'cli': 'pipeline.commands.cli',
}


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


def _beam_or_tf(imported):
  return {m for m in imported if m.split('.')[0] in ('apache_beam',
                                                     'tensorflow')}


def _in_fresh_process(code):
  return subprocess.run([sys.executable, '-c', code], cwd=ROOT, text=True,
                        capture_output=True, check=True).stdout.strip()


def test_the_folders_are_the_layers():
  for folder in ('pipeline/contract', 'pipeline/readers',
                 'pipeline/featurizer', 'pipeline/commands', 'pipeline/config',
                 'transforms'):
    assert os.path.isfile(os.path.join(ROOT, folder, '__init__.py')), folder
  top = {name for name, _ in _modules('pipeline')}
  assert top == {'__init__', '_aliases', 'append', 'embeddings', 'graph',
                 'output_folder', 'progress', 'resume', 'variants'} | set(
                     OLD_PATHS)


def test_the_contract_imports_nothing_above_it():
  for name, path in _modules('pipeline/contract'):
    imported = _imports(path)
    outside = {m for m in _ours(imported)
               if not m.startswith('pipeline.contract')}
    assert not outside, (name, outside)
    assert not _beam_or_tf(imported), name


def test_readers_import_the_contract_and_each_other_and_no_beam():
  for name, path in _modules('pipeline/readers'):
    imported = _imports(path)
    assert not {m for m in imported if m.startswith('apache_beam')}, name
    for module in _ours(imported):
      assert module.startswith(('pipeline.contract', 'pipeline.readers')), \
          (name, module)


def test_the_config_imports_the_contract_and_the_feature_registry():
  for name, path in _modules('pipeline/config'):
    for module in _ours(_imports(path)):
      assert module.startswith(('pipeline.contract', 'pipeline.config',
                                'transforms.features')), (name, module)


def test_transforms_never_import_the_graph_commands_readers_or_featurizer():
  for stage in STAGES:
    for name, path in _modules(f'transforms/{stage}'):
      for module in _ours(_imports(path)):
        if module.startswith('pipeline'):
          assert module.startswith(('pipeline.contract',
                                    'pipeline.config')) \
              or module == 'pipeline', (stage, name, module)


def test_the_transform_stages_import_only_the_stages_before_them():
  assert sorted(n for n in os.listdir(os.path.join(ROOT, 'transforms'))
                if os.path.isdir(os.path.join(ROOT, 'transforms', n)) and
                not n.startswith('_')) == sorted(STAGES)
  assert [name for name, _ in _modules('transforms')] == ['__init__']
  for position, stage in enumerate(STAGES):
    for name, path in _modules(f'transforms/{stage}'):
      for module in _ours(_imports(path)):
        parts = module.split('.')
        if parts[0] == 'transforms' and len(parts) > 2:
          assert parts[1] in STAGES[:position + 1], (stage, name, module)


def test_the_writer_never_imports_the_commands():
  for name, path in _modules('pipeline'):
    if name in OLD_PATHS or name == '_aliases':  # their callers' paths
      continue
    for module in _ours(_imports(path)):
      assert not module.startswith(('pipeline.commands',
                                    'pipeline.readers.tf_dataset')), \
          (name, module)


@pytest.mark.slow
def test_an_old_path_holds_nothing_but_its_alias():
  for name, target in OLD_PATHS.items():
    tree = ast.parse(open(os.path.join(ROOT, 'pipeline', name + '.py'),
                          encoding='utf-8').read())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert len(calls) == 1 and calls[0].args[1].value == target, name
  out = _in_fresh_process(
      'import importlib; print(all(importlib.import_module("pipeline." + a) '
      f'is importlib.import_module(b) for a, b in {OLD_PATHS!r}.items()))')
  assert out.splitlines()[-1] == 'True'


@pytest.mark.slow
def test_the_numpy_modules_import_no_beam():
  """Planning, audio and features math, reading an open file, and the
  records they share, are tested and used without Beam (audio_io's I/O is
  Beam's file systems)."""
  code = (f'import sys; import {", ".join(NUMPY_MODULES)}; '
          'from transforms.features import extractor, registry; '
          'registry.load_builtins(); '
          "print(sorted({m.split('.')[0] for m in sys.modules} & "
          "{'apache_beam', 'tensorflow'}))")
  assert _in_fresh_process(code) == '[]'


@pytest.mark.slow
def test_the_featurizer_imports_the_numpy_modules_and_no_beam():
  """Inference code runs the pipeline's own computation without Beam:
  from transforms/, only the modules that import none."""
  for name, path in _modules('pipeline/featurizer'):
    imported = _imports(path)
    assert not {m for m in imported if m.startswith('apache_beam')}, name
    for module in _ours(imported) - {'pipeline', 'transforms'}:
      if module.startswith('transforms'):
        parts = module.split('.')
        if len(parts) == 2:  # a stage's package: its modules are checked
          continue
        assert _numpy_module('.'.join(parts[:3])), (name, module)
      else:
        assert module.split('.')[1] in ('config', 'contract', 'featurizer',
                                        '_aliases'), (name, module)
  code = ('import sys; import pipeline.featurizer; '
          "print(sorted({m.split('.')[0] for m in sys.modules} & "
          "{'apache_beam', 'tensorflow'}))")
  assert _in_fresh_process(code) == '[]'


def test_no_module_imports_a_module_that_imports_it():
  """No import cycle among wavbeam's modules, imports inside functions
  included (they only hide one)."""
  graph = {}
  for folder in ('pipeline', 'pipeline/contract', 'pipeline/readers',
                 'pipeline/featurizer', 'pipeline/commands', 'pipeline/config',
                 'transforms'):
    package = folder.replace('/', '.')
    for name, path in _modules(folder):
      module = package if name == '__init__' else f'{package}.{name}'
      graph[module] = _imports(path)
  known = set(graph)
  edges = {m: {d for d in deps if d in known and d != m}
           for m, deps in graph.items()}

  def reaches(start, goal, seen):
    for d in edges[start]:
      if d == goal:
        return True
      if d not in seen:
        seen.add(d)
        if reaches(d, goal, seen):
          return True
    return False

  cycles = sorted(m for m in known if reaches(m, m, set()) and
                  not m.endswith('__init__') and '.' in m)
  # A package's __init__ re-exporting its own modules is not a cycle.
  cycles = [m for m in cycles if not all(
      d.startswith(m.rsplit('.', 1)[0]) for d in edges[m])]
  assert not cycles, cycles
