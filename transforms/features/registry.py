"""Features as plug-ins: each is a Feature registered under its name, in a
module of its own (this package's, or one `--feature_module` names).

A Feature declares its options (Option: name, type, default, bounds and
help, which become the run's flags and config fields), the features it
needs (`requires`: mfcc needs log_mel), whether it frames the STFT, the
length its first axis follows under --example_unit file (`length`), and
computes its values for a Batch of windows (numpy) and, where it has one,
a TfBatch (TensorFlow, for the featurizer). The command line, --help,
docs/options.md, variants, the schema, `inspect --plot` and both
featurizers take their features from here.

    @registry.register
    class Zcr(registry.Feature):
      name = 'zcr'
      help = 'zero crossings per frame'
      options = (registry.Option('zcr_frame', int, 400, 'frame length'),)

      def compute(self, batch):
        ...   # (n, win_len) float32 windows in batch.w32 -> (n, ...)

No Beam and no TensorFlow here: the featurizer and the readers use it.
"""

import dataclasses
import importlib
import math
import pkgutil
from typing import (Callable, Dict, List, NamedTuple, Optional,
                    Sequence, Tuple)

import numpy as np

from pipeline.contract.errors import ConfigError
from transforms.inputs import audio

# Samples (num_samples) or STFT frames (num_frames): what a feature's
# first axis per example follows under --example_unit file or segment.
SAMPLES, FRAMES = 'samples', 'frames'


class MinSamples(NamedTuple):
  """The fewest samples an example needs for a feature to have a value,
  and why, as a rejection says it ('one STFT frame needs --n_fft=512')."""
  samples: int
  why: str


ANY_LENGTH = MinSamples(0, '')


@dataclasses.dataclass(frozen=True)
class Option:
  """One option of a feature: a flag `--name` and a config field. A value
  outside `choices`, of another type, or not above `above` (nor at least
  `minimum`) is refused saying it `must be {rule}`; one past `maximum`,
  saying so."""
  name: str
  type: type               # int, float or str
  default: object
  help: str
  choices: Tuple[str, ...] = ()
  optional: bool = False   # None (unset) is a value
  above: Optional[float] = None
  minimum: Optional[float] = None
  rule: str = ''
  maximum: Optional[float] = None

  def check(self, value) -> None:
    """ConfigError unless `value` is of the option's type and bounds."""
    if value is None and self.optional:
      return
    if self.choices:
      if value not in self.choices:
        raise ConfigError(self.name, value,
                          f'must be one of {", ".join(self.choices)}')
      return
    kinds = {int: (int,), float: (int, float), str: (str,)}[self.type]
    fits = isinstance(value, kinds) and not isinstance(value, bool)
    if fits and self.type is not str:
      fits = (math.isfinite(value) and
              (self.above is None or value > self.above) and
              (self.minimum is None or value >= self.minimum))
    if not fits:
      raise ConfigError(self.name, value,
                        f'must be {self.rule or _KINDS[self.type]}')
    if self.maximum is not None and value > self.maximum:
      raise ConfigError(self.name, value, f'must be at most {self.maximum}')


_KINDS = {int: 'an integer', float: 'a number', str: 'a string'}


def positive_int(name: str, default: int, help_text: str,
                 maximum: Optional[int] = None) -> Option:
  return Option(name, int, default, help_text, above=0,
                rule='a positive integer', maximum=maximum)


class ReadGroup:
  """Whole recordings or segments read together (--example_unit file or
  segment, where a feature asks for batch_samples: a model's forward
  pass): their signals in order, of mixed lengths, split into Batches of
  equal-length neighbours for the features that need equal lengths, and
  computed on together, once per group, by a feature that can mix them
  (a model's padded batch: see Batch.group)."""

  def __init__(self, signals: Sequence[np.ndarray]):
    self.signals = list(signals)    # float64, one 1-D array each
    self._shared = {}

  def once(self, key, make: Callable[[], object]):
    """make(), computed once per group (and per sweep) for `key`."""
    if key not in self._shared:
      self._shared[key] = make()
    return self._shared[key]


class Batch:
  """What a feature computes from: a batch of windows (or of whole
  recordings of one length) at the dataset's rate, and the values other
  features and the STFT gave for it, each computed once. `shared`, when
  given, is kept across the extractors of a sweep's variants for one
  batch: a value that depends only on the windows and on options two
  variants share is computed once for both."""

  def __init__(self, windows: np.ndarray, sample_rate: int, config,
               constants: Dict, shared: Optional[dict] = None,
               extra=None, objects=None, group=None):
    # (n, length), as read: float64 full scale, or int16 PCM values
    # (audio.full_scale); `windows` is float64 either way.
    self.samples = windows
    # (ReadGroup, the index of this batch's first row in it), or None.
    self.group: Optional[Tuple[ReadGroup, int]] = group
    self.sample_rate = sample_rate
    self.config = config
    self._constants = constants         # kept by the extractor, per worker
    self._shared = {} if shared is None else shared
    self._extra = extra or {}           # user functions by name
    self._objects = objects or {}       # what the caller gave a feature
    self.w32 = self.once('float32', self._float32)

  @property
  def windows(self) -> np.ndarray:
    """The samples as full-scale float64 (n, length), made once."""
    if self.samples.dtype == np.float64:
      return self.samples
    return self.once('float64', lambda: audio.full_scale(self.samples))

  def _float32(self):
    return audio.as_float32(self.samples)

  def option(self, name: str):
    return option_value(self.config, name)

  def once(self, key, make: Callable[[], object]):
    """make(), computed once per batch (and per sweep) for `key`."""
    if key not in self._shared:
      self._shared[key] = make()
    return self._shared[key]

  def constant(self, key, make: Callable[[], object]):
    """make(), computed once per worker for `key` (an analysis window, a
    filterbank: what depends on options alone, or on the rate)."""
    if key not in self._constants:
      self._constants[key] = make()
    return self._constants[key]

  def extra_object(self, name: str):
    """What the caller gave feature `name` to compute with (the
    embedding feature's model handler), or None."""
    return self._objects.get(name)

  def get(self, name: str) -> np.ndarray:
    """The value of feature `name` for this batch (computed once)."""
    feature = self._extra.get(name) or get(name)
    return self.once(feature.cache_key(self),
                     lambda: feature.compute(self))


class Feature:
  """A feature: subclass, set the class attributes, define compute, and
  register the class (see the module docstring)."""

  name: str = ''
  help: str = ''
  options: Tuple[Option, ...] = ()
  # Features whose values this one computes from (their options apply).
  requires: Tuple[str, ...] = ()
  # It frames the STFT (--n_fft, --fft_hop, --fft_window apply; under
  # --example_unit file a recording shorter than a frame is rejected).
  uses_stft: bool = False
  # Under --example_unit file or segment: what the first axis of its value
  # per example follows (SAMPLES, FRAMES), or None for a fixed shape.
  length: Optional[str] = None
  # One value per window, meaningless for a whole recording (fft).
  window_only: bool = False
  # Its value depends on the sample rate (a filterbank in Hz).
  uses_rate: bool = False
  # inspect --plot: a panel of its own beside the spectrograms, or None.
  plot_title: Optional[str] = None
  plot_colormap: str = 'viridis'
  plot_symmetric: bool = False   # values around 0: a colour scale +-max

  def compute(self, batch: Batch) -> np.ndarray:
    raise NotImplementedError

  # Whether run(..., extra_features={name: object}) gives this feature an
  # object to compute with (Batch.extra_object), not a function of its own.
  takes_object = False

  def loads_model(self, extra_object) -> bool:
    """Whether its first value loads a model into the process that
    computes it (seconds, and a library's memory), given what the caller
    gave it (Batch.extra_object), so that the launcher computes its
    silent example, which gives the schema, in another process."""
    del extra_object
    return False

  def length_of(self, config) -> Optional[str]:
    """`length` for this config: SAMPLES, FRAMES, the name of a length
    key of its own, or None (a fixed shape)."""
    del config
    return self.length

  def min_samples(self, config, rate: int) -> MinSamples:
    """The fewest samples at `rate` an example (a window, a whole
    recording, a segment) needs for it to have a value: one STFT frame
    for a framed feature. Shorter recordings and segments are rejected at
    planning; a shorter --win_len is refused."""
    del rate
    if self.uses_stft:
      return MinSamples(config.n_fft,
                        f'one STFT frame needs --n_fft={config.n_fft}')
    return ANY_LENGTH

  def check_length(self, batch: 'Batch') -> None:
    """ConfigError naming --win_len where the batch's windows are shorter
    than min_samples (whole recordings that short are rejected at
    planning)."""
    need = self.min_samples(batch.config, batch.sample_rate)
    if batch.samples.shape[1] < need.samples:
      raise ConfigError('win_len', batch.samples.shape[1], f'is too short '
                        f'at {batch.sample_rate} Hz: {need.why}')

  def min_samples_options(self, config) -> tuple:
    """Where min_samples depends on the data's rate (a frame in ms, a
    model's receptive field), the options it follows; () where it does
    not (one STFT frame). Variants alike in planning_key keep the same
    recordings and segments."""
    del config
    return ()

  def check_rate(self, config, rate: int) -> None:
    """ConfigError, naming the option, where its options do not fit data
    at `rate` (a band edge above the Nyquist frequency, a frame of too
    few samples): a silent example computed before the dataset's rate is
    known is computed at a rate every feature fits."""
    del config, rate

  def batch_samples(self, config) -> Optional[int]:
    """Samples it wants computed together, where more than the usual
    batch (a model's forward pass), or None."""
    del config
    return None

  def shard_samples(self, config) -> Optional[int]:
    """At most this many samples of audio per shard, where computing it
    costs far more than writing it (a model), so that a job's shards, the
    work its workers share, are more than its size in bytes makes them;
    or None."""
    del config
    return None

  def provenance(self, config, extra_object=None) -> Optional[Dict]:
    """What metadata.json records of how its values were made, beyond
    the options (e.g. a digest of a model's files), or None.
    `extra_object`: what the caller gave it to compute with, if any."""
    del config, extra_object
    return None

  def check_provenance(self, config, recorded: Dict) -> None:
    """ConfigError when what `recorded` (its provenance when the dataset
    was written) says differs from what computing it now would use."""
    del config, recorded

  def compute_tf(self, batch):
    """Its value in TensorFlow for a featurizer.TfBatch; None when it has
    no TensorFlow form."""
    del batch
    return None

  def check(self, config) -> None:
    """ConfigError for options that do not go together (called when the
    feature, or one that requires it, is in --features)."""

  def cache_key(self, batch: Batch) -> tuple:
    """What its value depends on, beside the windows."""
    key = (self.name,) + tuple(batch.option(name)
                               for name in self.depends_on())
    return key + ((batch.sample_rate,) if self.uses_rate else ())

  def depends_on(self) -> Tuple[str, ...]:
    """The options its value depends on: its own, those of the features
    it requires, the STFT's."""
    names = [o.name for o in self.options]
    for required in self.requires:
      names += [n for n in get(required).depends_on() if n not in names]
    if self.uses_stft:
      names += [o.name for o in STFT_OPTIONS if o.name not in names]
    return tuple(names)


# The STFT every framed feature shares (transforms/features/stft.py holds
# its computation); declared here, as every feature module needs it.
STFT_OPTIONS = (
    positive_int('n_fft', 512, 'STFT frame length in samples', 2**32),
    positive_int('fft_hop', 256, 'samples between STFT frames', 2**32),
    Option('fft_window', str, 'hann', 'STFT window function',
           choices=('hann', 'hamming', 'rect')),
)

# What the float features (all but the signal, which has --signal_dtype)
# may be stored as: --feature_dtype.
FEATURE_DTYPES = ('float32', 'float16', 'bfloat16')

_FEATURES: Dict[str, Feature] = {}
_MODULES: List[str] = []     # the modules that registered features
_BUILTINS_LOADED = False
# The modules of this package that hold no feature.
_NOT_FEATURES = frozenset({'registry', 'functions', 'extractor', 'stft',
                           'user_function', 'embedding_models'})


def register(cls):
  """Class decorator: registers an instance of a Feature subclass under
  its name. ValueError for a name taken by another feature."""
  feature = cls()
  if not feature.name or not feature.name.isidentifier():
    raise ValueError(f'{cls.__name__}: a feature is named with letters, '
                     'digits and "_"')
  known = _FEATURES.get(feature.name)
  if known is not None and type(known).__qualname__ != cls.__qualname__:
    raise ValueError(f'feature {feature.name!r} is registered twice '
                     f'({type(known).__module__} and {cls.__module__})')
  _FEATURES[feature.name] = feature
  return cls


def load_builtins() -> None:
  """Imports every feature module of this package (once): each registers
  its features. Adding a feature is adding a module here."""
  global _BUILTINS_LOADED
  if _BUILTINS_LOADED:
    return
  _BUILTINS_LOADED = True
  package = importlib.import_module('transforms.features')
  for info in pkgutil.iter_modules(package.__path__):
    if info.name not in _NOT_FEATURES and not info.name.startswith('_'):
      importlib.import_module(f'transforms.features.{info.name}')


# The order --help and the docs list these built-in features in; a
# feature module added to this package is built in too, listed after them.
LISTED_FIRST = ('signal', 'spectrogram', 'log_mel', 'mfcc', 'lpc', 'fft',
                'embedding')


def builtins() -> Tuple[str, ...]:
  """The features this package's own modules register, in their order."""
  load_builtins()
  own = [name for name, feature in _FEATURES.items()
         if type(feature).__module__.startswith(__package__ + '.')]
  return tuple(sorted(own, key=lambda name: (
      LISTED_FIRST.index(name) if name in LISTED_FIRST else
      len(LISTED_FIRST), name)))


def load_modules(modules: Sequence[str]) -> None:
  """Imports the `--feature_module` modules (each registers its
  features); ConfigError naming one that cannot be imported."""
  load_builtins()
  for name in modules:
    if name in _MODULES:
      continue
    try:
      importlib.import_module(name)
    except Exception as e:  # ImportError, or the module's own error
      raise ConfigError('feature_module', name, f'cannot be imported '
                        f'({type(e).__name__}: {e})') from e
    _MODULES.append(name)


def get(name: str) -> Feature:
  load_builtins()
  return _FEATURES[name]


def names() -> Tuple[str, ...]:
  """Every registered feature: the built-in ones in their order, then
  those of --feature_module modules in the order they registered."""
  builtin = builtins()
  return builtin + tuple(n for n in _FEATURES if n not in builtin)


def is_builtin(name: str) -> bool:
  return name in builtins()


def options(builtin: Optional[bool] = None) -> Tuple[Option, ...]:
  """Every feature's options (and the STFT's), each once, in the order
  features declare them; `builtin` True or False: those of the built-in
  features, or of the others, only."""
  found: Dict[str, Option] = {}
  for name in names():
    if builtin is not None and is_builtin(name) != builtin:
      continue
    feature = get(name)
    for option in ((STFT_OPTIONS if feature.uses_stft else ()) +
                   tuple(feature.options)):
      found.setdefault(option.name, option)
  if builtin is False:
    stft = {o.name for o in STFT_OPTIONS}
    found = {k: v for k, v in found.items() if k not in stft}
  return tuple(found.values())


def option(name: str) -> Optional[Option]:
  return next((o for o in options() if o.name == name), None)


def option_value(config, name: str):
  """An option's value in a config: its field, or for a feature of a
  --feature_module, its entry in config.feature_options (else its
  default)."""
  if hasattr(type(config), '__dataclass_fields__') and \
      name in type(config).__dataclass_fields__:
    return getattr(config, name)
  given = dict(getattr(config, 'feature_options', ()))
  if name in given:
    return given[name]
  found = option(name)
  if found is None:
    raise KeyError(name)
  return found.default


def in_use(selected: Sequence[str]) -> Tuple[str, ...]:
  """The features `selected` computes: those, and what they require."""
  out: List[str] = []

  def add(name):
    if name in out:
      return
    for required in get(name).requires:
      add(required)
    out.append(name)

  for name in selected:
    add(name)
  return tuple(out)


def uses_stft(selected: Sequence[str]) -> bool:
  return any(get(n).uses_stft for n in in_use(selected))


def length_keys(config) -> Tuple[str, ...]:
  """The length keys of its own the features of `config` store under
  --example_unit file or segment (beside num_samples and num_frames)."""
  found = []
  for name in in_use(config.features):
    key = get(name).length_of(config)
    if key not in (None, SAMPLES, FRAMES) and key not in found:
      found.append(key)
  return tuple(found)


def loads_model(config, extra_features=None) -> bool:
  """Whether a feature of `config` loads a model into the process that
  computes it (Feature.loads_model), given the run's extra_features."""
  extra = extra_features or {}
  return any(get(n).loads_model(extra.get(n))
             for n in in_use(config.features))


def min_samples(config, rate: int) -> MinSamples:
  """The largest Feature.min_samples of the features of `config` at
  `rate`: what an example of a run needs."""
  load_modules(config.feature_module)  # in a worker, as the extractor does
  return max((get(n).min_samples(config, rate)
              for n in in_use(config.features)),
             key=lambda need: need.samples, default=ANY_LENGTH)


def planning_key(config) -> tuple:
  """What decides which recordings and segments the features of `config`
  keep: with --sample_rate, the samples they need (min_samples); else
  those the features whose need does not follow the rate need, and the
  options of those whose need does (Feature.min_samples_options)."""
  load_modules(config.feature_module)
  if config.sample_rate:
    return (min_samples(config, config.sample_rate).samples,)
  fixed, following = 0, set()
  for name in in_use(config.features):
    feature = get(name)
    options = feature.min_samples_options(config)
    if options:
      following.update(options)
    else:
      fixed = max(fixed, feature.min_samples(config, 16000).samples)
  return (fixed,) + tuple(sorted(following, key=repr))


def fits_rate(config, rate: int) -> bool:
  """Whether every feature of `config` fits data at `rate`
  (Feature.check_rate)."""
  try:
    for name in in_use(config.features):
      get(name).check_rate(config, rate)
  except ConfigError:
    return False
  return True


def batch_samples(config) -> Optional[int]:
  """The most Feature.batch_samples of the features of `config`, or
  None."""
  found = [get(n).batch_samples(config) for n in in_use(config.features)]
  found = [n for n in found if n]
  return max(found) if found else None


def shard_samples(config) -> Optional[int]:
  """The least Feature.shard_samples of the features of `config`, or
  None."""
  found = [get(n).shard_samples(config) for n in in_use(config.features)]
  found = [n for n in found if n]
  return min(found) if found else None


def provenance(config, extra_features=None) -> Dict[str, Dict]:
  """{feature: its provenance} of the features of `config` that record
  one (metadata.json's `features`), given the run's extra_features."""
  found, extra = {}, extra_features or {}
  for name in config.features:
    if name in names():
      feature = get(name)
      given = extra.get(name) if feature.takes_object else None
      # Only with an object: a plug-in's provenance(self, config) works.
      recorded = (feature.provenance(config) if given is None
                  else feature.provenance(config, given))
      if recorded is not None:
        found[name] = recorded
  return found
