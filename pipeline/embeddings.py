"""Model handlers for the embedding feature
(transforms/features/embedding.py) from Beam's side: any of Beam's
ModelHandlers (apache_beam.ml.inference: PyTorch, ONNX, Hugging Face, one
of your own) given as `run(config, model_handler=...)`, and one copy of a
model per machine where a GPU runs it (Beam's MultiProcessShared), the
forked workers sending it their batches."""

import hashlib
import os
import shutil
import tempfile
import uuid
from typing import List, Sequence

import numpy as np

from apache_beam.utils import multi_process_shared

from transforms.features import embedding_models


def as_feature_handler(handler, sample_rate: int = 16000,
                       normalize: bool = False):
  """`handler` as the embedding feature runs one: wavbeam's own as it is,
  another of Beam's adapted (BeamModelHandler)."""
  if isinstance(handler, (embedding_models.EmbeddingModelHandler,
                          BeamModelHandler, SharedModelHandler)):
    return handler
  return BeamModelHandler(handler, sample_rate, normalize)


class _Loaded:
  """A model (a Beam handler's, or a proxy of one shared across
  processes), with what the feature needs to know of it."""

  def __init__(self, model, sample_rate: int, normalize: bool,
               max_seconds=None, input_seconds=None, mixes_lengths=False):
    self.model, self.sample_rate = model, sample_rate
    self.normalize, self.max_seconds = normalize, max_seconds
    self.input_seconds, self.mixes_lengths = input_seconds, mixes_lengths


# The attributes of Beam's model handlers that name their model (PyTorch's
# state dict or TorchScript file, ONNX's and Hugging Face's URI or id).
_MODEL_PATHS = ('_torch_script_model_path', '_state_dict_path', '_model_uri')


class BeamModelHandler(embedding_models.EmbeddingModelHandler):
  """One of Beam's ModelHandlers as the embedding feature's: each batch
  given to it as it takes examples (torch tensors for its PyTorch and
  Hugging Face handlers, numpy arrays otherwise), each PredictionResult's
  inference taken as the example's hidden states ([frames, dim], or
  [layers, frames, dim]). `sample_rate` and `normalize`: what the model
  expects of its waveforms."""

  def __init__(self, handler, sample_rate: int = 16000,
               normalize: bool = False):
    super().__init__(repr(handler))
    self.handler = handler
    self.sample_rate, self.normalize = sample_rate, normalize
    module = type(handler).__module__
    self._tensors = 'pytorch' in module or 'huggingface' in module

  def load_model(self):
    return _Loaded(self.handler.load_model(), self.sample_rate,
                   self.normalize)

  def provenance(self) -> dict:
    """What metadata.json records of it (Embedding.provenance): which
    handler, and the input it was given."""
    kind = type(self.handler)
    return {'handler': f'{kind.__module__}.{kind.__qualname__}',
            # Where Beam's own handlers read their model from.
            'model': next((str(getattr(self.handler, name))
                           for name in _MODEL_PATHS
                           if getattr(self.handler, name, None)), None),
            'sample_rate': self.sample_rate, 'normalize': self.normalize}

  def run_inference(self, batch: Sequence[np.ndarray], model,
                    inference_args=None) -> List[np.ndarray]:
    if self._tensors:
      import torch  # pylint: disable=import-outside-toplevel
      batch = [torch.from_numpy(np.ascontiguousarray(x)) for x in batch]
    results = self.handler.run_inference(batch, model.model,
                                         inference_args or {})
    return [_as_numpy(getattr(r, 'inference', r)) for r in results]

  def share_model_across_processes(self) -> bool:
    return self.handler.share_model_across_processes()


def _as_numpy(value) -> np.ndarray:
  if hasattr(value, 'detach'):  # a torch tensor
    value = value.detach().float().cpu().numpy()
  return np.asarray(value, np.float32)


class SharedModelHandler(embedding_models.EmbeddingModelHandler):
  """A handler whose model is loaded once per machine, in a process of its
  own that every worker process sends its batches to (Beam's
  MultiProcessShared, as RunInference shares a model across processes)."""

  # What uses it holds a proxy: the model and torch stay in the process
  # that serves it.
  loads_in_process = False

  def __init__(self, handler, run_tag: str = '', name: str = 'model'):
    super().__init__(handler.model, handler.device, handler.dtype)
    self.handler = handler
    # The processes of one job on one machine share a model; two jobs,
    # or two handlers of one job, do not.
    self.run_tag = run_tag or f'wavbeam-embedding-{uuid.uuid4().hex}'
    self.tag = f'{self.run_tag}-{name}'
    self._others = {}
    self._proxies = []   # acquired in this process: released at the end

  def __getstate__(self):  # proxies stay with the process that holds them
    return dict(self.__dict__, _proxies=[])

  @property
  def folder(self) -> str:
    """Where the processes of a machine find the one serving the model
    (its address and lock files), removed when the run ends
    (remove_shared_files)."""
    return os.path.join(tempfile.gettempdir(), self.run_tag, self.tag)

  def for_options(self, model: str, device: str, dtype: str):
    """The shared handler of a sweep's variant whose options name
    another model (or device, dtype): one per machine too."""
    resolved = embedding_models.resolve_device
    key = (model, resolved(device), dtype)
    if key == (self.model, resolved(self.device), self.dtype):
      return self
    if key not in self._others:
      name = hashlib.sha256(repr(key).encode('utf-8')).hexdigest()[:16]
      self._others[key] = SharedModelHandler(
          embedding_models.EmbeddingModelHandler(model, device, dtype),
          self.run_tag, name)
    return self._others[key]

  def load_model(self):
    os.makedirs(self.folder, exist_ok=True)
    proxy = multi_process_shared.MultiProcessShared(
        self.handler.load_model, tag=self.tag, path=self.folder,
        always_proxy=True).acquire()
    self._proxies.append(proxy)
    # A proxy forwards calls, not attributes: what the feature reads of
    # the model comes back from one call.
    info = proxy.describe()
    return _Loaded(proxy, info['sample_rate'], info['normalize'],
                   info.get('max_seconds'), info.get('input_seconds'),
                   info.get('mixes_lengths', False))

  def run_inference(self, batch, model, inference_args=None):
    del inference_args
    return model.model.hidden_states_of(list(batch))


def remove_shared_files(extra_features) -> None:
  """Once the run is over: the models the run's SharedModelHandler serves
  from this process (the launcher's, where it computed the schema: a
  process that runs again would hold one more each time) let go, and
  their address and lock files removed."""
  for handler in (extra_features or {}).values():
    if isinstance(handler, SharedModelHandler):
      for each in [handler, *handler._others.values()]:  # pylint: disable=protected-access
        for proxy in each._proxies:  # pylint: disable=protected-access
          try:
            proxy.unsafe_hard_delete()
          except Exception:  # pylint: disable=broad-except
            pass  # its server is gone already
        each._proxies.clear()  # pylint: disable=protected-access
      shutil.rmtree(os.path.join(tempfile.gettempdir(), handler.run_tag),
                    ignore_errors=True)


def with_model_handler(config, extra_features, model_handler=None):
  """The run's extra_features, with what computes its embedding feature:
  `model_handler` (adapted), or where --embedding_device puts the model on
  a GPU, wavbeam's own shared by every process of the machine."""
  extra = dict(extra_features or {})
  if 'embedding' not in config.features:
    if model_handler is not None:
      from pipeline.config import ConfigError  # pylint: disable=import-outside-toplevel
      raise ConfigError('features', ','.join(config.features),
                        'a model_handler is given, and --features names '
                        'no embedding for it to compute')
    return extra or None
  if model_handler is not None:
    extra['embedding'] = as_feature_handler(model_handler)
  elif 'embedding' not in extra:
    own = embedding_models.EmbeddingModelHandler(
        config.option('embedding_model'), config.option('embedding_device'),
        config.option('embedding_dtype'))
    if own.share_model_across_processes():
      extra['embedding'] = SharedModelHandler(own)
  return extra or None
