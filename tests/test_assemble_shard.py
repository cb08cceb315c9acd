"""A shard joined from its pieces (sweep_writer.assemble_shard):
the records a single writer would write, byte for byte, and only the
pieces' recorded records, read from files of wavbeam's own; joined as
soon as its pieces are written where forked workers run the segments."""

import concurrent.futures
import os
import threading

import pytest

from transforms.runtime import filesystem
from transforms.runtime import forked_workers

from pipeline.contract import naming
from pipeline.contract import tfrecord
from tests import helpers as H
from transforms.writing import shard_writer
from transforms.writing import sweep_writer
from transforms.writing.stats import ExampleStats, ShardStats

RECORDS = [b'a' * 10, b'b' * 300, b'', b'c' * 4000, b'd' * 7]
CUTS = [(0, 2), (2, 4), (4, 5)]  # the pieces' sort keys


@pytest.fixture
def config(tmp_path):
  out = tmp_path / 'out'
  os.makedirs(out / naming.TEMP_DIR)
  return H.make_config(tmp_path / 'in', out, features=('signal',))


def _pieces(config, shard=0):
  pieces = []
  for start, stop in CUTS:
    with sweep_writer.PieceFile(config, None, 'train', shard, (start, stop),
                                (0, len(RECORDS)), 1000) as out:
      out.write_records(RECORDS[start:stop])
    pieces.append(out.piece.__class__(**{
        **out.piece.__dict__, 'stats': ExampleStats(
            split='train', shard=shard, num_examples=stop - start)}))
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


def test_joined_pieces_are_what_one_writer_writes(config):
  pieces = _pieces(config)
  data, shard, stats = _assembled(config, pieces, remove_pieces=True)
  expected, alone = _one_writer(config)
  assert data == expected
  assert not any(os.path.exists(p.path) for p in pieces)
  assert (shard.num_examples, shard.num_bytes, shard.records_crc32c) == (
      alone.num_examples, alone.num_bytes, alone.records_crc32c)
  with open(shard.index_path) as f:
    assert f.read() == tfrecord.index_text(
        [len(r) + 16 for r in RECORDS])
  assert stats.num_examples == len(RECORDS)


def test_pieces_kept_for_another_attempt_are_left_as_they_were(config):
  pieces = _pieces(config)
  before = [open(p.path, 'rb').read() for p in pieces]
  data, _, _ = _assembled(config, pieces, remove_pieces=False)
  assert data == _one_writer(config)[0]
  assert [open(p.path, 'rb').read() for p in pieces] == before


def test_only_a_piece_s_recorded_records_are_copied(config):
  pieces = _pieces(config)
  with open(pieces[1].path, 'ab') as f:
    f.write(b'\0' * 10_000)
  assert _assembled(config, pieces, remove_pieces=False)[0] == _one_writer(
      config)[0]


def test_a_shard_is_joined_once_the_bundle_has_written_all_its_pieces(
    config):
  whole, unfinished = _pieces(config, shard=0), _pieces(config, shard=1)
  write = sweep_writer.WriteSegment({'v': config})
  write.setup()
  # A pool of threads in place of the forked workers, which a process
  # that has started threads may no longer fork.
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    write.start_bundle()
    write.calls = forked_workers.Calls(pool)
    # Segment tasks' results, as they come back: out of key order, the
    # middle piece of shard 1 never, one of shard 0 twice (a runner that
    # repeats outputs), once its shard is joined.
    emitted = []
    for piece in [whole[2], unfinished[0], whole[0], whole[1],
                  unfinished[2], whole[1]]:
      emitted += write._written([('v', piece)])
    assert emitted == []
    emitted = [item.value for item in write.finish_bundle()]
  shards = [item for _, item in emitted if isinstance(item, ShardStats)]
  assert [s.shard for s in shards] == [0]
  with open(shards[0].path, 'rb') as f:
    assert f.read() == _one_writer(config)[0]
  assert not any(os.path.exists(p.path) for p in whole)
  # Shard 1's pieces go on, as they were, to AssembleShards.
  left = [item for _, item in emitted if isinstance(item, sweep_writer.Piece)]
  assert left == [unfinished[0], unfinished[2]]
  assert all(os.path.exists(p.path) for p in left)


def test_pieces_cover_a_shard_only_with_each_of_its_keys_once(config):
  pieces = _pieces(config)
  assert sweep_writer.covers_shard(sweep_writer.in_key_order(pieces * 2))
  assert not sweep_writer.covers_shard(pieces[:2])
  assert not sweep_writer.covers_shard([pieces[0], pieces[2]])
  assert not sweep_writer.covers_shard(pieces[1:])


@pytest.mark.parametrize('kind', ['link', 'fifo'])
def test_a_link_or_fifo_planted_as_a_piece_is_not_read(config, tmp_path,
                                                       kind):
  pieces = _pieces(config)
  victim = tmp_path / 'victim'
  os.rename(pieces[1].path, victim)
  if kind == 'link':
    os.symlink(victim, pieces[1].path)
  else:
    os.mkfifo(pieces[1].path)
  # A read that blocked on the FIFO is let go after a while, and fails,
  # instead of hanging the suite.
  letting_go = threading.Timer(10, _open_for_writing, [pieces[1].path])
  letting_go.daemon = True
  letting_go.start()
  try:
    with pytest.raises(filesystem.NotAFile):
      _assembled(config, pieces, remove_pieces=True)
  finally:
    letting_go.cancel()


def _open_for_writing(path):
  try:
    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
  except OSError:
    pass
