"""The same pipeline on other runners: a real Dask cluster, Dataflow (dry
run) and Flink (portable pipeline), compared with the local runner."""

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _free_port():
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


@contextlib.contextmanager
def dask_cluster(workers=2):
  """A dask scheduler and worker processes on 127.0.0.1, stopped after."""
  from distributed import Client
  dask = os.path.join(os.path.dirname(sys.executable), 'dask')
  port = _free_port()
  address = f'tcp://127.0.0.1:{port}'
  procs = [subprocess.Popen(
      [dask, 'scheduler', '--host', '127.0.0.1', '--port', str(port),
       '--no-dashboard'], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)]
  try:
    for _ in range(workers):
      procs.append(subprocess.Popen(
          [dask, 'worker', address, '--nthreads', '1', '--no-dashboard',
           '--host', '127.0.0.1'], cwd=ROOT, stdout=subprocess.DEVNULL,
          stderr=subprocess.DEVNULL))
    with Client(address, timeout=60) as client:
      client.wait_for_workers(workers, timeout=120)
    yield address
  finally:
    for proc in reversed(procs):
      proc.terminate()
    for proc in procs:
      try:
        proc.wait(timeout=30)
      except subprocess.TimeoutExpired:
        proc.kill()


def _digests(out):
  return {name: hashlib.sha256(open(os.path.join(out, name), 'rb').read())
          .hexdigest() for name in sorted(os.listdir(out))
          if name != 'metadata.json'}


def _metadata(out):
  meta = json.load(open(os.path.join(out, 'metadata.json')))
  del meta['created'], meta['config']['output_dir']
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
  return d


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


def test_dask_cluster_writes_the_same_dataset(corpus, local_run):
  out = corpus / 'dask'
  with dask_cluster(workers=2) as address:
    _run_cli(_flags(corpus, out) + ['--runner', 'DaskRunner',
                                    '--dask_client_address', address])
  meta = _metadata(out)
  for split, entry in meta['splits'].items():
    for shard in entry['shards']:
      assert os.path.exists(out / shard['file'])
  assert os.path.exists(out / 'rejects.jsonl')
  assert not os.path.exists(out / '.wavbeam-incomplete')
  assert meta['counts']['files_rejected'] == 1
  assert sum(len(e['shards']) for e in meta['splits'].values()) > 2
  # Byte-identical to the local runner: shards, rejects, TFDS/TFX files,
  # and metadata apart from creation time and output folder.
  assert _digests(out) == _digests(local_run)
  assert meta == _metadata(local_run)
  for split in meta['splits']:
    assert H.replayed(str(out), split).keys() == \
        H.replayed(str(local_run), split).keys()


def test_multi_processing_workers_write_the_same_dataset(corpus, local_run):
  out = corpus / 'multi'
  _run_cli(_flags(corpus, out) + ['--direct_num_workers=2',
                                  '--direct_running_mode=multi_processing'])
  assert _digests(out) == _digests(local_run)
  assert _metadata(out) == _metadata(local_run)
