"""Batches a DataLoader worker hands over in shared memory it reuses.

DataLoader's own hand-over puts every batch's tensors in fresh shared
memory: the worker faults in new pages, fills them and passes a file
descriptor, and the training process maps them, once. For plain reading
that cost more than decoding (2 workers read 0.7x as fast as none).
Here a worker fills batches into pipeline.batching's buffers, put in
shared memory; the training process gets tensors that are views of a
buffer and gives it back to the worker (clears its lease byte) once every
one of them is gone. Tensors sent on from the training process to yet
another process do not hold the lease: `.clone()` them first.

A buffer's file descriptor crosses once: the training process keeps each
worker's buffers mapped (passing a descriptor costs a connection to the
worker and a fresh mapping, most of the training process's work per
batch), keyed by the worker's pool; the worker names the ones it gives
up, and a new pool drops those of workers that have exited.
"""

import os
import secrets
from typing import Dict, Iterable, Iterator, Optional, Sequence

import numpy as np
import torch
from torch.utils import data as torch_data

from pipeline.contract.schema import FLOAT_DTYPES
from pipeline.readers import batching


class SharedBatchBuffers(batching.BatchBuffers):
  """A DataLoader worker's buffers; `handed_over()` yields what DataLoader
  pickles to the training process, where it arrives as a dict of
  tensors."""

  def __init__(self):
    super().__init__()
    self._tensors: Dict[int, torch.Tensor] = {}  # number -> shared uint8
    self._sent = set()  # numbers handed over at least once
    self._gone = []  # sent numbers retired since the last hand-over
    self._pool = (os.getpid(), secrets.randbits(63))

  def allocate(self, number: int, size: int) -> np.ndarray:
    tensor = torch.empty(size, dtype=torch.uint8).share_memory_()
    self._tensors[number] = tensor
    return tensor.numpy()

  def retired(self, number: int) -> None:
    del self._tensors[number]
    if number in self._sent:
      self._sent.discard(number)
      self._gone.append(number)

  def handed_over(self, examples: Iterable[Dict], size: int,
                  drop_last: bool, variable: Sequence[str] = (),
                  first_example=None) -> Iterator['HandedOver']:
    filled = (self.filled(examples, size, drop_last, variable)
              if first_example is None else
              self.filled_chunks(examples, size, drop_last, first_example))
    for batch in filled:
      first_time = batch.number not in self._sent
      self._sent.add(batch.number)
      gone, self._gone = self._gone, []
      yield HandedOver(self._pool, batch.number,
                       self._tensors[batch.number] if first_time else None,
                       gone, batch.layout, batch.strings)


class HandedOver:
  """A filled shared buffer, unpickled in the training process as its
  batch (the buffer itself only the first time)."""

  def __init__(self, *fields):
    self.fields = fields

  def __reduce__(self):
    return _arrived, self.fields


def batched(pools: Dict, examples: Iterable[Dict], size: int,
            drop_last: bool, variable: Sequence[str] = (),
            first_example=None) -> Iterator:
  """Batches of `examples` for DataLoader to return, filled into this
  process's pool in `pools` (made on first use, each process its own: a
  worker forked after the training process read must not fill that
  one's): from a worker handed over in shared memory, in the training
  process as tensors. `variable`: keys padded to the batch's longest,
  with their `<key>_length` (batching.BatchBuffers.batches). With
  `first_example`, `examples` are records read a chunk at a time
  (batching.BatchBuffers.batches_of_chunks)."""
  shared = torch_data.get_worker_info() is not None
  where = (os.getpid(), shared)
  if where not in pools:
    pools[where] = SharedBatchBuffers() if shared else batching.BatchBuffers()
  if shared:
    return pools[where].handed_over(examples, size, drop_last, variable,
                                    first_example)
  if first_example is not None:
    return map(tensors, pools[where].batches_of_chunks(
        examples, size, drop_last, first_example))
  return map(tensors, pools[where].batches(examples, size, drop_last,
                                           variable))


def tensors(arrays: Dict) -> Dict:
  """An in-process batch (BatchBuffers.batches') as tensors viewing its
  arrays."""
  return {k: v if isinstance(v, list) else tensor(v)
          for k, v in arrays.items()}


def tensor(array: np.ndarray) -> torch.Tensor:
  """A tensor viewing `array`; torch.bfloat16 for ml_dtypes' bfloat16
  (--feature_dtype bfloat16), which torch.from_numpy does not take."""
  if array.dtype.name == 'bfloat16':
    return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
  return torch.from_numpy(array)


def numpy_dtype_name(dtype) -> Optional[str]:
  """A reader's dtype= (a torch.dtype, a numpy dtype or a name) as the
  name of the numpy float dtype the float features are cast to, or None;
  DatasetError naming the argument for any other."""
  if isinstance(dtype, torch.dtype):
    name = str(dtype).replace('torch.', '')
    if name not in FLOAT_DTYPES:
      raise batching.refused_dtype(dtype)
    return name
  return batching.float_dtype_name(dtype)


# In the training process: {worker's pool: {buffer number: buffer}}.
_MAPPED: Dict = {}


def _arrived(pool, number: int, buffer, gone, layout, strings) -> Dict:
  """A worker's batch, unpickled in the training process."""
  buffers = _MAPPED.get(pool)
  if buffers is None:
    _forget_exited_workers()
    buffers = _MAPPED.setdefault(pool, {})
  for n in gone:
    buffers.pop(n, None)
  if buffer is not None:
    buffers[number] = buffer
  elif number not in buffers:
    raise RuntimeError(f'DataLoader worker {pool[0]} sent a batch in its '
                       f'buffer {number}, which never reached this process')
  return tensors(batching.arrays(buffers[number].numpy(), layout, strings))


def _forget_exited_workers() -> None:
  for pool in list(_MAPPED):
    try:
      os.kill(pool[0], 0)
    except ProcessLookupError:
      _MAPPED.pop(pool, None)
    except PermissionError:  # alive, as someone else
      pass
