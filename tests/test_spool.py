"""Spool files (transforms/runtime/spool.py): what a forked worker hands
the launcher, in files that are claimed by one process, written over and
handed back."""

import multiprocessing
import os

import pytest

from transforms.runtime import spool
from transforms.writing import sink


def _write(path, data):
  f = spool.open_claimed(path)
  f.write(data)
  spool.close_claimed(f)


def test_a_released_file_is_written_over_and_cut_to_its_new_bytes(tmp_path):
  folder = str(tmp_path / 'spool')
  with pytest.raises(FileNotFoundError):  # no folder: nobody reads
    spool.claim(folder)
  os.makedirs(folder)
  first = spool.claim(folder)
  assert os.path.dirname(first) == folder
  _write(first, b'x' * 5000)
  inode = os.stat(first).st_ino
  spool.release(first)
  assert not os.path.exists(first)
  again = spool.claim(folder)
  assert again != first and os.stat(again).st_ino == inode  # the same file
  _write(again, b'short')
  with open(again, 'rb') as f:
    assert f.read() == b'short'
  # Nothing released: a new file.
  other = spool.claim(folder)
  assert not os.path.exists(other)
  spool.remove(folder)
  assert not os.path.exists(folder)


def _claim_many(folder, count, queue):
  claimed = []
  for _ in range(count):
    path = spool.claim(folder)
    with open(path, 'ab') as f:  # a file two processes held would show it
      f.write(b'%d\n' % os.getpid())
    claimed.append(path)
  queue.put(claimed)


def test_two_processes_never_claim_the_same_file(tmp_path):
  folder = str(tmp_path / 'spool')
  os.makedirs(folder)
  released = []
  for i in range(60):
    path = spool.claim(folder)
    _write(path, b'')
    released.append(path)
  for path in released:
    spool.release(path)
  context = multiprocessing.get_context('fork')
  queue = context.Queue()
  workers = [context.Process(target=_claim_many, args=(folder, 50, queue))
             for _ in range(2)]
  for w in workers:
    w.start()
  claimed = queue.get(timeout=60) + queue.get(timeout=60)
  for w in workers:
    w.join()
  assert len(set(claimed)) == 100
  for path in claimed:
    with open(path, 'rb') as f:
      assert len(f.read().split()) == 1, path  # one writer each
  # Every released file was taken, by one process; the rest were new.
  assert not [n for n in os.listdir(folder) if n.startswith('free-')]
  assert len(os.listdir(folder)) == 100


def test_reading_a_spool_file_gives_the_records_back_in_order(tmp_path):
  folder = str(tmp_path / 'spool')
  os.makedirs(folder)
  path = spool.claim(folder)
  _write(path, b'abcdefgh')
  stats = object()
  items = [sink.SpooledRecord('train', 3), stats,
           sink.SpooledRecord('test', 5)]
  assert list(sink.read_spooled(path, items, sweep=False)) == [
      ('train', b'abc'), stats, ('test', b'defgh')]
  assert not os.path.exists(path) and len(os.listdir(folder)) == 1
  # A sweep's items are (variant, item).
  path = spool.claim(folder)
  _write(path, b'xyz')
  assert list(sink.read_spooled(
      path, [('a', sink.SpooledRecord('train', 3)), ('b', stats)],
      sweep=True)) == [('a', ('train', b'xyz')), ('b', stats)]


def test_a_spool_file_short_of_its_records_is_an_error(tmp_path):
  folder = str(tmp_path / 'spool')
  os.makedirs(folder)
  path = spool.claim(folder)
  _write(path, b'abc')
  with pytest.raises(OSError, match='4 bytes short'):
    list(sink.read_spooled(path, [sink.SpooledRecord('train', 7)], False))
  assert not os.path.exists(path)  # handed back all the same


def _write_until_gone(folder, started):
  started.set()
  while True:
    try:
      _write(spool.claim(folder), b'x' * 50_000)
    except FileNotFoundError:  # the folder is gone: its reader stopped
      return


@pytest.mark.slow  # a race tried many times over
def test_removing_the_folder_as_workers_write_leaves_nothing(tmp_path):
  """Workers still claiming and writing while the folder is removed (a
  bundle that failed) leave no file and no folder behind."""
  context = multiprocessing.get_context('fork')
  for trial in range(30):
    folder = str(tmp_path / f'spool{trial}')
    os.makedirs(folder)
    started = [context.Event() for _ in range(3)]
    workers = [context.Process(target=_write_until_gone, args=(folder, s))
               for s in started]
    for w in workers:
      w.start()
    for s in started:
      s.wait(10)
    spool.remove(folder)
    for w in workers:
      w.join(10)
      assert w.exitcode == 0
  assert os.listdir(tmp_path) == []


def test_a_link_at_a_claimed_name_is_not_written_through(tmp_path):
  """A spool folder is new, of a name nobody could plant first; and a
  link at a claimed file's name is refused, its target left alone."""
  from transforms.runtime import filesystem
  parent = str(tmp_path / 'temp')
  folder = spool.make(parent, 'spool')
  assert os.path.basename(folder).startswith('spool-')
  assert spool.make(parent, 'spool') != folder
  target = tmp_path / 'elsewhere'
  target.write_bytes(b'keep')
  path = spool.claim(folder)
  os.symlink(target, path)
  with pytest.raises(filesystem.NotAFile):
    spool.open_claimed(path)
  assert target.read_bytes() == b'keep'
