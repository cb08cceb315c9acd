"""The models the embedding feature runs, loaded once per process: a
Hugging Face `transformers` audio model (a folder saved with
save_pretrained, or a hub id in the local cache: Wav2Vec2, HuBERT,
WavLM, Data2VecAudio, the Whisper encoder, CLAP's audio tower), a
TorchScript file, an ONNX file.

EmbeddingModelHandler has the interface of Beam's ModelHandler
(apache_beam.ml.inference: load_model, run_inference, ...), so that any
handler of Beam's can stand in for it (pipeline/embeddings.py adapts
one); it imports neither Beam nor, until a model is loaded, torch.

Every model maps a batch of mono waveforms at its rate, float32, to
their hidden states, float32 [layers, frames, dim] each: a transformers
model's every layer (0: what enters the first transformer layer), a
TorchScript or ONNX model's every output (each [n, frames, dim]), in
order. CLAP gives one vector per example, its audio embedding in the
space it shares with text: one layer of one frame. A batch is of one
length, except for a model whose examples do not depend on their batch
when it mixes lengths (`mixes_lengths`): Wav2Vec2, HuBERT, WavLM and
UniSpeechSat whose feature encoder normalises each frame
(feat_extract_norm "layer"), padded with the attention mask, and the
Whisper encoder and CLAP, whose inputs are always 30 s and 10 s.
"""

import functools
import hashlib
import os
import sys
from typing import Dict, List, Optional, Sequence

import numpy as np

DEFAULT_RATE = 16000
DEVICES = ('auto', 'cpu', 'cuda')
DTYPES = ('float32', 'bfloat16', 'float16')

# The feature extractors that compute a spectrogram of the waveform
# (the model's input) rather than normalise it.
SPECTRAL_EXTRACTORS = ('Whisper', 'Clap')
# transformers model types whose extractor pads every input to a fixed
# length (its chunk_length or max_length_s) and computes a spectrogram.
_SPECTRAL_TYPES = ('whisper', 'clap')
# transformers model types that mask padded frames everywhere after their
# feature encoder (checked against each example alone). Not
# Data2VecAudio or Wav2Vec2-Conformer: their positional and depthwise
# convolutions see the padding.
_MASKED_TYPES = ('wav2vec2', 'hubert', 'wavlm', 'unispeech-sat')


class ModelError(ValueError):
  """A model that cannot be loaded or run as the options ask."""


def kind_of(model: str) -> str:
  """'torchscript', 'onnx' or 'transformers' (a folder or a hub id)."""
  lower = model.lower()
  if lower.endswith(('.pt', '.pth', '.ts', '.torchscript')):
    return 'torchscript'
  if lower.endswith('.onnx'):
    return 'onnx'
  return 'transformers'


def resolve_device(device: str) -> str:
  """`device`, or for auto: cuda where torch sees a GPU, else cpu."""
  if device != 'auto':
    return device
  return 'cuda' if _gpu_seen_here() else 'cpu'


@functools.lru_cache(maxsize=None)
def _gpu_seen_here() -> bool:
  """Whether torch sees a GPU on this machine, asked once a process."""
  if 'torch' in sys.modules:
    return _gpu_seen()
  # Asked by the launcher, which should not hold torch (half a GB) for
  # the whole job: another process asks (forked_workers.in_child;
  # forked_workers imports Beam: looked up, not imported).
  workers = sys.modules.get('transforms.runtime.forked_workers')
  return workers.in_child(_gpu_seen) if workers else _gpu_seen()


def _gpu_seen() -> bool:
  try:
    import torch  # pylint: disable=import-outside-toplevel
  except ImportError:
    return False
  return bool(torch.cuda.is_available())


def local_files(model: str) -> str:
  """The file or folder a model is read from: itself, or a hub id's
  snapshot in the local cache (downloaded when the hub can be reached)."""
  if os.path.exists(model):
    return model
  try:
    from huggingface_hub import snapshot_download  # pylint: disable=import-outside-toplevel
    return snapshot_download(model)
  except Exception as e:  # not a path, and not a hub id found
    raise ModelError(f'{model}: no such file or folder, and not a model '
                     f'the Hugging Face hub or its cache gives ({e})') from e


def cached_files(model: str) -> Optional[str]:
  """local_files without the network: the path, or a hub id's snapshot
  already in the local cache; None otherwise."""
  if os.path.exists(model):
    return model
  try:
    from huggingface_hub import snapshot_download  # pylint: disable=import-outside-toplevel
    return snapshot_download(model, local_files_only=True)
  except Exception:  # not installed, not a hub id, not in the cache
    return None


def digest(model: str) -> str:
  """SHA-256 of a model's files (a folder's, by relative name and bytes):
  what the dataset's embeddings were computed with."""
  path = local_files(model)
  h = hashlib.sha256()
  if os.path.isfile(path):
    files = [(os.path.basename(path), path)]
  else:
    files = sorted((os.path.relpath(os.path.join(root, name), path),
                    os.path.join(root, name))
                   for root, _, names in os.walk(path) for name in names
                   if not name.startswith('.'))
  for rel, full in files:
    h.update(rel.encode('utf-8') + b'\0')
    with open(full, 'rb') as f:
      for block in iter(lambda: f.read(1 << 20), b''):
        h.update(block)
  return h.hexdigest()


def _saved_extractor(model: str) -> Dict:
  """A transformers model's saved feature extractor settings, or {}."""
  if kind_of(model) != 'transformers':
    return {}
  import json  # pylint: disable=import-outside-toplevel
  saved = os.path.join(local_files(model), 'preprocessor_config.json')
  if not os.path.isfile(saved):
    return {}
  with open(saved, encoding='utf-8') as f:
    return json.load(f)


def model_input(model: str) -> Dict:
  """What a model expects of its waveforms, without loading it: its
  `sample_rate` and whether each is normalised to zero mean and unit
  variance first (a transformers model's saved feature extractor says;
  16 kHz as given for the others)."""
  extractor = _saved_extractor(model)
  spectral = extractor.get('feature_extractor_type', '').startswith(
      SPECTRAL_EXTRACTORS)
  return {'sample_rate': int(extractor.get('sampling_rate', DEFAULT_RATE)),
          'normalize': bool(extractor.get('do_normalize')) and not spectral}


def longest_input(model: str) -> Optional[float]:
  """The most seconds of audio an example may hold for the model, where
  its saved feature extractor cuts longer ones (Whisper's 30 s, CLAP's
  10 s), without loading it; None where there is no such limit."""
  extractor = _saved_extractor(model)
  kind = extractor.get('feature_extractor_type', '')
  if kind.startswith('Whisper'):
    return float(extractor.get('chunk_length', 30))
  if kind.startswith('Clap'):
    return float(extractor.get('max_length_s', 10))
  return None


def shortest_input(model: str) -> Optional[int]:
  """The fewest samples (at the model's rate) that give a transformers
  speech encoder one frame: the receptive field of its convolutional
  front end (400 for wav2vec2, HuBERT and WavLM), read from its saved
  config without loading it; None where the config states none (Whisper
  and CLAP pad every input; TorchScript and ONNX files do not say)."""
  if kind_of(model) != 'transformers':
    return None
  import json  # pylint: disable=import-outside-toplevel
  saved = os.path.join(local_files(model), 'config.json')
  if not os.path.isfile(saved):
    return None
  with open(saved, encoding='utf-8') as f:
    config = json.load(f)
  kernels, strides = config.get('conv_kernel'), config.get('conv_stride')
  if not kernels or not strides or len(kernels) != len(strides):
    return None
  needed = 1  # frames out of the last layer
  for kernel, stride in reversed(list(zip(kernels, strides))):
    needed = (needed - 1) * int(stride) + int(kernel)
  return needed


class LoadedModel:
  """A model ready to run on one device (see the module docstring)."""

  sample_rate = DEFAULT_RATE
  normalize = False   # each waveform to zero mean and unit variance first
  max_seconds: Optional[float] = None
  # Every input is padded to this many seconds whatever its length (what
  # a batch costs), or None.
  input_seconds: Optional[float] = None
  # A batch may mix lengths (see the module docstring).
  mixes_lengths = False

  def hidden_states(self, waveforms: np.ndarray) -> np.ndarray:
    """[n, samples] -> [n, layers, frames, dim]."""
    raise NotImplementedError

  def hidden_states_of(self, waveforms: Sequence[np.ndarray]
                       ) -> List[np.ndarray]:
    """1-D waveforms, of one length unless mixes_lengths -> [layers,
    frames, dim] each."""
    if len({len(w) for w in waveforms}) > 1:
      raise ModelError('a batch of mixed lengths for a model that takes '
                       'one length at a time')
    return list(self.hidden_states(np.stack(waveforms)))

  def describe(self) -> Dict:
    """What the feature needs to know of it (through a process boundary,
    where the model is shared)."""
    return {'sample_rate': self.sample_rate, 'normalize': self.normalize,
            'max_seconds': self.max_seconds,
            'input_seconds': self.input_seconds,
            'mixes_lengths': self.mixes_lengths}


def _torch_dtype(dtype: str):
  import torch  # pylint: disable=import-outside-toplevel
  return {'float32': torch.float32, 'bfloat16': torch.bfloat16,
          'float16': torch.float16}[dtype]


class _Transformers(LoadedModel):

  def __init__(self, model: str, device: str, dtype: str):
    import torch  # pylint: disable=import-outside-toplevel
    # Transformers imports TensorFlow whenever it is installed (seconds
    # and a GB) unless told not to; no model here is a TensorFlow one.
    os.environ.setdefault('USE_TF', '0')
    import transformers  # pylint: disable=import-outside-toplevel
    self.torch, self.device = torch, device
    path = local_files(model)
    config = transformers.AutoConfig.from_pretrained(path)
    self.model_type = config.model_type
    if (self.model_type not in _SPECTRAL_TYPES and
        not getattr(config, 'conv_kernel', None)):
      raise ModelError(
          f'{model}: a {self.model_type} model, not a speech encoder of '
          'audio (Wav2Vec2, HuBERT, WavLM and others with a convolutional '
          'front end over the waveform, Whisper, CLAP)')
    try:
      extractor = transformers.AutoFeatureExtractor.from_pretrained(path)
    except (OSError, ValueError):
      extractor = None  # none saved: raw waveforms, not normalised
    if self.model_type == 'whisper':
      net = transformers.WhisperModel.from_pretrained(path).get_encoder()
      extractor = extractor or transformers.WhisperFeatureExtractor(
          feature_size=config.num_mel_bins)
      self.max_seconds = self.input_seconds = float(extractor.chunk_length)
    elif self.model_type == 'clap':
      net = transformers.ClapModel.from_pretrained(path)
      extractor = extractor or transformers.ClapFeatureExtractor()
      # Longer inputs are cut at random places: refused instead.
      self.max_seconds = self.input_seconds = float(extractor.max_length_s)
    else:
      net = transformers.AutoModel.from_pretrained(path)
    spectral = self.model_type in _SPECTRAL_TYPES
    # Whisper and CLAP pad every input to a fixed length themselves. The
    # _MASKED_TYPES give a padded example what they give it alone, unless
    # their feature encoder's group norm spans the padding
    # (feat_extract_norm "group": wav2vec2-base, hubert-base).
    self.mixes_lengths = spectral or (
        self.model_type in _MASKED_TYPES and
        getattr(config, 'feat_extract_norm', 'group') == 'layer')
    self.extractor = extractor if spectral else None
    if extractor is not None:
      self.sample_rate = int(extractor.sampling_rate)
      self.normalize = bool(getattr(extractor, 'do_normalize', False)) and \
          not spectral
    self.net = net.to(device=device, dtype=_torch_dtype(dtype)).eval()
    self.dtype = _torch_dtype(dtype)

  def hidden_states(self, waveforms):
    return np.stack(self.hidden_states_of(list(waveforms)))

  def hidden_states_of(self, waveforms):
    torch = self.torch
    lengths = [len(w) for w in waveforms]
    with torch.inference_mode():
      if self.model_type == 'whisper':
        features = self.extractor([np.asarray(w) for w in waveforms],
                                  sampling_rate=self.sample_rate,
                                  return_tensors='pt')['input_features']
        out = self.net(features.to(self.device, self.dtype),
                       output_hidden_states=True)
        # 30 s of input always; the frames of this audio: 2 per 320 samples
        # of the mel hop (160) after the stride-2 convolution.
        frames = [-(-n // 320) for n in lengths]
      elif self.model_type == 'clap':
        features = self.extractor([np.asarray(w) for w in waveforms],
                                  sampling_rate=self.sample_rate,
                                  return_tensors='pt')
        # No input is longer than the model takes (max_seconds); a fused
        # model's extractor would mark one at random as longer.
        embeds = self.net.get_audio_features(
            input_features=features['input_features'].to(self.device,
                                                         self.dtype),
            is_longer=torch.zeros_like(features['is_longer']).to(
                self.device))
        embeds = getattr(embeds, 'pooler_output', embeds)
        return [e[None, None] for e in embeds.float().cpu().numpy()]
      else:
        padded = np.zeros((len(waveforms), max(lengths)), np.float32)
        for row, wave in zip(padded, waveforms):
          row[:len(wave)] = wave
        mask = {}
        if len(set(lengths)) > 1:
          if not self.mixes_lengths:
            return super().hidden_states_of(waveforms)  # refused
          mask['attention_mask'] = torch.from_numpy(
              np.arange(max(lengths))[None] <
              np.array(lengths)[:, None]).to(self.device, torch.long)
        out = self.net(torch.from_numpy(padded).to(self.device, self.dtype),
                       output_hidden_states=True, **mask)
        frames = [out.hidden_states[0].shape[1]] * len(lengths)
        if mask:
          frames = self._frames(torch.tensor(lengths))
      states = torch.stack(out.hidden_states, 1).float().cpu().numpy()
    return [s[:, :n] for s, n in zip(states, frames)]

  def _frames(self, lengths):
    """The hidden states' frames of waveforms of `lengths` (before an
    adapter, which shortens the last state only)."""
    frames_of = self.net._get_feat_extract_output_lengths  # pylint: disable=protected-access
    try:
      return frames_of(lengths, add_adapter=False).tolist()
    except TypeError:  # a model without adapters
      return frames_of(lengths).tolist()

  def describe(self):
    return dict(super().describe(), kind='transformers',
                model_type=self.model_type)


class _TorchScript(LoadedModel):

  def __init__(self, model: str, device: str, dtype: str):
    import torch  # pylint: disable=import-outside-toplevel
    self.torch, self.device, self.dtype = torch, device, _torch_dtype(dtype)
    self.net = torch.jit.load(local_files(model), map_location=device)
    self.net = self.net.to(dtype=self.dtype).eval()

  def hidden_states(self, waveforms):
    torch = self.torch
    with torch.inference_mode():
      out = self.net(torch.from_numpy(np.ascontiguousarray(waveforms)).to(
          self.device, self.dtype))
    outputs = list(out) if isinstance(out, (list, tuple)) else [out]
    return torch.stack(outputs, 1).float().cpu().numpy()

  def describe(self):
    return dict(super().describe(), kind='torchscript')


class _Onnx(LoadedModel):

  def __init__(self, model: str, device: str, dtype: str):
    import onnxruntime  # pylint: disable=import-outside-toplevel
    if dtype != 'float32':
      raise ModelError(f'{model}: an ONNX model runs in the types it was '
                       'exported in: use --embedding_dtype float32')
    providers = (['CUDAExecutionProvider', 'CPUExecutionProvider']
                 if device == 'cuda' else ['CPUExecutionProvider'])
    options = onnxruntime.SessionOptions()
    # One thread per session: the job already runs a worker per core.
    options.intra_op_num_threads = 1
    self.session = onnxruntime.InferenceSession(
        local_files(model), options, providers=providers)
    self.input = self.session.get_inputs()[0].name

  def hidden_states(self, waveforms):
    outputs = self.session.run(None, {
        self.input: np.ascontiguousarray(waveforms, np.float32)})
    return np.stack(outputs, 1).astype(np.float32)

  def describe(self):
    return dict(super().describe(), kind='onnx')


_KINDS = {'transformers': _Transformers, 'torchscript': _TorchScript,
          'onnx': _Onnx}


def load(model: str, device: str = 'auto',
         dtype: str = 'float32') -> LoadedModel:
  """The model, on `device` (auto: a GPU where there is one), computing in
  `dtype`; ModelError when it cannot be loaded."""
  device = resolve_device(device)
  if device == 'cpu' and _in_forked_worker():
    _one_torch_thread()
  try:
    return _KINDS[kind_of(model)](model, device, dtype)
  except ImportError as e:
    raise ModelError(f'{model}: {e}; the embedding feature needs '
                     "pip install '.[embeddings]' (in the wavbeam "
                     'checkout)') from e
  except ModelError:
    raise
  except Exception as e:  # the libraries' own errors, in their words
    raise ModelError(f'{model}: cannot be loaded as a {kind_of(model)} '
                     f'model ({type(e).__name__}: {e})') from e


def _in_forked_worker() -> bool:
  """Whether this is one of a local run's forked workers
  (transforms/runtime/forked_workers.py, which imports Beam: looked up, not
  imported, so that the featurizer runs without Beam)."""
  workers = sys.modules.get('transforms.runtime.forked_workers')
  return workers is not None and workers.in_worker()


def _one_torch_thread() -> None:
  try:
    import torch  # pylint: disable=import-outside-toplevel
  except ImportError:
    return
  torch.set_num_threads(1)


class EmbeddingModelHandler:
  """wavbeam's model handler, with the interface of Beam's ModelHandler:
  load_model() gives a LoadedModel; run_inference(batch, model) its hidden
  states, one [layers, frames, dim] array per example of the batch (a
  list of float32 waveforms, of one length unless the model
  mixes_lengths)."""

  def __init__(self, model: str, device: str = 'auto',
               dtype: str = 'float32'):
    self.model, self.device, self.dtype = model, device, dtype

  def load_model(self) -> LoadedModel:
    return load(self.model, self.device, self.dtype)

  def run_inference(self, batch: Sequence[np.ndarray], model: LoadedModel,
                    inference_args=None) -> List[np.ndarray]:
    del inference_args
    return model.hidden_states_of(list(batch))

  def get_num_bytes(self, batch) -> int:
    return sum(np.asarray(x).nbytes for x in batch)

  def get_metrics_namespace(self) -> str:
    return 'wavbeam_embedding'

  def share_model_across_processes(self) -> bool:
    """One copy per machine on a GPU (its memory is the limit); one per
    process on CPUs (each runs its own batches)."""
    return resolve_device(self.device) == 'cuda'

  def model_copies(self) -> int:
    return 1

  def batch_elements_kwargs(self):
    return {}

  def validate_inference_args(self, inference_args) -> None:
    del inference_args

  def update_model_path(self, model_path=None) -> None:
    if model_path:
      self.model = model_path

  def get_resource_hints(self):
    return {}

  def set_environment_vars(self) -> None:
    pass

  def __repr__(self):
    return (f'EmbeddingModelHandler({self.model!r}, device={self.device!r}, '
            f'dtype={self.dtype!r})')


def library_versions() -> Dict[str, str]:
  """The versions of the model libraries installed, for metadata.json."""
  from importlib import metadata  # pylint: disable=import-outside-toplevel
  found = {}
  for name in ('torch', 'transformers', 'onnxruntime'):
    try:
      found[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
      pass
  return found

