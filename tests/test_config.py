"""pipeline/config: the option table in docs/options.md is --help's."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_options_page_lists_every_option_as_help_does():
  from pipeline import config as config_lib
  with open(os.path.join(ROOT, 'docs', 'options.md'), encoding='utf-8') as f:
    options_page = f.read()
  assert config_lib.options_markdown() in options_page
  assert '`--quiet`' in options_page
  assert '`--verbose`' in options_page


def test_readme_links_to_the_options_page():
  with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
    assert '(docs/options.md)' in f.read()
