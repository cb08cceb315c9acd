"""pipeline/graph: building the job changes nothing on disk (preparing the
output folder is the run step's), and fails early on bad options."""

import os

import apache_beam as beam
import pytest

from pipeline import graph
from pipeline.commands import run as run_lib
from pipeline.config import ConfigError
from tests import helpers as H


def _listing(folder):
  return sorted((os.path.relpath(os.path.join(r, f), folder),
                 os.path.getmtime(os.path.join(r, f)))
                for r, _, fs in os.walk(folder) for f in fs)


def test_building_over_a_dataset_with_overwrite_changes_nothing(tmp_path):
  H.write_wav(str(tmp_path / 'in' / 'a' / '0.wav'), H.noise(4096))
  config = H.make_config(tmp_path / 'in', tmp_path / 'out', win_len=1024,
                         n_fft=256)
  H.run_pipeline(config)
  before = _listing(tmp_path / 'out')
  again = H.make_config(tmp_path / 'in', tmp_path / 'out', win_len=1024,
                        n_fft=256, overwrite=True)
  p = beam.Pipeline(options=run_lib.pipeline_options([]))
  graph.build_pipeline(p, again, run_id='not-run')
  assert _listing(tmp_path / 'out') == before  # not deleted, not marked


def test_a_bad_extra_feature_fails_at_build(tmp_path):
  H.write_wav(str(tmp_path / 'in' / 'a' / '0.wav'), H.noise(4096))
  config = H.make_config(tmp_path / 'in', tmp_path / 'out', win_len=1024,
                         n_fft=256)
  p = beam.Pipeline(options=run_lib.pipeline_options([]))
  with pytest.raises(ConfigError, match='reuse a built-in key'):
    graph.build_pipeline(p, config, {'target': lambda w, r: w})
  assert not (tmp_path / 'out').exists()
