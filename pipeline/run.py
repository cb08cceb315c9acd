"""`python -m pipeline.run` and `from pipeline.run import run`: the run
command, pipeline/commands/run.py."""

from pipeline._aliases import alias

alias(__name__, 'pipeline.commands.run')
