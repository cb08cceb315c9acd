"""pipeline.run.run(config): what `wavbeam run` does, from Python, and the
README's Python example as printed (its feature function included), with
the listing of `out/` the README shows."""

import os
import re

import numpy as np
import pytest

from pipeline import config as config_lib
from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.commands import run as run_lib
from pipeline.config import PipelineConfig
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _corpus(folder):
  for i in range(6):
    H.write_wav(str(folder / ('owl', 'wren')[i % 2] / f'{i}.wav'),
                H.noise(16000 + 4000 * i, seed=i))


def _readme():
  return open(os.path.join(ROOT, 'README.md'), encoding='utf-8').read()


def _readme_listing():
  """The file names of the README's `out/` listing: the first columns
  (two spaces apart) of each line below `out/`, those without a space."""
  blocks = re.findall(r'^```\n(out/\n.*?)^```', _readme(), re.S | re.M)
  assert len(blocks) == 1
  return sorted(name for line in blocks[0].splitlines()[1:]
                for name in re.split(r' {2,}', line.strip())
                if name and ' ' not in name)


def test_the_readme_example_runs_as_printed(tmp_path, monkeypatch):
  blocks = [b for b in re.findall(r'```python\n(.*?)```', _readme(), re.S)
            if 'from pipeline.run import run' in b]
  assert len(blocks) == 1
  _corpus(tmp_path / 'corpus')
  monkeypatch.chdir(tmp_path)
  namespace = {}  # the block defines everything it uses
  exec(compile(blocks[0], 'README.md', 'exec'), namespace)  # pylint: disable=exec-used
  my_numpy_fn = namespace['my_numpy_fn']
  assert sorted(os.listdir('out')) == _readme_listing()
  ds = namespace['ds']
  batch = next(iter(ds))
  assert 'zcr' in batch and 'log_mel' in batch
  config = namespace['config']
  zcr = {}
  for split in ('train', 'validation'):
    for e in numpy_reader.numpy_dataset('out/', split):
      path = e['filepath']
      path = path.decode() if isinstance(path, bytes) else str(path)
      zcr[(path, int(e['win_start_idx']))] = e['zcr']
  checked = 0
  for path in sorted({p for p, _ in zcr}):
    starts, windows = H.reference_windows(path, config)
    expected = my_numpy_fn(np.asarray(windows, np.float32), 16000)
    for start, value in zip(starts, expected):
      assert np.array_equal(zcr[(path, int(start))], value), (path, start)
      checked += 1
  assert checked == len(zcr) > 0


def test_it_keeps_the_commands_safety(tmp_path):
  _corpus(tmp_path / 'in')
  config = PipelineConfig(input_dir=str(tmp_path / 'in'),
                          output_dir=str(tmp_path / 'out'), win_len=4000)
  run_lib.run(config, ['--direct_num_workers=1'])
  first = (tmp_path / 'out' / 'metadata.json').read_bytes()
  with pytest.raises(config_lib.ConfigError, match='--output_dir'):
    run_lib.run(config)  # an existing dataset, without overwrite
  assert (tmp_path / 'out' / 'metadata.json').read_bytes() == first
  with pytest.raises(config_lib.ConfigError, match='unrecognized'):
    run_lib.run(PipelineConfig(input_dir=str(tmp_path / 'in'),
                               output_dir=str(tmp_path / 'other')),
                ['--no_such_beam_flag=1'])
  assert not (tmp_path / 'other').exists()
  again = PipelineConfig(input_dir=str(tmp_path / 'in'),
                         output_dir=str(tmp_path / 'out'), win_len=4000,
                         overwrite=True)
  run_lib.run(again)
  shard = 'wavbeam-train.tfrecord-00000-of-00001'
  assert (tmp_path / 'out' / shard).exists()
