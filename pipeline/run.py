"""Command line: python -m pipeline.run --input_dir DIR --output_dir OUT ...

Flags this module does not know are Beam's (--runner, --direct_num_workers,
...). Without --runner the job runs on the local DirectRunner.
"""

import logging
import os
import sys
import time
from typing import Optional, Sequence

# Before numpy is first imported (Beam imports it): the pipeline runs one
# bundle per core already, and OpenBLAS's own thread pool (used by the
# log_mel matmul) would spin on the same cores. Worker processes inherit it.
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

import apache_beam as beam  # noqa: E402
from apache_beam.options.pipeline_options import DirectOptions  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402
from apache_beam.options.pipeline_options import StandardOptions  # noqa: E402

from pipeline import config as config_lib  # noqa: E402
from pipeline.graph import build_pipeline, read_metadata  # noqa: E402


# Beam 2.77's DirectRunner first tries Prism, which downloads a binary at run
# time, then falls back to the FnApiRunner for batch jobs. wavbeam goes to the
# FnApiRunner directly: same engine, same --direct_num_workers and
# --direct_running_mode options, no download.
LOCAL_RUNNER = 'FnApiRunner'
_DIRECT_RUNNER_NAMES = (None, 'DirectRunner', 'SwitchingDirectRunner')
# Runners Beam knows only by their full name.
_RUNNER_ALIASES = {'DaskRunner': 'apache_beam.runners.dask.dask_runner.DaskRunner'}


def pipeline_options(beam_args: Sequence[str]) -> PipelineOptions:
  """Beam's options, with wavbeam's defaults for the local runner.

  Locally, unless --direct_num_workers or --direct_running_mode is given,
  bundles run in one thread per core of a single process: numpy's FFT,
  libsndfile and file writes release the GIL, so threads use both cores
  without the start-up and memory of worker processes (BENCHMARKS.md).
  """
  options = PipelineOptions(beam_args)
  standard = options.view_as(StandardOptions)
  standard.runner = _RUNNER_ALIASES.get(standard.runner, standard.runner)
  if standard.runner in _DIRECT_RUNNER_NAMES:
    standard.runner = LOCAL_RUNNER
  if standard.runner == LOCAL_RUNNER and not any(
      arg.startswith(('--direct_num_workers', '--direct_running_mode'))
      for arg in beam_args):
    direct = options.view_as(DirectOptions)
    direct.direct_num_workers = os.cpu_count() or 1
    direct.direct_running_mode = 'multi_threading'
  return options


def run(argv: Optional[Sequence[str]] = None, extra_features=None):
  """Builds and runs the job; returns the finished PipelineResult."""
  config, beam_args = config_lib.parse_known_args(
      sys.argv[1:] if argv is None else argv)
  return run_config(config, beam_args, extra_features)


def run_config(config: config_lib.PipelineConfig, beam_args: Sequence[str],
               extra_features=None):
  p = beam.Pipeline(options=pipeline_options(beam_args))
  build_pipeline(p, config, extra_features)
  result = p.run()
  result.wait_until_finish()
  return result


def summary(output_dir: str, seconds: float) -> str:
  """One line on what a finished run wrote, from its metadata.json."""
  meta = read_metadata(output_dir)
  if meta is None:
    return f'wavbeam: no metadata.json in {output_dir} after {seconds:.1f} s'
  shards = sum(len(e['shards']) for e in meta['splits'].values())
  size = sum(e['num_bytes'] for e in meta['splits'].values())
  counts = meta['counts']
  return (f'wavbeam: {counts["examples"]} examples in {shards} shards '
          f'({size / 1e6:.1f} MB) from {counts["files_ok"]} files written to '
          f'{output_dir} in {seconds:.1f} s; {counts["files_rejected"]} files '
          'rejected (rejects.jsonl)')


def main(argv=None) -> int:
  logging.getLogger().setLevel(logging.INFO)
  start = time.perf_counter()
  try:
    config, beam_args = config_lib.parse_known_args(
        sys.argv[1:] if argv is None else argv)
    run_config(config, beam_args)
  except config_lib.ConfigError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  print(summary(config.dataset_dir, time.perf_counter() - start))
  return 0

if __name__ == '__main__':
  sys.exit(main())
