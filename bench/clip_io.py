"""Per-clip costs of probing, reading and planning, plain path vs libsndfile.

    .venv/bin/python -m bench.clip_io [--corpus clips1s] [--files 4000]

On the first `--files` clips of a bench corpus (made by `make bench`):
probing with audio_io.probe (plain WAVs parsed without libsndfile) against
the same probe forced through libsndfile, reading each whole clip with
OpenFiles (plain WAVs read directly) against libsndfile, and planning a
probed file again (what the shard assignment does per file). Medians of
`--repeats` passes, microseconds per file.
"""

import argparse
import dataclasses
import statistics
import time

from bench.run import corpus_for
from pipeline import config as config_lib
from transforms.planning import rules as plan_lib
from transforms.inputs import audio_io


def _per_file_us(fn, items, repeats):
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    for item in items:
      fn(item)
    times.append((time.perf_counter() - start) / len(items) * 1e6)
  return statistics.median(times)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--corpus', default='clips1s')
  parser.add_argument('--files', type=int, default=4000)
  parser.add_argument('--repeats', type=int, default=5)
  args = parser.parse_args(argv)
  root = corpus_for(args.corpus)[0]
  paths = audio_io.list_audio_files(root)[:args.files]
  config = config_lib.PipelineConfig(input_dir=root, output_dir='/unused',
                                     win_len=16000)
  plain = [audio_io.probe(i, p)[0] for i, p in enumerate(paths)]
  via_libsndfile = [dataclasses.replace(info, data_offset=-1)
                    for info in plain]
  original = audio_io.plain_wav_header
  try:
    audio_io.plain_wav_header = lambda head, size: None
    probe_sf = _per_file_us(lambda p: audio_io.probe(0, p), paths, args.repeats)
  finally:
    audio_io.plain_wav_header = original
  probe_plain = _per_file_us(lambda p: audio_io.probe(0, p), paths,
                             args.repeats)

  def read(info):
    with audio_io.OpenFiles() as files:
      files.read_range(info.path, 0, info.frames, info)

  read_sf = _per_file_us(read, via_libsndfile, args.repeats)
  read_plain = _per_file_us(read, plain, args.repeats)
  replan = _per_file_us(lambda i: plan_lib.plan_file(i, config, 16000),
                        plain, args.repeats)
  print(f'{len(paths)} files of {args.corpus}, us per file (median of '
        f'{args.repeats} passes, page cache warm)')
  print('| step | libsndfile | plain path | ratio |')
  print('|---|---|---|---|')
  print(f'| probe | {probe_sf:.0f} | {probe_plain:.0f} | '
        f'{probe_sf / probe_plain:.1f}x |')
  print(f'| read whole clip | {read_sf:.0f} | {read_plain:.0f} | '
        f'{read_sf / read_plain:.1f}x |')
  print(f'| plan again (shard assignment) | | {replan:.1f} | |')


if __name__ == '__main__':
  main()
