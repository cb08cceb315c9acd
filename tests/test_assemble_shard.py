"""A sweep's shard joined from its pieces (sweep_writer.assemble_shard):
the records a single writer would write, byte for byte; where no other
attempt reads the pieces, the first grown into the shard, and never a file
named twice."""

import os

import pytest

from transforms.runtime import filesystem

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


def test_the_first_piece_grows_into_the_shard_where_pieces_go(config):
  pieces = _pieces(config)
  first = os.stat(pieces[0].path).st_ino
  data, shard, stats = _assembled(config, pieces, remove_pieces=True)
  # The shard, its index and its record; no other file (an empty one
  # opened for the shard) left.
  assert sorted(os.listdir(os.path.dirname(shard.path))) == sorted([
      os.path.basename(shard.path), os.path.basename(shard.index_path),
      'kept-train-00000.json'])
  expected, alone = _one_writer(config)
  assert data == expected
  assert shard.path == pieces[0].path and os.stat(shard.path).st_ino == first
  assert not any(os.path.exists(p.path) for p in pieces[1:])
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


def test_an_assembly_that_stopped_leaves_every_piece_for_the_next(
    config, monkeypatch):
  """An attempt stopped while copying (a kill, a full disk) after the
  first piece began to grow: that piece still holds its records for a
  resume (kept_shards), and the next attempt, growing it or copying it,
  writes the shard a single writer writes."""
  from transforms.writing import kept_shards
  pieces = _pieces(config)
  copy = shard_writer.ShardFile.copy_framed

  def copy_then_stop(self, path, record_sizes):
    copy(self, path, record_sizes)
    raise OSError('no space left on device')

  monkeypatch.setattr(shard_writer.ShardFile, 'copy_framed', copy_then_stop)
  with pytest.raises(OSError, match='no space'):
    _assembled(config, pieces, remove_pieces=True)
  monkeypatch.setattr(shard_writer.ShardFile, 'copy_framed', copy)
  assert os.path.getsize(pieces[0].path) > sum(pieces[0].record_sizes)
  with open(pieces[0].path, 'ab') as f:  # more than the next attempt writes
    f.write(b'\0' * 10_000)
  assert all(kept_shards._piece_damage(p) is None for p in pieces)
  expected = _one_writer(config)[0]
  assert _assembled(config, pieces, remove_pieces=False)[0] == expected
  # Assembled again, not kept from the record the copy wrote.
  os.remove(kept_shards.record_path(config.dataset_dir, 'train', 0))
  assert _assembled(config, pieces, remove_pieces=True)[0] == expected


@pytest.mark.parametrize('link', ['symbolic', 'hard'])
def test_a_link_planted_as_the_first_piece_is_not_grown(config, tmp_path,
                                                        link):
  pieces = _pieces(config)
  victim = tmp_path / 'victim'
  os.rename(pieces[0].path, victim)
  (os.symlink if link == 'symbolic' else os.link)(victim, pieces[0].path)
  before = victim.read_bytes()
  with pytest.raises(filesystem.NotAFile if link == 'symbolic' else OSError,
                     match='symbolic link' if link == 'symbolic'
                     else '2 names'):
    _assembled(config, pieces, remove_pieces=True)
  assert victim.read_bytes() == before
