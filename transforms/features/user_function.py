"""A feature function of the caller's own (`run(config,
extra_features={name: fn})`): fn(windows, sample_rate) on a (n, win_len)
float32 batch, returning an array whose first axis is n. Under
--example_unit file or segment it is given one example at a time, its
whole length, as a (1, n) array (several of one length may share a
batch), and its rows are stacked."""

import numpy as np

from transforms.features import registry


class FunctionFeature(registry.Feature):
  """A function's feature, for one extractor (not registered: the function
  lives in the caller's program)."""

  def __init__(self, name: str, fn, variable_length: bool):
    self.name = name
    self.fn = fn
    self.variable_length = variable_length

  def cache_key(self, batch) -> tuple:
    return ('extra', self.name)

  def compute(self, batch):
    windows = batch.w32
    if not self.variable_length or len(windows) == 1:
      value = np.asarray(self.fn(windows, batch.sample_rate))
    else:
      value = self._by_example(windows, batch.sample_rate)
    if value.ndim == 0 or value.shape[0] != windows.shape[0]:
      raise ValueError(
          f'feature function {self.name!r} returned shape {value.shape} for '
          f'{windows.shape[0]} windows; its first axis must be the window')
    return value

  def _by_example(self, windows, sample_rate):
    rows = []
    for i in range(len(windows)):
      value = np.asarray(self.fn(windows[i:i + 1], sample_rate))
      if value.ndim == 0 or value.shape[0] != 1:
        raise ValueError(
            f'feature function {self.name!r} returned shape {value.shape} '
            'for one recording; its first axis must be the recording')
      if rows and value.shape != rows[0].shape:
        raise ValueError(
            f'feature function {self.name!r} returned shapes '
            f'{rows[0].shape} and {value.shape} for two recordings; its '
            'result must have one shape for every recording')
      rows.append(value)
    return np.concatenate(rows)
