"""Time-stamped segments from a manifest end to end: --example_unit
segment (one example per segment, cut sample-accurately, overlaps
allowed), windows cut inside segments, --split_by, and the rejections of
segments that cannot be used, each checked against slicing an
independent decode of the whole file."""

import collections
import csv
import decimal
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.readers import tf_dataset as replay
from pipeline.commands import run as run_lib
from pipeline.commands import verify
from pipeline.config import ConfigError
from transforms.inputs import audio
from tests import helpers as H

RATE = 16000
SPEAKERS = ('ann', 'bob', 'cy', 'dee', 'eve', 'fay')


def frames(seconds, rate=RATE):
  """Seconds to frames, rounded half up (the manifest's rule)."""
  return int(decimal.Decimal(round(seconds * rate, 8)).quantize(
      0, rounding=decimal.ROUND_HALF_UP))


def _corpus(d):
  """Six recordings of 3-5 s, one stereo at 22.05 kHz; a CSV of segments:
  several per recording, overlapping, with a transcript and speaker
  each, one speaker per recording; three that cannot be used."""
  rows = []
  for i in range(6):
    n = RATE * (3 + i % 3)
    if i == 5:
      H.write_wav(str(d / 'in' / f'r{i}.wav'), H.noise(66150, 2, seed=i),
                  rate=22050)
    else:
      H.write_wav(str(d / 'in' / f'r{i}.wav'), H.noise(n, seed=i))
    for j in range(4):
      start = round(0.37 * j + 0.1 * i, 4)
      end = round(start + 0.55 + 0.21 * j, 4)  # segments overlap
      rows.append({'path': f'r{i}.wav', 'start': start, 'end': end,
                   'sentence': f'words {i} {j}', 'client_id': SPEAKERS[i],
                   'label': ('yes', 'no')[j % 2]})
  rows.append({'path': 'r0.wav', 'start': 2.9, 'end': 3.5,  # past the end
               'sentence': 'late', 'client_id': 'ann', 'label': 'yes'})
  rows.append({'path': 'r1.wav', 'start': 1.0, 'end': 1.00001,  # no frame
               'sentence': 'none', 'client_id': 'bob', 'label': 'no'})
  rows.append({'path': 'r2.wav', 'start': 0.5, 'end': 0.51,  # too short
               'sentence': 'short', 'client_id': 'cy', 'label': 'no'})
  with open(d / 'segments.csv', 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  return rows


def _options(d, *extra):
  return ['--input_dir', str(d / 'in'), '--manifest', str(d / 'segments.csv'),
          '--manifest_start_column', 'start', '--manifest_end_column', 'end',
          '--manifest_label_column', 'label',
          '--manifest_extra_columns', 'sentence,client_id',
          '--sample_rate', str(RATE), *extra, '--runner=FnApiRunner']


def _source(path):
  """The whole recording at RATE, float64, decoded independently."""
  data, rate = sf.read(path, dtype='float64', always_2d=True)
  mono = data.mean(axis=1)
  if rate != RATE:
    n = audio.resampled_length(len(mono), rate, RATE)
    mono = audio.resample_range(mono, 0, len(mono), rate, RATE, 0, n)
  return mono


def _examples(out, split='train'):
  return list(numpy_reader.numpy_dataset(str(out), split))


@pytest.fixture(scope='module')
def segments(tmp_path_factory):
  d = tmp_path_factory.mktemp('segments')
  rows = _corpus(d)
  run_lib.run(['--output_dir', str(d / 'out'), *_options(
      d, '--example_unit', 'segment', '--signal_dtype', 'float32',
      '--features', 'signal,log_mel', '--min_seconds', '0.1')])
  meta = json.loads((d / 'out' / 'metadata.json').read_text())
  return d, rows, meta


def test_every_segment_is_its_slice_of_the_recording(segments):
  d, rows, meta = segments
  got = _examples(d / 'out')
  usable = rows[:24]
  assert meta['counts']['examples'] == len(got) == len(usable)
  by_key = {(os.path.basename(str(e['filepath'])), int(e['win_start_idx']),
             int(e['num_samples'])): e for e in got}
  sources = {}
  for row in usable:
    path = str(d / 'in' / row['path'])
    mono = sources.setdefault(path, _source(path))
    start, stop = frames(row['start']), frames(row['end'])
    e = by_key.pop((row['path'], start, stop - start))
    expected = mono[start:stop].astype(np.float32)
    assert np.array_equal(e['signal'], expected), row
    assert e['sentence'] == row['sentence']
    assert e['client_id'] == row['client_id']
    assert e['class'] == row['label']
  assert not by_key


def test_pcm_segments_equal_the_files_own_samples(segments):
  """Without resampling or mixing, the stored float32 is the PCM sample
  itself: bit-exact against soundfile's own read of the range."""
  d, rows, _ = segments
  got = {(os.path.basename(str(e['filepath'])), int(e['win_start_idx'])): e
         for e in _examples(d / 'out')}
  for row in rows[:20]:
    start, stop = frames(row['start']), frames(row['end'])
    data, _ = sf.read(str(d / 'in' / row['path']), start=start, stop=stop,
                      dtype='float32')
    assert np.array_equal(got[(row['path'], start)]['signal'], data)


def test_unusable_segments_are_rejected_with_their_reason(segments):
  d, _, meta = segments
  rejects = [json.loads(line) for line in
             (d / 'out' / 'rejects.jsonl').read_text().splitlines()]
  assert [(os.path.basename(r['path']), r['stage']) for r in rejects] == [
      ('r0.wav', 'segment'), ('r1.wav', 'segment'), ('r2.wav', 'segment')]
  reasons = [r['reason'] for r in rejects]
  assert 'after the recording' in reasons[0]
  assert 'holds no frame' in reasons[1]
  assert 'under --min_seconds' in reasons[2]
  assert rejects[0]['frames'] == [frames(2.9), frames(3.5)]
  counts = meta['counts']
  assert counts['segments_rejected'] == 3
  assert counts['files_ok'] == 6 and counts['files_rejected'] == 0
  assert counts['rejections'] == 3
  from pipeline.commands import inspect as inspect_dataset
  assert ('0 files rejected, 3 segments rejected, 3 rejection records' in
          inspect_dataset.summary_text(str(d / 'out'), meta))


def test_schema_and_readers_handle_segment_lengths(segments):
  d, _, meta = segments
  assert meta['schema']['signal']['shape'] == [-1]
  assert meta['schema']['log_mel']['length_key'] == 'num_frames'
  assert verify.main([str(d / 'out')]) == 0
  single = {(str(e['filepath']), int(e['win_start_idx'])): e
            for e in _examples(d / 'out')}
  seen = 0
  for batch in replay.replay_dataset(str(d / 'out'), batch_size=5):
    lengths = batch['signal_length'].numpy()
    assert batch['signal'].shape[1] == lengths.max()
    for row, path in enumerate(batch['filepath'].numpy()):
      e = single[(path.decode(), int(batch['win_start_idx'][row]))]
      n = len(e['signal'])
      assert lengths[row] == n
      assert np.array_equal(batch['signal'][row, :n], e['signal'])
      seen += 1
  assert seen == meta['counts']['examples']


def test_windows_inside_segments_carry_the_segments_fields(tmp_path):
  rows = _corpus(tmp_path)
  win, hop = 4000, 2000
  run_lib.run(['--output_dir', str(tmp_path / 'out'), *_options(
      tmp_path, '--win_len', str(win), '--hop_len', str(hop),
      '--features', 'signal', '--signal_dtype', 'float32')])
  got = _examples(tmp_path / 'out')
  expected = {}
  for row in rows[:24]:
    start, stop = frames(row['start']), frames(row['end'])
    n = audio.window_count(stop - start, win, hop, False)
    for k in range(n):
      expected.setdefault((row['path'], start + k * hop), []).append(row)
  assert len(got) == sum(len(v) for v in expected.values())
  sources = {}
  for e in got:
    path = str(e['filepath'])
    name = os.path.basename(path)
    candidates = expected[(name, int(e['win_start_idx']))]
    row = next(r for r in candidates
               if r['sentence'] == e['sentence'])
    candidates.remove(row)
    mono = sources.setdefault(path, _source(path))
    s = int(e['win_start_idx'])
    assert np.array_equal(e['signal'], mono[s:s + win].astype(np.float32))
    assert e['class'] == row['label']
    # A window ends inside its segment.
    assert s + win <= frames(row['end'])
  meta = json.loads((tmp_path / 'out' / 'metadata.json').read_text())
  # The 0.01 s segment is too short for a window; the others as above.
  assert meta['counts']['segments_rejected'] == 3


def test_split_by_keeps_every_speaker_in_one_split(tmp_path):
  _corpus(tmp_path)
  run_lib.run(['--output_dir', str(tmp_path / 'out'), *_options(
      tmp_path, '--example_unit', 'segment', '--features', 'signal',
      '--splits', 'train=0.5,test=0.5', '--split_by', 'client_id')])
  speakers = {}
  for split in ('train', 'test'):
    for e in _examples(tmp_path / 'out', split):
      speakers.setdefault(e['client_id'], set()).add(split)
  assert len(speakers) == 6
  assert all(len(s) == 1 for s in speakers.values())
  assert {s for v in speakers.values() for s in v} == {'train', 'test'}


def test_segments_of_one_recording_must_share_the_split_value(tmp_path):
  (tmp_path / 'in').mkdir()
  H.write_wav(str(tmp_path / 'in' / 'a.wav'), H.noise(RATE))
  (tmp_path / 'segments.csv').write_text(
      'path,start,end,sentence,client_id,label\n'
      'a.wav,0,0.5,x,ann,yes\na.wav,0.5,1,y,bob,yes\n')
  with pytest.raises(ConfigError, match='one split'):
    run_lib.run(['--output_dir', str(tmp_path / 'out'), *_options(
        tmp_path, '--example_unit', 'segment', '--split_by', 'client_id',
        '--splits', 'train=0.5,test=0.5')])
  assert not (tmp_path / 'out').exists()


def _speaker_corpus(d, speakers):
  """A recording per speaker (s/rNNN.wav, 0.3 s at 8 kHz), three segments
  each, whose rows spell its path three ways: a.wav, ./a.wav and
  d/../a.wav."""
  rows = ['path,start,end,speaker']
  for i in range(speakers):
    H.write_wav(str(d / 'in' / 's' / f'r{i:03d}.wav'),
                H.noise(2400, seed=i), rate=8000)
    for j, spelt in enumerate((f's/r{i:03d}.wav', f'./s/r{i:03d}.wav',
                               f's/x/../r{i:03d}.wav')):
      rows.append(f'{spelt},{j / 10},{(j + 1) / 10},spk{i:03d}')
  return rows


def _by_speaker(out, splits):
  found = {}
  for split in splits:
    for e in numpy_reader.numpy_dataset(str(out), split,
                                        features=['speaker']):
      found.setdefault(str(e['speaker']), collections.Counter())[split] += 1
  return found


SPEAKER_OPTIONS = ('--manifest_start_column', 'start', '--manifest_end_column',
                   'end', '--manifest_extra_columns', 'speaker',
                   '--label_from', 'none', '--example_unit', 'segment',
                   '--features', 'signal', '--split_by', 'speaker',
                   '--splits', 'train=0.8,validation=0.1,test=0.1',
                   '--runner=FnApiRunner')


def test_split_by_keeps_speakers_apart_however_paths_are_spelt(tmp_path):
  """Rows of one recording that spell its path differently are one
  recording: its segments go to one split, and a row of it with another
  speaker is refused naming both rows (it would take that speaker into
  the recording's split too)."""
  rows = _speaker_corpus(tmp_path, 200)
  argv = ['--input_dir', str(tmp_path / 'in'), '--manifest',
          str(tmp_path / 'm.csv'), *SPEAKER_OPTIONS]
  # r000's second segment said by another speaker, under another spelling.
  (tmp_path / 'm.csv').write_text('\n'.join(
      rows[:2] + [rows[2].replace('spk000', 'spk001')] + rows[3:]) + '\n')
  with pytest.raises(ConfigError, match=r"line 3: \./s/r000\.wav has speaker "
                     r"'spk001' here and 'spk000' on line 2 \(as "
                     r"s/r000\.wav\)"):
    run_lib.run(['--output_dir', str(tmp_path / 'leak'), *argv])
  assert not (tmp_path / 'leak').exists()
  (tmp_path / 'm.csv').write_text('\n'.join(rows) + '\n')
  run_lib.run(['--output_dir', str(tmp_path / 'out'), *argv])
  found = _by_speaker(tmp_path / 'out', ('train', 'validation', 'test'))
  assert sorted(found) == [f'spk{i:03d}' for i in range(200)]
  # Every segment of each speaker, all in one split; every split used.
  assert all(len(c) == 1 and sum(c.values()) == 3 for c in found.values())
  assert {s for c in found.values() for s in c} == {'train', 'validation',
                                                    'test'}
  meta = json.loads((tmp_path / 'out' / 'metadata.json').read_text())
  assert meta['counts']['files_seen'] == meta['counts']['files_ok'] == 200


def test_links_naming_one_recording_are_refused_naming_both(tmp_path):
  """Links to one long recording, a speaker's rows sent to each: one file
  under two names would be one recording with its rows under one name
  and the other name left without rows. Refused before anything runs,
  naming both links and their rows."""
  H.write_wav(str(tmp_path / 'long.wav'), H.noise(8000 * 60), rate=8000)
  (tmp_path / 'in' / 'bigspk').mkdir(parents=True)
  rows = ['path,start,end,speaker']
  for s in range(20):
    os.symlink(tmp_path / 'long.wav',
               tmp_path / 'in' / 'bigspk' / f'spk{s:02d}.wav')
    rows += [f'bigspk/spk{s:02d}.wav,{s * 3 + j / 5:.1f},'
             f'{s * 3 + (j + 1) / 5:.1f},spk{s:02d}' for j in range(15)]
  (tmp_path / 'm.csv').write_text('\n'.join(rows) + '\n')
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir',
       str(tmp_path / 'in'), '--output_dir', str(tmp_path / 'out'),
       '--manifest', str(tmp_path / 'm.csv'), *SPEAKER_OPTIONS, '--quiet'],
      cwd=H.ROOT, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert (f"line 17: bigspk/spk01.wav and bigspk/spk00.wav "
          f"({tmp_path / 'm.csv'} line 2) are one file "
          f"({tmp_path / 'long.wav'})") in proc.stderr
  assert not (tmp_path / 'out').exists()


@pytest.mark.parametrize('cell, message', [
    ('-1', 'not a number of seconds'), ('x', 'not a number of seconds'),
    ('0.7', 'is not after')])
def test_bad_times_fail_before_any_work_naming_the_line(tmp_path, cell,
                                                        message):
  (tmp_path / 'in').mkdir()
  H.write_wav(str(tmp_path / 'in' / 'a.wav'), H.noise(RATE))
  (tmp_path / 'segments.csv').write_text(
      'path,start,end,sentence,client_id,label\n'
      'a.wav,0,0.5,x,ann,yes\n'
      f'a.wav,{cell},0.6,y,ann,yes\n')
  with pytest.raises(ConfigError, match=f'line 3.*{message}'):
    run_lib.run(['--output_dir', str(tmp_path / 'out'), *_options(
        tmp_path, '--example_unit', 'segment')])


def _by_segment(out, **kw):
  return {(os.path.basename(str(e['filepath'])), int(e['win_start_idx']),
           e['sentence']): e for e in numpy_reader.numpy_dataset(str(out),
                                                                 **kw)}


SEGMENT_OPTIONS = ('--example_unit', 'segment', '--signal_dtype', 'float32',
                   '--features', 'signal,log_mel', '--min_seconds', '0.1')


def test_the_sink_array_record_and_a_sweep_hold_the_same_segments(
    segments):
  d, _, _ = segments
  ours = _by_segment(d / 'out')
  run_lib.run(['--output_dir', str(d / 'sink'), *_options(
      d, *SEGMENT_OPTIONS, '--sink', 'write_to_tfrecord')])
  run_lib.run(['--output_dir', str(d / 'ar'), *_options(
      d, *SEGMENT_OPTIONS, '--array_record', '--max_shard_bytes', '60000')])
  (d / 'sweep.toml').write_text('[coarse]\nn_mels = 32\n[fine]\n'
                                'n_mels = 80\n')
  run_lib.run(['--output_dir', str(d / 'sweep'), *_options(
      d, *SEGMENT_OPTIONS, '--variants', str(d / 'sweep.toml'))])
  for out, kw in ((d / 'sink', {}), (d / 'ar', {}),
                  (d / 'sweep', {'variant': 'coarse'}),
                  (d / 'sweep', {'variant': 'fine'})):
    got = _by_segment(out, **kw)
    assert sorted(got) == sorted(ours), out
    for key, e in got.items():
      assert np.array_equal(e['signal'], ours[key]['signal'])
      assert e['class'] == ours[key]['class']
      if not kw:
        assert np.array_equal(e['log_mel'], ours[key]['log_mel'])
      else:
        assert e['log_mel'].shape[1] == {'coarse': 32,
                                         'fine': 80}[kw['variant']]
  assert verify.main([str(d / 'ar')]) == 0
  assert verify.main([str(d / 'sweep')]) == 0
  from pipeline.readers import array_record as array_record_source
  source = array_record_source.ArrayRecordSource(str(d / 'ar'), 'train')
  assert len(source) == len(ours)


def test_append_adds_new_recordings_and_reports_changed_segments(tmp_path):
  rows = _corpus(tmp_path)
  out = tmp_path / 'out'
  run_lib.run(['--output_dir', str(out), *_options(tmp_path,
                                                   *SEGMENT_OPTIONS)])
  before = _by_segment(out)
  H.write_wav(str(tmp_path / 'in' / 'r6.wav'), H.noise(RATE * 2, seed=6))
  added = [{'path': 'r6.wav', 'start': 0.2, 'end': 1.1, 'sentence': 'new',
            'client_id': 'gus', 'label': 'yes'},
           {'path': 'r3.wav', 'start': 2.0, 'end': 2.5,  # a recording held
            'sentence': 'later', 'client_id': 'dee', 'label': 'no'}]
  with open(tmp_path / 'segments.csv', 'a', newline='') as f:
    csv.DictWriter(f, fieldnames=list(rows[0])).writerows(added)
  run_lib.run(['--output_dir', str(out), '--append', *_options(
      tmp_path, *SEGMENT_OPTIONS)])
  after = _by_segment(out)
  assert set(after) - set(before) == {('r6.wav', frames(0.2), 'new')}
  assert verify.main([str(out)]) == 0
  part = json.loads((out / 'part-00001' / 'metadata.json').read_text())
  assert part['counts']['files_rejected'] == 1
  rejects = (out / 'part-00001' / 'rejects.jsonl').read_text()
  assert 'r3.wav' in rejects and 'its segments in the manifest changed' in (
      rejects)


def test_a_long_recording_with_thousands_of_segments_sends_one_each(
    tmp_path):
  """A 20-minute recording of 2,400 half-second segments: each window's
  reference carries its own segment only (what a shard task receives
  stays small), and every segment is cut exactly."""
  import pickle
  from transforms.planning import rules as plan_lib
  from transforms.planning import layout as layout_lib
  from transforms.inputs import manifest as manifest_lib
  from transforms.inputs.file_reports import WavInfo
  rate, n = 8000, 2400
  H.write_wav(str(tmp_path / 'in' / 'long.wav'),
              H.noise(rate * n // 2, seed=3), rate=rate)
  with open(tmp_path / 'segments.csv', 'w') as f:
    f.write('path,start,duration,sentence,client_id,label\n')
    for i in range(n):
      f.write(f'long.wav,{i * 0.5},0.5,s{i},ann,{("yes", "no")[i % 2]}\n')
  options = ['--input_dir', str(tmp_path / 'in'),
             '--manifest', str(tmp_path / 'segments.csv'),
             '--manifest_start_column', 'start',
             '--manifest_duration_column', 'duration',
             '--manifest_label_column', 'label',
             '--manifest_extra_columns', 'sentence,client_id',
             '--example_unit', 'segment', '--features', 'signal',
             '--signal_dtype', 'int16', '--runner=FnApiRunner']
  from pipeline import config as config_lib
  config = config_lib.parse_known_args(['--output_dir', str(tmp_path / 'x'),
                                        *options])[0]
  entry = manifest_lib.read(config).entries[str(tmp_path / 'in' /
                                                 'long.wav')]
  info = WavInfo(0, str(tmp_path / 'in' / 'long.wav'), rate * n // 2, rate,
                 1, 'PCM_16', 44, 2, 0, 0)
  plan = plan_lib.plan_file(info, config, rate, entry)
  assert len(plan.spans) == n
  layouts = layout_lib.compute_layouts([('train', 0, n)], num_shards=4)
  refs = list(layout_lib.block_refs(0, [plan], layouts, True, 0))
  assert len(refs) == n
  whole = len(pickle.dumps(plan))
  for _, (own, window, _) in refs[:50]:
    assert len(own.spans) == 1
    assert own.locate(window)[0] == plan.locate(window)[0]
    assert len(pickle.dumps(own)) * 100 < whole
  run_lib.run(['--output_dir', str(tmp_path / 'out'), *options])
  samples, _ = sf.read(str(tmp_path / 'in' / 'long.wav'), dtype='int16')
  got = _examples(tmp_path / 'out')
  assert len(got) == n
  for e in got:
    start = int(e['win_start_idx'])
    assert np.array_equal(e['signal'], samples[start:start + rate // 2])
    assert e['sentence'] == f's{start // (rate // 2)}'


def test_num_elems_takes_the_first_segments_in_file_order(tmp_path):
  rows = _corpus(tmp_path)
  run_lib.run(['--output_dir', str(tmp_path / 'out'), *_options(
      tmp_path, *SEGMENT_OPTIONS, '--num_elems', '6', '--no_shuffle')])
  got = [(os.path.basename(str(e['filepath'])), e['sentence'])
         for e in _examples(tmp_path / 'out')]
  # r0's four segments, then r1's first two (the manifest's order).
  assert got == [(r['path'], r['sentence']) for r in rows[:6]]
