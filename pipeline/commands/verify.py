"""python -m pipeline.verify OUT: check a dataset before training on it.

Re-reads every shard through Beam's FileSystems, checks each record's
TFRecord CRCs, counts records per shard against metadata.json, and decodes
every example against the schema. Exits 0 when all is well, 1 naming the
first bad file and record, 2 for usage errors.
"""

import argparse
import dataclasses
import hashlib
import sys
import zlib

from apache_beam.io.filesystems import FileSystems

from pipeline.commands import startup
from pipeline.commands.console import end_on_closed_reader, plural
from pipeline import variants as variants_lib
from pipeline.contract import metadata as metadata_lib
from pipeline.contract import naming
from pipeline.contract import dataset as dataset_lib
from pipeline.output_folder import BEAM_FS, read_whole_metadata
from pipeline.output_folder import resolve as resolve_dataset_dir
from pipeline.contract.errors import DatasetError, WavbeamError
from pipeline.contract import array_record_file
from pipeline.contract import example_codec
from pipeline.contract import schema as schema_lib
from pipeline.contract import tfrecord
from transforms.inputs import labels
from transforms.runtime import filesystem


class VerifyError(WavbeamError):
  """The dataset is not what metadata.json says; names file and record."""


def _listed_file(dataset_dir: str, listed: dict, kind: str) -> str:
  """The path of a file metadata.json lists, checked before it is read."""
  try:
    return dataset_lib.listed_file(BEAM_FS, dataset_dir, listed, kind,
                                   dataset_lib.COMMAND_WORDS)
  except DatasetError as e:
    raise VerifyError(str(e)) from e


def _check_index(dataset_dir: str, shard_path: str, record_sizes) -> None:
  """The shard's `tfrecord`-package index, where there is one, must give
  every record's offset and length."""
  try:
    index = dataset_lib.index_file(BEAM_FS, dataset_dir, shard_path,
                                   dataset_lib.COMMAND_WORDS)
  except DatasetError as e:
    raise VerifyError(str(e)) from e
  if index is None:
    return
  with FileSystems.open(index) as f:
    text = f.read().decode('ascii', 'replace')
  if text != tfrecord.index_text(record_sizes):
    raise VerifyError(f'{index}: does not list the offsets and lengths of '
                      'the shard\'s records (rewrite it with '
                      'python -m tfrecord.tools.tfrecord2idx)')


def _check_array_record(dataset_dir: str, copy: dict, shard_path: str,
                        digests) -> None:
  """--array_record's copy must hold the shard's records, in order."""
  path = _listed_file(dataset_dir, copy, 'ArrayRecord file')
  if 'crc32c' in copy and array_record_file.fingerprint(path) != copy['crc32c']:
    raise VerifyError(f'{path}: its CRC32C differs from the one metadata.json '
                      'lists: the file was replaced or changed after writing')
  try:
    records = array_record_file.read_all(path)
  except Exception as e:  # riegeli reports damage as its own errors
    raise VerifyError(f'{path}: cannot be read as ArrayRecord '
                      f'({" ".join(str(e).split())[:200]})') from e
  if len(records) != len(digests):
    raise VerifyError(f'{path}: {len(records)} records, its shard '
                      f'{shard_path} holds {len(digests)}')
  for i, (record, digest) in enumerate(zip(records, digests)):
    if hashlib.sha256(record).digest() != digest:
      raise VerifyError(f'{path}: record {i} differs from record {i} of '
                        f'{shard_path}')


def verify(output_dir: str) -> str:
  """Checks everything; returns a summary line or raises VerifyError. A
  sweep's folder (--variants): every variant it lists, a line each."""
  try:
    sweep = variants_lib.read_index(output_dir)
  except DatasetError as e:
    raise VerifyError(str(e)) from e
  if sweep is None:
    return _verify_dataset(output_dir)[0]
  lines, windows = [], {}
  for name, entry in sorted(sweep['variants'].items()):
    line, windows[name] = _verify_dataset(naming.join(output_dir,
                                                      entry['folder']))
    lines.append(line)
  try:
    groups = variants_lib.index_groups(sweep)
  except DatasetError as e:
    raise VerifyError(f'{output_dir}: {e}') from e
  # Beam's sink (--sink write_to_tfrecord, common to every variant)
  # writes in no global order: there, the same windows in any order.
  ordered = _ordered(read_whole_metadata(naming.join(
      output_dir, sweep['variants'][min(windows)]['folder'])))
  for group in groups:
    first = group[0]
    for name in group[1:]:
      if windows[name] != windows[first]:
        differ = sorted(s for s in set(windows[name]) | set(windows[first])
                        if windows[name].get(s) != windows[first].get(s))
        raise VerifyError(
            f'{output_dir}: variants {first!r} and {name!r} do not hold the '
            f'same windows of the same recordings in split(s) {differ}')
  order = ('in the same order' if ordered else 'each in its own order '
           '(--sink write_to_tfrecord writes in no global order)')
  if len(groups) == 1:
    lines.append(f'{output_dir}: the {plural(len(windows), "variant")} '
                 'hold the same windows of the same recordings, split for '
                 f'split, {order}')
  else:
    # Under --example_unit file or segment, features that need more
    # samples than some recordings hold leave them out of their variants.
    lines.append(f'{output_dir}: the {plural(len(windows), "variant")} '
                 "keep the recordings their features can use, in groups "
                 f'({"; ".join(", ".join(g) for g in groups)}); the '
                 'variants of a group hold the same windows of the same '
                 f'recordings, split for split, {order}')
  return '\n'.join(lines)


def _ordered(metadata) -> bool:
  """Whether the dataset's records are in an order of wavbeam's own (not
  written by Beam's sink, which writes in no global order)."""
  return metadata['config'].get('sink') != 'write_to_tfrecord'


class _Windows:
  """A digest of a split's windows' (filepath, win_start_idx): in record
  order, or, `ordered` False, of the windows in any order (a sum of their
  hashes)."""

  def __init__(self, ordered: bool):
    self.ordered, self.count, self.total = ordered, 0, 0
    self.sequence = hashlib.sha256()

  def update(self, key: bytes) -> None:
    self.count += 1
    if self.ordered:
      self.sequence.update(key)
    else:
      self.total = (self.total + int.from_bytes(
          hashlib.sha256(key).digest(), 'big')) % 2**256

  def hexdigest(self) -> str:
    if self.ordered:
      return self.sequence.hexdigest()
    return f'{self.count}:{self.total:064x}'


def _verify_dataset(output_dir: str):
  """(summary line, {split: digest of its windows' (filepath,
  win_start_idx), in record order unless Beam's sink wrote them});
  raises VerifyError."""
  output_dir = resolve_dataset_dir(output_dir)
  try:
    metadata = read_whole_metadata(output_dir)
  except DatasetError as e:
    raise VerifyError(str(e)) from e
  if metadata is None:
    raise VerifyError(f'{naming.join(output_dir, naming.METADATA_FILE)} not '
                      'found: no dataset, or its run did not finish')
  schema = metadata_lib.schema_of(metadata)
  checked = _check_feature_specs(output_dir, metadata)
  classes = metadata.get('classes', [])
  compression = filesystem.beam_compression(metadata['compression'])
  shards = examples = 0
  windows = {}
  listed = set()
  for split, entry in sorted(metadata['splits'].items()):
    windows[split] = _Windows(_ordered(metadata))
    copies = entry.get(naming.ARRAY_RECORD) or [None] * len(entry['shards'])
    for shard, copy in zip(entry['shards'], copies):
      path = _listed_file(output_dir, shard, 'shard')
      listed.add(path)
      count, sizes, digests = 0, [], []
      records = tfrecord.RecordsDigest()
      with FileSystems.open(path, compression_type=compression) as f:
        try:
          for _, data in tfrecord.read_records(f, path, check_crc=True):
            sizes.append(len(data) + 16)
            records.add_record(data)
            digests.append(hashlib.sha256(data).digest())
            try:
              element = example_codec.decode_example(data, schema)
            except metadata_lib.schema_lib.SchemaError as e:
              raise VerifyError(f'{path}: record {count}: {e}') from e
            _check_class(path, count, element, classes)
            windows[split].update(repr((element.get('filepath'),
                                        element.get('win_start_idx')))
                                  .encode('utf-8'))
            count += 1
        except tfrecord.CorruptRecord as e:
          raise VerifyError(str(e)) from e
        except (OSError, EOFError, zlib.error) as e:  # e.g. not gzip after all
          raise VerifyError(
              f'{path}: cannot be read with compression '
              f'{metadata["compression"]} as metadata.json says '
              f'({" ".join(str(e).split())[:200]})') from e
      if count != shard['num_examples']:
        raise VerifyError(f'{path}: {count} records, metadata.json says '
                          f'{shard["num_examples"]}')
      if shard.get('records_crc32c', records.value) != records.value:
        raise VerifyError(f'{path}: not the records that were written there '
                          '(their CRCs differ from those metadata.json lists'
                          '): a shard of another dataset, or of another '
                          'run, under this name')
      _check_index(output_dir, path, sizes)
      if copy is not None:
        _check_array_record(output_dir, copy, path, digests)
      shards += 1
      examples += count
  _check_no_unlisted_shard(output_dir, listed)
  copies = metadata_lib.has_array_record(metadata)
  parts = metadata.get('parts', [])
  return (f'{output_dir}: OK, {plural(examples, "example")} in '
          f'{plural(shards, "shard")}'
          f'{f" of {len(parts)} parts" if parts else ""} match '
          'metadata.json (CRCs, counts, schema, classes, record indexes'
          f'{", ArrayRecord copies" if copies else ""}'
          f'{_as_options_give(checked)})',
          {split: h.hexdigest() for split, h in windows.items()})


def _check_no_unlisted_shard(output_dir: str, listed) -> None:
  """VerifyError for a file named as a shard of the dataset, beside its
  listed shards, that metadata.json does not list (a copy, a shard of an
  earlier run): readers go by the list, but a glob over the shards (TFX's
  file_pattern, a hand-written TFRecordDataset) would read it too."""
  # Each listed shard's name less its numbers: its split's, in its folder.
  patterns = sorted({naming.escape_pattern(naming.shard_stem(path)) +
                     '-*-of-*' for path in listed})
  found = [m.path for r in FileSystems.match(patterns)
           for m in r.metadata_list] if patterns else []
  extra = sorted(p for p in naming.within(output_dir, found)
                 if p not in listed and naming.shard_stem(p) is not None)
  if extra:
    raise VerifyError(f'{extra[0]}: named as a shard of the dataset, and '
                      f'metadata.json does not list it ({len(extra)} such '
                      'file(s)); a glob over the shards would read it: '
                      'remove it')


def _as_options_give(features) -> str:
  if not features:
    return ''
  return (f'; {", ".join(features)}: the dtypes and shapes the dataset\'s '
          'options give')


def _check_class(path: str, number: int, element, classes) -> None:
  """A record's class name is the one metadata.json's classes give its
  target (an edited or reordered class list would relabel every
  example)."""
  if schema_lib.LABEL_KEY not in element or \
      schema_lib.CLASS_KEY not in element:
    return
  target = int(element[schema_lib.LABEL_KEY])
  name = element[schema_lib.CLASS_KEY]
  name = name.decode('utf-8', 'replace') if isinstance(name, bytes) else name
  expected = ('' if target == labels.NO_LABEL_TARGET else
              classes[target] if 0 <= target < len(classes) else None)
  if name != expected:
    raise VerifyError(
        f'{path}: record {number}: class {name!r} with target {target}, '
        f'where metadata.json\'s classes give '
        f'{"no class" if expected is None else repr(expected)}')


def _check_feature_specs(output_dir: str, metadata) -> list:
  """The features whose dtype and shape in metadata.json's schema are
  those its options give (a silent example computed with them,
  as an empty dataset's schema is); VerifyError naming one that differs,
  which every reader would decode wrongly (an edited shape or dtype keeps
  each record's size). Features that load a model, come from a module not
  importable here or from a function of the caller's own are left out."""
  # pylint: disable=import-outside-toplevel
  from pipeline import config as config_lib
  from pipeline.graph import expected_schema
  from transforms.features import registry
  try:
    config = config_lib.PipelineConfig.from_json(metadata['config'])
    if config.sample_rate is None:  # the rate the data gave the run
      config = dataclasses.replace(config,
                                   sample_rate=metadata['sample_rate'])
    registry.load_modules(config.feature_module)
  except Exception:  # pylint: disable=broad-except
    # Options that no longer make a config (a damaged or edited entry):
    # nothing to compare with; metadata.json's own checks speak of them.
    return []
  names = tuple(n for n in config.features if n in registry.names() and
                not registry.get(n).loads_model(None))
  if not names:
    return []
  try:
    expected = expected_schema(dataclasses.replace(config, features=names))
  except config_lib.ConfigError:
    return []
  recorded = metadata['schema']
  where = naming.join(output_dir, naming.METADATA_FILE)
  for name in names:
    want = expected.to_json().get(name)
    have = recorded.get(name)
    if want is None:
      continue
    if have is None:
      raise VerifyError(f'{where}: schema: no entry for the feature '
                        f'{name!r} its options compute')
    # Not the encoding: an earlier format stored arrays otherwise, and the
    # records, decoded, already showed it true.
    fields = ('dtype', 'shape')
    if [have.get(f) for f in fields] != [want.get(f) for f in fields]:
      raise VerifyError(
          f'{where}: schema: {name}: ' + ', '.join(
              f'{f} {have.get(f)!r}' for f in fields) + '; the dataset\'s '
          'options give ' + ', '.join(f'{f} {want.get(f)!r}'
                                      for f in fields))
  return list(names)


def main(argv=None, prog: str = 'python -m pipeline.verify') -> int:
  # The docstring's first line, less the command it names (`prog` does).
  parser = argparse.ArgumentParser(
      prog=prog, description=__doc__.split('\n\n')[0].split(': ', 1)[1])
  parser.add_argument('output_dir', help='the dataset folder (or URI)')
  args = parser.parse_args(argv)
  try:
    print(verify(args.output_dir))
  except VerifyError as e:
    print(f'verify failed: {e}', file=sys.stderr)
    return 1
  return 0


if __name__ == '__main__':
  startup.prepare_process()
  end_on_closed_reader()  # `... | head` ends it quietly
  sys.exit(main())
