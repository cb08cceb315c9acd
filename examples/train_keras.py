"""Train a small Keras model on a wavbeam dataset.

    python examples/train_keras.py --data OUT [--epochs 5] [--batch_size 32]

Reads the train and validation splits with replay_dataset (as_supervised:
(spectrogram, target) pairs, standardized with the train split's statistics)
and lets Keras infer the steps per epoch from the datasets' cardinality.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402

from pipeline.replay import load_metadata, replay_dataset  # noqa: E402


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--data', required=True, help='wavbeam output folder')
  parser.add_argument('--epochs', type=int, default=5)
  parser.add_argument('--batch_size', type=int, default=32)
  args = parser.parse_args(argv)

  meta = load_metadata(args.data)
  input_key = meta['input_key']
  shape = meta['schema'][input_key]['shape']

  def split(name, shuffle):
    return replay_dataset(args.data, name, batch_size=args.batch_size,
                          as_supervised=True, shuffle=shuffle, seed=0,
                          normalize=[input_key])

  train = split('train', True)
  validation = split('validation', False)
  print(f'train: {meta["splits"]["train"]["num_examples"]} examples, '
        f'{int(train.cardinality())} batches; classes {meta["classes"]}')

  model = keras.Sequential([
      keras.Input(shape=shape),
      keras.layers.Reshape((*shape, 1)) if len(shape) == 2 else
      keras.layers.Reshape((shape[0], 1)),
      keras.layers.Conv2D(8, 3, strides=2, activation='relu')
      if len(shape) == 2 else keras.layers.Conv1D(8, 9, strides=4,
                                                  activation='relu'),
      keras.layers.GlobalAveragePooling2D() if len(shape) == 2 else
      keras.layers.GlobalAveragePooling1D(),
      keras.layers.Dense(meta['num_classes'], activation='softmax'),
  ])
  model.compile(optimizer='adam', loss='sparse_categorical_crossentropy',
                metrics=['accuracy'])
  model.fit(train, validation_data=validation, epochs=args.epochs, verbose=2)
  loss, accuracy = model.evaluate(validation, verbose=0)
  print(f'validation accuracy {accuracy:.3f}, loss {loss:.3f}')


if __name__ == '__main__':
  main()
