"""Module paths that users, scripts and docs name, kept where the code
moved from. Each old name is the new module itself (one module object:
what a program sets or patches on one, it sets on the other), and an old
command name still runs with `python -m`."""

import importlib
import runpy
import sys
import types


def alias(name: str, target: str) -> None:
  """Makes module `name` (a shim's __name__) module `target`; run as a
  program (`python -m OLD`), runs `target` as one."""
  if name == '__main__':
    from pipeline.commands import startup  # only commands run this way
    startup.prepare_process()
    startup.interrupted_in_one_line(lambda: runpy.run_module(
        target, run_name='__main__', alter_sys=True))
  else:
    sys.modules[name] = importlib.import_module(target)


class _CallableModule(types.ModuleType):
  """A module that is also its own function when called."""

  def __call__(self, *args, **kwargs):
    return getattr(self, self.__dict__['_called_as'])(*args, **kwargs)


def call_as(name: str, function: str) -> None:
  """Makes module `name` callable as its `function`: `pipeline.run` is the
  run module (`from pipeline.run import run`, `python -m pipeline.run`)
  and the run function (`pipeline.run(config)`) at once."""
  module = sys.modules[name]
  module.__dict__['_called_as'] = function
  module.__class__ = _CallableModule
