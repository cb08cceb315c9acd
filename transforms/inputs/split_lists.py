"""--split_lists: files named in list files go to that split, the rest to
train (the convention of Speech Commands' validation_list.txt and
testing_list.txt).

Each list is read once per process (the lists name paths, a few MB for
100,000 files) and checked before the run starts: a path listed twice
fails with both places named.
"""

import functools
import posixpath
from typing import Dict, Tuple

from apache_beam.io.filesystems import FileSystems

from pipeline.contract import naming
from pipeline.config import ConfigError, PipelineConfig


def list_location(input_dir: str, path: str) -> str:
  """A list file: absolute, a URI, or relative to input_dir."""
  if path.startswith('/') or FileSystems.get_scheme(path):
    return path
  return naming.join(input_dir, path)


@functools.lru_cache(maxsize=4)
def _read(input_dir: str, lists: Tuple[Tuple[str, str], ...]
          ) -> Dict[str, Tuple[str, str, int]]:
  text = ','.join(f'{n}={f}' for n, f in lists)
  found: Dict[str, Tuple[str, str, int]] = {}
  for split, path in lists:
    location = list_location(input_dir, path)
    try:
      with FileSystems.open(location) as f:
        lines = f.read().decode('utf-8-sig').splitlines()
    except (OSError, IOError, UnicodeDecodeError) as e:
      raise ConfigError('split_lists', text,
                        f'cannot read {location} ({e})') from e
    for number, line in enumerate(lines, 1):
      name = line.strip()
      if not name:
        continue
      # As the listing names files: a//b.wav and ./a/b.wav are a/b.wav.
      name = posixpath.normpath(name)
      if (name.startswith('/') or FileSystems.get_scheme(name) or
          name == '..' or name.startswith('../')):
        raise ConfigError('split_lists', text,
                          f'{location} line {number}: {line.strip()!r} is '
                          'not a path below --input_dir: a list names files '
                          'relative to it')
      if name in found:
        other, where, at = found[name]
        raise ConfigError('split_lists', text,
                          f'{name} is listed twice: {where} line {at} '
                          f'({other}) and {location} line {number} '
                          f'({split})')
      found[name] = (split, location, number)
  return found


def listed_splits(config: PipelineConfig) -> Dict[str, str]:
  """{path relative to input_dir: split} of every listed file."""
  return {name: split for name, (split, _, _) in
          _read(config.input_dir, config.split_lists).items()}


def listed_places(config: PipelineConfig) -> Dict[str, str]:
  """{path relative to input_dir: where it is listed, e.g.
  'DIR/testing_list.txt line 7 (test)'}."""
  return {name: f'{location} line {number} ({split})'
          for name, (split, location, number) in
          _read(config.input_dir, config.split_lists).items()}
