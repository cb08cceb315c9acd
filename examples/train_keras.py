"""Train a small Keras model on a wavbeam dataset.

    python examples/train_keras.py --data OUT [--epochs 5] [--batch_size 32]

Reads the train split and the held-out split (validation, or another
split the dataset has) with replay_dataset (as_supervised: (input, target)
pairs of the dataset's input_key, standardized with the train split's
statistics) and lets Keras infer the steps per epoch from the datasets'
cardinality. examples/sweep_keras.py imports build_model and
train_and_evaluate to train the same model on every variant of a sweep.
"""

import argparse
import dataclasses
import os
import sys
from typing import Dict, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402

from pipeline.contract import naming  # noqa: E402
from pipeline.readers.tf_dataset import load_metadata, replay_dataset  # noqa: E402

TRAIN = 'train'
# Preferred over any other split for evaluation, in this order.
HELD_OUT = ('validation', 'val', 'dev', 'valid')


class NoSplit(ValueError):
  """The dataset lacks a split that training or evaluation needs."""


@dataclasses.dataclass(frozen=True)
class Evaluation:
  """A trained model's score on the held-out split."""
  split: str
  input_key: str
  shape: List[int]
  accuracy: float
  loss: float


def evaluation_split(metadata: Dict, where: str = 'the dataset') -> str:
  """The split to evaluate on: validation (or val, dev, valid) where it
  has examples, else the first other non-train split that has some.

  Raises NoSplit naming what is missing, as an empty split would make
  Keras stop with an error that does not say which split it was.
  """
  sizes = {name: entry['num_examples']
           for name, entry in metadata['splits'].items()}
  if not sizes.get(TRAIN):
    raise NoSplit(f'{where} has no examples in a {TRAIN!r} split to train '
                  f'on (splits: {_listed(sizes)})')
  held_out = [n for n in HELD_OUT if sizes.get(n)]
  held_out += [n for n in sizes if n != TRAIN and sizes[n]]
  if not held_out:
    raise NoSplit(f'{where} has no split besides {TRAIN!r} with examples '
                  f'to evaluate on (splits: {_listed(sizes)}); write it '
                  'with e.g. --splits train=0.8,validation=0.2')
  return held_out[0]


def _listed(sizes: Dict[str, int]) -> str:
  return ', '.join(f'{n} ({k} examples)' for n, k in sizes.items())


def build_model(shape: Sequence[int], num_classes: int) -> keras.Model:
  """A small convolutional classifier of one example of `shape`: 2-D
  (frames, bins) as an image, averaged over time only (a class is told by
  where in frequency its energy lies), 1-D (samples) as a sequence. A
  first dimension of -1 (--example_unit file or segment: each example its
  own length, a batch padded to its longest) is any length."""
  shape = tuple(None if size < 0 else size for size in shape)
  if len(shape) == 2:
    conv = [keras.layers.Reshape((-1, shape[1], 1)),
            keras.layers.Conv2D(8, 3, strides=2, activation='relu'),
            keras.layers.Lambda(lambda x: keras.ops.mean(x, axis=1)),
            keras.layers.Flatten()]
  else:
    conv = [keras.layers.Reshape((-1, 1)),
            keras.layers.Conv1D(8, 9, strides=4, activation='relu'),
            keras.layers.GlobalAveragePooling1D()]
  model = keras.Sequential([
      keras.Input(shape=shape), *conv,
      keras.layers.Dense(num_classes, activation='softmax'),
  ])
  model.compile(optimizer='adam', loss='sparse_categorical_crossentropy',
                metrics=['accuracy'])
  return model


def train_and_evaluate(data_dir: str, epochs: int, batch_size: int,
                       variant: Optional[str] = None, seed: int = 0,
                       verbose: int = 2) -> Evaluation:
  """Trains build_model's model on the train split of `data_dir` (or of
  its `variant`, for a sweep) and scores it on evaluation_split's split.

  The seed sets Keras's initial weights and the reading order, so that two
  datasets of the same windows are compared with the same starting point.
  verbose: Keras's fit verbosity; 0 also skips the per-epoch evaluation.
  """
  meta = load_metadata(data_dir, variant=variant)
  where = naming.join(data_dir, variant) if variant else data_dir
  held_out_split = evaluation_split(meta, where)
  input_key = meta['input_key']
  shape = meta['schema'][input_key]['shape']

  def split(name, shuffle):
    return replay_dataset(data_dir, name, batch_size=batch_size,
                          as_supervised=True, shuffle=shuffle, seed=seed,
                          normalize=[input_key], variant=variant)

  train = split(TRAIN, True)
  held_out = split(held_out_split, False)
  if verbose:
    print(f'{TRAIN}: {meta["splits"][TRAIN]["num_examples"]} examples, '
          f'{int(train.cardinality())} batches; classes {meta["classes"]}; '
          f'input {input_key} {shape}; evaluated on {held_out_split}')
  keras.utils.set_random_seed(seed)
  model = build_model(shape, meta['num_classes'])
  # shuffle=False: replay_dataset shuffles (seeded); Keras cannot.
  model.fit(train, validation_data=held_out if verbose else None,
            epochs=epochs, shuffle=False, verbose=verbose)
  loss, accuracy = model.evaluate(held_out, verbose=0)
  return Evaluation(held_out_split, input_key, list(shape), float(accuracy),
                    float(loss))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--data', required=True, help='wavbeam output folder')
  parser.add_argument('--epochs', type=int, default=5)
  parser.add_argument('--batch_size', type=int, default=32)
  args = parser.parse_args(argv)
  try:
    result = train_and_evaluate(args.data, args.epochs, args.batch_size)
  except NoSplit as e:
    parser.exit(2, f'train_keras: {e}\n')
  print(f'{result.split} accuracy {result.accuracy:.3f}, '
        f'loss {result.loss:.3f}')


if __name__ == '__main__':
  main()
