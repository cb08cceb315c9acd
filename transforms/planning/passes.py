"""The planning passes over the stored blocks: their files planned
(plan.plan_block) once the dataset's rate is known, then again, with the
layout, into the references that shards read. plan.py holds the rules and
no Beam or I/O (tests/test_layers.py); this module reads the block store
and writes the rejections. PlanBlock yields several kinds of record on
its main output, as distinct types (graph.SplitByType parts them)."""

import apache_beam as beam

from pipeline.config import PipelineConfig
from transforms.inputs import block_store
from transforms.runtime import counters
from transforms.inputs import file_reports
from transforms.planning import layout as layout_lib
from transforms.planning import rules as plan_lib
from transforms.planning import block_rejects
from transforms.inputs import audio_io
from transforms.inputs import blocks as blocks_lib


class PlanBlock(beam.DoFn):
  """StoredBlock -> its planned files per split (PlannedFiles), its
  windows (BlockWindows), and, when any file of the block was rejected
  (by probing, or here: wrong rate, too short, no label) or noted, its
  BlockRejects."""

  def __init__(self, config: PipelineConfig):
    self.config = config

  def process(self, stored, dataset_rate):
    infos, probe_rejections, entries = block_store.read_all(stored.path)
    segments, notes = [], []
    planned, rejected = plan_lib.plan_block(stored.block, infos, self.config,
                                            dataset_rate, entries, segments,
                                            notes)
    rejections = probe_rejections + tuple(
        audio_io.Rejection(path, reason, 'plan') for path, reason in rejected
    ) + tuple(audio_io.Rejection(path, reason, file_reports.SEGMENT, frames)
              for path, reason, frames in segments) + tuple(
                  audio_io.Rejection(path, remark, file_reports.NOTE)
                  for path, remark in notes)
    if rejections:
      yield block_rejects.write(self.config.dataset_dir, stored.block,
                               rejections)
    counters.counter(counters.FILES_REJECTED).inc(len(rejected))
    shared = planned.split_overlap()
    yield blocks_lib.PlannedFiles(
        stored.block, tuple(sorted(planned.files_by_split().items())),
        stored.path, planned.num_files() if shared else None, shared)
    yield planned.windows()


def planned_block(stored, config: PipelineConfig, dataset_rate: int,
                  allowed=None) -> plan_lib.PlannedBlock:
  """A StoredBlock planned again (rejections were recorded by PlanBlock),
  limited by `allowed` (a plan.Allowance) when --silence_windows or
  --num_elems is set."""
  infos, _, entries = block_store.read_all(stored.path)
  planned, _ = plan_lib.plan_block(stored.block, infos, config, dataset_rate,
                                   entries)
  if allowed is not None:
    planned = allowed.limit(planned)
  return planned


def stored_block_refs(stored, config: PipelineConfig, dataset_rate: int,
                      layouts, allowed=None):
  """((split, shard), (plan, window, sort key)) for a StoredBlock's
  windows (layout.block_refs)."""
  return layout_lib.block_refs(
      stored.block, planned_block(stored, config, dataset_rate,
                                  allowed).plans,
      layouts, shuffle=not config.no_shuffle, seed=config.shuffle_seed)


class WindowRefs(list):
  """A block's window refs bound for one task (a shard, or a sweep's
  segment), sent as one element.

  Every ref of a file holds that file's plan. Beam's default coder takes
  a plain list apart and pickles each ref on its own, a copy of the plan
  per window (436 bytes a window on the benchmark's long files); a list of
  its own type it pickles whole, and pickle stores an object it meets twice
  once (86 bytes a window), and decodes the refs sharing one plan. A run
  holds every ref at once while it groups them: 16 h of audio, 27,723
  windows, held 12 MB encoded and 27 MB decoded, now a fifth."""


def refs_by_key(keyed_refs) -> list:
  """(key, ref) pairs -> [(key, WindowRefs)], a key's refs in their order."""
  by_key = {}
  for key, ref in keyed_refs:
    by_key.setdefault(key, WindowRefs()).append(ref)
  return list(by_key.items())
