"""When a local run's phases happen, for bench.stages: wall-clock marks
appended to the file named by the environment variable WAVBEAM_TIMELINE.

Without that variable (every ordinary run) `mark` does nothing. With it,
each mark is one line, `EVENT UNIX_SECONDS PID`, appended with O_APPEND in
a single write, so the launcher, Beam's worker threads and the forked
workers (which inherit the environment) can all mark into one file. Marks
made on remote workers land on those machines: the timeline is for local
runs. `stages` turns the marks into consecutive phase durations.
"""

import os
import time
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

ENV = 'WAVBEAM_TIMELINE'

# The marks, in the order a run makes them.
PIPELINE = 'pipeline'            # run.py, before beam.Pipeline(...)
LISTING_START = 'listing_start'  # listing.ListBlocks, per call
LISTING_END = 'listing_end'
PROBE_START = 'probe_start'      # probing.probe_block, per block
PROBE_END = 'probe_end'
PLANNED = 'planned'              # progress.write_plan: the layouts are known
FINALISED = 'finalised'          # finalize.finalize_dataset: metadata written

# Phases, each from the previous boundary to its own (see `stages`).
STAGES = ('start-up', 'graph', 'listing', 'probing', 'planning', 'grouping',
          'shards', 'finalising', 'shutdown')


def mark(event: str) -> None:
  """Appends `event` with the time now to $WAVBEAM_TIMELINE, if set."""
  path = os.environ.get(ENV)
  if not path:
    return
  line = f'{event} {time.time():.6f} {os.getpid()}\n'.encode('ascii')
  fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
  try:
    os.write(fd, line)
  finally:
    os.close(fd)


def parse(lines: Iterable[str]) -> Dict[str, List[float]]:
  """Timeline lines -> {event: [times, sorted]}; blank lines skipped."""
  events: Dict[str, List[float]] = {}
  for line in lines:
    parts = line.split()
    if parts:
      events.setdefault(parts[0], []).append(float(parts[1]))
  return {k: sorted(v) for k, v in events.items()}


def stages(events: Mapping[str, List[float]], started: float, ended: float,
           shards: Optional[Tuple[float, float]]) -> Dict[str, float]:
  """Consecutive phase durations (seconds) of one whole process that
  started at `started` and ended at `ended` (Unix seconds), from its marks
  and `shards` (the shard phase's first start and last end, from
  metadata.json's shards_written; None if no shard was written).

  Boundaries: the process's start; the pipeline's construction begins
  (`start-up` ends: interpreter, imports, options, forked workers); the
  first listing call (`graph`: building it, preparing the output, the
  runner starting); the last listing call's end; the last probe's end;
  the plan; the first shard task's start (`grouping`: window references
  assigned and grouped by shard); the last shard task's end; metadata.json
  written (`finalising`); the process's end (`shutdown`). A boundary
  missing or earlier than the one before takes the one before's time (its
  phase is 0), so the phases always add up to the whole process.
  """
  def first(name):
    return events.get(name, [None])[0]

  def last(name):
    return events.get(name, [None])[-1]

  bounds = [first(PIPELINE), first(LISTING_START), last(LISTING_END),
            last(PROBE_END), first(PLANNED),
            shards[0] if shards else None, shards[1] if shards else None,
            last(FINALISED), ended]
  out, previous = {}, started
  for name, bound in zip(STAGES, bounds):
    bound = previous if bound is None else max(previous, bound)
    out[name] = bound - previous
    previous = bound
  return out
