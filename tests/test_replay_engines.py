"""replay_dataset's two engines: the same elements, bit for bit, with every
argument; the numpy engine where it can read, the tf engine elsewhere."""

import gc
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from pipeline.readers import batching
from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.readers import tf_dataset as replay
from pipeline.commands import run as run_lib
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WINDOWS = ['--win_len', '1024', '--n_fft', '256', '--fft_hop', '128',
           '--max_examples_per_shard', '7', '--features',
           'signal,spectrogram,log_mel']
FILES = ['--example_unit', 'file', '--signal_dtype', 'int16', '--features',
         'signal,spectrogram', '--n_fft', '256', '--fft_hop', '128',
         '--max_examples_per_shard', '5']


def _run(d, name, options):
  for i in range(8):
    H.write_wav(str(d / 'in' / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(3000 + 1500 * i, seed=i))
  out = d / name
  run_lib.run(['--input_dir', str(d / 'in'), '--output_dir', str(out),
               *options, '--runner=FnApiRunner'])
  return str(out)


@pytest.fixture(scope='module')
def windows(tmp_path_factory):
  return _run(tmp_path_factory.mktemp('engines'), 'windows', WINDOWS)


@pytest.fixture(scope='module')
def files(tmp_path_factory):
  return _run(tmp_path_factory.mktemp('engines'), 'files', FILES)


def _elements(ds):
  return [tf.nest.map_structure(lambda t: t.numpy(), e) for e in ds]


def _rows(elements, batched):
  """Every example of the elements (batches split, padding cut), as
  sortable tuples of (key, dtype, shape, bytes)."""
  rows = []
  for element in elements:
    if isinstance(element, tuple):
      element = dict(enumerate(element))
    size = len(next(iter(element.values()))) if batched else None
    for e in ([{k: v[i] for k, v in element.items()} for i in range(size)]
              if batched else [element]):
      # Batches of other examples pad to other lengths: compared unpadded.
      e = {k: v[:e[f'{k}_length']] if f'{k}_length' in e else v
           for k, v in e.items()}
      rows.append(tuple(sorted(
          (str(k), np.asarray(v).dtype.str, np.shape(v),
           np.asarray(v).tobytes()) for k, v in e.items())))
  return sorted(rows)


def _both(output_dir, **kw):
  return {engine: replay.replay_dataset(output_dir, 'train', engine=engine,
                                        **kw)
          for engine in ('tf', 'numpy')}


@pytest.mark.parametrize('kw', [
    {}, {'batch_size': 4}, {'features': ['log_mel', 'target']},
    {'batch_size': 3, 'features': ['signal']},
    {'as_supervised': True, 'batch_size': 5},
    {'normalize': ['spectrogram'], 'batch_size': 6},
    {'normalize': ['log_mel']},
    {'shuffle': True, 'seed': 4, 'batch_size': 4}],
    ids=lambda kw: ','.join(kw) or 'defaults')
def test_the_engines_give_the_same_examples(windows, kw):
  made = _both(windows, **kw)
  tf_elements, np_elements = (_elements(made[e]) for e in ('tf', 'numpy'))
  assert len(tf_elements) == len(np_elements) == int(
      made['numpy'].cardinality()) == int(made['tf'].cardinality())
  batched = 'batch_size' in kw
  assert _rows(tf_elements, batched) == _rows(np_elements, batched)
  assert all(a.is_compatible_with(b) for a, b in zip(
      tf.nest.flatten(made['tf'].element_spec),
      tf.nest.flatten(made['numpy'].element_spec)))


def test_the_numpy_engine_reads_as_numpy_dataset_does(windows):
  """Same order, same values: shards one after another, and shuffled,
  the same order for the same seed."""
  for kw in ({}, {'shuffle': True, 'seed': 9}):
    got = _elements(replay.replay_dataset(windows, 'train', engine='numpy',
                                          batch_size=4, **kw))
    want = list(numpy_reader.numpy_dataset(windows, 'train', batch_size=4,
                                           **kw))
    assert len(got) == len(want)
    for g, w in zip(got, want):
      assert sorted(g) == sorted(w)
      for key, value in w.items():
        if isinstance(value, list):
          assert [s.decode() for s in g[key]] == value
        else:
          assert g[key].dtype == value.dtype
          assert np.array_equal(g[key], value)


def test_shuffled_numpy_engine_draws_a_new_order_each_pass(windows):
  ds = replay.replay_dataset(windows, 'train', engine='numpy', shuffle=True,
                             seed=2, features=['index', 'win_start_idx'])
  passes = [[(int(e['index']), int(e['win_start_idx'])) for e in ds]
            for _ in range(2)]
  assert sorted(passes[0]) == sorted(passes[1])
  assert passes[0] != passes[1]
  again = replay.replay_dataset(windows, 'train', engine='numpy',
                                shuffle=True, seed=2,
                                features=['index', 'win_start_idx'])
  assert [(int(e['index']), int(e['win_start_idx']))
          for e in again] == passes[0]


def test_dropped_remainders_and_repeats(windows):
  total = replay.load_metadata(windows)['splits']['train']['num_examples']
  for engine in ('tf', 'numpy'):
    ds = replay.replay_dataset(windows, 'train', engine=engine, batch_size=5,
                               drop_remainder=True)
    batches = _elements(ds)
    assert len(batches) == total // 5 == int(ds.cardinality())
    assert all(len(b['index']) == 5 for b in batches)
    assert ds.element_spec['spectrogram'].shape[0] in (5, None)
    repeated = replay.replay_dataset(windows, 'train', engine=engine,
                                     repeat=True, features=['index'])
    assert int(repeated.cardinality()) == tf.data.INFINITE_CARDINALITY
    assert len(list(repeated.take(2 * total + 1))) == 2 * total + 1
  spec = replay.replay_dataset(windows, 'train', engine='numpy',
                               batch_size=5, drop_remainder=True).element_spec
  assert spec['signal'].shape[0] == 5  # static, for a fixed batch size


@pytest.mark.parametrize('kw', [
    {}, {'batch_size': 3}, {'batch_size': 3, 'normalize': ['spectrogram']},
    {'batch_size': 2, 'bucket_boundaries': [6000, 9000]}],
    ids=lambda kw: ','.join(kw) or 'defaults')
def test_variable_length_examples_are_the_same_on_both_engines(files, kw):
  made = _both(files, **kw)
  tf_elements, np_elements = (_elements(made[e]) for e in ('tf', 'numpy'))
  assert _rows(tf_elements, 'batch_size' in kw) == _rows(
      np_elements, 'batch_size' in kw)
  if 'batch_size' in kw:
    for batch in np_elements:
      lengths = batch['signal_length']
      assert batch['signal'].shape[1] == lengths.max()
      for row, n in zip(batch['signal'], lengths):
        assert not row[n:].any()  # padding is zeros


# The files' signals are 3000 + 1500 i samples long, i = 0..7: at
# boundaries [6000, 9000], buckets of 2, 2 and 4 examples (a length equal
# to a boundary goes above it); at [1, 8000], of 0, 4 and 4.
SIGNAL = {'bucket_key': 'signal', 'features': ['signal', 'index']}


@pytest.mark.parametrize('drop_remainder', [False, True])
@pytest.mark.parametrize('kw,batches', [
    ({'batch_size': 2, 'bucket_boundaries': [6000, 9000], **SIGNAL}, (4, 4)),
    ({'batch_size': 3, 'bucket_boundaries': [1, 8000], **SIGNAL}, (4, 2)),
    ({'batch_size': 3, 'bucket_boundaries': [1, 8000], 'shuffle': True,
      'seed': 5, **SIGNAL}, (4, 2)),
    ({'batch_size': 8, 'bucket_boundaries': [100000], **SIGNAL}, (1, 1)),
    ({'batch_size': 3, 'bucket_boundaries': [50], 'as_supervised': True,
      'input_key': 'spectrogram'}, None),
], ids=['exact', 'short-last', 'shuffled', 'one-bucket', 'frames'])
def test_bucketed_batches_have_their_cardinality(files, kw, batches,
                                                 drop_remainder):
  for engine in ('tf', 'numpy'):
    ds = replay.replay_dataset(files, 'train', engine=engine,
                               drop_remainder=drop_remainder, **kw)
    made = len(_elements(ds))
    assert int(ds.cardinality()) == made, engine
    if batches:
      assert made == batches[drop_remainder], engine


def test_bucketed_batches_counted_inside_a_tf_function_or_repeated(files):
  @tf.function
  def cardinality():
    return replay.replay_dataset(files, 'train', batch_size=3,
                                 bucket_boundaries=[1, 8000],
                                 **SIGNAL).cardinality()
  assert int(cardinality()) == 4
  for engine in ('tf', 'numpy'):
    repeated = replay.replay_dataset(files, 'train', engine=engine,
                                     batch_size=3, bucket_boundaries=[8000],
                                     repeat=True)
    assert int(repeated.cardinality()) == tf.data.INFINITE_CARDINALITY
    assert len(_elements(repeated.take(7))) == 7


def test_bucketed_batches_are_counted_per_bucket():
  assert replay.bucketed_batches([5, 10, 10, 15], [10], 2, False) == 3
  assert replay.bucketed_batches([5, 10, 10, 15], [10], 2, True) == 1
  assert replay.bucketed_batches([], [10], 2, False) == 0
  assert replay.bucketed_batches([0, 99, 100, 101], [100, 101], 1,
                                 True) == 4


def test_a_gzip_dataset_reads_the_same_on_both_engines(tmp_path):
  out = _run(tmp_path, 'gzip', WINDOWS + ['--compression', 'gzip'])
  assert not replay._uses_numpy('auto', out, replay.load_metadata(out))
  made = _both(out, batch_size=4)
  assert _rows(_elements(made['tf']), True) == _rows(
      _elements(made['numpy']), True)


def test_the_engine_is_chosen_or_refused_by_name(windows):
  local = replay.load_metadata(windows)
  assert replay._uses_numpy('auto', windows, local)
  assert not replay._uses_numpy('tf', windows, local)
  assert not replay._uses_numpy('auto', 'gs://bucket/out', local)
  with pytest.raises(replay.DatasetError, match="engine='numpy' reads local"
                     r" folders, not gs://bucket/out: use engine='tf'"):
    replay._uses_numpy('numpy', 'gs://bucket/out', local)
  with pytest.raises(replay.DatasetError,
                     match="engine='arrow': one of auto, numpy, tf"):
    replay.replay_dataset(windows, 'train', engine='arrow')


def test_kept_batches_stay_intact(windows):
  """TensorFlow takes the numpy engine's batch buffers over without a copy:
  a batch kept while later ones are read keeps its values."""
  want = list(numpy_reader.numpy_dataset(windows, 'train', batch_size=2,
                                         features=['signal', 'index']))
  kept = list(replay.replay_dataset(windows, 'train', engine='numpy',
                                    batch_size=2,
                                    features=['signal', 'index']))
  for got, expected in zip(kept, want):
    assert np.array_equal(got['signal'].numpy(), expected['signal'])
    assert np.array_equal(got['index'].numpy(), expected['index'])


def test_batch_buffers_start_at_a_multiple_of_64():
  """Buffers of many sizes, all kept (each a new allocation): malloc's
  own 16-byte alignment would put most of them off."""
  buffers, kept = batching.BatchBuffers(), []
  for n in range(1, 41):
    examples = [{'x': np.full(n, i, np.int16), 'y': np.float32(i)}
                for i in range(4)]
    kept.extend(buffers.batches(iter(examples), 4, False))
  assert len(kept) == 40
  for batch in kept:
    for value in batch.values():
      assert value.ctypes.data % 64 == 0


def test_a_keras_model_fits_on_the_numpy_engine(windows):
  meta = json.loads(open(f'{windows}/metadata.json').read())
  ds = replay.replay_dataset(windows, 'train', engine='numpy', batch_size=4,
                             as_supervised=True, input_key='log_mel')
  shape = meta['schema']['log_mel']['shape']
  model = tf.keras.Sequential([
      tf.keras.Input(shape), tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(meta['num_classes'])])
  model.compile('sgd', tf.keras.losses.SparseCategoricalCrossentropy(
      from_logits=True))
  history = model.fit(ds, epochs=2, verbose=0)
  assert len(history.history['loss']) == 2
  assert all(np.isfinite(history.history['loss']))


_ITERATE = '''
import sys
from pipeline.readers import tf_dataset as replay
ds = replay.replay_dataset(sys.argv[1], 'train', engine=sys.argv[2],
                           batch_size=4)
open(sys.argv[3], 'w').write('opened')
input()  # the test removes a shard meanwhile
try:
  for _ in ds:
    pass
except Exception as e:
  print(str(e).splitlines()[0] if sys.argv[2] == 'tf' else str(e))
  sys.exit(1)
'''


@pytest.mark.parametrize('engine', ['tf', 'numpy'])
def test_a_shard_removed_after_opening_fails_naming_it(windows, tmp_path,
                                                       engine):
  """Not a read that never ends: tf.data's ignore_errors would retry
  opening a missing shard forever."""
  out = tmp_path / 'out[1]'  # glob characters in the folder's name
  shutil.copytree(windows, out)
  shard = out / replay.load_metadata(str(out))['splits']['train'][
      'shards'][1]['file']
  opened = tmp_path / 'opened'
  proc = subprocess.Popen(
      [sys.executable, '-c', _ITERATE, str(out), engine, str(opened)],
      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True, cwd=ROOT)
  try:
    while not opened.exists() and proc.poll() is None:
      time.sleep(0.05)
    shard.unlink()
    stdout, stderr = proc.communicate('\n', timeout=120)
  finally:
    proc.kill()
  assert proc.returncode == 1, stderr
  assert str(shard) in stdout
  assert ('is missing' if engine == 'tf' else 'No such file') in stdout


def test_a_folder_with_glob_characters_reads_on_the_tf_engine(windows,
                                                               tmp_path):
  out = tmp_path / 'a*b?[c]'
  shutil.copytree(windows, out)
  got = _elements(replay.replay_dataset(str(out), 'train', engine='tf'))
  assert _rows(got, False) == _rows(
      _elements(replay.replay_dataset(windows, 'train', engine='tf')), False)


def test_an_empty_split_reads_as_nothing_on_both_engines(tmp_path):
  d = tmp_path
  H.write_wav(str(d / 'in' / 'a' / '0.wav'), H.noise(3000))
  run_lib.run(['--input_dir', str(d / 'in'), '--output_dir', str(d / 'out'),
               '--win_len', '1024', '--splits', 'train=0.999,test=0.001',
               '--runner=FnApiRunner'])
  assert replay.load_metadata(str(d / 'out'))['splits']['test'][
      'num_examples'] == 0
  for engine in ('tf', 'numpy'):
    for kw in ({}, {'shuffle': True}, {'shuffle': True, 'batch_size': 2}):
      ds = replay.replay_dataset(str(d / 'out'), 'test', engine=engine, **kw)
      assert list(ds) == [] and int(ds.cardinality()) == 0, (engine, kw)


def test_a_reader_keeps_at_most_so_many_shards_mapped(windows, monkeypatch):
  """Each kept mapping holds a file descriptor."""
  monkeypatch.setattr(numpy_reader, 'KEPT_MAPPED_FILES', 2)
  shards = replay.load_metadata(windows)['splits']['train']['shards']
  assert len(shards) > 2
  reader = numpy_reader.NumpyDataset(windows, 'train', batch_size=3)
  for _ in range(2):
    assert sum(len(b['index']) for b in reader) == sum(
        s['num_examples'] for s in shards)
    assert len(reader._mapped) == 2


@pytest.mark.parametrize('drop_remainder', [False, True])
def test_repeated_batches_run_across_passes_on_both_engines(
    windows, files, drop_remainder):
  """As tf.data's repeat().batch(): 3 passes' examples in full batches."""
  for out in (windows, files):
    total = replay.load_metadata(out)['splits']['train']['num_examples']
    taken = {}
    for engine in ('tf', 'numpy'):
      ds = replay.replay_dataset(out, 'train', engine=engine, repeat=True,
                                 batch_size=3, drop_remainder=drop_remainder)
      taken[engine] = _elements(ds.take(total))  # 3 passes
      assert all(len(b['index']) == 3 for b in taken[engine])
    assert _rows(taken['tf'], True) == _rows(taken['numpy'], True)


def test_sizes_and_seeds_are_checked_alike_on_both_engines(windows):
  for engine in ('tf', 'numpy'):
    for kw in ({'batch_size': 0}, {'batch_size': -1}, {'batch_size': 2.5},
               {'shuffle': True, 'shuffle_buffer_size': 0}):
      name, value = [(k, v) for k, v in kw.items() if k != 'shuffle'][0]
      with pytest.raises(replay.DatasetError,
                         match=rf'{name}={value}: give a positive integer'):
        replay.replay_dataset(windows, 'train', engine=engine, **kw)
    got = _elements(replay.replay_dataset(
        pathlib.Path(windows), 'train', engine=engine, shuffle=True,
        seed=-1, features=['index', 'win_start_idx']))
    assert _rows(got, False) == _rows(_elements(replay.replay_dataset(
        windows, 'train', features=['index', 'win_start_idx'])), False)


def test_datasets_let_go_of_their_shards_when_dropped(windows):
  """tf.data may keep the function it calls after the dataset is gone: it
  must not keep the reader, whose mappings hold file descriptors, nor a
  pass left unfinished."""
  def open_files():
    return len(os.listdir('/proc/self/fd'))
  for _ in range(2):  # TensorFlow's own descriptors, opened once
    for _ in replay.replay_dataset(windows, 'train', engine='numpy'):
      pass
  gc.collect()
  before = open_files()
  for _ in range(10):
    ds = replay.replay_dataset(windows, 'train', engine='numpy', batch_size=4)
    assert sum(len(b['index']) for b in ds) > 0
    assert len(list(ds.take(1))) == 1  # a pass left under way
    del ds
  gc.collect()
  assert open_files() == before
  it = iter(replay.replay_dataset(windows, 'train', engine='numpy'))
  gc.collect()  # the iterator alone keeps its dataset and reader
  assert len(list(it)) == replay.load_metadata(windows)['splits']['train'][
      'num_examples']


def test_a_pass_left_unfinished_gives_way_to_the_next(windows):
  """Each new iterator begins a pass of its own, in the reader's order for
  it: a pass cut short (take) leaves nothing behind."""
  reader = numpy_reader.numpy_dataset(windows, 'train', batch_size=3,
                                      shuffle=True, seed=5)
  passes = [list(reader) for _ in range(3)]  # a new order each pass
  ds = replay.replay_dataset(windows, 'train', engine='numpy', batch_size=3,
                             shuffle=True, seed=5)
  assert len(passes[0]) > 3
  got = (_elements(ds.take(2)) + _elements(ds) +
         _elements(ds.take(len(passes[0]) + 5)))
  want = passes[0][:2] + passes[1] + passes[2]
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert np.array_equal(g['index'], w['index'])
    assert np.array_equal(g['signal'], w['signal'])


def test_iterators_read_at_once_each_read_a_pass_of_their_own(windows):
  """As many passes as iterators, each in the reader's order for it (a new
  order per pass, when shuffling), read in turns."""
  reader = numpy_reader.numpy_dataset(windows, 'train', batch_size=2,
                                      shuffle=True, seed=3)
  passes = [list(reader) for _ in range(3)]
  ds = replay.replay_dataset(windows, 'train', engine='numpy', batch_size=2,
                             shuffle=True, seed=3)
  iterators = [iter(ds) for _ in range(3)]
  got = [[], [], []]
  for turn in range(len(passes[0])):
    for i in ((0, 1, 2) if turn % 2 else (2, 0, 1)):
      got[i].append(next(iterators[i]))
  for i, it in enumerate(iterators):
    assert next(it, None) is None
  # Iterators begin their passes when they first prefetch, in any order.
  def order(batches):
    return [tuple(np.asarray(b[k]).tobytes() for k in ('index', 'signal'))
            for b in batches]
  want = sorted(order(p) for p in passes)
  assert want[0] != want[1] != want[2]
  assert sorted(order(m) for m in got) == want


def test_a_pass_left_open_too_long_is_dropped_with_a_clear_error(windows):
  """Passes, asked for as scan asks (token, index): the least recently read
  goes when too many are open; a finished one leaves at once."""
  reader = numpy_reader.NumpyDataset(windows, 'train', batch_size=2,
                                     features=['index'])
  want = [b['index'] for b in numpy_reader.NumpyDataset(
      windows, 'train', batch_size=2, features=['index'])]
  passes = replay._Passes(reader, ['index'])  # pylint: disable=protected-access
  passes.MOST_OPEN = 2
  old, kept = passes.batch_at(-1, 0)[0], passes.batch_at(-1, 0)[0]
  passes.batch_at(old, 1)  # read: now the newest
  third = passes.batch_at(-1, 0)[0]  # `kept` goes
  with pytest.raises(replay.DatasetError, match=r"this iterator's pass was "
                     r'dropped: 2 passes were begun or read since it last '
                     r"was .*use engine='tf'"):
    passes.batch_at(kept, 1)
  got = [want[0], want[1]] + [passes.batch_at(old, i)[1]
                              for i in range(2, len(want))]
  assert all(np.array_equal(g, w) for g, w in zip(got, want))
  passes.batch_at(-1, 0)  # `old` finished: none goes
  assert np.array_equal(passes.batch_at(third, 1)[1], want[1])


_INSIDE_INTERLEAVE = '''
import gc, sys
import tensorflow as tf
from pipeline.readers import tf_dataset as replay
ds = tf.data.Dataset.range(2).interleave(
    lambda _: replay.replay_dataset(sys.argv[1], 'train', features=['index']),
    cycle_length=2)
gc.collect()  # what tracing made and left
print(len(list(ds)))
'''


@pytest.mark.parametrize('shard', [0, 1])
def test_a_pass_that_failed_says_so_when_asked_again(windows, tmp_path,
                                                     shard):
  """A corrupt record fails its batch naming the record; the same iterator
  asked again is told its pass ended there (scan never got the token of a
  pass whose first batch failed)."""
  out = tmp_path / 'copy'
  shutil.copytree(windows, out)
  entry = replay.load_metadata(str(out))['splits']['train']['shards'][shard]
  path = out / entry['file']
  data = bytearray(path.read_bytes())
  data[len(data) // entry['num_examples'] // 2] ^= 0x01  # 1st record's data
  path.write_bytes(bytes(data))
  passes = replay._Passes(  # pylint: disable=protected-access
      numpy_reader.NumpyDataset(str(out), 'train', batch_size=2), ['index'])
  token, index = -1, 0
  with pytest.raises(replay.DatasetError, match=f'shard {path}: record 0 '):
    while True:
      token = passes.batch_at(token, index)[0]
      index += 1
  assert (index == 0) == (shard == 0)
  with pytest.raises(replay.DatasetError) as again:
    passes.batch_at(token, index + 1)
  if shard == 0:
    assert 'ended at an error in its first batch, raised then' in str(
        again.value)
  else:
    assert f'ended at an error: DatasetError: shard {path}: record 0 ' in str(
        again.value)


def test_a_traced_function_builds_on_the_tf_engine(windows):
  """In a traced function the dataset's Python object, which holds the
  numpy engine's reader, is gone when the function runs: 'auto' reads
  with the tf engine there, 'numpy' is refused."""
  # In a process of its own: pytest's capture of the warnings tracing
  # gives keeps the traced function's frames, and the dataset with them.
  proc = subprocess.run([sys.executable, '-c', _INSIDE_INTERLEAVE, windows],
                        capture_output=True, text=True, cwd=ROOT,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  examples = replay.load_metadata(windows)['splits']['train']['num_examples']
  assert proc.stdout.split() == [str(2 * examples)]

  @tf.function(autograph=False)  # the error as raised
  def build():
    return replay.replay_dataset(windows, 'train', engine='numpy')
  with pytest.raises(replay.DatasetError, match="engine='numpy' builds its "
                     r"dataset eagerly, not in a traced function .*use "
                     "engine='tf'"):
    build()
