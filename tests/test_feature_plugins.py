"""Features as plug-ins: a feature of a user's own in one module
(tests/plugins/zero_crossings.py), loaded with --feature_module, is a
flag in --help, a feature of a run and of a sweep, in the readers' schema
and in both featurizers, computed as an independent computation gives it;
and the built-in features are plug-ins of the same registry."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from pipeline import featurizer as featurizer_lib
from pipeline.config import ConfigError, PipelineConfig
from pipeline.readers import numpy_dataset
from transforms.features import registry
from tests import helpers as H

ROOT = H.ROOT
MODULE = 'tests.plugins.zero_crossings'
FLAGS = ['--win_len', '4000', '--hop_len', '4000', '--splits',
         'train=0.5,test=0.5', '--quiet']

pytestmark = pytest.mark.slow


def _cli(*args, cwd):
  return subprocess.run([sys.executable, '-m', 'pipeline.run', *args],
                        capture_output=True, text=True, cwd=cwd,
                        env=dict(os.environ, PYTHONPATH=ROOT), timeout=600)


def _reference(window: np.ndarray, frame: int) -> np.ndarray:
  """Zero crossings counted one frame at a time, in plain Python."""
  out = []
  for start in range(0, len(window) - frame + 1, frame):
    x = [float(v) for v in window[start:start + frame]]
    flips = sum((a < 0) != (b < 0) for a, b in zip(x, x[1:]))
    out.append(flips / (frame - 1))
  return np.array(out, np.float32)


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
  root = tmp_path_factory.mktemp('plugins')
  for i in range(6):
    H.write_wav(str(root / 'in' / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(8000 + 3000 * i, seed=i))
  return root


def test_the_feature_and_its_option_appear_in_help(corpus):
  plain = _cli('--help', cwd=corpus)
  assert '--zcr_frame' not in plain.stdout
  proc = _cli('--feature_module', MODULE, '--help', cwd=corpus)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert '--zcr_frame' in proc.stdout
  assert 'samples per zero-crossing frame' in proc.stdout
  listed = proc.stdout.split('\n  --features FEATURES', 1)[1]
  assert ', whisper_log_mel, zcr (default:' in ' '.join(listed.split())


def _stored(out, split):
  return {(str(e['filepath']), int(e['win_start_idx'])): e
          for e in numpy_dataset.numpy_dataset(str(out), split)}


def test_a_run_stores_it_as_an_independent_computation_gives_it(corpus):
  out = corpus / 'out'
  proc = _cli('--input_dir', str(corpus / 'in'), '--output_dir', str(out),
              '--feature_module', MODULE, '--features', 'signal,zcr',
              '--zcr_frame', '250', *FLAGS, cwd=corpus)
  assert proc.returncode == 0, proc.stderr[-3000:]
  meta = json.loads((out / 'metadata.json').read_text())
  assert meta['config']['feature_module'] == [MODULE]
  assert meta['config']['feature_options'] == [['zcr_frame', 250]]
  assert meta['schema']['zcr']['dtype'] == 'float32'
  assert meta['schema']['zcr']['shape'] == [16]
  seen = 0
  for split in meta['splits']:
    for (path, start), e in _stored(out, split).items():
      data, _ = sf.read(path, dtype='float64')
      window = data[start:start + 4000].astype(np.float32)
      assert np.array_equal(e['zcr'], _reference(window, 250)), path
      seen += 1
  assert seen == meta['counts']['examples'] > 0
  verify = subprocess.run([sys.executable, '-m', 'pipeline.verify',
                           str(out)], capture_output=True, text=True,
                          cwd=ROOT)
  assert verify.returncode == 0, verify.stderr[-2000:]


def test_featurizers_compute_it_from_live_audio(corpus):
  out = corpus / 'out'
  if not (out / 'metadata.json').exists():
    test_a_run_stores_it_as_an_independent_computation_gives_it(corpus)
  featurize = featurizer_lib.featurizer(str(out))
  stored = _stored(out, 'train')
  path = sorted({p for p, _ in stored})[0]
  live = featurize(path)
  rows = sorted((start, e) for (p, start), e in stored.items() if p == path)
  for i, (_, e) in enumerate(rows):
    assert np.array_equal(live['zcr'][i], e['zcr'])
  import tensorflow as tf
  module = featurizer_lib.tf_featurizer(str(out))
  samples, _ = sf.read(path, dtype='float32')
  served = module(tf.constant(samples))['zcr'].numpy()
  np.testing.assert_allclose(served[:len(rows)], live['zcr'][:len(rows)],
                             atol=1e-6)


def test_a_sweep_of_its_option_equals_separate_runs(corpus, tmp_path):
  variants = tmp_path / 'v.toml'
  variants.write_text('[fine]\nzcr_frame = 100\n[coarse]\nzcr_frame = 500\n')
  args = ['--input_dir', str(corpus / 'in'), '--feature_module', MODULE,
          '--features', 'signal,zcr', *FLAGS]
  proc = _cli(*args, '--output_dir', str(tmp_path / 'sweep'), '--variants',
              str(variants), cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  for name, frame in (('fine', 100), ('coarse', 500)):
    alone = _cli(*args, '--output_dir', str(tmp_path / name), '--zcr_frame',
                 str(frame), cwd=tmp_path)
    assert alone.returncode == 0, alone.stderr[-3000:]
    for split in ('train', 'test'):
      ours = _stored(tmp_path / 'sweep' / name, split)
      theirs = _stored(tmp_path / name, split)
      assert ours.keys() == theirs.keys()
      for key in ours:
        assert np.array_equal(ours[key]['zcr'], theirs[key]['zcr'])
        assert ours[key]['zcr'].shape == (4000 // frame,)


def test_an_option_of_no_loaded_feature_is_refused(corpus):
  with pytest.raises(ConfigError, match='option of no feature'):
    PipelineConfig(input_dir='in', output_dir='out',
                   feature_options={'zcr_fram': 3})
  proc = _cli('--input_dir', str(corpus / 'in'), '--output_dir',
              str(corpus / 'x'), '--feature_module', 'no_such_module',
              cwd=corpus)
  assert proc.returncode == 2
  assert "--feature_module='no_such_module': cannot be imported" in \
      proc.stderr


def test_the_built_in_features_are_plug_ins_of_the_registry():
  assert registry.names()[:6] == ('signal', 'spectrogram', 'log_mel',
                                  'mfcc', 'lpc', 'fft')
  # Each in a module of its own, named as the feature.
  for name in registry.builtins():
    assert type(registry.get(name)).__module__ == \
        f'transforms.features.{name}'
  assert registry.in_use(['mfcc']) == ('log_mel', 'mfcc')
  assert registry.uses_stft(['mfcc']) and not registry.uses_stft(['fft'])
