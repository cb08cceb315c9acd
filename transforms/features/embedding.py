"""embedding: a speech or audio model's hidden states, per example: a
Hugging Face `transformers` model (Wav2Vec2, HuBERT, WavLM, the Whisper
encoder, ...), a TorchScript or an ONNX file (embedding_models.py).

Each example is resampled to the model's rate and, where the model's
feature extractor says so, normalised, then run through the model in
batches of up to --embedding_batch_seconds of audio. Whole recordings
and segments of mixed lengths are read in groups of that much audio
(registry.ReadGroup) and batched sorted by length: padded, with the
attention mask, where the model gives a padded example what it gives it
alone (embedding_models.LoadedModel.mixes_lengths), else of one length a
batch; an example's embedding does not depend on the others of its
batch. The --embedding_layers are kept, [frames, layers, dim], or
averaged over the frames (--embedding_pool mean), [layers, dim]. The
model runs once per batch for every variant of a sweep that differs only
in layers or pooling. A model handler of the caller's (`run(config,
model_handler=...)`, any of Beam's) takes the place of wavbeam's own.
"""

from typing import List, Optional

import numpy as np

from pipeline.contract.errors import ConfigError
from transforms.features import registry
from transforms.features import embedding_models
from transforms.inputs import audio

# The key of an example's frame count when the frames are kept under
# --example_unit file or segment.
FRAMES_KEY = 'num_embedding_frames'
POOLS = ('none', 'mean')

# Forward passes of --embedding_batch_seconds per shard at most: the
# model's work is what the workers share (4 minutes of audio a shard by
# default, a few tens of seconds of a CPU core, so that even a small
# corpus keeps every core busy; a GPU job raises the batch).
SHARD_BATCHES = 4

# The models this process loaded: {key: (handler, model)}.
_LOADED = {}


def layer_numbers(text: str) -> Optional[List[int]]:
  """--embedding_layers as numbers; None for `last`. ConfigError for
  anything else."""
  if text.strip() == 'last':
    return None
  try:
    numbers = [int(p) for p in text.split(',') if p.strip()]
  except ValueError:
    numbers = []
  if not numbers or any(n < 0 for n in numbers) or \
      len(set(numbers)) != len(numbers):
    raise ConfigError('embedding_layers', text, 'give last, or distinct '
                      'layer numbers (0: what enters the first layer), '
                      'e.g. 6,9,12')
  return numbers


@registry.register
class Embedding(registry.Feature):
  name = 'embedding'
  takes_object = True   # a model handler: run(config, model_handler=...)
  help = ("a model's hidden states (--embedding_model, --embedding_layers, "
          '--embedding_pool)')
  options = (
      registry.Option(
          'embedding_model', str, None, 'the model of the embedding '
          'feature: a Hugging Face transformers folder (save_pretrained) '
          'or hub id, a TorchScript file (.pt) or an ONNX file (.onnx)',
          optional=True),
      registry.Option(
          'embedding_layers', str, 'last', 'the hidden states kept: last, '
          'or comma-separated layer numbers (0: what enters the first '
          'layer)'),
      registry.Option(
          'embedding_pool', str, 'none', 'none: every frame, [frames, '
          'layers, dim]; mean: their mean, [layers, dim]', choices=POOLS),
      registry.Option(
          'embedding_device', str, 'auto', 'where the model runs (auto: a '
          'GPU where there is one)', choices=embedding_models.DEVICES),
      registry.Option(
          'embedding_dtype', str, 'float32', 'what the model computes in '
          '(the embeddings are stored as --feature_dtype)',
          choices=embedding_models.DTYPES),
      registry.Option(
          'embedding_batch_seconds', float, 60.0, 'audio per forward pass '
          'of the model, in seconds; a shard holds at most 4 passes\' '
          'audio, so that the workers share the model\'s work (unless '
          '--num_shards or --max_examples_per_shard is given)', above=0.0,
          rule='a positive number of seconds'),
  )

  def length_of(self, config) -> Optional[str]:
    """Whole recordings keep a frame count of their own; pooled, one
    vector each."""
    return None if config.option('embedding_pool') == 'mean' else FRAMES_KEY

  def loads_model(self, extra_object) -> bool:
    # Unless the caller's handler keeps its model in a process of its own.
    return getattr(extra_object, 'loads_in_process', True)

  def check(self, config):
    if not config.option('embedding_model'):
      raise ConfigError('features', ','.join(config.features),
                        'embedding needs --embedding_model')
    layer_numbers(config.option('embedding_layers'))
    # A hub id not in the local cache yet is looked up when the run
    # starts, and an example longer than its model takes then fails it.
    found = embedding_models.cached_files(config.option('embedding_model'))
    if found is not None:
      _check_longest(config, embedding_models.longest_input(found))

  def min_samples(self, config, rate: int) -> registry.MinSamples:
    """A transformers speech encoder's receptive field (shortest_input)
    at the dataset's rate: a shorter example has no frame, so no
    embedding."""
    return _min_samples(config.option('embedding_model'), rate)

  def min_samples_options(self, config) -> tuple:
    return ((self.name, config.option('embedding_model')),)

  def cache_key(self, batch) -> tuple:
    return super().cache_key(batch) + _handler_key(batch)

  def batch_samples(self, config) -> int:
    return int(config.option('embedding_batch_seconds') *
               (config.sample_rate or embedding_models.DEFAULT_RATE))

  def shard_samples(self, config) -> int:
    return SHARD_BATCHES * self.batch_samples(config)

  def provenance(self, config, extra_object=None) -> dict:
    described = getattr(extra_object, 'provenance', None)
    if described is None:  # wavbeam's own handler, shared or not
      return provenance(config)
    # One of Beam's handlers, of the caller's (run(model_handler=...)):
    # what it was and what it was given; nothing here can run it again.
    return {**described(),
            'layers': config.option('embedding_layers'),
            'pool': config.option('embedding_pool'),
            'libraries': embedding_models.library_versions()}

  def check_provenance(self, config, recorded) -> None:
    model = config.option('embedding_model')
    if 'handler' in recorded:
      raise ConfigError(
          'embedding_model', model, 'the dataset\'s embeddings were '
          f'computed by a model handler of the caller\'s '
          f'({recorded["handler"]}), which cannot be run again from the '
          'dataset: compute them anew with run(..., model_handler=...) and '
          '--overwrite')
    now = embedding_models.digest(model)
    if recorded.get('sha256') != now:
      raise ConfigError(
          'embedding_model', model, 'its files differ from those the '
          f'dataset was written with (sha256 {recorded.get("sha256")}, '
          f'now {now}): give the model the embeddings were computed with, '
          'or compute them anew with --overwrite')

  def compute(self, batch):
    self.check_length(batch)
    hidden = _hidden_states(batch)          # [n, layers, frames, dim]
    numbers = layer_numbers(batch.option('embedding_layers'))
    if numbers is None:
      numbers = [hidden.shape[1] - 1]
    if max(numbers) >= hidden.shape[1]:
      raise ConfigError('embedding_layers',
                        batch.option('embedding_layers'),
                        f'the model has layers 0..{hidden.shape[1] - 1}')
    kept = hidden[:, numbers].transpose(0, 2, 1, 3)   # [n, frames, k, dim]
    if batch.option('embedding_pool') == 'mean':
      kept = kept.mean(axis=1, dtype=np.float64)
    return np.ascontiguousarray(kept, np.float32)


# (model, rate) -> Embedding.min_samples, once found (planning asks it of
# every recording); a model not in the local cache yet is asked again.
_MIN_SAMPLES = {}


def _min_samples(model: str, rate: int) -> registry.MinSamples:
  if (model, rate) in _MIN_SAMPLES:
    return _MIN_SAMPLES[model, rate]
  found = embedding_models.cached_files(model)
  if found is None:
    return registry.ANY_LENGTH
  shortest = embedding_models.shortest_input(found)
  need = registry.ANY_LENGTH
  if shortest:
    model_rate = embedding_models.model_input(found)['sample_rate']
    samples = max(1, -(-shortest * rate // model_rate))
    while audio.resampled_length(samples, rate, model_rate) < shortest:
      samples += 1
    need = registry.MinSamples(samples, f'the embedding model needs '
                               f'{shortest} samples at {model_rate} Hz for '
                               'one frame')
  _MIN_SAMPLES[model, rate] = need
  return need


def _check_longest(config, limit: Optional[float]) -> None:
  """ConfigError where an example may be longer than the model takes:
  refused before the run, not in the middle of it."""
  if limit is None:
    return
  if config.example_unit == 'window':
    rate = config.sample_rate   # else the files', known when they are read
    if rate and config.win_len > limit * rate:
      raise ConfigError('win_len', config.win_len, f'the embedding model '
                        f'takes at most {limit:g} s of audio an example '
                        f'({int(limit * rate)} samples at {rate} Hz)')
  elif config.max_seconds > limit:
    raise ConfigError('max_seconds', config.max_seconds, 'the embedding '
                      f'model takes at most {limit:g} s of audio an '
                      f'example: give --max_seconds {limit:g} or less '
                      '(longer recordings or segments are then rejected, '
                      'with their reason in rejects.jsonl)')


def _options(batch) -> tuple:
  return (batch.option('embedding_model'), batch.option('embedding_device'),
          batch.option('embedding_dtype'))


def _caller_handler(batch):
  """The handler the run was given for the embedding feature, as this
  batch's options want it: the caller's own as it is (one model for every
  variant of a sweep), wavbeam's shared one of a GPU for these options
  (its for_options); None when none was given."""
  given = batch.extra_object('embedding')
  if given is not None and hasattr(given, 'for_options'):
    return given.for_options(*_options(batch))
  return given


def _handler_key(batch) -> tuple:
  """What names the model a batch runs: the caller's handler (one per run,
  though each variant of a sweep holds its own copy), else wavbeam's of
  these options."""
  given = batch.extra_object('embedding')
  if given is not None and not hasattr(given, 'for_options'):
    return ('caller',)
  return _options(batch)


def _handler(batch):
  """The caller's model handler for this run, else wavbeam's."""
  given = _caller_handler(batch)
  if given is not None:
    return given
  key = ('handler',) + _handler_key(batch)
  if key not in _LOADED:
    _LOADED[key] = embedding_models.EmbeddingModelHandler(
        batch.option('embedding_model'), batch.option('embedding_device'),
        batch.option('embedding_dtype'))
  return _LOADED[key]


def loaded(handler):
  """The handler's model, loaded once per process; ConfigError naming
  --embedding_model when it cannot be."""
  key = ('model', id(handler))
  if key not in _LOADED:
    try:
      _LOADED[key] = (handler, handler.load_model())
    except embedding_models.ModelError as e:
      raise ConfigError('embedding_model',
                        getattr(handler, 'model', repr(handler)),
                        str(e)) from e
  return _LOADED[key][1]


def _hidden_states(batch) -> np.ndarray:
  """Every hidden state of the model for the batch, [n, layers, frames,
  dim], computed once for every variant of a sweep that runs the same
  model, and for the whole ReadGroup the batch was read in."""
  handler = _handler(batch)
  # The passes follow the batch size: a variant of another size runs its
  # own, as a run of its own would (a batch agrees with each of its
  # examples alone to float tolerance, not to the bit).
  key = (('embedding-states', batch.option('embedding_batch_seconds')) +
         _handler_key(batch))
  if batch.group is None:
    return np.stack(batch.once(key, lambda: _run(batch, handler,
                                                 list(batch.windows))))
  group, first = batch.group
  states = group.once(key, lambda: _run(batch, handler, group.signals))
  return np.stack(states[first:first + len(batch.windows)])


def _run(batch, handler, signals) -> List[np.ndarray]:
  """[layers, frames, dim] of each of `signals` (1-D, at the dataset's
  rate), in order."""
  model = loaded(handler)
  rate = getattr(model, 'sample_rate', embedding_models.DEFAULT_RATE)
  normalize = getattr(model, 'normalize', False)
  waves = [model_input(s[np.newaxis], batch.sample_rate, rate, normalize)[0]
           for s in signals]
  longest = max(map(len, waves))
  limit = getattr(model, 'max_seconds', None)
  if limit is not None and longest > limit * rate:
    raise embedding_models.ModelError(
        f'{batch.option("embedding_model")}: takes at most {limit:g} s of '
        f'audio, and an example holds {longest / rate:g} s: cut '
        'shorter windows or segments')
  out = [None] * len(waves)
  for indices in passes([len(w) for w in waves],
                        int(batch.option('embedding_batch_seconds') * rate),
                        getattr(model, 'mixes_lengths', False),
                        int((getattr(model, 'input_seconds', None) or 0) *
                            rate)):
    results = handler.run_inference([waves[i] for i in indices], model)
    for i, result in zip(indices, results):
      states = np.asarray(getattr(result, 'inference', result), np.float32)
      out[i] = states[None] if states.ndim == 2 else states  # one output
  return out


def passes(lengths: List[int], budget: int, mix: bool,
           input_length: int = 0) -> List[List[int]]:
  """The examples (indices into `lengths`) of each forward pass: sorted
  by length, longest first, so that padding is small, as many as fit
  `budget` samples once padded to the longest of the pass (each to
  `input_length` at least: a model that pads every input itself), at
  least one; of one length each unless `mix`."""
  order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
  found, current, padded_to = [], [], 0
  for i in order:
    size = max(lengths[i], input_length)
    fits = current and (mix or lengths[i] == lengths[current[0]]) and \
        (len(current) + 1) * max(padded_to, size) <= budget
    if current and not fits:
      found.append(current)
      current, padded_to = [], 0
    current.append(i)
    padded_to = max(padded_to, size)
  if current:
    found.append(current)
  return found


def model_input(windows: np.ndarray, rate: int, model_rate: int,
                normalize: bool) -> np.ndarray:
  """float64 windows at `rate` -> float32 at the model's rate, each
  normalised to zero mean and unit variance when the model expects it
  (as transformers' Wav2Vec2FeatureExtractor does)."""
  if rate != model_rate:
    length = windows.shape[1]
    n_out = audio.resampled_length(length, rate, model_rate)
    windows = np.stack([audio.resample_range(w, 0, length, rate,
                                             model_rate, 0, n_out)
                        for w in windows])
  waves = windows.astype(np.float32)
  if normalize:
    mean = waves.mean(axis=1, keepdims=True)
    var = waves.var(axis=1, keepdims=True)
    waves = (waves - mean) / np.sqrt(var + 1e-7)
  return np.ascontiguousarray(waves, np.float32)


def provenance(config) -> dict:
  """What metadata.json records of the embedding: the model, a digest of
  its files, the rate and normalisation of its input, the layers,
  pooling, dtype, device kind and library versions."""
  model = config.option('embedding_model')
  return {
      'model': model, 'kind': embedding_models.kind_of(model),
      'sha256': embedding_models.digest(model),
      # Each example resampled to this rate, and normalised or not, first.
      **embedding_models.model_input(model),
      'layers': config.option('embedding_layers'),
      'pool': config.option('embedding_pool'),
      'dtype': config.option('embedding_dtype'),
      'device': embedding_models.resolve_device(
          config.option('embedding_device')),
      'libraries': embedding_models.library_versions(),
  }
