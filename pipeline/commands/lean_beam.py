"""Imports Beam lean, for the `run` command.

`import apache_beam` imports pandas and pyarrow only to register batch
converters for DataFrame- and Arrow-batched DoFns and for Parquet and
BigQuery I/O; no wavbeam step uses them. Together they cost about 0.3 s
of start-up and 70 MB of resident memory in the launcher, and again in
every forked worker's resident count. It also imports the Google Cloud
clients of its Dataflow runner and of its BigQuery, Pub/Sub, Bigtable,
Spanner, Datastore and AI connectors (0.2 s) and Google's older API
client (apitools, 0.04 s), MongoDB's driver, and Beam's BigQuery module
(with it, Pub/Sub and the cross-language I/O): a
run on this machine that names no remote location needs none of them
(another 0.07 s); a Beam module that would import one of them later, as
a graph is built, is imported meanwhile (IMPORTED_WHILE_HIDDEN). Its
Cloud Storage file system (0.08 s) is imported when a path first names
gs://, as a manifest's recordings may.

Only the commands (`wavbeam run`, `python -m pipeline.run`) import Beam
this way, first thing, before any thread exists: the Beam modules
imported meanwhile keep lacking them for the life of the process, which
a program that imports wavbeam may not want. Every library stays
importable afterwards (Dask and TFDV import pandas and pyarrow when they
need them).
"""

import gc
import importlib
import logging
import os
import sys
import types
import weakref
from typing import Sequence

DATAFRAME_LIBRARIES = ('pandas', 'pyarrow')
CLOUD_SERVICE_LIBRARIES = (
    'google.cloud.dataflow', 'google.cloud.bigquery',
    'google.cloud.bigquery_storage_v1', 'google.cloud.pubsub',
    'google.cloud.bigtable', 'google.cloud.spanner', 'google.cloud.datastore',
    'google.cloud.language', 'google.cloud.videointelligence',
    'google.cloud.vision', 'google.cloud.dlp',
    'google.cloud.recommendationengine',
    # Beam logs that MongoDB's bson is missing (HIDDEN_LIBRARY_LOGGERS).
    'pymongo', 'bson',
    # Google's older API client (the Dataflow service's; with it httplib2
    # and oauth2client, 0.04 s): Beam's retry module looks for its error
    # class, which no client of a local run raises (Cloud Storage's is
    # google-cloud-storage).
    'apitools',
    # Its import is the first of a block that also imports Pub/Sub and the
    # cross-language I/O, skipped as a whole.
    'apache_beam.io.gcp.bigquery')
# Beam modules imported with the cloud clients hidden, which Beam imports
# later otherwise, the clients with them: its generic Write imports its
# Pub/Sub module to tell a Pub/Sub sink apart (0.15 s, with
# --sink write_to_tfrecord).
IMPORTED_WHILE_HIDDEN = ('apache_beam.io.gcp.pubsub',)
# What Beam imports at its start for calls a run may never make: while
# Beam is imported, each of these modules is stood in for by one whose
# functions import the real module when first called (stand_ins).
# beartype's door (0.06-0.1 s): Beam's type hints ask it whether one
# hint is a sub-hint of another, which no wavbeam graph reaches. Beam's
# HTTP client (httplib2 and pyparsing, 0.04 s): its stager fetches a
# remote artifact with it, which a local run never stages.
DEFERRED_MODULES = ('beartype.door', 'beartype.roar',
                    'apache_beam.internal.http_client')
# Beam's loggers that report a hidden library as missing.
HIDDEN_LIBRARY_LOGGERS = ('apache_beam.io.mongodbio',)
# Beam's file systems for schemes a local command line names nowhere,
# loaded when a path first names the scheme (file_systems_on_demand).
ON_DEMAND_FILE_SYSTEMS = {'gs': 'apache_beam.io.gcp.gcsfilesystem'}
# The longest sleep, in ms, of the state sampler each bundle of Beam's SDK
# harness runs in a thread of its own (Beam's default: 200). A bundle ends
# by joining that thread, which first finishes its sleep, and the sleep
# grows to the longest within a second of the bundle's start: at 200, a
# run's shard phase ends 0-0.2 s after its last task (the bundles' ends
# wait 0.08-0.18 s in all on 4 h, 0.4 s in an eight-variant sweep). Every
# 10 ms it samples no more than any wavbeam step needs (Beam's per-step
# msecs counters).
STATE_SAMPLING_PERIOD_MS = 10
# --runner values that run on this machine (pipeline.run's local runner).
LOCAL_RUNNERS = ('DirectRunner', 'FnApiRunner', 'SwitchingDirectRunner')
# Whether import_beam ran, so this is a command's process, and
# freeze_objects has yet to run.
_COMMAND = False


def one_blas_thread() -> None:
  """OpenBLAS (numpy's, for the log_mel matmul) gets one thread unless
  the environment says otherwise: the pipeline already runs one worker
  or bundle per core, and a pool per process would spin on the same
  cores. numpy reads it when first imported (Beam imports numpy), and
  worker processes inherit it."""
  os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')


def runs_here(argv: Sequence[str]) -> bool:
  """Whether a run command line names only local places and runners: no
  location with a scheme (gs://, s3://, ...) and no remote --runner."""
  argv = list(argv)
  if any('://' in arg for arg in argv):
    return False
  return all(runner in LOCAL_RUNNERS for runner in _values(argv, '--runner'))


def pickles_stay_here(argv: Sequence[str]) -> bool:
  """Whether what Beam pickles for a run command line is unpickled only in
  the command's process and the workers it forks: a local run whose SDK
  harness runs in the process, not in processes of Beam's own
  (--direct_running_mode=multi_processing, an --environment_type)."""
  argv = list(argv)
  return (runs_here(argv) and not _values(argv, '--environment_type') and
          'multi_processing' not in _values(argv, '--direct_running_mode'))


def _values(argv: Sequence[str], option: str) -> list:
  """The values a command line gives `option` ('--name value' or
  '--name=value'; '' where the value is missing)."""
  found = []
  for i, arg in enumerate(argv):
    if arg == option:
      found.append(argv[i + 1] if i + 1 < len(argv) else '')
    elif arg.startswith(option + '='):
      found.append(arg.split('=', 1)[1])
  return found


def import_beam(argv: Sequence[str] = ()):
  """Imports apache_beam (after one_blas_thread) with DATAFRAME_LIBRARIES
  hidden, and CLOUD_SERVICE_LIBRARIES too when the command line `argv`
  runs here (runs_here), and freezes what the import made (gc.freeze: it
  lasts); then remember_repeated_lookups and quick_bundle_ends, and
  uncompressed_pickles where the pickles stay here (pickles_stay_here).
  Unless Beam or a dataframe library is already imported: then nothing
  is hidden and Beam keeps what it registered."""
  one_blas_thread()
  if 'apache_beam' in sys.modules:
    return sys.modules['apache_beam']
  hidden = [name for name in DATAFRAME_LIBRARIES if name not in sys.modules]
  if len(hidden) < len(DATAFRAME_LIBRARIES):
    hidden = []
  elif runs_here(argv):
    hidden += [name for name in (CLOUD_SERVICE_LIBRARIES +
                                 tuple(ON_DEMAND_FILE_SYSTEMS.values()))
               if name not in sys.modules]
  for name in hidden:
    sys.modules[name] = None  # `import name` raises ImportError
  standing_in = {name: module for name, module in stand_ins().items()
                 if name not in sys.modules}
  sys.modules.update(standing_in)
  quieted = ([logging.getLogger(name) for name in HIDDEN_LIBRARY_LOGGERS]
             if hidden else [])
  was_disabled = [logger.disabled for logger in quieted]
  for logger in quieted:
    logger.disabled = True
  # Importing makes objects that last, not garbage: the collector's passes
  # over them (2 full ones here, 0.1 s) find nothing. Frozen afterwards,
  # they are out of its sight while the command imports its own modules
  # and builds its graph (a full pass over them took 0.026 s there).
  collecting = gc.isenabled()
  gc.disable()
  try:
    import apache_beam  # pylint: disable=import-outside-toplevel
    if CLOUD_SERVICE_LIBRARIES[0] in hidden:
      for name in IMPORTED_WHILE_HIDDEN:
        importlib.import_module(name)
    gc.freeze()
  finally:
    if collecting:
      gc.enable()
    for name in hidden:
      if sys.modules.get(name, ...) is None:
        del sys.modules[name]
    for name, module in standing_in.items():
      if sys.modules.get(name) is module:
        del sys.modules[name]
    for logger, disabled in zip(quieted, was_disabled):
      logger.disabled = disabled
  if any(name in hidden for name in ON_DEMAND_FILE_SYSTEMS.values()):
    file_systems_on_demand()
  remember_repeated_lookups()
  quick_bundle_ends()
  if pickles_stay_here(argv):
    uncompressed_pickles()
  global _COMMAND  # pylint: disable=global-statement
  _COMMAND = True
  return apache_beam


def stand_ins() -> dict:
  """{name: module} for DEFERRED_MODULES: the names Beam imports from
  each, its functions importing the real module (no longer stood in for
  by then) on their first call. Beam catches beartype's
  BeartypeDoorException around is_subhint: the stand-in raises the
  stand-in exception in its place."""

  class BeartypeDoorException(Exception):
    """beartype.roar's, as the stand-in of beartype.door raises it."""

  def is_subhint(subhint, superhint) -> bool:
    # pylint: disable=import-outside-toplevel
    from beartype import door, roar
    try:
      return door.is_subhint(subhint, superhint)
    except roar.BeartypeDoorException as e:
      raise BeartypeDoorException(str(e)) from e

  def get_new_http(*args, **kwargs):
    http_client = importlib.import_module('apache_beam.internal.http_client')
    return http_client.get_new_http(*args, **kwargs)

  modules = {}
  for name, attributes in (
      ('beartype.door', {'is_subhint': is_subhint}),
      ('beartype.roar', {'BeartypeDoorException': BeartypeDoorException}),
      ('apache_beam.internal.http_client', {'get_new_http': get_new_http})):
    module = types.ModuleType(name, f'Stands in for {name} (lean_beam).')
    module.__dict__.update(attributes)
    modules[name] = module
  return modules


def file_systems_on_demand() -> None:
  """Beam finds a path's file system among the FileSystem classes
  imported so far: its lookup now first imports the module of an
  ON_DEMAND_FILE_SYSTEMS scheme the path names (once; where the module
  cannot be imported, Beam's own error says which extra to install)."""
  # pylint: disable=import-outside-toplevel
  from apache_beam.io.filesystems import FileSystems
  if getattr(FileSystems.get_filesystem, 'on_demand', False):
    return
  find = FileSystems.get_filesystem

  def get_filesystem(path):
    module = ON_DEMAND_FILE_SYSTEMS.get(FileSystems.get_scheme(path))
    if module is not None and module not in sys.modules:
      try:
        importlib.import_module(module)
      except ImportError:
        pass
    return find(path)

  get_filesystem.on_demand = True
  get_filesystem.__doc__ = find.__doc__
  FileSystems.get_filesystem = staticmethod(get_filesystem)


def freeze_objects() -> None:
  """In a command's process (import_beam ran), moves every object that
  exists now out of the garbage collector's sight (gc.freeze), before the
  run forks its workers and starts: what the imports made lives as long as
  the process, yet each full collection walked it again (a million
  objects, 0.08-0.2 s per run in the launcher), and in a forked worker
  the walk wrote to every page it shares with the launcher. Elsewhere (a
  program running pipeline.run.main, the tests) nothing changes. Once
  per process: a program that runs the command again would freeze the
  garbage of the runs before, never to be collected."""
  global _COMMAND  # pylint: disable=global-statement
  if _COMMAND:
    gc.freeze()
    _COMMAND = False


def remember_repeated_lookups() -> None:
  """Beam repeats three lookups while it builds and starts a pipeline, and
  each costs far more than its answer, which never changes; they are kept:

  - Whether a DoFn has state or timer parameters: it inspects every
    method (an inspect.signature each), 468 times and 0.2 s in a default
    run. A DoFn's methods do not change once it is built: the answer is
    kept per DoFn object.
  - PipelineOptions.view_as: it parses the options' flags again with an
    argparse parser of every option class (each argument asks the
    terminal's size), 328 times and 0.18 s. A view is a window on the
    options object's one dict of values, so the same view serves every
    caller: kept per options object and class.
  - The arguments of a DoFn's or a Map's function: Beam reads them with
    inspect.signature whenever it describes a DoFn (5,700 times, 0.06 s,
    in a four-variant sweep's graph). They are a function's own: kept per
    function, for a bound method per the function it binds.

  Each is kept while its object lives."""
  # pylint: disable=import-outside-toplevel
  from apache_beam.options.pipeline_options import PipelineOptions
  from apache_beam.transforms import core
  from apache_beam.transforms import userstate
  if not getattr(core.get_function_args_defaults, 'remembered', False):
    core.get_function_args_defaults = _per_function(
        core.get_function_args_defaults)
  if not getattr(userstate.get_dofn_specs, 'remembered', False):
    userstate.get_dofn_specs = _per_object(
        userstate.get_dofn_specs,
        # Callers get sets of their own, as from Beam's function.
        copy=lambda specs: (set(specs[0]), set(specs[1])))
  if not getattr(PipelineOptions.view_as, 'remembered', False):
    PipelineOptions.view_as = _per_object(PipelineOptions.view_as)


def quick_bundle_ends() -> None:
  """Beam's SDK harness samples each bundle's state every
  STATE_SAMPLING_PERIOD_MS at most, so that a bundle's end waits no
  longer than that for its sampler's thread. The harness builds its
  samplers by the module's name, statesampler.StateSampler, which becomes
  a subclass that caps the period."""
  # pylint: disable=import-outside-toplevel
  from apache_beam.runners.worker import statesampler
  if getattr(statesampler.StateSampler, 'quick_to_stop', False):
    return

  class QuickToStopSampler(statesampler.StateSampler):
    quick_to_stop = True

    def __init__(self, prefix, counter_factory,
                 sampling_period_ms=STATE_SAMPLING_PERIOD_MS):
      super().__init__(prefix, counter_factory,
                       min(sampling_period_ms, STATE_SAMPLING_PERIOD_MS))

  statesampler.StateSampler = QuickToStopSampler


def uncompressed_pickles() -> None:
  """Beam's pickler leaves what it pickles uncompressed (base64 of the
  pickle) and still unpickles what it compressed.

  It compresses every pickled DoFn, side input and coder of a graph with
  bz2 at level 9 (zlib at 9 for coders), to keep a remote job's graph
  small, and decompresses each as the in-process SDK harness builds a
  bundle's steps: 0.09 s of a one-file run, 0.3 s of an eight-variant
  sweep's, for graphs that never leave the process. Only where nothing
  else unpickles them (pickles_stay_here): a Beam worker of another
  process would read a pickle as bz2."""
  # pylint: disable=import-outside-toplevel
  from apache_beam.internal import cloudpickle_pickler
  for name in ('bz2', 'zlib'):
    module = getattr(cloudpickle_pickler, name)
    if not isinstance(module, _Uncompressed):
      setattr(cloudpickle_pickler, name, _Uncompressed(module))


class _Uncompressed:
  """Stands in for bz2 or zlib in Beam's pickler: a pickle (protocol 2 on:
  its first byte 0x80, which starts neither a bz2 nor a zlib stream)
  passes both ways as it is; anything else goes to the real module."""

  def __init__(self, real):
    self.real = real

  def compress(self, data, *args, **kwargs):
    if data[:1] == b'\x80':
      return data
    return self.real.compress(data, *args, **kwargs)

  def decompress(self, data, *args, **kwargs):
    if data[:1] == b'\x80':
      return data
    return self.real.decompress(data, *args, **kwargs)


def _per_function(compute):
  """compute(f) -> (argument names, defaults), kept per plain function
  and, for a bound method, per the function it binds (inspect.signature
  drops the bound first argument whatever the object). Other callables
  (partial objects, callable instances, builtins) are computed each time.
  Each call returns lists of its own."""
  known = weakref.WeakKeyDictionary()  # function -> {bound: result}

  def remembered(f):
    if isinstance(f, types.FunctionType):
      function, bound = f, False
    elif (isinstance(f, types.MethodType) and
          isinstance(f.__func__, types.FunctionType)):
      function, bound = f.__func__, True
    else:
      return remembered.__wrapped__(f)
    results = known.setdefault(function, {})
    if bound not in results:
      results[bound] = remembered.__wrapped__(f)
    names, defaults = results[bound]
    return list(names), list(defaults)

  return _marked(remembered, compute)


def _per_object(compute, copy=lambda result: result):
  """compute(obj, *args), kept per live `obj` and `args` (hashable); each
  call returns copy(the kept result). Calls compute through the returned
  function's __wrapped__. An entry goes when its object dies (its weak
  reference's callback), before another object can take its id."""
  known = {}

  def remembered(obj, *args):
    key = (id(obj),) + args
    seen = known.get(key)
    if seen is not None:
      return copy(seen[1])
    result = remembered.__wrapped__(obj, *args)
    try:
      ref = weakref.ref(obj, lambda _, key=key: known.pop(key, None))
    except TypeError:  # an object without weak references: not kept
      return result
    known[key] = ref, result
    return copy(result)

  return _marked(remembered, compute)


def _marked(remembered, compute):
  """`remembered` marked as keeping compute's answers (remember_repeated_
  lookups checks the mark), compute reachable as its __wrapped__."""
  remembered.remembered = True
  remembered.__wrapped__ = compute
  remembered.__doc__ = compute.__doc__
  remembered.__name__ = compute.__name__
  return remembered
