import os
import sys
import tempfile

import pytest

# Tests import the packages from the checkout, installed or not.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_configure(config):
  config.addinivalue_line(
      'markers', 'slow: takes minutes; `pytest -m "not slow"` leaves it out')


@pytest.fixture(autouse=True, scope='session')
def _temp_files_in_the_session_folder(tmp_path_factory):
  """Beam's Pipeline() makes a beam-pipeline-temp* folder that only run()
  removes: each pipeline a test builds without running it (graph-size and
  dry-run tests) left one in /tmp. In pytest's own folder they go with it.
  """
  before = tempfile.tempdir
  tempfile.tempdir = str(tmp_path_factory.mktemp('tempfile'))
  yield
  tempfile.tempdir = before
