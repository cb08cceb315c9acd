"""From probed files to work units: which windows each chunk computes.

A chunk is a frame range of one file holding a bounded number of windows, so
a long recording is shared by several workers and memory per worker is
bounded whatever the file length.
"""

import bisect
import dataclasses
from typing import Dict, Iterable, List, Optional, Tuple

from pipeline.config import PipelineConfig
from pipeline.contract import naming
from transforms.inputs import audio
from transforms.inputs import labels
from transforms.inputs import splits
from transforms.inputs.file_reports import BadWav, WavInfo
from transforms.inputs import patterns

# Input samples (frames x channels) a chunk reads: 8 MB as float64, about
# 65 s of 16 kHz mono. Bounds a worker's memory whatever the file.
CHUNK_SAMPLES = 1 << 20


@dataclasses.dataclass(frozen=True)
class Span:
  """A time-stamped segment of a recording, planned: frames [start, stop)
  at the dataset's rate, the examples cut from it (one under
  --example_unit segment, its windows under window), and its own class,
  extra columns and channel (None: --channels mixes them)."""
  start: int
  stop: int
  num_windows: int
  label: str
  extras: Tuple[Tuple[str, object], ...] = ()
  channel: Optional[int] = None
  split: Optional[str] = None  # --split_unit segment: its own split


@dataclasses.dataclass(frozen=True)
class FilePlan:
  info: WavInfo
  split: str
  label: str
  sample_rate: int   # the dataset's rate: windows are cut at this rate
  frames: int        # length at the dataset's rate
  num_windows: int
  # --manifest_extra_columns: (column, value) stored in every example.
  extras: Tuple[Tuple[str, object], ...] = ()
  silence: bool = False   # a --silence_from recording
  # With segments: the recording's usable ones, its windows numbered
  # through them in order; each one's first window.
  spans: Tuple[Span, ...] = ()
  span_firsts: Tuple[int, ...] = ()
  # --augment: 0 for the recording itself, else its copy's number (1 for
  # the first copy --augment names); a copy with speed= plans the file at
  # the rate that plays it that much faster (info.sample_rate).
  copy: int = 0

  def locate(self, window: int) -> Tuple[Optional[Span], int]:
    """(the span holding example `window`, its place in the span); (None,
    window) for a recording without segments."""
    if not self.spans:
      return None, window
    i = bisect.bisect_right(self.span_firsts, window) - 1
    return self.spans[i], window - self.span_firsts[i]

  @property
  def key(self) -> Tuple[int, int]:
    """What tells its windows' plans apart in a task: the file index, and
    the first window of the spans it carries (span_plans)."""
    return (self.info.index, self.span_firsts[0] if self.span_firsts else 0,
            self.copy)

  @property
  def example_frames(self) -> int:
    """Frames its examples are cut from, as shards sized by bytes
    estimate variable-length examples: its segments', or the
    recording's."""
    if self.spans:
      return sum(s.stop - s.start for s in self.spans)
    return self.frames


@dataclasses.dataclass(frozen=True)
class PlannedBlock:
  """The planned files of one block, in index order."""
  block: int
  plans: Tuple[FilePlan, ...]

  def windows_by_split(self) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for p in self.plans:
      out[p.split] = out.get(p.split, 0) + p.num_windows
    return out

  def files_by_split(self) -> Dict[str, int]:
    """Recordings with examples in each split (its --augment copies
    with it): under --split_unit segment, one recording may count in
    several."""
    out: Dict[str, set] = {}
    for p in self.plans:
      out.setdefault(p.split, set()).add(p.info.index)
    return {split: len(found) for split, found in out.items()}

  def num_files(self) -> int:
    """Recordings planned, each once whatever its splits and copies."""
    return len({p.info.index for p in self.plans})

  def split_overlap(self) -> Tuple[Tuple[str, str, int, int], ...]:
    """(split a, split b, recordings in both, frames in both) per pair of
    splits sharing a recording (--split_unit segment): frames, at the
    dataset's rate, that segments of both splits cover."""
    by_file: Dict[int, List[FilePlan]] = {}
    for p in self.plans:
      if p.copy == 0:  # a copy shares its recording's splits
        by_file.setdefault(p.info.index, []).append(p)
    out: Dict[Tuple[str, str], List[int]] = {}
    for plans in by_file.values():
      for i, a in enumerate(plans):
        for b in plans[i + 1:]:
          pair = tuple(sorted((a.split, b.split)))
          total = out.setdefault(pair, [0, 0])
          total[0] += 1
          total[1] += _covered_by_both(a.spans, b.spans)
    return tuple((a, b, n, frames) for (a, b), (n, frames)
                 in sorted(out.items()))

  def frames_by_split(self) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for p in self.plans:
      out[p.split] = out.get(p.split, 0) + p.example_frames
    return out

  def counts(self) -> Tuple[Tuple[str, int, int, int, int], ...]:
    """(split, block, windows, files, frames) per split: the layout's
    entries (frames at the dataset's rate size the examples of
    --example_unit file)."""
    files, frames = self.files_by_split(), self.frames_by_split()
    return tuple((split, self.block, windows, files[split], frames[split])
                 for split, windows in sorted(self.windows_by_split().items()))

  def silence_windows(self) -> Tuple[Tuple[int, int], ...]:
    """(file index, windows) of its --silence_from recordings."""
    return tuple((p.info.index, p.num_windows) for p in self.plans
                 if p.silence)

  def windows(self) -> 'BlockWindows':
    return BlockWindows(self.block, self.counts(), self.silence_windows())


@dataclasses.dataclass(frozen=True)
class BlockWindows:
  """A block's planned windows: (split, block, windows, files, frames)
  per split, the layout's entries; and (file index, windows) of its
  --silence_from recordings, for --silence_windows."""
  block: int
  counts: Tuple[Tuple[str, int, int, int, int], ...]
  silence: Tuple[Tuple[int, int], ...] = ()

  @property
  def num_windows(self) -> int:
    return sum(entry[2] for entry in self.counts)


def _covered_by_both(spans_a, spans_b) -> int:
  """Frames covered by a span of `spans_a` and by one of `spans_b`."""
  return _length(_intersect(_union(spans_a), _union(spans_b)))


def _union(spans) -> List[Tuple[int, int]]:
  out: List[List[int]] = []
  for start, stop in sorted((s.start, s.stop) for s in spans):
    if out and start <= out[-1][1]:
      out[-1][1] = max(out[-1][1], stop)
    else:
      out.append([start, stop])
  return [tuple(r) for r in out]


def _intersect(a, b) -> List[Tuple[int, int]]:
  out, i, j = [], 0, 0
  while i < len(a) and j < len(b):
    start, stop = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
    if start < stop:
      out.append((start, stop))
    if a[i][1] < b[j][1]:
      i += 1
    else:
      j += 1
  return out


def _length(ranges) -> int:
  return sum(stop - start for start, stop in ranges)


def window_plans(plan: FilePlan) -> Iterable[Tuple[FilePlan, int]]:
  """(plan, window) for each of a recording's windows, in order. With
  segments, each window's plan carries its one span only: a reference
  travels with its plan, and a recording of thousands of segments would
  otherwise send them all with every window. Windows are numbered through
  all of a recording's segments, so a plan holding one split's segments
  (--split_unit segment) numbers them as the whole recording does."""
  if not plan.spans:
    for window in range(plan.num_windows):
      yield plan, window
    return
  left = plan.num_windows  # --num_elems may stop inside a span
  for span, first in zip(plan.spans, plan.span_firsts):
    own = dataclasses.replace(plan, spans=(span,), span_firsts=(first,))
    for window in range(first, first + min(span.num_windows, left)):
      yield own, window
    left -= min(span.num_windows, left)
    if not left:
      return


def plan_block(block: int, infos: Iterable[WavInfo], config: PipelineConfig,
               dataset_rate: int, entries=None, segments_rejected=None,
               notes=None) -> Tuple[PlannedBlock, List[Tuple[str, str]]]:
  """(PlannedBlock of the files that become windows, [(path, reason)] for
  the others). `entries`: the files' manifest rows, by index;
  `segments_rejected`: a list that gets (path, reason, frame range) of
  each segment of a planned file that cannot be used; `notes`: a list
  that gets (path, remark) of each --augment copy of a planned file that
  cannot be made."""
  plans, rejected = [], []
  entries = entries or {}
  for info in infos:
    segments = []
    try:
      own = plan_file(info, config, dataset_rate, entries.get(info.index),
                      segments)
    except BadWav as e:
      rejected.append((info.path, str(e)))
      own = None
    if own is not None:
      plans.extend(split_plans(own))
      for number, copy in enumerate(config.augment_copies, 1):
        try:
          plans.extend(split_plans(copy_plan(
              own, number, copy, info, config, dataset_rate,
              entries.get(info.index), segments)))
        except BadWav as e:
          if notes is not None:
            notes.append((info.path, f'no copy {_copy_text(copy)}: {e}'))
    if segments_rejected is not None:
      segments_rejected.extend(segments)
  return PlannedBlock(block, tuple(plans)), rejected


def _copy_text(copy) -> str:
  return '+'.join(e.text() for e in copy)


def copy_plan(plan: FilePlan, number: int, copy, info: WavInfo,
              config: PipelineConfig, dataset_rate: int, entry,
              segments_rejected: list) -> FilePlan:
  """The plan of --augment copy `number` of a planned recording: the
  recording's own, or with speed= the file planned at the rate that plays
  it that much faster (sox's speed: tempo and pitch), its segments' times
  scaled to match. BadWav when the copy has no example (too short once
  sped up)."""
  speed = next((e.low for e in copy if e.name == 'speed'), None)
  if speed is None:
    return dataclasses.replace(plan, copy=number)
  faster = dataclasses.replace(
      info, sample_rate=max(1, round(info.sample_rate * speed)))
  scale = info.sample_rate / faster.sample_rate
  if entry is not None:
    entry = dataclasses.replace(entry, sample_rate=None, segments=tuple(
        dataclasses.replace(
            g, start=g.start * scale,
            end=None if g.end is None else g.end * scale,
            duration=None if g.duration is None else g.duration * scale)
        for g in entry.segments))
  own: list = []
  planned = plan_file(faster, config, dataset_rate, entry, own)
  segments_rejected.extend((path, f'copy {_copy_text(copy)}: {reason}',
                            frames) for path, reason, frames in own)
  return dataclasses.replace(planned, copy=number)


def split_plans(plan: FilePlan) -> List[FilePlan]:
  """The plan, or under --split_unit segment one plan per split its
  segments go to (in the order of their first segment), each holding its
  split's spans with their windows numbered as in the whole recording."""
  if not plan.spans or plan.spans[0].split is None:
    return [plan]
  by_split: Dict[str, List[Tuple[Span, int]]] = {}
  for span, first in zip(plan.spans, plan.span_firsts):
    by_split.setdefault(span.split, []).append((span, first))
  return [dataclasses.replace(
      plan, split=split, spans=tuple(s for s, _ in own),
      span_firsts=tuple(f for _, f in own),
      num_windows=sum(s.num_windows for s, _ in own))
          for split, own in by_split.items()]


@dataclasses.dataclass(frozen=True)
class Chunk:
  plan: FilePlan
  first_window: int   # of the recording, or of `span` when given
  num_windows: int
  span: Optional[Span] = None

  @property
  def origin(self) -> int:
    """Where window 0 starts: the recording's start, or the span's."""
    return self.span.start if self.span is not None else 0

  @property
  def limit(self) -> int:
    """Where the audio its windows may hold ends (zeros follow)."""
    return self.span.stop if self.span is not None else self.plan.frames

  @property
  def channel(self) -> Optional[int]:
    return self.span.channel if self.span is not None else None


def most_common_rate(rate_counts: Dict[int, int]) -> int:
  """The dataset's rate when none is given: most files, ties to the lower."""
  if not rate_counts:
    return 0
  return min(rate_counts, key=lambda r: (-rate_counts[r], r))


def plan_file(info: WavInfo, config: PipelineConfig, dataset_rate: int,
              entry=None, segments_rejected=None) -> FilePlan:
  """Checks a probed file against the dataset's rules, with its manifest
  row (a manifest.Entry) when the run has one; raises BadWav. With
  segments, a segment that cannot be used is appended to
  `segments_rejected` as (path, reason, frame range in the file), and the
  file is rejected when none can."""
  rel_path = patterns.relative_path(info.path, config.input_dir)
  if entry is not None and entry.split is not None:
    split = entry.split
  elif config.split_lists:  # dealt with the listing (listing.list_input)
    raise RuntimeError(f'{info.path}: planned without its split list row')
  elif config.split_from == 'subdir':
    split = splits.split_from_folder(rel_path)
    if split is None:
      raise BadWav('no split: --split_from=subdir needs the file inside a '
                   'split folder (DIR/SPLIT/...)')
    if not naming.is_split_name(split):
      raise BadWav(f'no split: its folder {split!r} is not a split name '
                   f'(--split_from=subdir; use {naming.SPLIT_NAME_RULE} '
                   'only)')
  else:
    split = splits.split_by_hash(rel_path, config.splits)
  silence = labels.is_silence(info.path, config)
  label = (config.silence_label if silence else labels.renamed(
      labels.corpus_label(info.path, config, entry), config.label_map))
  per_segment = config.has_segments and config.manifest_label_column
  if config.manifest_label_column and not label and not per_segment:
    raise BadWav(f'no label: the manifest row (line {entry.line}) has an '
                 f'empty {config.manifest_label_column!r}')
  if config.label_from != 'none' and not label and not per_segment:
    raise BadWav(f'no label: --label_from={config.label_from} finds no class '
                 'in this path')
  if label:
    check_class_name(label, 'its')
  if config.sample_rate is None and info.sample_rate != dataset_rate:
    raise BadWav(f'sample rate {info.sample_rate} Hz differs from the '
                 f"dataset's {dataset_rate} Hz (pass --sample_rate to "
                 'resample instead)')
  if entry is not None and entry.sample_rate is not None:
    check_manifest_file(info, entry)
  if config.has_segments:
    frames = audio.resampled_length(info.frames, info.sample_rate,
                                    dataset_rate)
    spans = plan_spans(info, config, dataset_rate, entry, frames, silence,
                       segments_rejected)
    firsts, n = [], 0
    for span in spans:
      firsts.append(n)
      n += span.num_windows
    return FilePlan(info, split, label, dataset_rate, frames, n, (),
                    silence, spans, tuple(firsts))
  frames, n = file_windows(info, config, dataset_rate)
  return FilePlan(info, split, label, dataset_rate, frames, n,
                  entry.extras if entry is not None else (), silence)


def check_manifest_file(info: WavInfo, entry) -> None:
  """BadWav when the file is not the one a Lhotse recording describes."""
  said = (entry.sample_rate, entry.num_samples, entry.channels)
  found = (info.sample_rate, info.frames, info.channels)
  if said != found:
    raise BadWav(f'the manifest (line {entry.line}) describes it as '
                 f'{said[1]} frames of {said[2]} channel(s) at {said[0]} Hz, '
                 f'the file holds {found[1]} of {found[2]} at {found[0]} Hz')


def plan_spans(info: WavInfo, config: PipelineConfig, dataset_rate: int,
               entry, frames: int, silence: bool,
               rejected: Optional[list]) -> Tuple[Span, ...]:
  """The usable segments of a recording, as Spans; each other segment is
  appended to `rejected` with its reason. BadWav when none is usable."""
  if entry is None or not entry.segments:
    raise BadWav('no segment: the manifest gives none for this recording')
  spans = []
  rejected = [] if rejected is None else rejected
  seconds = frames / dataset_rate
  for segment in entry.segments:
    start, stop = segment.frames(dataset_rate)
    own = segment.frames(info.sample_rate)
    try:
      if stop > frames:
        raise BadWav(f'segment of line {segment.line} ends at '
                     f'{stop / dataset_rate:.6f} s, after the recording '
                     f'({seconds:.6f} s)')
      if stop <= start:
        raise BadWav(f'segment of line {segment.line} holds no frame at '
                     f'{dataset_rate} Hz')
      if segment.channel is not None and segment.channel >= info.channels:
        raise BadWav(f'segment of line {segment.line} is on channel '
                     f'{segment.channel}, and the file has '
                     f'{info.channels}')
      label = (config.silence_label if silence else labels.renamed(
          labels.corpus_label(info.path, config, entry, segment),
          config.label_map))
      if config.manifest_label_column and not label:
        raise BadWav(f'no label: the segment of line {segment.line} has an '
                     f'empty {config.manifest_label_column!r}')
      if label:
        check_class_name(label, f'the segment of line {segment.line}:')
      if config.example_unit == 'segment':
        try:
          n = file_example(stop - start, config, dataset_rate)
        except BadWav as e:
          raise BadWav(f'segment of line {segment.line} {e}') from e
      else:
        n = segment_windows(stop - start, config, dataset_rate, segment)
    except BadWav as e:
      rejected.append((info.path, str(e), own))
      continue
    spans.append(Span(start, stop, n, label, segment.extras,
                      segment.channel, segment.split))
  if not spans:
    raise BadWav(f'no usable segment: all {len(entry.segments)} are '
                 'rejected, each with its reason')
  return tuple(spans)


def check_class_name(label: str, whose: str) -> None:
  """BadWav unless `label` can be a class of the dataset."""
  if not naming.is_class_name(label):
    raise BadWav(f'no label: {whose} class {label!r} is not a class name '
                 f'({naming.CLASS_NAME_RULE})')


def segment_windows(frames: int, config: PipelineConfig, dataset_rate: int,
                    segment) -> int:
  """Windows cut inside a segment of `frames`; BadWav when too short."""
  n = audio.window_count(frames, config.win_len, config.hop_len, config.pad)
  if n == 0:
    raise BadWav(f'segment of line {segment.line} too short: {frames} '
                 f'frames at {dataset_rate} Hz, a window needs '
                 f'{config.win_len}')
  if config.max_windows_per_signal is not None:
    n = min(n, config.max_windows_per_signal)
  return n


def file_windows(info: WavInfo, config: PipelineConfig,
                 dataset_rate: int) -> Tuple[int, int]:
  """(frames at the dataset's rate, windows kept) of a recording; raises
  BadWav when it is too short for a window."""
  frames = audio.resampled_length(info.frames, info.sample_rate, dataset_rate)
  if config.example_unit == 'file':
    return frames, file_example(frames, config, dataset_rate)
  n = audio.window_count(frames, config.win_len, config.hop_len, config.pad)
  if n == 0:
    raise BadWav(f'too short: {frames} frames at {dataset_rate} Hz, a window '
                 f'needs {config.win_len}')
  if config.max_windows_per_signal is not None:
    n = min(n, config.max_windows_per_signal)
  return frames, n


def file_example(frames: int, config: PipelineConfig,
                 dataset_rate: int) -> int:
  """1, the one example of a whole recording (--example_unit file) or
  segment; raises BadWav when its length is outside --min_seconds and
  --max_seconds, or too short for one STFT frame."""
  seconds = frames / dataset_rate
  if frames > config.max_seconds * dataset_rate:
    raise BadWav(f'too long: {seconds:.3f} s ({frames} frames at '
                 f'{dataset_rate} Hz), over --max_seconds='
                 f'{config.max_seconds:g}')
  if frames < config.min_seconds * dataset_rate:
    raise BadWav(f'too short: {seconds:.3f} s ({frames} frames at '
                 f'{dataset_rate} Hz), under --min_seconds='
                 f'{config.min_seconds:g}')
  if frames == 0:
    raise BadWav('empty: no frames to make an example of')
  need = config.min_samples(dataset_rate)
  if frames < need.samples:
    raise BadWav(f'too short: {frames} frames at {dataset_rate} Hz, '
                 f'{need.why}')
  return 1


def planning_options(config: PipelineConfig) -> tuple:
  """The feature options that decide which recordings (and segments) a
  run keeps: two configs alike in these and in every other option plan
  the same examples. Under --example_unit file or segment an example
  must hold what its features need (registry.min_samples: one STFT frame,
  one Kaldi frame); a window always does (--win_len is checked against
  it with the options, or once the dataset's rate is known)."""
  return config.planning_key() if config.variable_length else ()


def limit_windows(counts: Iterable[Tuple[int, int]],
                  num_elems: int) -> Dict[int, int]:
  """{unit: windows kept} taking windows in unit order up to num_elems
  (units: file indices, or blocks of them)."""
  allowed, left = {}, num_elems
  for index, n in sorted(dict(counts).items()):
    allowed[index] = min(n, left)
    left -= allowed[index]
  return allowed


def limit_block(block: PlannedBlock, allowed: int) -> PlannedBlock:
  """The block with its first `allowed` windows, in file order; files left
  with none are dropped."""
  plans = []
  for plan, n in zip(block.plans, limit_windows(
      [(i, p.num_windows) for i, p in enumerate(block.plans)],
      allowed).values()):
    if n > 0:
      plans.append(dataclasses.replace(plan, num_windows=n))
  return PlannedBlock(block.block, tuple(plans))


def share_windows(counts: Dict[int, int], total: int) -> Dict[int, int]:
  """{recording: windows kept} of at most `total` windows, shared as evenly
  as the recordings' `counts` allow: a recording with fewer windows than
  its share keeps them all and the others share the rest; what does not
  divide evenly goes one window each to the first recordings, in key
  order. Depends on the counts only, so every run agrees."""
  kept, left = {}, total
  pending = sorted(counts, key=lambda k: (counts[k], k))
  while pending and counts[pending[0]] <= left // len(pending):
    kept[pending[0]] = counts[pending[0]]
    left -= counts[pending.pop(0)]
  if pending:
    share, extra = divmod(left, len(pending))
    for i, key in enumerate(sorted(pending)):
      kept[key] = share + (i < extra)
  return kept


@dataclasses.dataclass(frozen=True)
class Allowance:
  """The windows a run keeps when options limit them: `silence` {file
  index: windows} of the --silence_from recordings (--silence_windows),
  then `blocks` {block: windows} in file order (--num_elems). None: no
  limit of that kind."""
  silence: Optional[Dict[int, int]] = None
  blocks: Optional[Dict[int, int]] = None

  def limit(self, block: PlannedBlock) -> PlannedBlock:
    if self.silence is not None:
      plans = []
      for plan in block.plans:
        if plan.silence:
          plan = dataclasses.replace(plan, num_windows=min(
              plan.num_windows, self.silence.get(plan.info.index, 0)))
        if plan.num_windows > 0:
          plans.append(plan)
      block = PlannedBlock(block.block, tuple(plans))
    if self.blocks is not None:
      block = limit_block(block, self.blocks[block.block])
    return block


def allowance(windows: Iterable[BlockWindows],
              num_elems: Optional[int] = None,
              silence_windows: Optional[int] = None) -> Allowance:
  """The Allowance of a run from every block's planned windows: the
  --silence_windows cap first (share_windows), then --num_elems over the
  windows left, in block order."""
  windows = list(windows)
  silence = None
  if silence_windows is not None:
    silence = share_windows({index: n for b in windows
                             for index, n in b.silence}, silence_windows)
  blocks = None
  if num_elems is not None:
    per_block = []
    for b in windows:
      n = b.num_windows
      if silence is not None:
        n -= sum(count - silence[index] for index, count in b.silence)
      per_block.append((b.block, n))
    blocks = limit_windows(per_block, num_elems)
  return Allowance(silence, blocks)


def windows_per_chunk(plan: FilePlan, hop_len: int) -> int:
  """Windows whose input fits in CHUNK_SAMPLES (at least one)."""
  up, down = audio.resample_ratio(plan.info.sample_rate, plan.sample_rate)
  input_samples_per_hop = -(-hop_len * down // up) * plan.info.channels
  return max(1, CHUNK_SAMPLES // input_samples_per_hop)


def chunk_input_range(chunk: Chunk, win_len: int,
                      hop_len: int) -> Tuple[int, int]:
  """Input frames [start, stop) a chunk needs, resampling context included."""
  plan = chunk.plan
  out_start = chunk.origin + chunk.first_window * hop_len
  out_stop = min(chunk.limit, chunk.origin +
                 (chunk.first_window + chunk.num_windows - 1) * hop_len +
                 win_len)
  rate_in, rate_out = plan.info.sample_rate, plan.sample_rate
  if rate_in == rate_out:
    return out_start, out_stop
  return audio.resample_input_range(plan.info.frames, rate_in, rate_out,
                                    out_start, out_stop)
