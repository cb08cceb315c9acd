"""The hand-written peers of bench.run: the loop without TensorFlow
writes the TensorFlow loop's examples, in valid TFRecord framing, and
never imports TensorFlow."""

import os
import subprocess
import sys

from bench import baseline_notf
from bench import baseline_numpy
from pipeline.contract import tfrecord
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _records(path):
  with open(path, 'rb') as f:
    return [data for _, data in tfrecord.read_records(f, path)]


def test_the_loop_without_tensorflow_writes_the_same_examples(tmp_path):
  for i in range(3):
    H.write_wav(str(tmp_path / 'in' / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(5000 + 3000 * i, seed=i))
  assert baseline_numpy.write_part(str(tmp_path / 'in'), str(tmp_path / 'tf'),
                                   2048, 0, 1) == 10
  assert baseline_notf.write_part(str(tmp_path / 'in'),
                                  str(tmp_path / 'notf'), 2048, 0, 1) == 10
  ours = _records(str(tmp_path / 'notf' / 'data-0.tfrecord'))
  theirs = _records(str(tmp_path / 'tf' / 'data-0.tfrecord'))
  assert len(ours) == len(theirs) == 10
  import tensorflow as tf
  for a, b in zip(ours, theirs):
    # Equal messages; a map's fields may be serialized in another order.
    assert tf.train.Example.FromString(a) == tf.train.Example.FromString(b)


def test_the_loop_without_tensorflow_never_imports_it(tmp_path):
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(5000))
  code = ('import sys\nfrom bench import baseline_notf\n'
          f'baseline_notf.write_part({str(tmp_path / "in")!r}, '
          f'{str(tmp_path / "out")!r}, 2048, 0, 1)\n'
          "print(sorted(m for m in sys.modules if m.startswith('tensorflow')))")
  out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, check=True,
                       capture_output=True, text=True, timeout=300).stdout
  assert out.strip() == '[]'
