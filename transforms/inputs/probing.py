"""Probing, a block of the listing at a time: each file opened, its
format, rate and length read (audio_io.probe), and the probes stored with
the block's rejections (block_store) for the planning passes."""

import collections
import functools

import apache_beam as beam

from transforms.runtime import timeline
from transforms.inputs import block_store
from transforms.runtime import counters
from transforms.runtime import forked_workers
from transforms.inputs import audio_io
from transforms.inputs import blocks as blocks_lib


class ProbeBlock(forked_workers.CallsInBundles, beam.DoFn):
  """(block, ((index, path), ...)) -> one StoredBlock: the probes of the
  files that open, and a Rejection (or a note) per file that needs one,
  stored (see block_store) for PlanBlock."""

  def __init__(self, dataset_dir: str):
    self.dataset_dir = dataset_dir

  def process(self, block):
    counted = functools.partial(_counted, len(block[1]))
    if self.calls is None:
      yield from counted(probe_block(self.dataset_dir, block))
    else:
      yield from self.calls.start(counted, probe_block, self.dataset_dir,
                                   block)


def _counted(files: int, stored: blocks_lib.StoredBlock):
  counters.counter(counters.FILES_PROBED).inc(files)
  counters.counter(counters.FILES_REJECTED).inc(stored.files_rejected)
  yield stored


def probe_block(dataset_dir: str, block) -> blocks_lib.StoredBlock:
  """ProbeBlock's work: the block's probes stored with a Rejection or note
  per file that needs one (PlanBlock writes those out)."""
  timeline.mark(timeline.PROBE_START)
  number, files = block
  rejections, infos = [], []
  entries = {index: entry for index, _, entry in files if entry is not None}
  for index, path, _ in files:
    try:
      info, note = audio_io.probe(index, path)
    except audio_io.BadWav as e:
      rejections.append(audio_io.Rejection(path, str(e), 'probe'))
      continue
    infos.append(info)
    if note:
      rejections.append(audio_io.Rejection(path, note, audio_io.NOTE))
  rates = collections.Counter(info.sample_rate for info in infos)
  stored = blocks_lib.StoredBlock(
      number, block_store.write(dataset_dir, number, infos, rejections,
                                entries),
      tuple(sorted(rates.items())), len(files) - len(infos))
  timeline.mark(timeline.PROBE_END)
  return stored
