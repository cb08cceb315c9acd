"""transforms/planning/block_store: a block's probes, kept between passes."""

import os

import pytest

from transforms.inputs import block_store
from transforms.runtime import output_lock as run_marker
from transforms.inputs.audio_io import WavInfo


def test_round_trip_with_a_fresh_file_per_attempt(tmp_path):
  infos = (WavInfo(7, str(tmp_path / 'a [1].wav'), 16000, 16000, 1, 'PCM_16',
                   32044, 12.5, 44),
           WavInfo(8, 'gs://b/\u00e9.wav', 3, 8000, 2, 'FLOAT'))
  first = block_store.write(str(tmp_path), 3, infos)
  second = block_store.write(str(tmp_path), 3, infos)
  assert first != second
  assert os.path.dirname(first) == os.path.join(
      run_marker.temp_dir(str(tmp_path)), block_store.FOLDER)
  assert block_store.read(first) == block_store.read(second) == infos


def test_a_missing_block_file_says_the_folder_changed(tmp_path):
  path = block_store.write(str(tmp_path), 0, ())
  os.remove(path)
  with pytest.raises(run_marker.OutputChanged, match='changed by someone'):
    block_store.read(path)
