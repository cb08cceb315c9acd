"""The root of every error wavbeam raises on purpose.

`except WavbeamError` catches any of them (a bad option, a broken
dataset, a corrupt record, a changed output folder), and none of Python's
or a library's own errors. Each keeps its older base (ValueError,
RuntimeError) so existing handlers still catch it. Standard library only:
every layer imports it.
"""


class WavbeamError(Exception):
  """Anything wavbeam reports as a problem with input, output or options."""


class DatasetError(WavbeamError, ValueError):
  """A dataset is missing, incomplete, or does not match its metadata
  (raised by every reader)."""


class ConfigError(WavbeamError, ValueError):
  """An option has a value the pipeline cannot work with."""

  def __init__(self, option: str, value, reason: str):
    self.option, self.value, self.reason = option, value, reason
    super().__init__(f'--{option}={value!r}: {reason}')

  def __reduce__(self):
    # As itself from another process (a forked worker's, or the launcher's
    # child that loads a model): the command still exits 2.
    return type(self), (self.option, self.value, self.reason)
