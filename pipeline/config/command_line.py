"""The command line of PipelineConfig: a flag per field (and per option
of a --feature_module feature), and the option and feature tables of
docs/options.md, from the same fields and registry as --help."""

import argparse
import dataclasses
from typing import Optional, Sequence, Tuple

from pipeline.config import PipelineConfig
from pipeline.config.fields import split_list
from pipeline.config.splits import splits_text
from transforms.features import registry


def _optional_int(text: str) -> Optional[int]:
  return None if text.lower() in ('', 'none') else int(text)


def _optional_float(text: str) -> Optional[float]:
  return None if text.lower() in ('', 'none') else float(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """Adds one flag per config field, with its help and default, and one
  per option of a --feature_module feature (registered before)."""
  for field in dataclasses.fields(PipelineConfig):
    meta, flag = field.metadata, '--' + field.name
    if meta.get('internal'):
      continue
    if field.type is bool:
      parser.add_argument(flag, action='store_true',
                          help=meta['help'] + ' (default: off)')
      continue
    default = field.default
    kwargs = {'help': meta['help']}
    if field.name == 'features':  # with those --feature_module registered
      kwargs['help'] = ('comma-separated features to compute, from '
                        + ', '.join(registry.names()))
    if meta.get('required'):
      kwargs['required'] = True
    else:
      if field.name == 'splits':
        default = splits_text(default)
      elif field.name in ('split_lists', 'manifest', 'fold_splits',
                          'label_map'):
        default = ''
      elif isinstance(default, tuple):
        default = ','.join(default)
      if '(default:' not in kwargs['help']:  # else the help says it better
        shown = 'unset' if default is None else default
        kwargs['help'] += f' (default: {shown})'
      kwargs['default'] = default
    if field.type is int:
      kwargs['type'] = int
    elif field.type is float:
      kwargs['type'] = float
    elif field.type == Optional[int]:
      kwargs['type'] = _optional_int
    elif field.type == Optional[float]:
      kwargs['type'] = _optional_float
    elif 'choices' in meta:
      kwargs['choices'] = meta['choices']
    if meta.get('repeatable'):
      # Each use adds to the list (from_args joins them with commas).
      kwargs.update(action='append', default=None)
    parser.add_argument(flag, **kwargs)

  for option in registry.options(builtin=False):
    kwargs = {'help': f'{option.help} (default: {option.default}; a '
              'feature of --feature_module)', 'default': option.default}
    if option.choices:
      kwargs['choices'] = option.choices
    elif option.type is not str:
      kwargs['type'] = {(int, False): int, (float, False): float,
                        (int, True): _optional_int,
                        (float, True): _optional_float}[option.type,
                                                        option.optional]
    parser.add_argument('--' + option.name, **kwargs)


def from_args(args: argparse.Namespace) -> PipelineConfig:
  values = {'feature_options': {o.name: getattr(args, o.name)
                                for o in registry.options(builtin=False)}}
  for field in dataclasses.fields(PipelineConfig):
    if field.metadata.get('internal'):
      continue
    value = getattr(args, field.name)
    if field.metadata.get('repeatable'):
      value = ','.join(value or ())
    values[field.name] = value
  return PipelineConfig(**values)


def features_markdown() -> str:
  """The feature table of docs/options.md, from the registry."""
  rows = ['| feature | its options | what it is |', '|---|---|---|']
  for name in registry.names():
    feature = registry.get(name)
    own = [o.name for o in feature.options]
    if feature.uses_stft:
      own += [o.name for o in registry.STFT_OPTIONS]
    for required in feature.requires:
      own += [n for n in registry.get(required).depends_on() if n not in own]
    shown = ', '.join(f'`--{n}`' for n in own) or '-'
    rows.append(f'| `{name}` | {shown} | {feature.help} |')
  return '\n'.join(rows)


def options_markdown() -> str:
  """The option table of docs/options.md, from the same fields as --help."""
  rows = ['| option | default | what it does |', '|---|---|---|']
  for field in dataclasses.fields(PipelineConfig):
    meta = field.metadata
    if meta.get('internal'):
      continue
    if meta.get('required'):
      default = 'required'
    elif field.type is bool:
      default = 'off'
    elif field.name == 'splits':
      default = splits_text(field.default)
    elif isinstance(field.default, tuple):
      default = ','.join(field.default)
    else:
      default = 'unset' if field.default is None else str(field.default)
    text = meta['help']
    if 'choices' in meta:
      text += f' ({" / ".join(meta["choices"])})'
    rows.append(f'| `--{field.name}` | {default} | {text} |')
  return '\n'.join(rows)


def parse_known_args(
    argv: Sequence[str], prog: str = 'python -m pipeline.run'
) -> Tuple[PipelineConfig, Sequence[str]]:
  """Our flags -> PipelineConfig; the rest is left for Beam's options.
  `prog`: the command's name in --help and errors (`wavbeam run` from
  the installed command)."""
  # --feature_module first: its features' options are flags too.
  modules = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
  modules.add_argument('--feature_module', default='')
  registry.load_modules(split_list(
      modules.parse_known_args(argv)[0].feature_module))
  parser = argparse.ArgumentParser(
      prog=prog, allow_abbrev=False,
      description='Turn a folder of WAV files into a sharded TFRecord '
      'dataset. Flags not listed here (--runner, --direct_num_workers, ...) '
      "are passed to Beam's PipelineOptions.")
  add_arguments(parser)
  # The launcher's own flags (pipeline.run reads them first); listed for
  # --help.
  parser.add_argument('--quiet', action='store_true',
                      help='no progress display; the final summary, '
                      'warnings and errors are still printed')
  parser.add_argument('--verbose', action='store_true',
                      help="Beam's, gRPC's and wavbeam's INFO logs too "
                      '(by default only warnings and errors are logged)')
  args, beam_args = parser.parse_known_args(argv)
  return from_args(args), beam_args
