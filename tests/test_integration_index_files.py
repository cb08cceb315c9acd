"""The `tfrecord` package's index files beside each uncompressed shard."""

import os
import subprocess
import sys

import pytest

from pipeline.contract import naming
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
  d = tmp_path_factory.mktemp('index')
  for i in range(10):
    H.write_wav(str(d / 'in' / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(1024 * (3 + i % 4), seed=i))
  return d


def _run(corpus, out, **kw):
  return H.run_pipeline(H.make_config(
      corpus / 'in', out, win_len=1024, splits='train=0.8,test=0.2',
      max_examples_per_shard=6, n_fft=256, fft_hop=128, **kw))


# Run apart: the package registers its own copy of TensorFlow's Example
# protos, which clashes with TensorFlow's in one process.
_CHECK = """
import collections, sys
from tfrecord.reader import tfrecord_iterator
from tfrecord.tools.tfrecord2idx import create_index
for pair in sys.argv[2:]:
  path, index = pair.split(',')
  create_index(path, sys.argv[1])
  assert open(index).read() == open(sys.argv[1]).read(), path
  everything = [bytes(r) for r in tfrecord_iterator(path)]
  if len(everything) < 2:
    continue  # the package's np.loadtxt cannot read a one-line index
  parts = collections.Counter()
  for worker in range(3):  # as DataLoader workers ask for them
    parts.update(bytes(r) for r in tfrecord_iterator(
        path, index, shard=(worker, 3)))
  assert parts == collections.Counter(everything), path
print('checked', len(sys.argv) - 2)
"""


@pytest.mark.parametrize('sink', ['shards', 'write_to_tfrecord'])
def test_index_matches_tfrecord2idx_and_splits_records_exactly_once(
    corpus, tmp_path, sink):
  out = tmp_path / 'out'
  meta = _run(corpus, out, sink=sink)
  shards = [str(out / s['file']) for e in meta['splits'].values()
            for s in e['shards']]
  assert len(shards) > 2
  indexes = [naming.index_name(p) for p in shards]
  assert all(os.path.isfile(p) for p in indexes)
  proc = subprocess.run([sys.executable, '-c', _CHECK,
                         str(tmp_path / 'expected'),
                         *[f'{s},{i}' for s, i in zip(shards, indexes)]],
                        capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.split() == ['checked', str(len(shards))]


def test_no_index_for_gzip_shards(corpus, tmp_path):
  meta = _run(corpus, tmp_path / 'out', compression='gzip')
  assert not [n for n in os.listdir(tmp_path / 'out')
              if naming.INDEX_FORMAT in n]
  assert meta['compression'] == 'gzip'


def test_verify_checks_the_index(corpus, tmp_path):
  out = tmp_path / 'out'
  meta = _run(corpus, out)
  shard = out / meta['splits']['train']['shards'][0]['file']
  index = naming.index_name(str(shard))
  lines = open(index).read().splitlines()
  lines[1] = lines[1].replace(' ', '0 ', 1)
  open(index, 'w').write('\n'.join(lines) + '\n')
  proc = subprocess.run([sys.executable, '-m', 'pipeline.verify', str(out)],
                        capture_output=True, text=True, cwd=ROOT)
  assert proc.returncode == 1
  assert 'does not list the offsets' in proc.stderr


def _readers_page_recipe() -> str:
  """The `tfrecord` package's DataLoader recipe in docs/readers.md."""
  page = open(os.path.join(ROOT, 'docs', 'readers.md'),
              encoding='utf-8').read()
  section = page[page.index('### The tfrecord package'):]
  start = section.index('```python\n') + len('```python\n')
  return section[start:section.index('\n```', start)]


def test_documented_tfrecord_recipe_reads_each_example_once(corpus, tmp_path):
  """The DataLoader recipe of docs/readers.md, as printed, with 2 workers: every
  example once, arrays equal to numpy_reader's."""
  meta = _run(corpus, tmp_path / 'out', features=('signal', 'spectrogram'))
  check = _readers_page_recipe() + '''
import hashlib, sys
seen = []
for batch in loader:
    for s, p in zip(batch['signal'], batch['spectrogram']):
        both = s.numpy().tobytes() + p.numpy().tobytes()
        seen.append(hashlib.sha1(both).hexdigest())
print(' '.join(sorted(seen)))
'''
  proc = subprocess.run([sys.executable, '-c', check], cwd=tmp_path,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  import hashlib
  from pipeline.readers import numpy_dataset as numpy_reader
  expected = sorted(
      hashlib.sha1(e['signal'].tobytes() + e['spectrogram'].tobytes())
      .hexdigest() for e in numpy_reader.numpy_dataset(
          str(tmp_path / 'out'), 'train'))
  assert len(expected) == meta['splits']['train']['num_examples'] > 6
  assert proc.stdout.split() == expected
