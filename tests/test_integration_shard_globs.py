"""The patterns users write from the shard names they see match the shards
and nothing else: every client reads every example through them, with
the record indexes and ArrayRecord copies beside the shards."""

import glob
import os
import subprocess
import sys

import apache_beam as beam
import apache_beam.testing.util  # noqa: F401
import pytest
import tensorflow as tf

from pipeline.contract import naming
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module', params=[False, True],
                ids=['tfrecord', 'with_array_record'])
def dataset(tmp_path_factory, request):
  d = tmp_path_factory.mktemp('globs')
  for i in range(8):
    H.write_wav(str(d / 'in' / ('a', 'b')[i % 2] / f'{i}.wav'),
                H.noise(1024 * (3 + i % 3), seed=i))
  out = d / 'out'
  meta = H.run_pipeline(H.make_config(
      d / 'in', out, win_len=1024, splits='train=0.75,test=0.25',
      max_examples_per_shard=5, n_fft=256, fft_hop=128,
      array_record=request.param))
  assert len(meta['splits']['train']['shards']) > 1
  names = os.listdir(out)
  assert any(f'.{naming.INDEX_FORMAT}-' in n for n in names)
  assert any(f'.{naming.ARRAY_RECORD}-' in n for n in names) == request.param
  return str(out), meta


def _train_records(out, meta):
  """Every record of the train split, read by wavbeam's own framing."""
  from pipeline.contract import tfrecord
  records = []
  for s in meta['splits']['train']['shards']:
    with open(os.path.join(out, s['file']), 'rb') as f:
      records += [bytes(r) for _, r in tfrecord.read_records(f)]
  return sorted(records)


# What a TFX, tf.data or Beam user writes from the shard names.
PATTERNS = ['wavbeam-train.tfrecord*', '*-train.tfrecord*',
            'wavbeam-train.tfrecord-*']


@pytest.mark.parametrize('pattern', PATTERNS)
def test_tf_data_over_gfile_glob(dataset, pattern):
  out, meta = dataset
  files = tf.io.gfile.glob(out + '/' + pattern)
  records = sorted(r.numpy() for r in tf.data.TFRecordDataset(files))
  assert records == _train_records(out, meta)


@pytest.mark.parametrize('pattern', PATTERNS)
def test_beam_read_from_tfrecord(dataset, pattern, tmp_path):
  out, meta = dataset
  with beam.Pipeline(runner='FnApiRunner') as p:
    _ = (p | beam.io.ReadFromTFRecord(out + '/' + pattern)
         | beam.Map(lambda r: r.hex())
         | beam.io.WriteToText(str(tmp_path / 'records'),
                               shard_name_template=''))
  lines = open(tmp_path / 'records').read().split()
  assert sorted(bytes.fromhex(x) for x in lines) == _train_records(out, meta)


def test_tfxio_file_pattern(dataset):
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2
  from tfx_bsl.public import tfxio
  out, meta = dataset
  schema = text_format.Parse(open(out + '/schema.pbtxt').read(),
                             schema_pb2.Schema())
  source = tfxio.TFExampleRecord(
      file_pattern=out + '/wavbeam-train.tfrecord*', schema=schema)
  with beam.Pipeline(runner='FnApiRunner') as p:
    rows = (p | source.BeamSource(batch_size=4)
            | beam.Map(lambda batch: batch.num_rows)
            | beam.CombineGlobally(sum))
    beam.testing.util.assert_that(rows, beam.testing.util.equal_to(
        [meta['splits']['train']['num_examples']]))


def test_tfds_builder_from_directory(dataset):
  import tensorflow_datasets as tfds
  out, meta = dataset
  builder = tfds.builder_from_directory(out)
  for split in ('train', 'test'):
    n = sum(1 for _ in builder.as_dataset(split=split))
    assert n == meta['splits'][split]['num_examples']


_TFRECORD_PACKAGE = """
import glob, sys
from tfrecord.reader import tfrecord_iterator
out = sys.argv[1]
count = 0
for shard in sorted(glob.glob(out + '/wavbeam-train.tfrecord*')):
  index = shard.replace('.tfrecord-', '.tfindex-')
  count += sum(1 for _ in tfrecord_iterator(shard, index))
print(count)
"""


def test_tfrecord_package_over_a_glob(dataset):
  out, meta = dataset
  proc = subprocess.run([sys.executable, '-c', _TFRECORD_PACKAGE, out],
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert int(proc.stdout) == meta['splits']['train']['num_examples']


def test_no_other_file_looks_like_a_shard(dataset):
  out, meta = dataset
  shards = {s['file'] for e in meta['splits'].values() for s in e['shards']}
  assert {os.path.basename(p) for p in glob.glob(out + '/*.tfrecord*')} \
      == shards


def test_verify_reads_an_index_where_older_datasets_kept_it(dataset,
                                                            tmp_path):
  """Datasets written before the index had its own name kept it at
  SHARD.tfindex: verify still checks it there."""
  import shutil
  out, meta = dataset
  copy = tmp_path / 'old'
  shutil.copytree(out, copy)
  shard = str(copy / meta['splits']['train']['shards'][0]['file'])
  os.rename(naming.index_name(shard), naming.old_index_name(shard))
  verify = [sys.executable, '-m', 'pipeline.verify', str(copy)]
  proc = subprocess.run(verify, capture_output=True, text=True, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr[-2000:]
  with open(naming.old_index_name(shard), 'a') as f:
    f.write('0 0\n')
  proc = subprocess.run(verify, capture_output=True, text=True, cwd=ROOT)
  assert proc.returncode == 1
  assert 'does not list the offsets' in proc.stderr
