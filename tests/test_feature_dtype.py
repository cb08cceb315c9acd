"""--feature_dtype: the float features stored as float16 or bfloat16, each
value the float32 one rounded to nearest even (numpy's cast for float16,
a bit-level rounding written here for bfloat16), the statistics those of
the float32 values, and every reader, featurizer and interchange file
carrying the stored dtype (or casting with dtype=)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pipeline.config import ConfigError, PipelineConfig
from pipeline.readers import numpy_dataset
from tests import helpers as H
from transforms.features import extractor

FEATURES = ('signal', 'spectrogram', 'log_mel', 'mfcc', 'lpc')
FLOATS = ('spectrogram', 'log_mel', 'mfcc', 'lpc')
DTYPES = ('float32', 'float16', 'bfloat16')
WIN = 4096


def bfloat16_bits(values: np.ndarray) -> np.ndarray:
  """The bfloat16 bit patterns of float32 `values` rounded to nearest,
  ties to even, from their bits alone; NaN stays a (quiet) NaN."""
  bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
  rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
  nan = np.isnan(values)
  rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
  return rounded


def _float32_edges(seed=0) -> np.ndarray:
  """float32 values where rounding is decided: halfway ties both ways,
  just off them, subnormals, the largest values, infinities, NaN."""
  rng = np.random.default_rng(seed)
  bits = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)
  ties = (bits & np.uint32(0xFFFF0000)) | np.uint32(0x8000)
  near = np.concatenate([ties, ties + np.uint32(1), ties - np.uint32(1)])
  half_ties = (bits & np.uint32(0xFFFFE000)) | np.uint32(0x1000)
  values = np.concatenate([bits, near, half_ties]).view(np.float32)
  extra = np.array([0.0, -0.0, 1e-40, -1e-45, 65504.0, 65520.0, 3.4e38,
                    np.inf, -np.inf, np.nan], np.float32)
  return np.concatenate([values, extra])


def test_as_stored_rounds_each_float_feature_to_nearest_even():
  values = _float32_edges()
  with np.errstate(over='ignore'):
    expected16 = values.astype(np.float16)   # numpy's own cast
  signal = np.arange(-5, 5, dtype=np.int32)
  arrays = {'log_mel': values, 'signal': signal,
            'num_frames': np.int64(3)}
  with np.errstate(over='ignore'):
    half = extractor.as_stored(dict(arrays, signal=values), 'float16')
  assert half['num_frames'] == 3
  assert half['signal'].dtype == np.float32      # the signal keeps its own
  np.testing.assert_array_equal(half['log_mel'].view(np.uint16),
                                expected16.view(np.uint16))
  brain = extractor.as_stored(arrays, 'bfloat16')
  assert brain['log_mel'].dtype.name == 'bfloat16'
  assert brain['signal'] is signal
  got = brain['log_mel'].view(np.uint16)
  want = bfloat16_bits(values)
  finite = ~np.isnan(values)
  np.testing.assert_array_equal(got[finite], want[finite])
  assert np.isnan(brain['log_mel'][~finite].astype(np.float32)).all()
  assert extractor.as_stored(arrays, 'float32') is arrays


def test_the_schema_before_any_example_has_the_stored_dtype():
  """What an empty dataset records, and what shards are sized by."""
  from pipeline import graph
  config = PipelineConfig(input_dir='in', output_dir='out',
                          features=('signal', 'log_mel'),
                          feature_dtype='bfloat16')
  schema = graph.expected_schema(config).as_dict()
  assert schema['log_mel'].dtype == 'bfloat16'
  assert schema['signal'].dtype == 'int32'
  full = graph.estimate_example_size(
      PipelineConfig(input_dir='in', output_dir='out', features=('log_mel',)))
  half = graph.estimate_example_size(
      PipelineConfig(input_dir='in', output_dir='out', features=('log_mel',),
                     feature_dtype='float16'))
  assert half.fixed < 0.6 * full.fixed


def test_overflow_is_said_from_where_float16_rounds_to_inf():
  from pipeline.commands import console

  def meta(reach, count=10):
    stats = {'count': count, 'min': None if not count else -1.0,
             'max': None if not count else reach}
    return {'schema': {'log_mel': {'dtype': 'float16'},
                       'mfcc': {'dtype': 'float32'}},
            'splits': {'train': {'statistics': {'log_mel': stats,
                                                'mfcc': stats}}}}
  # 65519.99 still rounds to 65504; 65520 is the first value that is inf.
  assert np.isfinite(np.float32(65519.99).astype(np.float16))
  assert np.isinf(np.float32(65520).astype(np.float16))
  assert console.overflow_warnings(meta(65519.99)) == []
  assert console.overflow_warnings(meta(0.0, count=0)) == []
  [line] = console.overflow_warnings(meta(65520.0))
  assert line.startswith('wavbeam: WARNING: log_mel: values reach 65520')


def test_an_unknown_dtype_is_refused_naming_the_option():
  with pytest.raises(ConfigError, match='--feature_dtype=.float8.'):
    PipelineConfig(input_dir='in', output_dir='out', feature_dtype='float8')


@pytest.fixture(scope='module')
def datasets(tmp_path_factory):
  """The same corpus written at each --feature_dtype, with ArrayRecord
  files too."""
  root = tmp_path_factory.mktemp('dtypes')
  for i in range(6):
    H.write_wav(str(root / 'in' / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(WIN * (2 + i % 2) + 300 * i, seed=i, scale=0.3))
  written = {}
  for dtype in DTYPES:
    config = H.make_config(root / 'in', root / dtype, win_len=WIN,
                           n_fft=512, fft_hop=256, features=FEATURES,
                           feature_dtype=dtype, array_record=True,
                           splits=(('train', 1.0),))
    H.run_pipeline(config)
    written[dtype] = root / dtype
  return written


def _by_window(folder, **kw):
  return {(int(e['index']), int(e['win_start_idx'])): e
          for e in numpy_dataset.numpy_dataset(str(folder), 'train', **kw)}


@pytest.mark.slow
def test_stored_values_are_the_float32_ones_rounded_and_stats_unchanged(
    datasets):
  full = _by_window(datasets['float32'])
  metas = {d: json.loads((datasets[d] / 'metadata.json').read_text())
           for d in DTYPES}
  for dtype in ('float16', 'bfloat16'):
    meta = metas[dtype]
    assert meta['config']['feature_dtype'] == dtype
    for name in FLOATS:
      assert meta['schema'][name]['dtype'] == dtype
    assert meta['schema']['signal']['dtype'] == 'int32'
    # Statistics are of the float32 values, before rounding.
    assert (meta['splits']['train']['statistics'] ==
            metas['float32']['splits']['train']['statistics'])
    assert meta['splits']['train']['num_bytes'] < 0.8 * (
        metas['float32']['splits']['train']['num_bytes'])
    stored = _by_window(datasets[dtype])
    assert stored.keys() == full.keys()
    for key, e in stored.items():
      np.testing.assert_array_equal(e['signal'], full[key]['signal'])
      for name in FLOATS:
        assert e[name].dtype.name == dtype
        bits = e[name].view(np.uint16)
        if dtype == 'float16':
          want = full[key][name].astype(np.float16).view(np.uint16)
        else:
          want = bfloat16_bits(full[key][name])
        np.testing.assert_array_equal(bits, want)


@pytest.mark.slow
@pytest.mark.parametrize('dtype', ['float16', 'bfloat16'])
def test_every_reader_gives_the_stored_dtype_or_casts(datasets, dtype):
  import tensorflow as tf
  import torch
  from pipeline.readers import tf_dataset
  from pipeline.readers import torch_dataset
  from pipeline.readers.array_record import ArrayRecordSource
  folder = str(datasets[dtype])
  stored = _by_window(folder)
  as_float32 = _by_window(folder, dtype='float32')
  for key, e in stored.items():
    assert as_float32[key]['log_mel'].dtype == np.float32
    np.testing.assert_array_equal(as_float32[key]['log_mel'],
                                  e['log_mel'].astype(np.float32))
    assert as_float32[key]['signal'].dtype == np.int32
  batches = list(numpy_dataset.numpy_dataset(folder, 'train', batch_size=4))
  assert batches[0]['mfcc'].dtype.name == dtype
  for engine in ('numpy', 'tf'):
    for cast in (None, 'float32'):
      got = {}
      for element in tf_dataset.replay_dataset(folder, 'train', batch_size=3,
                                               engine=engine, dtype=cast):
        assert element['log_mel'].dtype == tf.as_dtype(cast or dtype)
        for i in range(element['index'].shape[0]):
          got[(int(element['index'][i]),
               int(element['win_start_idx'][i]))] = (
                   element['log_mel'][i].numpy())
      assert got.keys() == stored.keys()
      for key, value in got.items():
        np.testing.assert_array_equal(
            value.astype(np.float32),
            stored[key]['log_mel'].astype(np.float32))
  torch_dtype = getattr(torch, dtype)
  for cast, want in ((None, torch_dtype), (torch.float32, torch.float32)):
    data = torch_dataset.WavbeamIterableDataset(folder, 'train',
                                                batch_size=4, dtype=cast)
    seen = 0
    for batch in torch.utils.data.DataLoader(data, batch_size=None):
      assert batch['spectrogram'].dtype == want
      assert batch['signal'].dtype == torch.int32
      for i in range(len(batch['index'])):
        key = (int(batch['index'][i]), int(batch['win_start_idx'][i]))
        np.testing.assert_array_equal(
            batch['spectrogram'][i].float().numpy(),
            stored[key]['spectrogram'].astype(np.float32))
        seen += 1
    assert seen == len(stored)
  source = ArrayRecordSource(folder, 'train')
  assert source[0]['lpc'].dtype.name == dtype
  mapped = torch_dataset.WavbeamMapDataset(folder, 'train',
                                           dtype=torch.float32)
  assert mapped[0]['lpc'].dtype == np.float32
  batch = mapped.collate([mapped[i] for i in range(3)])
  assert batch['lpc'].dtype == torch.float32


@pytest.mark.slow
@pytest.mark.parametrize('dtype', ['float16', 'bfloat16'])
def test_the_featurizers_give_the_stored_rounding(datasets, dtype):
  import soundfile as sf
  from pipeline.featurizer import featurizer, tf_featurizer
  folder = str(datasets[dtype])
  stored = _by_window(folder)
  index = sorted(stored)[0][0]
  path = next(str(e['filepath']) for k, e in stored.items()
              if k[0] == index)
  keys = sorted(k for k in stored if k[0] == index)
  live = featurizer(folder)(path)
  samples, rate = sf.read(path, dtype='float32')
  serving = tf_featurizer(folder)(samples)
  for name in FLOATS:
    assert live[name].dtype.name == dtype
    assert serving[name].dtype.name == dtype
    for row, key in enumerate(keys):
      np.testing.assert_array_equal(live[name][row].view(np.uint16),
                                    stored[key][name].view(np.uint16))
    # TensorFlow's graph computes in its own float32 order: the rounding
    # of what it computes is the same rounding.
    np.testing.assert_allclose(
        serving[name].numpy().astype(np.float32)[0],
        stored[keys[0]][name].astype(np.float32), rtol=1e-2, atol=1e-2)


@pytest.mark.slow
def test_tfds_and_tfx_see_the_stored_dtype(datasets):
  import tensorflow as tf
  import tensorflow_datasets as tfds
  folder = datasets['float16']
  builder = tfds.builder_from_directory(str(folder))
  assert builder.info.features['log_mel'].dtype == tf.float16
  stored = _by_window(folder)
  for e in tfds.as_numpy(builder.as_dataset(split='train')):
    key = (int(e['index']), int(e['win_start_idx']))
    assert e['log_mel'].dtype == np.float16
    np.testing.assert_array_equal(e['log_mel'], stored[key]['log_mel'])
  text = (folder / 'schema.pbtxt').read_text()
  assert 'wavbeam.dtype:float16' in text


@pytest.mark.slow
def test_append_with_another_dtype_is_refused(tmp_path):
  from pipeline import run as run_lib
  H.write_wav(str(tmp_path / 'in' / 'a' / 'old.wav'), H.noise(WIN * 2))
  options = dict(win_len=WIN, n_fft=512, fft_hop=256, features=FEATURES,
                 splits=(('train', 1.0),))
  H.run_pipeline(H.make_config(tmp_path / 'in', tmp_path / 'out',
                               feature_dtype='float16', **options))
  H.write_wav(str(tmp_path / 'in' / 'a' / 'new.wav'), H.noise(WIN * 2))
  with pytest.raises(ConfigError, match='feature_dtype'):
    run_lib.run(H.make_config(tmp_path / 'in', tmp_path / 'out',
                              append=True, feature_dtype='float32',
                              **options))


@pytest.mark.slow
def test_values_beyond_float16s_range_are_said(tmp_path):
  """A linear spectrogram of a loud, long frame reaches past 65504: the
  run says which feature, how far, and what keeps the range."""
  import soundfile as sf
  n = 262144
  (tmp_path / 'in' / 'a').mkdir(parents=True)
  sf.write(str(tmp_path / 'in' / 'a' / 'dc.wav'), np.full(n, 0.9), 16000)
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir',
       str(tmp_path / 'in'), '--output_dir', str(tmp_path / 'out'),
       '--features', 'spectrogram,log_mel', '--win_len', str(n), '--n_fft',
       str(n), '--fft_hop', str(n), '--feature_dtype', 'float16',
       '--splits', 'train=1', '--quiet'],
      capture_output=True, text=True, cwd=tmp_path, timeout=600,
      env=dict(os.environ, PYTHONPATH=H.ROOT))
  assert proc.returncode == 0, proc.stderr[-3000:]
  warnings = [line for line in proc.stderr.splitlines() if 'WARNING' in line]
  assert len(warnings) == 1, proc.stderr
  assert 'spectrogram: values reach 117964' in warnings[0]
  assert 'bfloat16' in warnings[0]
  e = next(iter(numpy_dataset.numpy_dataset(str(tmp_path / 'out'), 'train')))
  assert np.isinf(e['spectrogram']).any() and np.isfinite(e['log_mel']).all()
