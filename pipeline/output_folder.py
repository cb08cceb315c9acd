"""A dataset's folder on any Beam file system: finding it, reading its
metadata.json, and preparing it for a run (the run step does that, not the
graph: building a pipeline changes nothing on disk)."""

import logging
import os
import uuid
from typing import List, Optional

from apache_beam.io.filesystems import FileSystems

from pipeline.contract import dataset as dataset_lib
from pipeline.contract.errors import DatasetError
from pipeline.contract import naming
from pipeline.contract import parts as parts_lib
from pipeline.config import ConfigError, PipelineConfig
from pipeline import resume as resume_lib
from pipeline import variants as variants_lib
from transforms.runtime import filesystem
from transforms.inputs import sources
from transforms.runtime import output_lock as run_marker


def _read_text(path: str) -> str:
  with FileSystems.open(path) as f:
    return f.read().decode('utf-8')


def _match(pattern: str) -> List[str]:
  return [m.path for m in FileSystems.match([pattern])[0].metadata_list]


def _stat(path: str) -> Optional[dataset_lib.FileInfo]:
  if not FileSystems.exists(path):
    return None
  size = filesystem.metadata(path).size_in_bytes
  # Object stores hold files only; a local path may be a FIFO or folder.
  return dataset_lib.FileInfo(
      size, not filesystem.is_local(path) or os.path.isfile(path))


# Beam's file systems, for the commands (local folders and URIs alike).
BEAM_FS = dataset_lib.FileSystem(FileSystems.exists, _read_text, _match,
                                 _stat)


def resolve(output_dir: str) -> str:
  """naming.find_dataset_dir through Beam's FileSystems."""
  return naming.find_dataset_dir(output_dir, FileSystems.exists, _match)


def read_metadata(dataset_dir: str, whole: bool = False) -> Optional[dict]:
  """metadata.json of a dataset folder, checked (dataset.open_dataset;
  with `whole`, merged with its parts), or None when there is none;
  DatasetError when it is damaged."""
  if not FileSystems.exists(naming.join(dataset_dir, naming.METADATA_FILE)):
    return None
  return dataset_lib.open_dataset(dataset_dir, BEAM_FS, whole=whole)[1]


def read_whole_metadata(dataset_dir: str) -> Optional[dict]:
  """read_metadata, merged with the parts --append added (parts.merge:
  their shards named from dataset_dir, part-00001/...), or None."""
  return read_metadata(dataset_dir, whole=True)


def part_dirs(dataset_dir: str) -> List[str]:
  return parts_lib.part_dirs(dataset_dir, FileSystems.exists, _read_text)


def dataset_files(config: PipelineConfig) -> List[str]:
  """Files of a wavbeam dataset already in the output folder."""
  out = config.dataset_dir
  if not FileSystems.exists(out):
    return []
  names = [naming.METADATA_FILE, naming.REJECTS_FILE, 'dataset_info.json',
           'features.json', '*.labels.txt', 'schema.pbtxt',
           f'{naming.escape_pattern(config.dataset_name)}-*.tfrecord-*',
           f'{naming.escape_pattern(config.dataset_name)}-*.array_record-*',
           f'{naming.escape_pattern(config.dataset_name)}-*.'
           f'{naming.INDEX_FORMAT}-*',
           sources.FILE_NAME, parts_lib.INDEX_FILE]
  found = sorted(naming.within(out, [
      m.path for r in FileSystems.match(
          [naming.pattern_under(out, name) for name in names])
      for m in r.metadata_list]))
  found += _part_folders(out)
  temp = run_marker.temp_dir(out)
  return found + [temp] if FileSystems.exists(temp) else found


def _part_folders(out: str) -> List[str]:
  """The part folders of --append in `out`, listed or not (an interrupted
  append leaves one parts.json does not list)."""
  if filesystem.is_local(out):
    names = os.listdir(out)
  else:  # object stores list files: the folders are their prefixes
    prefix = out.rstrip('/') + '/'
    matched = FileSystems.match([naming.pattern_under(out, 'part-*/*')])
    names = {m.path[len(prefix):].split('/')[0]
             for m in matched[0].metadata_list if m.path.startswith(prefix)}
  return sorted(naming.join(out, n) for n in names
                if parts_lib.is_part_name(n))


# What a run opens to write in an output folder, or writes into as a
# folder, at a name known in advance (everything else it writes comes by a
# rename, which replaces a link rather than following it, or has a random
# name): a symbolic link planted at one of these would aim the write, or an
# --overwrite's deletion, elsewhere.
_WRITTEN_NAMES = frozenset({run_marker.LOCK_FILE, naming.TEMP_DIR,
                            parts_lib.INDEX_FILE, naming.VARIANTS_FILE})


def _written_through(name: str) -> bool:
  return (name in _WRITTEN_NAMES or name.endswith('.tmp') or
          parts_lib.is_part_name(name))


def refuse_planted_links(folder: str, folders=()) -> None:
  """ConfigError naming every symbolic link (or FIFO, socket, device) in a
  local output folder at a name a run writes itself (its lock, temporary
  folder, parts.json, variants.json, a `.tmp` name, a part's folder), or
  at one of `folders` (a sweep's variants): a run never writes through
  one. The output folder itself may be a link: the user chose it."""
  if not filesystem.is_local(folder) or not os.path.isdir(folder):
    return
  found = []
  for name in sorted(os.listdir(folder)):
    if not (_written_through(name) or name in folders):
      continue
    path = naming.join(folder, name)
    kind = filesystem.kind_of(path)
    if kind.startswith('a symbolic link') or kind not in (
        'a file', 'a folder'):
      found.append(f'{path} is {kind}')
  if found:
    raise ConfigError(
        'output_dir', folder, f'{"; ".join(found)}: wavbeam writes '
        f'{"that name" if len(found) == 1 else "those names"} itself and '
        'never through a link or into a special file: remove '
        f'{"it" if len(found) == 1 else "them"} (nothing was written)')


def check_own_folder(config: PipelineConfig) -> None:
  """ConfigError when --output_dir belongs to a dataset in the folder
  above it: a variant of the sweep there (variants.json lists it), or a
  part of the dataset there that --append added. A run of its own in it
  would leave that sweep or dataset inconsistent. Local folders only:
  this runs before the options are checked, and asking an object store
  means its client and the network."""
  if not filesystem.is_local(config.output_dir):
    return
  parent, _, name = config.output_dir.rstrip('/').rpartition('/')
  parent = parent or ('/' if config.output_dir.startswith('/') else '.')
  try:
    index = variants_lib.read_index(parent)
  except DatasetError:
    index = None  # not a sweep's (its own runs refuse it)
  if index is not None and name in index['variants']:
    raise ConfigError(
        'output_dir', config.output_dir, f'is variant {name!r} of the sweep '
        f'in {parent}: write the sweep (--variants, with --append or '
        '--overwrite) or to another folder')
  if parts_lib.is_part_name(name) and FileSystems.exists(
      naming.join(parent, naming.METADATA_FILE)):
    raise ConfigError(
        'output_dir', config.output_dir, f'is a part of the dataset in '
        f'{parent} (--append adds them): write that dataset, or to another '
        'folder')


def prepare(config: PipelineConfig, run_id: str, base=None) -> int:
  """Makes the output folder this run's, before anything runs; returns
  the finished shards a resumed run (--resume) may keep.

  Refuses a folder another live run writes to (even with --overwrite), and
  one holding an earlier dataset unless --overwrite; checks that the folder
  can be written before deleting anything; then removes the earlier
  dataset (metadata.json first) and marks the folder as this run's. Every
  refusal is a ConfigError (exit 2) that leaves the folder as it was.
  """
  out = config.dataset_dir
  beat = run_marker.live_heartbeat(out)
  if beat is not None:
    raise ConfigError(
        'output_dir', config.output_dir,
        f'another wavbeam job is writing to it (run {beat.get("run_id")}, '
        f'process {beat.get("pid")} on {beat.get("host")}, last seen '
        f'{beat["age"]:.0f} s ago): wait for it to finish or stop it')
  sweep = naming.join(out, naming.VARIANTS_FILE)
  if FileSystems.exists(sweep):
    raise ConfigError(
        'output_dir', config.output_dir,
        f'holds a sweep of variants ({sweep}), one dataset per folder: '
        'write this dataset to another folder')
  _check_other_layout(config)
  if config.resume:
    return _reopen(config, run_id, base)
  existing = dataset_files(config)
  if existing and not config.overwrite:
    complete = any(p.endswith('/' + naming.METADATA_FILE) for p in existing)
    what = ('a complete dataset' if complete
            else 'files of an incomplete earlier run')
    resumable = not complete and resume_lib.can_resume(out)
    raise ConfigError(
        'output_dir', config.output_dir,
        f'already holds {what} ({len(existing)} files, e.g. '
        f'{existing[0]}); pass --overwrite to replace it'
        f'{", or --resume to finish that run" if resumable else ""}')
  _check_writable(config)
  if existing:
    logging.info('--overwrite: removing %d files of the earlier dataset',
                 len(existing))
    # metadata.json first: if this is interrupted, what is left is never
    # taken for a complete dataset.
    metadata = [p for p in existing
                if p.endswith('/' + naming.METADATA_FILE)]
    filesystem.delete(metadata)
    filesystem.delete([p for p in existing if p not in metadata])
  # The marker also marks the folder as an unfinished run until the final
  # step removes it.
  run_marker.write_marker(out, run_id)
  resume_lib.write_run_record(config)
  return 0


def remove_dataset(folder: str, dataset_name: str) -> None:
  """Removes a dataset's files from `folder` (an earlier sweep's variant
  that an --overwrite of the sweep does not have), then the folder if
  that leaves it empty: files of the user's own there stay, and a path
  that is not a folder is no variant's."""
  local = filesystem.is_local(folder)
  if local and (os.path.islink(folder) or not os.path.isdir(folder)):
    return
  names = {dataset_name}
  try:  # the name it was written with, which the new sweep may not use
    names.add(read_metadata(folder)['config']['dataset_name'])
  except Exception:  # pylint: disable=broad-except  (none, or damaged)
    pass
  found = set()
  for name in sorted(names):
    found.update(dataset_files(PipelineConfig(
        input_dir=folder, output_dir=folder, dataset_name=name)))
  lock = naming.join(folder, run_marker.LOCK_FILE)
  filesystem.delete(sorted(found) + ([lock] if FileSystems.exists(lock)
                                     else []))
  if local:  # an object store's folder goes with its last file
    try:
      os.rmdir(folder)
    except OSError:  # it holds files of the user's own
      pass


def discard(config: PipelineConfig, run_id: str) -> bool:
  """Removes what run `run_id` wrote in its output folder, once it has
  failed on an option that only the data showed wrong (an --exclude that
  matches nothing, an --fmax above the corpus's Nyquist frequency): no
  rerun can keep any of it, as --resume needs the same options, and left
  there it would refuse the corrected command. Whatever the folder held
  before was removed by prepare (--overwrite) or was nothing. The marker
  goes last: until then the folder still reads as an unfinished run.
  False, touching nothing, when the folder is no longer this run's."""
  if run_marker.read_marker(config.dataset_dir) != run_id:
    return False
  temp = run_marker.temp_dir(config.dataset_dir)
  filesystem.delete([p for p in dataset_files(config) if p != temp])
  filesystem.delete([temp])
  return True


def _reopen(config: PipelineConfig, run_id: str, base) -> int:
  """prepare for --resume: the stopped run checked (resume.find), its
  shards a stopped final step published moved back, and what that step
  wrote beside them removed; the folder made this run's."""
  found = resume_lib.find(config, base)
  out = config.dataset_dir
  _check_writable(config)
  resume_lib.undo_publishing(out)
  temp = run_marker.temp_dir(out)
  published = [p for p in dataset_files(config)
               if p != temp and not parts_lib.is_part_name(
                   p.rstrip('/').rsplit('/', 1)[-1])]
  if published:
    filesystem.delete(published)
  run_marker.write_marker(out, run_id)
  return found.records


def _check_other_layout(config: PipelineConfig) -> None:
  """ConfigError when --output_dir holds a dataset in the other layout
  (in it, or in OUT/{name}/{version} of --tfds_layout): readers given
  OUT would read one of the two, and --overwrite replaces only its own."""
  flat = naming.join(config.output_dir, naming.METADATA_FILE)
  if config.tfds_layout and FileSystems.exists(flat):
    raise ConfigError(
        'tfds_layout', True, f'{config.output_dir} holds a dataset of its '
        f'own ({flat}), which readers given that folder read rather than '
        f'this one in {config.dataset_dir}: write to another folder, or '
        'remove it first')
  nested = resolve(config.output_dir)
  if not config.tfds_layout and nested != config.output_dir:
    raise ConfigError(
        'output_dir', config.output_dir, f'holds a --tfds_layout dataset in '
        f'{nested}, which a dataset written to the folder itself would hide '
        'from readers: write to another folder, or remove it first')


def _check_writable(config: PipelineConfig) -> None:
  """Creates and deletes a file in the output folder: fails now, not after
  the expensive part (and before --overwrite deletes anything), when the
  location is read-only or cannot be reached."""
  probe = naming.join(config.dataset_dir,
                      f'.wavbeam-write-check-{uuid.uuid4().hex}')
  try:
    FileSystems.create(probe).close()
    filesystem.delete([probe])
  except Exception as e:  # OSError locally, various for object stores
    raise ConfigError('output_dir', config.output_dir,
                      f'cannot be written ({" ".join(str(e).split())[:300]})'
                      '; pick a writable location') from e
