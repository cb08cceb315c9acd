"""Lhotse manifests as input: recordings and supervisions written by the
lhotse package itself (mono and two-channel recordings, overlapping
supervisions on either channel, custom fields), run through the
pipeline, and every example checked against the audio Lhotse itself
loads for its supervision."""

import json
import os

import lhotse
import numpy as np
import pytest

from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.commands import run as run_lib
from pipeline.config import ConfigError
from tests import helpers as H

RATE = 16000


def _corpus(d):
  """Three mono recordings and one two-channel call; supervisions that
  overlap, one per channel of the call, a custom field on each."""
  (d / 'audio').mkdir(parents=True)
  recordings, supervisions = [], []
  for i in range(4):
    channels = 2 if i == 3 else 1
    path = H.write_wav(str(d / 'audio' / f'rec{i}.wav'),
                       H.noise(RATE * (2 + i), channels, seed=i))
    recording = lhotse.Recording.from_file(path, recording_id=f'rec{i}')
    recordings.append(recording)
    for j in range(3):
      start = round(0.3 * j + 0.05 * i, 3)
      supervisions.append(lhotse.SupervisionSegment(
          id=f'rec{i}-{j}', recording_id=f'rec{i}', start=start,
          duration=round(0.7 + 0.13 * j, 3), channel=j % channels,
          text=f'utterance {i} {j}', speaker=f'spk{i}{j % channels}',
          language='en', custom={'emotion': ('calm', 'glad')[j % 2]}))
  (lhotse.RecordingSet.from_recordings(recordings)
   .to_file(str(d / 'recordings.jsonl.gz')))
  (lhotse.SupervisionSet.from_segments(supervisions)
   .to_file(str(d / 'supervisions.jsonl.gz')))
  return recordings, supervisions


def _run(d, *extra):
  run_lib.run(['--input_dir', str(d / 'audio'), '--output_dir',
               str(d / 'out'),
               '--lhotse_recordings', str(d / 'recordings.jsonl.gz'),
               '--lhotse_supervisions', str(d / 'supervisions.jsonl.gz'),
               '--label_from', 'none', '--signal_dtype', 'float32',
               *extra, '--runner=FnApiRunner'])


@pytest.fixture(scope='module')
def segments(tmp_path_factory):
  d = tmp_path_factory.mktemp('lhotse')
  recordings, supervisions = _corpus(d)
  _run(d, '--example_unit', 'segment', '--features', 'signal,log_mel',
       '--manifest_extra_columns', 'id,text,speaker,language,emotion')
  return d, recordings, supervisions


def test_every_supervision_is_one_example_with_lhotses_audio(segments):
  d, recordings, supervisions = segments
  got = {e['id']: e for e in numpy_reader.numpy_dataset(str(d / 'out'))}
  assert sorted(got) == sorted(s.id for s in supervisions)
  cuts = lhotse.CutSet.from_manifests(
      recordings=lhotse.RecordingSet.from_file(
          str(d / 'recordings.jsonl.gz')),
      supervisions=lhotse.SupervisionSet.from_file(
          str(d / 'supervisions.jsonl.gz')))
  for cut in cuts.trim_to_supervisions(keep_overlapping=False):
    supervision = cut.supervisions[0]
    e = got.pop(supervision.id)
    expected = cut.load_audio()
    assert expected.shape[0] == 1  # the supervision's one channel
    assert e['signal'].dtype == np.float32
    assert np.array_equal(e['signal'], expected[0]), supervision.id
    assert e['num_samples'] == cut.num_samples
    assert e['text'] == supervision.text
    assert e['speaker'] == supervision.speaker
    assert e['language'] == 'en'
    assert e['emotion'] == supervision.custom['emotion']
  assert not got


def test_overlapping_supervisions_share_their_audio(segments):
  """rec0's first two supervisions overlap by 0.4 s: both examples hold
  those samples."""
  d, _, supervisions = segments
  got = {e['id']: e for e in numpy_reader.numpy_dataset(str(d / 'out'))}
  first, second = supervisions[0], supervisions[1]
  assert second.start < first.end
  a, b = got[first.id], got[second.id]
  offset = int(b['win_start_idx']) - int(a['win_start_idx'])
  overlap = len(a['signal']) - offset
  assert overlap > 0
  assert np.array_equal(a['signal'][offset:], b['signal'][:overlap])


def test_the_stereo_call_gives_each_channel_its_own_examples(segments):
  d, recordings, supervisions = segments
  call = [s for s in supervisions if s.recording_id == 'rec3']
  got = {e['id']: e for e in numpy_reader.numpy_dataset(str(d / 'out'))}
  audio = recordings[3].load_audio()  # (2, n)
  for s in call:
    e = got[s.id]
    start = int(e['win_start_idx'])
    assert np.array_equal(e['signal'],
                          audio[s.channel, start:start + len(e['signal'])])
  meta = json.loads((d / 'out' / 'metadata.json').read_text())
  assert meta['counts']['examples'] == len(supervisions)
  assert meta['counts']['files_ok'] == len(recordings)


def test_windows_inside_supervisions_carry_their_fields(tmp_path):
  _, supervisions = _corpus(tmp_path)
  _run(tmp_path, '--win_len', '4000', '--features', 'signal')
  by_id = {s.id: s for s in supervisions}
  got = list(numpy_reader.numpy_dataset(str(tmp_path / 'out')))
  expected = sum(1 + (round(s.duration * RATE) - 4000) // 4000
                 for s in supervisions)
  assert len(got) == expected
  for e in got:
    s = by_id[e['id']]
    assert e['text'] == s.text and e['speaker'] == s.speaker
    assert int(e['win_start_idx']) + 4000 <= round(s.end * RATE)


def test_a_file_that_differs_from_its_recording_is_rejected(tmp_path):
  _corpus(tmp_path)
  H.write_wav(str(tmp_path / 'audio' / 'rec1.wav'), H.noise(RATE, seed=9))
  _run(tmp_path, '--example_unit', 'segment', '--features', 'signal')
  rejects = [json.loads(line) for line in
             (tmp_path / 'out' / 'rejects.jsonl').read_text().splitlines()]
  assert [os.path.basename(r['path']) for r in rejects] == ['rec1.wav']
  assert 'the manifest (line 2) describes it as 48000 frames' in (
      rejects[0]['reason'])


def test_split_by_speaker_needs_one_speaker_per_recording(tmp_path):
  _corpus(tmp_path)
  with pytest.raises(ConfigError, match="recording 'rec3' has speaker "
                     "'spk31' here and 'spk30'"):
    _run(tmp_path, '--example_unit', 'segment', '--split_by', 'speaker',
         '--splits', 'train=0.5,test=0.5')


def test_a_supervision_of_an_unknown_recording_is_refused(tmp_path):
  _corpus(tmp_path)
  with open(tmp_path / 'supervisions.jsonl', 'w') as f:
    f.write(json.dumps({'id': 'x', 'recording_id': 'nope', 'start': 0,
                        'duration': 1, 'channel': 0}) + '\n')
  with pytest.raises(ConfigError, match="line 1: supervision 'x' is of "
                     "recording 'nope'"):
    run_lib.run(['--input_dir', str(tmp_path / 'audio'), '--output_dir',
                 str(tmp_path / 'out'), '--lhotse_recordings',
                 str(tmp_path / 'recordings.jsonl.gz'),
                 '--lhotse_supervisions', str(tmp_path / 'supervisions.jsonl'),
                 '--example_unit', 'segment', '--runner=FnApiRunner'])
  assert not (tmp_path / 'out').exists()
