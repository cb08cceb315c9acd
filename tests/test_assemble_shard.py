"""A sweep's shard joined from its pieces (sweep_writer.assemble_shard):
the records a single writer would write, byte for byte, with the first
piece moved into place where the pieces go once joined."""

import os

import pytest

from pipeline.contract import naming
from pipeline.contract import tfrecord
from tests import helpers as H
from transforms.writing import shard_writer
from transforms.writing import sweep_writer
from transforms.writing.stats import ExampleStats

RECORDS = [b'a' * 10, b'b' * 300, b'', b'c' * 4000, b'd' * 7]
CUTS = [(0, 2), (2, 4), (4, 5)]  # the pieces' sort keys


@pytest.fixture
def config(tmp_path):
  out = tmp_path / 'out'
  os.makedirs(out / naming.TEMP_DIR)
  return H.make_config(tmp_path / 'in', out, features=('signal',))


def _pieces(config):
  pieces = []
  for start, stop in CUTS:
    with sweep_writer.PieceFile(config, None, 'train', 0, (start, stop),
                                (0, len(RECORDS)), 1000) as out:
      for record in RECORDS[start:stop]:
        out.write(record)
    pieces.append(out.piece.__class__(**{
        **out.piece.__dict__, 'stats': ExampleStats(
            split='train', shard=0, num_examples=stop - start)}))
  return pieces


def _one_writer(config):
  """The shard as one ShardFile writes it, record by record."""
  with shard_writer.ShardFile(config, None, 'train', 0, 1000) as out:
    for record in RECORDS:
      out.write(record)
  with open(out.stats.path, 'rb') as f:
    return f.read(), out.stats


def _assembled(config, pieces, remove_pieces):
  items = sweep_writer.assemble_shard(config, None, 'v', 'train', 0,
                                      list(reversed(pieces)), remove_pieces)
  shard = items[0][1]
  with open(shard.path, 'rb') as f:
    return f.read(), shard, items[1][1]


def test_pieces_removed_once_joined_leave_the_first_in_place(config):
  pieces = _pieces(config)
  first = os.stat(pieces[0].path).st_ino
  data, shard, stats = _assembled(config, pieces, remove_pieces=True)
  expected, alone = _one_writer(config)
  assert data == expected
  assert os.stat(shard.path).st_ino == first  # moved, not copied
  assert not any(os.path.exists(p.path) for p in pieces)
  assert (shard.num_examples, shard.num_bytes, shard.records_crc32c) == (
      alone.num_examples, alone.num_bytes, alone.records_crc32c)
  with open(shard.index_path) as f:
    assert f.read() == tfrecord.index_text(
        [len(r) + 16 for r in RECORDS])
  assert stats.num_examples == len(RECORDS)


def test_pieces_kept_for_another_attempt_are_copied(config):
  pieces = _pieces(config)
  before = [open(p.path, 'rb').read() for p in pieces]
  data, shard, _ = _assembled(config, pieces, remove_pieces=False)
  assert data == _one_writer(config)[0]
  assert os.stat(shard.path).st_ino != os.stat(pieces[0].path).st_ino
  assert [open(p.path, 'rb').read() for p in pieces] == before
  # A second attempt finds the pieces as they were.
  assert _assembled(config, pieces, remove_pieces=False)[0] == data


def test_a_link_planted_as_the_first_piece_is_not_appended_to(config,
                                                              tmp_path):
  pieces = _pieces(config)
  victim = tmp_path / 'victim'
  os.rename(pieces[0].path, victim)
  os.symlink(victim, pieces[0].path)
  before = victim.read_bytes()
  with pytest.raises(OSError):
    _assembled(config, pieces, remove_pieces=True)
  assert victim.read_bytes() == before
