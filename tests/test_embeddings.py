"""The embedding feature: a model's hidden states per example, checked
against a hand-written torch (or onnxruntime) loop over the same files,
for tiny random-weight models built here (no network): a transformers
Wav2Vec2, Whisper encoder and CLAP saved with save_pretrained, a TorchScript
and an ONNX conv net; in windows and whole recordings, pooled and not,
swept over layers, appended, served by the featurizer, and with one of
Beam's own model handlers."""

import dataclasses
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

torch = pytest.importorskip('torch')
transformers = pytest.importorskip('transformers')

from pipeline import featurizer as featurizer_lib  # noqa: E402
from pipeline.config import ConfigError, PipelineConfig  # noqa: E402
from pipeline.readers import numpy_dataset  # noqa: E402
from transforms.features import embedding_models  # noqa: E402
from tests import helpers as H  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = H.ROOT
WIN = 16000
FLAGS = ['--win_len', str(WIN), '--hop_len', str(WIN), '--splits',
         'train=0.5,test=0.5', '--quiet']


def _python(script: str, cwd) -> str:
  """The stdout of `script` run by a fresh interpreter, which must end
  well."""
  proc = subprocess.run([sys.executable, '-c', script], capture_output=True,
                        text=True, cwd=cwd, timeout=900,
                        env=dict(os.environ, PYTHONPATH=ROOT))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stdout


def _cli(*args, cwd):
  return subprocess.run([sys.executable, '-m', 'pipeline.run', *args],
                        capture_output=True, text=True, cwd=cwd,
                        env=dict(os.environ, PYTHONPATH=ROOT), timeout=900)


class ConvNet(torch.nn.Module):
  """Two layers of strided convolutions: [n, samples] -> two [n, frames,
  channels] outputs."""

  def __init__(self):
    super().__init__()
    self.first = torch.nn.Conv1d(1, 8, 400, stride=320)
    self.second = torch.nn.Conv1d(8, 8, 3, padding=1)

  def forward(self, x):
    a = torch.relu(self.first(x[:, None]))
    b = torch.tanh(self.second(a))
    return a.transpose(1, 2), b.transpose(1, 2)


def _wav2vec2(folder, seed=0, norm='group'):
  """norm 'group': a wav2vec2-base-like feature encoder, whose group norm
  spans the whole input (no attention mask); 'layer': a
  wav2vec2-large-lv60-like one, that takes the attention mask."""
  torch.manual_seed(seed)
  config = transformers.Wav2Vec2Config(
      hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
      intermediate_size=64, conv_dim=(32, 32, 32), conv_stride=(5, 4, 4),
      conv_kernel=(10, 4, 4), num_feat_extract_layers=3, vocab_size=10,
      num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
      feat_extract_norm=norm, do_stable_layer_norm=norm == 'layer')
  transformers.Wav2Vec2Model(config).eval().save_pretrained(folder)
  transformers.Wav2Vec2FeatureExtractor(
      do_normalize=True,
      return_attention_mask=norm == 'layer').save_pretrained(folder)
  return str(folder)


@pytest.fixture(scope='module')
def models(tmp_path_factory):
  root = tmp_path_factory.mktemp('models')
  torch.manual_seed(1)
  net = ConvNet().eval()
  scripted = str(root / 'convnet.pt')
  torch.jit.script(net).save(scripted)
  exported = str(root / 'convnet.onnx')
  torch.onnx.export(net, (torch.zeros(2, WIN),), exported,
                    input_names=['waveform'], output_names=['a', 'b'],
                    dynamic_axes={'waveform': {0: 'n', 1: 'samples'},
                                  'a': {0: 'n', 1: 'frames'},
                                  'b': {0: 'n', 1: 'frames'}},
                    dynamo=False)
  return {'wav2vec2': _wav2vec2(root / 'w2v'),
          'wav2vec2-layer': _wav2vec2(root / 'w2v-layer', 2, 'layer'),
          'torchscript': scripted,
          'onnx': exported, 'net': net}


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
  root = tmp_path_factory.mktemp('speech')
  for i in range(6):
    H.write_wav(str(root / 'in' / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(WIN * (1 + i % 3) + 777 * i, seed=i, scale=0.3))
  return root


def _reference(model_kind, models, waveform: np.ndarray) -> np.ndarray:
  """Every hidden state of one example, [layers, frames, dim], by the
  model's own library, one example at a time."""
  x = waveform.astype(np.float32)
  if model_kind.startswith('wav2vec2'):
    x = (x - x.mean()) / np.sqrt(x.var() + 1e-7)
    net = transformers.AutoModel.from_pretrained(models[model_kind]).eval()
    with torch.no_grad():
      out = net(torch.from_numpy(x[None]), output_hidden_states=True)
    return torch.stack(out.hidden_states, 1)[0].numpy()
  if model_kind == 'torchscript':
    with torch.no_grad():
      a, b = models['net'](torch.from_numpy(x[None]))
    return torch.stack([a, b], 1)[0].numpy()
  import onnxruntime
  session = onnxruntime.InferenceSession(models['onnx'])
  return np.stack(session.run(None, {'waveform': x[None]}), 1)[0]


def _stored(out, split):
  return {(str(e['filepath']), int(e['win_start_idx'])): e
          for e in numpy_dataset.numpy_dataset(str(out), split)}


def _all_stored(out):
  meta = json.loads((out / 'metadata.json').read_text())
  found = {}
  for split in meta['splits']:
    found.update(_stored(out, split))
  return meta, found


@pytest.mark.parametrize('kind', ['wav2vec2', 'torchscript', 'onnx'])
def test_each_window_equals_the_models_own_loop(corpus, models, kind,
                                                tmp_path):
  out = tmp_path / 'out'
  proc = _cli('--input_dir', str(corpus / 'in'), '--output_dir', str(out),
              '--features', 'signal,embedding', '--embedding_model',
              models[kind], '--embedding_layers',
              '0,1,2' if kind == 'wav2vec2' else '0,1', *FLAGS, cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  meta, stored = _all_stored(out)
  windows = 0
  for path in sorted({p for p, _ in stored}):
    data, rate = sf.read(path, dtype='float64')
    assert rate == 16000
    for start in range(0, len(data) - WIN + 1, WIN):
      expected = _reference(kind, models, data[start:start + WIN])
      got = stored[(path, start)]['embedding']
      # [frames, layers, dim] against the model's [layers, frames, dim]
      np.testing.assert_allclose(got, expected.transpose(1, 0, 2),
                                 rtol=1e-4, atol=1e-5)
      windows += 1
  assert windows == len(stored) == meta['counts']['examples']
  recorded = meta['features']['embedding']
  assert recorded['model'] == models[kind]
  assert recorded['sha256'] == embedding_models.digest(models[kind])
  assert recorded['layers'] == ('0,1,2' if kind == 'wav2vec2' else '0,1')
  assert recorded['device'] == 'cpu' and 'torch' in recorded['libraries']
  assert recorded['sample_rate'] == 16000
  assert recorded['normalize'] == (kind == 'wav2vec2')


def test_whole_recordings_do_not_depend_on_their_batch(corpus, models,
                                                      tmp_path):
  """--example_unit file: 16 recordings of mixed lengths, pooled and
  not; each equals the model run on it alone."""
  for i in range(16):
    H.write_wav(str(tmp_path / 'in' / 'c' / f'{i}.wav'),
                H.noise(9000 + 1500 * (i % 5), seed=40 + i, scale=0.3))
  for pool in ('none', 'mean'):
    out = tmp_path / pool
    proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir',
                str(out), '--example_unit', 'file', '--features',
                'embedding', '--embedding_model', models['wav2vec2'],
                '--embedding_layers', '1,2', '--embedding_pool', pool,
                '--splits', 'train=1', '--quiet', cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta, stored = _all_stored(out)
    assert len(stored) == 16
    for (path, _), e in stored.items():
      data, _ = sf.read(path, dtype='float64')
      expected = _reference('wav2vec2', models, data)[[1, 2]]
      expected = expected.transpose(1, 0, 2)
      if pool == 'mean':
        expected = expected.mean(axis=0)
      else:
        assert int(e['num_embedding_frames']) == expected.shape[0]
      np.testing.assert_allclose(e['embedding'], expected, rtol=1e-4,
                                 atol=1e-5)


@pytest.mark.parametrize('kind', ['wav2vec2-layer', 'wav2vec2'])
def test_mixed_lengths_share_a_padded_batch_where_the_model_allows(
    models, kind, tmp_path):
  """--example_unit file, 16 recordings of 6 lengths: a model that takes
  the attention mask runs them in padded batches of mixed lengths, one
  whose feature encoder's group norm spans the padding in batches of one
  length; each example equals the model run on it alone."""
  from pipeline import run as run_lib
  from tests.plugins import counting_handler
  lengths = [9000 + 1500 * (i % 6) for i in range(16)]
  for i, length in enumerate(lengths):
    H.write_wav(str(tmp_path / 'in' / 'c' / f'{i}.wav'),
                H.noise(length, seed=60 + i, scale=0.3))
  log = tmp_path / 'passes'
  run_lib.run(PipelineConfig(
      input_dir=str(tmp_path / 'in'), output_dir=str(tmp_path / 'out'),
      example_unit='file', features=('embedding',),
      splits=(('train', 1.0),), embedding_model=models[kind],
      embedding_layers='0,1,2'),
      model_handler=counting_handler.CountingHandler(models[kind],
                                                     str(log)))
  passes = [tuple(map(int, line.split()))
            for line in log.read_text().splitlines()]
  assert sum(size for size, _ in passes) == 16
  if kind == 'wav2vec2':
    assert {mixed for _, mixed in passes} == {1}
    assert len(passes) >= 6
  else:
    assert max(mixed for _, mixed in passes) > 1
    assert len(passes) < 6
  _, stored = _all_stored(tmp_path / 'out')
  assert len(stored) == 16
  for (path, _), e in stored.items():
    data, _ = sf.read(path, dtype='float64')
    expected = _reference(kind, models, data).transpose(1, 0, 2)
    assert int(e['num_embedding_frames']) == expected.shape[0]
    np.testing.assert_allclose(e['embedding'], expected, rtol=1e-4,
                               atol=1e-5)


def test_two_runs_give_the_same_bytes_and_the_featurizer_the_same_values(
    corpus, models, tmp_path):
  args = ['--input_dir', str(corpus / 'in'), '--features', 'embedding',
          '--embedding_model', models['wav2vec2'], '--embedding_pool',
          'mean', *FLAGS]

  def digests(folder):
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
            for name in sorted(os.listdir(folder))
            if name.startswith('wavbeam-')}

  for name in ('one', 'two'):
    proc = _cli(*args, '--output_dir', str(tmp_path / name), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
  assert digests(tmp_path / 'one') == digests(tmp_path / 'two')
  _, stored = _all_stored(tmp_path / 'one')
  featurize = featurizer_lib.featurizer(str(tmp_path / 'one'))
  path = sorted({p for p, _ in stored})[0]
  live = featurize(path)['embedding']
  rows = [e['embedding'] for (p, _), e in sorted(stored.items())
          if p == path]
  np.testing.assert_allclose(live, np.stack(rows), rtol=1e-4, atol=1e-5)


def test_a_changed_model_is_refused_by_append_and_featurizer(corpus,
                                                             tmp_path):
  model = _wav2vec2(tmp_path / 'model')
  corpus_dir = tmp_path / 'in'
  for i in range(4):
    H.write_wav(str(corpus_dir / 'a' / f'{i}.wav'), H.noise(WIN, seed=i))
  args = ['--input_dir', str(corpus_dir), '--output_dir', str(tmp_path /
          'out'), '--features', 'embedding', '--embedding_model', model,
          '--embedding_pool', 'mean', *FLAGS]
  assert _cli(*args, cwd=tmp_path).returncode == 0
  H.write_wav(str(corpus_dir / 'a' / 'new.wav'), H.noise(WIN, seed=9))
  appended = _cli(*args, '--append', cwd=tmp_path)
  assert appended.returncode == 0, appended.stderr[-3000:]
  assert 'appended 1 new recordings' in appended.stderr
  _wav2vec2(tmp_path / 'model', seed=5)  # other weights, same folder
  H.write_wav(str(corpus_dir / 'a' / 'newer.wav'), H.noise(WIN, seed=10))
  refused = _cli(*args, '--append', cwd=tmp_path)
  assert refused.returncode == 2, refused.stderr[-3000:]
  assert 'embedding_model' in refused.stderr
  assert 'files differ from those the dataset was written with' in \
      refused.stderr
  with pytest.raises(featurizer_lib.FeaturizerError,
                     match='files differ from those the dataset'):
    featurizer_lib.featurizer(str(tmp_path / 'out'))


def test_a_sweep_over_layers_and_pooling_runs_the_model_once(models,
                                                             tmp_path):
  """Three variants of one model: as many forward passes over the audio
  as one run of one of them (counted by a model handler of the
  caller's own), and the same batches. 72 windows, one shard a variant:
  run by a fresh interpreter, whose two local worker processes fork (a
  process that has started threads, as TensorFlow's leave, runs the
  tasks in its own thread), each run cuts its shard between them, on the
  grid of the batches the shard written whole computes."""
  for i in range(4):
    H.write_wav(str(tmp_path / 'in' / 'ab'[i % 2] / f'{i}.wav'),
                H.noise(WIN * 18 + 777 * i, seed=i, scale=0.3))
  variants = tmp_path / 'v.toml'
  variants.write_text('[last]\n[first]\nembedding_layers = "0"\n'
                      '[pooled]\nembedding_pool = "mean"\n')
  script = f"""
from pipeline import run as run_lib
from pipeline.config import PipelineConfig
from tests.plugins import counting_handler
for name, more in (('sweep', {{'variants': {str(variants)!r}}}),
                   ('alone', {{}})):
  log = {str(tmp_path)!r} + f'/{{name}}.calls'
  run_lib.run(PipelineConfig(
      output_dir={str(tmp_path)!r} + '/' + name,
      input_dir={str(tmp_path / 'in')!r}, win_len={WIN},
      features=('embedding',), splits=(('train', 1.0),),
      embedding_model={models['torchscript']!r}, embedding_layers='0,1',
      **more),
      model_handler=counting_handler.CountingHandler(
          {models['torchscript']!r}, log))
  with open(log) as f:
    print('passes', name, sorted(f.read().splitlines()))
"""
  passes = dict(line.split(' ', 2)[1:]
                for line in _python(script, tmp_path).splitlines()
                if line.startswith('passes '))
  assert passes['sweep'] == passes['alone'] == "['32 1', '32 1', '8 1']"
  last = _all_stored(tmp_path / 'sweep' / 'last')[1]
  first = _all_stored(tmp_path / 'sweep' / 'first')[1]
  pooled = _all_stored(tmp_path / 'sweep' / 'pooled')[1]
  alone = _all_stored(tmp_path / 'alone')[1]
  assert last.keys() == first.keys() == pooled.keys() == alone.keys()
  for key, e in last.items():
    np.testing.assert_array_equal(e['embedding'], alone[key]['embedding'])
    np.testing.assert_array_equal(first[key]['embedding'][:, 0],
                                  e['embedding'][:, 0])
    np.testing.assert_allclose(pooled[key]['embedding'],
                               e['embedding'].mean(axis=0), rtol=1e-6,
                               atol=1e-7)


def test_one_of_beams_model_handlers_computes_the_feature(corpus, models,
                                                          tmp_path):
  from apache_beam.ml.inference.pytorch_inference import (
      PytorchModelHandlerTensor)
  from pipeline import run as run_lib
  handler = PytorchModelHandlerTensor(
      torch_script_model_path=models['torchscript'],
      inference_fn=_second_output)
  config = PipelineConfig(
      input_dir=str(corpus / 'in'), output_dir=str(tmp_path / 'out'),
      win_len=WIN, features=('embedding',),
      embedding_model=models['torchscript'], splits=(('train', 1.0),))
  run_lib.run(config, model_handler=handler)
  _, stored = _all_stored(tmp_path / 'out')
  for (path, start), e in stored.items():
    data, _ = sf.read(path, dtype='float64')
    expected = _reference('torchscript', models, data[start:start + WIN])
    np.testing.assert_allclose(e['embedding'][:, 0], expected[1],
                               rtol=1e-4, atol=1e-5)
  # metadata.json says what computed them, and what it was given; the
  # featurizer and --append, which cannot run that handler, refuse.
  recorded = json.loads((tmp_path / 'out' / 'metadata.json').read_text())[
      'features']['embedding']
  assert recorded['handler'] == ('apache_beam.ml.inference.pytorch_inference.'
                                 'PytorchModelHandlerTensor')
  assert recorded['model'] == models['torchscript']
  assert (recorded['sample_rate'], recorded['normalize']) == (16000, False)
  assert 'sha256' not in recorded
  from pipeline.featurizer import FeaturizerError, featurizer
  with pytest.raises(FeaturizerError, match='computed by a model handler '
                     "of the caller's"):
    featurizer(str(tmp_path / 'out'))


def test_an_append_with_a_handler_of_its_own_is_refused(corpus, models,
                                                       tmp_path):
  """Embeddings computed from --embedding_model's files are not mixed with
  a caller's model handler's in one dataset."""
  from apache_beam.ml.inference.pytorch_inference import (
      PytorchModelHandlerTensor)
  from pipeline import run as run_lib
  config = PipelineConfig(
      input_dir=str(corpus / 'in'), output_dir=str(tmp_path / 'out'),
      win_len=WIN, features=('embedding',),
      embedding_model=models['torchscript'], splits=(('train', 1.0),))
  run_lib.run(config)
  handler = PytorchModelHandlerTensor(
      torch_script_model_path=models['torchscript'],
      inference_fn=_second_output)
  with pytest.raises(ConfigError, match='this append gives a model handler '
                     'of its own'):
    run_lib.run(dataclasses.replace(config, append=True),
                model_handler=handler)


def _second_output(batch, model, device, inference_args, model_id=None):
  from apache_beam.ml.inference.base import PredictionResult
  with torch.no_grad():
    _, second = model(torch.stack(batch))
  return [PredictionResult(x, y) for x, y in zip(batch, second)]


def test_the_whisper_encoder_keeps_the_frames_of_the_audio(corpus,
                                                           tmp_path):
  config = transformers.WhisperConfig(
      d_model=32, encoder_layers=2, decoder_layers=1,
      encoder_attention_heads=2, decoder_attention_heads=2,
      encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=80,
      vocab_size=100, pad_token_id=0, bos_token_id=1, eos_token_id=2,
      decoder_start_token_id=1, max_source_positions=1500)
  folder = tmp_path / 'whisper'
  torch.manual_seed(0)
  transformers.WhisperModel(config).eval().save_pretrained(folder)
  transformers.WhisperFeatureExtractor(feature_size=80).save_pretrained(
      folder)
  out = tmp_path / 'out'
  proc = _cli('--input_dir', str(corpus / 'in'), '--output_dir', str(out),
              '--features', 'embedding', '--embedding_model', str(folder),
              '--embedding_layers', '0,2', *FLAGS, cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  meta, stored = _all_stored(out)
  assert meta['schema']['embedding']['shape'] == [50, 2, 32]
  net = transformers.WhisperModel.from_pretrained(folder).get_encoder()
  extractor = transformers.WhisperFeatureExtractor.from_pretrained(folder)
  (path, start), e = sorted(stored.items())[0]
  data, _ = sf.read(path, dtype='float32')
  features = extractor(data[start:start + WIN], sampling_rate=16000,
                       return_tensors='pt')['input_features']
  with torch.no_grad():
    states = net(features, output_hidden_states=True).hidden_states
  expected = torch.stack([states[0][0, :50], states[2][0, :50]], 1)
  np.testing.assert_allclose(e['embedding'], expected.numpy(), rtol=1e-4,
                             atol=1e-5)


def test_clap_gives_each_recording_its_audio_embedding(tmp_path):
  """CLAP (tiny, random weights): one vector per recording, the model's
  audio embedding of it alone, at its rate (48 kHz); --max_seconds over
  the 10 s it takes is refused before the run, and a longer recording is
  then rejected with its reason."""
  torch.manual_seed(3)
  config = transformers.ClapConfig(
      text_config=dict(vocab_size=100, hidden_size=16, num_hidden_layers=1,
                       num_attention_heads=2, intermediate_size=32,
                       max_position_embeddings=64),
      audio_config=dict(patch_embeds_hidden_size=16, hidden_size=32,
                        depths=[1, 1], num_attention_heads=[2, 2]),
      projection_dim=16)
  folder = tmp_path / 'clap'
  transformers.ClapModel(config).eval().save_pretrained(folder)
  transformers.ClapFeatureExtractor(
      truncation='rand_trunc').save_pretrained(folder)
  seconds = [0.5, 1.25, 3.0, 1.25, 2.0, 11.0]
  for i, s in enumerate(seconds):
    H.write_wav(str(tmp_path / 'in' / 'a' / f'{i}.wav'),
                H.noise(int(s * 48000), seed=80 + i, scale=0.3), rate=48000)
  args = ['--input_dir', str(tmp_path / 'in'), '--features', 'embedding',
          '--embedding_model', str(folder), '--example_unit', 'file',
          '--splits', 'train=1', '--quiet']
  proc = _cli(*args, '--output_dir', str(tmp_path / 'refused'),
              cwd=tmp_path)
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert '--max_seconds=60' in proc.stderr and 'at most 10 s' in proc.stderr
  out = tmp_path / 'out'
  proc = _cli(*args, '--max_seconds', '10', '--output_dir', str(out),
              cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  meta, stored = _all_stored(out)
  assert meta['features']['embedding']['sample_rate'] == 48000
  assert meta['schema']['embedding']['shape'][1:] == [1, 16]
  rejects = [json.loads(line) for line in
             (out / 'rejects.jsonl').read_text().splitlines()]
  assert [os.path.basename(r['path']) for r in rejects] == ['5.wav']
  assert 'too long' in rejects[0]['reason']
  assert len(stored) == 5
  net = transformers.ClapModel.from_pretrained(folder).eval()
  extractor = transformers.ClapFeatureExtractor.from_pretrained(folder)
  for (path, _), e in stored.items():
    data, _ = sf.read(path, dtype='float32')
    features = extractor(data, sampling_rate=48000, return_tensors='pt')
    with torch.no_grad():
      expected = net.get_audio_features(**features)
    expected = getattr(expected, 'pooler_output', expected)[0].numpy()
    assert int(e['num_embedding_frames']) == 1
    np.testing.assert_allclose(e['embedding'][0, 0], expected, rtol=1e-4,
                               atol=1e-5)


@pytest.mark.parametrize('unit', ['window', 'file'])
def test_the_launcher_leaves_the_model_to_other_processes(corpus, models,
                                                          unit, tmp_path):
  """The schema's silent example and the device are computed in other
  processes: the launcher never imports torch (half a GB it would hold
  for the whole job beside each worker's)."""
  script = (
      'import sys\n'
      'from pipeline import run\n'
      'from pipeline.config import PipelineConfig\n'
      f'run.run(PipelineConfig(input_dir={str(corpus / "in")!r}, '
      f'output_dir={str(tmp_path / "out")!r}, example_unit={unit!r}, '
      + (f'win_len={WIN}, ' if unit == 'window' else '') +
      'features=("signal", "embedding"), '
      f'embedding_model={models["wav2vec2"]!r}, '
      'splits=(("train", 1.0),)))\n'
      'print("torch imported:", "torch" in sys.modules)\n')
  assert 'torch imported: False' in _python(script, tmp_path)
  meta, stored = _all_stored(tmp_path / 'out')
  assert len(stored) == (6 if unit == 'file' else 12)
  assert meta['schema']['embedding']['shape'][-2:] == [1, 32]


def test_the_schema_without_forked_workers_comes_from_a_child(models,
                                                              tmp_path):
  """Where no forked workers exist (a remote runner, Beam's own
  processes), the launcher forks a child for the silent example, and that
  child finds the device itself."""
  script = (
      'import sys\n'
      'from pipeline import graph\n'
      'from pipeline.config import PipelineConfig\n'
      f'config = PipelineConfig(input_dir="in", output_dir="out", '
      f'win_len={WIN}, features=("embedding",), '
      f'embedding_model={models["torchscript"]!r}, embedding_layers="0,1")\n'
      'print(graph.expected_schema(config).as_dict()["embedding"].shape)\n'
      'print("torch imported:", "torch" in sys.modules)\n')
  assert _python(script, tmp_path).splitlines() == [
      '(49, 2, 8)', 'torch imported: False']


def test_bad_options_are_refused_before_the_run(tmp_path):
  with pytest.raises(ConfigError, match='embedding needs --embedding_model'):
    PipelineConfig(input_dir='in', output_dir='out', features='embedding')
  with pytest.raises(ConfigError, match='--embedding_layers'):
    PipelineConfig(input_dir='in', output_dir='out', features='embedding',
                   embedding_model='m', embedding_layers='6,x')
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(WIN))
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir',
              str(tmp_path / 'out'), '--features', 'embedding',
              '--embedding_model', str(tmp_path / 'nothing'), *FLAGS,
              cwd=tmp_path)
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert '--embedding_model=' in proc.stderr


def test_the_layer_probe_example_ranks_every_layer(tmp_path):
  """examples/probe_layers.py on the demo's four classes: a sweep of one
  variant per layer, each probed, the table on stdout."""
  from pipeline.commands import example_corpus
  example_corpus.write_corpus(str(tmp_path / 'in'), 24, min_seconds=1,
                              max_seconds=1.5)
  model = _wav2vec2(tmp_path / 'model')
  proc = subprocess.run(
      [sys.executable, os.path.join(ROOT, 'examples', 'probe_layers.py'),
       '--input_dir', str(tmp_path / 'in'), '--output_dir',
       str(tmp_path / 'out'), '--model', model, '--layers', '0,2',
       '--win_len', '4000'], capture_output=True, text=True, cwd=tmp_path,
      timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  rows = [line.split() for line in proc.stdout.splitlines()[1:]]
  assert sorted(int(row[1]) for row in rows) == [0, 2], proc.stdout
  accuracies = [float(row[3]) for row in rows]
  assert accuracies == sorted(accuracies, reverse=True)
  # Four classes of different tones: far above chance (0.25) for a linear
  # probe on either layer of a random-weight model.
  assert min(accuracies) > 0.5, proc.stdout
  for layer in ('layer0', 'layer2'):
    meta = json.loads((tmp_path / 'out' / layer / 'metadata.json').read_text())
    assert meta['features']['embedding']['layers'] == layer[5:]


def test_one_model_per_machine_serves_every_worker(corpus, models, tmp_path):
  """The handler wavbeam uses on a GPU (one model per machine, Beam's
  MultiProcessShared), here on the CPU: the model is loaded once, in one
  process, whatever the forked workers; the values are the model's; no
  process or file of it outlives the run."""
  from pipeline import embeddings
  from pipeline import run as run_lib
  from tests.plugins import counting_handler
  log = tmp_path / 'loads'
  shared = embeddings.SharedModelHandler(counting_handler.CountingHandler(
      models['torchscript'], str(tmp_path / 'calls'), loads=str(log)))
  config = PipelineConfig(
      input_dir=str(corpus / 'in'), output_dir=str(tmp_path / 'out'),
      win_len=WIN, features=('embedding',), embedding_layers='0,1',
      embedding_model=models['torchscript'], splits=(('train', 1.0),))
  before = set(os.listdir('/proc'))
  run_lib.run(config, pipeline_options=['--direct_num_workers=2'],
              model_handler=shared)
  assert len(log.read_text().splitlines()) == 1
  _, stored = _all_stored(tmp_path / 'out')
  assert len(stored) == 12
  for (path, start), e in stored.items():
    data, _ = sf.read(path, dtype='float64')
    expected = _reference('torchscript', models, data[start:start + WIN])
    np.testing.assert_allclose(e['embedding'], expected.transpose(1, 0, 2),
                               rtol=1e-4, atol=1e-5)
  left = [pid for pid in set(os.listdir('/proc')) - before if pid.isdigit()
          and os.path.exists(f'/proc/{pid}/stat') and
          open(f'/proc/{pid}/stat').read().split()[3] == str(os.getpid())]
  assert not left
  assert not os.path.exists(shared.folder)  # its address and lock files


def test_a_sweep_over_models_on_the_shared_handler_runs_each(corpus, models,
                                                             tmp_path):
  """wavbeam's one-model-per-machine handler (a GPU's), given for a sweep
  whose variants name different models: each variant's embeddings are its
  own model's, and the run leaves no file of them."""
  from pipeline import embeddings
  from pipeline import run as run_lib
  torch.manual_seed(7)
  other = str(tmp_path / 'other.pt')
  torch.jit.script(ConvNet().eval()).save(other)
  variants = tmp_path / 'v.toml'
  variants.write_text(f'[first]\n[other]\nembedding_model = "{other}"\n')
  shared = embeddings.SharedModelHandler(
      embedding_models.EmbeddingModelHandler(models['torchscript'], 'cpu'))
  run_lib.run(PipelineConfig(
      input_dir=str(corpus / 'in'), output_dir=str(tmp_path / 'out'),
      win_len=WIN, features=('embedding',), embedding_layers='0,1',
      embedding_model=models['torchscript'], splits=(('train', 1.0),),
      variants=str(variants)), model_handler=shared)
  nets = {'first': models['net'], 'other': torch.jit.load(other)}
  for name, net in nets.items():
    stored = _all_stored(tmp_path / 'out' / name)[1]
    assert len(stored) == 12
    for (path, start), e in stored.items():
      data, _ = sf.read(path, dtype='float32')
      with torch.no_grad():
        a, b = net(torch.from_numpy(data[None, start:start + WIN]))
      expected = torch.stack([a, b], 1)[0].numpy().transpose(1, 0, 2)
      np.testing.assert_allclose(e['embedding'], expected, rtol=1e-4,
                                 atol=1e-5)
  assert not os.path.exists(os.path.dirname(shared.folder))


def test_a_models_work_is_spread_over_shards(corpus, models, tmp_path):
  """At most 4 forward passes of --embedding_batch_seconds a shard, so
  that a corpus small in bytes is still shared by the workers; the values
  are the same as in one shard; --num_shards still decides when given."""
  common = ['--input_dir', str(corpus / 'in'), '--features', 'embedding',
            '--embedding_model', models['torchscript'], '--embedding_pool',
            'mean', '--win_len', str(WIN), '--splits', 'train=1', '--quiet']
  runs = {'spread': ['--embedding_batch_seconds', '1'],
          'one': ['--embedding_batch_seconds', '1', '--num_shards', '1'],
          'default': []}
  for name, more in runs.items():
    proc = _cli(*common, *more, '--output_dir', str(tmp_path / name),
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
  shards = {name: len(json.loads((tmp_path / name / 'metadata.json')
                                 .read_text())['splits']['train']['shards'])
            for name in runs}
  # 12 windows of 1 s; 4 passes of 1 s a shard.
  assert shards == {'spread': 3, 'one': 1, 'default': 1}
  spread, one = (_all_stored(tmp_path / n)[1] for n in ('spread', 'one'))
  assert spread.keys() == one.keys()
  for key, e in spread.items():
    np.testing.assert_array_equal(e['embedding'], one[key]['embedding'])


def test_segments_of_a_recording_each_equal_the_model_on_its_span(models,
                                                                  tmp_path):
  """--example_unit segment: spans of mixed lengths of one recording, each
  the model's hidden states of exactly its samples."""
  import csv
  H.write_wav(str(tmp_path / 'in' / 'talk.wav'),
              H.noise(16000 * 5, seed=3, scale=0.3))
  spans = [(0.0, 1.0), (0.5, 1.25), (1.25, 2.5), (2.5, 3.0), (3.0, 4.5),
           (4.0, 5.0)]
  with open(tmp_path / 'segments.csv', 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['path', 'start', 'end', 'label'])
    writer.writerows([('talk.wav', a, b, 'x') for a, b in spans])
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--manifest',
              str(tmp_path / 'segments.csv'), '--manifest_start_column',
              'start', '--manifest_end_column', 'end',
              '--manifest_label_column', 'label', '--example_unit',
              'segment', '--features', 'embedding', '--embedding_model',
              models['wav2vec2'], '--embedding_layers', '0,2',
              '--splits', 'train=1', '--output_dir', str(tmp_path / 'out'),
              '--quiet', cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  _, stored = _all_stored(tmp_path / 'out')
  assert sorted(start for _, start in stored) == \
      sorted(int(a * 16000) for a, _ in spans)
  data, _ = sf.read(str(tmp_path / 'in' / 'talk.wav'), dtype='float64')
  by_start = {start: e for (_, start), e in stored.items()}
  for a, b in spans:
    e = by_start[int(a * 16000)]
    expected = _reference('wav2vec2', models,
                          data[int(a * 16000):int(b * 16000)])[[0, 2]]
    assert int(e['num_embedding_frames']) == expected.shape[1]
    np.testing.assert_allclose(e['embedding'], expected.transpose(1, 0, 2),
                               rtol=1e-4, atol=1e-5)


def test_a_corpus_at_another_rate_is_resampled_to_the_models(models,
                                                             tmp_path):
  """32 kHz windows reach a 16 kHz model resampled (soxr, very high
  quality), and metadata.json says at which rate the model took them."""
  soxr = pytest.importorskip('soxr')
  for i in range(2):
    H.write_wav(str(tmp_path / 'in' / 'a' / f'{i}.wav'),
                H.noise(64000, seed=20 + i, scale=0.3), rate=32000)
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir',
              str(tmp_path / 'out'), '--features', 'embedding',
              '--embedding_model', models['torchscript'],
              '--embedding_layers', '0,1', '--win_len', '32000',
              '--splits', 'train=1', '--quiet', cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  meta, stored = _all_stored(tmp_path / 'out')
  assert meta['features']['embedding']['sample_rate'] == 16000
  assert len(stored) == 4
  for (path, start), e in stored.items():
    data, rate = sf.read(path, dtype='float64')
    assert rate == 32000
    window = soxr.resample(data[start:start + 32000], 32000, 16000, 'VHQ')
    assert len(window) == 16000
    expected = _reference('torchscript', models, window)
    np.testing.assert_allclose(e['embedding'], expected.transpose(1, 0, 2),
                               rtol=1e-4, atol=1e-4)


def test_the_shortest_input_is_the_receptive_field(tmp_path, models):
  """wav2vec2-base's front end needs 400 samples for a frame (25 ms),
  as the model's own frame count says; the tiny models' 85."""
  base = tmp_path / 'base'
  transformers.Wav2Vec2Config().save_pretrained(base)
  assert embedding_models.shortest_input(str(base)) == 400
  assert embedding_models.shortest_input(models['wav2vec2']) == 85
  net = transformers.AutoModel.from_pretrained(models['wav2vec2'])
  frames = net._get_feat_extract_output_lengths(torch.tensor([84, 85]))  # pylint: disable=protected-access
  assert frames.tolist() == [0, 1]
  assert embedding_models.shortest_input(models['torchscript']) is None


@pytest.mark.parametrize('kind', ['wav2vec2-layer', 'wav2vec2'])
def test_a_recording_too_short_for_a_frame_is_rejected(models, tmp_path,
                                                       kind):
  """--example_unit file: a clip shorter than the model's receptive field
  has no frame, so no embedding: rejected at planning with the reason
  (alone, or batched with longer ones), the others stored as the model
  gives them."""
  lengths = {'short': 84, 'edge': 85, 'long': 9000}
  for name, n in lengths.items():
    H.write_wav(str(tmp_path / 'in' / 'c' / f'{name}.wav'),
                H.noise(n, seed=n, scale=0.3))
  out = tmp_path / 'out'
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir', str(out),
              '--example_unit', 'file', '--features', 'embedding',
              '--embedding_model', models[kind], '--embedding_pool', 'mean',
              '--splits', 'train=1', '--quiet', cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  rejected = [json.loads(line) for line in
              (out / 'rejects.jsonl').read_text().splitlines()]
  assert [(os.path.basename(r['path']), r['reason']) for r in rejected] == [
      ('short.wav', 'too short: 84 frames at 16000 Hz, the embedding model '
       'needs 85 samples at 16000 Hz for one frame')]
  meta, stored = _all_stored(out)
  assert len(stored) == 2
  for (path, _), e in stored.items():
    data, _ = sf.read(path, dtype='float64')
    expected = _reference(kind, models, data)[-1].mean(axis=0)
    assert np.isfinite(e['embedding']).all()
    np.testing.assert_allclose(e['embedding'][0], expected, rtol=1e-4,
                               atol=1e-5)
  assert json.dumps(meta['splits']['train']['statistics'],
                    allow_nan=False)


def test_windows_shorter_than_a_frame_are_refused(models, tmp_path):
  """--win_len under the model's receptive field: refused with the
  options where --sample_rate is given, otherwise once the data's rate is
  known (exit 2, nothing kept), never a failure inside the model."""
  with pytest.raises(ConfigError, match='--win_len=80: is too short at '
                     '--sample_rate=16000: the embedding model needs 85'):
    PipelineConfig(input_dir='in', output_dir='out', features='embedding',
                   embedding_model=models['wav2vec2'], win_len=80,
                   hop_len=80, sample_rate=16000)
  for rate, code in ((16000, 2), (8000, 0)):
    H.write_wav(str(tmp_path / f'in{rate}' / 'a' / 'x.wav'), H.noise(4000),
                rate=rate)
    proc = _cli('--input_dir', str(tmp_path / f'in{rate}'), '--output_dir',
                str(tmp_path / f'out{rate}'), '--features', 'embedding',
                '--embedding_model', models['wav2vec2'], '--win_len', '80',
                '--hop_len', '80', '--quiet', cwd=tmp_path)
    assert proc.returncode == code, proc.stderr[-3000:]
    if code:
      assert proc.stderr.startswith(
          'error: --win_len=80: is too short at 16000 Hz: the embedding '
          'model needs 85'), proc.stderr[-3000:]
      assert not (tmp_path / f'out{rate}' / 'metadata.json').exists()
  # At 8 kHz, 80 samples are 160 at the model's 16 kHz: one frame each.
  meta = json.loads((tmp_path / 'out8000' / 'metadata.json').read_text())
  assert meta['counts']['examples'] == 50


def test_a_model_that_is_no_speech_encoder_or_fails_says_so(models,
                                                            tmp_path):
  """A transformers text model is refused naming --embedding_model (exit
  2); a model that fails before anything is written (a TorchScript
  kernel of 400 over windows of 300) says that nothing was written, not
  to --resume a run that left nothing."""
  folder = tmp_path / 'bert'
  transformers.BertModel(transformers.BertConfig(
      hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
      intermediate_size=64, vocab_size=50)).save_pretrained(folder)
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(4000))
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir',
              str(tmp_path / 'out'), '--features', 'embedding',
              '--embedding_model', str(folder), *FLAGS, cwd=tmp_path)
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert proc.stderr.startswith(f"error: --embedding_model='{folder}': ") \
      and 'a bert model, not a speech encoder' in proc.stderr, \
      proc.stderr[-3000:]
  proc = _cli('--input_dir', str(tmp_path / 'in'), '--output_dir',
              str(tmp_path / 'out'), '--features', 'embedding',
              '--embedding_model', models['torchscript'], '--win_len',
              '300', '--hop_len', '300', '--quiet', cwd=tmp_path)
  assert proc.returncode == 1, proc.stderr[-3000:]
  assert proc.stderr.rstrip().endswith(
      f'nothing was written to {tmp_path / "out"}; fix the cause above, '
      'then rerun'), proc.stderr[-3000:]
  assert not (tmp_path / 'out').exists()
