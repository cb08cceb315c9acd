"""Hostile and odd inputs: every case processed as documented or rejected
with its reason, and the counts add up (docs/failures.md, "Bad and odd
input")."""

import collections
import json
import os
import subprocess
import sys

import numpy as np

from pipeline.readers import tf_dataset as replay
from tests import helpers as H
from tests import hostile
from transforms.inputs import audio_io

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
def _run_cli(argv):
  # stdin: a pipe nobody writes to (x/dev_stdin.wav leads there); a run
  # that opened it would wait until the timeout.
  return subprocess.run(
      [sys.executable, '-m', 'pipeline.run', *argv], cwd=ROOT,
      capture_output=True, text=True, stdin=subprocess.PIPE, timeout=600,
      preexec_fn=H.without_root_file_access if os.geteuid() == 0 else None)


def test_catalogue_of_hostile_inputs(tmp_path):
  d = tmp_path / 'in[1]'   # glob characters in the folders' names too
  cases = hostile.write_catalogue(str(d))
  locked = str(d / 'x/unreadable.wav')
  hostile._sf(hostile._pcm16(hostile.WIN * 2), 'PCM_16')(locked)
  os.chmod(locked, 0)
  cases.append(('x/unreadable.wav', None, ('rejected', 'unreadable')))
  expected = {audio_io.undecodable_name(str(d / rel)) or str(d / rel): outcome
              for rel, _, outcome in cases
              if outcome[0] != 'dir'}   # a directory is searched, not a file
  out = tmp_path / 'out[1]'
  proc = _run_cli(['--input_dir', str(d), '--output_dir', str(out),
                   '--win_len', str(hostile.WIN),
                   '--features', 'signal,spectrogram'])
  assert proc.returncode == 0, proc.stderr[-3000:]

  meta = replay.load_metadata(str(out))
  with open(out / 'rejects.jsonl', encoding='utf-8') as f:
    rejects = [json.loads(line) for line in f]
  reasons, notes = collections.defaultdict(list), {}
  for r in rejects:
    if 'note' in r:
      notes[r['path']] = r['note']
    else:
      reasons[r['path']].append(r['reason'])
  assert {os.path.relpath(p, d) for p in notes} == set(hostile.NOTES)
  for rel, prefix in hostile.NOTES.items():
    assert notes[str(d / rel)].startswith(prefix), notes
  got = H.replayed(str(out))
  examples_of = collections.Counter(e['filepath'].decode()
                                    for e in got.values())

  for path, (kind, value) in expected.items():
    name = os.path.relpath(path, d)
    if kind == 'rejected':
      assert len(reasons[path]) == 1, (name, reasons[path])
      assert reasons[path][0].startswith(value), (name, reasons[path])
      assert examples_of[path] == 0, name
    elif kind == 'partial':   # bad windows rejected, the others written
      assert len(reasons[path]) == len(hostile._nan_inf()) // hostile.WIN \
          - value, (name, reasons[path])
      assert all(r.startswith('non-finite') for r in reasons[path]), name
      assert examples_of[path] == value, name
    else:
      assert not reasons[path], (name, reasons[path])
      assert examples_of[path] == value, name
  assert set(reasons) <= set(expected), set(reasons) - set(expected)
  assert set(examples_of) <= set(expected), set(examples_of) - set(expected)

  counts = meta['counts']
  assert counts['files_seen'] == len(expected)
  assert counts['files_seen'] == counts['files_ok'] + counts['files_rejected']
  assert counts['files_rejected'] == sum(
      1 for kind, _ in expected.values() if kind in ('rejected', 'partial'))
  assert counts['rejections'] + counts['notes'] == len(rejects)
  assert counts['notes'] == len(hostile.NOTES)
  shards = meta['splits']['train']['shards']
  assert (sum(s['num_examples'] for s in shards) == counts['examples'] ==
          len(got))

  # Every written example equals an independent whole-file read, bit for
  # bit, and no feature holds NaN or Inf.
  config = H.make_config(d, out, win_len=hostile.WIN,
                         features=('signal', 'spectrogram'))
  for path in examples_of:
    starts, windows = H.reference_windows(path, config)
    feats = H.reference_features(windows, config, hostile.RATE)
    for i, start in enumerate(starts):
      key = (next(e['index'] for e in got.values()
                  if e['filepath'].decode() == path), start)
      if key not in got:
        continue   # a rejected window (nan_inf.wav)
      for feature, value in feats.items():
        # mp3_inside.wav too: lossy content is decoded whole, by content.
        assert np.array_equal(got[key][feature], value[i]), (path, feature)
        assert np.isfinite(got[key][feature]).all(), (path, feature)
  # Peaks above 1.0 saturate the integer signal, not the spectrogram.
  hot = [e for e in got.values() if e['filepath'].endswith(b'hot_float.wav')]
  assert max(np.abs(e['signal']).max() for e in hot) >= 2**31 - 1
  assert any(e['spectrogram'].max() > 0 for e in hot)


def test_a_file_rewritten_after_probing_is_rejected_not_mixed(tmp_path):
  """Rewritten between probing and reading, even to the same size: the
  windows read afterwards are rejected with the reason, never taken from
  the new content."""
  from transforms.writing import extract
  from transforms.planning import rules as plan_lib
  path = str(tmp_path / 'in' / 'a' / 'take.wav')
  H.write_wav(path, hostile._pcm16(hostile.WIN * 4, 1))
  config = H.make_config(tmp_path / 'in', tmp_path / 'out',
                         win_len=hostile.WIN, label_from='none')
  info, note = audio_io.probe(0, path)
  assert note is None
  plan = plan_lib.plan_file(info, config, hostile.RATE)
  refs = [(0, w) for w in range(plan.num_windows)]
  with audio_io.OpenFiles() as files:
    windows, kept, rejections = extract.read_windows(refs, {0: plan}, config,
                                                     files)
  assert kept == [0, 1, 2, 3] and not rejections
  size = os.path.getsize(path)
  H.write_wav(path, hostile._pcm16(hostile.WIN * 4, 2))  # same size
  os.utime(path, ns=(1, 1))
  assert os.path.getsize(path) == size
  for run_of in (1, 4):   # one window at a time (shuffled), and a run
    with audio_io.OpenFiles() as files:
      _, kept, rejections = extract.read_windows(refs[:run_of], {0: plan},
                                                 config, files)
    assert kept == [] and len(rejections) == 1, rejections
    assert rejections[0].reason.startswith('changed since it was probed')


def test_a_16_bit_file_rewritten_as_float_is_rejected_not_wrapped(tmp_path):
  """Read without the open files' check (each range opened on its own):
  a mono 16-bit file rewritten as float samples the int16 windows cannot
  hold has those windows rejected with the reason, not wrapped into
  16-bit values."""
  from transforms.writing import extract
  from transforms.planning import rules as plan_lib
  path = str(tmp_path / 'in' / 'a' / 'take.wav')
  H.write_wav(path, hostile._pcm16(hostile.WIN * 4, 1))
  config = H.make_config(tmp_path / 'in', tmp_path / 'out',
                         win_len=hostile.WIN, label_from='none')
  info, _ = audio_io.probe(0, path)
  plan = plan_lib.plan_file(info, config, hostile.RATE)
  refs = [(0, w) for w in range(plan.num_windows)]
  windows, kept, rejections = extract.read_windows(refs, {0: plan}, config)
  assert windows.dtype == np.int16 and kept == [0, 1, 2, 3]
  H.write_wav(path, np.full(hostile.WIN * 4, 1.25), subtype='FLOAT')
  for run_of in (1, 4):   # one window at a time (shuffled), and a run
    _, kept, rejections = extract.read_windows(refs[:run_of], {0: plan},
                                               config)
    assert kept == [] and len(rejections) == 1, rejections
    assert rejections[0].reason == ('samples that are not the 16-bit PCM '
                                    'it was probed as')


def test_a_folder_tree_deeper_than_the_recursion_limit(tmp_path):
  deep = str(tmp_path / 'in')
  os.mkdir(deep)
  for _ in range(sys.getrecursionlimit() + 100):  # os.makedirs recurses
    deep = os.path.join(deep, 'd')
    os.mkdir(deep)
  for path in (os.path.join(deep, 'bottom.wav'), tmp_path / 'in' / 'top.wav'):
    with open(path, 'wb') as f:  # libsndfile refuses such long names
      f.write(hostile.wav_bytes(hostile._pcm16(hostile.WIN)))
  assert len(audio_io.list_audio_files(str(tmp_path / 'in'))) == 2
  config = H.make_config(tmp_path / 'in', tmp_path / 'out',
                         win_len=hostile.WIN, label_from='none')
  try:
    meta = H.run_pipeline(config)
    assert meta['counts']['files_ok'] == 2
    assert meta['counts']['examples'] == 2
  finally:  # bottom up: shutil.rmtree (pytest's clean-up) recurses too
    os.remove(os.path.join(deep, 'bottom.wav'))
    while deep != str(tmp_path / 'in'):
      os.rmdir(deep)
      deep = os.path.dirname(deep)
