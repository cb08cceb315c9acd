"""--example_unit file end to end: one example per recording, its whole
length, written by real runs and read back by every reader, TFDS and
TFX."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.readers import tf_dataset as replay
from pipeline.commands import run as run_lib
from pipeline.commands import verify
from pipeline.contract import schema as schema_lib
from transforms.inputs import audio
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATE = 16000
FEATURES = ('signal', 'spectrogram', 'log_mel', 'mfcc', 'lpc')
# 24 utterances of 0.25-1.2 s, two too long or short, one at another rate
# and in stereo (resampled and mixed).
LENGTHS = [4000 + (i * 7919) % 15200 for i in range(24)]
OPTIONS = ['--example_unit', 'file', '--signal_dtype', 'int16',
           '--features', ','.join(FEATURES), '--sample_rate', str(RATE),
           '--max_seconds', '1.25', '--min_seconds', '0.2',
           '--max_shard_bytes', '400000']


def _corpus(d):
  paths = []
  for i, n in enumerate(LENGTHS):
    paths.append(H.write_wav(str(d / 'in' / ('yes', 'no')[i % 2] /
                                 f'u{i:02d}.wav'), H.noise(n, seed=i)))
  paths.append(H.write_wav(str(d / 'in' / 'no' / 'stereo.wav'),
                           H.noise(15000, 2, seed=99), rate=22050))
  H.write_wav(str(d / 'in' / 'yes' / 'too_long.wav'), H.noise(24000, seed=5))
  H.write_wav(str(d / 'in' / 'yes' / 'too_short.wav'), H.noise(2000, seed=6))
  return paths


def _run(input_dir, output_dir, *extra):
  return run_lib.run(['--input_dir', str(input_dir), '--output_dir',
                      str(output_dir), *OPTIONS, *extra,
                      '--runner=FnApiRunner'])


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
  d = tmp_path_factory.mktemp('file_unit')
  paths = _corpus(d)
  _run(d / 'in', d / 'out', '--array_record')
  meta = json.loads((d / 'out' / 'metadata.json').read_text())
  return d, paths, meta


def _config(meta):
  from pipeline.config import PipelineConfig
  return PipelineConfig.from_json(meta['config'])


def _source(path):
  """The recording at the dataset's rate, float64 (mixed, resampled)."""
  with open(path, 'rb') as f, sf.SoundFile(f) as wav:
    data, rate = wav.read(dtype='float64', always_2d=True), wav.samplerate
  mono = data.mean(axis=1)
  if rate != RATE:
    n = audio.resampled_length(len(mono), rate, RATE)
    mono = audio.resample_range(mono, 0, len(mono), rate, RATE, 0, n)
  return mono


def _by_path(examples):
  return {os.path.basename(str(e['filepath'])): e for e in examples}


def test_every_signal_is_its_recording_bit_for_bit(dataset):
  d, paths, meta = dataset
  got = _by_path(numpy_reader.numpy_dataset(str(d / 'out')))
  assert sorted(got) == sorted(os.path.basename(p) for p in paths)
  for path in paths:
    e = got[os.path.basename(path)]
    if 'stereo' in path:
      expected = audio.to_signal_dtype(_source(path), 'int16')
    else:  # int16 PCM read as int16: the file's own samples
      expected, _ = sf.read(path, dtype='int16')
    assert e['signal'].dtype == np.int16
    assert np.array_equal(e['signal'], expected), path
    assert e['num_samples'] == len(expected)
    assert e['win_start_idx'] == 0


def test_features_equal_an_independent_computation_on_the_whole_file(
    dataset):
  d, paths, meta = dataset
  config = _config(meta)
  got = _by_path(numpy_reader.numpy_dataset(str(d / 'out')))
  for path in paths:
    e = got[os.path.basename(path)]
    reference = H.reference_features(_source(path)[np.newaxis], config, RATE)
    frames = H.num_stft_frames(len(e['signal']), config.n_fft,
                               config.fft_hop)
    assert e['num_frames'] == frames
    for name in FEATURES:
      assert e[name].shape == reference[name][0].shape, (path, name)
      assert np.array_equal(e[name], reference[name][0]), (path, name)
      if name != 'signal':
        assert len(e[name]) == frames


def test_schema_is_variable_in_the_first_dimension_with_its_length(dataset):
  _, _, meta = dataset
  schema = meta['schema']
  assert schema['signal'] == {'dtype': 'int16', 'shape': [-1],
                              'encoding': 'raw_bytes',
                              'length_key': 'num_samples'}
  assert schema['spectrogram']['shape'] == [-1, 257]
  assert schema['spectrogram']['length_key'] == 'num_frames'
  assert schema['log_mel']['shape'] == [-1, 64]
  assert schema['mfcc']['shape'] == [-1, 13]
  assert schema['lpc']['shape'] == [-1, 12]
  for key in ('num_samples', 'num_frames'):
    assert schema[key] == {'dtype': 'int64', 'shape': [],
                           'encoding': 'int64_list'}


def test_too_long_and_too_short_recordings_are_rejected_and_counted(dataset):
  d, paths, meta = dataset
  counts = meta['counts']
  assert counts['files_seen'] == len(paths) + 2
  assert counts['files_rejected'] == 2
  assert counts['examples'] == len(paths)
  rejects = [json.loads(line) for line in
             (d / 'out' / 'rejects.jsonl').read_text().splitlines()]
  reasons = {os.path.basename(r['path']): r['reason'] for r in rejects}
  assert 'over --max_seconds=1.25' in reasons['too_long.wav']
  assert '1.500 s' in reasons['too_long.wav']
  assert 'under --min_seconds=0.2' in reasons['too_short.wav']
  assert {r['stage'] for r in rejects} == {'plan'}


def test_statistics_are_moments_over_all_values(dataset):
  d, _, meta = dataset
  stats = meta['splits']['train']['statistics']
  examples = list(numpy_reader.numpy_dataset(str(d / 'out')))
  for name in ('signal', 'spectrogram'):
    values = np.concatenate([e[name].ravel().astype(np.float64)
                             for e in examples])
    assert stats[name]['count'] == values.size
    assert stats[name]['mean'] == pytest.approx(values.mean(), rel=1e-9)
    assert stats[name]['std'] == pytest.approx(values.std(), rel=1e-9)
    assert stats[name]['max'] == values.max()


def test_shards_are_sized_by_the_length_of_their_recordings(dataset):
  _, _, meta = dataset
  split = meta['splits']['train']
  actual = math.ceil(split['example_bytes'] / 400000)
  assert actual > 1
  # Estimated from every recording's length before any was read.
  assert abs(len(split['shards']) - actual) <= 1


def test_numpy_batches_pad_to_the_longest_and_give_lengths(dataset):
  d, _, _ = dataset
  single = list(numpy_reader.numpy_dataset(str(d / 'out')))
  batches = list(numpy_reader.numpy_dataset(str(d / 'out'), batch_size=4))
  assert sum(len(b['signal_length']) for b in batches) == len(single)
  i = 0
  for batch in batches:
    assert batch['signal'].shape[1] == batch['signal_length'].max()
    assert batch['spectrogram_length'].dtype == np.int64
    for row in range(len(batch['signal_length'])):
      e = single[i]
      n, f = batch['signal_length'][row], batch['spectrogram_length'][row]
      assert n == len(e['signal']) and f == len(e['spectrogram'])
      assert np.array_equal(batch['signal'][row, :n], e['signal'])
      assert not batch['signal'][row, n:].any()  # padding is 0
      assert np.array_equal(batch['spectrogram'][row, :f], e['spectrogram'])
      assert not batch['spectrogram'][row, f:].any()
      i += 1


def test_tf_data_reads_whole_examples_and_pads_batches(dataset):
  d, _, _ = dataset
  single = _by_path(numpy_reader.numpy_dataset(str(d / 'out')))
  replayed = list(replay.replay_dataset(str(d / 'out')))
  assert len(replayed) == len(single)
  for element in replayed:
    e = single[os.path.basename(element['filepath'].numpy().decode())]
    assert 'signal_length' not in element
    for name in FEATURES:
      assert np.array_equal(element[name].numpy(), e[name])
  for batch in replay.replay_dataset(str(d / 'out'), batch_size=5):
    lengths = batch['log_mel_length'].numpy()
    assert batch['log_mel'].shape[1] == lengths.max()
    for row, path in enumerate(batch['filepath'].numpy()):
      e = single[os.path.basename(path.decode())]
      n = len(e['signal'])
      assert batch['signal_length'][row] == n
      assert np.array_equal(batch['signal'][row, :n], e['signal'])
      assert not batch['signal'][row, n:].numpy().any()
      assert np.array_equal(batch['log_mel'][row, :lengths[row]],
                            e['log_mel'])


def _padded_fraction(batches, key):
  real = padded = 0
  for batch in batches:
    lengths = np.asarray(batch[f'{key}_length'])
    real += int(lengths.sum())
    padded += int(lengths.max()) * len(lengths)
  return 1 - real / padded


def test_bucketing_by_length_reduces_padding(dataset):
  d, paths, _ = dataset
  out = str(d / 'out')
  plain = list(replay.replay_dataset(out, batch_size=4,
                                     features=['signal']))
  bucketed = list(replay.replay_dataset(
      out, batch_size=4, features=['signal'],
      bucket_boundaries=[6000, 8000, 10000, 12000, 14000, 16000, 18000]))
  assert sum(len(b['signal_length']) for b in bucketed) == len(paths)
  for batch in bucketed:
    lengths = batch['signal_length'].numpy()
    assert batch['signal'].shape[1] == lengths.max()
  assert _padded_fraction(bucketed, 'signal') < \
      _padded_fraction(plain, 'signal') / 2
  with pytest.raises(replay.DatasetError, match='needs a batch_size'):
    replay.replay_dataset(out, bucket_boundaries=[100])


def test_torch_pads_batches_and_groups_lengths(dataset):
  import torch
  from pipeline.readers import torch_dataset
  d, paths, _ = dataset
  out = str(d / 'out')
  data = torch_dataset.WavbeamIterableDataset(out, batch_size=3,
                                              features=['signal', 'mfcc'])
  loader = torch.utils.data.DataLoader(data, batch_size=None, num_workers=2)
  seen = 0
  for batch in loader:
    lengths = batch['signal_length']
    assert batch['signal'].shape[1] == int(lengths.max())
    assert batch['mfcc'].shape[1] == int(batch['mfcc_length'].max())
    for row, n in enumerate(lengths.tolist()):
      assert not batch['signal'][row, n:].any()
    seen += len(lengths)
  assert seen == len(paths)
  mapped = torch_dataset.WavbeamMapDataset(out, features=['signal'])
  lengths = mapped.lengths()
  assert sorted(lengths) == sorted(
      len(e['signal']) for e in numpy_reader.numpy_dataset(out))
  sampler = torch_dataset.LengthGroupedBatchSampler(lengths, 4, seed=1)
  loader = torch.utils.data.DataLoader(mapped, batch_sampler=sampler,
                                       collate_fn=mapped.collate)
  grouped = list(loader)
  assert len(grouped) == len(sampler)
  assert sum(len(b['signal_length']) for b in grouped) == len(paths)
  plain = torch.utils.data.DataLoader(mapped, batch_size=4, shuffle=True,
                                      collate_fn=mapped.collate,
                                      generator=torch.Generator().manual_seed(1))
  assert _padded_fraction(grouped, 'signal') < \
      _padded_fraction(list(plain), 'signal')


def test_tfds_reads_the_dataset_back(dataset):
  import tensorflow_datasets as tfds
  d, _, meta = dataset
  single = _by_path(numpy_reader.numpy_dataset(str(d / 'out')))
  builder = tfds.builder_from_directory(str(d / 'out'))
  assert builder.info.features['spectrogram'].shape == (None, 257)
  assert builder.info.features['signal'].shape == (None,)
  seen = 0
  for e in tfds.as_numpy(builder.as_dataset(split='train')):
    ours = single[os.path.basename(e['filepath'].decode())]
    for name in FEATURES:
      assert np.array_equal(e[name], ours[name]), name
    seen += 1
  assert seen == meta['splits']['train']['num_examples']


def test_tfx_schema_states_the_variable_dimension(dataset):
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2
  from tfx_bsl.public import tfxio
  d, _, meta = dataset
  schema = text_format.Parse((d / 'out' / 'schema.pbtxt').read_text(),
                             schema_pb2.Schema())
  features = {f.name: f for f in schema.feature}
  spectrogram = features['spectrogram']
  assert not spectrogram.HasField('shape')
  assert spectrogram.value_count.min == 257
  assert 'wavbeam.length_key:num_frames' in spectrogram.annotation.tag
  assert 'wavbeam.shape:-1' in features['signal'].annotation.tag
  source = tfxio.TFExampleRecord(
      file_pattern=[str(d / 'out' / s['file'])
                    for s in meta['splits']['train']['shards']],
      schema=schema)
  spec = source.TensorAdapter().TypeSpecs()['spectrogram']
  assert spec.shape.as_list() == [None, None]  # ragged rows


def test_verify_and_inspect_describe_it(dataset, capsys):
  d, _, _ = dataset
  out = str(d / 'out')
  assert verify.main([out]) == 0
  proc = subprocess.run([sys.executable, '-m', 'pipeline.inspect_dataset',
                         out], cwd=ROOT, capture_output=True, text=True,
                        timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert ('spectrogram: float32 shape [-1, 257], first dimension per '
          'example in num_frames') in proc.stdout


def test_write_to_tfrecord_sink_writes_the_same_examples(dataset):
  d, _, _ = dataset
  _run(d / 'in', d / 'sink', '--sink', 'write_to_tfrecord')
  ours = _by_path(numpy_reader.numpy_dataset(str(d / 'out')))
  theirs = _by_path(numpy_reader.numpy_dataset(str(d / 'sink')))
  assert sorted(theirs) == sorted(ours)
  for name, e in theirs.items():
    for key in FEATURES:
      assert np.array_equal(e[key], ours[name][key])


def test_a_sweep_writes_every_variant_from_one_read(dataset):
  d, _, _ = dataset
  (d / 'sweep.toml').write_text('[coarse]\nn_fft = 1024\nfft_hop = 512\n'
                                '[fine]\nn_fft = 256\nfft_hop = 128\n')
  _run(d / 'in', d / 'sweep', '--variants', str(d / 'sweep.toml'))
  ours = _by_path(numpy_reader.numpy_dataset(str(d / 'out')))
  for variant, bins in (('coarse', 513), ('fine', 129)):
    got = _by_path(numpy_reader.numpy_dataset(str(d / 'sweep'),
                                              variant=variant))
    assert sorted(got) == sorted(ours)
    meta = json.loads((d / 'sweep' / variant / 'metadata.json').read_text())
    assert meta['schema']['spectrogram']['shape'] == [-1, bins]
    for name, e in got.items():
      assert np.array_equal(e['signal'], ours[name]['signal'])
      assert e['spectrogram'].shape == (e['num_frames'], bins)


def test_an_empty_result_still_has_the_variable_schema(tmp_path):
  H.write_wav(str(tmp_path / 'in' / 'a' / 'long.wav'), H.noise(40000))
  _run(tmp_path / 'in', tmp_path / 'out')
  meta = json.loads((tmp_path / 'out' / 'metadata.json').read_text())
  assert meta['counts']['examples'] == 0
  spec = schema_lib.FeatureSpec.from_json(meta['schema']['signal'])
  assert spec.variable and spec.length_key == 'num_samples'


def test_the_featurizer_gives_a_recording_its_example(dataset):
  from pipeline import featurizer as featurizer_lib
  d, paths, _ = dataset
  out = str(d / 'out')
  fn = featurizer_lib.featurizer(out)
  got = _by_path(numpy_reader.numpy_dataset(out))
  for path in (paths[0], paths[-1]):  # one resampled and mixed
    computed = fn(path)
    for name in FEATURES:
      assert computed[name].shape == (1, *got[os.path.basename(path)][
          name].shape)
      assert np.array_equal(computed[name][0],
                            got[os.path.basename(path)][name])
  with pytest.raises(featurizer_lib.FeaturizerError, match='too long: '):
    fn(str(d / 'in' / 'yes' / 'too_long.wav'))
  with pytest.raises(featurizer_lib.FeaturizerError, match='--example_unit '
                     'file, which the TensorFlow featurizer does not'):
    featurizer_lib.tf_featurizer(out)


def test_num_elems_takes_the_first_recordings(dataset, tmp_path):
  d, paths, _ = dataset
  _run(d / 'in', tmp_path / 'out', '--num_elems', '3', '--no_shuffle')
  got = [os.path.basename(str(e['filepath']))
         for e in numpy_reader.numpy_dataset(str(tmp_path / 'out'))]
  assert len(got) == 3
  assert got == sorted(got)  # in file order


def test_append_adds_recordings_as_a_part(tmp_path):
  for i in range(3):
    H.write_wav(str(tmp_path / 'in' / 'a' / f'{i}.wav'),
                H.noise(8000 + 3000 * i, seed=i))
  _run(tmp_path / 'in', tmp_path / 'out')
  H.write_wav(str(tmp_path / 'in' / 'a' / '3.wav'), H.noise(19000, seed=3))
  _run(tmp_path / 'in', tmp_path / 'out', '--append')
  got = _by_path(numpy_reader.numpy_dataset(str(tmp_path / 'out')))
  assert {k: len(e['signal']) for k, e in got.items()} == {
      '0.wav': 8000, '1.wav': 11000, '2.wav': 14000, '3.wav': 19000}
  assert verify.main([str(tmp_path / 'out')]) == 0


def test_inspect_plots_whole_recordings(dataset, tmp_path):
  pytest.importorskip('matplotlib')
  d, _, _ = dataset
  figure = tmp_path / 'f.png'
  proc = subprocess.run([sys.executable, '-m', 'pipeline.inspect_dataset',
                         str(d / 'out'), '--plot', str(figure), '--n', '2'],
                        cwd=ROOT, capture_output=True, text=True,
                        timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert figure.stat().st_size > 10000


def test_normalized_batches_keep_their_padding_at_zero(dataset):
  d, _, meta = dataset
  stats = meta['splits']['train']['statistics']['log_mel']
  single = _by_path(numpy_reader.numpy_dataset(str(d / 'out')))
  padded = 0
  for batch in replay.replay_dataset(str(d / 'out'), batch_size=6,
                                     normalize=['log_mel']):
    lengths = batch['log_mel_length'].numpy()
    for row, path in enumerate(batch['filepath'].numpy()):
      n = lengths[row]
      e = single[os.path.basename(path.decode())]
      expected = (e['log_mel'].astype(np.float64) - stats['mean']) / \
          stats['std']
      np.testing.assert_allclose(batch['log_mel'][row, :n], expected,
                                 rtol=1e-5, atol=1e-5)
      assert not batch['log_mel'][row, n:].numpy().any()
      padded += int(lengths.max() - n)
  assert padded > 0  # (x - mean) / std of a zero would not be 0


def test_a_recording_with_nan_is_rejected_when_read(tmp_path):
  H.write_wav(str(tmp_path / 'in' / 'a' / 'good.wav'), H.noise(9000))
  bad = H.noise(9000, seed=1)
  bad[4000] = np.nan
  H.write_wav(str(tmp_path / 'in' / 'a' / 'nan.wav'), bad, subtype='FLOAT')
  _run(tmp_path / 'in', tmp_path / 'out')
  meta = json.loads((tmp_path / 'out' / 'metadata.json').read_text())
  assert meta['counts']['examples'] == 1
  assert meta['counts']['rejections'] == 1
  rejects = [json.loads(line) for line in
             (tmp_path / 'out' / 'rejects.jsonl').read_text().splitlines()]
  assert [(os.path.basename(r['path']), r['stage'], r['reason'])
          for r in rejects] == [('nan.wav', 'read',
                                 'non-finite samples (NaN or Inf)')]
  assert rejects[0]['frames'] == [0, 9000]


def rms(windows, sample_rate):
  """A feature of one value per recording: its root mean square."""
  del sample_rate
  return np.sqrt(np.mean(np.square(windows, dtype=np.float64), axis=1,
                         keepdims=True)).astype(np.float32)


def test_a_feature_function_of_your_own_sees_the_whole_recording(tmp_path):
  from pipeline.config import ConfigError, PipelineConfig
  lengths = (7000, 12000)
  for i, n in enumerate(lengths):
    H.write_wav(str(tmp_path / 'in' / 'a' / f'{i}.wav'), H.noise(n, seed=i))
  config = PipelineConfig(input_dir=str(tmp_path / 'in'),
                          output_dir=str(tmp_path / 'out'),
                          example_unit='file', features=('signal',),
                          signal_dtype='float32')
  run_lib.run(config, ['--runner=FnApiRunner'], extra_features={'rms': rms})
  meta = json.loads((tmp_path / 'out' / 'metadata.json').read_text())
  assert meta['schema']['rms']['shape'] == [1]  # fixed: not a length
  for e in numpy_reader.numpy_dataset(str(tmp_path / 'out')):
    assert len(e['signal']) in lengths
    assert e['rms'] == rms(e['signal'][np.newaxis], RATE)[0]
  with pytest.raises(ConfigError, match="--manifest_extra_columns="
                     "'num_frames': is a key every example already has"):
    PipelineConfig(input_dir='in', output_dir='out', example_unit='file',
                   manifest='m.csv', manifest_extra_columns='num_frames')


def test_clips_of_one_length_are_computed_together_exactly(tmp_path):
  # In file order, the equal-length clips follow each other and share
  # feature batches; the odd lengths between them end a batch.
  # 16-bit clips are read as their stored values, a 24-bit one among
  # them as full-scale floats: it ends their batch too.
  lengths = [9000] * 7 + [7000] + [9000] * 6 + [5000, 5000, 5000]
  wide = {3, 11}
  paths = [H.write_wav(str(tmp_path / 'in' / 'yes' / f'c{i:02d}.wav'),
                       H.noise(n, seed=i),
                       subtype='PCM_24' if i in wide else 'PCM_16')
           for i, n in enumerate(lengths)]
  _run(tmp_path / 'in', tmp_path / 'out', '--no_shuffle')
  meta = json.loads((tmp_path / 'out' / 'metadata.json').read_text())
  config = _config(meta)
  got = _by_path(numpy_reader.numpy_dataset(str(tmp_path / 'out')))
  assert sorted(got) == sorted(os.path.basename(p) for p in paths)
  for i, path in enumerate(paths):
    e = got[os.path.basename(path)]
    expected = (audio.to_signal_dtype(_source(path), 'int16') if i in wide
                else sf.read(path, dtype='int16')[0])
    assert np.array_equal(e['signal'], expected), path
    reference = H.reference_features(_source(path)[np.newaxis], config, RATE)
    assert e['num_samples'] == len(e['signal'])
    assert e['num_frames'] == len(reference['spectrogram'][0])
    for name in FEATURES:
      assert np.array_equal(e[name], reference[name][0]), (path, name)


def test_silence_recordings_are_whole_examples_of_their_class(tmp_path):
  words = [H.write_wav(str(tmp_path / 'in' / w / f'{w}{i}.wav'),
                       H.noise(8000 + 1000 * i, seed=i))
           for w in ('yes', 'no') for i in range(2)]
  short = H.write_wav(str(tmp_path / 'in' / '_background_noise_' /
                          'short.wav'), H.noise(12000, seed=7))
  H.write_wav(str(tmp_path / 'in' / '_background_noise_' / 'long.wav'),
              H.noise(30000, seed=8))
  _run(tmp_path / 'in', tmp_path / 'out',
       '--silence_from', '_background_noise_/*')
  meta = json.loads((tmp_path / 'out' / 'metadata.json').read_text())
  assert meta['classes'] == ['_silence_', 'no', 'yes']
  got = _by_path(numpy_reader.numpy_dataset(str(tmp_path / 'out')))
  assert sorted(got) == sorted(os.path.basename(p) for p in words + [short])
  silence = got['short.wav']
  assert silence['class'] == '_silence_' and silence['target'] == 0
  assert np.array_equal(silence['signal'], sf.read(short, dtype='int16')[0])
  rejects = [json.loads(line) for line in
             (tmp_path / 'out' / 'rejects.jsonl').read_text().splitlines()]
  assert [(os.path.basename(r['path']), r['stage']) for r in rejects] == [
      ('long.wav', 'plan')]
  assert 'over --max_seconds=1.25' in rejects[0]['reason']
  assert meta['counts']['files_rejected'] == 1


def _peak_of_one_recording(windows, sample_rate):
  """A feature function written for one recording at a time."""
  del sample_rate
  assert windows.shape[0] == 1, windows.shape
  return np.abs(windows[0]).max().reshape(1, 1)


def test_feature_functions_get_one_recording_at_a_time(tmp_path):
  lengths = [9000] * 6 + [7000, 7000]
  paths = [H.write_wav(str(tmp_path / 'in' / 'yes' / f'c{i:02d}.wav'),
                       H.noise(n, seed=i)) for i, n in enumerate(lengths)]
  run_lib.run(['--input_dir', str(tmp_path / 'in'), '--output_dir',
               str(tmp_path / 'out'), '--example_unit', 'file',
               '--no_shuffle', '--features', 'signal',
               '--runner=FnApiRunner'],
              extra_features={'peak': _peak_of_one_recording})
  got = _by_path(numpy_reader.numpy_dataset(str(tmp_path / 'out')))
  for path in paths:
    e = got[os.path.basename(path)]
    samples, _ = sf.read(path, dtype='float32')
    assert e['peak'].shape == (1,)
    assert e['peak'][0] == np.abs(samples).max(), path
