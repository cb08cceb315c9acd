"""The package as a library: `import pipeline` and the readers change
nothing in the importing process, load nothing heavy until a name is
used, and every module path users and docs name still works."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What a process has that an import could change, as JSON.
_STATE = r'''
import json, logging, os, signal, sys
def state():
  fds = {}
  for fd in (0, 1, 2):
    try:
      os.fstat(fd)
      fds[fd] = 'open'
    except OSError:
      fds[fd] = 'closed'
  root = logging.getLogger()
  handlers = {}
  for number in sorted(signal.valid_signals()):
    try:
      handlers[int(number)] = repr(signal.getsignal(number))
    except (ValueError, OSError):
      pass
  return {'fds': fds,
          'streams': [repr(type(s)) for s in (sys.stdin, sys.stdout,
                                               sys.stderr)],
          'root_handlers': [repr(h) for h in root.handlers],
          'root_filters': [repr(f) for f in root.filters],
          'root_level': root.level,
          'signals': handlers,
          'environ': sorted(os.environ.items())}
'''


def _state_around(imports, close_fds=(), frameworks=''):
  """(state before, state after) running `imports` in a fresh Python
  whose descriptors `close_fds` are closed; `frameworks` imported before
  the first look (TensorFlow and PyTorch set things of their own)."""
  code = _STATE + (
      frameworks + '\nbefore = state()\n' + imports +
      '\nprint(json.dumps([before, state()]), file=open(sys.argv[1], "w"))')
  out = os.path.join(os.environ.get('TMPDIR', '/tmp'),
                     f'wavbeam-state-{os.getpid()}.json')

  def close():
    for fd in close_fds:
      os.close(fd)

  proc = subprocess.run([sys.executable, '-c', code, out], cwd=ROOT,
                        capture_output=not close_fds, text=True,
                        preexec_fn=close)
  assert proc.returncode == 0, proc.stderr
  with open(out) as f:
    before, after = json.load(f)
  os.remove(out)
  return before, after


IMPORTS = {
    'pipeline': 'import pipeline',
    'public names': ('import pipeline\n'
                     'for name in pipeline.__all__: getattr(pipeline, name)'),
    'numpy reader': 'from pipeline import numpy_dataset, load_metadata',
    'ArrayRecord source': 'from pipeline.readers.array_record import '
                          'ArrayRecordSource',
    'featurizer': 'from pipeline.featurizer import featurizer',
    'TensorFlow reader': 'from pipeline.readers.tf_dataset import '
                         'replay_dataset',
    'PyTorch reader': 'from pipeline.readers.torch_dataset import '
                      'WavbeamIterableDataset',
    'old names': 'from pipeline.replay import replay_dataset\n'
                 'from pipeline.numpy_reader import numpy_dataset',
}


# The frameworks a reader's import brings.
FRAMEWORKS = {'public names': 'import tensorflow, torch, apache_beam',
              'old names': 'import tensorflow',
              'TensorFlow reader': 'import tensorflow',
              'PyTorch reader': 'import torch'}


@pytest.mark.parametrize('what', sorted(IMPORTS))
def test_an_import_changes_no_process_state(what):
  before, after = _state_around(IMPORTS[what],
                                frameworks=FRAMEWORKS.get(what, ''))
  assert after == before


def test_closed_standard_streams_stay_closed_for_a_library():
  """A command reopens a closed stream on /dev/null; a library that
  imports wavbeam's readers leaves its process's descriptors alone."""
  before, after = _state_around('import pipeline\n'
                                'from pipeline import numpy_dataset', (0,))
  assert before['fds']['0'] == after['fds']['0'] == 'closed'


def test_the_public_names_load_nothing_heavy_until_used():
  code = ('import sys, pipeline\n'
          'from pipeline import (numpy_dataset, load_metadata, featurizer, '
          'ArrayRecordSource, PipelineConfig, DatasetError)\n'
          'heavy = {"apache_beam", "tensorflow", "torch"}\n'
          'print(sorted(heavy & {m.split(".")[0] for m in sys.modules}))\n'
          'pipeline.replay_dataset\n'
          'print(sorted(heavy & {m.split(".")[0] for m in sys.modules}))\n'
          'print(sorted(pipeline.__all__))')
  out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, text=True,
                       capture_output=True, check=True).stdout.splitlines()
  assert out[0] == '[]'
  assert out[1] == "['tensorflow']"
  assert out[2] == str(sorted([
      'run', 'PipelineConfig', 'replay_dataset', 'numpy_dataset',
      'WavbeamIterableDataset', 'ArrayRecordSource', 'featurizer',
      'load_metadata', 'DatasetError']))


def test_one_load_metadata_for_every_reader(tmp_path):
  import pipeline
  from pipeline import numpy_reader, replay
  from pipeline.readers import numpy_dataset, tf_dataset
  assert (pipeline.load_metadata is replay.load_metadata is
          numpy_reader.load_metadata is numpy_dataset.load_metadata is
          tf_dataset.load_metadata)
  from tests import helpers as H
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(4096))
  H.run_pipeline(H.make_config(tmp_path / 'in', tmp_path / 'out',
                               win_len=1024, features=('signal',)))
  meta = pipeline.load_metadata(str(tmp_path / 'out'))
  assert isinstance(meta, dict)
  assert meta == json.loads((tmp_path / 'out' /
                             'metadata.json').read_text())


# Every path the docs, the examples and earlier releases name.
OLD_NAMES = [
    ('pipeline.replay', 'replay_dataset'),
    ('pipeline.replay', 'load_metadata'),
    ('pipeline.numpy_reader', 'numpy_dataset'),
    ('pipeline.numpy_reader', 'load_metadata'),
    ('pipeline.torch_dataset', 'WavbeamIterableDataset'),
    ('pipeline.torch_dataset', 'WavbeamMapDataset'),
    ('pipeline.torch_dataset', 'LengthGroupedBatchSampler'),
    ('pipeline.torch_dataset', 'collate'),
    ('pipeline.array_record_source', 'ArrayRecordSource'),
    ('pipeline.featurizer', 'featurizer'),
    ('pipeline.featurizer', 'tf_featurizer'),
    ('pipeline.featurizer', 'FeaturizerError'),
    ('pipeline.featurizer_tf', 'TfFeaturizer'),
    ('pipeline.run', 'run'),
    ('pipeline.run', 'main'),
    ('pipeline.config', 'PipelineConfig'),
    ('pipeline.verify', 'verify'),
    ('pipeline.verify', 'main'),
    ('pipeline.inspect_dataset', 'main'),
    ('pipeline.demo', 'main'),
    ('pipeline.cli', 'command'),
]


@pytest.mark.parametrize('module,name', OLD_NAMES)
def test_every_old_path_still_works(module, name):
  import importlib
  assert callable(getattr(importlib.import_module(module), name))


def test_run_and_featurizer_are_callable_whatever_was_imported_first():
  code = ('import pipeline\n'
          'import pipeline.run, pipeline.featurizer\n'
          'from pipeline.run import run\n'
          'print(callable(pipeline.run), pipeline.run.run is run,\n'
          '      callable(pipeline.featurizer),\n'
          '      pipeline.featurizer.featurizer is\n'
          '      __import__("pipeline.featurizer").featurizer.featurizer)')
  out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, text=True,
                       capture_output=True, check=True).stdout.split()
  assert out == ['True', 'True', 'True', 'True']


@pytest.mark.parametrize('module', ['pipeline.run', 'pipeline.verify',
                                    'pipeline.inspect_dataset',
                                    'pipeline.demo',
                                    'pipeline.commands.run',
                                    'pipeline.commands.verify'])
def test_python_m_under_the_old_and_the_new_names(module):
  proc = subprocess.run([sys.executable, '-m', module, '--help'], cwd=ROOT,
                        capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.startswith('usage: '), proc.stdout[:200]
