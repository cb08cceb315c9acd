"""pipeline/config: the README's option table is --help's."""

import os



ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_readme_lists_every_option_as_help_does():
  from pipeline import config as config_lib
  with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
    readme = f.read()
  assert config_lib.options_markdown() in readme
  assert '`--quiet`' in readme
