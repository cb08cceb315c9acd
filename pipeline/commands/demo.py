"""`make demo`: the whole job on a small built-in corpus, then a replay.

Writes scratch/demo/corpus (13 files, one of them deliberately broken), runs
the pipeline on the local runner into scratch/demo/dataset, prints what it
wrote and one replayed element, and draws scratch/demo/examples.png.
"""

import json
import os
import sys
import tempfile

import numpy as np

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from pipeline.commands import startup
from pipeline.commands import console
from pipeline.commands import example_corpus
from pipeline.commands import inspect as inspect_lib
from pipeline.contract import naming
from pipeline.commands import run as run_lib

ROOT = os.path.join('scratch', 'demo')


def import_tensorflow_quietly():
  """Imports TensorFlow with its start-up chatter held back: absl's lines
  written before its log is set up, and on a machine without a GPU a
  `failed call to cuInit` error line, which nothing here needs and users
  read as a failure. Shown after all if the import fails."""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as held:
    os.dup2(held.fileno(), 2)
    try:
      import tensorflow as tf  # pylint: disable=import-outside-toplevel
      tf.config.list_physical_devices('GPU')  # where cuInit is called
    except BaseException:
      os.dup2(saved, 2)
      held.seek(0)
      sys.stderr.write(held.read().decode('utf-8', 'replace'))
      raise
    finally:
      os.dup2(saved, 2)
      os.close(saved)


def main(argv=None, prog: str = 'python -m pipeline.demo') -> int:
  """Takes no flags (argv: only --help); `prog`: its name in the usage."""
  if argv:
    print(f'usage: {prog}: no flags; writes into {ROOT}',
          file=sys.stderr if argv != ['--help'] else sys.stdout)
    return 0 if argv == ['--help'] else 2
  console.quiet_logs()
  corpus = os.path.join(ROOT, 'corpus')
  out = os.path.join(ROOT, 'dataset')
  if not os.path.isdir(corpus):
    example_corpus.write_corpus(corpus, 60, min_seconds=3, max_seconds=8)
    # Field corpora always hold a broken file: it is rejected, not fatal.
    with open(os.path.join(corpus, 'tone', 'tone_broken.wav'), 'wb') as f:
      f.write(b'RIFF\x00\x00\x00\x00WAVE not really audio')
  print(f'== corpus: {corpus}')
  run_lib.run(['--input_dir', corpus, '--output_dir', out, '--overwrite',
               '--features', 'signal,spectrogram,log_mel'])

  import_tensorflow_quietly()
  # TensorFlow only from here on.
  from pipeline.readers import tf_dataset as replay
  metadata = replay.load_metadata(out)
  print(f'\n== wrote {out}')
  for name in sorted(os.listdir(out)):
    print(f'  {os.path.getsize(os.path.join(out, name)):>10,d}  {name}')
  print('counts:', json.dumps(metadata['counts']))
  print('classes:', metadata['classes'])
  with open(os.path.join(out, naming.REJECTS_FILE)) as f:
    for line in f:
      print('rejected:', line.strip())
  print('\n== one replayed element')
  element = next(iter(replay.replay_dataset(out, 'train')))
  for key, value in element.items():
    v = np.asarray(value.numpy())
    shown = v if v.ndim == 0 else f'{v.ravel()[:4]} ...'
    print(f'  {key:14s} {value.dtype.name:8s} {str(list(v.shape)):14s} '
          f'{shown}')
  figure = os.path.join(ROOT, 'examples.png')
  try:
    inspect_lib.plot(out, inspect_lib.load(out), 'train', 4, figure)
    print(f'\n== a picture of 4 examples (waveform, spectrogram, log-mel) '
          f'and the class counts: {os.path.abspath(figure)}')
  except inspect_lib.NoFigures as e:
    print(f'\n== no picture: {e}')
  print(f'   more: python -m pipeline.inspect_dataset {out} [--show 3] [--plot '
        'FILE.png]')
  return 0


if __name__ == '__main__':
  startup.prepare_process()
  console.end_on_closed_reader()  # `... | head` ends it quietly
  sys.exit(main(sys.argv[1:]))
