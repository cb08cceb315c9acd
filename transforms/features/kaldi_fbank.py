"""kaldi_fbank: Kaldi's log mel filterbank (compute-fbank-feats), as
`torchaudio.compliance.kaldi.fbank` computes it, with Kaldi's options.

Each frame of --kaldi_frame_length ms every --kaldi_frame_shift ms (the
frames inside the signal with --kaldi_snip_edges true; otherwise one per
shift, the signal mirrored at its ends): its mean removed
(--kaldi_remove_dc_offset), pre-emphasised (--kaldi_preemphasis_coefficient),
windowed (--kaldi_window_type: povey = Hann^0.85, hanning, hamming,
rectangular, blackman), zero-padded to a power of two
(--kaldi_round_to_power_of_two), its power (or magnitude) spectrum through
--kaldi_num_mel_bins triangular bands on the mel scale 1127 ln(1 + f/700)
from --kaldi_low_freq to --kaldi_high_freq (<= 0: that far below
Nyquist), and the natural log, floored at float32's epsilon. No dither:
every run gives the same bytes. Kaldi reads 16-bit WAV as integers:
--kaldi_sample_scale 32768 gives its values from wavbeam's [-1, 1]
samples. Shape (frames, bins) float32.
"""

from typing import Optional

import numpy as np

from pipeline.contract.errors import ConfigError
from transforms.features import registry

FRAMES_KEY = 'num_kaldi_frames'
WINDOWS = ('povey', 'hanning', 'hamming', 'rectangular', 'blackman')
BLACKMAN_COEFF = 0.42
EPSILON = float(np.finfo(np.float32).eps)
BOOLEAN = ('true', 'false')


def frame_sizes(rate: int, frame_length_ms: float, frame_shift_ms: float,
                round_to_power_of_two: bool):
  """(frame, shift, FFT size) in samples."""
  frame = int(rate * frame_length_ms * 0.001)
  shift = int(rate * frame_shift_ms * 0.001)
  fft_size = frame
  if round_to_power_of_two:
    fft_size = 1 << max(0, (frame - 1).bit_length())
  return frame, shift, fft_size


def num_frames(samples: int, frame: int, shift: int, snip_edges: bool
               ) -> int:
  if snip_edges:
    return 0 if samples < frame else 1 + (samples - frame) // shift
  return (samples + shift // 2) // shift


def _framed(x: np.ndarray, frame: int, shift: int, snip_edges: bool
            ) -> np.ndarray:
  """(n, samples) -> (n, frames, frame), as Kaldi cuts its frames."""
  count = num_frames(x.shape[1], frame, shift, snip_edges)
  if not snip_edges:
    pad = frame // 2 - shift // 2
    mirrored = x[:, ::-1]
    if pad > 0:
      x = np.concatenate([mirrored[:, -pad:], x, mirrored], axis=1)
    else:
      x = np.concatenate([x[:, -pad:], mirrored], axis=1)
  view = np.lib.stride_tricks.sliding_window_view(x, frame, axis=1)
  return view[:, ::shift][:, :count]


def window(kind: str, size: int) -> np.ndarray:
  """Kaldi's analysis windows (symmetric)."""
  a = 2 * np.pi / (size - 1)
  k = np.arange(size)
  if kind == 'hanning':
    return 0.5 - 0.5 * np.cos(a * k)
  if kind == 'hamming':
    return 0.54 - 0.46 * np.cos(a * k)
  if kind == 'povey':
    return (0.5 - 0.5 * np.cos(a * k)) ** 0.85
  if kind == 'rectangular':
    return np.ones(size)
  if kind == 'blackman':
    return (BLACKMAN_COEFF - 0.5 * np.cos(a * k) +
            (0.5 - BLACKMAN_COEFF) * np.cos(2 * a * k))
  raise ValueError(f'no window {kind!r}')


def mel_banks(num_bins: int, fft_size: int, rate: int, low_freq: float,
              high_freq: float) -> np.ndarray:
  """(fft_size // 2 + 1, num_bins) Kaldi mel banks (no VTLN warping)."""
  def mel(f):
    return 1127.0 * np.log(1.0 + np.asarray(f, np.float64) / 700.0)
  nyquist = 0.5 * rate
  if high_freq <= 0.0:
    high_freq += nyquist
  delta = (mel(high_freq) - mel(low_freq)) / (num_bins + 1)
  bins = np.arange(num_bins)[None, :]
  left = mel(low_freq) + bins * delta
  centre = left + delta
  right = centre + delta
  freqs = mel(rate / fft_size * np.arange(fft_size // 2))[:, None]
  banks = np.maximum(0.0, np.minimum((freqs - left) / (centre - left),
                                     (right - freqs) / (right - centre)))
  return np.concatenate([banks, np.zeros((1, num_bins))], axis=0)


def kaldi_fbank(windows: np.ndarray, rate: int, *, num_mel_bins: int = 23,
                frame_length: float = 25.0, frame_shift: float = 10.0,
                low_freq: float = 20.0, high_freq: float = 0.0,
                preemphasis_coefficient: float = 0.97,
                window_type: str = 'povey', snip_edges: bool = True,
                remove_dc_offset: bool = True, use_power: bool = True,
                round_to_power_of_two: bool = True,
                sample_scale: float = 1.0) -> np.ndarray:
  """(n, samples) signals -> (n, frames, num_mel_bins) float32 log mel
  filterbank energies (the module docstring)."""
  frame, shift, fft_size = frame_sizes(rate, frame_length, frame_shift,
                                       round_to_power_of_two)
  frames = _framed(np.asarray(windows, np.float64) * sample_scale, frame,
                   shift, snip_edges)
  if remove_dc_offset:
    frames = frames - frames.mean(axis=-1, keepdims=True)
  if preemphasis_coefficient != 0.0:
    previous = np.concatenate([frames[..., :1], frames[..., :-1]], axis=-1)
    frames = frames - preemphasis_coefficient * previous
  spectrum = np.abs(np.fft.rfft(frames * window(window_type, frame),
                                n=fft_size, axis=-1))
  if use_power:
    spectrum = spectrum ** 2
  energies = spectrum @ mel_banks(num_mel_bins, fft_size, rate, low_freq,
                                  high_freq)
  return np.log(np.maximum(energies, EPSILON)).astype(np.float32)


def _frames_at(config, rate: int):
  """(frame, shift, FFT size) in samples at `rate` (frame_sizes)."""
  value = registry.option_value
  return frame_sizes(rate, value(config, 'kaldi_frame_length'),
                     value(config, 'kaldi_frame_shift'),
                     _flag(config, 'kaldi_round_to_power_of_two'))


def _check_rate(config, rate: int, whose: str) -> None:
  """ConfigError naming the option that does not fit `rate` (the
  --sample_rate given, or the dataset's)."""
  value = registry.option_value
  said = (f'--sample_rate={rate}' if whose == 'sample_rate' else
          f'the dataset rate of {rate} Hz')
  frame, shift, _ = _frames_at(config, rate)
  if frame < 2:
    raise ConfigError('kaldi_frame_length', value(
        config, 'kaldi_frame_length'), f'gives frames of {frame} samples '
        f'at {said}; a frame needs at least 2')
  if shift < 1:
    raise ConfigError('kaldi_frame_shift', value(
        config, 'kaldi_frame_shift'), f'gives a shift of 0 samples at {said}')
  nyquist = rate / 2
  low, high = value(config, 'kaldi_low_freq'), value(
      config, 'kaldi_high_freq')
  if high > nyquist:
    raise ConfigError('kaldi_high_freq', high, f'is above the Nyquist '
                      f'frequency ({nyquist:g} Hz) of {said}')
  top = high if high > 0 else nyquist + high
  if not low < top:
    raise ConfigError('kaldi_low_freq', low, f'is not below the top of the '
                      f'bins ({top:g} Hz, from --kaldi_high_freq={high:g}) '
                      f'at {said}')
  _, _, fft_size = _frames_at(config, rate)
  if fft_size % 2:
    raise ConfigError('kaldi_round_to_power_of_two', 'false', f'with frames '
                      f'of {frame} samples at {said}: an odd FFT size, which '
                      'Kaldi refuses; give a --kaldi_frame_length of an even '
                      'number of samples')
  banks = mel_banks(value(config, 'kaldi_num_mel_bins'), fft_size, rate, low,
                    high)
  empty = int((banks.max(axis=0) <= 0).sum())
  if empty:
    raise ConfigError('kaldi_num_mel_bins', value(
        config, 'kaldi_num_mel_bins'), f'leaves {empty} bins without an FFT '
        f'bin at {said} (FFT of {fft_size} points), as Kaldi refuses: fewer '
        'bins, a longer --kaldi_frame_length or a wider band')


def _flag(config, name: str) -> bool:
  return registry.option_value(config, name) == 'true'


def _boolean(name: str, default: bool, help_text: str) -> registry.Option:
  return registry.Option(name, str, 'true' if default else 'false',
                         help_text, choices=BOOLEAN)


@registry.register
class KaldiFbank(registry.Feature):
  name = 'kaldi_fbank'
  help = ("Kaldi's log mel filterbank (torchaudio.compliance.kaldi.fbank),"
          ' with its options as kaldi_* options')
  options = (
      registry.positive_int('kaldi_num_mel_bins', 23, 'kaldi_fbank: mel '
                            'bins (Kaldi num-mel-bins)'),
      registry.Option('kaldi_frame_length', float, 25.0, 'kaldi_fbank: '
                      'frame length in ms (Kaldi frame-length)', above=0.0,
                      rule='a positive number of ms'),
      registry.Option('kaldi_frame_shift', float, 10.0, 'kaldi_fbank: '
                      'frame shift in ms (Kaldi frame-shift)', above=0.0,
                      rule='a positive number of ms'),
      registry.Option('kaldi_low_freq', float, 20.0, 'kaldi_fbank: lowest '
                      'frequency of the bins, Hz (Kaldi low-freq)',
                      minimum=0.0, rule='a number of Hz, at least 0'),
      registry.Option('kaldi_high_freq', float, 0.0, 'kaldi_fbank: highest '
                      'frequency of the bins, Hz; <= 0: that far below '
                      'Nyquist (Kaldi high-freq)', rule='a number of Hz'),
      registry.Option('kaldi_preemphasis_coefficient', float, 0.97,
                      'kaldi_fbank: pre-emphasis (Kaldi '
                      'preemphasis-coefficient)',
                      minimum=0.0, maximum=1.0, rule='a number, 0 to 1'),
      registry.Option('kaldi_window_type', str, 'povey', 'kaldi_fbank: '
                      'analysis window (Kaldi window-type)', choices=WINDOWS),
      _boolean('kaldi_snip_edges', True, 'kaldi_fbank: only frames inside '
               'the signal; false: a frame per shift, the ends mirrored '
               '(Kaldi snip-edges)'),
      _boolean('kaldi_remove_dc_offset', True, "kaldi_fbank: subtract each "
               "frame's mean (Kaldi remove-dc-offset)"),
      _boolean('kaldi_use_power', True, 'kaldi_fbank: power, else magnitude'
               ' spectrum (Kaldi use-power)'),
      _boolean('kaldi_round_to_power_of_two', True, 'kaldi_fbank: FFT size '
               'the next power of two (Kaldi round-to-power-of-two)'),
      registry.Option('kaldi_sample_scale', float, 1.0, 'kaldi_fbank: '
                      'multiply the [-1, 1] samples first (32768: the '
                      'integers Kaldi reads from 16-bit WAV)', above=0.0,
                      rule='a positive number'),
  )
  uses_rate = True
  plot_title = 'Kaldi fbank'

  def length_of(self, config) -> Optional[str]:
    return FRAMES_KEY

  def min_samples(self, config, rate: int) -> registry.MinSamples:
    # One whole frame, whether or not --kaldi_snip_edges mirrors the
    # ends: torchaudio's fbank refuses less.
    frame, _, _ = _frames_at(config, rate)
    length = registry.option_value(config, 'kaldi_frame_length')
    return registry.MinSamples(frame, f'one kaldi_fbank frame needs {frame} '
                               f'(--kaldi_frame_length={length:g} ms)')

  def min_samples_options(self, config) -> tuple:
    return ((self.name, registry.option_value(config, 'kaldi_frame_length')),)

  def check_rate(self, config, rate: int) -> None:
    _check_rate(config, rate, 'dataset')

  def check(self, config):
    value = registry.option_value
    low, high = value(config, 'kaldi_low_freq'), value(
        config, 'kaldi_high_freq')
    if high > 0 and high <= low:
      raise ConfigError('kaldi_high_freq', high, 'must be above '
                        f'--kaldi_low_freq={low}')
    if config.sample_rate:
      _check_rate(config, config.sample_rate, 'sample_rate')

  def compute(self, batch):
    config, value = batch.config, registry.option_value
    rate = batch.sample_rate
    batch.constant((self.name, 'fits', rate),
                   lambda: _check_rate(config, rate, 'dataset') or True)
    self.check_length(batch)
    high = value(config, 'kaldi_high_freq')
    return kaldi_fbank(
        batch.windows, rate,
        num_mel_bins=value(config, 'kaldi_num_mel_bins'),
        frame_length=value(config, 'kaldi_frame_length'),
        frame_shift=value(config, 'kaldi_frame_shift'),
        low_freq=value(config, 'kaldi_low_freq'), high_freq=high,
        preemphasis_coefficient=value(config,
                                      'kaldi_preemphasis_coefficient'),
        window_type=value(config, 'kaldi_window_type'),
        snip_edges=_flag(config, 'kaldi_snip_edges'),
        remove_dc_offset=_flag(config, 'kaldi_remove_dc_offset'),
        use_power=_flag(config, 'kaldi_use_power'),
        round_to_power_of_two=_flag(config, 'kaldi_round_to_power_of_two'),
        sample_scale=value(config, 'kaldi_sample_scale'))
