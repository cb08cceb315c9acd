"""Baseline: a plain loop doing the same work as wavbeam, in 1 or N processes.

soundfile read, numpy windows and STFT of all windows of a file at once,
raw-bytes tf.train.Example, one tf.io.TFRecordWriter per process. What a
careful engineer writes by hand; with --procs N, the files are dealt to N
processes (file i to process i % N), as a hand-written multiprocessing
script would.

    python -m bench.baseline_numpy IN OUT [--win_len 32768] [--procs 1]
        [--audio_format wav]
"""

import argparse
import os
import subprocess
import sys


def list_audio(input_dir, audio_format='wav'):
  return sorted(os.path.join(r, f) for r, _, fs in os.walk(input_dir)
                for f in fs if f.lower().endswith('.' + audio_format))


def windowed_files(input_dir, win_len, part, parts, n_fft=512, fft_hop=256,
                   audio_format='wav'):
  """(file index, path, class, classes, int32 windows, their spectrograms)
  of every file of a part (file i to part i % parts) that holds a window:
  the work each hand-written loop does before it encodes."""
  import numpy as np
  import soundfile as sf
  paths = list_audio(input_dir, audio_format)
  classes = sorted({os.path.basename(os.path.dirname(p)) for p in paths})
  window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)).astype(
      np.float32)
  for index in range(part, len(paths), parts):
    path = paths[index]
    x, _ = sf.read(path, dtype='float64')
    n = len(x) // win_len
    if n == 0:
      continue
    wins = x[:n * win_len].reshape(n, win_len)
    signal = np.clip(np.rint(wins * 2**31), -2**31, 2**31 - 1).astype(
        np.int32)
    frames = np.lib.stride_tricks.sliding_window_view(
        wins.astype(np.float32), n_fft, axis=-1)[:, ::fft_hop]
    spec = np.abs(np.fft.rfft(frames * window, axis=-1))
    yield (index, path, os.path.basename(os.path.dirname(path)), classes,
           signal, spec)


def write_part(input_dir, output_dir, win_len, part, parts, n_fft=512,
               fft_hop=256, audio_format='wav'):
  import tensorflow as tf
  os.makedirs(output_dir, exist_ok=True)
  count = 0
  with tf.io.TFRecordWriter(
      os.path.join(output_dir, f'data-{part}.tfrecord')) as w:
    for index, path, label, classes, signal, spec in windowed_files(
        input_dir, win_len, part, parts, n_fft, fft_hop, audio_format):
      n = len(signal)
      for i in range(n):
        f = {
            'signal': tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[signal[i].tobytes()])),
            'spectrogram': tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[spec[i].tobytes()])),
            'class': tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[label.encode()])),
            'filepath': tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[path.encode()])),
            'index': tf.train.Feature(int64_list=tf.train.Int64List(
                value=[index])),
            'target': tf.train.Feature(int64_list=tf.train.Int64List(
                value=[classes.index(label)])),
            'num_classes': tf.train.Feature(int64_list=tf.train.Int64List(
                value=[len(classes)])),
            'win_start_idx': tf.train.Feature(int64_list=tf.train.Int64List(
                value=[i * win_len])),
        }
        w.write(tf.train.Example(features=tf.train.Features(
            feature=f)).SerializeToString())
        count += 1
  return count


def run_parts(argv, module: str, write, description: str) -> None:
  """A loop's command line: one process writing every file, or with
  --procs N, N processes of `module` writing a part each."""
  parser = argparse.ArgumentParser(description=description)
  parser.add_argument('input_dir')
  parser.add_argument('output_dir')
  parser.add_argument('--win_len', type=int, default=32768)
  parser.add_argument('--procs', type=int, default=1)
  parser.add_argument('--audio_format', default='wav')
  parser.add_argument('--part', type=int, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.procs == 1 or args.part is not None:
    print(write(args.input_dir, args.output_dir, args.win_len,
                args.part or 0, args.procs, audio_format=args.audio_format))
    return
  children = [subprocess.Popen(
      [sys.executable, '-m', module, args.input_dir, args.output_dir,
       '--win_len', str(args.win_len), '--procs', str(args.procs), '--part',
       str(k), '--audio_format', args.audio_format])
              for k in range(args.procs)]
  if any(child.wait() for child in children):
    sys.exit(1)


def main(argv=None):
  run_parts(argv, 'bench.baseline_numpy', write_part,
            __doc__.split('\n\n')[0])


if __name__ == '__main__':
  main()
