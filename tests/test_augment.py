"""Read-time augmentation (pipeline/readers/augment.py) against the
formulas it states, drawn from a generator seeded as it says."""

import numpy as np
import pytest

from pipeline.readers import augment


def _draws(seed, epoch=0, rank=0, worker=0):
  return np.random.default_rng([seed, epoch, rank, worker])


def test_gain_is_the_drawn_decibels():
  signal = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
  gain = augment.Gain(db=(-6, 6), seed=3)
  draws = _draws(3)
  for _ in range(3):
    out = gain({'signal': signal, 'label': 1})
    g = draws.uniform(-6, 6)
    np.testing.assert_allclose(out['signal'], signal * 10 ** (g / 20),
                               rtol=1e-6)
    assert out['signal'].dtype == np.float32 and out['label'] == 1


def test_an_integer_signal_is_read_at_full_scale():
  ints = np.array([-32768, 0, 16384], np.int16)
  np.testing.assert_array_equal(augment.as_float(ints),
                                np.array([-1.0, 0.0, 0.5], np.float32))
  out = augment.Gain(db=(0, 0))({'signal': ints.astype(np.int32) * 65536})
  np.testing.assert_array_equal(out['signal'], [-1.0, 0.0, 0.5])


def test_noise_is_mixed_at_the_drawn_snr():
  rng = np.random.default_rng(1)
  signal = rng.standard_normal(800) * 0.3
  clips = [rng.standard_normal(300), rng.standard_normal(2000)]
  mix = augment.AddNoise(clips, snr_db=(5, 20), seed=7)
  draws = _draws(7)
  for _ in range(4):
    out = mix({'signal': signal})['signal']
    clip = clips[int(draws.integers(2))]
    snr = draws.uniform(5, 20)
    start = int(draws.integers(len(clip)))
    noise = np.resize(np.roll(clip, -start), len(signal))
    added = out - signal
    # The noise, scaled: its power sets the SNR drawn.
    scale = added @ noise / (noise @ noise)
    np.testing.assert_allclose(added, scale * noise, atol=1e-12)
    np.testing.assert_allclose(
        10 * np.log10(np.mean(signal ** 2) / np.mean(added ** 2)), snr)


def test_silence_gets_no_noise():
  out = augment.AddNoise([np.ones(10)])({'signal': np.zeros(5)})
  np.testing.assert_array_equal(out['signal'], np.zeros(5))


def test_spec_augment_masks_what_it_draws():
  mel = np.arange(100 * 40, dtype=np.float32).reshape(100, 40) + 1
  masks = augment.SpecAugment('log_mel', freq_masks=2, freq_width=8,
                              time_masks=3, time_width=20, fill=0.0, seed=5)
  out = masks({'log_mel': mel})['log_mel']
  draws = _draws(5)
  expected = mel.copy()
  for _ in range(2):
    f = int(draws.integers(0, 9))
    f0 = int(draws.integers(0, 40 - f + 1))
    expected[:, f0:f0 + f] = 0
  for _ in range(3):
    t = int(draws.integers(0, 21))
    t0 = int(draws.integers(0, 100 - t + 1))
    expected[t0:t0 + t, :] = 0
  np.testing.assert_array_equal(out, expected)
  assert (mel == np.arange(4000).reshape(100, 40) + 1).all()  # not in place


@pytest.mark.parametrize('arguments, message', [
    ({'freq_width': -1}, 'freq_width=-1: give an integer of at least 0'),
    ({'time_width': 2.5}, 'time_width=2.5: give an integer of at least 0'),
    ({'freq_masks': True}, 'freq_masks=True: give an integer of at least 0'),
    ({'time_masks': -2}, 'time_masks=-2: give an integer of at least 0'),
    ({'max_time_fraction': 1.5}, 'max_time_fraction=1.5: give a number'),
    ({'fill': 'median'}, "fill='median': give a number, or 'mean'"),
    ({'seed': -1}, 'seed=-1: give an integer of at least 0'),
])
def test_spec_augment_refuses_bad_arguments_when_built(arguments, message):
  with pytest.raises(ValueError, match=message):
    augment.SpecAugment(**arguments)


def test_spec_augment_refuses_a_flat_feature():
  with pytest.raises(ValueError, match='frames, bins'):
    augment.SpecAugment('signal')({'signal': np.zeros(10)})


def test_epochs_draw_anew_and_repeat():
  signal = np.ones(100)
  chain = augment.Compose([augment.Gain(), augment.Gain(db=(0, 3))], seed=1)

  def epoch(n):
    chain.start_epoch(n, rank=0, worker=1)
    return [chain({'signal': signal})['signal'][0] for _ in range(5)]
  assert epoch(0) == epoch(0)
  assert epoch(0) != epoch(1)
  chain.start_epoch(0, rank=1, worker=1)
  assert [chain({'signal': signal})['signal'][0] for _ in range(5)] != \
      epoch(0)


@pytest.mark.slow
def test_the_torch_dataset_starts_each_epoch(tmp_path):
  pytest.importorskip('torch')
  from pipeline.readers import torch_dataset
  from tests import helpers as H
  for i in range(6):
    H.write_wav(str(tmp_path / f'in/c{i % 2}/f{i}.wav'),
                H.noise(4096, seed=i))
  H.run_pipeline(H.make_config(tmp_path / 'in', tmp_path / 'out',
                               win_len=4096, splits='train=1.0',
                               signal_dtype='float32',
                               features=('signal', 'log_mel')))
  data = torch_dataset.WavbeamIterableDataset(
      str(tmp_path / 'out'), 'train', transform=augment.Compose([
          augment.Gain(), augment.SpecAugment(time_width=5)], seed=2))

  def epoch(n):
    data.set_epoch(n)
    return [e['signal'][:3].tolist() + [float(e['log_mel'].sum())]
            for e in data]
  first = epoch(0)
  assert epoch(0) == first and epoch(1) != first
