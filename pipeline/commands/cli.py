"""The `wavbeam` command that `pip install` puts on the PATH.

    wavbeam run --input_dir IN --output_dir OUT [flags]   # commands/run.py
    wavbeam inspect OUT [--show N] [--plot FILE.png]  # commands/inspect.py
    wavbeam verify OUT                                # commands/verify.py
    wavbeam demo                                      # commands/demo.py

Each subcommand is exactly its module's command: same flags, same exit
codes. Only the chosen module is imported (Beam for run, TensorFlow only
where a command reads with it).
"""

import importlib
import sys
from typing import Optional, Sequence

COMMANDS = {
    'run': ('pipeline.commands.run',
            'preprocess a folder of WAV files into a dataset'),
    'inspect': ('pipeline.commands.inspect', 'summarize a dataset, show '
                'examples, plot them'),
    'verify': ('pipeline.commands.verify',
               'check every shard against metadata.json'),
    'demo': ('pipeline.commands.demo', 'make a small corpus, preprocess it, '
             'read it back and plot it (in ./scratch/demo)'),
}


def usage() -> str:
  lines = ['usage: wavbeam {run,inspect,verify,demo} [ARGS]', '',
           'commands (wavbeam COMMAND --help for its flags):']
  lines += [f'  {name:8s} {text}' for name, (_, text) in COMMANDS.items()]
  return '\n'.join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  if not argv or argv[0] in ('-h', '--help'):
    print(usage(), file=sys.stdout if argv else sys.stderr)
    return 0 if argv else 2
  command, rest = argv[0], argv[1:]
  if command not in COMMANDS:
    print(f'{usage()}\nerror: unknown command {command!r}', file=sys.stderr)
    return 2
  # Named as typed: `wavbeam run --help` says `usage: wavbeam run ...`.
  return load(command, rest).main(rest, prog=f'wavbeam {command}')


def load(command: str, argv: Sequence[str] = ()):
  """The module of a command; `run` (its arguments `argv`) with Beam
  imported lean (see commands/lean_beam.py: this is a command's process,
  not a library's)."""
  if command == 'run':
    from pipeline.commands import lean_beam  # pylint: disable=import-outside-toplevel
    lean_beam.import_beam(argv)
  return importlib.import_module(COMMANDS[command][0])


def command() -> None:
  """The installed `wavbeam` command: main, then console.exit_process.
  Every command but run ends quietly once its reader has gone, as `git
  log | head` does (console.end_on_closed_reader); a run finishes its
  dataset (console.ClosedSafe). Console imports Beam, which run imports
  its own way: for run, only after main."""
  from pipeline.commands import startup  # pylint: disable=import-outside-toplevel
  startup.prepare_process()
  startup.interrupted_in_one_line(_command)


def _command() -> None:
  argv = sys.argv[1:]
  if not argv or argv[0] != 'run':
    from pipeline.commands import console  # pylint: disable=import-outside-toplevel
    console.end_on_closed_reader()
  code = main(argv)
  from pipeline.commands import console  # pylint: disable=import-outside-toplevel
  console.exit_process(code)


if __name__ == '__main__':
  command()
