"""The repository speaks of the product as it is: no line refers to the
history of its making (numbered rounds, sessions, issues or defects,
notes kept outside the repository)."""

import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HISTORY = re.compile(
    r'\b(round|session|issue|defect)s? #?\d+\b'   # a numbered one
    r'|\.\./shared/|NOTES\.md'                     # notes outside the repo
    r'|\bit used to\b|\bused to (hang|block|fail|print|take|be)\b',
    re.IGNORECASE)


def _tracked_text_files():
  names = subprocess.run(['git', 'ls-files'], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
  for name in names:
    if name == 'tests/test_no_history.py':
      continue
    try:
      with open(os.path.join(ROOT, name), encoding='utf-8') as f:
        yield name, f.read()
    except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
      continue  # binary files; files deleted but not yet committed


def test_no_line_refers_to_the_history_of_the_work():
  found = [f'{name}:{number}: {line.strip()}'
           for name, text in _tracked_text_files()
           for number, line in enumerate(text.splitlines(), 1)
           if HISTORY.search(line)]
  assert not found, '\n'.join(found)


def test_the_pattern_finds_what_it_is_for():
  numbered = [f'{word} {number}' for word, number in (
      ('session', 6), ('defect', 2), ('issue', 16), ('round', 3))]
  notes = '../' + 'shared/' + 'NOTES' + '.md'
  for line in numbered + [notes, 'it ' + 'used to hang']:
    assert HISTORY.search(line), line
  for line in ('five rounds of interleaved runs', 'round(x, 3)',
               'the issue is a closed pipe'):
    assert not HISTORY.search(line), line
