"""The run's input listed by the job: the audio files under input_dir (and
a manifest's or split lists' rows) as blocks of consecutive indices, and a
Rejection per name that cannot be used or that --exclude leaves out.
ListBlocks yields blocks, rejections and the counts on its main output, as
distinct types (graph.SplitByType parts them)."""

import dataclasses
import os
import stat
from typing import Dict, Iterator

import apache_beam as beam

from pipeline.contract import naming
from pipeline import config as config_lib
from transforms.runtime import timeline
from pipeline.config import PipelineConfig
from transforms.runtime import filesystem
from transforms.inputs import labels
from transforms.inputs import lhotse_manifest
from transforms.inputs import manifest as manifest_lib
from transforms.inputs import patterns
from transforms.inputs import split_lists
from transforms.inputs import audio_io
from transforms.inputs import blocks as blocks_lib


def index_blocks(paths, entries=None, refused=None, excluded=None):
  """Sorted paths -> ([(block, ((index, path, entry), ...))], [Rejection]):
  consecutive indices in blocks of blocks.block_size, and a rejection for
  each name that is in `excluded` ({path: reason}; stage EXCLUDED), is
  not UTF-8, or is in `refused` ({path: reason}); they keep their indices,
  so others keep theirs. `entries` maps paths to their manifest rows
  (entry: a manifest.Entry, else None).

  A name that is not valid UTF-8 cannot be written in an example, a
  rejection or a Beam coder's string; it is shown with its bytes as \\xNN
  and counted like any other file.
  """
  indexed, unusable = [], []
  refused = refused or {}
  excluded = excluded or {}
  for index, path in enumerate(paths):
    shown = audio_io.undecodable_name(path)
    if path in excluded:
      unusable.append(audio_io.Rejection(shown or path, excluded[path],
                                       audio_io.EXCLUDED))
    elif shown is not None:
      unusable.append(audio_io.Rejection(
          shown, 'file name is not valid UTF-8 (shown with its bytes as '
          '\\xNN): rename the file', 'list'))
    elif path in refused:
      unusable.append(audio_io.Rejection(path, refused[path], 'list'))
    else:
      indexed.append((index, path, entries and entries.get(path)))
  size = blocks_lib.block_size(len(paths))
  blocks = [(b, tuple(indexed[start:start + size]))
            for b, start in enumerate(range(0, len(indexed), size))]
  return blocks, unusable


def read_manifest(config: PipelineConfig) -> manifest_lib.Manifest:
  """The run's rows: its Lhotse manifests, or its --manifest files."""
  if config.lhotse_recordings:
    return lhotse_manifest.read(config)
  return manifest_lib.read(config)


def input_paths(config: PipelineConfig):
  """(sorted paths, manifest entries or None, {path: why it is refused},
  {path: why it is excluded}): the audio files under input_dir
  (--audio_formats); with --manifest, those and the manifest's rows, where
  a file without a row, and a row under input_dir without its file, are
  refused (rows elsewhere, absolute or URIs, are probed); with
  --split_lists, a listed path without its file is refused too, so that it
  is counted and reported like a file. Every path --exclude matches is
  excluded instead (excluded_paths)."""
  every, entries, refused = _listed_paths(config)
  excluded = excluded_paths(config, every)
  for path in excluded:
    refused.pop(path, None)
  refused.update(same_file_names(
      [p for p in every if p not in excluded and p not in refused]))
  return every, entries, refused, excluded


def same_file_names(paths) -> Dict[str, str]:
  """{name: why it is refused} of every local name in `paths` (sorted) for
  a file that an earlier name gives too: a symbolic link to it or to a
  folder above it, or a hard link. One file is one recording, read once,
  under its first name, so that its audio can never be in two splits."""
  first, refused = {}, {}
  for path in paths:
    if not filesystem.is_local(path):
      continue
    try:
      st = os.stat(path)
    except OSError:
      continue  # probing says why it cannot be read
    if not stat.S_ISREG(st.st_mode):
      continue  # a FIFO or a device: probing rejects each name so
    key = (st.st_dev, st.st_ino)
    if key in first:
      refused[path] = (f'the same file as {first[key]} (a link to it, or '
                       'through a linked folder): one recording is read '
                       f'once, as {first[key]}')
    else:
      first[key] = path
  return refused


def excluded_paths(config: PipelineConfig, paths) -> Dict[str, str]:
  """{path: reason} of the listed `paths` --exclude matches. ConfigError
  for an --exclude or --silence_from pattern that matches no path (a typo
  would silently keep, or leave unlabelled, the files it meant), and for
  a --silence_from pattern whose every file is excluded."""
  if not config.exclude and not config.silence_from:
    return {}
  excluded, matched, silence_kept = {}, set(), set()
  for path in paths:
    rel = patterns.relative_path(path, config.input_dir)
    hits = [p for p in config.exclude if patterns.first_match(rel, (p,))]
    if hits:
      excluded[path] = f'excluded: matches --exclude {hits[0]}'
      matched.update(('exclude', p) for p in hits)
    for p in config.silence_from:
      if patterns.first_match(rel, (p,)):
        matched.add(('silence_from', p))
        if not hits:
          silence_kept.add(p)
  formats = ','.join(config.audio_formats)
  for name, given in (('exclude', config.exclude),
                      ('silence_from', config.silence_from)):
    for p in given:
      if (name, p) not in matched:
        raise config_lib.ConfigError(
            name, p, f'matches no file under {config.input_dir} (of '
            f'--audio_formats={formats}; matched against each path '
            'relative to it, e.g. _background_noise_/*)')
  for p in config.silence_from:
    if p not in silence_kept:
      raise config_lib.ConfigError(
          'silence_from', p, 'every file it matches is left out by '
          f'--exclude={",".join(config.exclude)}')
  return excluded


def _listed_paths(config: PipelineConfig):
  """input_paths before --exclude."""
  paths = audio_io.list_audio_files(config.input_dir, config.audio_formats)
  formats = f'--audio_formats={",".join(config.audio_formats)}'
  if config.split_lists:
    listed = set(paths)
    missing = {}
    for name, where in split_lists.listed_places(config).items():
      path = naming.join(config.input_dir, name)
      if path not in listed:
        missing[path] = (f'listed in {where} of --split_lists, but there is '
                         f'no such file under input_dir (of {formats})')
    return sorted(listed | set(missing)), None, missing
  if not manifest_lib.has_manifest(config):
    return paths, None, {}
  found = read_manifest(config)
  listed = set(paths)
  every = sorted(listed | set(found.entries))
  root = config.input_dir.rstrip('/') + '/'
  refused = {}
  for path in every:
    entry = found.entries.get(path)
    if entry is None:
      refused[path] = f'no row in the manifest ({found.text})'
    elif path not in listed and path.startswith(root):
      if path[len(root):] == '..' or path[len(root):].startswith('../'):
        refused[path] = (f'listed on line {entry.line} of the manifest as a '
                         'path that leads out of input_dir: give a file '
                         'elsewhere by its absolute path')
      else:
        refused[path] = (f'listed on line {entry.line} of the manifest, but '
                         'there is no such file under input_dir (of '
                         f'{formats})')
  return every, found.entries, refused


def label_from_paths(config: PipelineConfig) -> Iterator[str]:
  """The listed files whose class --label_from gives, one at a time, for
  the launcher to check that it finds one (labels.check_label_from): the
  manifest's rows, else the audio files under input_dir, less those
  --exclude leaves out and --silence_from recordings (whose class is
  --silence_label)."""
  if manifest_lib.has_manifest(config):
    paths = iter(read_manifest(config).entries)
  else:
    paths = audio_io.iter_audio_files(config.input_dir, config.audio_formats)
  for path in paths:
    rel = patterns.relative_path(path, config.input_dir)
    if not (patterns.first_match(rel, config.exclude) or
            labels.is_silence(path, config)):
      yield path


def list_input(config: PipelineConfig, base=None):
  """(files seen, files excluded, blocks, rejections) of the run's input
  (input_paths); for an --append part, `base` (append.AppendBase) holds
  the paths to read, chosen by the launcher, those refused and those
  excluded."""
  if base is None:
    every, entries, refused, excluded = input_paths(config)
  else:
    every, refused = list(base.paths), dict(base.refused)
    excluded = dict(base.excluded)
    entries = (read_manifest(config).entries
               if manifest_lib.has_manifest(config) else None)
  entries = _with_split_lists(config, every, entries)
  blocks, unusable = index_blocks(every, entries, refused, excluded)
  return len(every), len(excluded), blocks, unusable


def _with_split_lists(config: PipelineConfig, paths, entries):
  """--split_lists as rows dealt with their files, as a manifest's are (a
  manifest's rows get their split), so that planning reads no list."""
  if not config.split_lists:
    return entries
  listed = split_lists.listed_splits(config)
  out = dict(entries or {})
  for path in paths:
    split = listed.get(patterns.relative_path(path, config.input_dir),
                       config_lib.REST_SPLIT)
    entry = out.get(path)
    out[path] = (dataclasses.replace(entry, split=split) if entry is not None
                 else manifest_lib.Entry(0, split, None))
  return out


class ListBlocks(beam.DoFn):
  """(config, append base or None) -> the listing in blocks, a Rejection
  per unusable name (or, with --manifest, a file without a row, a row
  without a file; with --append, a changed file) and one ListedFiles with
  the count: the paths are listed by the job, not carried in its graph."""

  def process(self, listing):
    timeline.mark(timeline.LISTING_START)
    count, excluded, blocks, unusable = list_input(*listing)
    timeline.mark(timeline.LISTING_END)
    yield from blocks
    yield from unusable
    yield blocks_lib.ListedFiles(count, excluded)
