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


def _gains(transform, n=4):
  """The factors `transform` multiplies a signal of ones by, n calls."""
  return [float(transform({'signal': np.ones(3)})['signal'][0])
          for _ in range(n)]


def _expected_gains(entropy, n=4, db=(-6, 6)):
  draws = np.random.default_rng(entropy)
  return [10 ** (draws.uniform(*db) / 20) for _ in range(n)]


def test_a_block_in_a_compose_is_seeded_by_seed_place_and_its_own_seed():
  chain = augment.Compose([augment.Gain(seed=5),
                           augment.Gain(db=(0, 3), seed=6)], seed=1)
  chain.start_epoch(2, rank=1, worker=3)
  first = _expected_gains([[1, 0, 5], 2, 1, 3], 1)[0]
  second = 10 ** (np.random.default_rng([[1, 1, 6], 2, 1, 3]).uniform(0, 3)
                  / 20)
  assert _gains(chain, 1) == pytest.approx([first * second], rel=1e-12)


def test_an_outer_seed_reaches_the_blocks_of_a_nested_compose():
  """The inner Compose's blocks are seeded from (outer seed, its place,
  its seed) in place of its seed."""
  found = {}
  for seed in (1, 2):
    chain = augment.Compose([augment.Gain(seed=9),
                             augment.Compose([augment.Gain(seed=4)],
                                             seed=7)], seed=seed)
    chain.start_epoch(0)
    found[seed] = _gains(chain)
    outer = _expected_gains([[seed, 0, 9], 0, 0, 0])
    inner = _expected_gains([[[seed, 1, 7], 0, 4], 0, 0, 0])
    assert found[seed] == pytest.approx(np.multiply(outer, inner),
                                        rel=1e-12)
  assert found[1] != found[2]


def test_blocks_shared_between_composes_keep_each_ones_draws():
  gain = augment.Gain(seed=3)
  alone = _gains(gain)
  first = augment.Compose([gain], seed=1)
  expected = _gains(first)
  second = augment.Compose([gain], seed=2)  # the same block
  nested = augment.Compose([first], seed=8)  # and the same Compose
  for chain in (first, second, nested, gain):
    chain.start_epoch(0)
  drawn = {id(c): [] for c in (first, second, nested)}
  for _ in range(4):  # in turn: none draws from another's stream
    for chain in (first, second, nested):
      drawn[id(chain)] += _gains(chain, 1)
  assert drawn[id(first)] == expected
  assert drawn[id(second)] != expected
  assert drawn[id(nested)] not in (expected, drawn[id(second)])
  assert gain.seed == 3 and first.seed == 1
  assert _gains(gain) == alone


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


def test_compose_starts_each_blocks_own_epoch():
  """A block keeping state of its own per epoch (its start_epoch) sees the
  epoch a Compose starts, whatever stream the Compose lends it."""

  class Counted(augment.Gain):
    def start_epoch(self, epoch, rank=0, worker=0):
      super().start_epoch(epoch, rank, worker)
      self.epoch_seen = epoch

  block = Counted(db=(-3, 3))
  composed = augment.Compose([augment.Compose([block])], seed=5)
  composed.start_epoch(7, 1, 2)
  assert block.epoch_seen == 7
