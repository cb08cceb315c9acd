"""The same pipeline on other runners: a real Dask cluster, Beam's Prism
runner, Dataflow (dry run) and Flink (portable pipeline), compared with
the local runner."""

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from tests.dask_cluster import dask_cluster, free_port
from pipeline.contract import metadata
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _digests(out):
  return {name: hashlib.sha256(open(os.path.join(out, name), 'rb').read())
          .hexdigest() for name in sorted(os.listdir(out))
          if name != 'metadata.json'}


def _metadata(out):
  meta = metadata.content(json.load(open(os.path.join(out, 'metadata.json'))))
  del meta['config']['output_dir']
  return meta


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
  d = tmp_path_factory.mktemp('runners')
  for i in range(12):
    cls = ('owl', 'wren', 'kite')[i % 3]
    H.write_wav(str(d / 'in' / cls / f'{i}.wav'),
                H.noise(1024 * (3 + i % 4) + 17, 1 + i % 2, seed=i),
                subtype=('PCM_16', 'PCM_24', 'FLOAT')[i % 3])
  (d / 'in' / 'owl' / 'broken.wav').write_bytes(b'RIFF....WAVEjunk')
  rows = ['path,species,fold,recorder'] + [
      f'{("owl", "wren", "kite")[i % 3]}/{i}.wav,bird{i % 2},{1 + i % 3},'
      f'r{i % 4}' for i in range(12)] + ['owl/broken.wav,bird0,1,r0']
  (d / 'manifest.csv').write_text('\n'.join(rows) + '\n')
  return d


def _manifest_flags(corpus, out):
  """_flags with labels, folds and extra columns from a manifest."""
  flags = _flags(corpus, out)
  at = flags.index('--splits')
  del flags[at:at + 2]
  return flags + ['--manifest', str(corpus / 'manifest.csv'),
                  '--manifest_label_column', 'species',
                  '--manifest_split_column', 'fold',
                  '--fold_splits', 'train=1,2;test=3',
                  '--manifest_extra_columns', 'fold,recorder']


def _segment_flags(corpus, out):
  """A segment manifest: two overlapping segments per recording (one
  ends after its file), with a transcript each; a split per recorder."""
  rows = ['path,start,end,recorder,text']
  for i in range(12):
    path = f'{("owl", "wren", "kite")[i % 3]}/{i}.wav'
    rows += [f'{path},0.01,0.15,r{i % 4},first {i}',
             f'{path},0.1,{0.5 if i == 5 else 0.18},r{i % 4},second {i}']
  rows.append('owl/broken.wav,0,0.1,r0,none')
  (corpus / 'segments.csv').write_text('\n'.join(rows) + '\n')
  return ['--input_dir', str(corpus / 'in'), '--output_dir', str(out),
          '--manifest', str(corpus / 'segments.csv'),
          '--manifest_start_column', 'start', '--manifest_end_column', 'end',
          '--manifest_extra_columns', 'text', '--example_unit', 'segment',
          '--split_by', 'recorder', '--splits', 'train=0.5,test=0.5',
          '--sample_rate', '16000', '--max_examples_per_shard', '5',
          '--features', 'signal,log_mel', '--n_fft', '256', '--fft_hop',
          '128']


def _flags(corpus, out):
  return ['--input_dir', str(corpus / 'in'), '--output_dir', str(out),
          '--win_len', '1024', '--hop_len', '768', '--pad',
          '--splits', 'train=0.7,test=0.3', '--max_examples_per_shard', '9',
          '--features', 'signal,spectrogram,log_mel', '--n_fft', '256',
          '--fft_hop', '128']


def _run_cli(flags):
  proc = subprocess.run([sys.executable, '-m', 'pipeline.run', *flags],
                        capture_output=True, text=True, cwd=ROOT, timeout=900)
  assert proc.returncode == 0, proc.stderr[-4000:]


@pytest.fixture(scope='module')
def local_run(corpus):
  out = corpus / 'local'
  _run_cli(_flags(corpus, out))
  return out


@contextlib.contextmanager
def job_service():
  """Beam's local job service, a real server process on 127.0.0.1; yields
  its port."""
  port = free_port()
  server = subprocess.Popen(
      [sys.executable, '-m',
       'apache_beam.runners.portability.local_job_service_main',
       '--port', str(port)], cwd=ROOT, stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL)
  try:
    deadline = time.time() + 60
    while True:
      try:
        socket.create_connection(('127.0.0.1', port), timeout=1).close()
        break
      except OSError:
        assert time.time() < deadline and server.poll() is None
        time.sleep(0.2)
    yield port
  finally:
    server.terminate()
    server.wait(timeout=30)


def test_dask_cluster_writes_the_same_dataset(corpus, local_run):
  out = corpus / 'dask'
  with dask_cluster(workers=2, cwd=ROOT) as (address, _):
    # Two partitions: each worker gets work, and the DaskRunner's repeated
    # outputs (docs/runners.md) show up, so the test covers the workaround.
    dask = ['--runner', 'DaskRunner', '--dask_client_address', address,
            '--dask_npartitions=2']
    _run_cli(_flags(corpus, out) + dask)
    _run_cli(_manifest_flags(corpus, corpus / 'dask_manifest') + dask)
    _run_cli(_segment_flags(corpus, corpus / 'dask_segments') + dask)
  # Segments too: cut from their recordings, a split per recorder.
  _run_cli(_segment_flags(corpus, corpus / 'local_segments'))
  assert _digests(corpus / 'dask_segments') == _digests(
      corpus / 'local_segments')
  segments_meta = _metadata(corpus / 'dask_segments')
  assert segments_meta == _metadata(corpus / 'local_segments')
  assert segments_meta['counts']['segments_rejected'] == 1
  assert segments_meta['counts']['examples'] == 23
  # A manifest run too: labels, folds and extra columns, the same bytes.
  _run_cli(_manifest_flags(corpus, corpus / 'local_manifest'))
  assert _digests(corpus / 'dask_manifest') == _digests(
      corpus / 'local_manifest')
  manifest_meta = _metadata(corpus / 'dask_manifest')
  assert manifest_meta == _metadata(corpus / 'local_manifest')
  assert manifest_meta['classes'] == ['bird0', 'bird1']
  assert {'fold', 'recorder'} <= set(manifest_meta['schema'])
  meta = _metadata(out)
  for split, entry in meta['splits'].items():
    for shard in entry['shards']:
      assert os.path.exists(out / shard['file'])
  assert os.path.exists(out / 'rejects.jsonl')
  assert not os.path.exists(out / '.wavbeam-incomplete')
  assert meta['counts']['files_rejected'] == 1
  assert sum(len(e['shards']) for e in meta['splits'].values()) > 2
  # The shard-writing phase is recorded on Dask too (it keeps no metrics).
  written = json.load(open(out / 'metadata.json'))['shards_written']
  assert written['first_started'] <= written['last_finished']
  # Byte-identical to the local runner: shards, rejects, TFDS/TFX files,
  # and metadata apart from creation time and output folder.
  assert _digests(out) == _digests(local_run)
  assert meta == _metadata(local_run)
  for split in meta['splits']:
    assert H.replayed(str(out), split).keys() == \
        H.replayed(str(local_run), split).keys()


def test_portable_runner_on_a_job_service_writes_the_same_dataset(
    corpus, local_run):
  """The Job API path Flink and Spark use: Beam's local job service (a
  real server process on 127.0.0.1), the job submitted by PortableRunner,
  the SDK harness in the submitting process (LOOPBACK)."""
  with job_service() as port:
    _assert_the_same_as_local(corpus, local_run, 'portable', [
        '--runner=PortableRunner', f'--job_endpoint=localhost:{port}',
        '--environment_type=LOOPBACK'])


def _assert_the_same_as_local(corpus, local_run, name, runner_flags,
                              sink=True):
  """Windows, segments and (`sink`) Beam's sink with `runner_flags`:
  every file as the local runner writes it (the sink: the same examples
  and counts)."""
  out = corpus / name
  _run_cli(_flags(corpus, out) + runner_flags)
  segments = corpus / f'{name}_segments'
  _run_cli(_segment_flags(corpus, segments) + runner_flags)
  if not os.path.exists(corpus / 'local_segments'):
    _run_cli(_segment_flags(corpus, corpus / 'local_segments'))
  assert _digests(segments) == _digests(corpus / 'local_segments')
  assert _metadata(segments) == _metadata(corpus / 'local_segments')
  assert _digests(out) == _digests(local_run)
  assert _metadata(out) == _metadata(local_run)
  if sink:  # the specified shape on the same runner: the same examples
    sink_out = corpus / f'{name}_sink'
    _run_cli(_flags(corpus, sink_out) + runner_flags +
             ['--sink', 'write_to_tfrecord'])
    assert _all_records(sink_out) == _all_records(local_run)
    assert _metadata(sink_out)['counts'] == _metadata(local_run)['counts']


PRISM = os.path.join(os.path.dirname(sys.executable), 'prism')


def _prism_or_skip():
  """The Prism binary `make prism` builds; a skip only where no Go
  toolchain could build it."""
  if os.access(PRISM, os.X_OK):
    return PRISM
  if shutil.which('go') is None:
    pytest.skip('no Go toolchain here to build Beam\'s Prism runner '
                '(make prism)')
  pytest.fail(f'no Prism binary at {PRISM}: run make prism (Go is here)')


def _prism_processes():
  """PIDs of the processes running the Prism binary."""
  found = set()
  for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
      with open(f'/proc/{pid}/cmdline', 'rb') as f:
        if f.read().split(b'\0')[0] == PRISM.encode():
          found.add(int(pid))
    except OSError:  # gone meanwhile
      pass
  return found


def test_prism_runner_writes_the_same_dataset(corpus, local_run):
  """Beam's Prism runner, a real Go process serving the Job API, the SDK
  harness in the submitting process: every file as the local runner
  writes it, for windows and segments."""
  prism = ['--runner=PrismRunner', f'--prism_location={_prism_or_skip()}']
  before = _prism_processes()
  # Beam's sink is left out: on Prism 2.77 its job once stalled in a
  # clean clone's run (Prism reported every stage waiting).
  _assert_the_same_as_local(corpus, local_run, 'prism', prism, sink=False)
  # The Prism server each job started ended with it.
  assert _prism_processes() == before


SWEEP = {'fine': {'n_fft': 128, 'fft_hop': 32},
         'plain': {'features': 'signal,spectrogram'}}


def _sweep_flags(corpus, out):
  """A manifest run as a sweep of two variants whose examples differ in
  size, so that each cuts its splits into its own number of shards."""
  flags = _manifest_flags(corpus, out)
  at = flags.index('--max_examples_per_shard')
  del flags[at:at + 2]
  (corpus / 'sweep.json').write_text(json.dumps(SWEEP))
  return flags + ['--max_shard_bytes', '40000', '--variants',
                  str(corpus / 'sweep.json')]


def test_a_sweep_writes_the_same_variants_on_every_runner(corpus):
  _run_cli(_sweep_flags(corpus, corpus / 'sweep_local'))
  shards = {name: len(_metadata(corpus / 'sweep_local' / name)['splits']
                      ['train']['shards']) for name in SWEEP}
  assert len(set(shards.values())) == 2, shards
  with dask_cluster(workers=2, cwd=ROOT) as (address, _):
    _run_cli(_sweep_flags(corpus, corpus / 'sweep_dask') + [
        '--runner', 'DaskRunner', '--dask_client_address', address,
        '--dask_npartitions=2'])
  with job_service() as port:
    _run_cli(_sweep_flags(corpus, corpus / 'sweep_portable') + [
        '--runner=PortableRunner', f'--job_endpoint=localhost:{port}',
        '--environment_type=LOOPBACK'])
  for runner in ('dask', 'portable'):
    out = corpus / f'sweep_{runner}'
    assert sorted(os.listdir(out)) == sorted([*SWEEP, 'variants.json'])
    for name in SWEEP:
      assert _digests(out / name) == _digests(corpus / 'sweep_local' / name)
      assert _metadata(out / name) == _metadata(
          corpus / 'sweep_local' / name)


def _all_records(out):
  import collections
  from pipeline.contract import tfrecord
  found = collections.Counter()
  for name in os.listdir(out):
    if '.tfrecord-' in name:
      with open(os.path.join(out, name), 'rb') as f:
        found.update(r for _, r in tfrecord.read_records(f))
  return found


def test_multi_processing_workers_write_the_same_dataset(corpus, local_run):
  out = corpus / 'multi'
  _run_cli(_flags(corpus, out) + ['--direct_num_workers=2',
                                  '--direct_running_mode=multi_processing'])
  assert _digests(out) == _digests(local_run)
  assert _metadata(out) == _metadata(local_run)


def test_non_local_file_system_for_input_and_output(corpus, local_run):
  """The whole job on mem:// (an in-memory Beam FileSystem): no code path
  may touch local files; the output equals the local run byte for byte."""
  from tests import memfs
  for path in sorted((corpus / 'in').rglob('*.wav')):
    rel = path.relative_to(corpus / 'in').as_posix()
    memfs.put(f'mem://corpus/{rel}', path.read_bytes())
  config = H.make_config('mem://corpus', 'mem://out', win_len=1024,
                         hop_len=768, pad=True, splits='train=0.7,test=0.3',
                         max_examples_per_shard=9,
                         features=('signal', 'spectrogram', 'log_mel'),
                         n_fft=256, fft_hop=128)
  import apache_beam as beam
  from pipeline import graph, output_folder
  from pipeline.commands import run
  p = beam.Pipeline(options=run.pipeline_options([]))  # threads: one process
  graph.build_pipeline(p, config)
  output_folder.prepare(config, 'run-1')
  p.run().wait_until_finish()
  names = [p[len('mem://out/'):] for p in memfs.listing('mem://out/')]
  local = _digests(local_run)
  assert sorted(n for n in names if n != 'metadata.json') == sorted(local)
  for name in local:
    data = memfs.get(f'mem://out/{name}')
    if name == 'rejects.jsonl':  # paths differ: mem://corpus vs the folder
      data = data.replace(b'mem://corpus', str(corpus / 'in').encode())
      assert data == (local_run / name).read_bytes()
    elif '.tfindex-' in name:  # offsets of the mem:// shard's records
      import io
      from pipeline.contract import tfrecord
      shard = memfs.get('mem://out/' + name.replace('.tfindex-', '.tfrecord-'))
      sizes = [len(d) + 16 for _, d in tfrecord.read_records(io.BytesIO(shard))]
      assert data.decode() == tfrecord.index_text(sizes)
    elif '.tfrecord-' in name:
      assert _records(data, 'mem://corpus') == _records(
          (local_run / name).read_bytes(), str(corpus / 'in'))
  meta = json.loads(memfs.get('mem://out/metadata.json'))
  assert meta['counts'] == _metadata(local_run)['counts']
  assert meta['splits'].keys() == _metadata(local_run)['splits'].keys()
  for split, entry in meta['splits'].items():
    local_entry = _metadata(local_run)['splits'][split]
    assert [s['num_examples'] for s in entry['shards']] == \
        [s['num_examples'] for s in local_entry['shards']]
    assert entry['statistics'] == local_entry['statistics']


def _records(shard: bytes, root: str):
  """A shard's examples in order, file paths made relative to `root`."""
  import io
  import tensorflow as tf
  from pipeline.contract import tfrecord
  out = []
  for _, data in tfrecord.read_records(io.BytesIO(shard)):
    example = tf.train.Example.FromString(data)
    path = example.features.feature['filepath'].bytes_list.value
    path[0] = path[0].replace(root.encode(), b'ROOT')
    out.append(example)
  return out


def _launcher_args(name, *args, env=None):
  """The arguments a launcher passes to pipeline.run (PRINT_ONLY=1)."""
  import shlex
  proc = subprocess.run(
      [os.path.join(ROOT, 'launch', name), *args], capture_output=True,
      text=True, env=dict(os.environ, PRINT_ONLY='1', **(env or {})))
  assert proc.returncode == 0, proc.stderr
  argv = shlex.split(proc.stdout)
  assert argv[1:3] == ['-m', 'pipeline.run']
  return argv[3:]


def _build(argv):
  import apache_beam as beam
  from pipeline import config as config_lib
  from pipeline import graph
  from pipeline.commands import run
  config, beam_args = config_lib.parse_known_args(argv)
  options = run.pipeline_options(beam_args)
  p = beam.Pipeline(options=options)
  graph.build_pipeline(p, config)
  return p, options


def test_dataflow_job_builds_offline(corpus, tmp_path, monkeypatch):
  argv = _launcher_args(
      'dataflow', str(corpus / 'in'), str(tmp_path / 'out'), '--dry_run=True',
      '--win_len', '1024', env={'PROJECT': 'wavbeam-test',
                                'BUCKET': 'wavbeam-bucket',
                                'MAX_WORKERS': '7'})
  monkeypatch.chdir(tmp_path)
  p, options = _build(argv)
  result = p.run()
  assert result.state == 'DONE'
  job = result.job
  top = {t.unique_name for t in job.proto_pipeline.components.transforms
         .values() if '/' not in t.unique_name}
  assert {'ListWavFiles', 'ProbeAndPlan', 'PlanLayout', 'WriteSegments',
          'Finalize'} <= top
  staged = [d.role_payload for env in
            job.proto_pipeline.components.environments.values()
            for d in env.dependencies]
  assert any(b'workflow.tar.gz' in s for s in staged)  # setup.py, as sdist
  opts = job.options.get_all_options()
  assert opts['project'] == 'wavbeam-test' and opts['max_num_workers'] == 7
  assert opts['setup_file'] == os.path.join(ROOT, 'setup.py')
  assert opts['temp_location'].startswith('gs://wavbeam-bucket/wavbeam/temp')
  assert not os.path.exists(tmp_path / 'out' / 'metadata.json')
  # The specified shape (--sink write_to_tfrecord) builds for Dataflow too.
  p, _ = _build(argv + ['--sink', 'write_to_tfrecord'])
  result = p.run()
  assert result.state == 'DONE'
  names = {t.unique_name for t in result.job.proto_pipeline.components
           .transforms.values()}
  assert 'EncodeAndWriteToTFRecord' in names and 'WriteSegments' not in names
  assert any(n.startswith('EncodeAndWriteToTFRecord/WriteToTFRecord0/')
             for n in names)
  # A sweep is one Dataflow job too: one listing, every variant finalized.
  (tmp_path / 'sweep.json').write_text(json.dumps(SWEEP))
  import apache_beam as beam
  from pipeline import config as config_lib
  from pipeline import graph, variants
  config, _ = config_lib.parse_known_args(
      argv + ['--variants', str(tmp_path / 'sweep.json')])
  p = beam.Pipeline(options=options)
  graph.build_sweep_pipeline(p, config, variants.configs(config))
  result = p.run()
  assert result.state == 'DONE'
  names = {t.unique_name for t in result.job.proto_pipeline.components
           .transforms.values() if '/' not in t.unique_name}
  assert {'ListWavFiles', 'ProbeAndPlan', 'WriteSegments', 'Finalize',
          'AllFinal'} <= names


def test_job_graph_holds_no_file_names_and_does_not_grow(corpus, tmp_path):
  """The input is listed by the job: its graph (what Dataflow receives, and
  refuses past about 10 MB) names the folder, not its files, and is the
  same size for 12 files and for 400."""
  big = tmp_path / 'big'
  for i in range(400):
    name = hashlib.sha1(str(i).encode()).hexdigest()  # incompressible
    H.write_wav(str(big / 'c' / f'{name}.wav'), H.noise(1100, seed=i))

  def job_graph(input_dir):
    argv = _flags(corpus, tmp_path / 'out')
    argv[1] = str(input_dir)
    p, _ = _build(argv)
    return p.to_runner_api().SerializeToString()

  small, large = job_graph(corpus / 'in'), job_graph(big)
  # 400 names of 40 hex digits: 16 kB, at least 8 kB compressed.
  assert abs(len(large) - len(small)) <= 256


def test_worker_package_needs_no_tensorflow_and_carries_its_pins(tmp_path):
  """The sdist Beam stages for --setup_file (built the way Beam's stager
  builds it): its requirement files travel with it, and what a worker
  installs is the runtime alone."""
  import tarfile
  subprocess.run([sys.executable, 'setup.py', '-q', 'sdist', '--dist-dir',
                  str(tmp_path)], cwd=ROOT, check=True, capture_output=True)
  (sdist,) = tmp_path.glob('wavbeam-*.tar.gz')
  with tarfile.open(sdist) as tar:
    names = {n.split('/', 1)[1] for n in tar.getnames() if '/' in n}
    assert {'requirements.txt', 'requirements-tf.txt',
            'requirements-inspect.txt', 'requirements-test.txt'} <= names
    requires = tar.extractfile(next(
        m for m in tar.getmembers()
        if m.name.endswith('.egg-info/requires.txt'))).read().decode()
  # requires.txt: the core requirements, then one [extra] section each.
  sections, current = {}, ''
  for line in requires.splitlines():
    if line.startswith('['):
      current = line.strip('[]')
    elif line:
      sections.setdefault(current, []).append(line)
  core = sections['']
  assert 'apache-beam==2.77.0' in core and 'soxr==1.1.0' in core
  assert not any(r.startswith(('tensorflow==', 'tensorflow-datasets',
                               'pytest', 'matplotlib', 'hypothesis'))
                 for r in core), core
  assert sections['tf'] == ['tensorflow==2.21.0']
  assert sections['dask'] == ['apache-beam[dask]==2.77.0']


def test_flink_pipeline_converts_to_its_portable_form(corpus, tmp_path):
  from apache_beam.options.pipeline_options import (FlinkRunnerOptions,
                                                    PortableOptions)
  argv = _launcher_args('flink', str(corpus / 'in'), str(tmp_path / 'out'),
                        env={'FLINK_MASTER': 'flink.example:8081',
                             'PARALLELISM': '8'})
  p, options = _build(argv)
  flink = options.view_as(FlinkRunnerOptions)
  assert flink.flink_master == 'flink.example:8081'
  assert flink.parallelism == 8 and flink.flink_version == '1.19'
  assert options.view_as(PortableOptions).environment_type == 'DOCKER'
  proto = p.to_runner_api()
  names = {t.unique_name for t in proto.components.transforms.values()}
  assert {'WriteSegments/GroupBySegment', 'WriteSegments/ComputeAndWrite',
          'Finalize'} <= names
  # Every DoFn pickles into the portable pipeline (what remote workers get).
  import apache_beam as beam
  roundtrip = beam.Pipeline.from_runner_api(proto, p.runner, options)
  assert roundtrip is not None
