"""The `wavbeam` command's module under its first name:
pipeline/commands/cli.py."""

from pipeline._aliases import alias

alias(__name__, 'pipeline.commands.cli')
