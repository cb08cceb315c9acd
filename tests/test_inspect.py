"""python -m pipeline.inspect_dataset: summary, --show, --plot and raw
TFRecords."""

import numpy as np
import pytest
from PIL import Image

from pipeline.commands import inspect as inspect_lib
from tests import helpers as H


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
  d = tmp_path_factory.mktemp('inspect')
  for i in range(3):
    H.write_wav(str(d / f'in/bird/{i}.wav'), H.noise(4096, seed=i))
  H.write_wav(str(d / 'in/dog/a.wav'), H.noise(8192, seed=9))
  (d / 'in/dog/broken.wav').write_bytes(b'RIFF')
  config = H.make_config(d / 'in', d / 'out', win_len=1024,
                         features=('signal', 'log_mel'),
                         max_examples_per_shard=5)
  meta = H.run_pipeline(config)
  return d / 'out', meta


def _main(capsys, *argv):
  code = inspect_lib.main([str(a) for a in argv])
  out = capsys.readouterr()
  return code, out.out, out.err


def test_summary_has_the_numbers(dataset, capsys):
  out, meta = dataset
  code, text, _ = _main(capsys, out)
  assert code == 0
  assert '20 examples from 4 of 5 files; 1 file rejected' in text
  assert 'train: 20 examples in 4 shards' in text
  assert '    bird: 12' in text and '    dog: 8' in text
  assert 'signal: int32 shape [1024] (raw_bytes)' in text
  assert 'log_mel: float32 shape [3, 64] (float_list)' in text
  stats = meta['splits']['train']['statistics']['signal']
  assert f'train/signal: mean {stats["mean"]:.6g}' in text
  assert '1 x unreadable (e.g. ' in text and 'broken.wav' in text
  assert '--win_len=1024' in text


def test_show_prints_elements(dataset, capsys):
  out, _ = dataset
  code, text, _ = _main(capsys, out, '--show', 2)
  assert code == 0
  assert text.count('train[') == 2 and 'train[1]:' in text
  assert 'signal: int32 shape [1024] [' in text
  assert 'log_mel: float32 shape [3, 64]' in text
  assert "class: string 'bird'" in text or "class: string 'dog'" in text


def test_plot_writes_a_real_figure(dataset, capsys, tmp_path):
  out, _ = dataset
  png = tmp_path / 'figure.png'
  code, text, _ = _main(capsys, out, '--plot', png, '--n', 3)
  assert code == 0 and f'wrote {png}' in text
  image = np.asarray(Image.open(png).convert('RGB'))
  assert image.shape == (300 * 4, 1500, 3)   # 3 examples + the class bars
  # Not blank: many colours (spectrogram colour maps), not one background.
  colours = len(np.unique(image.reshape(-1, 3), axis=0))
  assert colours > 500 and image.std() > 20


def test_plot_draws_mfcc_and_lpc_beside_the_spectrograms(tmp_path, capsys):
  for i in range(3):
    H.write_wav(str(tmp_path / 'in' / 'a' / f'{i}.wav'),
                H.noise(4096, seed=i))
  config = H.make_config(tmp_path / 'in', tmp_path / 'out', win_len=2048,
                         features=('signal', 'mfcc', 'lpc'))
  H.run_pipeline(config)
  png = tmp_path / 'figure.png'
  code, text, err = _main(capsys, tmp_path / 'out', '--plot', png, '--n', 2)
  assert code == 0, err
  image = np.asarray(Image.open(png).convert('RGB'))
  assert image.shape == (300 * 3, 500 * 5, 3)  # 5 columns: + MFCC, LPC
  right = image[:600, 1500:]  # the two new columns of both examples
  assert len(np.unique(right.reshape(-1, 3), axis=0)) > 200


def test_raw_tfrecord_without_metadata(dataset, capsys):
  out, meta = dataset
  shard = meta['splits']['train']['shards'][0]
  code, text, _ = _main(capsys, out / shard['file'], '--show', 1)
  assert code == 0
  assert f'{shard["num_examples"]} records (CRCs checked)' in text
  assert 'signal: bytes_list, 1 value(s), 4096 bytes' in text
  assert 'target: int64_list, 1 value(s)' in text


@pytest.mark.parametrize('damage', ['flipped', 'cut', 'not_an_example'])
def test_a_corrupt_record_file_exits_1(dataset, capsys, tmp_path, damage):
  from pipeline.contract import tfrecord
  out, meta = dataset
  data = (out / meta['splits']['train']['shards'][0]['file']).read_bytes()
  broken = tmp_path / 'broken.tfrecord'
  if damage == 'flipped':
    broken.write_bytes(data[:30] + bytes([data[30] ^ 1]) + data[31:])
  elif damage == 'cut':
    broken.write_bytes(data[:len(data) // 2])
  else:
    with open(broken, 'wb') as f:
      tfrecord.write_record(f, b'\x0a\xff\xff not a protocol buffer')
  code, _, err = _main(capsys, broken)
  assert code == 1 and str(broken) in err


def test_inspect_errors(dataset, capsys, tmp_path):
  code, _, err = _main(capsys, tmp_path / 'nothing')
  assert code == 1 and 'not a wavbeam dataset' in err
  code, _, err = _main(capsys, dataset[0], '--show', 1, '--split', 'nope')
  assert code == 1 and "unknown split 'nope'" in err
  with pytest.raises(SystemExit) as e:
    inspect_lib.main([str(dataset[0]), '--show', '0'])
  assert e.value.code == 2



@pytest.mark.parametrize('damage', ['fifo', 'missing'])
def test_shards_are_checked_before_reading(dataset, tmp_path, capsys,
                                           damage):
  """A FIFO in place of a shard is refused before --show would block on
  it; a missing shard is named by the summary."""
  import os
  import shutil
  out, meta = dataset
  copy = tmp_path / 'copy'
  shutil.copytree(out, copy)
  shard = copy / meta['splits']['train']['shards'][1]['file']
  shard.unlink()
  if damage == 'fifo':
    os.mkfifo(shard)
  for argv in ([copy], [copy, '--show', '2']):
    code, _, err = _main(capsys, *argv)
    assert code == 1 and str(shard) in err, err


@pytest.fixture(scope='module')
def gzip_bfloat16(tmp_path_factory):
  """--compression gzip and --feature_dtype bfloat16: shards named
  .tfrecord that are gzip, and arrays matplotlib cannot take."""
  d = tmp_path_factory.mktemp('inspect_gzip')
  for i in range(3):
    H.write_wav(str(d / f'in/a/{i}.wav'), H.noise(4096, seed=i))
  config = H.make_config(d / 'in', d / 'out', win_len=2048,
                         features=('signal', 'spectrogram', 'log_mel'),
                         compression='gzip', feature_dtype='bfloat16')
  meta = H.run_pipeline(config)
  return d / 'out', meta


def test_a_gzip_shard_is_read_as_gzip_whatever_its_name(gzip_bfloat16,
                                                        capsys):
  out, meta = gzip_bfloat16
  shard = meta['splits']['train']['shards'][0]
  code, text, err = _main(capsys, out / shard['file'], '--show', 1)
  assert code == 0, err
  assert f'{shard["num_examples"]} records (CRCs checked)' in text


def test_a_damaged_gzip_shard_is_one_line_naming_it(gzip_bfloat16, capsys,
                                                    tmp_path):
  import shutil
  out, meta = gzip_bfloat16
  copy = tmp_path / 'copy'
  shutil.copytree(out, copy)
  shard = copy / meta['splits']['train']['shards'][0]['file']
  data = bytearray(shard.read_bytes())
  data[-6] ^= 0x01  # gzip's CRC of the data, in its trailer
  shard.write_bytes(bytes(data))
  code, _, err = _main(capsys, copy, '--show', 2)
  assert code == 1 and err.startswith(f'error: shard {shard}: '), err
  assert len(err.strip().splitlines()) == 1


def test_plot_of_a_bfloat16_dataset(gzip_bfloat16, capsys, tmp_path):
  out, _ = gzip_bfloat16
  png = tmp_path / 'figure.png'
  code, text, err = _main(capsys, out, '--plot', png, '--n', 2)
  assert code == 0 and f'wrote {png}' in text, err
  image = np.asarray(Image.open(png).convert('RGB'))
  assert len(np.unique(image.reshape(-1, 3), axis=0)) > 500
