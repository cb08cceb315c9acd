"""Every option with every other: each input recipe (class folders,
--manifest, --fold_splits, --split_lists) x fresh and --append (with new
recordings and with none) x both sinks x with and without --array_record
x gzip on and off x what an example is and how it is labelled either
writes a dataset that verify accepts and every reader reads with the same
counts, or is refused before any work with a message naming both options.

The last axis, UNITS:
- window: windows of --win_len, classes from the recipe;
- file: --example_unit file, one example per recording, whose
  `num_samples` and padded `signal_length` must equal the recording's
  length in every reader;
- labels: --exclude (a folder left out), --label_map (a class renamed,
  the rest under *=), --silence_from with --silence_windows (long
  recordings, one more in the appended day, whose windows are capped per
  part), each example's class checked against its recording;
- variants: --variants, a sweep of two feature settings (the second
  stored as float16, --feature_dtype), every variant a dataset checked as
  above and the sweep checked by verify;
- file+labels+variants: all three at once;
- segment: --example_unit segment from a manifest of two overlapping
  segments per recording (--manifest_start_column/--manifest_end_column),
  one variable-length example each;
- segment+windows: windows cut inside the same segments;
- segment+variants: the segments, under a sweep of two feature settings.
Segments are rows of a manifest: with class folders or split lists they
are refused, naming the options.

window is crossed with every value of the other axes (FULL: 32 cells, 22
of which write datasets). Crossing the other values the same way would
add over a hundred cells that write, of 8 to 20 s each, so they are
crossed pairwise: PAIRWISE holds, for each of them, at most 4 cells (3
for the segment units) that write, which between them meet every recipe they
accept, both sinks, both --array_record values and both compressions (a
cell of --manifest or --array_record with Beam's sink would only be
refused), chosen greedily so that each value meets the other axes'
values in other company than the values before it. A refusal costs no
run, so every refused cell of the full product is a test (REFUSED)."""

import csv
import collections
import itertools
import json
import os
import pathlib

import apache_beam as beam
import pytest

from pipeline import config as config_lib
from pipeline.readers import numpy_dataset as numpy_reader
from pipeline.readers import tf_dataset as replay
from pipeline.commands import run as run_lib
from pipeline import variants as variants_lib
from pipeline.commands import verify
from pipeline.config import ConfigError
from tests import helpers as H
from pipeline.contract import metadata as metadata_lib
from transforms.runtime import output_lock as run_marker
from transforms.writing import finalize

pytestmark = pytest.mark.slow

RECIPES = ('folders', 'manifest', 'fold_splits', 'split_lists')
SINKS = ('shards', 'write_to_tfrecord')
UNITS = ('window', 'file', 'labels', 'variants', 'file+labels+variants',
         'segment', 'segment+windows', 'segment+variants')
FIRST, ADDED = 8, 3  # recordings before and after the new day
WIN_LEN, N_FFT, FFT_HOP = 1024, 256, 128
# --labels: long recordings of silence, the first two in the first run and
# the third in the new day, {name: frames}; the cap on their windows per
# part; the renamed classes.
NOISE = {'n0.wav': 5000, 'n1.wav': 9000, 'n2.wav': 3000}
SILENCE_WINDOWS = {'window': 5, 'file': 1}
# The segments of every recording in a manifest (start, end in seconds):
# two that overlap, each of SEGMENT_FRAMES at 16 kHz.
SEGMENTS = ((0.0, 0.07), (0.05, 0.12))
SEGMENT_FRAMES = 1120
# The two variants of a sweep: the run's features, and log-mel of frames
# half as far apart, stored as float16.
VARIANTS = {'spec': {}, 'mel': {'features': 'signal,log_mel', 'n_mels': 16,
                                'fft_hop': 64, 'feature_dtype': 'float16'}}


def _frames(i):
  return 2048 + 512 * (i % 3)


def _recording(root, i):
  """The i-th recording, named as each recipe's corpus names it."""
  path = root / ('a', 'b')[i % 2] / f'{i}.wav'
  H.write_wav(str(path), H.noise(_frames(i), seed=i))
  return path


def _noise_names(count):
  return list(NOISE)[:2 if count <= FIRST else 3]


def _corpus(root, recipe, count, unit='window'):
  """The corpus of the first `count` recordings, with the manifest or the
  split lists the recipe reads (and, for labels, a folder to leave out and
  the silence recordings of the day); returns the recipe's options."""
  for i in range(count):
    if not (root / ('a', 'b')[i % 2] / f'{i}.wav').exists():
      _recording(root, i)
  rows = [(f'{("a", "b")[i % 2]}/{i}.wav', ('owl', 'wren')[i % 2],
           ('train', 'test')[i % 3 == 0], 1 + i % 3) for i in range(count)]
  if 'labels' in unit:
    H.write_wav(str(root / 'junk' / 'x.wav'), H.noise(2048, seed=99))
    for k, name in enumerate(_noise_names(count)):
      if not (root / '_noise_' / name).exists():
        H.write_wav(str(root / '_noise_' / name),
                    H.noise(NOISE[name], seed=50 + k, scale=0.1))
      rows.append((f'_noise_/{name}', 'owl', 'train', 1))
  if recipe == 'folders':
    return {'splits': 'train=0.5,test=0.5'}
  if recipe == 'split_lists':
    (root / 'test_list.txt').write_text(
        ''.join(f'{r[0]}\n' for r in rows if r[2] == 'test'))
    return {'split_lists': 'test=test_list.txt'}
  with open(root / 'meta.csv', 'w', newline='') as f:
    writer = csv.writer(f)
    if 'segment' in unit:
      writer.writerow(['path', 'label', 'split', 'fold', 'start', 'end'])
      writer.writerows(row + g for row in rows for g in SEGMENTS)
    else:
      writer.writerow(['path', 'label', 'split', 'fold'])
      writer.writerows(rows)
  if recipe == 'manifest':
    return {'manifest': str(root / 'meta.csv'),
            'manifest_label_column': 'label',
            'manifest_split_column': 'split'}
  return {'manifest': str(root / 'meta.csv'),
          'manifest_label_column': 'label',
          'manifest_split_column': 'fold',
          'fold_splits': 'train=1,2;test=3'}


def _label_map(recipe):
  """A class renamed and every other one under *=."""
  return ('a=first,*=rest' if recipe in ('folders', 'split_lists')
          else 'owl=first,*=rest')


def _unit_options(root, recipe, unit):
  options = {}
  if 'file' in unit:
    options['example_unit'] = 'file'
  elif _whole_segments(unit):
    options['example_unit'] = 'segment'
  else:
    options['win_len'] = str(WIN_LEN)
  if 'segment' in unit:
    options.update({'manifest_start_column': 'start',
                    'manifest_end_column': 'end'})
  if 'labels' in unit:
    options.update({
        'exclude': 'junk/*', 'label_map': _label_map(recipe),
        'silence_from': '_noise_/*',
        'silence_windows': str(SILENCE_WINDOWS[
            'file' if 'file' in unit else 'window'])})
  if 'variants' in unit:
    path = root.parent / 'variants.json'
    path.write_text(json.dumps(VARIANTS))
    options['variants'] = str(path)
  return options


def _whole_segments(unit):
  """Whether each segment is one example (not windows cut inside it)."""
  return 'segment' in unit and 'windows' not in unit


def _argv(root, out, recipe_options, sink, array_record, compression,
          *more):
  argv = ['--input_dir', str(root), '--output_dir', str(out),
          '--features', 'signal,spectrogram',
          '--n_fft', str(N_FFT), '--fft_hop', str(FFT_HOP),
          '--max_examples_per_shard', '4', '--sink', sink,
          '--compression', compression]
  for name, value in recipe_options.items():
    argv += [f'--{name}', value]
  if array_record:
    argv.append('--array_record')
  return argv + list(more)


def _run(argv):
  config, beam_args = config_lib.parse_known_args(argv)
  return run_lib.run_config(config, beam_args)


def _refusal(recipe, sink, array_record, unit='window'):
  """The options that cannot go together, as config refuses them."""
  if 'segment' in unit and recipe in ('folders', 'split_lists'):
    # Segments are rows of a manifest.
    return ('manifest_start_column', 'manifest')
  if recipe == 'manifest' and sink != 'shards':
    # Beam's sink names its files before the run; the split column's
    # values are known only when the rows are read.
    return ('sink', 'manifest_split_column')
  if array_record and sink != 'shards':
    return ('array_record', 'sink')
  return None


def _pairwise():
  """For each unit but window, the cells that run: greedily, the cell
  meeting most (unit, value of another axis) pairs not met yet, until
  every pair that some running cell has is met; of those, the one whose
  pairs of other axes the units before it met least, so that each unit
  meets them in other company."""
  chosen, met = [], collections.Counter()

  def company(cell):
    return list(itertools.combinations(enumerate(cell[:4]), 2))

  for unit in UNITS[1:]:
    cells = [(r, s, a, c, unit) for r, s, a, c in itertools.product(
        RECIPES, SINKS, (False, True), ('none', 'gzip'))
             if not _refusal(r, s, a, unit)]
    wanted = {p for cell in cells for p in enumerate(cell[:4])}
    while wanted:
      best = max(cells, key=lambda cell: (
          len(wanted & set(enumerate(cell[:4]))),
          -sum(met[p] for p in company(cell))))
      wanted -= set(enumerate(best[:4]))
      met.update(company(best))
      chosen.append(best)
      cells.remove(best)
  return chosen


FULL = [(*cell, 'window') for cell in itertools.product(
    RECIPES, SINKS, (False, True), ('none', 'gzip'))]
PAIRWISE = _pairwise()
REFUSED = [(*cell, unit) for unit in UNITS[1:]
           for cell in itertools.product(RECIPES, SINKS, (False, True),
                                         ('none', 'gzip'))
           if _refusal(*cell[:3], unit)]
CELLS = FULL + PAIRWISE + REFUSED


def test_the_pairwise_cells_meet_every_value_of_every_axis():
  for unit in UNITS[1:]:
    cells = [c for c in PAIRWISE if c[4] == unit]
    recipes = ({'manifest', 'fold_splits'} if 'segment' in unit
               else set(RECIPES))
    assert {c[0] for c in cells} == recipes, unit
    assert {c[1] for c in cells} == set(SINKS), unit
    assert {c[2] for c in cells} == {False, True}, unit
    assert {c[3] for c in cells} == {'none', 'gzip'}, unit
    assert not any(_refusal(*c[:3], c[4]) for c in cells)
  per_unit = collections.Counter(c[4] for c in PAIRWISE)
  assert all(per_unit[u] <= (3 if 'segment' in u else 4) for u in UNITS[1:])


@pytest.mark.parametrize('recipe,sink,array_record,compression,unit', CELLS)
def test_cell(tmp_path, recipe, sink, array_record, compression, unit):
  root = tmp_path / 'in'
  options = _corpus(root, recipe, FIRST, unit)
  options.update(_unit_options(root, recipe, unit))
  out = tmp_path / 'out'
  argv = _argv(root, out, options, sink, array_record, compression)
  refused = _refusal(recipe, sink, array_record, unit)
  if refused:
    for mode in ([], ['--append']):
      with pytest.raises(ConfigError) as e:
        config_lib.parse_known_args(argv + mode)
      for option in refused:
        assert f'--{option}' in str(e.value)
    assert not out.exists()
    return
  expect = _Expected(recipe, unit)
  _run(argv)
  config, _ = config_lib.parse_known_args(argv)
  datasets = _datasets(config)
  fresh = _check_datasets(datasets, expect, FIRST, array_record,
                          compression)
  for folder, variant_config in datasets.values():
    # Every option value survives metadata.json and equals itself.
    stored = json.loads((folder / 'metadata.json').read_text())['config']
    assert stored == json.loads(json.dumps(variant_config.to_json()))
    assert stored == variant_config.to_json()
  _check_sweep(config)
  _check_resumed(tmp_path, argv, out, sink)

  # --append with nothing new: nothing changes.
  before = {p: p.read_bytes() for p in out.rglob('*') if p.is_file()}
  for outcome in _outcomes(_run(argv + ['--append']), datasets):
    assert outcome.part_dir is None
    assert outcome.unchanged == expect.recordings(FIRST)
  assert {p: p.read_bytes() for p in out.rglob('*') if p.is_file()} == before

  # --append with a new day of recordings: a part, read with the rest.
  _corpus(root, recipe, FIRST + ADDED, unit)
  for outcome in _outcomes(_run(argv + ['--append']), datasets):
    assert outcome.part_dir is not None, outcome
    assert outcome.new == expect.recordings(FIRST + ADDED) - \
        expect.recordings(FIRST), outcome
  appended = _check_datasets(datasets, expect, FIRST + ADDED, array_record,
                             compression)
  for name, counts in fresh.items():
    for split, n in counts.items():
      assert appended[name][split] >= n
  _check_sweep(config)


def _check_resumed(tmp_path, argv, out, sink):
  """The same run stopped before its final step (every shard finished),
  then finished by --resume, writes the same bytes; --sink
  write_to_tfrecord refuses --resume."""
  stopped = tmp_path / 'stopped'
  again = [stopped if a == str(out) else a for a in argv]
  again = [str(a) for a in again]
  if sink != 'shards':
    with pytest.raises(ConfigError, match='--resume.*needs --sink shards'):
      config_lib.parse_known_args(again + ['--resume'])
    return

  def stop(*args, **kwargs):
    raise RuntimeError('stopped before the final step')
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(finalize, 'finalize_dataset', stop)
    with pytest.raises(Exception, match='stopped before the final step'):
      _run(again)
  assert not (stopped / 'metadata.json').exists()
  for beat in stopped.rglob(run_marker.HEARTBEAT_FILE):
    beat.unlink()  # the stopped run's process would be gone
  _run(again + ['--resume'])
  assert _bytes_of(stopped) == _bytes_of(out)


def _bytes_of(out):
  """Every file under a finished run's folder; metadata.json without its
  times and output folder, variants.json without the folders' names."""
  found = {}
  for path in sorted(out.rglob('*')):
    if not path.is_file() or path.name == run_marker.LOCK_FILE:
      continue
    data = path.read_bytes()
    if path.name == 'metadata.json':
      meta = metadata_lib.content(json.loads(data))
      meta['config'].pop('output_dir')
      data = json.dumps(meta, sort_keys=True).encode()
    elif path.name == 'variants.json':
      data = data.replace(str(out).encode(), b'OUT')
    found[path.relative_to(out).as_posix()] = data
  return found


def _check_sweep(config):
  """verify on a sweep's folder: a line per variant, then that they hold
  the same windows of the same recordings."""
  if config.variants:
    lines = verify.verify(config.output_dir).splitlines()
    assert len(lines) == len(VARIANTS) + 1, lines
    assert 'the same windows of the same recordings' in lines[-1]


def _datasets(config):
  """{name: (folder, config)} of the datasets a run writes: one, or a
  sweep's every variant."""
  if not config.variants:
    return {'': (pathlib.Path(config.output_dir), config)}
  return {name: (pathlib.Path(c.output_dir), c)
          for name, c in variants_lib.configs(config).items()}


def _outcomes(result, datasets):
  """The append.AppendOutcome of every dataset of the run."""
  if isinstance(result, dict):
    assert sorted(result) == sorted(datasets)
    return list(result.values())
  return [result]


class _Expected:
  """What a cell's datasets hold, recording by recording."""

  def __init__(self, recipe, unit):
    self.recipe, self.unit = recipe, unit
    self.file = 'file' in unit or _whole_segments(unit)  # any length
    self.segments = 'segment' in unit
    self.labels = 'labels' in unit

  def recordings(self, count):
    """Recordings in the dataset once the corpus holds `count`."""
    return count + (len(_noise_names(count)) if self.labels else 0)

  def length(self, rel):
    """Frames of a recording, from its path relative to input_dir."""
    folder, name = rel.split('/')
    if self.segments:
      return SEGMENT_FRAMES
    if folder == '_noise_':
      return NOISE[name]
    return _frames(int(name.split('.')[0]))

  def windows(self, rel):
    n = self.length(rel)
    per_segment = 1 if self.file else (n - WIN_LEN) // WIN_LEN + 1
    return per_segment * (len(SEGMENTS) if self.segments else 1)

  def silence(self, count):
    """Silence examples once the corpus holds `count` recordings: each
    part's own windows, capped by --silence_windows."""
    if not self.labels:
      return 0
    cap = SILENCE_WINDOWS['file' if self.file else 'window']
    first = sum(self.windows(f'_noise_/{n}') for n in _noise_names(FIRST))
    total = min(cap, first)
    if count > FIRST:
      total += min(cap, self.windows('_noise_/n2.wav'))
    return total

  def label(self, rel):
    """The class of a recording's examples."""
    folder = rel.split('/')[0]
    if not self.labels:
      return folder if self.recipe in ('folders', 'split_lists') else {
          'a': 'owl', 'b': 'wren'}[folder]
    if folder == '_noise_':
      return '_silence_'
    return 'first' if folder == 'a' else 'rest'

  def examples(self, count):
    rels = [f'{("a", "b")[i % 2]}/{i}.wav' for i in range(count)]
    return sum(self.windows(r) for r in rels) + self.silence(count)


def _relative(filepath):
  """A recording's path relative to input_dir, from an example's
  filepath."""
  if isinstance(filepath, bytes):
    filepath = filepath.decode()
  return '/'.join(str(filepath).split('/')[-2:])


def _check_datasets(datasets, expect, recordings, array_record,
                    compression):
  """_check_dataset of each of `datasets` ({name: (folder, config)}), then
  their records counted by Beam and TFXIO, in one pipeline; returns
  {name: {split: count}}."""
  found, metas = {}, {}
  for name, (folder, config) in datasets.items():
    found[name], metas[name] = _check_dataset(
        folder, config, expect, recordings, array_record, compression)
  assert _beam_counts({name: (str(folder), metas[name])
                       for name, (folder, _) in datasets.items()}) == found
  return found


def _check_dataset(out, config, expect, recordings, array_record,
                   compression):
  """verify, then every reader but Beam's: each split's example count,
  the same from all, each example's class and (--example_unit file)
  length as its recording's; returns ({split: count}, metadata)."""
  out = str(out)
  assert 'OK' in verify.verify(out)
  meta = numpy_reader.load_metadata(out)
  # Every writer records its shards' digests, which verify compared.
  assert all('records_crc32c' in shard for e in meta['splits'].values()
             for shard in e['shards'])
  assert meta['counts']['files_ok'] == expect.recordings(recordings)
  expected = {split: e['num_examples'] for split, e in meta['splits'].items()}
  assert sum(expected.values()) == meta['counts']['examples'] == \
      expect.examples(recordings)
  keys = ['filepath', 'class', 'signal']
  classes = collections.Counter()
  for split, n in expected.items():
    examples = list(numpy_reader.numpy_dataset(out, split))
    assert len(examples) == n
    for e in examples:
      rel = _relative(e['filepath'])
      assert not rel.startswith('junk/'), rel
      assert str(e['class']) == expect.label(rel), (rel, e['class'])
      classes[str(e['class'])] += 1
      assert set(config.features) <= set(e), sorted(e)
      for key in {'spectrogram', 'log_mel'} & set(e):
        assert e[key].dtype.name == config.feature_dtype, key
      if expect.file:
        assert int(e['num_samples']) == e['signal'].shape[0] == \
            expect.length(rel), rel
        frames = (expect.length(rel) - config.n_fft) // config.fft_hop + 1
        for key in {'spectrogram', 'log_mel'} & set(e):
          assert int(e['num_frames']) == e[key].shape[0] == frames, rel
    for b in numpy_reader.numpy_dataset(out, split, batch_size=3,
                                        features=keys):
      if expect.file:
        assert [int(k) for k in b['signal_length']] == [
            expect.length(_relative(f)) for f in b['filepath']]
    counted = 0
    for b in replay.replay_dataset(out, split, batch_size=3):
      counted += int(b['target'].shape[0])
      if expect.file:
        lengths = [expect.length(_relative(f)) for f in
                   b['filepath'].numpy()]
        assert b['signal_length'].numpy().tolist() == lengths
        assert b['num_samples'].numpy().tolist() == lengths
        assert b['signal'].shape[1] == max(lengths)
    assert counted == n
    from pipeline.readers.torch_dataset import WavbeamIterableDataset
    counted = 0
    for e in WavbeamIterableDataset(out, split):
      counted += 1
      if expect.file:
        assert int(e['num_samples']) == len(e['signal']) == expect.length(
            _relative(e['filepath']))
    assert counted == n
    if array_record:
      from pipeline.readers.array_record import ArrayRecordSource
      source = ArrayRecordSource(out, split)
      assert len(source) == n
      for i in range(n):
        e = source[i]
        if expect.file:
          assert int(e['num_samples']) == len(e['signal']) == \
              expect.length(_relative(e['filepath']))
  assert classes['_silence_'] == expect.silence(recordings)
  if expect.labels:
    assert sorted(classes) == ['_silence_', 'first', 'rest']
    assert set(meta['classes']) == set(classes)
    assert meta['counts']['files_excluded'] >= 1
  _check_tfds(out, meta, expected, compression)
  return expected, meta


def _check_tfds(out, meta, expected, compression):
  if compression != 'none':
    # TFDS cannot read compressed shards: its files are not written, and
    # the metadata says why.
    assert meta['interop']['tfds'].startswith('skipped')
    assert not os.path.exists(os.path.join(out, 'dataset_info.json'))
    return
  import tensorflow_datasets as tfds
  parts = meta.get('parts') or ['.']
  folders = [os.path.normpath(os.path.join(out, p)) for p in reversed(parts)]
  builder = (tfds.builder_from_directory(folders[0]) if len(folders) == 1
             else tfds.builder_from_directories(folders))
  for split, n in expected.items():
    if n:
      assert sum(1 for _ in builder.as_dataset(split=split)) == n


def _beam_counts(datasets):
  """{name: {split: its records counted by Beam's TFRecord reader and by
  TFXIO (TFX's reader)}} of `datasets` ({name: (folder, metadata)}), in
  one Beam pipeline."""
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2
  from tfx_bsl.public import tfxio
  results = os.path.join(next(iter(datasets.values()))[0], '..', 'counts')
  with beam.Pipeline(runner='FnApiRunner') as p:
    counted = []
    for name, (out, meta) in datasets.items():
      gzip = meta['compression'] == 'gzip'
      schema = text_format.Parse(
          open(os.path.join(out, 'schema.pbtxt')).read(), schema_pb2.Schema())
      compression = (beam.io.filesystem.CompressionTypes.GZIP if gzip
                     else beam.io.filesystem.CompressionTypes.UNCOMPRESSED)
      for split, entry in meta['splits'].items():
        files = [os.path.join(out, s['file']) for s in entry['shards']]
        if not files:
          continue
        step = f'{name}.{split}'
        records = (p | f'{step} files' >> beam.Create(files)
                   | f'{step} read' >> beam.io.ReadAllFromTFRecord(
                       compression_type=compression))
        counted.append(records | f'{step} beam' >> beam.Map(
            lambda _, key=(name, split, 'beam'): (key, 1)))
        source = tfxio.TFExampleBeamRecord(
            physical_format='tfrecords_gzip' if gzip else 'tfrecord',
            schema=schema)
        counted.append(records | f'{step} tfxio' >> source.BeamSource(
            batch_size=3) | f'{step} rows' >> beam.Map(
                lambda b, key=(name, split, 'tfxio'): (key, b.num_rows)))
    _ = (counted | beam.Flatten() | beam.CombinePerKey(sum)
         | beam.Map(json.dumps)
         | beam.io.WriteToText(results, shard_name_template=''))
  by_reader = collections.defaultdict(dict)
  if os.path.exists(results):
    for line in open(results).read().splitlines():
      (name, split, reader), n = json.loads(line)
      by_reader[name, split][reader] = n
    os.remove(results)
  found = {}
  for name, (_, meta) in datasets.items():
    found[name] = {}
    for split in meta['splits']:
      counts = by_reader[name, split]
      assert counts.get('beam', 0) == counts.get('tfxio', 0), (name, split)
      found[name][split] = counts.get('beam', 0)
  return found


@pytest.mark.parametrize('sweep', [False, True], ids=['dataset', 'sweep'])
@pytest.mark.parametrize('spelling', ['link', 'dot'])
def test_output_folder_spellings_with_append_and_planted_links(
    tmp_path, spelling, sweep):
  """The output folder given through a link the user made, or as `OUT/.`:
  a fresh run and an --append write the dataset (or sweep) there, verify
  accepts it, and a link planted at a name the run writes is refused,
  naming it, with nothing changed."""
  root = tmp_path / 'in'
  options = _corpus(root, 'folders', FIRST)
  options.update(_unit_options(root, 'folders', 'variants' if sweep
                               else 'window'))
  real = tmp_path / 'real'
  real.mkdir()
  if spelling == 'link':
    out = tmp_path / 'link'
    os.symlink(real, out)
  else:
    out = f'{real}/.'
  argv = _argv(root, out, options, 'shards', False, 'none')
  _run(argv)
  _corpus(root, 'folders', FIRST + ADDED)
  for outcome in _outcomes(_run(argv + ['--append']), {
      name: None for name in (VARIANTS if sweep else [''])}):
    assert outcome.part_dir is not None
  assert 'OK' in verify.verify(str(real))
  config, _ = config_lib.parse_known_args(argv)
  for folder, _ in _datasets(config).values():
    meta = numpy_reader.load_metadata(str(folder))
    assert meta['counts']['files_ok'] == FIRST + ADDED
  victim = tmp_path / 'victim'
  victim.write_text('keep\n')
  planted = real / ('spec' if sweep else '.') / 'parts.json.tmp'
  os.symlink(victim, planted)
  before = {p: p.read_bytes() for p in real.rglob('*') if p.is_file()}
  _corpus(root, 'folders', FIRST + ADDED + 1)
  with pytest.raises(ConfigError, match='is a symbolic link to '):
    _run(argv + ['--append'])
  assert victim.read_text() == 'keep\n'
  assert {p: p.read_bytes() for p in real.rglob('*') if p.is_file()} == before
