"""Test corpora (real WAV files via soundfile) and an independent reference.

The reference reads each file whole with soundfile and cuts windows with a
plain Python loop, then applies the pure numpy feature functions: it shares
no code with the pipeline's block reading, chunking or encoding.
"""

import ctypes
import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
import numpy as np
import scipy.fft
import soundfile as sf

from pipeline import config as config_lib
from pipeline import output_folder
from pipeline import graph
from pipeline.contract import metadata as metadata_lib
from pipeline.readers import tf_dataset as replay
from pipeline.commands import run as run_lib
from pipeline.contract import schema as schema_lib
from transforms.inputs import audio
from transforms.runtime import counters
from pipeline.contract import example_codec
from transforms.features import functions as F
from transforms.runtime import output_lock as run_marker
from pipeline.contract import tfrecord

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_wav(path, data, rate=16000, subtype='PCM_16', fmt='WAV'):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  sf.write(path, data, rate, subtype=subtype, format=fmt)
  return path


def noise(n, channels=1, seed=0, scale=0.5):
  rng = np.random.default_rng(seed)
  shape = (n,) if channels == 1 else (n, channels)
  return (rng.uniform(-1, 1, shape) * scale).astype(np.float64)


def make_config(input_dir, output_dir, **kw):
  return config_lib.PipelineConfig(input_dir=str(input_dir),
                                   output_dir=str(output_dir), **kw)


def run_pipeline(config, extra_features=None, options=None):
  """Builds the job on a local pipeline, prepares the output folder as the
  CLI does, and runs it to completion."""
  p = beam.Pipeline(options=run_lib.pipeline_options(options or []))
  run_id = run_marker.new_run_id()
  graph.build_pipeline(p, config, extra_features, run_id)
  output_folder.prepare(config, run_id)
  p.run().wait_until_finish()
  return replay.load_metadata(config.output_dir)


def job_metrics(result) -> dict:
  """wavbeam's Beam counters of a finished run: {name: int}.

  Empty where the runner keeps no metrics (Beam's DaskRunner).
  """
  try:
    found = result.metrics().query(
        MetricsFilter().with_namespace(counters.NAMESPACE))
  except (AttributeError, NotImplementedError):
    return {}
  values = {}
  for c in found.get('counters', []):
    values[c.key.metric.name] = values.get(c.key.metric.name, 0) + c.committed
  return values


def replayed(output_dir, split='train', **kw):
  """All elements as numpy, keyed by (file index, window start)."""
  out = {}
  for element in replay.replay_dataset(output_dir, split, **kw):
    e = {k: v.numpy() for k, v in element.items()}
    out[(int(e['index']), int(e['win_start_idx']))] = e
  return out


def reference_windows(path, config, dataset_rate=None):
  """Whole file -> (window starts, (n, win_len) float64 windows)."""
  # One read from the start: lossy formats decode to other values after a
  # seek, and soundfile.read seeks to frame 0 first.
  with open(path, 'rb') as f, sf.SoundFile(f) as wav:
    data, rate = wav.read(dtype='float64', always_2d=True), wav.samplerate
  mono = data[:, 0] if config.channels == 'first' else data.mean(axis=1)
  if dataset_rate and dataset_rate != rate:
    n_out = audio.resampled_length(len(mono), rate, dataset_rate)
    mono = audio.resample_range(mono, 0, len(mono), rate, dataset_rate, 0,
                                n_out)
  windows, starts = [], []
  start = 0
  while start < len(mono):
    segment = mono[start:start + config.win_len]
    full = len(segment) == config.win_len
    covered = starts and starts[-1] + config.win_len >= len(mono)
    if not full and (not config.pad or covered):
      break
    windows.append(np.pad(segment, (0, config.win_len - len(segment))))
    starts.append(start)
    if not full:
      break
    start += config.hop_len
  if config.max_windows_per_signal is not None:
    starts = starts[:config.max_windows_per_signal]
    windows = windows[:config.max_windows_per_signal]
  return starts, np.array(windows).reshape(-1, config.win_len)


def reference_features(windows, config, rate):
  w32 = windows.astype(np.float32)
  out = {'signal': audio.to_signal_dtype(windows, config.signal_dtype)}
  win = F.window_function(config.fft_window, config.n_fft)
  mag = F.stft_magnitude(w32, config.n_fft, config.fft_hop, win)
  out['spectrogram'] = (np.log(mag + np.float32(F.LOG_OFFSET))
                        if config.spectrogram_scale == 'log' else mag)
  out['log_mel'] = np.log(F.mel_spectrogram(
      mag, F.mel_filterbank(config.n_mels, config.n_fft, rate, config.fmin,
                            config.fmax)) + np.float32(F.LOG_OFFSET))
  # The functions themselves are checked against TensorFlow and scipy
  # (tests/test_features.py); here, that the run feeds them the right
  # inputs and options.
  out['mfcc'] = F.mfcc(out['log_mel'], config.n_mfcc)
  frames = np.stack([np.stack([w[s:s + config.n_fft] * win for s in range(
      0, len(w) - config.n_fft + 1, config.fft_hop)]) for w in w32])
  out['lpc'] = F.lpc(frames, config.lpc_order)
  out['fft'] = np.abs(scipy.fft.rfft(w32, axis=-1))
  return {k: v for k, v in out.items() if k in config.features}


def assert_matches_reference(output_dir, config, paths, classes, rate):
  """Every replayed element equals the reference, bit for bit; no extras."""
  got = replayed(output_dir)
  expected_keys = set()
  for index, path in enumerate(paths):
    starts, windows = reference_windows(path, config, rate)
    feats = reference_features(windows, config, rate)
    label = os.path.basename(os.path.dirname(path))
    for i, start in enumerate(starts):
      key = (index, start)
      expected_keys.add(key)
      e = got[key]
      assert e['filepath'].decode() == path
      assert e['class'].decode() == label
      assert e['target'] == classes.index(label)
      assert e['num_classes'] == len(classes)
      for name, value in feats.items():
        assert e[name].dtype == value[i].dtype, (path, name)
        assert e[name].shape == value[i].shape, (path, name)
        assert np.array_equal(e[name], value[i]), (path, name, start)
  assert set(got) == expected_keys
  return got


def schema_of(element):
  """The Schema of one element {key: value} (example_codec.spec_of)."""
  return schema_lib.Schema.of({k: example_codec.spec_of(v)
                               for k, v in element.items()})


def encode_example(element, schema=None) -> bytes:
  """One element serialized by example_codec.encode_batch, as the writer
  does a batch; with `schema`, its dtypes and shapes checked first."""
  if schema is not None:
    for key, value in element.items():
      spec = example_codec.spec_of(value)
      if schema[key] != spec:
        raise schema_lib.SchemaError(
            f'feature {key!r}: expected {schema[key]}, got {spec}')
  arrays = (schema_lib.RAW_BYTES, schema_lib.FLOAT_LIST)
  columns = {k: example_codec.to_array(v)[None]
             if example_codec.spec_of(v).encoding in arrays else [v]
             for k, v in element.items()}
  return example_codec.encode_batch(columns, 1)[0]


def num_stft_frames(win_len: int, n_fft: int, fft_hop: int) -> int:
  """STFT frames of one window: frames are not padded (features.py)."""
  return (win_len - n_fft) // fft_hop + 1


_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


def without_root_file_access():
  """In the child before exec: root loses the capabilities that bypass
  file permissions, so a mode-000 file is unreadable, as for any user."""
  libc = ctypes.CDLL(None, use_errno=True)
  for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
    if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
      raise OSError(ctypes.get_errno(), 'prctl(PR_CAPBSET_DROP) failed')


def to_format_1(src: str, dst: str) -> None:
  """A copy of dataset `src` with float32 arrays stored as raw bytes."""
  shutil.rmtree(dst, ignore_errors=True)
  shutil.copytree(src, dst)
  meta = json.load(open(os.path.join(src, 'metadata.json')))
  schema = metadata_lib.schema_of(meta)
  arrays = [k for k, s in schema.features
            if s.encoding == schema_lib.FLOAT_LIST and s.shape]
  for entry in meta['splits'].values():
    for shard in entry['shards']:
      with open(os.path.join(src, shard['file']), 'rb') as f:
        records = [data for _, data in tfrecord.read_records(f)]
      with open(os.path.join(dst, shard['file']), 'wb') as f:
        for record in records:
          element = example_codec.decode_example(record, schema)
          for key in arrays:  # raw bytes, as a uint8 view: version 1's bytes
            element[key] = np.ascontiguousarray(element[key]).view(np.uint8)
          tfrecord.write_record(f, encode_example(element))
      shard['num_bytes'] = os.path.getsize(os.path.join(dst, shard['file']))
      shard.pop('records_crc32c')  # version 1 recorded no digest
    entry['num_bytes'] = sum(s['num_bytes'] for s in entry['shards'])
  for key in arrays:
    meta['schema'][key]['encoding'] = schema_lib.RAW_BYTES
  meta['format_version'] = 1
  with open(os.path.join(dst, 'metadata.json'), 'w') as f:
    f.write(metadata_lib.dumps(meta))


def doc_files():
  """README.md and every docs/*.md page, in that order."""
  return [os.path.join(ROOT, 'README.md')] + sorted(
      glob.glob(os.path.join(ROOT, 'docs', '*.md')))


def documented_command(heading):
  """The `python -m pipeline.run ...` block under `#### heading` in
  README.md or a docs/*.md page, as argv (python replaced by this
  interpreter)."""
  marker = f'#### {heading}\n'
  texts = [open(p, encoding='utf-8').read() for p in doc_files()]
  found = [t for t in texts if marker in t]
  assert len(found) == 1, f'{marker!r} in {len(found)} documentation files'
  section = found[0].split(marker, 1)[1]
  block = re.search(r'```sh\n(.*?)```', section, re.S).group(1)
  argv = shlex.split(block.replace('\\\n', ' '))
  assert argv[:3] == ['python', '-m', 'pipeline.run'], argv
  return [sys.executable] + argv[1:]


def run_documented_command(heading, cwd):
  """Runs the documented command for a corpus, as printed, in `cwd` (where
  the corpus was unpacked); returns the dataset folder."""
  argv = documented_command(heading) + ['--quiet']
  env = dict(os.environ, PYTHONPATH=ROOT)
  proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True,
                        text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return os.path.join(cwd, argv[argv.index('--output_dir') + 1])


# Runs stopped at an exact step of their work.
DRIVER = r'''
import os, signal, sys, time
step, action = sys.argv[1], sys.argv[2]
LAUNCHER = os.getpid()

def at(name):
  if name != step:
    return
  if action == 'kill':
    if os.getpid() != LAUNCHER:  # a forked worker: the whole run goes
      os.kill(LAUNCHER, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
  open(action + '.here', 'w').close()
  while not os.path.exists(action + '.go'):
    time.sleep(0.02)

from pipeline import append, output_folder
from pipeline.commands import run
from transforms.writing import finalize

def around(module, name, before=None, after=None, when=lambda *a: True):
  original = getattr(module, name)
  def wrapped(*args, **kwargs):
    hit = when(*args)
    if before and hit:
      at(before)
    value = original(*args, **kwargs)
    if after and hit:
      at(after)
    return value
  setattr(module, name, wrapped)

around(append, 'open_parts', before='locked')
around(output_folder, 'prepare', after='prepared')
around(finalize, 'finalize_dataset', before='finalizing')
around(finalize, 'write_text', before='part_written',
       when=lambda path, text: path.endswith('parts.json'))
around(os, 'replace', before='renaming',
       when=lambda src, dst, *a: str(dst).endswith('parts.json'))
around(append, 'run_append', after='listed')
# A sweep's --append: its commit (variants.json), then every variant's
# parts.json in turn.
around(finalize, 'write_text', before='sweep_listing',
       when=lambda path, text: path.endswith('variants.json'))
around(os, 'replace', before='sweep_renaming',
       when=lambda src, dst, *a: str(dst).endswith('variants.json'))
parts_renamed = []
def second_parts_rename(src, dst, *a):
  if str(dst).endswith('parts.json'):
    parts_renamed.append(dst)
    return len(parts_renamed) == 2
  return False
around(os, 'replace', before='second_renaming', when=second_parts_rename)
around(append, 'run_sweep_append', after='listed')
# Inside the job: the layout planned, then in the shard work (a forked
# worker's, or the launcher's) a shard recorded as finished, a shard's
# third record, and the final step's renames.
from apache_beam.io.filesystems import FileSystems
from transforms.writing import kept_shards, shard_writer
from pipeline import progress
around(progress, 'write_plan', after='planned')
around(kept_shards, 'write_record', after='shard_recorded')
write_records = shard_writer.ShardFile.write_records
def records_then_mid_shard(self, records):
  """A shard's first two records written, then the step: records come a
  batch at a time."""
  if len(self.sizes) <= 2 < len(self.sizes) + len(records):
    written = 2 - len(self.sizes)
    write_records(self, records[:written])
    at('mid_shard')
    records = records[written:]
  write_records(self, records)
shard_writer.ShardFile.write_records = records_then_mid_shard
around(FileSystems, 'rename', after='published',
       when=lambda src, dst: any('.tfrecord-' in str(d) for d in dst))
around(finalize, 'write_interop_files', before='interop')
around(finalize, 'write_text', after='metadata_written',
       when=lambda path, text: str(path).endswith('/metadata.json'))
def second_finalize(*args):
  """Counted in a file: a sweep's variants may finish in other processes."""
  with open('finalized.count', 'ab') as f:
    f.write(b'.')
  return os.path.getsize('finalized.count') == 2
around(finalize, 'finalize_dataset', before='second_finalizing',
       when=second_finalize)
sys.exit(run.main(sys.argv[3:]))
'''

DRIVEN_STEPS = ['locked', 'prepared', 'finalizing', 'part_written', 'renaming',
         'listed']
# The steps of an --append to a sweep of two variants, in order.
SWEEP_APPEND_STEPS = ['locked', 'prepared', 'finalizing', 'sweep_listing',
                      'sweep_renaming', 'renaming', 'second_renaming',
                      'listed']


def ctrl_c_as_at_a_terminal() -> None:
  """A child process's SIGINT as a terminal gives it (preexec_fn): a test
  run in the background of a shell without job control inherits SIGINT
  ignored, and Python then never raises KeyboardInterrupt."""
  signal.signal(signal.SIGINT, signal.SIG_DFL)


class DrivenRun:
  """A real `pipeline.run` process started through DRIVER, which stops it
  at `step` (one of DRIVEN_STEPS): `kill` (SIGKILL there, as the OOM
  killer or a preempted machine would) or `hold` (it waits there until
  released). Its output goes to a file (a pipe would also wait for any
  process the run left behind)."""

  def __init__(self, step, action, *args, cwd, env=None):
    env = dict(os.environ, PYTHONPATH=ROOT, **(env or {}))
    self._log = cwd / f'{step}-{action}.log'
    with open(self._log, 'w') as log:
      self._proc = subprocess.Popen(
          [sys.executable, '-c', DRIVER, step, action, *args], cwd=cwd,
          env=env, stdout=log, stderr=log, preexec_fn=ctrl_c_as_at_a_terminal)
    self.pid = self._proc.pid
    self._cwd, self._action = cwd, action

  def wait_until_there(self):
    """Until a `hold` run has reached its step (it must not end first)."""
    deadline = time.monotonic() + 300  # against a hang only
    while not (self._cwd / f'{self._action}.here').exists():
      assert self._proc.poll() is None, self._log.read_text()[-3000:]
      assert time.monotonic() < deadline
      time.sleep(0.02)

  def release(self):
    (self._cwd / f'{self._action}.go').touch()

  def poll(self):
    return self._proc.poll()

  def wait(self):
    """(exit code, what the run printed)."""
    code = self._proc.wait(timeout=600)
    return code, self._log.read_text()

