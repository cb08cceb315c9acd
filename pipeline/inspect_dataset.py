"""`python -m pipeline.inspect_dataset`: pipeline/commands/inspect.py."""

from pipeline._aliases import alias

alias(__name__, 'pipeline.commands.inspect')
