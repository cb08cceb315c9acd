"""--variants: one corpus, several feature settings side by side.

A variants file (JSON or TOML, by its extension) maps variant names to
option overrides, named as `wavbeam run`'s options:

    [nfft512]
    n_fft = 512
    [mfcc20]
    features = "log_mel,mfcc"
    n_mfcc = 20

Each variant is a complete dataset in OUT/<variant>/, written with the
run's options and its overrides; OUT/variants.json, written last, lists
every variant's options and what differs between them. Only feature
options may differ: the options that choose the recordings, their windows
and their splits are common. Each variant holds what a separate run with
its options holds: the same windows of the same recordings in the same
splits and order as the others, but where its features decide which
recordings it keeps (planning_groups).
"""

import dataclasses
import json
import tomllib
from typing import Dict, List, Mapping, Optional, Tuple

from apache_beam.io.filesystems import FileSystems

from pipeline.config import ConfigError, PipelineConfig, unique_pairs
from pipeline.contract import naming
from pipeline.contract import parts as parts_lib
from pipeline.contract.errors import DatasetError
from transforms.runtime import filesystem
from transforms.features import registry
from transforms.planning import rules as plan_lib

OPTION = 'variants'
FILE_NAME = naming.VARIANTS_FILE
FORMAT = 'wavbeam.variants'

def feature_options() -> frozenset:
  """What a variant may set: how features are computed and stored: the
  features, and every registered feature's options (a --feature_module's
  too)."""
  return frozenset({'features', 'feature_dtype'} |
                   {o.name for o in registry.options()})


# Those of the built-in features.
FEATURE_OPTIONS = frozenset({'features', 'feature_dtype'} | {
    o.name for o in registry.options(builtin=True)})
# Common to all variants, for a reason of their own.
WINDOW_OPTIONS = frozenset({'win_len', 'hop_len', 'pad',
                            'max_windows_per_signal'})


def read(path: str) -> Dict[str, Dict[str, object]]:
  """{variant: {option: value}} from a .json or .toml file; raises
  ConfigError naming the file and the problem."""
  try:
    with FileSystems.open(path) as f:
      data = f.read()
  except (OSError, IOError) as e:
    raise ConfigError(OPTION, path, f'cannot be read ({e})') from e
  try:
    # utf-8-sig: an editor's byte-order mark is not part of the text.
    if path.lower().endswith('.toml'):
      parsed = tomllib.loads(data.decode('utf-8-sig'))
    elif path.lower().endswith('.json'):
      parsed = json.loads(data.decode('utf-8-sig'),
                          object_pairs_hook=_no_repeats)
    else:
      raise ConfigError(OPTION, path, 'name a .json or .toml file (the '
                        'format is taken from the extension)')
  except (ValueError, UnicodeDecodeError) as e:
    raise ConfigError(OPTION, path, f'is not valid ({e})') from e
  if not isinstance(parsed, dict) or not parsed:
    raise ConfigError(OPTION, path, 'must map variant names to options')
  for name, overrides in parsed.items():
    if not naming.is_variant_name(name):
      raise ConfigError(OPTION, path, f'variant name {name!r}: use '
                        f'{naming.VARIANT_NAME_RULE} (it names a folder)')
    if not isinstance(overrides, dict):
      raise ConfigError(OPTION, path, f'variant {name!r}: give a table of '
                        'options')
  return parsed


def _no_repeats(pairs):
  return dict(unique_pairs(pairs))


def configs(config: PipelineConfig) -> Dict[str, PipelineConfig]:
  """{variant: its complete config, writing OUT/<variant>/}, each validated
  as a run's config is; raises ConfigError naming the variant."""
  found = {}
  for name, overrides in read(config.variants).items():
    for option, value in overrides.items():
      where = f'variant {name!r}: --{option}={value!r}'
      if option in WINDOW_OPTIONS:
        raise ConfigError(OPTION, config.variants, f'{where}: the windows '
                          'are common to all variants (every variant holds '
                          'the same windows of the same recordings); give '
                          'each window length a run of its own')
      allowed = feature_options()
      if option not in allowed:
        known = option in {f.name for f in dataclasses.fields(config)}
        raise ConfigError(OPTION, config.variants, f'{where}: ' + (
            'only feature options may differ between variants '
            f'({", ".join(sorted(allowed))}); this one is common to '
            'all' if known else 'no such option'))
    try:
      values = {k: _option_value(k, v, config.variants)
                for k, v in overrides.items()}
      # A --feature_module feature's options go with the others of theirs.
      plugin = {k: values.pop(k) for k in list(values) if k not in _TYPES}
      if plugin:
        values['feature_options'] = {**dict(config.feature_options),
                                     **plugin}
      found[name] = dataclasses.replace(
          config, variants=None, output_dir=naming.join(config.output_dir,
                                                        name), **values)
    except ConfigError as e:
      raise ConfigError(OPTION, config.variants,
                        f'variant {name!r}: {e}') from e
  return found


def planning_groups(variant_configs: Mapping[str, PipelineConfig]
                    ) -> List[Tuple[str, ...]]:
  """The variants in groups that keep the same recordings and segments,
  so hold the same examples in the same order: alike in
  plan.planning_options. Under --example_unit file or segment a variant
  whose STFT needs more frames than a recording has rejects it, and its
  siblings without that STFT keep it. Names sorted, groups by their
  first name."""
  groups: Dict[tuple, List[str]] = {}
  for name in sorted(variant_configs):
    key = plan_lib.planning_options(variant_configs[name])
    groups.setdefault(key, []).append(name)
  return sorted(tuple(names) for names in groups.values())


def index_groups(index: Mapping) -> List[Tuple[str, ...]]:
  """planning_groups of the variants a sweep's variants.json lists (as
  read_index gives it); DatasetError when a variant's options cannot be
  read as a config of this wavbeam."""
  configs = {}
  for name, entry in index['variants'].items():
    try:
      configs[name] = PipelineConfig.from_json(entry['options'])
    except (ConfigError, KeyError, TypeError) as e:
      raise DatasetError(f'{FILE_NAME}: variant {name!r}: its options '
                         f'cannot be read ({e})') from e
  return planning_groups(configs)


_TYPES = {f.name: f.type for f in dataclasses.fields(PipelineConfig)}
# What each type of option takes in a variants file, said as its user
# would say it.
_EXPECTED = {
    Tuple[str, ...]: 'a string of comma-separated names or an array of '
                     'strings',
    str: 'a string', Optional[str]: 'a string',
    int: 'an integer', Optional[int]: 'an integer',
    float: 'a number', Optional[float]: 'a number',
}
# The number options: what their value is made.
_NUMBERS = {int: int, Optional[int]: int, float: float, Optional[float]: float}


def _kind_of(value, path: str) -> str:
  """What a TOML or JSON file calls the type of `value`."""
  if isinstance(value, bool):  # before int: a bool is an int to Python
    return 'a boolean'
  if isinstance(value, dict):
    return 'an object' if path.lower().endswith('.json') else 'a table'
  for kind, word in ((int, 'an integer'), (float, 'a float'),
                     (str, 'a string'), (list, 'an array')):
    if isinstance(value, kind):
      return word
  return 'null' if value is None else f'a {type(value).__name__}'


def _option_value(option: str, value, path: str):
  """A TOML or JSON value (of the file `path`) as the command line would
  give the option: an array as its comma list, a number (or a string
  holding one, as the command line gives it) as the option's type, so
  that 7000 and --fmax 7000 are the same 7000.0 in metadata.json.
  ConfigError, naming the type the option takes, for a value of another
  type: PipelineConfig would fail on it with a TypeError, or take a
  boolean for a number."""
  kind = _TYPES.get(option)
  if kind is None:  # a --feature_module feature's option
    declared = registry.option(option)
    kind = (Optional[declared.type] if declared.optional
            else declared.type)
  expected, number = _EXPECTED[kind], _NUMBERS.get(kind)
  if kind == Tuple[str, ...] and isinstance(value, list):
    others = sorted({_kind_of(v, path) for v in value
                     if not isinstance(v, str)})
    if others:
      raise ConfigError(option, value, f'give {expected}, not an array '
                        f'holding {" and ".join(others)}')
    return ','.join(value)
  if value is None and kind in (Optional[int], Optional[float]):
    return None  # JSON's null: the option unset, as by default
  if isinstance(value, str) and number is None:
    return value
  if isinstance(value, str):
    try:
      return number(value)
    except ValueError as e:
      raise ConfigError(option, value, f'is not a number (give '
                        f'{expected})') from e
  numbers = (int,) if number is int else (int, float)
  if number is not None and isinstance(value, numbers) and \
      not isinstance(value, bool):
    return number(value)
  raise ConfigError(option, value, f'give {expected}, not '
                    f'{_kind_of(value, path)}')


def differences(variant_configs: Dict[str, PipelineConfig]
                ) -> Tuple[Dict[str, Dict[str, object]], List[str]]:
  """({variant: {option: value} where variants differ}, those options)."""
  options = {name: c.to_json() for name, c in variant_configs.items()}
  names = sorted({k for o in options.values() for k in o})
  differing = [k for k in names if k != 'output_dir' and
               len({json.dumps(o.get(k), sort_keys=True)
                    for o in options.values()}) > 1]
  return ({name: {k: o.get(k) for k in differing}
           for name, o in options.items()}, differing)


def index_text(variant_configs: Dict[str, PipelineConfig]) -> str:
  """variants.json: every variant's folder and options, what differs, and
  the parts every variant holds (parts.part_names: the sweep's one
  commit point for an --append)."""
  differ, differing = differences(variant_configs)
  return dumps_index({
      'format': FORMAT, 'format_version': 1,
      'differing_options': differing,
      'variants': {name: {'folder': name, 'differs': differ[name],
                          'options': c.to_json()}
                   for name, c in variant_configs.items()},
      'parts': [parts_lib.BASE],
  })


def dumps_index(index: dict) -> str:
  return json.dumps(index, indent=2, sort_keys=True) + '\n'


def write_started(output_dir: str, names) -> None:
  """Records the variants a sweep writes, in its temporary folder, before
  it makes their folders: an --overwrite of a sweep stopped before it
  wrote variants.json then knows every folder the stopped one made, and
  readers know those folders for an unfinished sweep's."""
  with filesystem.create(naming.join(naming.temp_dir(output_dir),
                                     naming.SWEEP_STARTED_FILE)) as f:
    f.write(json.dumps(sorted(names)).encode('utf-8'))


def read_started(output_dir: str) -> List[str]:
  """The variants an unfinished sweep in output_dir was writing (those
  that are variant names: each names a folder in output_dir); [] when
  there is none."""
  path = naming.join(naming.temp_dir(output_dir), naming.SWEEP_STARTED_FILE)
  try:
    with FileSystems.open(path) as f:
      names = json.loads(f.read())
  except Exception:  # pylint: disable=broad-except
    return []  # none, or unreadable: nothing known to replace
  if not isinstance(names, list):
    return []
  return [n for n in names if naming.is_variant_name(n)]


def read_index(output_dir: str):
  """variants.json of a sweep folder as a dict, or None where there is
  none; DatasetError unless every variant it lists is a variant name
  whose folder is its name (a folder read from the file could lead
  anywhere: an --overwrite deletes the variants it no longer has)."""
  path = naming.join(output_dir, FILE_NAME)
  if not FileSystems.exists(path):
    return None
  with FileSystems.open(path) as f:
    try:
      index = json.loads(f.read())
      variants = index['variants']
      folders = {name: entry['folder'] for name, entry in variants.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
      raise DatasetError(f'{path}: not a sweep index ({e!r})') from e
  for name, folder in sorted(folders.items()):
    if not naming.is_variant_name(name) or folder != name:
      raise DatasetError(
          f'{path}: variant {name!r} in folder {folder!r}: a variant is '
          f'named {naming.VARIANT_NAME_RULE} and its folder is its name; '
          'refusing to follow it')
  return index
