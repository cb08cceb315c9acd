"""whisper_log_mel: the log-mel input OpenAI's Whisper models take, as
their feature extractor (transformers' WhisperFeatureExtractor) makes it.

16 kHz audio; frames of 400 samples (25 ms) every 160 (10 ms), centred
(the signal reflected by 200 samples at each end), a periodic Hann
window; the power spectrum through a Slaney-style mel filterbank (80 or
128 bands, 0-8000 Hz, area-normalised); log10 of it floored at 1e-10,
then clamped to 8 (log10 units) below the example's maximum and scaled
by (x + 4) / 4. The last frame is dropped, as Whisper does: an example of
N samples gives N // 160 frames, (frames, bands) per example.

`--whisper_pad 30s` pads (with zeros, at the end) every example to the
30 s Whisper's encoder takes: 3000 frames each, a fixed shape.
"""

from typing import Optional

import numpy as np

from pipeline.contract.errors import ConfigError
from transforms.features import registry

RATE = 16000
N_FFT, HOP = 400, 160
PAD_SECONDS = 30
PAD_SAMPLES = PAD_SECONDS * RATE
FRAMES_KEY = 'num_whisper_frames'
LOG_FLOOR = 1e-10
DYNAMIC_RANGE = 8.0


def _hz_to_mel(hz):
  """The Slaney mel scale: linear to 1 kHz, logarithmic above."""
  hz = np.asarray(hz, np.float64)
  linear = 3.0 * hz / 200.0
  log_part = 15.0 + np.log(np.maximum(hz, 1e-10) / 1000.0) * (
      27.0 / np.log(6.4))
  return np.where(hz >= 1000.0, log_part, linear)


def _mel_to_hz(mel):
  mel = np.asarray(mel, np.float64)
  linear = 200.0 * mel / 3.0
  log_part = 1000.0 * np.exp(np.log(6.4) / 27.0 * (mel - 15.0))
  return np.where(mel >= 15.0, log_part, linear)


def slaney_filterbank(n_mels: int, n_fft: int = N_FFT, rate: int = RATE,
                      fmin: float = 0.0, fmax: float = RATE / 2
                      ) -> np.ndarray:
  """(n_fft // 2 + 1, n_mels) triangular filters on the Slaney mel scale,
  each scaled to unit area (2 / its width in Hz)."""
  bins = np.linspace(0.0, rate / 2, n_fft // 2 + 1)
  edges = _mel_to_hz(np.linspace(_hz_to_mel(fmin), _hz_to_mel(fmax),
                                 n_mels + 2))
  lower, centre, upper = edges[:-2], edges[1:-1], edges[2:]
  rising = (bins[:, None] - lower) / (centre - lower)
  falling = (upper - bins[:, None]) / (upper - centre)
  weights = np.maximum(0.0, np.minimum(rising, falling))
  return weights * (2.0 / (upper - lower))


def whisper_log_mel(windows: np.ndarray, n_mels: int,
                    pad_to: Optional[int] = None) -> np.ndarray:
  """(n, samples) 16 kHz signals in [-1, 1] -> (n, frames, n_mels)
  float32 Whisper log-mels (the module docstring)."""
  x = np.asarray(windows, np.float64)
  if pad_to is not None:
    x = np.pad(x[:, :pad_to], ((0, 0), (0, max(0, pad_to - x.shape[1]))))
  padded = np.pad(x, ((0, 0), (N_FFT // 2, N_FFT // 2)), mode='reflect')
  frames = np.lib.stride_tricks.sliding_window_view(
      padded, N_FFT, axis=1)[:, ::HOP]
  hann = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(N_FFT) / N_FFT)
  power = np.abs(np.fft.rfft(frames * hann, axis=-1)) ** 2
  mel = power[:, :-1] @ slaney_filterbank(n_mels)
  log = np.log10(np.maximum(mel, LOG_FLOOR))
  peak = log.max(axis=(1, 2), keepdims=True) if log.size else 0.0
  log = np.maximum(log, peak - DYNAMIC_RANGE)
  return ((log + 4.0) / 4.0).astype(np.float32)


@registry.register
class WhisperLogMel(registry.Feature):
  name = 'whisper_log_mel'
  help = ("Whisper's log-mel input: 25 ms frames every 10 ms of 16 kHz "
          'audio, --whisper_n_mels bands, its clamp and scaling '
          "(transformers' WhisperFeatureExtractor)")
  options = (
      registry.Option('whisper_n_mels', int, 80, 'mel bands of '
                      'whisper_log_mel: 80 (Whisper up to large-v2) or 128 '
                      '(large-v3)', minimum=1, rule='80 or 128'),
      registry.Option('whisper_pad', str, 'none', 'whisper_log_mel: "30s" '
                      "pads every example to the 30 s Whisper's encoder "
                      'takes (3000 frames), "none" keeps its length',
                      choices=('none', '30s')),
  )
  uses_rate = True
  plot_title = 'Whisper log-mel'

  def length_of(self, config) -> Optional[str]:
    return None if config.option('whisper_pad') == '30s' else FRAMES_KEY

  def min_samples(self, config, rate: int) -> registry.MinSamples:
    del rate
    if config.option('whisper_pad') == '30s':
      return registry.ANY_LENGTH
    return registry.MinSamples(N_FFT // 2 + 1, f'whisper_log_mel needs more '
                               f'than {N_FFT // 2} (its frames are centred by '
                               f'reflecting {N_FFT // 2} at each end)')

  def check(self, config):
    n_mels = config.option('whisper_n_mels')
    if n_mels not in (80, 128):
      raise ConfigError('whisper_n_mels', n_mels, 'must be 80 or 128 (the '
                        'bands Whisper models take)')
    if config.sample_rate:
      self.check_rate(config, config.sample_rate)
    if config.option('whisper_pad') != '30s':
      return
    if config.example_unit == 'window':
      if config.win_len > PAD_SAMPLES:
        raise ConfigError('win_len', config.win_len, f'is longer than the '
                          f'{PAD_SECONDS} s --whisper_pad 30s pads to')
    elif config.max_seconds > PAD_SECONDS:
      raise ConfigError('max_seconds', config.max_seconds, f'--whisper_pad '
                        f'30s holds at most {PAD_SECONDS} s an example: give '
                        f'--max_seconds {PAD_SECONDS} or less (longer '
                        'recordings or segments are then rejected, with '
                        'their reason in rejects.jsonl)')

  def check_rate(self, config, rate: int) -> None:
    if rate != RATE:
      raise ConfigError('sample_rate', rate, 'whisper_log_mel needs '
                        f'{RATE} Hz audio: give --sample_rate {RATE}')

  def compute(self, batch):
    self.check_rate(batch.config, batch.sample_rate)
    self.check_length(batch)
    pad = PAD_SAMPLES if batch.option('whisper_pad') == '30s' else None
    return whisper_log_mel(batch.windows, batch.option('whisper_n_mels'),
                           pad)
