"""Progress of a local run, on stderr: files, examples, MB, speed, ETA.

The launcher watches the output folder, never the workers: the pipeline
writes its plan (files, examples, shards) into the temporary folder once
the layout is known, and shards grow there until the last step. So it works
the same for threads, worker processes and any Beam file system, and the
DoFns keep no shared state. A bar when stderr is a terminal, plain lines
every few seconds otherwise.
"""

import json
import sys
import threading
import time
from typing import Optional

from apache_beam.io.filesystems import FileSystems

from transforms.runtime import filesystem
from transforms.runtime import timeline
from pipeline.contract import naming

PLAN_FILE = 'plan.json'


def plan_path(dataset_dir: str) -> str:
  return naming.join(naming.temp_dir(dataset_dir), PLAN_FILE)


def write_plan(layouts, *, dataset_dir: str, files_seen, example_size):
  """Records the run's plan for the progress display; returns `layouts`.
  `files_seen`: (files listed, of which --exclude left out).
  `example_size`: layout.ExampleSize, whose average over the planned
  examples is the display's bytes per example.

  The same content on every attempt, so a retried step rewrites it safely.
  """
  files_seen, files_excluded = files_seen
  examples = sum(s.total for s in layouts.values())
  size = sum(example_size.total(s.total, s.frames) for s in layouts.values())
  plan = {'files_seen': files_seen, 'files_excluded': files_excluded,
          'files_planned': sum(s.num_files for s in layouts.values()),
          'examples': examples,
          'shards': sum(s.num_shards for s in layouts.values()),
          'example_bytes': round(size / examples) if examples else
                           example_size.fixed}
  with filesystem.create(plan_path(dataset_dir)) as f:
    f.write(json.dumps(plan, sort_keys=True).encode('utf-8'))
  timeline.mark(timeline.PLANNED)
  return layouts


def _read_plan(dataset_dir: str) -> Optional[dict]:
  try:
    with FileSystems.open(plan_path(dataset_dir)) as f:
      return json.loads(f.read().decode('utf-8'))
  except Exception:  # not written yet, or being written
    return None


def _bytes_written(dataset_dir: str) -> int:
  temp = naming.temp_dir(dataset_dir)
  try:
    found = FileSystems.match([naming.pattern_under(temp, '*-*')])[0]
    return sum(m.size_in_bytes for m in found.metadata_list
               if naming.within(temp, [m.path]))
  except Exception:  # the folder is gone: the run is finishing
    return 0


def _duration(seconds: float) -> str:
  seconds = int(seconds + 0.5)
  if seconds < 60:
    return f'{seconds} s'
  if seconds < 3600:
    return f'{seconds // 60} min {seconds % 60:02d} s'
  return f'{seconds // 3600} h {seconds % 3600 // 60:02d} min'


def status_line(plan: Optional[dict], written: int, elapsed: float,
                write_started: Optional[float], now: float,
                width: int = 0, kept: int = 0, kept_bytes: int = 0) -> str:
  """One progress line; pure, so it is tested directly. `kept`: finished
  shards of a stopped run a resume found (`kept_bytes` of them, in
  `written` but not in the rate)."""
  if plan is None:
    return f'wavbeam: reading headers and planning... {_duration(elapsed)}'
  total = plan['examples']
  excluded = plan.get('files_excluded', 0)
  rejected = plan['files_seen'] - plan['files_planned'] - excluded
  done = min(total, written // max(1, plan['example_bytes']))
  fraction = done / total if total else 1.0
  mb = written / 1e6
  rate = ((written - kept_bytes) / (now - write_started) / 1e6
          if write_started is not None and now > write_started else 0.0)
  eta = ((total - done) * plan['example_bytes'] / 1e6 / rate
         if rate > 0 and done else None)
  bar = ''
  if width:
    filled = int(fraction * width)
    bar = '[' + '#' * filled + '.' * (width - filled) + '] '
  return (f'wavbeam: {bar}{plan["files_planned"]}/{plan["files_seen"]} files '
          f'planned ({rejected} rejected'
          f'{f", {excluded} excluded" if excluded else ""}), ~{done}/{total} '
          f'examples ({fraction:.0%}) in {plan["shards"]} shards'
          f'{f" ({kept} found finished)" if kept else ""}, '
          f'{mb:.0f} MB at {rate:.0f} MB/s, elapsed {_duration(elapsed)}, ETA '
          f'{_duration(eta) if eta is not None else "..."}')


class Progress(threading.Thread):
  """Prints status lines until stopped; a context manager."""

  def __init__(self, dataset_dir: str, stream=None, interval: float = None,
               kept: int = 0):
    super().__init__(daemon=True)
    self.dataset_dir = dataset_dir
    self.kept = kept  # a resume's finished shards, found before it ran
    self.stream = stream or sys.stderr
    self.tty = hasattr(self.stream, 'isatty') and self.stream.isatty()
    self.interval = interval or (0.5 if self.tty else 3.0)
    self._finished = threading.Event()
    self.lines = 0

  def run(self):
    start = time.monotonic()
    plan, write_started = None, None
    kept_bytes = _bytes_written(self.dataset_dir) if self.kept else 0
    while not self._finished.wait(self.interval):
      now = time.monotonic()
      plan = plan or _read_plan(self.dataset_dir)
      written = _bytes_written(self.dataset_dir) if plan else 0
      if written > kept_bytes and write_started is None:
        write_started = now - self.interval / 2
      line = status_line(plan, written, now - start, write_started, now,
                         width=20 if self.tty else 0, kept=self.kept,
                         kept_bytes=kept_bytes)
      if self.tty:
        self.stream.write('\r' + line[:200] + '\x1b[K')
      else:
        self.stream.write(line + '\n')
      self.stream.flush()
      self.lines += 1

  def __enter__(self):
    self.start()
    return self

  def __exit__(self, *exc):
    self._finished.set()
    self.join()
    if self.tty and self.lines:
      self.stream.write('\n')
