"""Records decoded many at a time, straight into a batch's arrays.

example_codec.Decoder walks one record in Python; this walks the same
entry of many records at once with numpy (a gather of a few bytes per
record), decodes their numbers and strings together, and leaves each
wanted array where it lies until it is copied into its row of a batch:
no per-example dict or array on the way. It reads the one layout
example_codec.encode_batch writes (every feature of the schema, keys in
sorted order, one value per feature); on anything else it reports
failure and the caller decodes record by record, with example_codec's
results and errors. The values are those Decoder gives, bit for bit
(tested).
"""

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from pipeline.contract import example_codec
from pipeline.contract import schema as schema_lib

_KIND = {schema_lib.RAW_BYTES: 0x0a, schema_lib.BYTES_LIST: 0x0a,
         schema_lib.FLOAT_LIST: 0x12, schema_lib.INT64_LIST: 0x1a}
_SPAN = np.arange(16)
_SHIFTS = (7 * np.arange(10)).astype(np.uint64)


class _NotThisLayout(Exception):
  pass


def _varints(octets: np.ndarray, pos: np.ndarray, width: int
             ) -> Tuple[np.ndarray, np.ndarray]:
  """(values as uint64, positions after them) of the varints at `pos`, of
  at most `width` bytes each."""
  block = octets[np.minimum(pos[:, None] + _SPAN[:width], len(octets) - 1)]
  more = block >= 0x80
  last = np.argmin(more, axis=1)  # the first byte without a next one
  if more[np.arange(len(pos)), last].any():
    raise _NotThisLayout
  used = _SPAN[:width] <= last[:, None]
  values = ((block & 0x7f).astype(np.uint64) << _SHIFTS[:width]) * used
  return values.sum(axis=1, dtype=np.uint64), pos + last + 1


def _require(condition) -> None:
  if not np.all(condition):
    raise _NotThisLayout


class BatchDecoder:
  """Locates `keys` in many records of the layout encode_batch writes
  at once (locate). Not for variable-length arrays, nor keys of 128
  bytes or more: `usable` is False then."""

  def __init__(self, schema: schema_lib.Schema, keys: Sequence[str]):
    specs = schema.as_dict()
    self.usable = not any(specs[k].variable for k in keys)
    wanted = set(keys)
    # (key, its header bytes (tag 0x0a, length, the key), the feature's
    # kind tag, whether wanted, its spec) in record order.
    self._entries = []
    for key in sorted(specs, key=lambda k: k.encode('utf-8')):
      name = key.encode('utf-8')
      if len(name) >= 0x80:
        self.usable = False
      self._entries.append((key, np.frombuffer(
          bytes((0x0a, len(name) & 0x7f)) + name + b'\x12', np.uint8),
                            _KIND[specs[key].encoding], key in wanted,
                            specs[key]))
    # key -> (the bytes from its entry's start to its data, their
    # offsets, the data's size), when every record of the last batch had
    # the same bytes there (which hold every length inside the entry).
    self._prefixes: Dict[str, Tuple[np.ndarray, np.ndarray, int]] = {}

  def locate(self, octets: np.ndarray, starts: np.ndarray,
             stops: np.ndarray) -> Optional['Located']:
    """The records whose data lies at starts[i]:stops[i] of `octets`
    (uint8, e.g. a mapped shard), located (numbers and strings decoded,
    arrays found and their sizes checked); None when one is not in the
    layout this reads."""
    try:
      found = self._walk(octets, starts.astype(np.int64),
                         stops.astype(np.int64))
      arrays, numbers, texts = {}, {}, {}
      for key, (data, size, spec) in found.items():
        if spec.encoding == schema_lib.BYTES_LIST:
          texts[key] = [str(octets[a:a + n], 'utf-8')
                        for a, n in zip(data.tolist(), size.tolist())]
        elif spec.encoding == schema_lib.INT64_LIST:
          values, ends = _varints(octets, data, 10)
          _require(ends == data + size)
          numbers[key] = values.view(np.int64)
        else:
          width = spec.row_size * example_codec.numpy_dtype(
              spec.dtype).itemsize
          _require(size == width)
          arrays[key] = (data.tolist(), width)
    except (_NotThisLayout, UnicodeDecodeError, IndexError):
      return None
    return Located(octets, arrays, numbers, texts)

  def _walk(self, octets, pos, stops):
    """{wanted key: (its data's starts, sizes)} of every record."""
    _require(octets[pos] == 0x0a)
    size, pos = _varints(octets, pos + 1, 5)
    _require(pos + size.astype(np.int64) == stops)
    found = {}
    for key, header, kind, wanted, spec in self._entries:
      known = self._prefixes.get(key)
      if known is not None and np.all(
          octets[pos[:, None] + known[1]] == known[0]):
        data = pos + len(known[0])
        end = data + known[2]
      else:
        data, end = self._parse_entry(octets, pos, header, kind)
        self._learn(octets, key, pos, data, end - data)
      _require(end <= stops)
      if wanted:
        found[key] = (data, end - data, spec)
      pos = end
    _require(pos == stops)
    return found

  def _parse_entry(self, octets, pos, header, kind):
    """(data starts, data ends) of one entry of every record at `pos`."""
    h = len(header)
    block = octets[pos[:, None] + np.arange(h + 7)]
    size = block[:, 1].astype(np.int64)
    if np.all(size < 0x80):
      # An entry under 128 bytes has a one-byte varint for every length
      # inside it: each is its size less what comes before it.
      _require((block[:, 0] == 0x0a) & (block[:, h + 3] == kind) &
               (block[:, h + 5] == 0x0a) & (block[:, h + 2] == size - h - 1) &
               (block[:, h + 4] == size - h - 3) &
               (block[:, h + 6] == size - h - 5))
      _require(block[:, 2:h + 2] == header)
      return pos + h + 7, pos + 2 + size
    _require(octets[pos] == 0x0a)
    size, pos = _varints(octets, pos + 1, 5)
    end = pos + size.astype(np.int64)
    _require(octets[pos[:, None] + np.arange(len(header))] == header)
    size, pos = _varints(octets, pos + len(header), 5)  # the Feature
    _require(pos + size.astype(np.int64) == end)
    _require(octets[pos] == kind)
    size, pos = _varints(octets, pos + 1, 5)  # the list
    _require((pos + size.astype(np.int64) == end) & (size > 0))
    _require(octets[pos] == 0x0a)  # its one value (packed, or the bytes)
    size, pos = _varints(octets, pos + 1, 5)
    _require(pos + size.astype(np.int64) == end)
    return pos, end

  def _learn(self, octets, key, pos, data, size):
    """Keeps the entry's prefix when every record has the same one."""
    self._prefixes.pop(key, None)
    length = int(data[0] - pos[0])
    if not (np.all(data - pos == length) and np.all(size == size[0])):
      return
    block = octets[pos[:, None] + np.arange(length)]
    if np.all(block == block[0]):
      self._prefixes[key] = (block[0].copy(), np.arange(length),
                             int(size[0]))


class Located:
  """Records located by BatchDecoder.locate, ready to fill batch rows."""

  def __init__(self, octets: np.ndarray, arrays, numbers, texts):
    self.octets = octets
    self.arrays = arrays    # key -> (each record's data offset, bytes)
    self.numbers = numbers  # key -> int64 array, one value per record
    self.texts = texts      # key -> list of str, one per record

  def fill(self, rows: Dict[str, np.ndarray], strings: Dict[str, List],
           row: int, first: int, end: int, before=None) -> None:
    """Records first..end-1 into rows row.. of `rows` and onto `strings`
    (a batch's arrays, laid out by one of these records' examples);
    `before(i)` is called before record i is copied (it may raise)."""
    octets = self.octets
    arrays = [(rows[key].reshape(len(rows[key]), -1).view(np.uint8),
               offsets, width)
              for key, (offsets, width) in self.arrays.items() if width]
    for i in range(first, end):
      if before is not None:
        before(i)
      out = row + i - first
      for flat, offsets, width in arrays:
        flat[out] = octets[offsets[i]:offsets[i] + width]
    for key, values in self.numbers.items():
      rows[key][row:row + end - first] = values[first:end]
    for key, values in self.texts.items():
      strings[key].extend(values[first:end])
