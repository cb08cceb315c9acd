"""--augment: augmented copies written beside each recording.

The effects against their formulas; then a run whose every stored copy
is rebuilt here from the recording and what its `augmentation` records:
speed as soxr's one-pass resampling of the whole file (lengths as
Lhotse's perturb_speed counts them), noise mixed at the recorded SNR from
the recorded clip and sample, reverberation by numpy's convolution, gain.
Copies stay in their recording's split, the counts add up, and a second
run writes the same bytes."""

import collections
import hashlib
import os
import re

import numpy as np
import pytest
import soundfile as sf
import soxr

from pipeline.commands import run as run_lib
from pipeline.commands import verify
from pipeline.config import ConfigError
from pipeline.readers import numpy_dataset as numpy_reader
from transforms.writing import augment
from tests import helpers as H

RATE = 16000
WIN = 8000


def test_noise_is_mixed_at_the_snr():
  rng = np.random.default_rng(0)
  x, noise = rng.standard_normal(5000), rng.standard_normal(700) * 3
  for snr in (-5.0, 0.0, 12.5):
    y = augment.mix_at_snr(x, augment.looped(noise, 650, 5000), snr)
    added = y - x
    assert 10 * np.log10(np.mean(x ** 2) / np.mean(added ** 2)) == (
        pytest.approx(snr, abs=1e-9))
    # The clip from sample 650 on, then from its start again.
    ratio = added / np.r_[noise[650:], np.tile(noise, 8)][:5000]
    assert np.allclose(ratio, ratio[0])
  silent = np.zeros(100)
  assert np.array_equal(augment.mix_at_snr(silent, noise[:100], 5), silent)


def test_reverberation_starts_at_the_direct_path_at_the_same_energy():
  rng = np.random.default_rng(1)
  x = rng.standard_normal(3000)
  rir = np.r_[np.zeros(25), 1.0, rng.standard_normal(400) * 0.1]
  y = augment.reverberate(x, rir)
  wet = np.convolve(x, rir)[25:25 + 3000]
  assert np.allclose(y, wet * np.sqrt(np.sum(x ** 2) / np.sum(wet ** 2)))
  assert np.sum(y ** 2) == pytest.approx(np.sum(x ** 2))
  # A pure delay is the signal itself.
  assert np.allclose(augment.reverberate(x, np.r_[np.zeros(9), 0.5]), x)


def test_gain_in_decibels():
  assert augment.gain(np.array([1.0, -0.5]), -6.0) == pytest.approx(
      np.array([1.0, -0.5]) * 10 ** -0.3)


@pytest.mark.parametrize('text, message', [
    ('echo=3', 'an effect is one of speed, gain, noise, reverb'),
    ('speed=3', r'speed=3: give a factor in \[0.5, 2\]'),
    ('speed=1', 'other than 1'),
    ('speed=0.9:1.1', 'one factor per copy'),
    ('gain=6:-6', 'LOW at most HIGH'),
    ('gain=loud', 'give gain=VALUE or gain=LOW:HIGH'),
    ('reverb=1', 'reverb takes no value'),
    ('gain=1+gain=2', 'an effect twice'),
    ('gain=1,gain=1', 'names a copy twice'),
    ('noise=5', 'noise= needs --noise_dir'),
    ('reverb', 'reverb needs --rir_dir'),
])
def test_bad_copies_are_refused(tmp_path, text, message):
  with pytest.raises(ConfigError, match=message):
    H.make_config(str(tmp_path), str(tmp_path / 'out'), augment=text,
                  sample_rate=RATE)


def test_values_keep_every_digit(tmp_path):
  config = H.make_config(str(tmp_path), str(tmp_path / 'out'),
                         augment='gain=0.1234567,speed=1.0000001,'
                         'gain=1.0000001,gain=1.0000002', sample_rate=RATE)
  assert config.augment == ('gain=0.1234567', 'speed=1.0000001',
                            'gain=1.0000001', 'gain=1.0000002')
  assert config.augment_copies[0][0].low == 0.1234567


def test_a_manifest_column_of_its_name_is_refused(tmp_path):
  with pytest.raises(ConfigError, match='--manifest_extra_columns='
                     '.augmentation.: is the key of what --augment did'):
    H.make_config(str(tmp_path), str(tmp_path / 'out'), augment='gain=3',
                  manifest='m.csv', manifest_extra_columns=('augmentation',))


def test_speed_needs_the_dataset_rate(tmp_path):
  with pytest.raises(ConfigError, match='speed= needs --sample_rate'):
    H.make_config(str(tmp_path), str(tmp_path / 'out'), augment='speed=0.9')


def _corpus(d):
  rng = np.random.default_rng(2)
  for i in range(4):
    H.write_wav(str(d / 'in' / ('owl', 'wren')[i % 2] / f'{i}.wav'),
                rng.uniform(-0.4, 0.4, RATE * 2 + 977 * i), rate=RATE)
  # Noise at another rate (resampled) and at the dataset's.
  H.write_wav(str(d / 'noise' / 'street.wav'),
              rng.uniform(-0.5, 0.5, 8000 * 3), rate=8000)
  H.write_wav(str(d / 'noise' / 'babble' / 'b.flac'),
              rng.uniform(-0.5, 0.5, 7000), rate=RATE, fmt='FLAC')
  rir = np.exp(-np.arange(2000) / 400.0) * rng.standard_normal(2000) * 0.2
  rir[30] = 0.9
  H.write_wav(str(d / 'rir' / 'room.wav'), rir, rate=RATE, subtype='FLOAT')


COPIES = 'speed=0.9,speed=1.1+noise=5:15,reverb+gain=-6:0'


def _argv(d, out, *extra):
  return ['--input_dir', str(d / 'in'), '--output_dir', str(d / out),
          '--win_len', str(WIN), '--features', 'signal,log_mel',
          '--signal_dtype', 'float32', '--sample_rate', str(RATE),
          '--splits', 'train=0.5,test=0.5', '--augment', COPIES,
          '--noise_dir', str(d / 'noise'), '--rir_dir', str(d / 'rir'),
          '--audio_formats', 'wav,flac', '--runner=FnApiRunner', *extra]


@pytest.fixture(scope='module')
def copies(tmp_path_factory):
  d = tmp_path_factory.mktemp('copies')
  _corpus(d)
  run_lib.run(_argv(d, 'out'))
  examples = []
  for split in ('train', 'test'):
    examples += [(split, e) for e in numpy_reader.numpy_dataset(
        str(d / 'out'), split)]
  return d, examples


def _whole(path):
  data, _ = sf.read(path, dtype='float64')
  return data


def _clip(d, name):
  """A noise clip or impulse response at RATE, resampled by soxr in one
  pass."""
  folder = d / ('rir' if name == 'room.wav' else 'noise')
  data, rate = sf.read(str(folder / name), dtype='float64')
  return data if rate == RATE else soxr.resample(data, rate, RATE, 'VHQ')


@pytest.mark.slow
def test_every_copy_is_rebuilt_from_what_it_records(copies):
  d, examples = copies
  by_kind = collections.Counter()
  for split, e in examples:
    record = str(e['augmentation'])
    source = _whole(str(e['filepath']))
    start = int(e['win_start_idx'])
    if record.startswith('speed='):
      factor = float(re.match(r'speed=([\d.]+)', record).group(1))
      source = soxr.resample(source, round(RATE * factor), RATE, 'VHQ')
    x = np.zeros(WIN)
    piece = source[start:start + WIN]
    x[:len(piece)] = piece
    kind = record.split(':')[0].split('=')[0] if record else 'original'
    found = re.search(r'noise=(-?[\d.]+):(.+)@(\d+)', record)
    if found:
      snr, name, at = float(found[1]), found[2], int(found[3])
      x = augment.mix_at_snr(x, augment.looped(_clip(d, name), at, WIN),
                             snr)
    if 'reverb:room.wav' in record:
      rir = _clip(d, 'room.wav')
      wet = np.convolve(x, rir[30:])[:WIN]
      x = wet * np.sqrt(np.sum(x ** 2) / np.sum(wet ** 2))
    found = re.search(r'gain=(-?[\d.]+)', record)
    if found:
      x = x * 10 ** (float(found[1]) / 20)
    # The recorded values are rounded to 1/100 dB: 1e-3 of the samples.
    tolerance = 2e-3 if ('gain' in record or 'noise' in record) else 1e-6
    np.testing.assert_allclose(e['signal'], x, atol=tolerance,
                               err_msg=record)
    by_kind[kind] += 1
  # 4 recordings of 2 s + 977 i samples: their windows, and the speed
  # copies' of the lengths Lhotse's perturb_speed gives.
  lengths = [RATE * 2 + 977 * i for i in range(4)]
  lhotse = pytest.importorskip('lhotse')
  for factor in (0.9, 1.1):
    rec = lhotse.Recording.from_file(str(d / 'in' / 'owl' / '0.wav'))
    assert rec.perturb_speed(factor).num_samples == round(
        lengths[0] / factor)
  assert by_kind == {
      'original': sum(n // WIN for n in lengths),
      'speed': sum(round(n / 0.9) // WIN + round(n / 1.1) // WIN
                   for n in lengths),
      'reverb': sum(n // WIN for n in lengths)}


@pytest.mark.slow
def test_copies_stay_in_their_recordings_split(copies):
  d, examples = copies
  splits = collections.defaultdict(set)
  for split, e in examples:
    splits[str(e['filepath'])].add(split)
  assert len(splits) == 4 and all(len(s) == 1 for s in splits.values())
  meta = numpy_reader.load_metadata(str(d / 'out'))
  assert meta['counts']['files_ok'] == meta['counts']['files_seen'] == 4
  assert sum(s['num_files'] for s in meta['splits'].values()) == 4
  assert verify.main([str(d / 'out')]) == 0


@pytest.mark.slow
def test_a_second_run_writes_the_same_bytes(copies, tmp_path):
  d, _ = copies
  run_lib.run(_argv(d, tmp_path / 'again'))

  def digests(folder):
    return {n: hashlib.sha256((folder / n).read_bytes()).hexdigest()
            for n in os.listdir(folder) if '.tfrecord-' in n}
  assert digests(tmp_path / 'again') == digests(d / 'out')


@pytest.mark.slow
def test_whole_recordings_get_their_copies(copies, tmp_path):
  d, _ = copies
  run_lib.run(['--input_dir', str(d / 'in'), '--output_dir',
               str(tmp_path / 'files'), '--example_unit', 'file',
               '--features', 'signal', '--signal_dtype', 'float32',
               '--sample_rate', str(RATE), '--splits', 'train=0.5,test=0.5',
               '--augment', 'speed=1.1,gain=-3', '--runner=FnApiRunner'])
  found = {}
  for split in ('train', 'test'):
    for e in numpy_reader.numpy_dataset(str(tmp_path / 'files'), split):
      found[(os.path.basename(str(e['filepath'])), str(e['augmentation']))] \
          = e['signal']
  assert len(found) == 12
  for i in range(4):
    path = d / 'in' / ('owl', 'wren')[i % 2] / f'{i}.wav'
    source = _whole(str(path))
    np.testing.assert_array_equal(found[(f'{i}.wav', '')],
                                  source.astype(np.float32))
    # As every resampled file, ceil(n / 1.1) samples long: soxr's one
    # pass stops a sample short of that where it does not divide.
    faster = found[(f'{i}.wav', 'speed=1.1')]
    assert len(faster) == -(-len(source) * 10 // 11)
    theirs = soxr.resample(source, 17600, RATE, 'VHQ')
    assert len(faster) - len(theirs) in (0, 1)
    np.testing.assert_allclose(faster[:len(theirs)], theirs, atol=1e-6)
    np.testing.assert_allclose(found[(f'{i}.wav', 'gain=-3.00')],
                               source * 10 ** (-3 / 20), atol=1e-6)


@pytest.mark.slow
def test_an_empty_noise_folder_is_refused(tmp_path):
  _corpus(tmp_path)
  (tmp_path / 'empty').mkdir()
  argv = _argv(tmp_path, 'out')
  argv[argv.index('--noise_dir') + 1] = str(tmp_path / 'empty')
  with pytest.raises(ConfigError, match='--noise_dir=.*holds no audio file'):
    run_lib.run(argv)
  assert not (tmp_path / 'out').exists()


@pytest.mark.slow
def test_a_sweep_holds_what_separate_runs_hold(copies, tmp_path):
  """Each variant of a sweep with copies equals its own run, file for
  file: the copies are read once for every variant."""
  import json
  from tests.test_variants import _assert_same_dataset
  d, _ = copies
  variants = {'small': ['--n_fft', '256', '--fft_hop', '128'],
              'mfcc': ['--features', 'signal,mfcc', '--n_mfcc', '20']}
  (tmp_path / 'v.json').write_text(json.dumps({
      name: {f[2:]: v for f, v in zip(args[::2], args[1::2])}
      for name, args in variants.items()}))
  run_lib.run(_argv(d, tmp_path / 'sweep', '--variants',
                    str(tmp_path / 'v.json')))
  for name, args in variants.items():
    run_lib.run(_argv(d, tmp_path / name, *args))
    _assert_same_dataset(tmp_path / 'sweep' / name, tmp_path / name)


@pytest.mark.slow
def test_beams_sink_writes_the_same_copies(copies, tmp_path):
  """Beam's write_to_tfrecord sink holds the same examples."""
  d, examples = copies
  run_lib.run(_argv(d, tmp_path / 'sink', '--sink', 'write_to_tfrecord'))
  theirs = collections.Counter()
  for split in ('train', 'test'):
    theirs.update((split, str(e['filepath']), int(e['win_start_idx']),
                   str(e['augmentation']), e['signal'].tobytes())
                  for e in numpy_reader.numpy_dataset(
                      str(tmp_path / 'sink'), split))
  ours = collections.Counter(
      (split, str(e['filepath']), int(e['win_start_idx']),
       str(e['augmentation']), e['signal'].tobytes())
      for split, e in examples)
  assert theirs == ours


@pytest.mark.slow
def test_resume_keeps_copies_only_while_their_clips_are_the_same(
    copies, tmp_path):
  """A run killed after a shard was recorded resumes to the bytes of an
  uninterrupted run; with a noise clip changed meanwhile, its finished
  shards would mix the old clip with the new: the resume is refused,
  naming the clip."""
  import shutil
  import subprocess
  import sys
  from tests.test_resume import digest
  d, _ = copies
  for folder in ('in', 'noise', 'rir'):
    shutil.copytree(d / folder, tmp_path / folder)
  (tmp_path / 'cwd').mkdir()

  def flags(out):
    return [f for f in _argv(tmp_path, out, '--max_examples_per_shard', '7')
            if f != '--runner=FnApiRunner']

  def cli(*args):
    return subprocess.run([sys.executable, '-m', 'pipeline.run', *args],
                          cwd=H.ROOT, capture_output=True, text=True,
                          timeout=600)
  assert cli(*flags('whole')).returncode == 0
  for out in ('same', 'changed'):
    code, _ = H.DrivenRun('shard_recorded', 'kill', *flags(out),
                          cwd=tmp_path / 'cwd').wait()
    assert code == -9
  proc = cli(*flags('same'), '--resume')
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert digest(tmp_path / 'same') == digest(tmp_path / 'whole')
  H.write_wav(str(tmp_path / 'noise' / 'street.wav'),
              H.noise(8000 * 3, seed=11), rate=8000)
  proc = cli(*flags('changed'), '--resume')
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert '--noise_dir street.wav changed' in proc.stderr
