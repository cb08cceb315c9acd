"""--append: the recordings a dataset does not hold yet, as a new part.

The launcher, before anything runs:
1. opens the complete dataset in output_dir (and the parts it already
   has, pipeline/parts.py) and checks that this run's options are the ones
   it was written with (a part with another window or feature could not
   be read with the others);
2. lists the input as a full run would, and sorts it against what the
   parts read (their sources.jsonl, and the files their rejects.jsonl
   rejected whole): a path no part has seen is new; a seen path whose size
   or first 64 KiB changed is reported and rejected (not read twice, not
   silently duplicated); the rest is skipped; a file --exclude leaves out
   is never new, and is counted by the part that first meets it;
3. with nothing new, says so and changes nothing; else runs the usual
   job into the next part folder, with the paths to read handed to its
   one listing task, the dataset's classes (new ones are added after
   them, so no target is renumbered) and its sample rate; then lists the
   part in parts.json, by a rename: the dataset gains the part whole, or
   not at all.
"""

import dataclasses
import logging
from typing import Callable, Dict, List, Optional, Set, Tuple

from apache_beam.io.filesystems import FileSystems

from pipeline import output_folder
from pipeline import resume as resume_lib
from pipeline import variants as variants_lib
from pipeline.contract import metadata as metadata_lib
from pipeline.contract import naming
from pipeline.contract import parts as parts_lib
from pipeline.contract import rejects as rejects_lib
from pipeline.contract import schema as schema_lib
from pipeline.config import ConfigError, PipelineConfig, splits_text
from transforms.features import registry
from transforms.runtime import filesystem
from transforms.writing import finalize
from transforms.inputs import listing
from transforms.inputs import manifest as manifest_lib
from transforms.inputs import sources
from transforms.inputs import audio_io
from transforms.inputs import patterns

# Options a part may differ in: where it goes, and how the run was asked.
FREE_OPTIONS = ('output_dir', 'overwrite', 'append')


@dataclasses.dataclass(frozen=True)
class AppendBase:
  """What the graph of an --append part needs (graph.build_pipeline)."""
  paths: Tuple[str, ...]                  # to list, sorted
  refused: Tuple[Tuple[str, str], ...]    # (path, reason): rejected there
  classes: Tuple[str, ...]                # the dataset's, in order
  sample_rate: int                        # the dataset's
  # (path, reason): --exclude leaves them out, and no part counted them.
  excluded: Tuple[Tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class AppendOutcome:
  part_dir: Optional[str]   # None: nothing to append
  new: int
  changed: Tuple[Tuple[str, str], ...]
  unchanged: int
  excluded: int = 0         # files --exclude leaves out, counted or not

  def message(self, dataset: str) -> str:
    changed = ''
    if self.changed:
      shown = ', '.join(p for p, _ in self.changed[:3])
      more = len(self.changed) - 3
      changed = (f'; {len(self.changed)} recordings changed since they were '
                 f'added and were not read again ({shown}'
                 f'{f" and {more} more" if more > 0 else ""}): rebuild with '
                 '--overwrite to replace them')
    excluded = (f'; {self.excluded} left out by --exclude'
                if self.excluded else '')
    if self.part_dir is None:
      return (f'wavbeam: nothing to append: no new recording in the input; '
              f'the dataset at {dataset} is unchanged ({self.unchanged} '
              f'recordings already in it){excluded}{changed}')
    return (f'wavbeam: appended {self.new} new recordings as '
            f'{self.part_dir}; {self.unchanged} already in the dataset were '
            f'skipped{excluded}{changed}')


def open_parts(config: PipelineConfig) -> Tuple[str, List[str], List[dict]]:
  """(dataset folder, its part folders, their checked metadata); a
  ConfigError unless it holds a complete dataset."""
  out = config.dataset_dir
  try:
    dirs = output_folder.part_dirs(out)
    metas = [output_folder.read_metadata(d) for d in dirs]
  except (ValueError, OSError) as e:
    raise ConfigError('append', True, f'cannot read the dataset at {out} '
                      f'({e})') from e
  if metas[0] is None and FileSystems.exists(
      naming.join(out, naming.VARIANTS_FILE)):
    raise ConfigError('append', True, f'{out} holds a sweep of variants '
                      f'({naming.VARIANTS_FILE}): append to every variant '
                      'with --variants and the file the sweep was written '
                      'with')
  if metas[0] is None:
    raise ConfigError('append', True, f'{out} holds no complete dataset '
                      f'(no {naming.METADATA_FILE}) to append to: write it '
                      'first, without --append')
  if any(m is None for m in metas):
    missing = [d for d, m in zip(dirs, metas) if m is None]
    raise ConfigError('append', True, f'{out}: parts.json lists {missing}, '
                      'which hold no complete dataset')
  return out, dirs, metas


def check_same_provenance(config: PipelineConfig, metadata: dict,
                          extra_features=None) -> None:
  """ConfigError when a feature would now be computed with other than
  what metadata.json records (an embedding model's files changed, a
  model handler of the caller's given), given the run's extra_features."""
  given = extra_features or {}
  for name, recorded in metadata.get('features', {}).items():
    if name in registry.names():
      feature = registry.get(name)
      feature.check_provenance(config, recorded)
      # A caller's handler says what it is (its provenance); a dataset
      # written with one is refused by check_provenance already.
      caller = given.get(name) if feature.takes_object else None
      if getattr(caller, 'provenance', None) is not None:
        raise ConfigError('features', name, 'the dataset\'s values were '
                          'computed from --embedding_model\'s files, and this '
                          'append gives a model handler of its own: append '
                          'without model_handler=')


def check_same_options(config: PipelineConfig, stored: dict) -> None:
  """ConfigError naming the first option that differs from the dataset's."""
  defaults = PipelineConfig(input_dir='-', output_dir='-').to_json()
  mine = config.to_json()
  for name, value in mine.items():
    if name in FREE_OPTIONS:
      continue
    was = stored.get(name, defaults[name])
    if name == 'splits':
      # A dataset that gives its splits as an object kept no order.
      value = dict(value) if isinstance(was, dict) else value
      if was != value:
        raise ConfigError(name, splits_text(config.splits), 'the dataset at '
                          f'{config.dataset_dir} was written with '
                          f'{splits_text(_pairs(was))}: the order of the '
                          'splits decides which files each gets; an --append '
                          'run uses the options it was written with')
    elif was != value:
      raise ConfigError(name, value, f'the dataset at {config.dataset_dir} '
                        f'was written with {was!r}; an --append run uses the '
                        'options it was written with')


def _pairs(splits):
  return list(splits.items()) if isinstance(splits, dict) else splits


def seen_files(part_dirs: List[str]) -> Tuple[Dict[str, tuple], Set[str]]:
  """({path relative to input_dir: (size, head CRC, segments digest or
  None)} of the files the parts read, {path as listed} of those they
  rejected whole or excluded)."""
  identities: Dict[str, tuple] = {}
  rejected: Set[str] = set()
  for d in part_dirs:
    path = naming.join(d, sources.FILE_NAME)
    if not FileSystems.exists(path):
      raise ConfigError('append', True, f'{d} has no {sources.FILE_NAME} '
                        '(it was written by an earlier wavbeam): rebuild it '
                        'with --overwrite to append to it')
    for entry in sources.parse(output_folder.BEAM_FS.read_text(path), path):
      identities[entry['path']] = (entry['size'], entry['head_crc32c'],
                                   entry['segments'])
    path = naming.join(d, rejects_lib.FILE_NAME)
    if FileSystems.exists(path):
      rejected.update(
          record['path'] for record in rejects_lib.parse(
              output_folder.BEAM_FS.read_text(path), path)
          if rejects_lib.rejected_whole(record))
  return identities, rejected


def identity(path: str) -> Tuple[int, int]:
  """(size, head CRC) of a file now, as probing records them; (-1, -1)
  when it cannot be read or is no regular file (never opened then)."""
  try:
    size = filesystem.metadata(path).size_in_bytes
    with audio_io.open_binary(path) as raw:
      return size, audio_io.head_crc(raw.read(audio_io.HEAD_BYTES))
  except (audio_io.BadWav,) + audio_io.INPUT_ERRORS:
    return -1, -1


def plan(config: PipelineConfig, part_dirs: List[str], metas: List[dict]
         ) -> Tuple[AppendBase, AppendOutcome]:
  identities, rejected = seen_files(part_dirs)
  every, entries, refused, excluded = listing.input_paths(config)
  entries = entries or {}
  new, changed, unchanged, uncounted = [], [], 0, []
  for path in every:
    if path in excluded:
      # Never a reason for a part; counted (and listed in rejects.jsonl)
      # by the first part that meets it, so the parts' counts add up.
      if (audio_io.undecodable_name(path) or path) not in rejected:
        uncounted.append(path)
      continue
    rel = patterns.relative_path(path, config.input_dir)
    known = identities.get(rel)
    if known is not None:
      now = identity(path)
      segments = manifest_lib.segments_digest(entries.get(path))
      if now == known[:2] and segments != known[2]:
        changed.append((path, 'its segments in the manifest changed since '
                        'it was added to the dataset: not read again; '
                        'rebuild with --overwrite to cut them anew'))
      elif now == known[:2]:
        unchanged += 1
      else:
        changed.append((path, f'changed since it was added to the dataset '
                        f'(size {known[0]} -> {now[0]} bytes, or its first '
                        f'{audio_io.HEAD_BYTES} bytes differ): not read '
                        'again; rebuild with --overwrite to replace it'))
    elif (audio_io.undecodable_name(path) or path) in rejected:
      # Rejections name a file whose name is not UTF-8 as the listing
      # rejected it, its bytes shown as \xNN.
      unchanged += 1
    else:
      new.append(path)
  last = metas[-1]
  reasons = dict(changed)
  reasons.update((p, refused[p]) for p in new if p in refused)
  base = AppendBase(tuple(sorted(new + [p for p, _ in changed] + uncounted)),
                    tuple(sorted(reasons.items())), tuple(last['classes']),
                    int(last['sample_rate']),
                    tuple(sorted((p, excluded[p]) for p in uncounted)))
  return base, AppendOutcome(None, len(new), tuple(changed), unchanged,
                             len(excluded))


def run_sweep_append(
    sweep_dir: str, variant_configs: Dict[str, PipelineConfig],
    run_parts: Callable[[Dict[str, PipelineConfig], AppendBase], object],
    expected_schema: Callable[[PipelineConfig], schema_lib.Schema],
    extra_features=None) -> Dict[str, AppendOutcome]:
  """--append to a sweep (--variants) in `sweep_dir`: every variant gets
  the same new part, written by one job, `run_parts({variant: part
  config}, base)`; then the sweep's variants.json lists it for every
  variant at once, by one rename (readers take a variant's parts from
  there), and each variant's parts.json follows, for a variant folder
  copied out of the sweep. Refused (ConfigError) when the variants do not
  hold the same recordings in the same parts."""
  planned, opened, metas_of = {}, {}, {}
  for name, config in variant_configs.items():
    out, dirs, metas = open_parts(config)
    check_same_options(config, metas[0]['config'])
    check_same_provenance(config, metas[-1], extra_features)
    metas_of[name] = metas[0]
    opened[name] = (out, dirs)
    planned[name] = plan(config, dirs, metas)
  if (len({base for base, _ in planned.values()}) != 1 or
      len({len(dirs) for _, dirs in opened.values()}) != 1):
    counts = ', '.join(f'{name}: {len(dirs)} parts'
                       for name, (_, dirs) in sorted(opened.items()))
    raise ConfigError('append', True, 'the variants of the sweep do not hold '
                      f'the same recordings in the same parts ({counts}); '
                      'see wavbeam verify on the sweep, and rebuild it with '
                      '--overwrite')
  base, outcome = next(iter(planned.values()))
  if not outcome.new:
    _list_parts_in_variants(
        {out: len(dirs) for out, dirs in opened.values()})
    return {name: outcome for name in variant_configs}
  for name, config in variant_configs.items():
    check_same_features(config, metas_of[name], expected_schema(config))
  parts = {name: _part_config(config, naming.join(
      opened[name][0], parts_lib.part_name(len(opened[name][1]))))
           for name, config in variant_configs.items()}
  # With --resume, parts a stopped append finished are kept as they are.
  unfinished = {name: part for name, part in parts.items()
                if not (part.resume and resume_lib.find_complete(part))}
  if unfinished:
    run_parts(unfinished, base)
  count = len(next(iter(opened.values()))[1])
  names = [parts_lib.BASE] + [parts_lib.part_name(n)
                              for n in range(1, count + 1)]
  index = variants_lib.read_index(sweep_dir)
  # The commit point: before this rename every reader sees the sweep as
  # it was, after it every variant with the new part.
  finalize.write_text(naming.join(sweep_dir, variants_lib.FILE_NAME),
                      variants_lib.dumps_index(dict(index, parts=names)))
  _list_parts_in_variants({out: count + 1 for out, _ in opened.values()})
  return {name: dataclasses.replace(outcome, part_dir=parts[name].output_dir)
          for name in variant_configs}


def _list_parts_in_variants(counts: Dict[str, int]) -> None:
  """Each variant folder's parts.json made to list its `counts[folder]`
  parts, as the sweep does (it lists them for readers): a variant folder
  copied out of the sweep is then whole, also after an append that was
  stopped between the sweep's commit and this."""
  for out, count in counts.items():
    names = [parts_lib.BASE] + [parts_lib.part_name(n)
                                for n in range(1, count)]
    path = naming.join(out, parts_lib.INDEX_FILE)
    if count == 1 and not FileSystems.exists(path):
      continue
    if (FileSystems.exists(path) and
        output_folder.BEAM_FS.read_text(path) == parts_lib.dumps(names)):
      continue
    finalize.write_text(path, parts_lib.dumps(names))


def check_same_features(config: PipelineConfig, stored: dict,
                        expected: schema_lib.Schema) -> None:
  """ConfigError unless the part's examples (`expected`, their schema)
  hold the features, dtypes and shapes the dataset's metadata `stored`
  records: readers refuse a dataset whose parts differ."""
  stored_schema = metadata_lib.schema_of(stored)
  if stored_schema == expected:
    return
  try:
    stored_schema.merge(expected)
    reason = 'the dataset holds no example of its own'
  except schema_lib.SchemaError as e:
    reason = str(e).replace('between examples', 'between the dataset and '
                            'this part')
  typed = (' (a --manifest_extra_columns column is int64 while every value '
           'is a whole number, else a string)'
           if config.manifest_extra_columns else '')
  raise ConfigError('append', True, f'the dataset at {config.dataset_dir} '
                    f'stores other features than this part would: {reason}'
                    f'{typed}; rebuild it with --overwrite')


def _part_config(config: PipelineConfig, part_dir: str) -> PipelineConfig:
  """The options of the run that writes a new part into `part_dir`: a
  folder there is an interrupted append's, which the part run replaces
  (as --overwrite would), or finishes with --resume when it recorded a
  run to resume (a stop before that left nothing to keep)."""
  return resume_lib.resumed_or_fresh(dataclasses.replace(
      config, output_dir=part_dir, append=False, overwrite=not config.resume,
      tfds_layout=False))


def run_append(config: PipelineConfig,
               run_part: Callable[[PipelineConfig, AppendBase], object],
               expected_schema: Callable[[PipelineConfig], schema_lib.Schema],
               extra_features=None) -> AppendOutcome:
  """--append: checks, plans, runs the part with `run_part(part config,
  base)` and lists it in parts.json; see the module docstring.
  `expected_schema(config)`: the schema its examples will have."""
  out, dirs, metas = open_parts(config)
  check_same_options(config, metas[0]['config'])
  check_same_provenance(config, metas[-1], extra_features)
  base, outcome = plan(config, dirs, metas)
  if not outcome.new:
    return outcome
  check_same_features(config, metas[0], expected_schema(config))
  name = parts_lib.part_name(len(dirs))
  part_dir = naming.join(out, name)
  # A folder of that name is an interrupted append's (parts.json does not
  # list it): the part run replaces it, as --overwrite would (and refuses
  # one a live run still writes to).
  part = _part_config(config, part_dir)
  if not (part.resume and resume_lib.find_complete(part)):
    run_part(part, base)
  names = [parts_lib.BASE] + [parts_lib.part_name(n)
                              for n in range(1, len(dirs) + 1)]
  finalize.write_text(naming.join(out, parts_lib.INDEX_FILE),
                      parts_lib.dumps(names))
  logging.info('appended %s to %s', name, out)
  return dataclasses.replace(outcome, part_dir=part_dir)
