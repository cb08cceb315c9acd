"""`python -m pipeline.demo`: pipeline/commands/demo.py."""

from pipeline._aliases import alias

alias(__name__, 'pipeline.commands.demo')
