import collections
import compileall
import os
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Tests import the packages from the checkout, installed or not.
sys.path.insert(0, ROOT)
# The checkout's packages, which the commands the tests start import.
PACKAGES = ('pipeline', 'transforms', 'bench', 'tests')


# Modules whose tests each start whole runs, servers or worker processes
# (seconds each): left out of the fast loop, `pytest -m "not slow"`, with
# every test_integration_* module.
SLOW_MODULES = frozenset({
    'test_append.py', 'test_array_record.py', 'test_bench_baselines.py',
    'test_bench_plan_scale.py', 'test_console_exit.py', 'test_examples.py',
    'test_forked_workers.py', 'test_lean_beam.py', 'test_manifest.py',
    'test_metadata_damage.py', 'test_package.py', 'test_package_api.py',
    'test_progress.py', 'test_replay_engines.py', 'test_resume.py',
    'test_run.py', 'test_run_api.py', 'test_sink.py',
    'test_speech_commands.py', 'test_split_lists.py', 'test_split_unit.py',
    'test_splits.py', 'test_torch_dataset.py', 'test_unfinished_passes.py',
    'test_variants.py', 'test_verify.py'})


# pytest's rewritten test modules are kept as bytecode, as the checkout's
# modules are (pytest_sessionstart), whatever the environment says:
# rewriting them all costs each test worker 3-4 s at its start.
sys.dont_write_bytecode = False


def pytest_sessionstart(session):
  """Compiles the checkout's modules to bytecode once, as installing a
  package does: where the environment says not to write bytecode
  (PYTHONDONTWRITEBYTECODE), each of the hundreds of commands the tests
  start would otherwise compile every module again (0.1 s each)."""
  del session
  for package in PACKAGES:
    compileall.compile_dir(os.path.join(ROOT, package), quiet=1)


def pytest_configure(config):
  config.addinivalue_line(
      'markers', 'slow: starts whole runs or processes; `pytest -m "not '
      'slow"` (make test-fast) leaves it out')


# The modules that take longest (a minute to a quarter of an hour on two
# cores), longest first. `make test` gives its two pytest workers whole
# modules in the order they are collected (--dist loadfile
# --no-loadscope-reorder): these first, then the rest, most tests first,
# so that neither worker is left alone at the end with one of these while
# the other has run out of work.
LONGEST_MODULES = (
    'test_integration_matrix.py', 'test_embeddings.py',
    'test_metadata_damage.py', 'test_integration_runners.py',
    'test_torch_dataset.py', 'test_resume.py', 'test_integration_atomic.py',
    'test_integration_lock.py', 'test_integration_one_writer.py',
    'test_package.py', 'test_spool.py', 'test_progress.py')


def pytest_collection_modifyitems(config, items):
  del config
  for item in items:
    name = item.path.name
    if name.startswith('test_integration_') or name in SLOW_MODULES:
      item.add_marker(pytest.mark.slow)
  rank = {name: i for i, name in enumerate(LONGEST_MODULES)}
  counts = collections.Counter(item.path for item in items)
  items.sort(key=lambda item: (rank.get(item.path.name, len(rank)),
                               -counts[item.path], str(item.path)))


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
