"""rejects.jsonl from per-block parts: the same lines as one global sort,
and no rejection of probing or planning held by the run's summary."""

import json
import random

from transforms.inputs import block_store
from transforms.planning import passes as planning
from transforms.inputs import probing
from transforms.planning import block_rejects
from transforms.inputs.audio_io import NOTE, Rejection
from tests import helpers as H


def _all_at_once(rejections):
  """The order rejects.jsonl had when every rejection was sorted at once."""
  def key(r):
    text = block_rejects.line(r)
    return (r.path, r.frame_range or (0, 0), r.stage, text)
  return [block_rejects.line(r) for r in sorted(set(rejections), key=key)]


def _random_rejections(rng, paths):
  out = []
  for path in paths:
    for _ in range(rng.randint(0, 3)):
      stage = rng.choice(['probe', 'plan', NOTE, 'read'])
      frames = ((rng.randint(0, 9) * 100, rng.randint(10, 19) * 100)
                if stage == 'read' else None)
      out.append(Rejection(path, f'reason {rng.randint(0, 2)}', stage,
                           frames, 'train' if stage == 'read' else ''))
  return out


def test_parts_in_block_order_merged_with_held_ones_equal_one_sort(tmp_path):
  rng = random.Random(7)
  paths = sorted(f'/in/{rng.choice("abc")}/{i:04d}-{rng.random():.3f}.wav'
                 for i in range(300))
  everything = _random_rejections(rng, paths)
  everything.append(Rejection('/in/\\xff.wav', 'not UTF-8', 'list'))
  early = [r for r in everything if r.stage in ('probe', 'plan', NOTE)]
  held = [r for r in everything if r not in early]
  parts = []
  for block, start in enumerate(range(0, len(paths), 64)):
    names = set(paths[start:start + 64])
    mine = [r for r in early if r.path in names]
    if mine:
      parts.append(block_rejects.write(str(tmp_path), block, mine))
  rng.shuffle(parts)  # the summary holds them in any order
  assert list(block_rejects.lines(parts, held)) == _all_at_once(everything)
  assert sum(p.rejections + p.notes for p in parts) == len(set(early))
  assert sum(p.files_rejected for p in parts) == len(
      {r.path for r in early if not r.is_note})


def test_planning_sends_a_part_not_the_rejections(tmp_path):
  """Every file of a block rejected (too short for the window): the plan
  step emits one BlockRejects with the counts, and its file the lines."""
  paths = []
  for i in range(5):
    path = str(tmp_path / 'in' / 'a' / f'{i}.wav')
    H.write_wav(path, H.noise(100))
    paths.append(path)
  (tmp_path / 'in' / 'a' / 'junk.wav').write_bytes(b'RIFF....WAVEjunk')
  paths = sorted(paths + [str(tmp_path / 'in' / 'a' / 'junk.wav')])
  out = str(tmp_path / 'out')
  config = H.make_config(str(tmp_path / 'in'), out, win_len=1024)
  stored = probing.probe_block(out, (0, tuple((i, p, None)
                                           for i, p in enumerate(paths))))
  assert stored.files_rejected == 1
  assert len(block_store.read_all(stored.path)[1]) == 1
  produced = list(planning.PlanBlock(config).process(stored, 16000))
  assert not any(isinstance(item, Rejection) for item in produced)
  [part] = [item for item in produced
            if isinstance(item, block_rejects.BlockRejects)]
  assert (part.files_rejected, part.rejections, part.notes) == (6, 6, 0)
  lines = list(block_rejects.lines([part], []))
  assert [json.loads(line)['path'] for line in lines] == paths
  assert sorted(json.loads(line)['stage'] for line in lines) == (
      ['plan'] * 5 + ['probe'])
