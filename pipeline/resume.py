"""--resume: finishing a run that was stopped, from what it finished.

Every run records, in its temporary folder, the options and the code it
runs with (RUN_FILE), and each shard task a record of its finished shard
(transforms/writing/kept_shards.py). A resumed run checks, before anything
runs, that nothing its shards depend on changed: the options, wavbeam's
code, the input files its finished shards read (size and modification
time) and their places in the listing. It then runs the whole job again:
listing and probing are cheap, and every shard task keeps its shard where
the record matches and the files are whole, and writes it otherwise.

A stop while the final step renamed shards into place leaves the list of
those renames (kept_shards.PUBLISHING_FILE): a resume moves them back first.
"""

import dataclasses
import functools
import hashlib
import importlib.util
import json
import logging
import os
from typing import List

from apache_beam.io.filesystems import FileSystems

from pipeline.config import ConfigError, PipelineConfig
from pipeline.contract import naming
from transforms.inputs import listing
from transforms.runtime import filesystem
from transforms.writing import augment
from transforms.writing import kept_shards

RUN_FILE = 'run.json'           # in the temporary folder


@dataclasses.dataclass(frozen=True)
class Found:
  """What --resume found in a dataset folder."""
  complete: bool = False       # a finished dataset: nothing to do
  records: int = 0             # finished shards recorded (checked later)


def code_digest(config: PipelineConfig) -> str:
  """The digest of the code a run's bytes follow from, beside its
  options: wavbeam's own, and the source of each --feature_module."""
  modules = tuple(getattr(config, 'feature_module', ()) or ())
  if not modules:
    return _own_code()
  digest = hashlib.sha256(_own_code().encode())
  for name in modules:
    try:
      spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
      spec = None
    digest.update(name.encode() + b'\0')
    if spec is not None and spec.origin and os.path.isfile(spec.origin):
      with open(spec.origin, 'rb') as f:
        digest.update(f.read())
  return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def _own_code() -> str:
  """The digest of wavbeam's own code (every .py file of its packages)."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  digest = hashlib.sha256()
  for package in ('pipeline', 'transforms'):
    for folder, dirs, files in sorted(os.walk(os.path.join(root, package))):
      dirs.sort()
      for name in sorted(files):
        if name.endswith('.py'):
          path = os.path.join(folder, name)
          digest.update(os.path.relpath(path, root).encode() + b'\0')
          with open(path, 'rb') as f:
            digest.update(f.read())
  return digest.hexdigest()


def write_run_record(config: PipelineConfig) -> None:
  """What a later --resume checks: the options and the code."""
  path = naming.join(naming.temp_dir(config.dataset_dir), RUN_FILE)
  with filesystem.create(path) as f:
    f.write(json.dumps({'code': code_digest(config),
                        'options': kept_shards.run_options(config),
                        'augment_sources': augment.sources(config)},
                       sort_keys=True).encode('utf-8'))


def _read_json(path: str):
  try:
    with FileSystems.open(path) as f:
      return json.loads(f.read().decode('utf-8'))
  except Exception:  # pylint: disable=broad-except
    return None


def find_complete(config: PipelineConfig) -> bool:
  """Whether config's folder holds a finished dataset: what --resume has
  nothing to do for. A stop just after the final step wrote metadata.json
  leaves the run's temporary folder: it goes now."""
  out = config.dataset_dir
  if not FileSystems.exists(naming.join(out, naming.METADATA_FILE)):
    return False
  temp = naming.temp_dir(out)
  try:
    if FileSystems.exists(temp):
      filesystem.delete([temp])
  except Exception:  # pylint: disable=broad-except
    pass  # gone meanwhile, or not ours to delete: a leftover either way
  return True


def check_finished(config: PipelineConfig) -> None:
  """ConfigError (exit 2) when the finished dataset in config's folder was
  written with other options than config's: --resume keeps it as it is,
  which would not be what the command asks for."""
  meta = _read_json(naming.join(config.dataset_dir, naming.METADATA_FILE))
  stored = dict((meta or {}).get('config') or {})
  for name in ('output_dir', 'overwrite', 'append'):
    stored.pop(name, None)
  changed = _changed_options(stored, kept_shards.run_options(config))
  if changed:
    raise ConfigError(
        'resume', True, f'the dataset in {config.dataset_dir} is finished, '
        f'with other options ({"; ".join(changed)}): resume with its own, '
        'or rerun with --overwrite')


def can_resume(dataset_dir: str) -> bool:
  """Whether the folder holds a stopped run that --resume can finish."""
  return FileSystems.exists(naming.join(naming.temp_dir(dataset_dir),
                                        RUN_FILE))


def resumed_or_fresh(config: PipelineConfig) -> PipelineConfig:
  """config, resuming where its folder holds a finished dataset or a
  stopped run that recorded itself, else replacing what is there (a run
  of a sweep's variant or an --append part stopped before it began)."""
  if not config.resume:
    return config
  if find_complete(config) or can_resume(config.dataset_dir):
    return config
  return dataclasses.replace(config, resume=False, overwrite=True)


def find(config: PipelineConfig, base=None) -> Found:
  """What --resume does with config's folder: Found(complete=True) for a
  finished dataset; ConfigError (exit 2) for a folder holding no stopped
  run, or one whose options, code or inputs changed since."""
  out = config.dataset_dir
  temp = naming.temp_dir(out)
  has_temp = FileSystems.exists(temp)
  if find_complete(config):
    return Found(complete=True)
  record = _read_json(naming.join(temp, RUN_FILE)) if has_temp else None
  if not isinstance(record, dict):
    what = ('holds no stopped wavbeam run to resume' if not has_temp else
            f'holds a stopped run that recorded nothing to resume from '
            f'(no {naming.TEMP_DIR}/{RUN_FILE})')
    raise ConfigError('resume', True, f'{config.output_dir} {what}: run '
                      'without --resume (with --overwrite to replace what '
                      'is there)')
  if record.get('code') != code_digest(config):
    raise ConfigError(
        'resume', True, f'the stopped run in {out} ran another version of '
        'wavbeam (or of a --feature_module), whose bytes may differ: rerun '
        'with --overwrite')
  changed = _changed_options(record.get('options') or {},
                             kept_shards.run_options(config))
  if changed:
    raise ConfigError(
        'resume', True, f'the stopped run in {out} had other options '
        f'({"; ".join(changed)}): resume it with its own, or rerun with '
        '--overwrite')
  was, now = record.get('augment_sources') or [], augment.sources(config)
  if was != now:
    first = next(a or b for a, b in zip(was + [None], now + [None])
                 if a != b)
    raise ConfigError(
        'resume', True, f'the stopped run in {out} mixed its copies with '
        f'other noise clips or impulse responses ({first[0]} changed, '
        'was added or removed): its finished shards would not match the '
        'rest; rerun with --overwrite')
  records = kept_shards.record_paths(out)
  _check_inputs(config, records, base)
  return Found(records=len(records))


def _changed_options(was: dict, now: dict) -> List[str]:
  return [f'--{name}: was {was.get(name)!r}, now {now.get(name)!r}'
          for name in sorted(set(was) | set(now))
          if was.get(name) != now.get(name)]


def _check_inputs(config: PipelineConfig, records: List[str], base) -> None:
  """ConfigError naming an input file a finished shard read that changed
  (size or modification time) or moved in the listing (files added or
  removed before it)."""
  recorded = {}
  for path in records:
    inputs = (kept_shards.read_record(path) or {}).get('inputs')
    for entry in inputs if isinstance(inputs, list) else ():
      if (isinstance(entry, dict) and isinstance(entry.get('path'), str) and
          all(isinstance(entry.get(k), (int, float))
              for k in ('index', 'size', 'mtime'))):
        recorded[entry['path']] = entry  # else its shard's check decides
  if not recorded:
    return
  try:
    _, _, blocks, _ = listing.list_input(config, base)
    places = {path: index for _, block in blocks
              for index, path, _ in block}
  except Exception as e:  # pylint: disable=broad-except
    raise ConfigError('input_dir', config.input_dir,
                      f'cannot be listed to check the stopped run\'s input '
                      f'({e})') from e
  for path, entry in sorted(recorded.items()):
    if path not in places:
      raise ConfigError('resume', True, f'{path}, which the stopped run '
                        'read, is gone from the input: rerun with '
                        '--overwrite')
    try:
      now = filesystem.metadata(path)
      state = (now.size_in_bytes, now.last_updated_in_seconds)
    except Exception:  # pylint: disable=broad-except
      state = None
    if entry['size'] >= 0 and state != (entry['size'], entry['mtime']):
      raise ConfigError('resume', True, f'{path} changed since the stopped '
                        'run read it (size or modification time): rerun '
                        'with --overwrite')
    if places[path] != entry['index']:
      raise ConfigError('resume', True, f'input files were added or '
                        f'removed since the stopped run (before {path}, now '
                        f'file {places[path]} of the listing, then '
                        f'{entry["index"]}): rerun with --overwrite')


def undo_publishing(dataset_dir: str) -> int:
  """Moves back the shards a stopped final step renamed into place; the
  number moved. Names that are not a shard's are left alone."""
  temp = naming.temp_dir(dataset_dir)
  renames = _read_json(naming.join(temp, kept_shards.PUBLISHING_FILE)) or []
  back = []
  for pair in renames:
    if not (isinstance(pair, list) and len(pair) == 2 and
            all(isinstance(n, str) and n and '/' not in n and
                n not in ('.', '..') for n in pair)):
      continue
    src, dst = naming.join(temp, pair[0]), naming.join(dataset_dir, pair[1])
    if not FileSystems.exists(src) and FileSystems.exists(dst):
      back.append((dst, src))
  if back:
    FileSystems.rename([a for a, _ in back], [b for _, b in back])
    logging.info('--resume: moved %d shards back from the stopped final '
                 'step', len(back))
  return len(back)
