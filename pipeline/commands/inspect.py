"""python -m pipeline.inspect_dataset: look at what a run wrote.

    python -m pipeline.inspect_dataset OUT                     summary
    python -m pipeline.inspect_dataset OUT --show 3 [--split test]
    python -m pipeline.inspect_dataset OUT --plot figure.png [--n 4] [--split S]
    python -m pipeline.inspect_dataset SHARD.tfrecord          any TFRecord file

Reads through Beam's FileSystems with the numpy decoder (no TensorFlow), so
it starts fast and works on gs:// too. Exit 0, 1 when the dataset or file
cannot be read, 2 for usage errors.
"""

import argparse
import collections
import os
import sys
import zlib
from typing import Dict, Iterator, List, Tuple

import numpy as np
from apache_beam.io.filesystems import FileSystems

from pipeline.commands import startup
from pipeline.commands.console import end_on_closed_reader, plural
from pipeline import variants as variants_lib
from pipeline.contract import metadata as metadata_lib
from pipeline.contract import naming
from pipeline.contract import schema as schema_lib
from pipeline.contract import rejects as rejects_lib
from pipeline.contract import dataset as dataset_lib
from pipeline.output_folder import BEAM_FS, part_dirs, read_whole_metadata
from pipeline.output_folder import resolve as resolve_dataset_dir
from pipeline.contract.errors import ConfigError, DatasetError, WavbeamError
from transforms.inputs import audio
from pipeline.contract import example_codec
from transforms.features import functions as F
from transforms.features import registry
from pipeline.contract import tfrecord
from transforms.runtime import filesystem


class InspectError(WavbeamError):
  """What cannot be read, and where."""


class NoFigures(WavbeamError):
  """The figures need matplotlib (the [inspect] extra)."""


def load(output_dir: str) -> Dict:
  """metadata.json, checked, and every shard it lists checked to exist with
  its size (before any is opened: a FIFO in a shard's place would block)."""
  try:
    metadata = read_whole_metadata(output_dir)
  except DatasetError as e:
    raise InspectError(str(e)) from e
  if metadata is None:
    raise InspectError(
        f'{naming.join(output_dir, naming.METADATA_FILE)} not found: not a '
        'wavbeam dataset, or its run did not finish (for a single TFRecord '
        'file, pass the file)')
  for split in metadata['splits']:
    try:
      dataset_lib.shard_files(BEAM_FS, output_dir, metadata, split,
                              dataset_lib.COMMAND_WORDS)
    except DatasetError as e:
      raise InspectError(str(e)) from e
  return metadata


def rejects(output_dir: str) -> List[Dict]:
  """rejects.jsonl's records, of every part."""
  found = []
  for folder in part_dirs(output_dir):
    path = naming.join(folder, rejects_lib.FILE_NAME)
    if FileSystems.exists(path):
      with FileSystems.open(path) as f:
        found += rejects_lib.parse(f.read().decode('utf-8'), path)
  return found


def elements(output_dir: str, metadata: Dict, split: str,
             n: int) -> Iterator[Dict]:
  """The first n examples of a split, in shard order, as numpy."""
  try:
    entry = dataset_lib.split_entry(output_dir, metadata, split,
                                    dataset_lib.COMMAND_WORDS)
  except DatasetError as e:
    raise InspectError(str(e)) from e
  schema = metadata_lib.schema_of(metadata)
  compression = filesystem.beam_compression(metadata['compression'])
  left = n
  for shard in entry['shards']:
    path = naming.join(output_dir, shard['file'])
    try:
      with FileSystems.open(path, compression_type=compression) as f:
        for _, data in tfrecord.read_records(f, path):
          if left <= 0:
            return
          yield example_codec.decode_example(data, schema)
          left -= 1
    except (OSError, EOFError, zlib.error) as e:  # gzip's own checks
      raise InspectError(f'shard {path}: {e} (python -m pipeline.verify '
                         'checks every shard)') from e


def _number(x) -> str:
  return f'{x:.6g}' if isinstance(x, float) else str(x)


def summary_text(output_dir: str, metadata: Dict) -> str:
  m, c = metadata, metadata['counts']
  excluded = (f'{c["files_excluded"]} excluded (--exclude), '
              if c.get('files_excluded') else '')
  if 'segments_rejected' in c:
    excluded += f'{plural(c["segments_rejected"], "segment")} rejected, '
  lines = [
      f'{output_dir}: wavbeam dataset {m["name"]!r} version {m["version"]} '
      f'(format {m["format"]} v{m["format_version"]}), written {m["created"]}',
      f'  {plural(c["examples"], "example")} from {c["files_ok"]} of '
      f'{plural(c["files_seen"], "file")}; '
      f'{plural(c["files_rejected"], "file")} rejected, '
      f'{excluded}{plural(c["rejections"], "rejection record")}; sample rate '
      f'{m["sample_rate"]} Hz; compression {m["compression"]}',
      *([f'  in {len(m["parts"])} parts (--append): '
         f'{", ".join(m["parts"])}'] if m.get('parts') else []),
      '', 'splits:']
  for name, s in sorted(m['splits'].items()):
    lines.append(f'  {name}: {plural(s["num_examples"], "example")} in '
                 f'{plural(len(s["shards"]), "shard")} '
                 f'({s["num_bytes"] / 1e6:.1f} MB), '
                 f'{s.get("num_files", "?")} files')
    for label, count in sorted(s['examples_per_class'].items()):
      lines.append(f'    {label or "(no label)"}: {count}')
  if m.get('split_overlap') is not None:
    lines += ['', 'what the splits share (--split_unit segment):']
    for pair in m['split_overlap']:
      a, b = pair['splits']
      lines.append(f'  {a} and {b} share '
                   f'{plural(pair["recordings"], "recording")}, '
                   f'{pair["overlap_seconds"]:.3f} s of audio')
    if not m['split_overlap']:
      lines.append('  nothing: no recording is in two splits')
  lines += ['', f'classes ({m["num_classes"]}): {", ".join(m["classes"])}',
            f'input_key: {m["input_key"]}, label_key: {m["label_key"]}',
            '', 'schema:']
  for key, spec in sorted(metadata_lib.schema_of(m).features):
    shape = 'scalar' if not spec.shape else f'shape {list(spec.shape)}'
    if spec.variable:  # -1: of its own length in every example
      shape += f', first dimension per example in {spec.length_key}'
    lines.append(f'  {key}: {spec.dtype} {shape} ({spec.encoding})')
  lines += ['', 'statistics (per split, over all values):']
  for name, s in sorted(m['splits'].items()):
    for key, st in sorted(s.get('statistics', {}).items()):
      lines.append(f'  {name}/{key}: mean {_number(st["mean"])} std '
                   f'{_number(st["std"])} min {_number(st["min"])} max '
                   f'{_number(st["max"])} over {st["count"]} values')
  found = rejects(output_dir)
  notes = [r for r in found if 'note' in r]
  excluded = [r for r in found if rejects_lib.excluded(r)]
  found = [r for r in found if 'note' not in r and not rejects_lib.excluded(r)]
  lines += ['', f'rejects ({len(found)}, in {naming.REJECTS_FILE}):']
  _by_reason(lines, found, 'reason')
  if excluded:
    lines += ['', f'excluded ({len(excluded)}, files --exclude left out):']
    _by_reason(lines, excluded, 'reason', by_pattern=True)
  if notes:
    lines += ['', f'notes ({len(notes)}, files used with a remark):']
    _by_reason(lines, notes, 'note')
  lines += ['', 'options used:']
  for key, value in sorted(m['config'].items()):
    lines.append(f'  --{key}={value}')
  lines.append(f'interop: {m.get("interop", "not recorded")}')
  return '\n'.join(lines)


def _by_reason(lines: List[str], records: List[Dict], field: str,
               by_pattern: bool = False) -> None:
  """Counts of records by the text before the first colon (or, for
  exclusions, by the pattern), one example each."""
  def head(r):
    text = str(r.get(field, ''))
    return text.split(': ', 1)[-1] if by_pattern else text.split(':')[0]
  for reason, count in collections.Counter(map(head, records)).most_common():
    example = next(r for r in records if head(r) == reason)
    lines.append(f'  {count} x {reason} (e.g. {example.get("path")}: '
                 f'{example.get(field)})')


def _abbreviated(value) -> str:
  if isinstance(value, np.ndarray) and value.ndim:
    text = np.array2string(value, threshold=6, edgeitems=3, precision=4,
                           max_line_width=100)
    return f'{value.dtype} shape {list(value.shape)} {" ".join(text.split())}'
  if isinstance(value, str):
    return f'string {value!r}'
  return f'{np.asarray(value).dtype} {value}'


def show_text(output_dir: str, metadata: Dict, split: str, n: int) -> str:
  blocks = []
  for i, element in enumerate(elements(output_dir, metadata, split, n)):
    lines = [f'{split}[{i}]:']
    for key in sorted(element):
      lines.append(f'  {key}: {_abbreviated(element[key])}')
    blocks.append('\n'.join(lines))
  return '\n'.join(blocks)


def raw_text(path: str, n: int = 3) -> Tuple[str, int]:
  """Any TFRecord file of tf.train.Examples: (its record count and the
  features of the first n, how many of those n are no Example)."""
  compression = filesystem.beam_compression(
      'gzip' if _gzip_compressed(path) else 'none')
  lines, count, bad = [], 0, 0
  with FileSystems.open(path, compression_type=compression) as f:
    for _, data in tfrecord.read_records(f, path):
      if count < n:
        lines.append(f'record {count}: {len(data)} bytes')
        try:
          described = example_codec.describe_example(data)
        except metadata_lib.schema_lib.SchemaError as e:
          lines.append(f'  {e}')
          described, bad = {}, bad + 1
        for key, (kind, values, size) in sorted(described.items()):
          lines.append(f'  {key}: {kind}, {values} value(s), {size} bytes')
      count += 1
  return '\n'.join([f'{path}: {count} records (CRCs checked)'] + lines), bad


def _gzip_compressed(path: str) -> bool:
  """Whether a record file is gzip (--compression gzip shards keep the
  .tfrecord name): it starts with gzip's magic and method, and not with
  a record header whose length CRC holds (a length can begin with those
  bytes too)."""
  with FileSystems.open(path, compression_type='uncompressed') as f:
    head = f.read(12)
  if head[:3] != b'\x1f\x8b\x08':
    return path.endswith('.gz')
  return len(head) < 12 or tfrecord.masked_crc(head[:8]) != int.from_bytes(
      head[8:12], 'little')


def sweep_text(output_dir: str, sweep: Dict) -> str:
  """One row per variant of a sweep (--variants): the options that differ,
  the feature shapes, bytes per example and the dataset's size."""
  differing = sweep['differing_options']
  rows = [['variant', *differing, 'shapes', 'bytes/example', 'MB',
           'features ms/example']]
  for name, entry in sorted(sweep['variants'].items()):
    meta = load(naming.join(output_dir, entry['folder']))
    schema = meta['schema']
    shapes = ' '.join(
        f'{key}{list(schema[key]["shape"])}' for key in
        entry['options']['features'] if key in schema)
    size = sum(e['num_bytes'] for e in meta['splits'].values())
    examples = meta['counts']['examples']
    spent = (meta.get('shards_written') or {}).get('feature_seconds')
    rows.append([name, *(_shown(entry['differs'].get(k)) for k in differing),
                 shapes, f'{size / max(examples, 1):,.0f}',
                 f'{size / 1e6:.1f}',
                 '-' if spent is None or not examples
                 else f'{1000 * spent / examples:.3f}'])
  widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
  lines = [f'{output_dir}: a sweep of {plural(len(rows) - 1, "variant")} '
           f'({variants_lib.FILE_NAME}); features ms/example: the time '
           'spent computing the features, per example (one core)']
  lines += ['  ' + '  '.join(cell.ljust(w) for cell, w in zip(row, widths))
            .rstrip() for row in rows]
  return '\n'.join(lines)


def _example_key(element) -> tuple:
  """Which window of which recording an element is."""
  return str(element.get('filepath')), int(element.get('win_start_idx', 0))


def plot_sweep(output_dir: str, sweep: Dict, split: str,
               out_path: str) -> str:
  """The same example under every variant, a row each: its waveform where
  stored and each of its features as an image. The example is the
  split's first of the variant holding fewest: variants hold the same
  windows in the same order, but for those whose STFT leaves out
  recordings the others keep (variants.planning_groups)."""
  try:
    import matplotlib
  except ModuleNotFoundError as e:
    raise NoFigures("matplotlib is not installed: pip install "
                    "'.[inspect]' (in the wavbeam checkout) draws the "
                    'figures') from e
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt

  shown, held = {}, {}
  for name, entry in sorted(sweep['variants'].items()):
    folder = naming.join(output_dir, entry['folder'])
    metadata = load(folder)
    first = list(elements(folder, metadata, split, 1))
    if not first:
      raise InspectError(f'split {split!r} of variant {name!r} has no '
                         'examples to plot')
    shown[name] = (entry, _plottable(first[0]))
    held[name] = (folder, metadata)
  fewest = min(held, key=lambda name: (
      held[name][1]['splits'][split]['num_examples'], name))
  example = _example_key(shown[fewest][1])
  for name, (entry, element) in shown.items():
    if _example_key(element) != example:
      folder, metadata = held[name]
      found = next((_plottable(e) for e in elements(
          folder, metadata, split, metadata['splits'][split]['num_examples'])
                    if _example_key(e) == example), None)
      if found is None:
        raise InspectError(f'variant {name!r} of {output_dir} does not hold '
                           f'the first {split} example of variant '
                           f'{fewest!r}: {example}')
      shown[name] = (entry, found)
  arrays = {name: [k for k in entry['options']['features']
                   if k in element and np.asarray(element[k]).ndim >= 1]
            for name, (entry, element) in shown.items()}
  columns = max(len(v) for v in arrays.values())
  fig, axes = plt.subplots(len(shown), columns,
                           figsize=(5 * columns, 3 * len(shown)),
                           squeeze=False)
  for row, (name, (entry, element)) in zip(axes, shown.items()):
    differs = ', '.join(f'{k}={_shown(v)}' for k, v in
                        sorted(entry['differs'].items()))
    for column, (ax, key) in enumerate(zip(row, arrays[name])):
      value = np.asarray(element[key])
      if value.ndim == 1:
        ax.plot(value, linewidth=0.5)
      else:
        if key == 'spectrogram' and \
            entry['options'].get('spectrogram_scale') != 'log':
          value = F.log_compress(value)
        ax.imshow(value.T, origin='lower', aspect='auto', cmap='magma')
      title = f'{key} {list(np.asarray(element[key]).shape)}'
      if column == 0:
        title = f'{name} ({differs})\n{title}'
      ax.set_title(title, fontsize=9)
    for ax in row[len(arrays[name]):]:
      ax.axis('off')
  path, start = example
  fig.suptitle(f'{os.path.basename(path)} @ sample {start}', fontsize=10)
  fig.tight_layout()
  fig.savefig(out_path, dpi=100)
  plt.close(fig)
  return out_path


def _plottable(element: Dict) -> Dict:
  """An example with its float16 and bfloat16 arrays (--feature_dtype) as
  float32, which matplotlib and the log and mel functions take."""
  return {k: (v.astype(np.float32) if isinstance(v, np.ndarray) and
              v.dtype.name in ('float16', 'bfloat16') else v)
          for k, v in element.items()}


def _shown(value) -> str:
  if isinstance(value, list):
    return ','.join(str(v) for v in value)
  return 'default' if value is None else str(value)


def plot(output_dir: str, metadata: Dict, split: str, n: int,
         out_path: str) -> str:
  """Waveform, spectrogram and log-mel of n examples, and class counts;
  raises NoFigures without matplotlib."""
  try:
    import matplotlib
  except ModuleNotFoundError as e:
    raise NoFigures("matplotlib is not installed: pip install "
                    "'.[inspect]' (in the wavbeam checkout) draws the "
                    'figures') from e
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt

  config, rate = metadata['config'], metadata['sample_rate']
  shown = [_plottable(e) for e in elements(output_dir, metadata, split, n)]
  if not shown:
    raise InspectError(f'split {split!r} has no examples to plot')
  cepstra = _panels(config, shown[0])
  columns = 3 + len(cepstra)
  fig, axes = plt.subplots(len(shown) + 1, columns,
                           figsize=(5 * columns, 3 * (len(shown) + 1)),
                           squeeze=False)
  for row, element in zip(axes, shown):
    _plot_example(row[:3], element, config, rate)
    for ax, name in zip(row[3:], cepstra):
      _plot_coefficients(ax, name, element[name], config, rate,
                         example_seconds(element, config, rate))
  counts = metadata['splits'][split]['examples_per_class']
  bars = axes[-1][0]
  names = sorted(counts)
  bars.bar(range(len(names)), [counts[k] for k in names], color='tab:blue')
  bars.set_xticks(range(len(names)), [k or '(none)' for k in names],
                  rotation=30, ha='right')
  bars.set_ylabel('examples')
  bars.set_title(f'examples per class ({split})')
  for ax in axes[-1][1:]:
    ax.axis('off')
  fig.tight_layout()
  fig.savefig(out_path, dpi=100)
  plt.close(fig)
  return out_path


def _panels(config, element) -> List[str]:
  """The stored features drawn as images beside the spectrograms: those
  whose plug-in names a panel (registry.Feature.plot_title), in the
  registry's order; a --feature_module's once it can be imported here."""
  try:
    registry.load_modules(config.get('feature_module', ()))
  except ConfigError:
    pass  # not importable here: its features are left out of the figure
  return [name for name in registry.names()
          if registry.get(name).plot_title and name in element and
          np.asarray(element[name]).ndim == 2]


def example_seconds(element, config, rate) -> float:
  """What an example spans: its window, or under --example_unit file
  its recording's num_samples."""
  if schema_lib.NUM_SAMPLES_KEY in element:
    return int(element[schema_lib.NUM_SAMPLES_KEY]) / rate
  return config['win_len'] / rate


def _plot_coefficients(ax, name, values, config, rate, seconds):
  del config, rate
  feature = registry.get(name)
  scale = {}
  if feature.plot_symmetric:
    limit = float(np.abs(values).max()) or 1.0
    scale = {'vmin': -limit, 'vmax': limit}
  ax.imshow(values.T, origin='lower', aspect='auto',
            cmap=feature.plot_colormap,
            extent=[0, seconds, 0.5, values.shape[1] + 0.5], **scale)
  ax.set_title(feature.plot_title, fontsize=9)
  ax.set_xlabel('time (s)')
  ax.set_ylabel('coefficient')


def _plot_example(row, element, config, rate):
  signal = element.get('signal')
  seconds = example_seconds(element, config, rate)
  samples = None if signal is None else audio.from_signal_dtype(signal)
  title = (f'{element.get("class", "") or "(no label)"} | '
           f'{os.path.basename(element.get("filepath", ""))} @ '
           f'{element.get("win_start_idx", 0) / rate:.2f} s')
  wave, spec_ax, mel_ax = row
  if samples is not None:
    wave.plot(np.arange(len(samples)) / rate, samples, linewidth=0.5)
    wave.set_xlim(0, seconds)
  wave.set_title(title, fontsize=9)
  wave.set_xlabel('time (s)')
  wave.set_ylabel('amplitude (full scale)')
  # Features the run did not store are computed from the signal, so the
  # figure always shows both pictures.
  magnitude = (_magnitude(samples, config) if samples is not None and (
      'spectrogram' not in element or 'log_mel' not in element) else None)
  if 'spectrogram' in element:
    spec = element['spectrogram']
    if config['spectrogram_scale'] != 'log':
      spec = F.log_compress(spec)
  else:
    spec = None if magnitude is None else F.log_compress(magnitude)
  if spec is not None:
    spec_ax.imshow(spec.T, origin='lower', aspect='auto', cmap='magma',
                   extent=[0, seconds, 0, rate / 2])
  spec_ax.set_title('log spectrogram', fontsize=9)
  spec_ax.set_xlabel('time (s)')
  spec_ax.set_ylabel('frequency (Hz)')
  if 'log_mel' in element:
    mel = element['log_mel']
  elif magnitude is not None:
    mel = F.log_compress(F.mel_spectrogram(magnitude, F.mel_filterbank(
        config['n_mels'], config['n_fft'], rate, config.get('fmin', 0.0),
        config.get('fmax'))))
  else:
    mel = None
  if mel is not None:
    bands = mel.shape[1]
    mel_ax.imshow(mel.T, origin='lower', aspect='auto', cmap='viridis',
                  extent=[0, seconds, 0, bands])
    ticks = np.linspace(0, bands - 1, 5).round().astype(int)
    bottom = F.hz_to_mel(config.get('fmin', 0.0))
    top = F.hz_to_mel(config.get('fmax') or rate / 2)
    centres = 700.0 * np.expm1(
        (bottom + (ticks + 1) * (top - bottom) / (bands + 1)) / 1127.0)
    mel_ax.set_yticks(ticks + 0.5, [f'{hz:.0f}' for hz in centres])
  mel_ax.set_title('log-mel', fontsize=9)
  mel_ax.set_xlabel('time (s)')
  mel_ax.set_ylabel('band centre (Hz, mel scale)')


def _magnitude(samples, config):
  window = F.window_function(config['fft_window'], config['n_fft'])
  return F.stft_magnitude(samples.astype(np.float32)[None], config['n_fft'],
                          config['fft_hop'], window)[0]


def main(argv=None, prog: str = 'python -m pipeline.inspect_dataset') -> int:
  # The docstring's first line, less the command it names (`prog` does).
  parser = argparse.ArgumentParser(
      prog=prog, description=__doc__.split('\n\n')[0].split(': ', 1)[1])
  parser.add_argument('path', help='a dataset folder (or URI), or one '
                      'TFRecord file')
  parser.add_argument('--show', type=int, metavar='N',
                      help='print the first N examples of --split')
  parser.add_argument('--split', default='train')
  parser.add_argument('--plot', metavar='FILE.png',
                      help='write a figure of --n examples and the class '
                      'counts of --split')
  parser.add_argument('--n', type=int, default=4,
                      help='examples in the figure (default 4)')
  args = parser.parse_args(argv)
  for flag in ('show', 'n'):
    value = getattr(args, flag)
    if value is not None and value < 1:
      parser.error(f'--{flag}={value}: must be at least 1')
  try:
    sweep = variants_lib.read_index(args.path)
    if sweep is not None and not (args.show or args.plot):
      print(sweep_text(args.path, sweep))
      return 0
    if sweep is not None and args.plot and not args.show:
      plot_sweep(args.path, sweep, args.split, args.plot)
      print(f'wrote {args.plot}: one {args.split} example under each '
            f'of {plural(len(sweep["variants"]), "variant")}')
      return 0
    if sweep is not None:
      first = naming.join(args.path, sorted(sweep['variants'])[0])
      raise InspectError(f'{args.path} holds a sweep of '
                         f'{len(sweep["variants"])} variants: give one '
                         f'variant\'s folder, e.g. {first}')
    if not FileSystems.exists(naming.join(args.path, naming.METADATA_FILE)) \
        and '.tfrecord' in os.path.basename(args.path):
      text, bad = raw_text(args.path, args.show or 3)
      print(text)
      if bad:
        print(f'error: {args.path}: {bad} of the records shown are not '
              'tf.train.Examples', file=sys.stderr)
        return 1
      return 0
    args.path = resolve_dataset_dir(args.path)
    metadata = load(args.path)
    if args.show:
      print(show_text(args.path, metadata, args.split, args.show))
    if args.plot:
      plot(args.path, metadata, args.split, args.n, args.plot)
      print(f'wrote {args.plot}: waveform, spectrogram and log-mel of '
            f'{args.n} {args.split} examples, and examples per class')
    if not args.show and not args.plot:
      print(summary_text(args.path, metadata))
  except (InspectError, NoFigures, tfrecord.CorruptRecord, OSError,
          EOFError, zlib.error, metadata_lib.schema_lib.SchemaError,
          DatasetError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 1
  return 0


if __name__ == '__main__':
  startup.prepare_process()
  end_on_closed_reader()  # `... | head` ends it quietly
  sys.exit(main())
