"""How a sweep cuts its windows into segment tasks (sweep_writer): where
segments start, which of each variant's shards a segment holds, and a
segment task's files, which joined in key order are the shards a separate
writer of each variant writes."""

import os

import pytest

from pipeline.contract import naming
from tests import helpers as H
from transforms.inputs import audio_io
from transforms.planning.layout import SplitLayout
from transforms.planning.rules import plan_file
from transforms.writing import shard_writer
from transforms.writing import sweep_writer
from transforms.writing.extract import ExampleMaker, read_batches
from transforms.writing.stats import ExampleStats, ShardStats


def _layouts(total, **shard_counts):
  return {variant: {'train': SplitLayout('train', total, n, {})}
          for variant, n in shard_counts.items()}


def test_without_a_segment_count_every_shard_start_starts_a_segment():
  layouts = _layouts(6930, mel128=3, mel64=2, mfcc=2)
  assert sweep_writer.segment_bounds(layouts) == {
      'train': [0, 2310, 3465, 4620, 6930]}


def test_segments_are_cut_at_shard_starts_near_equal_shares():
  layouts = _layouts(6930, mel128=3, mel64=2, mfcc=2)
  # One cut, where two of the three variants' shards start: only the
  # middle shard of mel128 is written in two pieces.
  assert sweep_writer.segment_bounds(layouts, 2) == {
      'train': [0, 3465, 6930]}
  assert sweep_writer.segment_bounds(layouts, 3) == {
      'train': [0, 2310, 4620, 6930]}


def test_where_no_shard_starts_near_a_share_the_cut_is_made_inside_shards():
  # Shards that start apart: each segment cuts them, so that every
  # worker has a share; the cut shards are joined from their pieces.
  assert sweep_writer.segment_bounds(_layouts(12, a=1, b=2), 4) == {
      'train': [0, 3, 6, 9, 12]}
  # a's shards start at 34 and 67: 16 keys from the middle, past an
  # eighth of a share (6.25).
  assert sweep_writer.segment_bounds(_layouts(100, a=3, b=1), 2) == {
      'train': [0, 50, 100]}
  # Shards of 11-12 keys: the start 5 keys away (45) is taken, 7 keys
  # away (43 and 58, a seventh of a share) is too far.
  assert sweep_writer.segment_bounds(_layouts(100, a=9, b=1), 2) == {
      'train': [0, 45, 100]}
  assert sweep_writer.segment_bounds(_layouts(100, a=7, b=1), 2) == {
      'train': [0, 50, 100]}
  # A split of no window has nothing to cut.
  assert sweep_writer._cuts({0: 2}, 0, 2, 2) == [0]


def test_one_layout_is_cut_at_every_shard_start_and_on_its_batch_grid():
  batch = sweep_writer.BATCH_WINDOWS
  # A single run's layout: every shard start cuts nothing, so each is a
  # segment's; shares' ends near one add no other cut.
  assert sweep_writer.segment_bounds(_layouts(1000, a=10), 2) == {
      'train': list(range(0, 1001, 100))}
  # One shard: cut inside it, a whole number of batches from its start
  # (500 -> 16 batches), so that its pieces compute the batches it does.
  assert sweep_writer.segment_bounds(_layouts(1000, a=1), 2) == {
      'train': [0, 16 * batch, 1000]}
  # Three shards on two workers: the middle one (334-667) is cut near the
  # middle of the split, on its own grid (334 + 5 batches).
  assert sweep_writer.segment_bounds(_layouts(1000, a=3), 2) == {
      'train': [0, 334, 334 + 5 * batch, 667, 1000]}
  # Shards shorter than a batch are not cut: the cut falls on a start.
  assert sweep_writer.segment_bounds(_layouts(40, a=2), 4) == {
      'train': [0, 20, 40]}
  # Variants whose shards all start alike are cut as one is: on their
  # common grid, so that a model computes the batches of a separate run.
  assert sweep_writer.segment_bounds(_layouts(1000, a=1, b=1), 2) == {
      'train': [0, 16 * batch, 1000]}
  assert sweep_writer.segment_bounds(_layouts(12, a=1, b=1), 4) == {
      'train': [0, 12]}
  # Where every variant's shard starts, a sweep cuts too.
  assert sweep_writer.segment_bounds(_layouts(1000, a=4, b=2), 2) == {
      'train': [0, 500, 1000]}
  # Thirds end at 400 and 800, inside shards; both start at 600.
  assert sweep_writer.segment_bounds(_layouts(1200, a=4, b=2), 3) == {
      'train': [0, 400, 600, 800, 1200]}


def test_a_cut_a_little_farther_that_fewer_shards_cross_is_preferred():
  # a: a shard start every 10 keys, 500 among them; b and c: 21 shards,
  # starts at 477 and 524. 477 cuts only a shard of a; 500, one of b and
  # one of c. (All three start shards at 620 and 810: cuts too.)
  layouts = _layouts(1000, a=100, b=21, c=21)
  assert sweep_writer.segment_bounds(layouts, 2) == {
      'train': [0, 477, 620, 810, 1000]}
  # Past a sixteenth of a share away, the nearest start is taken.
  layouts = _layouts(1000, a=100, b=9, c=9)  # b, c: 445, 556
  assert sweep_writer.segment_bounds(layouts, 2) == {'train': [0, 500, 1000]}


def test_a_segment_holds_each_variant_s_shards_whole_or_a_part():
  layouts = _layouts(12, a=3, b=2)  # a: 0 4 8 12; b: 0 6 12
  targets = sweep_writer.targets(layouts, 'train', (2, 12), [0, 2, 12])
  assert [(t.variant, t.shard, t.keys, t.whole(), t.pieces)
          for t in targets] == [
      ('a', 0, (2, 4), False, (0, 2)), ('a', 1, (4, 8), True, ()),
      ('a', 2, (8, 12), True, ()), ('b', 0, (2, 6), False, (0, 2)),
      ('b', 1, (6, 12), True, ())]


@pytest.fixture
def two_variants(tmp_path):
  """Two variants (examples of other sizes) of one corpus: their
  configs, and window refs (plan, window, key) of 14 windows; key 6's
  window holds a NaN."""
  configs, refs = {}, []
  for variant, features in (('sig', ('signal',)),
                            ('spec', ('signal', 'spectrogram'))):
    out = tmp_path / variant
    os.makedirs(out / naming.TEMP_DIR)
    configs[variant] = H.make_config(tmp_path / 'in', out, win_len=1024,
                                     hop_len=1024, features=features)
  config = configs['sig']
  for index, length in enumerate((5 * 1024, 9 * 1024)):
    samples = H.noise(length, seed=index)
    samples[1500 * index] = float('nan')  # file 1's window 1
    path = H.write_wav(str(tmp_path / 'in' / 'owl' / f'{index}.wav'),
                       samples, subtype='FLOAT' if index else 'PCM_16')
    plan = plan_file(audio_io.probe(index, path)[0], config, 16000)
    refs += [(plan, w, len(refs) + w) for w in range(plan.num_windows)]
  assert len(refs) == 14
  return configs, refs


def _alone(config, split_refs, shard):
  """A shard as one writer writes it from its refs (a separate run's
  shard task)."""
  maker = ExampleMaker(config)
  with shard_writer.ShardFile(config, None, 'train', shard, 0) as out:
    for batch in read_batches(config, 'train', split_refs):
      if not isinstance(batch, audio_io.Rejection):
        for record in maker.encode(ExampleStats(), batch, ['owl']):
          out.write(record)
  with open(out.stats.path, 'rb') as f:
    return f.read()


def test_segment_tasks_write_whole_shards_and_pieces_that_join_into_them(
    two_variants):
  configs, refs = two_variants
  layouts = _layouts(14, sig=3, spec=4)  # sig: 0 5 10; spec: 0 4 7 11
  bounds = sweep_writer.segment_bounds(layouts, 2)['train']
  assert bounds == [0, 7, 14]
  makers = {v: ExampleMaker(c) for v, c in configs.items()}
  shards, pieces, rejected = {}, {}, []
  for start, stop in zip(bounds, bounds[1:]):
    # Each block's refs in a list of its own, as GroupBySegment gives them.
    ref_lists = [[r for r in refs[start:stop] if r[0].info.index == i]
                 for i in (1, 0)]
    for variant, item in sweep_writer.write_segment(
        makers, {v: None for v in configs}, 'train',
        sweep_writer.targets(layouts, 'train', (start, stop), bounds),
        ref_lists, ['owl']):
      if isinstance(item, audio_io.Rejection):
        rejected.append((variant, start))
      elif isinstance(item, ShardStats):
        shards[(variant, item.shard)] = item
      elif isinstance(item, sweep_writer.Piece):
        pieces.setdefault((variant, item.shard), []).append(item)
  # The cut is a shard start of spec: only sig's shard 1 is in pieces.
  assert sorted(shards) == [('sig', 0), ('sig', 2), ('spec', 0),
                            ('spec', 1), ('spec', 2), ('spec', 3)]
  assert sorted(pieces) == [('sig', 1)]
  assert [(p.start, p.stop) for p in pieces[('sig', 1)]] == [(5, 7), (7, 10)]
  # Key 6's window, rejected once for each variant.
  assert sorted(rejected) == [('sig', 0), ('spec', 0)]
  for (variant, shard), parts in pieces.items():
    items = sweep_writer.assemble_shard(configs[variant], None, variant,
                                        'train', shard, parts, True)
    shards[(variant, shard)] = items[0][1]
  for (variant, shard), written in sorted(shards.items()):
    starts = layouts[variant]['train'].shard_starts()
    with open(written.path, 'rb') as f:
      data = f.read()
    assert written.num_examples == starts[shard + 1] - starts[shard] - (
        starts[shard] <= 6 < starts[shard + 1])
    os.remove(written.path)  # _alone writes the same temp name
    assert data == _alone(configs[variant],
                          refs[starts[shard]:starts[shard + 1]], shard), (
                              variant, shard)


class _FailingAt(ExampleMaker):
  """Raises on the batch that holds a given (plan key, window)."""

  def __init__(self, config, ref):
    super().__init__(config)
    self.ref = ref

  def encode(self, stats, batch, class_names, shared=None):
    if self.ref in batch.refs:
      raise RuntimeError('stopped')
    return super().encode(stats, batch, class_names, shared)


def test_what_a_failed_segment_task_finished_is_kept_for_a_resume(
    two_variants):
  configs, refs = two_variants
  layouts = _layouts(14, sig=3, spec=4)  # sig: 0 5 10; spec: 0 4 7 11
  segment = sweep_writer.targets(layouts, 'train', (0, 14), [0, 14])
  run_ids = {v: None for v in configs}
  plan, window, key = refs[11]
  failing = {'sig': ExampleMaker(configs['sig']),
             'spec': _FailingAt(configs['spec'], (plan.key, window))}
  with pytest.raises(RuntimeError, match='stopped'):
    sweep_writer.write_segment(failing, run_ids, 'train', segment, [refs],
                               ['owl'])
  makers = {v: ExampleMaker(c) for v, c in configs.items()}
  items = sweep_writer.write_segment(makers, run_ids, 'train', segment,
                                     [refs], ['owl'])
  # The shards closed before key 11 are the first attempt's: their
  # records were written as they closed, and the second attempt kept them.
  kept = sorted((variant, item.shard) for variant, item in items
                if isinstance(item, ShardStats) and item.kept)
  assert kept == [('sig', 0), ('sig', 1), ('spec', 0), ('spec', 1),
                  ('spec', 2)]
  written = sorted((variant, item.shard) for variant, item in items
                   if isinstance(item, ShardStats) and not item.kept)
  assert written == [('sig', 2), ('spec', 3)]


def _sweep(configs, refs, layouts, bounds):
  """Every segment task of a cut of the split, then every shard assembled
  from its pieces (their files removed, as forked workers do): {(variant,
  shard): ShardStats}."""
  makers = {v: ExampleMaker(c) for v, c in configs.items()}
  shards, pieces = {}, {}
  for start, stop in zip(bounds, bounds[1:]):
    for variant, item in sweep_writer.write_segment(
        makers, {v: None for v in configs}, 'train',
        sweep_writer.targets(layouts, 'train', (start, stop), bounds),
        [refs[start:stop]], ['owl']):
      if isinstance(item, ShardStats):
        shards[(variant, item.shard)] = item
      elif isinstance(item, sweep_writer.Piece):
        pieces.setdefault((variant, item.shard), []).append(item)
  for (variant, shard), parts in pieces.items():
    shards[(variant, shard)] = sweep_writer.assemble_shard(
        configs[variant], None, variant, 'train', shard, parts, True)[0][1]
  return shards


def test_a_resume_cut_elsewhere_writes_again_the_pieces_it_needs(
    two_variants):
  configs, refs = two_variants
  layouts = _layouts(14, sig=1, spec=3)  # sig: 0; spec: 0 5 10
  first = _sweep(configs, refs, layouts, [0, 5, 14])
  # A resume with another worker count cuts at every start: sig's shard
  # is of pieces 0-5, 5-10, 10-14. The first run's 0-5 is whole in its
  # record, but its file went into a shard of other pieces.
  again = _sweep(configs, refs, layouts, [0, 5, 10, 14])
  assert sorted(again) == sorted(first)
  assert [key for key, shard in sorted(again.items()) if shard.kept] == [
      ('spec', 0), ('spec', 1), ('spec', 2)]
  with open(again[('sig', 0)].path, 'rb') as f:
    data = f.read()
  os.remove(again[('sig', 0)].path)
  assert data == _alone(configs['sig'], refs, 0)
