"""--sink write_to_tfrecord: the graph in the shape the project was
specified with (a ParDo encoding examples into Beam's file-based sink),
against wavbeam's own shard writer on the same corpus."""

import collections
import io
import os
import subprocess
import sys
import textwrap

import pytest

from pipeline import config as config_lib
from tests import helpers as H
from pipeline import replay
from pipeline.contract import naming
from pipeline.contract import tfrecord
from transforms.writing import sink

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPLITS = 'train=0.6,validation=0.2,test=0.2'


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
  d = tmp_path_factory.mktemp('sink')
  for i in range(24):
    cls = ('owl', 'wren', 'kite')[i % 3]
    H.write_wav(str(d / 'in' / cls / f'{i}.wav'),
                H.noise(1024 * (2 + i % 5) + 9, 1 + i % 2, seed=i),
                subtype=('PCM_16', 'PCM_24', 'FLOAT')[i % 3])
  (d / 'in' / 'owl' / 'broken.wav').write_bytes(b'RIFF....WAVEjunk')
  return d


def _config(corpus, out, **kw):
  return H.make_config(corpus / 'in', out, win_len=1024, hop_len=768,
                       pad=True, splits=SPLITS, n_fft=256, fft_hop=128,
                       features=('signal', 'spectrogram', 'log_mel'), **kw)


def _records(out, meta, split):
  """The split's records, and the record count of each shard in order."""
  records, lengths = [], []
  for shard in meta['splits'][split]['shards']:
    with open(os.path.join(out, shard['file']), 'rb') as f:
      data = f.read()
    if meta['compression'] == 'gzip':
      import gzip
      data = gzip.decompress(data)
    found = [r for _, r in tfrecord.read_records(io.BytesIO(data))]
    records += found
    lengths.append(len(found))
  return records, lengths


@pytest.fixture(scope='module')
def both(corpus):
  own = H.run_pipeline(_config(corpus, corpus / 'own',
                               max_examples_per_shard=7))
  sink = H.run_pipeline(_config(corpus, corpus / 'sink',
                                max_examples_per_shard=7,
                                sink='write_to_tfrecord'))
  return own, sink


def test_same_examples_as_the_default_writer(corpus, both):
  own, sink = both
  assert sink['counts'] == own['counts']
  assert sink['schema'] == own['schema']
  assert sink['classes'] == own['classes']
  assert (corpus / 'sink' / 'rejects.jsonl').read_bytes() == (
      corpus / 'own' / 'rejects.jsonl').read_bytes()
  for split in own['splits']:
    mine, _ = _records(corpus / 'own', own, split)
    theirs, lengths = _records(corpus / 'sink', sink, split)
    assert collections.Counter(theirs) == collections.Counter(mine), split
    entry = sink['splits'][split]
    assert [s['num_examples'] for s in entry['shards']] == lengths
    assert all(0 < n <= 7 for n in lengths)  # --max_examples_per_shard
    assert entry['num_examples'] == sum(lengths) == len(mine)
    for key, stats in entry['statistics'].items():  # merged in another order
      for name in ('count', 'min', 'max'):
        assert stats[name] == own['splits'][split]['statistics'][key][name]
  assert not os.path.exists(corpus / 'sink' / '.wavbeam-incomplete')


def test_the_command_encodes_in_the_forked_workers(corpus, both):
  """The command runs Beam in one thread beside its forked workers (3
  here, whatever this machine's CPUs), which compute and encode the units
  and hand their records over through spool files: the same examples as
  the default writer, every unit counted."""
  out = corpus / 'sink_command'
  code = textwrap.dedent('''
      import os, runpy, sys
      from transforms.runtime import cpus
      from transforms.writing import sink
      cpus.usable_cpus = lambda *a, **k: 3
      print('launcher', os.getpid(), file=sys.stderr)
      spool_unit = sink.spool_unit
      def noted(*args):
        print('encoded in', os.getpid(), file=sys.stderr)
        return spool_unit(*args)
      # sent to the workers by name, as the function it stands for
      noted.__module__, noted.__qualname__ = sink.__name__, 'spool_unit'
      sink.spool_unit = noted
      sys.argv[0] = 'pipeline.run'
      runpy.run_module('pipeline.run', run_name='__main__')
      ''')
  done = subprocess.run(
      [sys.executable, '-c', code, '--input_dir', str(corpus / 'in'),
       '--output_dir', str(out), '--win_len', '1024', '--hop_len', '768',
       '--pad', '--splits', SPLITS, '--n_fft', '256', '--fft_hop', '128',
       '--features', 'signal,spectrogram,log_mel',
       '--max_examples_per_shard', '7', '--sink', 'write_to_tfrecord',
       '--quiet'], capture_output=True, text=True, timeout=300, cwd=ROOT,
      env={**os.environ, 'PYTHONPATH': ROOT})
  assert done.returncode == 0, done.stderr[-3000:]
  lines = done.stderr.splitlines()
  launcher, = [line.split()[-1] for line in lines
               if line.startswith('launcher')]
  workers = {line.split()[-1] for line in lines
             if line.startswith('encoded in')}
  assert len(workers) > 1 and launcher not in workers
  own, _ = both
  meta = replay.load_metadata(str(out))
  assert meta['counts'] == own['counts']
  for split in own['splits']:
    mine, _ = _records(corpus / 'own', own, split)
    theirs, lengths = _records(out, meta, split)
    assert collections.Counter(theirs) == collections.Counter(mine), split
    assert [s['num_examples'] for s in meta['splits'][split]['shards']] == (
        lengths)


def test_verify_and_tfds_read_it_with_exact_shard_lengths(corpus, both):
  _, sink = both
  proc = subprocess.run([sys.executable, '-m', 'pipeline.verify',
                         str(corpus / 'sink')], capture_output=True, text=True,
                        cwd=ROOT)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  import tensorflow_datasets as tfds
  builder = tfds.builder_from_directory(str(corpus / 'sink'))
  for split, entry in sink['splits'].items():
    info = builder.info.splits[split]
    assert list(info.shard_lengths) == [s['num_examples']
                                        for s in entry['shards']]
    assert sum(1 for _ in builder.as_dataset(split=split)) == \
        entry['num_examples']
  from pipeline.readers import tf_dataset as replay
  assert sum(1 for _ in replay.replay_dataset(str(corpus / 'sink'),
                                              'validation')) == \
      sink['splits']['validation']['num_examples']


def test_fixed_shard_count_and_gzip(corpus, tmp_path):
  meta = H.run_pipeline(_config(corpus, tmp_path / 'out', num_shards=3,
                                compression='gzip',
                                sink='write_to_tfrecord'))
  for split, entry in meta['splits'].items():
    _, lengths = _records(tmp_path / 'out', meta, split)
    assert len(entry['shards']) == 3
    assert [s['num_examples'] for s in entry['shards']] == lengths
  proc = subprocess.run([sys.executable, '-m', 'pipeline.verify',
                         str(tmp_path / 'out')], capture_output=True,
                        text=True, cwd=ROOT)
  assert proc.returncode == 0, proc.stdout + proc.stderr


def test_multi_processing_workers(corpus, tmp_path, both):
  _, sink = both
  meta = H.run_pipeline(_config(corpus, tmp_path / 'out',
                                max_examples_per_shard=7,
                                sink='write_to_tfrecord'),
                        options=['--direct_num_workers=2',
                                 '--direct_running_mode=multi_processing'])
  assert meta['counts'] == sink['counts']
  for split in sink['splits']:
    got, _ = _records(tmp_path / 'out', meta, split)
    want, _ = _records(corpus / 'sink', sink, split)
    assert collections.Counter(got) == collections.Counter(want)


@pytest.mark.parametrize('kw,flag,message', [
    ({'split_from': 'subdir'}, 'sink', 'needs the split names'),
    ({'shuffle_seed': 3}, 'shuffle_seed', 'writes in no global order'),
])
def test_options_it_cannot_honour_are_refused(tmp_path, kw, flag, message):
  with pytest.raises(config_lib.ConfigError) as e:
    H.make_config(tmp_path, tmp_path / 'out', sink='write_to_tfrecord', **kw)
  assert f'--{flag}=' in str(e.value) and message in str(e.value)


def test_refused_on_dask_where_its_writes_are_lost(corpus, tmp_path):
  """Beam 2.77's DaskRunner ran the sink into empty files (the final
  step's count check refused them): refused before anything runs."""
  import apache_beam as beam
  from pipeline import graph
  from pipeline.commands import run as run_lib
  config, beam_args = config_lib.parse_known_args([
      '--input_dir', str(corpus / 'in'), '--output_dir', str(tmp_path / 'o'),
      '--sink', 'write_to_tfrecord', '--runner', 'DaskRunner',
      '--dask_client_address', 'tcp://127.0.0.1:9'])
  p = beam.Pipeline(options=run_lib.pipeline_options(beam_args))
  with pytest.raises(config_lib.ConfigError, match='--sink shards on Dask'):
    graph.build_pipeline(p, config)


def test_the_shard_phase_spans_the_encoding(corpus, tmp_path):
  """Shards are written as examples are encoded: the phase the summary's
  speeds divide by begins before the first shard file is finished, and
  lies within the run."""
  import datetime
  import json
  import time
  out = tmp_path / 'one'
  began = time.time()
  H.run_pipeline(_config(corpus, out, sink='write_to_tfrecord',
                         num_shards=1))
  ended = time.time()
  meta = json.loads((out / 'metadata.json').read_text())
  phase = meta['shards_written']

  def seconds(iso):
    return datetime.datetime.fromisoformat(iso).timestamp()
  finished = min(os.path.getmtime(out / s['file'])
                 for e in meta['splits'].values() for s in e['shards'])
  assert began - 0.001 <= seconds(phase['first_started']) < finished
  assert seconds(phase['last_finished']) <= ended + 0.001
  assert phase['seconds'] > 0


TRAP = '''
import numpy as np
from transforms.features import registry


@registry.register
class Trap(registry.Feature):
  name = 'trap'
  help = 'fails on any sound (a silent window gives the schema)'

  def compute(self, batch):
    if np.any(batch.windows):
      raise ValueError('the trap went off')
    return np.zeros((len(batch.windows), 1), np.float32)
'''


def test_a_unit_that_fails_in_a_worker_fails_the_run_and_its_spool_goes(
    corpus, tmp_path):
  """A feature's error in a forked worker ends the command with that
  error and the advice to start again; the units' spool folder does not
  outlive the run."""
  (tmp_path / 'trap_feature.py').write_text(TRAP)
  out = tmp_path / 'out'
  done = subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir',
       str(corpus / 'in'), '--output_dir', str(out), '--win_len', '1024',
       '--feature_module', 'trap_feature', '--features', 'signal,trap',
       '--sink', 'write_to_tfrecord', '--quiet'],
      capture_output=True, text=True, timeout=300, cwd=ROOT,
      env={**os.environ, 'PYTHONPATH': f'{ROOT}:{tmp_path}'})
  assert done.returncode != 0
  assert 'ValueError: the trap went off' in done.stderr
  # --resume refuses this sink: the advice is to start again.
  advice = done.stderr.strip().splitlines()[-1]
  assert 'rerun with --overwrite' in advice and '--resume' not in advice
  temp = out / naming.TEMP_DIR
  assert not [p.name for p in temp.iterdir()
              if p.name.startswith(sink.SPOOL_FOLDER)]


def test_a_stopped_sink_run_is_told_to_start_again(tmp_path):
  """Interrupted or out of disk, a run of this sink (or a sweep through
  it) is advised --overwrite: --resume refuses it."""
  from pipeline.commands import run as run_command
  for variants in (None, str(tmp_path / 'v.json')):
    config = H.make_config(tmp_path / 'in', tmp_path / 'out', variants=variants,
                           sink='write_to_tfrecord')
    said = run_command._left_behind(config, local=True)
    assert 'rerun with --overwrite' in said and '--resume' not in said
    assert run_command._resume_flag(config) == ' with --overwrite'
    shards = H.make_config(tmp_path / 'in', tmp_path / 'out',
                           variants=variants)
    assert 'rerun with --resume' in run_command._left_behind(shards,
                                                             local=True)


@pytest.mark.parametrize('compression', ['uncompressed', 'gzip'])
def test_framed_records_make_the_files_write_to_tfrecord_makes(
    tmp_path, compression):
  """FramedRecordSink against Beam's own WriteToTFRecord, both run by
  Beam on the same records (an empty one and one past a 64 KiB buffer
  among them): every stored record is the same bytes, framing included;
  with a record cap, no file of FramedRecordSink's holds more."""
  import gzip
  import apache_beam as beam
  records = [b'', b'x', os.urandom(70000)] + [
      os.urandom(n) for n in (3, 17, 4096, 65536, 9)]

  per_file = []

  def stored(prefix):
    chunks = []
    for name in sorted(os.listdir(tmp_path)):
      if name.startswith(prefix):
        with open(tmp_path / name, 'rb') as f:
          data = f.read()
        if compression == 'gzip':
          data = gzip.decompress(data)
        view, at = memoryview(data), 0
        for size in tfrecord.record_sizes(io.BytesIO(data), len(data)):
          chunks.append(bytes(view[at:at + size]))
          at += size
        per_file.append(len(chunks) - sum(per_file))
    return sorted(chunks)

  with beam.Pipeline() as p:
    items = p | beam.Create(records, reshuffle=False)
    _ = items | 'Beam' >> beam.io.WriteToTFRecord(
        str(tmp_path / 'beam'), compression_type=compression)
    _ = (items
         | beam.Map(tfrecord.framed)
         | 'Framed' >> beam.io.Write(sink.FramedRecordSink(
             str(tmp_path / 'framed'), num_shards=0,
             shard_name_template=None, compression_type=compression,
             max_records_per_shard=3)))
  beam_records = stored('beam')
  assert len(beam_records) == len(records)
  per_file.clear()
  assert stored('framed') == beam_records
  assert sorted(tfrecord.framed(r) for r in records) == beam_records
  assert len(per_file) >= 3 and max(per_file) <= 3, per_file
