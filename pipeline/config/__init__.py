"""The pipeline's configuration: one frozen dataclass, validated on creation.

PipelineConfig is composed of a class per group of options, each in a
module of this package with its fields, what it makes of a value given as
text, and its checks: inputs.py (what is read, and the classes), output.py
(the folder, the shards and the sink), windows.py (what one example is),
features.py, splits.py (and the write order), manifests.py (a manifest and
its segments), augment.py (augmented copies); fields.py holds what they
share. Each class is a part of PipelineConfig, not a config of its own:
their checks read each other's fields. Every option is a field of
PipelineConfig under its own name, as the flags and metadata.json name
it.

The command line is generated from the fields (name, type, default and
help live in one place; command_line.py), and every invalid value fails
here, before any pipeline is built, with a message naming the option and
the value.
"""

import dataclasses
from typing import Mapping, Optional

from pipeline.config.augment import AugmentOptions
from pipeline.config.features import FeatureOptions
from pipeline.config.fields import MAX_COUNT  # noqa: F401  (re-exported)
from pipeline.config.inputs import (  # noqa: F401  (re-exported)
    AUDIO_FORMATS, CHANNEL_POLICIES, GLOB_CHARS, LABEL_MODES,
    MAX_SAMPLE_RATE, OTHER_CLASSES, SILENCE_LABEL, InputOptions,
    label_map_text, unique_pairs)
from pipeline.config.manifests import (  # noqa: F401  (re-exported)
    LHOTSE_DEFAULT_FIELDS, ManifestOptions)
from pipeline.config.output import (  # noqa: F401  (re-exported)
    COMPRESSIONS, DEFAULT_SHARD_BYTES, MAX_SHARD_BYTES, MAX_SHARDS, SINKS,
    OutputOptions)
from pipeline.config.splits import (  # noqa: F401  (re-exported)
    REST_SPLIT, SPLIT_SOURCES, SplitOptions, check_split_name, splits_text)
from pipeline.config.windows import (  # noqa: F401  (re-exported)
    DEFAULT_MAX_SECONDS, EXAMPLE_UNITS, MAX_FILE_SECONDS, MAX_WIN_LEN,
    VARIABLE_UNITS, WINDOW_ONLY_OPTIONS, WindowOptions)
from pipeline.contract.errors import ConfigError  # noqa: F401  (re-exported)


# The fields come a group at a time, from the last class named here to
# the first (a dataclass takes its bases' fields from the farthest): the
# order of --help and of docs/options.md's table, and the order --append
# compares the options a dataset was written with in, naming the first
# that differs.
@dataclasses.dataclass(frozen=True, kw_only=True)
class PipelineConfig(OutputOptions, AugmentOptions, ManifestOptions,
                     SplitOptions, FeatureOptions, WindowOptions,
                     InputOptions):

  def __post_init__(self):
    # The list options given as text (the command line's), as written:
    # messages show them so, not as parsed (sorted, paths made absolute,
    # fractions and extensions normalised, a file's pairs for its name).
    written = {f.name: getattr(self, f.name).strip()
               for f in dataclasses.fields(self)
               if f.type not in (str, Optional[str])
               and isinstance(getattr(self, f.name), str)}
    # Each group's values as parsed, which every check reads; a value given
    # as text that cannot be parsed is refused here, the first in this
    # order.
    self._normalise_windows()
    self._normalise_features()
    self._normalise_input()
    self._normalise_splits()
    self._normalise_manifest()
    self._normalise_augment()
    # Then the groups' checks; where several options are wrong, the first
    # that fails names its option. A check that compares with another
    # group's options comes after that group's own checks: the input and
    # output values first, the windows before the features that must fit
    # in them (--n_fft, fft), the splits and features before the manifest
    # (which may give the splits, and whose extra columns must not take a
    # feature's name), the labels after the manifest (which may give them),
    # and last how the dataset is written (--sink, --array_record,
    # --append), which reads the splits and the manifest.
    self._validate_input(written)
    self._validate_output()
    self._validate_windows()
    self._validate_features(written)
    self._validate_splits(written)
    self._validate_manifest(written)
    self._validate_labels(written)
    self._validate_augment()
    self._validate_writing()

  def to_json(self) -> dict:
    """The options as JSON values (tuples as lists, at every depth), so
    that what metadata.json gives back compares equal to them."""
    out = {k: _as_json(v) for k, v in dataclasses.asdict(self).items()}
    # How this run was started, not what it computed: a resumed run's
    # metadata.json is an uninterrupted run's.
    out.pop('resume')
    # [name, fraction] pairs in their order, which assigns files (a JSON
    # object would lose it: metadata.json sorts its keys).
    out['splits'] = [[n, f] for n, f in self.splits]
    return out

  @classmethod
  def from_json(cls, options: Mapping) -> 'PipelineConfig':
    """The config to_json gave (a dataset's metadata.json keeps it as
    `config`), validated as a run's is. An option missing from it (a
    dataset written before the option existed) takes its default;
    ConfigError for one this version does not know, since it could have
    changed what was computed."""
    known = {f.name for f in dataclasses.fields(cls)}
    for name in sorted(set(options) - known):
      raise ConfigError(name, options[name], 'is not an option of this '
                        'wavbeam (written by a later version?)')
    values = dict(options)
    if isinstance(values.get('splits'), Mapping):  # an object: no order
      values['splits'] = tuple(values['splits'].items())
    elif isinstance(values.get('splits'), list):
      values['splits'] = tuple(tuple(pair) for pair in values['splits'])
    return cls(**values)


def _as_json(value):
  if isinstance(value, (tuple, list)):
    return [_as_json(v) for v in value]
  return value


# Last: the command line reads PipelineConfig's fields.
from pipeline.config.command_line import (  # noqa: E402,F401  (re-exported)
    add_arguments, features_markdown, from_args, options_markdown,
    parse_known_args)
