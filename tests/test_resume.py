"""--resume: a run killed at any step of its work, resumed, gives the
bytes of an uninterrupted run; what it keeps is checked; what changed
since is refused."""

import datetime
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from pipeline.contract import metadata
from pipeline.contract import naming
from tests import helpers as H
from transforms.runtime import output_lock as run_marker
from transforms.writing import kept_shards

ROOT = H.ROOT
FLAGS = ['--win_len', '4096', '--features', 'signal,log_mel',
         '--max_examples_per_shard', '40', '--splits', 'train=0.75,test=0.25']
# The steps a run is killed at (tests/helpers.py's driver): after the
# folder is prepared, once the job has planned (before any shard), once a
# shard is recorded finished, in the middle of a shard, before the final
# step, and after the final step renamed the shards into place.
KILL_STEPS = ['prepared', 'planned', 'shard_recorded', 'mid_shard',
              'finalizing', 'published', 'interop']


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
  d = tmp_path_factory.mktemp('resume_corpus')
  for i in range(24):
    H.write_wav(str(d / f'c{i % 3}/f{i:02d}.wav'),
                H.noise(16000 * 4 + 131 * i, seed=i))
  H.write_wav(str(d / 'c0/short.wav'), H.noise(100, seed=99))  # a reject
  return d


def _flags(extra):
  """FLAGS with `extra`; for --example_unit file, without --win_len."""
  if '--example_unit' in extra:
    return [*FLAGS[2:], *extra]
  if '--max_shard_bytes' in extra:
    return [*FLAGS[:4], *FLAGS[6:], *extra]
  return [*FLAGS, *extra]


def _run(corpus, out, *extra, cwd=ROOT):
  """`wavbeam run` (from `cwd`, where a --feature_module may lie)."""
  return subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir', str(corpus),
       '--output_dir', str(out), *_flags(extra)], cwd=cwd,
      capture_output=True, text=True, timeout=600)


def _killed(corpus, out, step, *extra, tmp_path):
  code, log = H.DrivenRun(step, 'kill', '--input_dir', str(corpus),
                          '--output_dir', str(out), *_flags(extra),
                          cwd=tmp_path).wait()
  assert code == -signal.SIGKILL, (step, log[-2000:])


def digest(out, statistics=True):
  """Every file of a finished dataset (its parts', a sweep's variants')
  by hash; metadata without its times and output folder (and without
  its splits' statistics, unless `statistics`)."""
  digests = {}
  for folder, dirs, files in os.walk(out):
    dirs.sort()
    for name in sorted(files):
      if name == run_marker.LOCK_FILE:
        continue
      path = os.path.join(folder, name)
      with open(path, 'rb') as f:
        data = f.read()
      if name == naming.METADATA_FILE:
        meta = metadata.content(json.loads(data))
        meta['config'].pop('output_dir')
        meta['config'].pop('overwrite')
        if not statistics:
          for split in meta['splits'].values():
            split.pop('statistics')
        data = json.dumps(meta, sort_keys=True).encode()
      elif name == 'variants.json':  # names each variant's folder
        data = data.replace(str(out).encode(), b'OUT')
      digests[os.path.relpath(path, out)] = hashlib.sha256(data).hexdigest()
  return digests


@pytest.fixture(scope='module')
def uninterrupted(corpus, tmp_path_factory):
  out = tmp_path_factory.mktemp('resume_clean') / 'out'
  done = _run(corpus, out)
  assert done.returncode == 0, done.stderr[-2000:]
  return digest(out)


def _kept(out) -> int:
  with open(os.path.join(out, naming.METADATA_FILE)) as f:
    return (json.load(f)['shards_written'] or {}).get('shards_kept', 0)


@pytest.mark.parametrize('step', KILL_STEPS)
def test_killed_at_a_step_then_resumed_gives_the_same_bytes(
    corpus, uninterrupted, tmp_path, step):
  out = tmp_path / 'out'
  _killed(corpus, out, step, tmp_path=tmp_path)
  assert not os.path.exists(out / naming.METADATA_FILE)
  again = _run(corpus, out)  # without --resume: refused, named
  assert again.returncode == 2 and '--resume' in again.stderr
  resumed = _run(corpus, out, '--resume')
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert digest(out) == uninterrupted
  total = sum(len(e['shards']) for e in json.load(
      open(out / naming.METADATA_FILE))['splits'].values())
  kept = _kept(out)
  if step in ('finalizing', 'published', 'interop'):  # all were finished
    assert kept == total
    assert f'{kept} of the {total} shards kept' in resumed.stderr
  elif step in ('prepared', 'planned'):
    assert kept == 0
  else:
    assert kept < total
  check = subprocess.run([sys.executable, '-m', 'pipeline.verify', str(out)],
                         cwd=ROOT, capture_output=True, text=True)
  assert check.returncode == 0, check.stderr


def test_a_stop_after_metadata_is_a_complete_dataset(corpus, uninterrupted,
                                                    tmp_path):
  out = tmp_path / 'out'
  _killed(corpus, out, 'metadata_written', tmp_path=tmp_path)
  assert (out / naming.TEMP_DIR).exists()  # the stop came before its removal
  done = _run(corpus, out, '--resume')
  assert done.returncode == 0, done.stderr[-2000:]
  assert 'holds a complete dataset: nothing to resume' in done.stderr
  assert not (out / naming.TEMP_DIR).exists()
  assert digest(out) == uninterrupted
  other = _run(corpus, out, '--resume', '--n_mels', '40')
  assert other.returncode == 2 and '--n_mels: was 64, now 40' in other.stderr


def test_a_resume_killed_then_resumed_again(corpus, uninterrupted, tmp_path):
  out = tmp_path / 'out'
  _killed(corpus, out, 'shard_recorded', tmp_path=tmp_path)
  first = len(kept_shards.record_paths(str(out)))
  _killed(corpus, out, 'finalizing', '--resume', tmp_path=tmp_path)
  assert len(kept_shards.record_paths(str(out))) > first
  resumed = _run(corpus, out, '--resume')
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert digest(out) == uninterrupted


def _temp_shards(out):
  temp = os.path.join(out, naming.TEMP_DIR)
  return sorted(os.path.join(temp, n) for n in os.listdir(temp)
                if re.fullmatch(r'(train|test)-\d{5}-[0-9a-f]{32}', n))


def test_a_damaged_finished_shard_is_written_again(corpus, uninterrupted,
                                                  tmp_path):
  out = tmp_path / 'out'
  _killed(corpus, out, 'finalizing', tmp_path=tmp_path)
  shards = _temp_shards(out)
  assert len(shards) >= 3
  with open(shards[1], 'r+b') as f:  # one byte inside a record's data
    f.seek(100)
    byte = f.read(1)
    f.seek(100)
    f.write(bytes([byte[0] ^ 0x01]))
  resumed = _run(corpus, out, '--resume')
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert 'damaged' in resumed.stderr
  assert digest(out) == uninterrupted
  assert _kept(out) == len(shards) - 1


def test_what_changed_is_refused_naming_it(corpus, tmp_path):
  source = tmp_path / 'audio'
  shutil.copytree(corpus, source)
  out = tmp_path / 'out'
  _killed(source, out, 'finalizing', tmp_path=tmp_path)
  other = _run(source, out, '--resume', '--n_mels', '40')
  assert other.returncode == 2 and '--n_mels: was' in other.stderr
  both = _run(source, out, '--resume', '--overwrite')
  assert both.returncode == 2 and 'not both' in both.stderr
  sink = _run(source, out, '--resume', '--sink', 'write_to_tfrecord')
  assert sink.returncode == 2 and 'needs --sink shards' in sink.stderr
  # A finished shard's input rewritten (same size, new time).
  victim = source / 'c1' / 'f01.wav'
  stat = os.stat(victim)
  os.utime(victim, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
  changed = _run(source, out, '--resume')
  assert changed.returncode == 2 and f'{victim} changed' in changed.stderr
  os.utime(victim, ns=(stat.st_atime_ns, stat.st_mtime_ns))
  H.write_wav(str(source / 'c0/a_new.wav'), H.noise(16000 * 2, seed=7))
  added = _run(source, out, '--resume')
  assert added.returncode == 2 and 'added or removed' in added.stderr
  os.remove(source / 'c0/a_new.wav')
  resumed = _run(source, out, '--resume')
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  complete = _run(source, out, '--resume')
  assert complete.returncode == 0 and 'nothing to resume' in complete.stderr
  empty = tmp_path / 'empty'
  empty.mkdir()
  for folder in (empty, tmp_path / 'missing'):
    none = _run(source, folder, '--resume')
    assert none.returncode == 2 and 'no stopped wavbeam run' in none.stderr


FEATURE_MODULE = """
from transforms.features import registry

SCALE = {scale}


@registry.register
class Peak(registry.Feature):
  name = 'peak'
  help = 'the largest magnitude of each window, scaled'

  def compute(self, batch):
    return abs(batch.w32).max(axis=-1, keepdims=True) * SCALE
"""


def test_a_changed_feature_module_is_refused(corpus, tmp_path):
  (tmp_path / 'peak_feature.py').write_text(FEATURE_MODULE.format(scale=1))
  flags = ['--feature_module', 'peak_feature', '--features',
           'signal,log_mel,peak']
  out = tmp_path / 'out'
  _killed(corpus, out, 'shard_recorded', *flags, tmp_path=tmp_path)
  (tmp_path / 'peak_feature.py').write_text(FEATURE_MODULE.format(scale=2))
  refused = _run(corpus, out, '--resume', *flags, cwd=tmp_path)
  assert refused.returncode == 2, refused.stderr[-2000:]
  assert 'another version of wavbeam (or of a --feature_module)' in \
      refused.stderr
  (tmp_path / 'peak_feature.py').write_text(FEATURE_MODULE.format(scale=1))
  resumed = _run(corpus, out, '--resume', *flags, cwd=tmp_path)
  assert resumed.returncode == 0, resumed.stderr[-2000:]
  assert _kept(out) >= 1


def test_another_wavbeam_is_refused(corpus, tmp_path):
  out = tmp_path / 'out'
  _killed(corpus, out, 'finalizing', tmp_path=tmp_path)
  record = out / naming.TEMP_DIR / 'run.json'
  stored = json.loads(record.read_text())
  record.write_text(json.dumps(dict(stored, code='0' * 64)))
  refused = _run(corpus, out, '--resume')
  assert refused.returncode == 2
  assert 'another version of wavbeam' in refused.stderr


@pytest.mark.parametrize('extra', [
    ['--array_record'], ['--example_unit', 'file', '--max_seconds', '6'],
    ['--compression', 'gzip']], ids=['array_record', 'file', 'gzip'])
def test_resume_with_other_writers(corpus, tmp_path, extra):
  clean = tmp_path / 'clean'
  done = _run(corpus, clean, *extra)
  assert done.returncode == 0, done.stderr[-2000:]
  out = tmp_path / 'out'
  _killed(corpus, out, 'mid_shard', *extra, tmp_path=tmp_path)
  resumed = _run(corpus, out, '--resume', *extra)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert digest(out) == digest(clean)


# Examples of other sizes: the variants' shards end at other windows, so
# some are written in pieces (transforms/writing/sweep_writer.py).
SWEEP = '''
[small]
n_mels = 32
[big]
features = "signal,log_mel,mfcc"
n_mels = 64
'''
SWEEP_FLAGS = ['--max_shard_bytes', '300000']
ONE_AND_THREE = '''
[one]
features = "log_mel"
n_mels = 32
[three]
features = "signal,spectrogram"
n_fft = 1024
'''


@pytest.mark.parametrize('step', ['planned', 'shard_recorded', 'mid_shard',
                                  'finalizing'])
def test_a_sweep_resumes_every_variant(corpus, tmp_path, step):
  variants = tmp_path / 'variants.toml'
  variants.write_text(SWEEP)
  clean = tmp_path / 'clean'
  sweep = ['--variants', str(variants), *SWEEP_FLAGS]
  done = _run(corpus, clean, *sweep)
  assert done.returncode == 0, done.stderr[-2000:]
  out = tmp_path / 'out'
  _killed(corpus, out, step, *sweep, tmp_path=tmp_path)
  if step == 'finalizing':  # pieces were recorded too, and are kept
    assert any('-piece-' in p for v in ('small', 'big')
               for p in kept_shards.record_paths(str(out / v)))
    # Each shard's pieces went once it was assembled; their records stay.
    assert not [name for v in ('small', 'big')
                for name in os.listdir(out / v / naming.TEMP_DIR)
                if name.startswith('piece-')]
  refused = _run(corpus, out, *sweep)
  assert refused.returncode == 2
  began = datetime.datetime.now(datetime.timezone.utc)
  resumed = _run(corpus, out, '--resume', *sweep)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  # A piece gone into its assembled shard is not one to write again.
  assert 'damaged' not in resumed.stderr
  assert digest(out) == digest(clean)
  for variant in ('small', 'big'):  # the stopped run's time is not this run's
    written = json.loads((out / variant / 'metadata.json').read_text())[
        'shards_written']
    assert datetime.datetime.fromisoformat(written['first_started']) >= \
        began.replace(microsecond=began.microsecond // 1000 * 1000)
  again = _run(corpus, out, '--resume', *sweep)
  assert again.returncode == 0, again.stderr[-2000:]
  assert 'holds a complete sweep: nothing to resume' in again.stderr
  assert digest(out) == digest(clean)
  changed = tmp_path / 'changed.toml'
  changed.write_text(SWEEP.replace('n_mels = 64', 'n_mels = 48'))
  other = _run(corpus, out, '--resume', '--variants', str(changed),
               *SWEEP_FLAGS)
  assert other.returncode == 2 and '--n_mels: was 64, now 48' in other.stderr


@pytest.mark.parametrize('workers', ['1', '3'])
def test_a_sweep_resumes_with_another_worker_count(corpus, tmp_path,
                                                   workers):
  """A sweep cuts its segments by the worker count: a resume with another
  count writes again the pieces its shards need, though the stopped run
  removed them once its own pieces were joined."""
  variants = tmp_path / 'variants.toml'
  # In train, one shard of one (in pieces), three of two (cut by the one's
  # pieces).
  variants.write_text(ONE_AND_THREE)
  clean = tmp_path / 'clean'
  sweep = ['--variants', str(variants), '--max_shard_bytes', '5000000']
  done = _run(corpus, clean, *sweep)
  assert done.returncode == 0, done.stderr[-2000:]
  out = tmp_path / 'out'
  _killed(corpus, out, 'finalizing', *sweep, '--direct_num_workers', '2',
          tmp_path=tmp_path)
  resumed = _run(corpus, out, '--resume', *sweep, '--direct_num_workers',
                 workers)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert digest(out, statistics=False) == digest(clean, statistics=False)
  # Statistics merged over other pieces: the same to rounding.
  assert [len(json.loads((out / v / 'metadata.json').read_text())[
      'splits']['train']['shards']) for v in ('one', 'three')] == [1, 3]
  for variant in ('one', 'three'):
    ours, theirs = (
        json.loads((folder / variant / 'metadata.json').read_text())[
            'splits'] for folder in (out, clean))
    for split, entry in theirs.items():
      for key, m in entry['statistics'].items():
        got = ours[split]['statistics'][key]
        assert (got['count'], got['min'], got['max']) == (
            m['count'], m['min'], m['max'])
        assert got['mean'] == pytest.approx(m['mean'], rel=1e-9, abs=1e-12)
        assert got['std'] == pytest.approx(m['std'], rel=1e-9, abs=1e-12)


def test_a_sweep_with_a_finished_variant_refuses_other_options(corpus,
                                                              tmp_path):
  variants = tmp_path / 'variants.toml'
  variants.write_text(SWEEP)
  sweep = ['--variants', str(variants), *SWEEP_FLAGS]
  out = tmp_path / 'out'
  _killed(corpus, out, 'second_finalizing', *sweep, tmp_path=tmp_path)
  finished = [v for v in ('small', 'big')
              if (out / v / naming.METADATA_FILE).exists()]
  assert len(finished) == 1
  changed = tmp_path / 'changed.toml'
  changed.write_text(SWEEP.replace('n_mels = 64', 'n_mels = 48').replace(
      'n_mels = 32', 'n_mels = 40'))
  other = _run(corpus, out, '--resume', '--variants', str(changed),
               *SWEEP_FLAGS)
  assert other.returncode == 2 and 'other options' in other.stderr
  resumed = _run(corpus, out, '--resume', *sweep)
  assert resumed.returncode == 0, resumed.stderr[-2000:]


@pytest.mark.parametrize('step', ['planned', 'shard_recorded', 'mid_shard',
                                  'finalizing'])
def test_an_interrupted_append_resumes_its_part(corpus, tmp_path, step):
  source = tmp_path / 'audio'
  shutil.copytree(corpus, source)
  later = tmp_path / 'later'
  later.mkdir()
  for i in range(12):
    os.rename(source / f'c{i % 3}/f{i:02d}.wav', later / f'{i}.wav')
  clean, out = tmp_path / 'clean', tmp_path / 'out'
  for folder in (clean, out):
    made = _run(source, folder)
    assert made.returncode == 0, made.stderr[-2000:]
  for i in range(12):
    os.rename(later / f'{i}.wav', source / f'c{i % 3}/f{i:02d}.wav')
  appended = _run(source, clean, '--append')
  assert appended.returncode == 0, appended.stderr[-2000:]
  _killed(source, out, step, '--append', tmp_path=tmp_path)
  resumed = _run(source, out, '--append', '--resume')
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert digest(out) == digest(clean)


def test_a_dask_run_killed_then_resumed_on_the_cluster(corpus, uninterrupted,
                                                      tmp_path):
  """The cluster and the launcher killed once shards are finished (a
  killed launcher alone does not stop the job: the cluster finishes it);
  resumed on a new cluster."""
  from tests.dask_cluster import dask_cluster
  out = tmp_path / 'out'

  def on_dask(address):
    return ['--runner', 'DaskRunner', '--dask_client_address', address,
            '--dask_npartitions=2']
  with dask_cluster(workers=2, cwd=ROOT) as (address, pids):
    launcher = subprocess.Popen(
        [sys.executable, '-m', 'pipeline.run', '--input_dir', str(corpus),
         '--output_dir', str(out), *FLAGS, *on_dask(address)], cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while (launcher.poll() is None and
           len(kept_shards.record_paths(str(out))) < 2):
      time.sleep(0.005)
    for pid in [launcher.pid, *pids]:
      os.kill(pid, signal.SIGKILL)
    launcher.wait()
  assert not os.path.exists(out / naming.METADATA_FILE)
  assert kept_shards.record_paths(str(out))
  with dask_cluster(workers=2, cwd=ROOT) as (address, _):
    resumed = _run(corpus, out, '--resume', *on_dask(address))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert digest(out) == uninterrupted
  assert _kept(out) >= 1


def test_beams_worker_processes_killed_then_resumed(corpus, uninterrupted,
                                                   tmp_path):
  """Beam's own worker processes (multi_processing), killed with their
  launcher once shards are finished, resumed in the same mode."""
  out = tmp_path / 'out'
  mode = ['--direct_running_mode=multi_processing', '--direct_num_workers=2']
  launcher = subprocess.Popen(
      [sys.executable, '-m', 'pipeline.run', '--input_dir', str(corpus),
       '--output_dir', str(out), *FLAGS, *mode], cwd=ROOT,
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
      start_new_session=True)
  while (launcher.poll() is None and
         len(kept_shards.record_paths(str(out))) < 2):
    time.sleep(0.005)
  os.killpg(launcher.pid, signal.SIGKILL)
  launcher.wait()
  assert not os.path.exists(out / naming.METADATA_FILE)
  resumed = _run(corpus, out, '--resume', *mode)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert digest(out) == uninterrupted
  assert _kept(out) >= 1


# A feature of the caller's own, counting its calls (the runner pickles it
# by reference: it and its state are this module's), that fails once at
# call FAIL_AT['call'].
CALLS = {'count': 0}
FAIL_AT = {'call': None}


def peak(signal, rate):
  CALLS['count'] += 1
  if CALLS['count'] == FAIL_AT['call']:
    raise RuntimeError('the machine was preempted')
  return np.abs(signal).max(axis=-1, keepdims=True).astype(np.float32)


def test_a_failed_run_on_an_object_store_resumes(corpus):
  """mem:// (an in-memory Beam file system) in one process: a run that
  fails after some shards, resumed, equals a run that did not fail."""
  from apache_beam.io.filesystems import FileSystems
  from tests import memfs
  from pipeline.commands import run as run_lib
  for path in sorted(corpus.rglob('*.wav')):
    memfs.put(f'mem://resume_in/{path.relative_to(corpus).as_posix()}',
              path.read_bytes())

  def config(out, **kw):
    return H.make_config('mem://resume_in', out, win_len=4096,
                         features=('signal', 'log_mel'),
                         max_examples_per_shard=40,
                         splits='train=0.75,test=0.25', **kw)
  one_thread = ['--direct_running_mode=in_memory']
  run_lib.run(config('mem://resume_clean'), one_thread, {'peak': peak})
  total = CALLS['count']
  FAIL_AT['call'] = total + total * 2 // 3
  try:
    with pytest.raises(Exception, match='preempted'):
      run_lib.run(config('mem://resume_out'), one_thread, {'peak': peak})
  finally:
    FAIL_AT['call'] = None
  assert not memfs.listing('mem://resume_out/metadata.json')
  # The failed run's process would be gone, and its heartbeat with it.
  FileSystems.delete(['mem://resume_out/.wavbeam-incomplete/heartbeat'])
  run_lib.run(config('mem://resume_out', resume=True), one_thread,
              {'peak': peak})

  def files(root):
    found = {}
    for path in memfs.listing(root + '/'):
      data = memfs.get(path)
      name = path[len(root) + 1:]
      if name == naming.METADATA_FILE:
        meta = metadata.content(json.loads(data))
        meta['config'].pop('output_dir')
        data = json.dumps(meta, sort_keys=True).encode()
      found[name] = data
    return found
  assert files('mem://resume_out') == files('mem://resume_clean')
  meta = json.loads(memfs.get('mem://resume_out/metadata.json'))
  shards = sum(len(e['shards']) for e in meta['splits'].values())
  assert 0 < meta['shards_written']['shards_kept'] < shards
