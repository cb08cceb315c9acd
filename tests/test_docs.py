"""README.md and docs/*.md name only what exists: options, `wavbeam`
subcommands, `python -m` modules and linked files; the README and
BENCHMARKS.md stay short; the Python version named is setup.py's floor, and
install hints name the checkout."""

import contextlib
import dataclasses
import io
import os
import re
import sys

import pytest

from pipeline.commands import cli
from pipeline.config import PipelineConfig
from tests import helpers as H

ROOT = H.ROOT
README_MAX_LINES = 200
BENCHMARKS_MAX_LINES = 300

# The launcher's own flags (pipeline.run reads them before the config).
LAUNCHER_OPTIONS = {'--quiet', '--verbose', '--help'}
# Beam's options the documentation names, with the runners that read them.
BEAM_OPTIONS = {
    '--runner', '--direct_num_workers', '--direct_running_mode',
    '--setup_file', '--project', '--region', '--temp_location',
    '--staging_location', '--machine_type', '--max_num_workers',
    '--experiments', '--dry_run', '--job_endpoint', '--environment_type',
    '--flink_master', '--flink_version', '--flink_job_server_jar',
    '--parallelism', '--dask_client_address', '--dask_npartitions',
    '--dataflow_service_options', '--sdk_container_image', '--prism_location',
}
# Shown on purpose as a mistake (the flag that Beam alone would drop).
MISTYPED = {'--win_lenn'}

OPTION = re.compile(r'(?<![\w-])--([a-z][a-z0-9_]*)')
LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')
PYTHON_M = re.compile(r'python -m ([A-Za-z_][\w.]*)')
# A command line: `wavbeam X ...` at the start of a code span or line.
SUBCOMMAND = re.compile(r'^\s*(?:\$ )?wavbeam ([a-z]\w*)', re.M)


def _pages():
  return {os.path.relpath(p, ROOT): open(p, encoding='utf-8').read()
          for p in H.doc_files()}


def _code(text):
  """Fenced blocks and inline code spans: where commands are written."""
  fenced = re.findall(r'```[^\n]*\n(.*?)```', text, re.S)
  rest = re.sub(r'```[^\n]*\n.*?```', '', text, flags=re.S)
  return fenced + re.findall(r'`([^`\n]+)`', rest)


def _help_options(module):
  """The --flags a command's --help lists."""
  out = io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
    try:
      module.main(['--help'])
    except SystemExit:
      pass
  return {'--' + name for name in OPTION.findall(out.getvalue())}


def _script_options():
  """Flags the scripts in examples/ and bench/ define."""
  flags = set()
  for folder in ('examples', 'bench'):
    for name in os.listdir(os.path.join(ROOT, folder)):
      if name.endswith('.py'):
        text = open(os.path.join(ROOT, folder, name), encoding='utf-8').read()
        flags |= set(re.findall(r"add_argument\(\s*'(--\w+)'", text))
  return flags


def _known_options():
  import importlib
  known = {'--' + f.name for f in dataclasses.fields(PipelineConfig)}
  # The options of the feature plug-in the docs show as an example,
  # registered only while they are read: the other tests of this process
  # see the registry as it was.
  from transforms.features import registry
  plugin = 'tests.plugins.zero_crossings'
  features, modules = dict(registry._FEATURES), list(registry._MODULES)
  try:
    registry.load_modules([plugin])
    known |= {'--' + o.name for o in registry.options()}
  finally:
    registry._FEATURES.clear()
    registry._FEATURES.update(features)
    registry._MODULES[:] = modules
    if plugin not in modules:
      sys.modules.pop(plugin, None)
  known |= LAUNCHER_OPTIONS | BEAM_OPTIONS | MISTYPED | _script_options()
  for command in ('inspect', 'verify', 'demo'):
    known |= _help_options(importlib.import_module(cli.COMMANDS[command][0]))
  return known


def test_readme_is_short():
  with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
    assert len(f.read().splitlines()) <= README_MAX_LINES


def test_benchmarks_page_is_short():
  with open(os.path.join(ROOT, 'BENCHMARKS.md'), encoding='utf-8') as f:
    assert len(f.read().splitlines()) <= BENCHMARKS_MAX_LINES


def test_every_option_named_exists():
  known = _known_options()
  unknown = {(page, '--' + name) for page, text in _pages().items()
             for name in OPTION.findall(text) if '--' + name not in known}
  assert not unknown, sorted(unknown)


def test_every_wavbeam_subcommand_named_exists():
  unknown = {(page, name) for page, text in _pages().items()
             for code in _code(text) for name in SUBCOMMAND.findall(code)
             if name not in cli.COMMANDS}
  assert not unknown, sorted(unknown)


def test_every_python_m_module_named_is_a_module_of_the_repository():
  missing = set()
  for page, text in _pages().items():
    for module in PYTHON_M.findall(text):
      path = os.path.join(ROOT, *module.split('.'))
      if not (os.path.isfile(path + '.py') or
              os.path.isfile(os.path.join(path, '__main__.py'))):
        missing.add((page, module))
  assert not missing, sorted(missing)


def _anchors(text):
  """GitHub's anchors of a page's headings."""
  text = re.sub(r'```.*?```', '', text, flags=re.S)
  return {re.sub(r'[^\w\- ]', '', h.strip().lower()).replace(' ', '-')
          for h in re.findall(r'^#+ (.*)$', text, re.M)}


def test_every_relative_link_points_to_a_file_and_heading():
  pages = _pages()
  broken = set()
  for page, text in pages.items():
    for target in LINK.findall(text):
      if re.match(r'[a-z][a-z0-9+.-]*:', target):
        continue  # a URL
      path, _, anchor = target.partition('#')
      full = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), path))
      linked = os.path.relpath(full, ROOT) if path else page
      if not os.path.exists(full):
        broken.add((page, target))
      elif anchor and linked in pages and anchor not in _anchors(
          pages[linked]):
        broken.add((page, target))
  assert not broken, sorted(broken)


@pytest.mark.parametrize('text, found', [
    ('see `wavbeam verify OUT`', ['verify']),
    ("wavbeam's own writer; wavbeam turns", []),
    ('`another wavbeam job is writing to it`', []),
    ('```sh\nwavbeam run --input_dir IN\n```', ['run']),
])
def test_subcommands_are_found_in_code_only(text, found):
  assert [n for c in _code(text) for n in SUBCOMMAND.findall(c)] == found


def _python_floor():
  """The oldest Python setup.py accepts (`python_requires='>=3.N'`)."""
  with open(os.path.join(ROOT, 'setup.py'), encoding='utf-8') as f:
    found = re.findall(r"python_requires='>=(\d+\.\d+)'", f.read())
  assert len(found) == 1, found
  return found[0]


@pytest.mark.parametrize('page', ['README.md', 'docs/design.md'])
def test_the_python_version_named_is_the_one_setup_py_accepts(page):
  """README's set-up and design.md's requirements name the oldest Python
  setup.py accepts, as the oldest: `Python 3.N or newer`."""
  text = _pages()[os.path.normpath(page)]
  floor = _python_floor()
  assert f'Python {floor} or newer' in text
  named = re.findall(r'Python (\d+\.\d+)( or newer)?', text)
  assert named and all(v == (floor, ' or newer') for v in named), named


def _text_files(*folders):
  for folder in folders:
    for top, _, names in os.walk(os.path.join(ROOT, folder)):
      for name in names:
        if name.endswith(('.py', '.md')) or folder == 'launch':
          yield os.path.join(top, name)


def test_install_hints_name_the_checkout_not_an_index_package():
  """wavbeam is installed from its checkout (`pip install '.[extra]'`):
  no page or message says `pip install wavbeam` or `wavbeam[extra]`, which
  pip would look for on a package index."""
  files = [*H.doc_files(), os.path.join(ROOT, 'BENCHMARKS.md'),
           os.path.join(ROOT, 'setup.py'),
           *_text_files('pipeline', 'transforms', 'examples', 'bench',
                        'launch')]
  found = set()
  for path in files:
    with open(path, encoding='utf-8') as f:
      text = f.read()
    for wrong in re.findall(r'pip install wavbeam|wavbeam\[\w', text):
      found.add((os.path.relpath(path, ROOT), wrong))
  assert not found, sorted(found)


def test_the_code_layout_names_every_module():
  text = open(os.path.join(ROOT, 'docs', 'design.md'),
              encoding='utf-8').read()
  layout = text.split('## Code layout', 1)[1].split('\n## ', 1)[0]
  missing = []
  for package in ('pipeline', 'transforms'):
    for folder, _, files in os.walk(os.path.join(ROOT, package)):
      missing += [os.path.join(folder, f) for f in files
                  if f.endswith('.py') and f != '__init__.py' and
                  f'`{f}`' not in layout]
  assert not missing, missing
