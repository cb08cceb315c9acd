"""Which layer of a speech model serves a task? A linear probe per layer.

    python examples/probe_layers.py --input_dir CORPUS --output_dir OUT \
        --model facebook/hubert-base-ls960 [--layers 3,6,9,12] [--win_len 16000]

Writes one sweep (`wavbeam run --variants`): a variant per layer, each the
mean over the frames of that layer's hidden states, all from one forward
pass of the model per batch; then fits a logistic regression (softmax,
full-batch gradient descent in numpy, standardized inputs) on each
variant's train split and prints its accuracy on the held-out split, best
first. Searching the input features this way costs one model pass over
the corpus and seconds of fitting, not a training run per layer.
Progress goes to stderr, so that stdout is the table alone.
"""

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pipeline import load_metadata, numpy_dataset, run  # noqa: E402
from pipeline.config import PipelineConfig  # noqa: E402


def sweep_of_layers(layers) -> str:
  """A variants file's text: a variant per layer."""
  return ''.join(f'[layer{n}]\nembedding_layers = "{n}"\n' for n in layers)


def read(folder: str, split: str):
  """(embeddings [n, dim], targets [n]) of a split."""
  xs, ys = [], []
  for batch in numpy_dataset(folder, split, batch_size=256,
                             features=['embedding', 'target']):
    xs.append(batch['embedding'][:, 0])
    ys.append(batch['target'])
  return np.concatenate(xs).astype(np.float64), np.concatenate(ys)


def probe(train, test, classes: int, steps: int = 500,
          rate: float = 0.5) -> float:
  """Accuracy on `test` of a softmax regression fit on `train`."""
  (x, y), (x_test, y_test) = train, test
  mean, std = x.mean(axis=0), x.std(axis=0) + 1e-8
  x, x_test = (x - mean) / std, (x_test - mean) / std
  w = np.zeros((x.shape[1], classes))
  b = np.zeros(classes)
  onehot = np.eye(classes)[y]
  for _ in range(steps):
    logits = x @ w + b
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    w -= rate * (x.T @ (p - onehot) / len(x) + 1e-3 * w)
    b -= rate * (p - onehot).mean(axis=0)
  return float(((x_test @ w + b).argmax(axis=1) == y_test).mean())


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--input_dir', required=True,
                      help='a labelled corpus (class folders)')
  parser.add_argument('--output_dir', required=True,
                      help='where the sweep is written')
  parser.add_argument('--model', required=True,
                      help='--embedding_model: a transformers folder or '
                      'hub id, a TorchScript or ONNX file')
  parser.add_argument('--layers', default='3,6,9,12',
                      help='the layers probed, comma-separated')
  parser.add_argument('--win_len', type=int, default=16000,
                      help='samples per example (at the corpus rate)')
  parser.add_argument('--overwrite', action='store_true')
  args = parser.parse_args(argv)
  layers = [int(n) for n in args.layers.split(',')]
  print(f'writing a sweep of layers {args.layers} to {args.output_dir}',
        file=sys.stderr)
  with tempfile.TemporaryDirectory() as scratch:
    variants = os.path.join(scratch, 'layers.toml')
    with open(variants, 'w', encoding='utf-8') as f:
      f.write(sweep_of_layers(layers))
    run(PipelineConfig(
        input_dir=args.input_dir, output_dir=args.output_dir,
        win_len=args.win_len, features=('embedding',),
        embedding_model=args.model, embedding_pool='mean',
        splits=(('train', 0.7), ('test', 0.3)), variants=variants,
        overwrite=args.overwrite))
  scores = []
  for n in layers:
    folder = os.path.join(args.output_dir, f'layer{n}')
    classes = len(load_metadata(folder)['classes'])
    scores.append((probe(read(folder, 'train'), read(folder, 'test'),
                         classes), n))
  print('held-out accuracy of a linear probe per layer, best first:')
  for accuracy, n in sorted(scores, reverse=True):
    print(f'  layer {n:>3}  accuracy {accuracy:.3f}')


if __name__ == '__main__':
  main()
