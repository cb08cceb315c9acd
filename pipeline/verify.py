"""`python -m pipeline.verify`: pipeline/commands/verify.py."""

from pipeline._aliases import alias

alias(__name__, 'pipeline.commands.verify')
