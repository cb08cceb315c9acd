"""--split_unit segment: the speakers of one meeting in different splits.

A meeting of 20 speakers, split by speaker: no speaker in two splits,
every turn written once as the slice of an independent decode, and
metadata.json saying what the splits share (the recording, and no
audio). Overlapping turns of two splits are refused unless
--allow_split_overlap, which then reports the overlapping seconds
computed here from the turns' times. The default still refuses a
recording's segments in two splits. Lhotse supervisions take the same
route."""

import collections
import csv
import gzip
import json

import numpy as np
import pytest
import soundfile as sf

from pipeline.commands import run as run_lib
from pipeline.commands import verify
from pipeline.config import ConfigError
from pipeline.readers import numpy_dataset as numpy_reader
from transforms.inputs import manifest as manifest_lib
from transforms.inputs import splits as splits_lib
from transforms.planning import rules
from tests import helpers as H

RATE = 8000
SPEAKERS = [f'spk{i:02d}' for i in range(20)]
SPLITS = 'train=0.6,validation=0.2,test=0.2'
SPLIT_NAMES = ('train', 'validation', 'test')


def _turns(overlap_at=()):
  """Three 0.4 s turns per speaker, back to back in speaker order round
  by round, with a gap of 0.1 s; at each index in `overlap_at` the turn
  starts 0.25 s early, over the end of the turn before it (crosstalk)."""
  turns, t = [], 0.0
  for round_ in range(3):
    for speaker in SPEAKERS:
      start = t
      if len(turns) in overlap_at:
        start = round(t - 0.35, 4)
      turns.append((speaker, round(start, 4), round(t + 0.4, 4)))
      t = round(t + 0.5, 4)
  return turns


def _meeting(d, turns, name='meeting.wav'):
  seconds = max(end for _, _, end in turns) + 0.5
  H.write_wav(str(d / 'in' / name), H.noise(int(seconds * RATE), seed=3),
              rate=RATE)
  with open(d / 'turns.csv', 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['path', 'start', 'end', 'speaker'])
    for speaker, start, end in turns:
      writer.writerow([name, start, end, speaker])


def _argv(d, out, *extra):
  return ['--input_dir', str(d / 'in'), '--output_dir', str(d / out),
          '--manifest', str(d / 'turns.csv'),
          '--manifest_start_column', 'start', '--manifest_end_column', 'end',
          '--manifest_extra_columns', 'speaker', '--label_from', 'none',
          '--example_unit', 'segment', '--features', 'signal',
          '--split_by', 'speaker', '--splits', SPLITS,
          '--runner=FnApiRunner', *extra]


def _expected_split(speaker):
  return splits_lib.split_by_hash(speaker, (('train', 0.6),
                                            ('validation', 0.2),
                                            ('test', 0.2)))


@pytest.fixture(scope='module')
def meeting(tmp_path_factory):
  d = tmp_path_factory.mktemp('meeting')
  turns = _turns()
  _meeting(d, turns)
  run_lib.run(_argv(d, 'out', '--split_unit', 'segment'))
  meta = json.loads((d / 'out' / 'metadata.json').read_text())
  return d, turns, meta


def test_no_speaker_is_in_two_splits(meeting):
  d, turns, meta = meeting
  found = collections.defaultdict(collections.Counter)
  for split in SPLIT_NAMES:
    for e in numpy_reader.numpy_dataset(str(d / 'out'), split):
      found[str(e['speaker'])][split] += 1
  assert sorted(found) == SPEAKERS
  for speaker, by_split in found.items():
    assert dict(by_split) == {_expected_split(speaker): 3}
  # The speakers' hashes use all three splits, so the test could fail.
  assert {_expected_split(s) for s in SPEAKERS} == set(SPLIT_NAMES)


def test_every_turn_is_its_slice_of_the_meeting(meeting):
  d, turns, _ = meeting
  pcm, _ = sf.read(str(d / 'in' / 'meeting.wav'), dtype='int32')
  got = {}
  for split in SPLIT_NAMES:
    for e in numpy_reader.numpy_dataset(str(d / 'out'), split):
      got[int(e['win_start_idx'])] = (split, e)
  assert len(got) == len(turns)
  for speaker, start, end in turns:
    first = manifest_lib.seconds_to_frames(start, RATE)
    last = manifest_lib.seconds_to_frames(end, RATE)
    split, e = got.pop(first)
    assert split == _expected_split(speaker)
    assert str(e['speaker']) == speaker
    assert np.array_equal(e['signal'], pcm[first:last])
  assert not got


def test_metadata_reports_what_the_splits_share(meeting, capsys):
  d, _, meta = meeting
  assert meta['split_overlap'] == [
      {'splits': list(pair), 'recordings': 1, 'overlap_seconds': 0.0}
      for pair in (('test', 'train'), ('test', 'validation'),
                   ('train', 'validation'))]
  # One recording, in each of the three splits; the counts add up.
  assert meta['counts']['files_seen'] == meta['counts']['files_ok'] == 1
  assert [meta['splits'][s]['num_files'] for s in SPLIT_NAMES] == [1, 1, 1]
  assert meta['counts']['examples'] == 60
  assert verify.main([str(d / 'out')]) == 0
  from pipeline.commands import inspect as inspect_lib
  inspect_lib.main([str(d / 'out')])
  out = capsys.readouterr().out
  assert 'test and train share 1 recording, 0.000 s of audio' in out


def test_a_recordings_segments_in_two_splits_are_refused_by_default(
    tmp_path):
  _meeting(tmp_path, _turns())
  with pytest.raises(ConfigError, match='the segments of one recording go '
                     'to one split'):
    run_lib.run(_argv(tmp_path, 'out'))
  assert not (tmp_path / 'out').exists()


def _crosstalk():
  """Turns of two splits that overlap, and the seconds each pair of
  splits shares, from the turns' times."""
  turns = _turns(overlap_at=(5, 23, 41))
  shared = collections.Counter()
  for i in (5, 23, 41):
    (a, _, end_a), (b, start_b, _) = turns[i - 1], turns[i]
    pair = tuple(sorted((_expected_split(a), _expected_split(b))))
    assert pair[0] != pair[1]  # the crosstalk crosses splits
    shared[pair] += (manifest_lib.seconds_to_frames(end_a, RATE) -
                     manifest_lib.seconds_to_frames(start_b, RATE))
  return turns, shared


def test_overlapping_turns_of_two_splits_are_refused(tmp_path):
  turns, _ = _crosstalk()
  _meeting(tmp_path, turns)
  with pytest.raises(ConfigError, match=r'meeting\.wav: the segment of line '
                     r'\d+ \(\w+\) and that of line 7 \(\w+\) overlap by '
                     r'0\.250 s'):
    run_lib.run(_argv(tmp_path, 'out', '--split_unit', 'segment'))
  assert not (tmp_path / 'out').exists()


def test_allowed_overlap_is_reported_in_seconds(tmp_path):
  turns, shared = _crosstalk()
  _meeting(tmp_path, turns)
  run_lib.run(_argv(tmp_path, 'out', '--split_unit', 'segment',
                    '--allow_split_overlap'))
  meta = json.loads((tmp_path / 'out' / 'metadata.json').read_text())
  reported = {tuple(p['splits']): p['overlap_seconds']
              for p in meta['split_overlap']}
  assert reported == {pair: round(shared.get(pair, 0) / RATE, 6)
                      for pair in reported}
  assert sum(reported.values()) == pytest.approx(0.75)
  assert meta['counts']['examples'] == 60
  assert verify.main([str(tmp_path / 'out')]) == 0


def test_windows_inside_turns_follow_their_turns_split(tmp_path):
  """--example_unit window: each turn's windows go to its speaker's
  split, numbered as in the whole meeting."""
  turns = _turns()
  _meeting(tmp_path, turns)
  argv = _argv(tmp_path, 'out', '--split_unit', 'segment')
  argv[argv.index('segment')] = 'window'
  run_lib.run(argv + ['--win_len', '1600', '--hop_len', '800'])
  pcm, _ = sf.read(str(tmp_path / 'in' / 'meeting.wav'), dtype='int32')
  starts = {}
  for split in SPLIT_NAMES:
    for e in numpy_reader.numpy_dataset(str(tmp_path / 'out'), split):
      start = int(e['win_start_idx'])
      assert split == _expected_split(str(e['speaker']))
      assert np.array_equal(e['signal'], pcm[start:start + 1600])
      starts[start] = str(e['speaker'])
  # 0.4 s turns at 8 kHz: windows of 0.2 s every 0.1 s, three per turn.
  expected = {manifest_lib.seconds_to_frames(start, RATE) + k * 800: speaker
              for speaker, start, _ in turns for k in range(3)}
  assert starts == expected


def test_lhotse_supervisions_split_by_speaker(tmp_path):
  turns = _turns()
  _meeting(tmp_path, turns)
  with gzip.open(tmp_path / 'recordings.jsonl.gz', 'wt') as f:
    f.write(json.dumps({
        'id': 'meeting', 'sampling_rate': RATE,
        'num_samples': sf.info(str(tmp_path / 'in' / 'meeting.wav')).frames,
        'duration': sf.info(str(tmp_path / 'in' / 'meeting.wav')).duration,
        'channel_ids': [0], 'sources': [{
            'type': 'file', 'channels': [0],
            'source': 'meeting.wav'}]}) + '\n')
  with gzip.open(tmp_path / 'supervisions.jsonl.gz', 'wt') as f:
    for i, (speaker, start, end) in enumerate(turns):
      f.write(json.dumps({'id': f't{i}', 'recording_id': 'meeting',
                          'start': start, 'duration': round(end - start, 4),
                          'channel': 0, 'speaker': speaker}) + '\n')
  run_lib.run(['--input_dir', str(tmp_path / 'in'), '--output_dir',
               str(tmp_path / 'out'), '--lhotse_recordings',
               str(tmp_path / 'recordings.jsonl.gz'), '--lhotse_supervisions',
               str(tmp_path / 'supervisions.jsonl.gz'), '--example_unit',
               'segment', '--features', 'signal', '--split_by', 'speaker',
               '--splits', SPLITS, '--split_unit', 'segment',
               '--label_from', 'none',
               '--runner=FnApiRunner'])
  for split in SPLIT_NAMES:
    speakers = {str(e['speaker']) for e in numpy_reader.numpy_dataset(
        str(tmp_path / 'out'), split)}
    assert speakers == {s for s in SPEAKERS if _expected_split(s) == split}
  meta = json.loads((tmp_path / 'out' / 'metadata.json').read_text())
  assert [p['recordings'] for p in meta['split_overlap']] == [1, 1, 1]


@pytest.mark.parametrize('options, message', [
    ({'split_unit': 'segment'}, 'needs segments'),
    ({'split_unit': 'segment', 'manifest': 'm.csv',
      'manifest_start_column': 's', 'manifest_end_column': 'e'},
     'needs a split per segment'),
    ({'allow_split_overlap': True}, 'needs --split_unit segment'),
    ({'split_unit': 'turn'}, 'split_unit'),
    ({'split_unit': 'segment', 'manifest': 'm.csv', 'split_by': 'speaker',
      'manifest_start_column': 's', 'manifest_end_column': 'e',
      'silence_from': ('noise/*',)}, 'with --silence_from'),
])
def test_options_are_checked(tmp_path, options, message):
  with pytest.raises(ConfigError, match=message):
    H.make_config(str(tmp_path), str(tmp_path / 'out'), **options)


def _span(start, stop, split):
  return rules.Span(start, stop, 1, '', (), None, split)


def test_frames_both_splits_cover_count_each_frame_once():
  """Overlaps within a split are merged before the splits are compared:
  a frame two train turns and a test turn cover counts once."""
  train = [_span(0, 100, 'train'), _span(50, 150, 'train'),
           _span(300, 400, 'train')]
  test = [_span(120, 200, 'test'), _span(90, 130, 'test'),
          _span(390, 500, 'test')]
  # [90, 150) and [390, 400) by brute force over frames.
  covered = [set().union(*(range(s.start, s.stop) for s in spans))
             for spans in (train, test)]
  assert rules._covered_by_both(train, test) == len(
      covered[0] & covered[1]) == 70


def test_a_sweep_holds_what_separate_runs_hold(tmp_path):
  """Each variant of a sweep under --split_unit segment equals its own
  run, file for file (its split_overlap included)."""
  from tests.test_variants import _assert_same_dataset
  _meeting(tmp_path, _turns())
  variants = {'sig': ['--features', 'signal'],
              'mel': ['--features', 'signal,log_mel', '--n_fft', '512']}
  (tmp_path / 'v.json').write_text(json.dumps({
      name: {f[2:]: v for f, v in zip(args[::2], args[1::2])}
      for name, args in variants.items()}))
  run_lib.run(_argv(tmp_path, 'out', '--split_unit', 'segment',
                    '--variants', str(tmp_path / 'v.json')))
  for name, args in variants.items():
    run_lib.run(_argv(tmp_path, name, '--split_unit', 'segment', *args))
    _assert_same_dataset(tmp_path / 'out' / name, tmp_path / name)
    meta = json.loads((tmp_path / name / 'metadata.json').read_text())
    assert [p['recordings'] for p in meta['split_overlap']] == [1, 1, 1]


def test_an_appended_meeting_adds_to_what_the_splits_share(tmp_path):
  turns = _turns()
  _meeting(tmp_path, turns)
  run_lib.run(_argv(tmp_path, 'out', '--split_unit', 'segment'))
  H.write_wav(str(tmp_path / 'in' / 'second.wav'),
              H.noise(int(31 * RATE), seed=4), rate=RATE)
  with open(tmp_path / 'turns.csv', 'a', newline='') as f:
    writer = csv.writer(f)
    for speaker, start, end in turns:
      writer.writerow(['second.wav', start, end, speaker])
  run_lib.run(_argv(tmp_path, 'out', '--split_unit', 'segment', '--append'))
  meta = numpy_reader.load_metadata(str(tmp_path / 'out'))
  assert meta['split_overlap'] == [
      {'splits': list(pair), 'recordings': 2, 'overlap_seconds': 0.0}
      for pair in (('test', 'train'), ('test', 'validation'),
                   ('train', 'validation'))]
  assert meta['counts']['files_ok'] == 2
  assert meta['counts']['examples'] == 120
  assert verify.main([str(tmp_path / 'out')]) == 0


@pytest.mark.parametrize('route', ['split_column', 'split_files'])
def test_a_manifests_own_splits_go_per_segment(tmp_path, route):
  """The manifest's split column, or a manifest per split, sends each
  turn to its speaker's split."""
  turns = _turns()
  _meeting(tmp_path, turns)
  by_split = collections.defaultdict(list)
  for speaker, start, end in turns:
    by_split[_expected_split(speaker)].append(
        f'meeting.wav,{start},{end},{speaker},{_expected_split(speaker)}')
  header = 'path,start,end,speaker,split\n'
  if route == 'split_column':
    (tmp_path / 'turns.csv').write_text(header + '\n'.join(
        row for rows in by_split.values() for row in rows) + '\n')
    manifest = ['--manifest', str(tmp_path / 'turns.csv'),
                '--manifest_split_column', 'split']
  else:
    for split, rows in by_split.items():
      (tmp_path / f'{split}.csv').write_text(header + '\n'.join(rows) + '\n')
    manifest = ['--manifest', ','.join(f'{s}={tmp_path / s}.csv'
                                       for s in SPLIT_NAMES)]
  run_lib.run(['--input_dir', str(tmp_path / 'in'), '--output_dir',
               str(tmp_path / 'out'), *manifest,
               '--manifest_start_column', 'start', '--manifest_end_column',
               'end', '--manifest_extra_columns', 'speaker', '--label_from',
               'none', '--example_unit', 'segment', '--features', 'signal',
               '--split_unit', 'segment', '--runner=FnApiRunner'])
  for split in SPLIT_NAMES:
    speakers = [str(e['speaker']) for e in numpy_reader.numpy_dataset(
        str(tmp_path / 'out'), split)]
    assert sorted(speakers) == sorted(
        row.split(',')[3] for row in by_split[split])
