"""Random access to a split written with --array_record: no TensorFlow, no
Beam.

    source = ArrayRecordSource('out/', 'train', features=['log_mel', 'target'])
    len(source)          # the split's examples, from metadata.json
    source[12345]        # one example: numpy_reader's dict of arrays

Examples are numbered as the TFRecord shards hold them (shard by shard),
so source[i] is the i-th example `replay_dataset` yields without shuffle.
The source is what Grain calls a random-access data source (`__len__`,
`__getitem__`), so a shuffled, sharded, checkpointable Grain pipeline
starts from it:

    import grain
    data = (grain.MapDataset.source(source).shuffle(seed=0)
            [jax.process_index()::jax.process_count()].batch(32))

and pipeline.torch_dataset.WavbeamMapDataset serves it to a PyTorch
DataLoader (`shuffle=True` for a true per-epoch shuffle). It pickles
without its open files, so DataLoader and Grain worker processes each open
their own.

Checked before use: every file must be the ArrayRecord name of the
dataset's pattern, exist, be a plain file, have the size metadata.json
lists and hold the record count it lists. Each record is then read through
riegeli, whose chunks carry their own hashes (a damaged chunk is an
error, not wrong data), and decoded against the schema.
"""

import bisect
import numbers
from typing import Dict, List, Optional, Sequence

from pipeline.contract import dataset as dataset_lib
from pipeline.contract import naming
from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.contract import schema as schema_lib
from pipeline.contract.errors import DatasetError
from pipeline.contract import array_record_file
from pipeline.contract import example_codec

# Random access: no read-ahead past the record asked for.
_READER_OPTIONS = 'readahead_buffer_size:0'


class ArrayRecordSource:
  """One split's ArrayRecord files as a random-access sequence of
  examples; see the module docstring."""

  def __init__(self, output_dir: str, split: str = 'train', *,
               features: Optional[Sequence[str]] = None,
               variant: Optional[str] = None, parts=None):
    (self.output_dir, self.metadata, self.schema,
     self.keys) = numpy_reader.open_split(
         dataset_lib.variant_folder(output_dir, variant), split, features,
         parts)
    self.split = split
    self.files = dataset_lib.array_record_files(
        dataset_lib.LOCAL, self.output_dir, self.metadata, split)
    counts = [f['num_examples']
              for f in self.metadata['splits'][split][naming.ARRAY_RECORD]]
    self._starts: List[int] = [0]
    for n in counts:
      self._starts.append(self._starts[-1] + n)
    self._readers: Dict[int, object] = {}
    self._decoder = example_codec.Decoder(self.schema, self.keys)

  def __len__(self) -> int:
    return self._starts[-1]

  def __getitem__(self, index: int) -> Dict:
    return self.__getitems__([index])[0]

  def __getitems__(self, indices: Sequence[int]) -> List[Dict]:
    """Several examples (one read per file touched), in the order asked."""
    located: Dict[int, List] = {}
    for position, index in enumerate(indices):
      if not isinstance(index, numbers.Integral) or isinstance(index, bool):
        raise TypeError(f'index {index!r}: give an integer (the example\'s '
                        'position in the split)')
      index = int(index)
      if index < 0:
        index += len(self)
      if not 0 <= index < len(self):
        raise IndexError(f'example {index} of a split of {len(self)}')
      file = bisect.bisect_right(self._starts, index) - 1
      located.setdefault(file, []).append(
          (position, index - self._starts[file]))
    out: List = [None] * len(indices)
    for file, wanted in located.items():
      try:
        records = self._reader(file).read([local for _, local in wanted])
      except DatasetError:
        raise
      except Exception as e:  # riegeli's errors do not name the file
        raise DatasetError(
            f'ArrayRecord file {self.files[file]}: records '
            f'{[local for _, local in wanted][:5]} cannot be read: '
            f'{" ".join(str(e).split())[:300]}') from e
      for (position, local), record in zip(wanted, records):
        out[position] = self._decode(record, file, local)
    return out

  def _decode(self, record: bytes, file: int, local: int) -> Dict:
    try:
      return self._decoder(record)
    except schema_lib.SchemaError as e:
      raise DatasetError(f'{self.files[file]}: record {local}: {e}') from e

  def _reader(self, file: int):
    if file not in self._readers:
      path = self.files[file]
      listed = self.metadata['splits'][self.split][naming.ARRAY_RECORD][file]
      if 'crc32c' in listed and \
          array_record_file.fingerprint(path) != listed['crc32c']:
        raise DatasetError(
            f'ArrayRecord file {path}: its content is not the one '
            'metadata.json lists (another CRC32C at the same size): it was '
            'replaced or changed after writing')
      try:
        reader = array_record_file.reader(path, _READER_OPTIONS)
      except Exception as e:  # riegeli's errors do not name the file
        raise DatasetError(f'ArrayRecord file {path} cannot be read: '
                           f'{" ".join(str(e).split())[:300]}') from e
      if reader.num_records() != self._starts[file + 1] - self._starts[file]:
        raise DatasetError(
            f'{self.files[file]} holds {reader.num_records()} records, '
            'metadata.json says '
            f'{self._starts[file + 1] - self._starts[file]}')
      self._readers[file] = reader
    return self._readers[file]

  def __getstate__(self):
    state = dict(self.__dict__)
    state['_readers'] = {}  # open files stay in the process that opened them
    return state

  def __repr__(self):
    return (f'ArrayRecordSource({self.output_dir!r}, {self.split!r}, '
            f'{len(self)} examples)')

