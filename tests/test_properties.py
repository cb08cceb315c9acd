"""Property tests (hypothesis) of the windowing and shard-assignment math,
against brute-force references written as plainly as possible."""

import collections

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from transforms.inputs import audio
from transforms.planning import layout as layout_lib
from transforms.planning import rules as plan_lib
from transforms.inputs.audio_io import WavInfo


def brute_force_starts(frames, win_len, hop_len, pad):
  """Window starts by walking the signal one hop at a time."""
  starts = []
  start = 0
  while start < frames:
    if start + win_len <= frames:
      starts.append(start)
    else:
      covered = starts and starts[-1] + win_len >= frames
      if pad and not covered:
        starts.append(start)
      break
    start += hop_len
  return starts


# Small sizes: edge cases (a signal ending exactly at a hop, a hop longer
# than the window) are dense there.
windowing = dict(frames=st.integers(0, 300), win_len=st.integers(1, 48),
                 hop_len=st.integers(1, 64), pad=st.booleans())


@settings(max_examples=400, deadline=None)
@given(**windowing)
def test_window_count_and_windows_match_brute_force(frames, win_len, hop_len,
                                                    pad):
  starts = brute_force_starts(frames, win_len, hop_len, pad)
  assert audio.window_count(frames, win_len, hop_len, pad) == len(starts)
  samples = np.arange(1, frames + 1, dtype=np.float64)
  windows = audio.slice_windows(samples, np.array(starts, np.int64), win_len)
  assert windows.shape == (len(starts), win_len)
  for row, start in zip(windows, starts):
    expected = np.zeros(win_len)
    part = samples[start:start + win_len]
    expected[:len(part)] = part
    assert np.array_equal(row, expected)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), **windowing)
def test_chunks_read_separately_join_to_the_whole(data, frames, win_len,
                                                  hop_len, pad):
  """Any cut of a file's windows into chunks reads exactly the windows of
  the whole file, each from its own input range."""
  n = audio.window_count(frames, win_len, hop_len, pad)
  if n == 0:
    return
  info = WavInfo(0, 'x.wav', frames, 16000, 1, 'PCM_16')
  plan = plan_lib.FilePlan(info, 'train', 'c', 16000, frames, n)
  cuts = sorted(data.draw(st.sets(st.integers(1, max(1, n - 1)),
                                  max_size=5)) if n > 1 else set())
  bounds = [0, *cuts, n]
  samples = np.arange(1, frames + 1, dtype=np.float64)
  whole = audio.slice_windows(samples, np.arange(n) * hop_len, win_len)
  for first, stop in zip(bounds, bounds[1:]):
    chunk = plan_lib.Chunk(plan, first, stop - first)
    start, end = plan_lib.chunk_input_range(chunk, win_len, hop_len)
    assert 0 <= start <= end <= frames
    relative = np.arange(first, stop) * hop_len - start
    got = audio.slice_windows(samples[start:end], relative, win_len)
    assert np.array_equal(got, whole[first:stop])


shard_options = st.one_of(
    st.fixed_dictionaries({'num_shards': st.integers(1, 40)}),
    st.fixed_dictionaries({'max_examples_per_shard': st.integers(1, 500)}),
    st.fixed_dictionaries({'max_shard_bytes': st.integers(1, 10_000),
                           'example_bytes': st.integers(1, 300)}))


def _plans(files, block_files):
  """{block: FilePlans} of files [(split, windows)] dealt into blocks of
  consecutive indices; a file without windows keeps its index and has no
  plan, as a rejected file."""
  blocks = {}
  for index, (split, n) in enumerate(files):
    plans = blocks.setdefault(index // block_files, [])
    if n:
      info = WavInfo(index, f'{index}.wav', n, 16000, 1, 'PCM_16')
      plans.append(plan_lib.FilePlan(info, split, 'c', 16000, n, n))
  return blocks


@settings(max_examples=300, deadline=None)
@given(files=st.lists(st.tuples(st.sampled_from(['train', 'test']),
                                st.integers(0, 300)), max_size=25),
       block_files=st.integers(1, 6), options=shard_options,
       shuffle=st.booleans(), seed=st.integers(0, 2**63 - 1))
def test_every_window_is_written_exactly_once(files, block_files, options,
                                              shuffle, seed):
  blocks = _plans(files, block_files)
  entries = [entry for block, plans in blocks.items()
             for entry in plan_lib.PlannedBlock(block, tuple(plans)).counts()]
  layouts = layout_lib.compute_layouts(entries, **options)
  shards = collections.defaultdict(list)
  for block, plans in sorted(blocks.items()):
    refs = list(layout_lib.block_refs(block, plans, layouts, shuffle=shuffle,
                                      seed=seed))
    # Deterministic: the same refs, in the same order, every time.
    assert refs == list(layout_lib.block_refs(block, plans, layouts,
                                              shuffle=shuffle, seed=seed))
    for key, (plan, window, sort_key) in refs:
      shards[key].append((plan.info.index, window, sort_key))
  for split in {s for s, n in files if n}:
    expected = {(i, w) for i, (s, n) in enumerate(files) if s == split
                for w in range(n)}
    refs = [r for (s, _), rs in shards.items() if s == split for r in rs]
    written = [(i, w) for i, w, _ in refs]
    assert len(written) == len(set(written)) and set(written) == expected
    total = len(expected)
    layout = layouts[split]
    assert sorted(k for _, _, k in refs) == list(range(total))
    # Positions are those of a file-by-file numbering of the split.
    positions = {(i, w): p for p, (i, w) in enumerate(sorted(expected))}
    order = sorted(refs)
    numbered = np.array([positions[(i, w)] for i, w, _ in order], np.int64)
    if shuffle:
      numbered = layout_lib.permute(numbered, total, seed)
    assert numbered.tolist() == [k for _, _, k in order]
    assert {s for sp, s in shards if sp == split} <= set(
        range(layout.num_shards))
    sizes = [len(shards[(split, s)]) for s in range(layout.num_shards)]
    assert sum(sizes) == total and max(sizes) - min(sizes) <= 1
    assert all(k for k in sizes)
    if not shuffle:   # input order: shard s holds a run of windows
      for s in range(layout.num_shards):
        keys = sorted(k for _, _, k in shards[(split, s)])
        assert keys == list(range(keys[0], keys[0] + len(keys)))


@settings(max_examples=300, deadline=None)
@given(total=st.integers(1, 5000), seed=st.integers(0, 2**64 - 1))
def test_permute_is_a_bijection(total, seed):
  out = layout_lib.permute(np.arange(total), total, seed)
  assert sorted(out.tolist()) == list(range(total))
