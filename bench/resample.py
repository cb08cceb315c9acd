"""Resampling throughput per core, and what it does to tones past Nyquist.

    .venv/bin/python -m bench.resample [--repeats 5]

For each rate pair, resamples 60 s of noise three ways, interleaved, one
core, and reports the median audio-seconds per second:
- wavbeam: `audio.resample_range` over the whole file (soxr VHQ in blocks);
- one window: the shuffled case, each 32768-sample window resampled on its
  own from its blocks (what a shard task does for a window of a resampled
  file), in audio-seconds of windows per second;
- soxr one pass: `soxr.resample(x, quality='VHQ')`, the ceiling;
- sinc (before): a Kaiser-windowed sinc with its cutoff at the Nyquist,
  evaluated output by output (direct form), kept here only as the baseline.
Then the level at which a full-scale tone 100 Hz above the new Nyquist comes
out (its alias), for wavbeam and that sinc.
"""

import argparse
import math
import statistics
import time

import numpy as np
import soxr

from transforms.inputs import audio

PAIRS = [(44100, 16000), (48000, 16000), (22050, 16000), (8000, 16000)]
SECONDS = 60
WINDOW = 32768


def former_sinc(x, rate_in, rate_out):
  """The direct-form baseline: cutoff at the Nyquist, 32 zero
  crossings each side, Kaiser beta 8.6, evaluated output by output."""
  g = math.gcd(rate_in, rate_out)
  up, down = rate_out // g, rate_in // g
  half = 32 * max(1, -(-down // up))
  cutoff = min(1.0, up / down)
  taps = np.arange(-half + 1, half + 1, dtype=np.float64)
  dist = taps[None, :] - (np.arange(up, dtype=np.float64) / up)[:, None]
  ratio = np.clip(dist / half, -1.0, 1.0)
  kernel = cutoff * np.sinc(cutoff * dist) * (
      np.i0(8.6 * np.sqrt(1.0 - ratio * ratio)) / np.i0(8.6))
  n_out = -(-len(x) * up // down)
  ext = np.concatenate([np.zeros(half), x, np.zeros(half + 1)])
  itaps = np.arange(-half + 1, half + 1, dtype=np.int64)
  out = np.empty(n_out)
  for b in range(0, n_out, 4096):
    j = np.arange(b, min(b + 4096, n_out), dtype=np.int64)
    base = (j * down) // up
    phase = j * down - base * up
    out[b:b + j.size] = np.einsum(
        'ij,ij->i', ext[(base + half)[:, None] + itaps[None, :]],
        kernel[phase])
  return out


def wavbeam_whole(x, rate_in, rate_out):
  n = audio.resampled_length(len(x), rate_in, rate_out)
  return audio.resample_range(x, 0, len(x), rate_in, rate_out, 0, n)


def wavbeam_windows(x, rate_in, rate_out):
  """Every window of the file, each computed on its own (audio-s of windows
  are the same as of the file: hop = window)."""
  n = audio.resampled_length(len(x), rate_in, rate_out)
  for start in range(0, n - WINDOW + 1, WINDOW):
    lo, hi = audio.resample_input_range(len(x), rate_in, rate_out, start,
                                        start + WINDOW)
    audio.resample_range(x[lo:hi], lo, len(x), rate_in, rate_out, start,
                         WINDOW)


def soxr_one_pass(x, rate_in, rate_out):
  return soxr.resample(x, rate_in, rate_out, quality='VHQ')


def alias_db(fn, rate_in, rate_out):
  freq = rate_out / 2 + 100
  t = np.arange(rate_in * 2) / rate_in
  y = fn(np.sin(2 * np.pi * freq * t), rate_in, rate_out)
  y = y[len(y) // 4:3 * len(y) // 4]
  window = np.blackman(len(y))
  spectrum = np.abs(np.fft.rfft(y * window)) / (window.sum() / 2)
  k = int(round((rate_out - freq) * len(y) / rate_out))
  return 20 * np.log10(spectrum[k - 3:k + 4].max() + 1e-300)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--repeats', type=int, default=5)
  args = parser.parse_args(argv)
  methods = {'wavbeam': wavbeam_whole, 'one window': wavbeam_windows,
             'soxr one pass': soxr_one_pass, 'sinc (before)': former_sinc}
  print(f'{SECONDS} s of noise, one core, median of {args.repeats} '
        'interleaved runs, audio-seconds per second')
  print('| rates | ' + ' | '.join(methods) + ' | wavbeam / before |'
        ' alias of Nyquist+100 Hz: wavbeam / before |')
  print('|---' * (len(methods) + 3) + '|')
  for rate_in, rate_out in PAIRS:
    x = np.random.default_rng(0).uniform(-0.5, 0.5, SECONDS * rate_in)
    times = {name: [] for name in methods}
    for _ in range(args.repeats):
      for name, fn in methods.items():
        t0 = time.perf_counter()
        fn(x, rate_in, rate_out)
        times[name].append(time.perf_counter() - t0)
    rate = {name: SECONDS / statistics.median(t) for name, t in times.items()}
    print(f'| {rate_in} -> {rate_out} | ' +
          ' | '.join(f'{rate[name]:,.0f}' for name in methods) +
          f' | {rate["wavbeam"] / rate["sinc (before)"]:.1f}x |'
          f' {alias_db(wavbeam_whole, rate_in, rate_out):.0f} dB /'
          f' {alias_db(former_sinc, rate_in, rate_out):.1f} dB |')


if __name__ == '__main__':
  main()
