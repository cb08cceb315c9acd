"""A finished shard's record (transforms/writing/kept_shards.py): written
and read back whole, kept only for the same work and whole files."""

import collections
import math
import os

import pytest

from pipeline.contract import naming
from pipeline.contract import schema as schema_lib
from pipeline.contract import tfrecord
from pipeline import progress
from tests import helpers as H
from transforms.inputs.file_reports import Rejection
from transforms.writing import kept_shards
from transforms.writing import shard_writer
from transforms.writing.stats import ExampleStats, Moments


@pytest.fixture
def config(tmp_path):
  out = tmp_path / 'out'
  os.makedirs(out / naming.TEMP_DIR)
  return H.make_config(tmp_path / 'in', out, features=('signal',))


def _shard(config, records):
  """A real shard written by ShardFile, and what its task yields."""
  with shard_writer.ShardFile(config, None, 'train', 3, 1000) as out:
    for record in records:
      out.write(record)
  stats = ExampleStats(
      split='train', shard=3, num_examples=len(records),
      example_bytes=sum(map(len, records)),
      schema=schema_lib.Schema.of({'signal': schema_lib.FeatureSpec(
          'int32', (4096,))}),
      per_class=collections.Counter({'b': 2, 'a': 1}),
      moments={'signal': Moments(3, 0.1 + 0.2, 1 / 3, -math.inf, 7.5)})
  rejection = Rejection('/in/x.wav', 'too short', 'read', (0, 99), 'train')
  return [rejection, out.stats, stats]


def test_a_record_gives_back_what_the_task_yielded(config):
  items = _shard(config, [b'a' * 10, b'b' * 300, b''])
  path = kept_shards.record_path(config.dataset_dir, 'train', 3)
  kept_shards.write_record(config.dataset_dir, path, 'd1', [], items)
  back = kept_shards.kept(config, path, 'd1')
  assert back[0] == items[0]
  assert back[1].kept and back[1].path == items[1].path
  assert back[1].num_bytes == items[1].num_bytes
  assert back[1].index_path == items[1].index_path
  assert back[2] == items[2]
  assert back[2].moments['signal'] == items[2].moments['signal']
  assert list(back[2].per_class.items()) == [('b', 2), ('a', 1)]
  assert kept_shards.record_paths(config.dataset_dir) == [path]


def test_another_digest_or_a_damaged_file_is_not_kept(config):
  items = _shard(config, [b'x' * 50, b'y' * 70])
  path = kept_shards.record_path(config.dataset_dir, 'train', 3)
  kept_shards.write_record(config.dataset_dir, path, 'd1', [], items)
  assert kept_shards.kept(config, path, 'd2') is None
  shard = items[1].path
  data = bytearray(open(shard, 'rb').read())
  for offset in (2, 20, len(data) - 1):  # length, data, data CRC
    flipped = bytearray(data)
    flipped[offset] ^= 0x10
    open(shard, 'wb').write(flipped)
    assert kept_shards.damage(config, items[1]) is not None, offset
    assert kept_shards.kept(config, path, 'd1') is None
  open(shard, 'wb').write(data + tfrecord_record(b'more'))
  assert 'bytes' in kept_shards.damage(config, items[1])
  open(shard, 'wb').write(data)
  assert kept_shards.kept(config, path, 'd1') is not None
  os.remove(items[1].index_path)
  assert kept_shards.kept(config, path, 'd1') is None


def test_other_records_of_the_same_sizes_are_not_kept(config):
  """A shard file replaced by records of the same sizes, CRCs right (what
  another attempt could leave under the name): its digest tells."""
  items = _shard(config, [b'x' * 50, b'y' * 70])
  path = kept_shards.record_path(config.dataset_dir, 'train', 3)
  kept_shards.write_record(config.dataset_dir, path, 'd1', [], items)
  with open(items[1].path, 'wb') as f:
    for data in (b'x' * 50, b'z' * 70):
      tfrecord.write_record(f, data)
  assert kept_shards.damage(config, items[1]) == (
      f'{items[1].path}: not the records that were written')
  assert kept_shards.kept(config, path, 'd1') is None


def tfrecord_record(data: bytes) -> bytes:
  import io
  f = io.BytesIO()
  tfrecord.write_record(f, data)
  return f.getvalue()


@pytest.mark.parametrize('name', ['../../etc/passwd', '/abs/train-00001-'
                                  + 'a' * 32, 'metadata.json'])
def test_a_record_never_names_a_file_outside_the_temporary_folder(
    config, name):
  items = _shard(config, [b'z'])
  path = kept_shards.record_path(config.dataset_dir, 'train', 3)
  kept_shards.write_record(config.dataset_dir, path, 'd1', [], items)
  text = open(path).read().replace(os.path.basename(items[1].path), name)
  open(path, 'w').write(text)
  assert kept_shards.kept(config, path, 'd1') is None


def test_a_damaged_record_is_not_kept(config):
  items = _shard(config, [b'z'])
  path = kept_shards.record_path(config.dataset_dir, 'train', 3)
  kept_shards.write_record(config.dataset_dir, path, 'd1', [], items)
  open(path, 'w').write(open(path).read()[:-5])
  assert kept_shards.kept(config, path, 'd1') is None


def test_the_task_digest_follows_windows_inputs_and_options(config):
  from transforms.inputs.file_reports import WavInfo
  from transforms.planning.rules import FilePlan
  info = WavInfo(0, '/in/a.wav', 16000, 16000, 1, 'PCM_16', 32044, 5.0)
  plan = FilePlan(info, 'train', 'a', 16000, 16000, 3)
  refs = [(plan, 0, 7), (plan, 1, 9)]
  base = kept_shards.task_digest(config, 'train', 0, refs, ['a'])
  assert base == kept_shards.task_digest(config, 'train', 0, list(refs),
                                         ['a'])
  touched = FilePlan(WavInfo(0, '/in/a.wav', 16000, 16000, 1, 'PCM_16',
                             32044, 6.0), 'train', 'a', 16000, 16000, 3)
  others = [
      kept_shards.task_digest(config, 'train', 0, refs[:1], ['a']),
      kept_shards.task_digest(config, 'train', 0,
                              [(touched, 0, 7), (touched, 1, 9)], ['a']),
      kept_shards.task_digest(config, 'train', 0, refs, ['a', 'b']),
      kept_shards.task_digest(config, 'train', 1, refs, ['a']),
      kept_shards.task_digest(H.make_config(
          config.input_dir, config.output_dir, features=('log_mel',)),
          'train', 0, refs, ['a'])]
  assert base not in others and len(set(others)) == len(others)
  assert kept_shards.task_digest(H.make_config(
      config.input_dir, '/elsewhere', features=('signal',), overwrite=True),
      'train', 0, refs, ['a']) == base


def test_the_progress_line_counts_found_shards_apart_from_the_rate():
  plan = {'files_seen': 10, 'files_planned': 10, 'examples': 100,
          'shards': 4, 'example_bytes': 1000}
  line = progress.status_line(plan, 60_000, 10.0, 0.0, 10.0, kept=2,
                              kept_bytes=50_000)
  assert '(2 found finished)' in line
  assert '~60/100 examples' in line and 'at 0 MB/s' in line


def test_two_attempts_may_record_one_shard_at_once(config):
  import threading
  items = _shard(config, [b'q' * 20])
  path = kept_shards.record_path(config.dataset_dir, 'train', 3)
  failed = []

  def record(n):
    try:
      for _ in range(n):
        kept_shards.write_record(config.dataset_dir, path, 'd1', [], items)
    except Exception as e:  # pylint: disable=broad-except
      failed.append(e)
  threads = [threading.Thread(target=record, args=(200,)) for _ in range(3)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  assert not failed
  assert kept_shards.kept(config, path, 'd1') is not None
  assert not [n for n in os.listdir(os.path.dirname(path))
              if n.endswith('.tmp')]


def test_a_link_in_place_of_a_shard_is_not_kept(config, tmp_path):
  items = _shard(config, [b'w' * 30])
  path = kept_shards.record_path(config.dataset_dir, 'train', 3)
  kept_shards.write_record(config.dataset_dir, path, 'd1', [], items)
  elsewhere = tmp_path / 'elsewhere'
  os.rename(items[1].path, elsewhere)
  os.symlink(elsewhere, items[1].path)
  assert 'symbolic link' in kept_shards.damage(config, items[1])
  assert kept_shards.kept(config, path, 'd1') is None


def test_a_kept_piece_starts_its_shard_in_this_run(config):
  """A sweep's piece recorded by the stopped run: the shard this run
  assembles from it spans this run's time, not the time it sat stopped
  (the summary's rate, metadata.json's first_started)."""
  import dataclasses
  import time
  from transforms.writing import sweep_writer
  with sweep_writer.PieceFile(config, None, 'train', 0, (0, 2), (0, 4),
                              started_ms=1000) as out:
    out.write_records([b'a' * 10, b'b' * 20])
  piece = dataclasses.replace(out.piece, stats=ExampleStats(
      split='train', shard=0, num_examples=2, example_bytes=30))
  assert piece.started_ms == 1000
  path = kept_shards.record_path(config.dataset_dir, 'train', 0, 0)
  kept_shards.write_record(config.dataset_dir, path, 'd1', [], [piece])
  now = int(time.time() * 1000)
  back = kept_shards.kept(config, path, 'd1')
  assert back[0].path == piece.path and back[0].started_ms >= now
