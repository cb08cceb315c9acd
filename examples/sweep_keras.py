"""Train the same small Keras model on every variant of a feature sweep.

    python examples/sweep_keras.py --sweep OUT [--epochs 3] [--batch_size 32]

OUT is a folder written with `wavbeam run --variants FILE`. Each variant is
trained with examples/train_keras.py's model and reading (its own
input_key, standardized with its train split's statistics, the same seed),
then scored on the held-out split (validation, or another split the sweep
has). Prints a line per variant, best accuracy first: its name, the
options that set it apart (variants.json's `differs`), the accuracy and the
loss. Progress goes to stderr, so that stdout is the table alone.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pipeline.commands import demo  # noqa: E402
from pipeline import variants as variants_lib  # noqa: E402


def _epochs(n):
  return f'{n} epoch' + ('' if n == 1 else 's')


def _differs(options):
  return ', '.join(f'{k}={_value(v)}' for k, v in sorted(options.items()))


def _value(value):
  if isinstance(value, (list, tuple)):
    return ','.join(str(v) for v in value)
  return str(value)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--sweep', required=True,
                      help='folder written by wavbeam run --variants')
  parser.add_argument('--epochs', type=int, default=3)
  parser.add_argument('--batch_size', type=int, default=32)
  parser.add_argument('--seed', type=int, default=0,
                      help='initial weights and reading order, the same for '
                      'every variant')
  args = parser.parse_args(argv)

  index = variants_lib.read_index(args.sweep)
  if index is None:
    parser.exit(2, f'sweep_keras: {args.sweep} holds no '
                f'{variants_lib.FILE_NAME}: it is not a sweep (train a '
                'single dataset with examples/train_keras.py), or its run '
                'did not finish\n')
  listed = index['variants']
  # TensorFlow only once there is a sweep to train on, so that a wrong
  # folder is told at once; without the start-up lines it writes on a
  # machine without a GPU, which read as failures among the progress lines.
  demo.import_tensorflow_quietly()
  import train_keras  # pylint: disable=import-outside-toplevel
  results = {}
  for i, name in enumerate(sorted(listed), 1):
    print(f'[{i}/{len(listed)}] {name}: training {_epochs(args.epochs)}',
          file=sys.stderr, flush=True)
    try:
      results[name] = train_keras.train_and_evaluate(
          args.sweep, args.epochs, args.batch_size, variant=name,
          seed=args.seed, verbose=0)
    except train_keras.NoSplit as e:
      parser.exit(2, f'sweep_keras: {e}\n')

  # Ties go to the lower loss, then the name, so the order is reproducible.
  ranked = sorted(results.items(), key=lambda item: (
      -item[1].accuracy, item[1].loss, item[0]))
  split = next(iter(results.values())).split
  print(f'{split} accuracy per variant, best first ({_epochs(args.epochs)}, '
        f'seed {args.seed}):')
  width = max(len(name) for name in results)
  differs = {name: _differs(listed[name]['differs']) or '(no difference)'
             for name in results}
  differs_width = max(len(d) for d in differs.values())
  inputs = {name: f'{r.input_key} {r.shape}' for name, r in results.items()}
  inputs_width = max(len(i) for i in inputs.values())
  for name, result in ranked:
    print(f'  {name:{width}s}  {differs[name]:{differs_width}s}  '
          f'{inputs[name]:{inputs_width}s}  '
          f'accuracy {result.accuracy:.3f}  loss {result.loss:.3f}')


if __name__ == '__main__':
  main()
