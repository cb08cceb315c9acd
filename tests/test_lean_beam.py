"""lean_beam: the run command imports Beam without pandas and pyarrow, and
both stay importable for whatever asks for them later; a program that
imports wavbeam gets Beam whole."""

import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(code: str) -> str:
  done = subprocess.run(
      [sys.executable, '-c', textwrap.dedent(code)], capture_output=True,
      text=True, timeout=120, cwd=REPO,
      env={**os.environ, 'PYTHONPATH': REPO})
  assert done.returncode == 0, done.stderr
  return done.stdout.strip()


def test_the_run_command_imports_beam_without_dataframe_libraries():
  out = _python("""
      import sys
      from pipeline.commands import cli
      cli.load('run')
      print(sorted(n for n in ('pandas', 'pyarrow') if n in sys.modules))
      import pandas, pyarrow
      print(int(pandas.DataFrame({'a': [1, 2]}).a.sum()),
            pyarrow.array([3, 4]).to_pylist())
      """)
  assert out.splitlines() == ['[]', '3 [3, 4]']


def _imported_by_command(argv, tmp_path):
  """Modules a command's process imported (python -X importtime)."""
  done = subprocess.run(
      [sys.executable, '-X', 'importtime', *argv, '--input_dir',
       str(tmp_path / 'none'), '--output_dir', str(tmp_path / 'out')],
      capture_output=True, text=True, timeout=120, cwd=REPO,
      env={**os.environ, 'PYTHONPATH': REPO})
  assert done.returncode == 2, done.stderr  # the input folder is missing
  assert 'does not exist' in done.stderr
  return {line.rsplit('|', 1)[1].strip() for line in done.stderr.splitlines()
          if line.startswith('import time:')}


@pytest.mark.parametrize('argv', [
    ['-m', 'pipeline.run'],
    ['-c', 'import sys; from pipeline.cli import command; '
           "sys.argv[1:1] = ['run']; command()"]])
def test_the_commands_never_import_dataframe_libraries(argv, tmp_path):
  imported = _imported_by_command(argv, tmp_path)
  assert 'apache_beam' in imported
  # importtime lists the hidden attempts too: a real import has parts.
  assert not [name for name in imported
              if name.startswith(('pandas.', 'pyarrow.'))]
  # Nor what a local run uses nowhere: the cloud and MongoDB clients,
  # scipy.fft's package (its kernel is loaded on its own), and numpy's
  # random generators (--augment's).
  assert not [name for name in imported if name.startswith((
      'google.cloud.storage.', 'google.cloud.bigquery.', 'pymongo.',
      'apitools.base.protorpclite', 'oauth2client.',
      'apache_beam.io.gcp.bigquery_tools', 'apache_beam.io.gcp.gcsio',
      'scipy.fft.', 'scipy.special.', 'numpy.random.',
      # Nor beartype or Beam's HTTP client (lean_beam.DEFERRED_MODULES).
      'beartype.', 'httplib2.', 'pyparsing.'))]


def test_a_program_importing_wavbeam_keeps_beam_whole():
  out = _python("""
      import sys
      import pipeline.commands.run
      print('pandas' in sys.modules, 'pyarrow' in sys.modules,
            'apache_beam.typehints.pandas_type_compatibility' in sys.modules)
      """)
  assert out == 'True True True'


# What a real pipeline's bundles sample their state every (ms).
_SAMPLING_PERIODS = textwrap.dedent("""
    import apache_beam as beam
    from apache_beam.runners.worker import statesampler
    periods = set()
    class Seen(statesampler.StateSampler):
      def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        periods.add(self.sampling_period_ms)
    statesampler.StateSampler = Seen
    with beam.Pipeline(runner='FnApiRunner') as p:
      _ = p | beam.Create([1, 2, 3]) | beam.Map(lambda x: x + 1)
    print(sorted(periods))
    """)


def test_a_commands_bundles_sample_their_state_briefly():
  """A bundle ends by joining its state sampler's thread, which finishes
  its sleep first: in a command's process the samplers a real pipeline's
  bundles run sleep STATE_SAMPLING_PERIOD_MS at most, not Beam's 200."""
  out = _python(textwrap.dedent("""
      from pipeline.commands import lean_beam
      lean_beam.import_beam()
      print(lean_beam.STATE_SAMPLING_PERIOD_MS)
      """) + _SAMPLING_PERIODS + textwrap.dedent("""
      lean_beam.quick_bundle_ends()  # a second call changes nothing
      print(statesampler.StateSampler is Seen)
      """))
  period, periods, unchanged = out.splitlines()[-3:]
  assert int(period) < 200
  assert periods == f'[{period}]'
  assert unchanged == 'True'


def test_a_program_importing_beam_keeps_its_sampling_period():
  out = _python('import pipeline.commands.run\n' + _SAMPLING_PERIODS)
  assert out.splitlines()[-1] == '[200]'


def test_beam_runs_when_pandas_comes_later():
  out = _python("""
      from pipeline.commands import lean_beam
      beam = lean_beam.import_beam()
      import pandas
      with beam.Pipeline(runner='FnApiRunner') as p:
        _ = (p | beam.Create([1, 2, 3])
             | beam.Map(lambda x: int(pandas.Series([x, x]).sum()))
             | beam.combiners.ToList()
             | beam.Map(lambda xs: print(sorted(xs))))
      """)
  assert out.splitlines()[-1] == '[2, 4, 6]'


def test_nothing_hidden_when_pandas_came_first():
  out = _python("""
      import sys
      import pandas
      from pipeline.commands import lean_beam
      lean_beam.import_beam()
      print('apache_beam.typehints.pandas_type_compatibility' in sys.modules,
            'pyarrow' in sys.modules)
      """)
  assert out == 'True True'


@pytest.mark.parametrize('load,threads', [
    ('from pipeline.commands import cli; cli.load("run")', '1'),
    # A program that imports the run function keeps its environment.
    ('import pipeline.run', 'None')])
def test_openblas_has_one_thread_when_numpy_loads_for_the_command(load,
                                                                  threads):
  out = _python(f"""
      import os, sys
      os.environ.pop('OPENBLAS_NUM_THREADS', None)
      class Watch:
        def find_spec(self, name, path=None, target=None):
          if name == 'numpy':
            print(os.environ.get('OPENBLAS_NUM_THREADS'))
            sys.meta_path.remove(self)
      sys.meta_path.insert(0, Watch())
      {load}
      """)
  assert out == threads


def test_a_local_run_imports_beam_without_cloud_service_clients():
  out = _python("""
      import sys
      from pipeline.commands import cli
      from pipeline.commands import lean_beam
      cli.load('run', ['--input_dir', 'in', '--output_dir', 'out'])
      print(sorted(n for n in lean_beam.CLOUD_SERVICE_LIBRARIES
                   if sys.modules.get(n) is not None))
      # Cloud Storage comes when a path names it, as a manifest's
      # recordings may.
      from apache_beam.io.filesystems import FileSystems
      print('google.cloud.storage' in sys.modules,
            type(FileSystems.get_filesystem('/tmp/a.wav')).__name__)
      print(type(FileSystems.get_filesystem('gs://bucket/a.wav')).__name__,
            'google.cloud.storage' in sys.modules)
      # And every hidden library is importable afterwards.
      import google.cloud.bigquery
      import pymongo
      from apitools.base.py import exceptions
      from apache_beam.io.gcp import bigquery
      from apache_beam.runners.dataflow import dataflow_runner
      print(google.cloud.bigquery.Client.__name__,
            dataflow_runner.DataflowRunner.__name__,
            bigquery.WriteToBigQuery.__name__, pymongo.MongoClient.__name__,
            exceptions.HttpError.__name__)
      """)
  assert out.splitlines() == [
      '[]', 'False LocalFileSystem', 'GCSFileSystem True',
      'Client DataflowRunner WriteToBigQuery MongoClient HttpError']


def test_deferred_modules_are_imported_when_first_called():
  """Beam's type check answers through beartype's stand-in as through
  beartype (a hint beartype refuses: no, not an error), and its stager's
  HTTP client is httplib2's; each real module comes on that first call,
  and an import after Beam's finds the real modules."""
  out = _python("""
      import sys
      from pipeline.commands import cli
      cli.load('run', ['--input_dir', 'in', '--output_dir', 'out'])
      print('beartype' in sys.modules, 'httplib2' in sys.modules)
      from apache_beam.typehints import typehints
      print(typehints.is_consistent_with(int, object),
            typehints.is_consistent_with(str, int),
            typehints.is_consistent_with(3, int), 'beartype' in sys.modules)
      from apache_beam.runners.portability import stager
      print(type(stager.get_new_http()).__name__)
      import beartype.door
      from apache_beam.internal import http_client
      print(beartype.door.is_subhint(bool, int), http_client.__file__ != '')
      """)
  assert out.splitlines() == ['False False', 'True False False True', 'Http',
                              'True True']


def test_a_local_write_to_tfrecord_graph_leaves_pub_sub_out(tmp_path):
  """Beam's generic Write looks for a Pub/Sub sink in its Pub/Sub module,
  which a local run imported without the client."""
  # The graph is built, not run: Beam's temporary folder, which only a
  # run removes, goes in the test's own.
  out = _python(f"""
      import sys, tempfile
      tempfile.tempdir = {str(tmp_path)!r}
      from pipeline.commands import cli
      cli.load('run', ['--input_dir', 'in', '--output_dir', 'out'])
      import apache_beam as beam
      p = beam.Pipeline()
      _ = p | beam.Create([b'x']) | beam.io.WriteToTFRecord('/tmp/x')
      print('google.cloud.pubsub' in sys.modules)
      from google.cloud import pubsub
      print(pubsub.PublisherClient.__name__)
      """)
  assert out.splitlines() == ['False', 'PublisherClient']


@pytest.mark.parametrize('argv', [
    ['--input_dir', 'gs://bucket/in', '--output_dir', 'out'],
    ['--input_dir', 'in', '--output_dir', 's3://bucket/out'],
    ['--input_dir', 'in', '--output_dir', 'out', '--runner', 'DataflowRunner'],
    ['--input_dir', 'in', '--output_dir', 'out', '--runner=PortableRunner']])
def test_a_remote_run_imports_beam_with_its_cloud_clients(argv):
  out = _python(f"""
      import sys
      from pipeline.commands import cli
      cli.load('run', {argv!r})
      print('google.cloud.bigquery' in sys.modules,
            'google.cloud.dataflow' in sys.modules)
      """)
  assert out == 'True True'


@pytest.mark.parametrize('argv, here', [
    ([], True),
    (['--input_dir', '/data/in', '--output_dir', 'out'], True),
    (['--runner', 'FnApiRunner'], True),
    (['--runner=DirectRunner'], True),
    (['--runner', 'DaskRunner'], False),
    (['--runner'], False),
    (['--manifest', 'gs://b/m.csv'], False),
    (['--output_dir=file:///tmp/out'], False)])
def test_runs_here(argv, here):
  from pipeline.commands import lean_beam
  assert lean_beam.runs_here(argv) is here


@pytest.mark.parametrize('argv, here', [
    ([], True),
    (['--runner=FnApiRunner', '--direct_num_workers=2'], True),
    (['--direct_running_mode', 'multi_threading'], True),
    (['--direct_running_mode', 'multi_processing'], False),
    (['--direct_running_mode=multi_processing'], False),
    (['--environment_type=PROCESS'], False),
    (['--environment_type', 'LOOPBACK'], False),
    (['--runner', 'PrismRunner'], False),
    (['--manifest', 'gs://b/m.csv'], False)])
def test_pickles_stay_here(argv, here):
  from pipeline.commands import lean_beam
  assert lean_beam.pickles_stay_here(argv) is here


# Beam's pickles of a DoFn and of a coder, and a pickle each of its
# compressors made, read back.
_PICKLES = textwrap.dedent("""
    import base64, bz2, zlib
    import apache_beam as beam
    from apache_beam.coders import coders
    from apache_beam.internal import pickler
    from apache_beam.internal import cloudpickle_pickler
    encoded = pickler.dumps(beam.Map(len))
    coder = coders.VarIntCoder()
    print(base64.b64decode(encoded)[:1] == b'\\x80',
          type(pickler.loads(encoded)).__name__,
          coders.deserialize_coder(coders.serialize_coder(coder)) == coder)
    raw = cloudpickle_pickler._dumps({'a': [1, 2]})
    print(pickler.loads(base64.b64encode(bz2.compress(raw))),
          pickler.loads(base64.b64encode(zlib.compress(raw)), use_zlib=True))
    with beam.Pipeline(runner='FnApiRunner') as p:
      _ = (p | beam.Create([1, 2, 3]) | beam.Map(lambda x: x * 2)
           | beam.combiners.ToList() | beam.Map(lambda xs: print(sorted(xs))))
    """)


@pytest.mark.parametrize('argv, uncompressed', [
    ([], True), (['--direct_running_mode=multi_processing'], False)])
def test_beam_pickles_uncompressed_only_where_the_pickles_stay(argv,
                                                               uncompressed):
  out = _python(textwrap.dedent(f"""
      from pipeline.commands import lean_beam
      lean_beam.import_beam({argv!r})
      """) + _PICKLES)
  assert out.splitlines() == [f'{uncompressed} ParDo True',
                              "{'a': [1, 2]} {'a': [1, 2]}", '[2, 4, 6]']


def test_uncompressed_pickles_a_second_time_changes_nothing():
  out = _python("""
      from pipeline.commands import lean_beam
      lean_beam.import_beam([])
      lean_beam.uncompressed_pickles()
      from apache_beam.internal import cloudpickle_pickler
      print(type(cloudpickle_pickler.bz2.real).__name__,
            type(cloudpickle_pickler.zlib.real).__name__)
      """)
  assert out == 'module module'


def test_dofn_specs_are_remembered_per_dofn_and_stay_right():
  out = _python("""
      import apache_beam as beam
      from apache_beam.transforms import userstate
      from apache_beam.coders import VarIntCoder
      from pipeline.commands import lean_beam
      inspect_dofn = userstate.get_dofn_specs
      lean_beam.remember_repeated_lookups()
      lean_beam.remember_repeated_lookups()  # a second call changes nothing
      assert userstate.get_dofn_specs.remembered
      assert userstate.get_dofn_specs.__wrapped__ is inspect_dofn

      class Stateful(beam.DoFn):
        COUNT = userstate.ReadModifyWriteStateSpec('count', VarIntCoder())
        def process(self, kv, count=beam.DoFn.StateParam(COUNT)):
          count.write((count.read() or 0) + 1)
          yield kv

      calls = []
      def counted(dofn):
        calls.append(type(dofn))  # not the DoFn: it must be able to die
        return inspect_dofn(dofn)
      userstate.get_dofn_specs.__wrapped__ = counted
      stateful, plain = Stateful(), beam.Map(str).fn
      for _ in range(3):
        assert userstate.is_stateful_dofn(stateful)
        assert not userstate.is_stateful_dofn(plain)
      print(len(calls))
      first = userstate.get_dofn_specs(stateful)
      assert first == inspect_dofn(stateful)
      first[0].clear()  # a caller's sets are its own
      print(len(userstate.get_dofn_specs(stateful)[0]))
      # A new DoFn is inspected, even where a dead one's id is reused:
      # stateful and plain ones die in turn, their ids taken again.
      class Plain(beam.DoFn):
        def process(self, kv):
          yield kv
      ids = set()
      reused = 0
      for _ in range(10):
        for kind, stateful in ((Stateful, True), (Plain, False)):
          dofn = kind()
          reused += id(dofn) in ids
          ids.add(id(dofn))
          assert userstate.is_stateful_dofn(dofn) is stateful
          del dofn
      print(len(calls), reused > 0)
      with beam.Pipeline(runner='FnApiRunner') as p:
        _ = (p | beam.Create([('a', 1), ('a', 2), ('b', 3)])
             | beam.ParDo(Stateful()) | beam.combiners.Count.Globally()
             | beam.Map(print))
      """)
  assert out.splitlines() == ['2', '1', '22 True', '3']


def test_function_arguments_are_remembered_per_function_and_stay_right():
  out = _python("""
      import functools
      import apache_beam as beam
      from apache_beam.transforms import core
      from pipeline.commands import lean_beam
      inspect_args = core.get_function_args_defaults
      lean_beam.remember_repeated_lookups()
      lean_beam.remember_repeated_lookups()  # a second call changes nothing
      assert core.get_function_args_defaults.remembered
      assert core.get_function_args_defaults.__wrapped__ is inspect_args
      calls = []
      def counted(f):
        calls.append(getattr(f, '__name__', type(f).__name__))
        return inspect_args(f)
      core.get_function_args_defaults.__wrapped__ = counted

      class Scaled(beam.DoFn):
        def process(self, x, factor=2, *rest, key=None):
          yield x * factor
      one, two = Scaled(), Scaled()
      found = core.get_function_arguments(one, 'process')
      assert found == (['x', 'factor'], [2]), found
      assert core.get_function_arguments(two, 'process') == found
      found[0].append('mine')  # a caller's lists are its own
      assert core.get_function_arguments(one, 'process') == (
          ['x', 'factor'], [2])
      # The bound method and its function are told apart.
      assert core.get_function_args_defaults(Scaled.process) == (
          ['self', 'x', 'factor'], [2])
      print(calls)
      # New functions are inspected, even where a dead one's id is reused.
      del calls[:]
      ids, reused = set(), 0
      for n in range(20):
        f = eval(f'lambda a{n}, b=None: a{n}')
        reused += id(f) in ids
        ids.add(id(f))
        assert core.get_function_args_defaults(f) == ([f'a{n}', 'b'], [None])
        del f
      # Other callables are inspected each time.
      part = functools.partial(lambda a, b: a, 1)
      core.get_function_args_defaults(part)
      core.get_function_args_defaults(part)
      print(len(calls), reused > 0)
      with beam.Pipeline(runner='FnApiRunner') as p:
        small = p | 'Small' >> beam.Create([10])
        _ = (p | beam.Create([1, 2]) | beam.ParDo(Scaled())
             | beam.Map(lambda x, s, plus=1: x + s + plus,
                        beam.pvalue.AsSingleton(small))
             | beam.Map(print))
      """)
  lines = out.splitlines()
  assert lines[:2] == ["['process', 'process']", '22 True']
  assert sorted(lines[2:]) == ['13', '15']


def test_options_views_are_kept_per_options_object_and_class():
  out = _python("""
      from apache_beam.options.pipeline_options import (
          DebugOptions, DirectOptions, PipelineOptions, StandardOptions)
      from pipeline.commands import lean_beam
      view_as = PipelineOptions.view_as
      lean_beam.remember_repeated_lookups()
      calls = []
      def counted(options, cls):
        calls.append(cls)
        return view_as(options, cls)
      PipelineOptions.view_as.__wrapped__ = counted
      options = PipelineOptions(['--direct_num_workers=3', '--runner=X'])
      direct = options.view_as(DirectOptions)
      assert options.view_as(DirectOptions) is direct
      print(direct.direct_num_workers, options.view_as(StandardOptions).runner)
      # Views share the options' values, both ways.
      options.view_as(StandardOptions).runner = 'Y'
      options.view_as(DebugOptions).add_experiment('e')
      print(options.view_as(StandardOptions).runner,
            options.view_as(DebugOptions).experiments,
            options.get_all_options()['runner'])
      # Another options object has views of its own.
      other = PipelineOptions(['--direct_num_workers=5'])
      print(other.view_as(DirectOptions).direct_num_workers,
            other.view_as(StandardOptions).runner, len(calls))
      """)
  assert out.splitlines() == ['3 X', "Y ['e'] Y", '5 None 5']


def test_a_command_imports_beam_uncollected_then_freezes_before_the_run():
  out = _python("""
      import gc, sys
      from pipeline.commands import cli
      from pipeline.commands import lean_beam
      passes = []
      gc.callbacks.append(lambda phase, info: phase == 'start' and
                          passes.append(info['generation']))
      # Beam imported without collector passes (hundreds otherwise, full
      # ones among them), but the young objects' one that collecting
      # again may start; what it made is then out of the collector's sight.
      lean_beam.import_beam([])
      beam_objects = gc.get_freeze_count()
      print(passes in ([], [0]), gc.isenabled(), beam_objects > 50000)
      cli.load('run', [])
      lean_beam.freeze_objects()
      frozen = gc.get_freeze_count()
      print(frozen > beam_objects)
      class Cycle:
        pass
      def garbage():
        a, b = Cycle(), Cycle()
        a.other, b.other = b, a
      garbage()
      # Only once: a second run in the process leaves the first's garbage
      # to the collector.
      lean_beam.freeze_objects()
      print(gc.get_freeze_count() == frozen, gc.collect() >= 2)
      """)
  assert out.splitlines() == ['True True True', 'True', 'True True']


def test_a_caller_that_disabled_the_collector_keeps_it_disabled():
  out = _python("""
      import gc
      gc.disable()
      from pipeline.commands import cli
      cli.load('run', [])
      print(gc.isenabled())
      """)
  assert out == 'False'


def test_a_program_running_the_command_keeps_its_objects_collectable():
  out = _python("""
      import gc
      from pipeline.commands import lean_beam
      import pipeline.commands.run
      lean_beam.freeze_objects()
      print(gc.get_freeze_count())
      """)
  assert out == '0'
