"""What the groups of options share: the field helper that keeps each
option's help with its name and default, and the checks of one value."""

import dataclasses
from typing import Tuple

from pipeline.contract.errors import ConfigError

# Upper bound of window and example counts and seeds, past which a value is
# a typo rather than a choice.
MAX_COUNT = 2**62


def opt(help_text, **kw):
  """A config field: its help and what the command line makes of it
  (`required`, `choices`, `repeatable`, `internal`: no flag) in its
  metadata, its default (`default` or `default_factory`) as a field's."""
  return dataclasses.field(metadata={'help': help_text, **kw}, **{
      k: v for k, v in kw.items() if k in ('default', 'default_factory')})


def at_most(name, value, bound, why=''):
  if value > bound:
    raise ConfigError(name, value, f'must be at most {bound}' +
                      (f' ({why})' if why else ''))


def positive(name, value):
  if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
    raise ConfigError(name, value, 'must be a positive integer')


def check_choices(config, group) -> None:
  """ConfigError for the first field of `group` (a class of options)
  whose value in `config` is not one of the field's `choices`."""
  for field in dataclasses.fields(group):
    choices = field.metadata.get('choices')
    if choices and getattr(config, field.name) not in choices:
      raise ConfigError(field.name, getattr(config, field.name),
                        f'must be one of {", ".join(choices)}')


def split_list(text: str) -> Tuple[str, ...]:
  return tuple(p.strip() for p in text.split(',') if p.strip())
