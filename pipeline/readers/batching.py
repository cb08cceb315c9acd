"""Batches filled into buffers that are reused once the caller lets go.

A batch's arrays are views of one buffer. The buffer goes back to the
pool only when every one of those arrays (and every view, or tensor, made
from them) is gone, so a batch a training loop keeps stays intact: it
keeps its buffer, and the next batch takes another. Examples are copied
in as they come, so only one example's own memory is alive at a time.
Both spare the page faults of fresh memory: holding a batch's worth of
examples and stacking them into fresh arrays made the allocator give the
memory back to the system and fault it in again for every batch (the
bench's 1 h dataset through a DataLoader without workers: 5,300
examples/s stacked into fresh arrays, 6,100 reused and filled as they
come, 6,800 with examples decoded without a copy of their own).

The lease is one byte at the start of each buffer, set when the buffer is
filled and cleared when its batch dies. torch_batches puts the buffers in
shared memory, where a DataLoader worker fills them and the training
process clears the byte.
"""

import weakref
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from pipeline.contract import example_codec
from pipeline.contract.errors import DatasetError
from pipeline.contract.schema import FLOAT_DTYPES
from pipeline.contract.schema import length_key_of as length_key

# Arrays start at multiples of 64 bytes (a cache line, and enough for any
# dtype's alignment); the lease byte sits in the first 64.
_ALIGN = 64
# Buffers kept while nobody holds them: enough for DataLoader's
# prefetching (2 batches a worker by default) and the batch in use.
MAX_IDLE = 4


class Batch:
  """A filled, leased buffer: `arrays()` is the batch, a dict of arrays
  (strings as lists), and holds the lease from then on. `layout` is (key,
  offset, dtype, shape) per feature, offset None for strings."""

  def __init__(self, number: int, memory: np.ndarray, layout: List,
               strings: Dict[str, List]):
    self.number, self.memory = number, memory
    self.layout, self.strings = layout, strings

  def arrays(self) -> Dict:
    return arrays(self.memory, self.layout, self.strings)


class BatchBuffers:
  """The buffers of one process, filled by `batches()`."""

  def __init__(self):
    self._buffers: Dict[int, np.ndarray] = {}  # number -> uint8 memory
    self._next_number = 0

  def __len__(self) -> int:
    return len(self._buffers)

  def idle(self) -> int:
    return len(self._idle())

  def batches(self, examples: Iterable[Dict], size: int,
              drop_last: bool, variable: Sequence[str] = ()
              ) -> Iterator[Dict]:
    """Dicts of arrays stacked on a new first axis, strings as lists; the
    last batch short unless `drop_last`. The `variable` keys (arrays whose
    first dimension differs between examples) are padded with zeros to
    the longest in the batch, and each example's own length is added as
    `<key>_length` (int64)."""
    for batch in self.filled(examples, size, drop_last, variable):
      yield batch.arrays()

  def filled(self, examples: Iterable[Dict], size: int,
             drop_last: bool, variable: Sequence[str] = ()
             ) -> Iterator[Batch]:
    """The filled buffers; each stays leased until its `arrays()` are
    gone (or, from a worker, until the training process lets go)."""
    if variable:
      yield from self._filled_padded(examples, size, drop_last, variable)
      return
    filling: Optional[_Filling] = None
    try:
      for example in examples:
        if filling is None:
          filling = _Filling(example, size, self._take)
        filling.add(example)
        if filling.count == size:
          batch, filling = filling.batch(), None
          yield batch
      if filling is not None and not drop_last:
        batch, filling = filling.batch(), None
        yield batch
    finally:  # stopped early or failed: the half-filled buffer is free
      if filling is not None:
        release(filling.memory)

  def batches_of_chunks(self, items: Iterable[Tuple], size: int,
                        drop_last: bool, first_example) -> Iterator[Dict]:
    """batches() of records read a chunk at a time: `items` are (chunk,
    i) pairs, record i of `chunk`, whose fill(rows, strings, row, first,
    end) writes its records first..end-1 into a batch's arrays from row
    `row` on; `first_example(chunk, i)` is record i as a dict, which
    lays a batch out. Fixed shapes only. Runs of records that follow
    each other in one chunk are filled at once."""
    for batch in self.filled_chunks(items, size, drop_last, first_example):
      yield batch.arrays()

  def filled_chunks(self, items: Iterable[Tuple], size: int,
                    drop_last: bool, first_example) -> Iterator[Batch]:
    """The filled buffers of batches_of_chunks (as filled()); a last
    short batch dropped is still decoded, so its records are checked as
    every other is."""
    for group in _groups(items, size):
      if len(group) == size or (group and not drop_last):
        yield self._fill_chunks(group, size, first_example)
      else:
        for item in group:
          first_example(*item)

  def _fill_chunks(self, items, size, first_example) -> Batch:
    filling = _Filling(first_example(*items[0]), size, self._take)
    try:
      row = 0
      while row < len(items):
        chunk, first = items[row]
        end = row + 1
        while (end < len(items) and items[end][0] is chunk and
               items[end][1] == first + end - row):
          end += 1
        chunk.fill(filling.rows, filling.strings, row, first,
                   first + end - row)
        row = end
    except BaseException:
      release(filling.memory)
      raise
    filling.count = len(items)
    return filling.batch()

  def _filled_padded(self, examples, size, drop_last, variable):
    """filled() for variable-length arrays: a batch's examples are held
    until it is complete, since its buffer's shapes are those of its
    longest."""
    for group in _groups(examples, size):
      if len(group) == size or (group and not drop_last):
        yield self._fill_padded(group, len(group), variable)

  def _fill_padded(self, pending, size, variable):
    longest = {key: max(len(e[key]) for e in pending) for key in variable}
    filling = _Filling(pending[0], size, self._take, longest)
    try:
      for example in pending:
        filling.add(example)
    except BaseException:
      release(filling.memory)
      raise
    return filling.batch()

  def allocate(self, number: int, size: int) -> np.ndarray:
    """A new buffer of `size` bytes starting at a multiple of _ALIGN
    (torch_batches: in shared memory). TensorFlow takes over arrays so
    aligned without a copy (replay_dataset's numpy engine)."""
    del number
    memory = np.empty(size + _ALIGN, np.uint8)
    skip = -memory.ctypes.data % _ALIGN
    return memory[skip:skip + size]

  def retired(self, number: int) -> None:
    """Called when buffer `number` leaves the pool."""

  def _take(self, size: int) -> Tuple[int, np.ndarray]:
    idle = self._idle()
    fits = [n for n in idle if len(self._buffers[n]) >= size]
    if fits:
      number = fits[0]
    else:
      # Sizes change only for a last, short batch, or with the features a
      # transform returns: the idle ones, all too small, go.
      for n in idle:
        self._retire(n)
      number, self._next_number = self._next_number, self._next_number + 1
      self._buffers[number] = self.allocate(number, size)
    memory = self._buffers[number]
    memory[0] = 1
    # After a training loop kept many batches, give back what it let go.
    for n in self._idle()[MAX_IDLE:]:
      self._retire(n)
    return number, memory

  def _idle(self) -> List[int]:
    return [n for n, m in self._buffers.items() if not m[0]]

  def _retire(self, number: int) -> None:
    del self._buffers[number]
    self.retired(number)


class _Filling:
  """A buffer being filled: the layout comes from the first example, and
  of the `padded` keys ({key: the batch's longest}) from the longest, with
  a `<key>_length` array beside each."""

  def __init__(self, first: Dict, size: int, take,
               padded: Optional[Dict[str, int]] = None):
    self.padded = dict(padded or {})
    self.keys, self.count = list(first), 0
    self.layout_keys = self.keys + [length_key(k) for k in self.padded]
    self.strings: Dict[str, List] = {}
    specs, end = {}, _ALIGN
    shapes = [(key, value) for key, value in first.items()] + [
        (length_key(k), np.int64(0)) for k in self.padded]
    for key, value in shapes:
      if isinstance(value, str):
        self.strings[key] = []
        continue
      value = np.asarray(value)
      shape = value.shape
      if key in self.padded:
        shape = (self.padded[key],) + shape[1:]
      nbytes = value.dtype.itemsize * int(np.prod(shape))
      specs[key] = (end, dtype_code(value.dtype), (size,) + shape)
      end += -(-nbytes * size // _ALIGN) * _ALIGN
    self.number, self.memory = take(end)
    self.offsets = {key: spec[0] for key, spec in specs.items()}
    self.rows = {key: view(self.memory, *spec)
                 for key, spec in specs.items()}
    # Arrays copied as they are (lengths are written with their array).
    self._plain = [(key, rows, rows.shape[1:], rows.dtype)
                   for key, rows in self.rows.items()
                   if key not in self.padded and key in first]

  def add(self, example: Dict) -> None:
    if list(example) != self.keys:
      raise ValueError(f'an example has the features {list(example)}, '
                       f'the batch\'s first {self.keys}')
    count = self.count
    for key, rows, shape, dtype in self._plain:
      value = example[key]
      if not (isinstance(value, (np.ndarray, np.generic)) and
              value.shape == shape and value.dtype == dtype):
        value = self._checked(key, value, rows)
      rows[count] = value
    for key in self.padded:
      self._add_padded(key, np.asarray(example[key]), self.rows[key])
    for key, values in self.strings.items():
      values.append(example[key])
    self.count += 1

  def _checked(self, key: str, value, rows) -> np.ndarray:
    """`value` as an array of the batch's row shape and dtype, or
    ValueError."""
    value = np.asarray(value)
    if value.shape != rows.shape[1:] or value.dtype != rows.dtype:
      raise ValueError(
          f'feature {key!r}: {value.dtype}{list(value.shape)} in an '
          f'example, {rows.dtype}{list(rows.shape[1:])} in the batch\'s '
          'first: batched examples need equal shapes and dtypes (a '
          'dataset of variable-length examples pads them when batched '
          "by its reader's batch_size, or by WavbeamMapDataset.collate)")
    return value

  def _add_padded(self, key: str, value: np.ndarray, rows) -> None:
    if value.shape[1:] != rows.shape[2:] or value.dtype != rows.dtype:
      raise ValueError(
          f'feature {key!r}: {value.dtype}{list(value.shape)} in an '
          f'example, {rows.dtype}[n, *{list(rows.shape[2:])}] in the '
          "batch's first")
    n = len(value)
    rows[self.count, :n] = value
    rows[self.count, n:] = 0  # the padding value, documented
    self.rows[length_key(key)][self.count] = n

  def batch(self) -> Batch:
    layout = [(key, None, None, None) if key in self.strings else
              (key, self.offsets[key], dtype_code(self.rows[key].dtype),
               (self.count,) + self.rows[key].shape[1:])
              for key in self.layout_keys]
    return Batch(self.number, self.memory, layout, self.strings)


def _groups(items: Iterable, size: int) -> Iterator[List]:
  """Lists of `size` items in turn, then the rest (shorter, maybe
  empty)."""
  group: List = []
  for item in items:
    group.append(item)
    if len(group) == size:
      yield group
      group = []
  yield group


def arrays(memory: np.ndarray, layout: List, strings: Dict) -> Dict:
  """The batch in `memory`: its arrays are views of one array, whose death
  clears the lease."""
  # The one object every array below keeps alive: numpy takes an array's
  # base past views to the array owning the memory, but stops at one
  # made on a memoryview.
  whole = np.frombuffer(memoryview(memory), np.uint8)
  weakref.finalize(whole, release, memory)
  return {key: strings[key] if offset is None else
          view(whole, offset, dtype, shape)
          for key, offset, dtype, shape in layout}


def float_keys(schema, keys: Sequence[str]) -> Tuple[str, ...]:
  """The keys of `keys` whose features are floats (as stored: float32,
  or --feature_dtype's float16 or bfloat16), which a reader's dtype=
  casts."""
  specs = schema.as_dict()
  return tuple(k for k in keys
               if k in specs and specs[k].dtype in FLOAT_DTYPES)


def float_dtype_name(dtype) -> Optional[str]:
  """A reader's dtype= (a numpy dtype, or its name) as the name of the
  float dtype its float features are cast to, or None (as stored);
  DatasetError naming the argument for anything else."""
  if dtype is None:
    return None
  if isinstance(dtype, str) and dtype == 'bfloat16':
    return dtype  # ml_dtypes', imported only when cast to
  try:
    name = np.dtype(dtype).name
  except TypeError:
    name = None
  if name not in FLOAT_DTYPES:
    raise refused_dtype(dtype)
  return name


def refused_dtype(dtype) -> DatasetError:
  """The error for a reader's dtype= that names no float dtype."""
  return DatasetError(f'dtype={dtype!r}: give a float dtype '
                      f'({", ".join(FLOAT_DTYPES)}), or None for the float '
                      'features as stored')


def cast_floats(arrays: Dict, keys: Sequence[str], dtype) -> Dict:
  """An example or batch with the arrays of `keys` as `dtype` (a numpy
  dtype or its name; 'bfloat16' is ml_dtypes')."""
  if isinstance(dtype, str):
    dtype = example_codec.numpy_dtype(dtype)
  return {k: v.astype(dtype) if k in keys else v for k, v in arrays.items()}


def dtype_code(dtype: np.dtype) -> str:
  """What names `dtype` in a batch's layout (view's argument): its str,
  or bfloat16's name, whose str ('<V2') would lose it."""
  return 'bfloat16' if dtype.name == 'bfloat16' else dtype.str


def view(memory: np.ndarray, offset: int, dtype: str, shape) -> np.ndarray:
  dtype = example_codec.numpy_dtype(dtype)
  size = dtype.itemsize * int(np.prod(shape))
  return memory[offset:offset + size].view(dtype).reshape(shape)


def release(memory: np.ndarray) -> None:
  memory[0] = 0
