"""transforms/planning/rules: a probed file planned (split, label, manifest row,
windows), and chunks bounded by input samples."""

import pytest

from pipeline import config as config_lib
from transforms.planning import rules as plan
from transforms.inputs.manifest import Entry, Segment
from transforms.inputs.file_reports import BadWav, WavInfo


def test_chunks_are_bounded_by_input_samples():
  def per_chunk(rate, channels, hop=1000, dataset_rate=16000):
    info = WavInfo(0, 'x.wav', 10**7, rate, channels, 'PCM_16')
    p = plan.FilePlan(info, 'train', 'a', dataset_rate, 10**7, 10**4)
    return plan.windows_per_chunk(p, hop)

  assert per_chunk(16000, 1) == plan.CHUNK_SAMPLES // 1000
  # 8 channels, or 3x the rate before resampling: runs shrink to match.
  assert per_chunk(16000, 8) == plan.CHUNK_SAMPLES // 8000
  assert per_chunk(48000, 1) == plan.CHUNK_SAMPLES // 3000
  # A window bigger than the budget still makes progress, one at a time.
  assert per_chunk(16000, 2, hop=2**21) == 1


def test_a_manifest_row_gives_split_label_and_extras():
  config = config_lib.PipelineConfig(
      input_dir='/in', output_dir='/out', win_len=100, n_fft=64,
      manifest='/m.csv', manifest_label_column='c',
      manifest_split_column='f', manifest_extra_columns='f,who')
  info = WavInfo(3, '/in/a/x.wav', 1000, 16000, 1, 'PCM_16')
  entry = Entry(7, 'test', 'owl', (('f', 5), ('who', 'ann')))
  planned = plan.plan_file(info, config, 16000, entry)
  assert (planned.split, planned.label, planned.num_windows) == (
      'test', 'owl', 10)
  assert planned.extras == (('f', 5), ('who', 'ann'))
  with pytest.raises(BadWav, match=r"line 7\) has an empty 'c'"):
    plan.plan_file(info, config, 16000, Entry(7, 'test', '', ()))
  # Without a manifest: the folder's name, a hash split, no extras.
  plain = config_lib.PipelineConfig(input_dir='/in', output_dir='/out',
                                    win_len=100, n_fft=64)
  planned = plan.plan_file(info, plain, 16000)
  assert (planned.split, planned.label, planned.extras) == ('train', 'a', ())


def test_silence_windows_are_shared_as_evenly_as_lengths_allow():
  # Equal shares, the remainder one each to the first recordings.
  assert plan.share_windows({3: 20, 5: 13}, 15) == {3: 8, 5: 7}
  # A short recording gives all of its windows, the others share the rest.
  assert plan.share_windows({1: 2, 2: 100, 3: 100}, 11) == {1: 2, 2: 5,
                                                            3: 4}
  # A cap above the total keeps everything.
  assert plan.share_windows({1: 3, 2: 4}, 100) == {1: 3, 2: 4}
  assert plan.share_windows({}, 5) == {}
  for counts, total in (({1: 7, 2: 1, 3: 30, 4: 9}, 20), ({1: 5}, 3)):
    kept = plan.share_windows(counts, total)
    assert sum(kept.values()) == min(total, sum(counts.values()))
    assert all(0 <= kept[k] <= counts[k] for k in counts)


def _silence_block():
  config = config_lib.PipelineConfig(
      input_dir='/in', output_dir='/out', win_len=100, n_fft=64,
      silence_from='noise/*', label_map='dog,*=other')
  infos = [WavInfo(0, '/in/cat/a.wav', 300, 16000, 1, 'PCM_16'),
           WavInfo(1, '/in/dog/b.wav', 300, 16000, 1, 'PCM_16'),
           WavInfo(2, '/in/noise/long.wav', 2000, 16000, 1, 'PCM_16'),
           WavInfo(3, '/in/noise/x/short.wav', 500, 16000, 1, 'PCM_16')]
  planned, rejected = plan.plan_block(0, infos, config, 16000)
  assert not rejected
  return planned


def test_silence_recordings_and_renamed_classes_are_planned():
  planned = _silence_block()
  assert [(p.label, p.silence, p.num_windows) for p in planned.plans] == [
      ('other', False, 3), ('dog', False, 3), ('_silence_', True, 20),
      ('_silence_', True, 5)]
  windows = planned.windows()
  assert windows.silence == ((2, 20), (3, 5))
  assert windows.num_windows == 31


def test_an_allowance_caps_silence_then_num_elems():
  planned = _silence_block()
  allowed = plan.allowance([planned.windows()], silence_windows=8)
  assert allowed.silence == {2: 4, 3: 4} and allowed.blocks is None
  limited = allowed.limit(planned)
  assert [p.num_windows for p in limited.plans] == [3, 3, 4, 4]
  # --num_elems counts the windows left after the silence cap.
  allowed = plan.allowance([planned.windows()], num_elems=10,
                           silence_windows=8)
  assert allowed.blocks == {0: 10}
  assert [p.num_windows for p in allowed.limit(planned).plans] == [3, 3, 4]
  # A recording allowed no window is left out of the block.
  allowed = plan.allowance([planned.windows()], silence_windows=1)
  assert [p.info.index for p in allowed.limit(planned).plans] == [0, 1, 2]


def test_max_windows_per_signal_caps_each_file_or_each_segment():
  config = config_lib.PipelineConfig(input_dir='-', output_dir='-',
                                     win_len=1024, hop_len=1024,
                                     max_windows_per_signal=2)
  info = WavInfo(0, 'x.wav', 16000, 16000, 1, 'PCM_16')
  assert plan.file_windows(info, config, 16000) == (16000, 2)
  segment = Segment(line=2, start=0.0, end=0.5)
  assert plan.segment_windows(8000, config, 16000, segment) == 2
  one = config_lib.PipelineConfig(input_dir='-', output_dir='-',
                                  win_len=1024, hop_len=1024)
  assert plan.segment_windows(8000, one, 16000, segment) == 7
  with pytest.raises(BadWav, match='segment of line 2 too short'):
    plan.segment_windows(1000, config, 16000, segment)
