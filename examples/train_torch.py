"""Train a small PyTorch model on a wavbeam dataset.

    python examples/train_torch.py --data OUT [--epochs 5] [--batch_size 32]

Reads the train split and the held-out split (validation, or another split
the dataset has) with WavbeamIterableDataset: batches of the dataset's
input_key as float32 (dtype=, whatever --feature_dtype stored it as),
standardized with the train split's statistics from metadata.json, and
the target. The model: a strided convolution, the mean over time (each
frequency kept) and a linear layer.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from pipeline.readers.metadata import load_metadata  # noqa: E402
from pipeline.readers.torch_dataset import WavbeamIterableDataset  # noqa: E402

TRAIN = 'train'
HELD_OUT = ('validation', 'val', 'dev', 'valid')


def held_out_split(metadata) -> str:
  """validation (or val, dev, valid) where it has examples, else the
  first other split that has some; ValueError when there is none."""
  sizes = {n: e['num_examples'] for n, e in metadata['splits'].items()}
  for name in (*HELD_OUT, *sizes):
    if name != TRAIN and sizes.get(name):
      return name
  raise ValueError(f'no split besides {TRAIN!r} holds examples to '
                   f'evaluate on (splits: {sizes})')


class _PoolOverTime(torch.nn.Module):
  """The mean over the frames (or samples) axis, keeping the others: a
  class is told by where in frequency its energy lies."""

  def forward(self, x):
    return x.mean(dim=2).flatten(1)


def build_model(shape, num_classes: int) -> torch.nn.Module:
  """(frames, bins) as a one-channel image, (samples) as a sequence: a
  strided convolution, the mean over time, a linear layer."""
  if len(shape) == 2:
    conv = torch.nn.Conv2d(1, 8, 3, stride=2)
    width = 8 * ((shape[1] - 3) // 2 + 1)
  else:
    conv = torch.nn.Conv1d(1, 8, 9, stride=4)
    width = 8
  # A channel axis first: [n, 1, ...].
  return torch.nn.Sequential(torch.nn.Unflatten(1, (1, shape[0])), conv,
                             torch.nn.ReLU(), _PoolOverTime(),
                             torch.nn.Linear(width, num_classes))


def train_and_evaluate(data_dir: str, epochs: int, batch_size: int,
                       variant=None, seed: int = 0,
                       evaluated_on=None) -> float:
  """The accuracy on `evaluated_on` (default: held_out_split's split) of
  build_model's model trained on the train split of `data_dir` (or of its
  `variant`, for a sweep)."""
  meta = load_metadata(data_dir, variant=variant)
  key = meta['input_key']
  stats = meta['splits'][TRAIN]['statistics'][key]
  mean, std = stats['mean'], stats['std'] or 1.0

  def batches(split, shuffle):
    return WavbeamIterableDataset(
        data_dir, split, features=[key, 'target'], batch_size=batch_size,
        shuffle=shuffle, seed=seed, variant=variant, dtype=torch.float32)

  torch.manual_seed(seed)
  model = build_model(meta['schema'][key]['shape'], meta['num_classes'])
  optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
  train = batches(TRAIN, True)
  for epoch in range(epochs):
    train.set_epoch(epoch)
    model.train()
    for batch in train:
      optimizer.zero_grad()
      loss = torch.nn.functional.cross_entropy(
          model((batch[key] - mean) / std), batch['target'])
      loss.backward()
      optimizer.step()
  model.eval()
  right = total = 0
  with torch.no_grad():
    for batch in batches(evaluated_on or held_out_split(meta), False):
      guess = model((batch[key] - mean) / std).argmax(1)
      right += int((guess == batch['target']).sum())
      total += len(guess)
  return right / total


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--data', required=True, help='wavbeam output folder')
  parser.add_argument('--epochs', type=int, default=5)
  parser.add_argument('--batch_size', type=int, default=32)
  args = parser.parse_args(argv)
  try:
    accuracy = train_and_evaluate(args.data, args.epochs, args.batch_size)
  except ValueError as e:
    parser.exit(2, f'train_torch: {e}\n')
  print(f'accuracy {accuracy:.3f}')


if __name__ == '__main__':
  main()
