"""The options of the features computed: which (from the registry of
transforms/features/, with the plug-ins of --feature_module), and the
options each declares, a field apiece for the built-in ones."""

import dataclasses
from typing import Mapping, Optional, Tuple

from pipeline.config.fields import check_choices, opt, split_list
from pipeline.contract.errors import ConfigError
from transforms.features import registry


def _with_feature_options(cls):
  """Adds a field for every option of the built-in features (each declared
  by its feature, transforms/features/), after `feature_options`: the flat
  names `PipelineConfig(n_fft=1024)`, the flags and metadata.json use."""
  annotations = {}
  for name, kind in cls.__annotations__.items():
    annotations[name] = kind
    if name != 'feature_options':
      continue
    for option in registry.options(builtin=True):
      annotations[option.name] = (Optional[option.type] if option.optional
                                  else option.type)
      setattr(cls, option.name, opt(
          option.help, default=option.default, feature_option=option,
          **({'choices': option.choices} if option.choices else {})))
  cls.__annotations__ = annotations
  return cls


@dataclasses.dataclass(frozen=True, kw_only=True)
@_with_feature_options
class FeatureOptions:
  features: Tuple[str, ...] = opt(
      'comma-separated features to compute, from the registered ones ('
      + ', '.join(registry.builtins()) + ', and those of --feature_module)',
      default=('signal', 'spectrogram'))
  feature_dtype: str = opt(
      'what the float features (every one but the signal, which has '
      '--signal_dtype) are stored as: float32, or float16 or bfloat16 in '
      'half the bytes, each value the float32 one rounded to nearest '
      'even (statistics are of the float32 values)', default='float32',
      choices=registry.FEATURE_DTYPES)
  feature_module: Tuple[str, ...] = opt(
      'comma-separated Python modules to import first, whose features '
      '(transforms/features/registry.py) --features may then name, with '
      'their options as flags; importable wherever the job runs '
      '(default: none)', default=())
  feature_options: Tuple[Tuple[str, object], ...] = opt(
      'the options of the --feature_module features, given as their own '
      'flags (default: their defaults)', default=(), internal=True)

  @property
  def uses_stft(self) -> bool:
    """A feature in use frames the STFT (--n_fft applies)."""
    return registry.uses_stft(self.features)

  def min_samples(self, rate: int) -> 'registry.MinSamples':
    """The fewest samples an example needs at `rate` for every feature
    in use to have a value, and why (registry.min_samples)."""
    return registry.min_samples(self, rate)

  def planning_key(self) -> tuple:
    """What decides which recordings the features keep
    (registry.planning_key)."""
    return registry.planning_key(self)

  def option(self, name: str):
    """The value of a feature's option: a field, or one of
    feature_options (a --feature_module feature's)."""
    return registry.option_value(self, name)

  def _normalise_features(self):
    if isinstance(self.features, str):
      object.__setattr__(self, 'features', split_list(self.features))
    object.__setattr__(self, 'features', tuple(self.features))
    if isinstance(self.feature_module, str):
      object.__setattr__(self, 'feature_module',
                         split_list(self.feature_module))
    object.__setattr__(self, 'feature_module', tuple(self.feature_module))
    options = self.feature_options
    if isinstance(options, Mapping):
      options = options.items()
    object.__setattr__(self, 'feature_options', tuple(sorted(
        (str(k), v) for k, v in options)))

  def _validate_features(self, written: Mapping[str, str]):
    """The features, from the registry (with --feature_module's), and
    every feature option: each by its own rules, then those of the
    features in use that go with other options."""
    check_choices(self, FeatureOptions)
    modules = written.get('feature_module', ','.join(self.feature_module))
    if len(set(self.feature_module)) != len(self.feature_module):
      raise ConfigError('feature_module', modules, 'lists a repeat')
    registry.load_modules(self.feature_module)
    features = written.get('features', ','.join(self.features))
    if not self.features:
      raise ConfigError('features', features, 'name at least one feature')
    known = registry.names()
    unknown = [f for f in self.features if f not in known]
    if unknown:
      raise ConfigError('features', features,
                        f'unknown {unknown}; choose from {", ".join(known)}'
                        + ('' if self.feature_module else
                           ' (or a feature of a --feature_module)'))
    if len(set(self.features)) != len(self.features):
      raise ConfigError('features', features, 'lists a repeat')
    plugin = {o.name: o for o in registry.options(builtin=False)}
    for name, value in self.feature_options:
      if name not in plugin:
        raise ConfigError(name, value, 'is an option of no feature of '
                          f'--feature_module={modules or "(none)"}')
    for option in registry.options():
      option.check(registry.option_value(self, option.name))
    if self.variable_length:
      for name in self.features:
        if registry.get(name).window_only:
          raise ConfigError('features', features, f'{name} is one spectrum '
                            'of a whole window, with a length of its own '
                            f'per example under --example_unit '
                            f'{self.example_unit}; use spectrogram')
    if (self.example_unit == 'window' and self.uses_stft and
        self.n_fft > self.win_len):
      raise ConfigError('n_fft', self.n_fft,
                        f'must not exceed --win_len={self.win_len}')
    for name in registry.in_use(self.features):
      registry.get(name).check(self)
    if self.example_unit == 'window' and self.sample_rate:
      need = registry.min_samples(self, self.sample_rate)
      if self.win_len < need.samples:
        raise ConfigError('win_len', self.win_len, f'is too short at '
                          f'--sample_rate={self.sample_rate}: {need.why}')
    if self.fmax is not None:
      if self.fmax <= self.fmin:
        raise ConfigError('fmax', self.fmax,
                          f'must exceed --fmin={self.fmin}')
      if self.sample_rate is not None and self.fmax > self.sample_rate / 2:
        raise ConfigError('fmax', self.fmax, 'must not exceed half of '
                          f'--sample_rate={self.sample_rate}')
    if self.sample_rate is not None and self.fmin >= self.sample_rate / 2:
      raise ConfigError('fmin', self.fmin, 'must be below half of '
                        f'--sample_rate={self.sample_rate}')
