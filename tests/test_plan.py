"""transforms/plan: a probed file planned (split, label, manifest row,
windows), and chunks bounded by input samples."""

import pytest

from pipeline import config as config_lib
from transforms import plan
from transforms.manifest import Entry
from transforms.file_reports import BadWav, WavInfo


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
