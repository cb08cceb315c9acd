"""Command line: wavbeam run --input_dir DIR --output_dir OUT ... (also
`python -m pipeline.run`).

Flags this module does not know are Beam's (--runner, --direct_num_workers,
...). Without --runner the job runs on the local DirectRunner.
"""

import argparse
import contextlib
import dataclasses
import difflib
import logging
import os
import shutil
import sys
import time
from typing import Sequence, Union

from pipeline import _aliases
from pipeline.commands import lean_beam
from pipeline.commands import startup

if __name__ == '__main__':  # the command; a program importing it keeps Beam
  startup.prepare_process()  # whole (see lean_beam)
  lean_beam.import_beam(sys.argv[1:])  # one BLAS thread, before numpy
import apache_beam as beam  # noqa: E402
from apache_beam.io.filesystems import FileSystems  # noqa: E402
from apache_beam.options.pipeline_options import DirectOptions  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402
from apache_beam.options.pipeline_options import StandardOptions  # noqa: E402
from apache_beam.options.pipeline_options import TypeOptions  # noqa: E402

from pipeline import append as append_lib  # noqa: E402
from pipeline import config as config_lib  # noqa: E402
from pipeline import embeddings  # noqa: E402
from pipeline.commands import console  # noqa: E402
from pipeline import progress  # noqa: E402
from transforms.runtime import cpus  # noqa: E402
from transforms.runtime import timeline  # noqa: E402
from pipeline import variants as variants_lib  # noqa: E402
from pipeline.contract import naming  # noqa: E402
from pipeline.contract.errors import DatasetError  # noqa: E402
from pipeline import output_folder  # noqa: E402
from pipeline import resume as resume_lib  # noqa: E402
from pipeline.output_folder import read_metadata  # noqa: E402
from pipeline.graph import build_pipeline  # noqa: E402
from pipeline.graph import build_sweep_pipeline  # noqa: E402
from pipeline.graph import expected_schema  # noqa: E402
from pipeline.contract.naming import METADATA_FILE  # noqa: E402
from transforms.runtime import filesystem  # noqa: E402
from transforms.writing import finalize  # noqa: E402
from transforms.runtime import forked_workers  # noqa: E402
from transforms.runtime import output_lock as run_marker  # noqa: E402
from transforms.inputs import audio_io  # noqa: E402
from transforms.inputs import block_store  # noqa: E402


# Beam 2.77's DirectRunner first tries Prism, which downloads a binary at run
# time, then falls back to the FnApiRunner for batch jobs. wavbeam goes to the
# FnApiRunner directly: same engine, same --direct_num_workers and
# --direct_running_mode options, no download.
LOCAL_RUNNER = 'FnApiRunner'
_DIRECT_RUNNER_NAMES = (None, 'DirectRunner', 'SwitchingDirectRunner')
MAX_WORKERS = 1024
# Runners Beam knows only by their full name.
_RUNNER_ALIASES = {
    'DaskRunner': 'apache_beam.runners.dask.dask_runner.DaskRunner'}
PRISM_RUNNER = 'PrismRunner'


# A local default run forks workers (transforms/runtime/forked_workers.py) for
# its per-file and shard work. Where it cannot (not Linux, or a caller
# that already runs threads), runs of this many files or more use Beam's
# worker processes instead of threads (bench.run on 2 cores):
# 20,000 clips of 1 s took 13.8 s with processes and 19.4 s with threads
# (the per-file Python work holds the GIL), 4,800 clips of 3 s 8.4 and
# 8.5 s, while the 50- and 201-file corpora of long files were 1.5 s and
# 0.7 s faster with threads (worker start-up and shutdown, twice the memory).
PROCESSES_FROM_FILES = 5000


def pipeline_options(beam_args: Sequence[str]) -> PipelineOptions:
  """Beam's options, with wavbeam's defaults for the local runner.

  Locally, unless --direct_running_mode is given, --direct_num_workers
  workers (default, or 0: one per CPU the process may use, its affinity,
  as taskset sets it, and its container's CPU quota:
  transforms/runtime/cpus.py), as threads of one process (run_config
  forks workers instead and runs Beam in its one thread, or else switches
  to Beam's worker processes for corpora of PROCESSES_FROM_FILES files or
  more). One worker: one process, one thread.

  On every runner, Beam's construction-time type check is off (as with
  --no_pipeline_type_check): the graph declares no type hints for it to
  check, and it took half of the graph's construction (0.83 -> 0.44 s, in
  every run's start-up).
  """
  options = PipelineOptions(beam_args)
  standard = options.view_as(StandardOptions)
  standard.runner = _RUNNER_ALIASES.get(standard.runner, standard.runner)
  if standard.runner == _RUNNER_ALIASES['DaskRunner']:
    # Registers --dask_client_address and the other Dask options.
    import apache_beam.runners.dask.dask_runner  # noqa: F401
  _reject_unknown_flags(options, beam_args)
  options.view_as(TypeOptions).pipeline_type_check = False
  if standard.runner in _DIRECT_RUNNER_NAMES:
    standard.runner = LOCAL_RUNNER
  direct = options.view_as(DirectOptions)
  workers = direct.direct_num_workers
  if workers is not None and not 0 <= workers <= MAX_WORKERS:
    raise config_lib.ConfigError(
        'direct_num_workers', workers,
        f'must be in [0, {MAX_WORKERS}] (0: one per CPU it may use)')
  if workers == 0:  # Beam would take the machine's cores
    direct.direct_num_workers = cpus.usable_cpus()
  if standard.runner == LOCAL_RUNNER and not _running_mode_given(beam_args):
    if not _given(beam_args, '--direct_num_workers'):
      direct.direct_num_workers = cpus.usable_cpus()
    direct.direct_running_mode = (
        'in_memory' if direct.direct_num_workers == 1
        else 'multi_threading')
  return options


def _running_mode_given(beam_args: Sequence[str]) -> bool:
  return _given(beam_args, '--direct_running_mode')


def _given(beam_args: Sequence[str], flag: str) -> bool:
  return any(arg.startswith(flag) for arg in beam_args)


def _reject_unknown_flags(options: PipelineOptions,
                          beam_args: Sequence[str]) -> None:
  """Beam drops flags it does not know with a warning: a mistyped wavbeam
  flag would silently fall back to its default. Raises ConfigError with
  the closest wavbeam flag instead."""
  unknown = sorted(set(options.get_all_options(retain_unknown_options=True))
                   - set(options.get_all_options()))
  if not unknown:
    return
  ours = [f.name for f in dataclasses.fields(config_lib.PipelineConfig)]
  hints = [f'--{name} (did you mean --{close[0]}?)' if close else
           f'--{name}' for name in unknown
           for close in [difflib.get_close_matches(name, ours, 1)]]
  raise config_lib.ConfigError(
      'options', ' '.join(beam_args), f'unrecognized: {", ".join(hints)}; '
      'see python -m pipeline.run --help')


def run(config_or_argv: Union[config_lib.PipelineConfig, Sequence[str],
                              None] = None,
        pipeline_options: Sequence[str] = (), extra_features=None,
        model_handler=None):
  """What `wavbeam run` does, from Python: the output folder checked,
  locked and prepared (an existing dataset refused unless --overwrite),
  the job run, metadata.json written last.

  `config_or_argv`: a PipelineConfig, with Beam's options as flags in
  `pipeline_options` (['--runner=DataflowRunner', ...]); or the command's
  arguments, ours and Beam's mixed (None: sys.argv). `extra_features` maps
  feature names to numpy functions (transforms.features.functions.FeatureFn).
  `model_handler`: what computes the embedding feature, in place of
  wavbeam's own handler of --embedding_model: any of Beam's ModelHandlers
  (apache_beam.ml.inference; pipeline/embeddings.py adapts it).
  Returns the finished PipelineResult (with --append, an
  append.AppendOutcome; with --variants, {variant: its result}); raises
  ConfigError before anything is written for what the command refuses
  with exit 2, and the run's error if it fails.
  """
  if isinstance(config_or_argv, config_lib.PipelineConfig):
    config, beam_args = config_or_argv, list(pipeline_options)
  else:
    config, beam_args = config_lib.parse_known_args(
        sys.argv[1:] if config_or_argv is None else config_or_argv)
    beam_args = [*beam_args, *pipeline_options]
  return run_config(config, beam_args, embeddings.with_model_handler(
      config, extra_features, model_handler))


def _input_files(config: config_lib.PipelineConfig, up_to: int) -> int:
  """Files in input_dir, counted up to `up_to`; 0 when it cannot be listed
  (build_pipeline then says why)."""
  try:
    return audio_io.count_audio_files(config.input_dir,
                                    config.audio_formats, up_to)
  except Exception:  # pylint: disable=broad-except
    return 0


def run_config(config: config_lib.PipelineConfig, beam_args: Sequence[str],
               extra_features=None, show_progress: bool = False):
  """Builds and runs; with show_progress, a local run reports on stderr
  (remote runners have their own UIs, which show the Beam metrics). A
  local default run forks its forked workers here unless the caller
  (the CLI) already has. With --variants, runs every variant and returns
  {variant: its result}."""
  extra_features = embeddings.with_model_handler(config, extra_features)
  try:
    return _run_checked(config, beam_args, extra_features, show_progress)
  finally:
    embeddings.remove_shared_files(extra_features)


def _run_checked(config, beam_args, extra_features, show_progress):
  output_folder.check_own_folder(config)
  if config.variants:
    return _run_variants(config, beam_args, extra_features, show_progress)
  with forked_workers.started(forked_workers_for(config, beam_args)) \
      as forked, _locked(config):
    if config.resume and not config.append and resume_lib.find_complete(
        config):
      resume_lib.check_finished(config)
      return None  # nothing to resume: `wavbeam run` says so
    if config.append:  # returns an append.AppendOutcome
      return append_lib.run_append(
          config, lambda part, base: _run_config(
              part, beam_args, extra_features, show_progress, forked, base),
          lambda part: expected_schema(part, extra_features),
          extra_features)
    return _run_config(config, beam_args, extra_features, show_progress,
                       forked)


def _sweep_index(config) -> dict:
  """The variants.json in --output_dir; ConfigError when it is damaged
  or names a folder that is not its variant's."""
  try:
    return variants_lib.read_index(config.output_dir)
  except DatasetError as e:
    raise config_lib.ConfigError('output_dir', config.output_dir,
                                 str(e)) from e


def _run_variants(config, beam_args, extra_features, show_progress):
  """One job writing every variant into OUT/<variant>/ (the audio listed,
  probed, planned and read once: graph.build_sweep_pipeline);
  OUT/variants.json last. The sweep's folder and every variant's are
  locked for the whole run."""
  variant_configs = variants_lib.configs(config)
  index = naming.join(config.output_dir, variants_lib.FILE_NAME)
  with forked_workers.started(forked_workers_for(config, beam_args)) \
      as forked, _locked(config):
    output_folder.refuse_planted_links(config.output_dir, variant_configs)
    if read_metadata(config.dataset_dir) is not None:
      raise config_lib.ConfigError(
          'output_dir', config.output_dir, 'holds a dataset, and a sweep '
          'writes one folder per variant in its folder: give --variants '
          'another --output_dir')
    if config.append:
      return _append_to_sweep(config, variant_configs, beam_args,
                              extra_features, show_progress, forked)
    if config.resume:
      return _resume_sweep(config, variant_configs, beam_args,
                           extra_features, show_progress, forked)
    for name, variant in variant_configs.items():
      if not config.overwrite and read_metadata(variant.dataset_dir):
        raise config_lib.ConfigError(
            'output_dir', config.output_dir, f'variant {name!r} already has '
            f'a dataset in {variant.dataset_dir}: pass --overwrite to '
            'replace every variant')
    shared = naming.temp_dir(config.output_dir)
    # A run of one dataset stopped here: its finished shards are in the
    # same temp folder a sweep uses, and --resume (without --variants) can
    # still finish it.
    single = [p for p in output_folder.dataset_files(config) if p != shared]
    if (single or run_marker.read_marker(config.dataset_dir)) and \
        not config.overwrite:
      raise config_lib.ConfigError(
          'output_dir', config.output_dir, 'already holds files of an '
          f'incomplete earlier run of one dataset (e.g. '
          f'{(single or [shared])[0]}): pass --overwrite to replace it with '
          'the sweep, or finish that run with --resume and without '
          '--variants')
    # The variants of an earlier sweep: a finished one's (variants.json),
    # and those of one that was stopped before it listed them.
    earlier = set(_sweep_index(config)['variants']) if FileSystems.exists(
        index) else set()
    unfinished = set(variants_lib.read_started(config.output_dir))
    if (earlier or unfinished - set(variant_configs)) and not \
        config.overwrite:
      what = (f'a sweep ({index})' if earlier else 'the variants of a sweep '
              f'that did not finish ({", ".join(sorted(unfinished))})')
      raise config_lib.ConfigError(
          'output_dir', config.output_dir, f'holds {what}: pass --overwrite '
          'to replace it')
    if FileSystems.exists(index):
      FileSystems.delete([index])  # first: a sweep is listed once whole
    if single:  # --overwrite of a stopped run of one dataset
      filesystem.delete(single)
    # The earlier sweep is replaced whole: its variants this one does not
    # have go too (those it has, each variant's run replaces), as far as
    # they are wavbeam's: a file of the user's own there stays.
    for name in sorted((earlier | unfinished) - set(variant_configs)):
      output_folder.remove_dataset(naming.join(config.output_dir, name),
                                   config.dataset_name)
    # The sweep's own temp folder holds what the variants share (the
    # probes, transforms/planning/block_store) and the names of the
    # variants being written, before any of their folders is: an earlier
    # sweep's goes.
    if FileSystems.exists(shared):
      filesystem.delete([shared])
    variants_lib.write_started(config.output_dir, variant_configs)
    with contextlib.ExitStack() as locks:
      try:
        for variant in variant_configs.values():
          locks.enter_context(_locked(variant))
      except config_lib.ConfigError:
        # Refused before anything ran: the names just recorded would make
        # a later --overwrite take a path of the user's for a variant's.
        # A stopped sweep's own record goes back as it was.
        filesystem.delete([shared])
        if unfinished:
          variants_lib.write_started(config.output_dir, unfinished)
        raise
      try:
        result = _run_config(config, beam_args, extra_features,
                             show_progress, forked,
                             variant_configs=variant_configs)
      except Exception as e:
        if getattr(e, _DISCARDED, False):
          # _run_config discarded the variants' folders: the sweep's own
          # goes too, leaving nothing of this sweep.
          filesystem.delete([shared])
        elif isinstance(e, config_lib.ConfigError):
          # Refused before its job ran (a variant's folder holds an
          # earlier run): the record is put back as it was.
          filesystem.delete([shared])
          if unfinished:
            variants_lib.write_started(config.output_dir, unfinished)
        raise
    finalize.write_text(index, variants_lib.index_text(variant_configs))
    if FileSystems.exists(shared):
      filesystem.delete([shared])
  return {name: result for name in variant_configs}


def _resume_sweep(config, variant_configs, beam_args, extra_features,
                  show_progress, forked):
  """--resume --variants: the stopped sweep's unfinished variants
  finished by one job (each resumed, or written where it had not begun),
  then variants.json; ConfigError when the folder holds no stopped sweep
  of these variants."""
  index = naming.join(config.output_dir, variants_lib.FILE_NAME)
  if FileSystems.exists(index):
    listed = sorted(_sweep_index(config)['variants'])
    if listed == sorted(variant_configs) and all(
        resume_lib.find_complete(v) for v in variant_configs.values()):
      for variant in variant_configs.values():
        resume_lib.check_finished(variant)
      return None  # nothing to resume: `wavbeam run` says so
  started = sorted(variants_lib.read_started(config.output_dir))
  if not started:
    raise config_lib.ConfigError(
        'resume', True, f'{config.output_dir} holds no stopped sweep to '
        'resume: run without --resume (with --overwrite to replace what is '
        'there)')
  if started != sorted(variant_configs):
    raise config_lib.ConfigError(
        'variants', config.variants, f'names the variants '
        f'{sorted(variant_configs)}, and the stopped sweep in '
        f'{config.output_dir} wrote {started}: resume it with its own '
        'variants, or rerun with --overwrite')
  shared = naming.temp_dir(config.output_dir)
  # Its probes are made again; the names of its variants stay, so that a
  # stop now leaves the sweep as resumable as it was.
  probes = naming.join(shared, block_store.FOLDER)
  if FileSystems.exists(probes):
    filesystem.delete([probes])
  unfinished = {}
  for name, variant in variant_configs.items():
    variant = resume_lib.resumed_or_fresh(variant)
    if variant.resume and resume_lib.find_complete(variant):
      resume_lib.check_finished(variant)  # kept as it is
    else:
      unfinished[name] = variant
  with contextlib.ExitStack() as locks:
    for variant in variant_configs.values():
      locks.enter_context(_locked(variant))
    if unfinished:
      _run_config(config, beam_args, extra_features, show_progress, forked,
                  variant_configs=unfinished)
  finalize.write_text(index, variants_lib.index_text(variant_configs))
  if FileSystems.exists(shared):
    filesystem.delete([shared])
  return {name: None for name in variant_configs}


def _append_to_sweep(config, variant_configs, beam_args, extra_features,
                     show_progress, forked):
  """--append --variants: the sweep's every variant gets the new part, all
  written by one job; returns {variant: append.AppendOutcome}."""
  index = naming.join(config.output_dir, variants_lib.FILE_NAME)
  if not FileSystems.exists(index):
    raise config_lib.ConfigError(
        'append', True, f'{config.output_dir} holds no complete sweep (no '
        f'{variants_lib.FILE_NAME}) to append to')
  listed = sorted(_sweep_index(config)['variants'])
  if listed != sorted(variant_configs):
    raise config_lib.ConfigError(
        'variants', config.variants, f'names the variants '
        f'{sorted(variant_configs)}, and the sweep in {config.output_dir} '
        f'holds {listed}: append with the file the sweep was written with')
  shared = naming.temp_dir(config.output_dir)
  with contextlib.ExitStack() as locks:
    for variant in variant_configs.values():
      locks.enter_context(_locked(variant))
    outcomes = append_lib.run_sweep_append(
        config.output_dir, variant_configs, lambda parts, base: _run_config(
            config, beam_args, extra_features, show_progress, forked, base,
            variant_configs=parts),
        lambda part: expected_schema(part, extra_features), extra_features)
  if FileSystems.exists(shared):
    filesystem.delete([shared])
  return outcomes


@contextlib.contextmanager
def _locked(config: config_lib.PipelineConfig):
  """The output folder's lock (run_marker.FolderLock) for the whole run;
  a ConfigError (exit 2, nothing done) while another run holds it."""
  try:
    lock = run_marker.FolderLock(config.dataset_dir).__enter__()
  except (run_marker.FolderLocked, filesystem.NotAFile) as e:
    raise config_lib.ConfigError('output_dir', config.output_dir,
                                 str(e)) from None
  except OSError as e:
    raise config_lib.ConfigError(
        'output_dir', config.output_dir,
        f'cannot be written ({e}); pick a writable location') from e
  try:
    output_folder.refuse_planted_links(config.dataset_dir)
    yield lock
  finally:
    lock.__exit__(None, None, None)


def _run_config(config, beam_args, extra_features, show_progress, forked,
                base=None, variant_configs=None):
  """Builds, prepares the output folder(s) and runs one job: a dataset, an
  --append part (`base`), or a sweep's every variant (`variant_configs`)."""
  options = pipeline_options(beam_args)
  direct = options.view_as(DirectOptions)
  if in_one_thread(forked):
    direct.direct_running_mode, direct.direct_num_workers = 'in_memory', 1
  if (not forked and direct.direct_running_mode == 'multi_threading' and
      not _running_mode_given(beam_args) and
      _input_files(config, PROCESSES_FROM_FILES) >= PROCESSES_FROM_FILES):
    direct.direct_running_mode = 'multi_processing'
  timeline.mark(timeline.PIPELINE)
  try:
    p = beam.Pipeline(options=options)  # copies the options
  except ValueError as e:  # an unknown --runner, or options it rejects
    raise config_lib.ConfigError(
        'runner', options.view_as(StandardOptions).runner,
        f'{e} (see docs/runners.md)') from e
  # Beam's Pipeline() made a beam-pipeline-temp* folder in the temporary
  # folder for cross-language transforms' artifacts, which this graph has
  # none of. Only its run() removes it: a job that fails before its run,
  # or is killed, would leave it behind.
  shutil.rmtree(p.local_tempdir, ignore_errors=True)
  outputs = variant_configs or {None: config}
  run_ids = {name: run_marker.new_run_id() for name in outputs}
  if variant_configs:
    build_sweep_pipeline(p, config, variant_configs, extra_features,
                         run_ids, base)
  else:
    build_pipeline(p, config, extra_features, run_ids[None], base)
  kept = sum(output_folder.prepare(output, run_ids[name], base)
             for name, output in outputs.items())
  try:
    return _run_prepared(p, options, config, outputs, run_ids, kept,
                         show_progress)
  except Exception as e:
    if console.option_error(e) and not (config.resume or config.append):
      # A shard task still running would write into the folder again.
      forked_workers.kill_now()
      for name, output in outputs.items():
        output_folder.discard(output, run_ids[name])
      setattr(e, _DISCARDED, True)
    raise


# Set on the error of a job whose output _run_config discarded (an option
# the data showed wrong), unlike a refusal before it ran.
_DISCARDED = 'wavbeam_output_discarded'


def _run_prepared(p, options, config, outputs, run_ids, kept,
                  show_progress):
  """Runs the built job on its prepared output folder(s), each marked
  live while it runs (run_marker.Heartbeat)."""
  local = options.view_as(StandardOptions).runner == LOCAL_RUNNER
  shown = next(iter(outputs.values())).dataset_dir
  with contextlib.ExitStack() as running:
    if options.view_as(StandardOptions).runner == PRISM_RUNNER:
      running.callback(_stop_prism)
    for name, output in outputs.items():
      running.enter_context(run_marker.Heartbeat(output.dataset_dir,
                                                 run_ids[name]))
    if show_progress and local:
      running.enter_context(progress.Progress(shown, kept=kept))
    try:
      result = p.run()
      result.wait_until_finish()
    except Exception as e:
      # Whatever failed first, a folder taken away is the cause to report.
      # A sweep's variant may already be complete (its final step removes
      # the marker): not taken away.
      for name, output in outputs.items():
        if (run_marker.read_marker(output.dataset_dir) != run_ids[name] and
            read_metadata(output.dataset_dir) is None):
          try:
            run_marker.check_marker(output.dataset_dir, run_ids[name])
          except run_marker.OutputChanged as changed:
            raise changed from e
      raise
  return result


def _stop_prism() -> None:
  """Stops the Prism process Beam's PrismRunner started for the job.
  Beam stops it at the interpreter's exit, which the command skips
  (console.exit): it would outlive the job, one server per run."""
  # pylint: disable-next=import-outside-toplevel
  from apache_beam.runners.portability import prism_runner
  server = prism_runner.PrismRunner.shared_handle.acquire(lambda: None)
  if server is not None:
    server.stop()


def in_one_thread(forked: int) -> bool:
  """Whether a local run with `forked` forked workers runs Beam in-process
  in one thread: they do the per-file and shard work, and the DoFns keep
  them all busy from one thread (forked_workers.Calls), without the gRPC
  of a threaded runner (0.1-0.2 s less before the first stage, half the
  cost per stage). With --sink write_to_tfrecord too: the workers compute
  and encode, and hand the records over in spool files to Beam's writer
  here (sink.EncodeExamples)."""
  return forked > 0


def forked_workers_for(config: config_lib.PipelineConfig,
                         beam_args: Sequence[str]) -> int:
  """Forked workers (transforms/runtime/forked_workers.py) for a run: one per
  worker thread of a local threaded run whose input and output are local
  folders and whose running mode wavbeam chose (--direct_num_workers sets
  their count), 0 for anything else (other runners and modes, remote or
  in-memory file systems, options the run itself will refuse)."""
  try:
    options = pipeline_options(beam_args)
  except config_lib.ConfigError:
    return 0
  direct = options.view_as(DirectOptions)
  local = (filesystem.is_local(config.input_dir) and
           filesystem.is_local(config.output_dir))
  if (options.view_as(StandardOptions).runner != LOCAL_RUNNER or
      direct.direct_running_mode != 'multi_threading' or
      _running_mode_given(beam_args) or not local):
    return 0
  return direct.direct_num_workers


def main(argv=None, prog: str = 'python -m pipeline.run') -> int:
  """The CLI: exit 0 when the dataset is complete, 2 for a bad option or
  input/output location (before anything runs), 1 when the run failed or
  wrote no example at all. `prog`: the command's name in --help."""
  if not isinstance(sys.stderr, console.ClosedSafe):
    sys.stdout, sys.stderr = (console.ClosedSafe(sys.stdout),
                              console.ClosedSafe(sys.stderr))
  launcher = argparse.ArgumentParser(add_help=False)
  launcher.add_argument('--quiet', action='store_true')
  launcher.add_argument('--verbose', action='store_true')
  flags, rest = launcher.parse_known_args(sys.argv[1:] if argv is None
                                          else argv)
  console.quiet_logs(verbose=flags.verbose)
  sys.stderr.drop_worker_tracebacks = not flags.verbose
  start = time.perf_counter()
  try:
    config, beam_args = config_lib.parse_known_args(rest, prog)
  except config_lib.ConfigError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  lean_beam.freeze_objects()
  try:
    # Forked before the relay's thread exists: see forked_workers.
    with forked_workers.started(forked_workers_for(config, beam_args)):
      relay = console.StderrRelay()
      restore = console.exit_at_interrupt(
          lambda: f'\nwavbeam: interrupted; {_left_behind(config, local=True)}'
          '\n', relay.real_stderr(), forked_workers.kill_now)
      try:
        return _run(config, beam_args, not flags.quiet, start)
      finally:
        restore()
        relay.close()
  except KeyboardInterrupt:
    # The forked workers are gone (started kills them on the way out).
    # Beam's worker threads would finish their bundles before the
    # interpreter could exit: the process ends now, as a kill would end
    # it, which every step of a run is made to survive.
    print(f'\nwavbeam: interrupted; {_left_behind(config)}', file=sys.stderr)
    sys.stderr.flush()
    os._exit(130)


def _rerun_advice(config) -> str:
  """How to finish a run that stopped early: --resume keeps its finished
  shards, except with --sink write_to_tfrecord, whose files Beam writes
  at the end of the job (so --resume refuses it)."""
  if config.sink == 'write_to_tfrecord':
    return ('rerun with --overwrite (--sink write_to_tfrecord finishes no '
            'shard before the end, so there is nothing to resume)')
  return ('rerun with --resume to finish it from its finished shards, or '
          '--overwrite to start again')


def _left_behind(config, advice: bool = True, local: bool = False) -> str:
  """What a run that stopped early leaves, said for its user; with
  `advice`, how to finish it. `local`: asked from a signal handler, where
  only a local look for metadata.json is safe (Beam's file systems may
  wait on a lock the interrupted line holds): elsewhere it is taken as
  incomplete."""
  if config.variants and config.append:
    return (f'the sweep in {config.output_dir} is as it was before this '
            'run, or every variant holds the new part')
  if config.variants:
    return (f'{config.output_dir} holds no complete sweep (no '
            f'{variants_lib.FILE_NAME})' + (
                f'; {_rerun_advice(config)}' if advice else ''))
  if config.append:
    return (f'the dataset in {config.dataset_dir} is as it was before this '
            'run, or holds its complete part')
  try:
    complete = (os.path.isfile(os.path.join(config.dataset_dir,
                                            METADATA_FILE))
                if local else read_metadata(config.dataset_dir) is not None)
  except Exception:  # pylint: disable=broad-except
    complete = False
  if complete:  # the interrupt came after the last step
    return f'{config.dataset_dir} holds a complete dataset'
  return (f'{config.dataset_dir} holds no complete dataset (no '
          f'{METADATA_FILE})' + (
              f'; {_rerun_advice(config)}' if advice else ''))


def _resume_flag(config) -> str:
  """The flag a rerun after a full disk takes: none for --append (its
  part is undone), --overwrite for --sink write_to_tfrecord, else
  --resume."""
  if config.append:
    return ''
  if config.sink == 'write_to_tfrecord':
    return ' with --overwrite'
  return ' with --resume'


def _output_of(config) -> str:
  """The folder a run writes: the sweep's, or the dataset's."""
  return config.output_dir if config.variants else config.dataset_dir


def _written(config) -> bool:
  """Whether the failed run's output folder exists (so may hold finished
  shards --resume keeps); True where that cannot be told."""
  try:
    return FileSystems.exists(_output_of(config))
  except Exception:  # pylint: disable=broad-except
    return True


def _after_option_error(config) -> str:
  """What a run that failed on an option found wrong once the data was
  seen leaves (_run_config discards what it wrote), said for its user."""
  if config.append:
    return _left_behind(config)
  if config.resume:  # the stopped run had the same options: none can end it
    return (f'{config.dataset_dir} holds the stopped run\'s files, which '
            'no run with these options can finish; fix the option, then '
            'rerun with --overwrite')
  return (f'nothing of this run is kept in {_output_of(config)}; fix the '
          'option, then rerun')


def _run(config, beam_args, show_progress: bool, start: float) -> int:
  try:
    outcome = run_config(config, beam_args, show_progress=show_progress)
  except config_lib.ConfigError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  except run_marker.OutputChanged as e:
    print(f'error: the run failed: {e}', file=sys.stderr)
    return 1
  except Exception as e:  # the run failed: say why, then what to do
    if console.interrupted(e):
      raise KeyboardInterrupt from e  # main says it in one line
    option = console.option_error(e)
    if option:  # an option found wrong once the data was seen: one line
      print(f'error: {option}\n{_after_option_error(config)}',
            file=sys.stderr)
      return 2
    if console.disk_full(e):  # one line: the traceback would say nothing more
      space = console.free_space(config.output_dir)
      print(f'error: the disk holding {config.output_dir} is full'
            f'{f" ({space})" if space else ""}: '
            f'{_left_behind(config, advice=False)}; free some space, then '
            f'rerun{_resume_flag(config)}',
            file=sys.stderr)
      return 1
    logging.exception('the run failed')
    if _written(config):
      after = (f'{config.dataset_dir} holds no complete dataset (no '
               f'{METADATA_FILE}); fix the cause above, then '
               f'{_rerun_advice(config)}')
    else:  # it failed before the output folder was made
      after = (f'nothing was written to {_output_of(config)}; fix the cause '
               'above, then rerun')
    print(f'error: the run failed: {console.root_cause(e)}\n{after}',
          file=sys.stderr)
    return 1
  if outcome is None:
    what = (f'{config.output_dir} holds a complete sweep' if config.variants
            else f'{config.dataset_dir} holds a complete dataset')
    print(f'wavbeam: {what}: nothing to resume', file=sys.stderr)
    return 0
  if config.variants and config.append:
    empty = False
    for name, appended in sorted(outcome.items()):
      print(appended.message(naming.join(config.output_dir, name)),
            file=sys.stderr)
      if appended.part_dir is not None:
        empty |= _report_empty(appended.part_dir, read_metadata(
            appended.part_dir))
    return 1 if empty else 0
  if config.variants:
    empty = False
    for name in outcome:
      written = naming.join(config.output_dir, name)
      meta = read_metadata(written)
      print(console.summary(written, time.perf_counter() - start, meta),
            file=sys.stderr)
      empty |= _report_empty(written, meta)
    print(f'wavbeam: {console.plural(len(outcome), "variant")} listed in '
          f'{naming.join(config.output_dir, variants_lib.FILE_NAME)}',
          file=sys.stderr)
    return 1 if empty else 0
  written = config.dataset_dir
  if config.append:
    print(outcome.message(config.dataset_dir), file=sys.stderr)
    if outcome.part_dir is None:
      return 0
    written = outcome.part_dir
  meta = read_metadata(written)
  print(console.summary(written, time.perf_counter() - start, meta),
        file=sys.stderr)
  return 1 if _report_empty(written, meta) else 0


def _report_empty(written: str, meta) -> bool:
  """Says which of the dataset in `written` and its splits hold no
  example; True when the dataset holds none (the command exits 1: a
  complete dataset, its rejects written, that no one can train on)."""
  for line in (console.empty_warnings(written, meta) +
               console.overflow_warnings(meta)):
    print(line, file=sys.stderr)
  return console.holds_no_example(meta)


# `pipeline.run(config)`: this module, called, is its run function.
_aliases.call_as(__name__, 'run')

if __name__ == '__main__':
  console.exit_process(main())
