"""wavbeam: audio corpora to sharded TFRecord datasets with Apache Beam,
and the readers that turn them back into training input.

    import pipeline
    pipeline.run(pipeline.PipelineConfig(input_dir='corpus/',
                                         output_dir='out/'))
    for batch in pipeline.numpy_dataset('out/', 'train', batch_size=32):
      ...

Importing the package changes nothing in the process (standard streams,
logging, signals) and imports nothing heavy: each name below is loaded
when first used, Beam only for `run`, TensorFlow only for
`replay_dataset`, PyTorch only for `WavbeamIterableDataset`.

The package's folders: `contract/` (the dataset format), `readers/`,
`featurizer/`, `commands/`, and the writer's modules at the top (graph,
append, output_folder, variants, progress, config).
"""

import importlib

# Public name: (module, attribute), or (module, None) for a module that is
# called as its function (pipeline.run(config), pipeline.featurizer(out)),
# so that the name means the same whether or not the module of that name
# was imported first.
_PUBLIC = {
    'run': ('pipeline.run', None),
    'PipelineConfig': ('pipeline.config', 'PipelineConfig'),
    'replay_dataset': ('pipeline.readers.tf_dataset', 'replay_dataset'),
    'numpy_dataset': ('pipeline.readers.numpy_dataset', 'numpy_dataset'),
    'WavbeamIterableDataset': ('pipeline.readers.torch_dataset',
                               'WavbeamIterableDataset'),
    'ArrayRecordSource': ('pipeline.readers.array_record',
                          'ArrayRecordSource'),
    'featurizer': ('pipeline.featurizer', None),
    'load_metadata': ('pipeline.readers.metadata', 'load_metadata'),
    'DatasetError': ('pipeline.contract.errors', 'DatasetError'),
}

__all__ = sorted(_PUBLIC)


def __getattr__(name):
  if name not in _PUBLIC:
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
  module, attribute = _PUBLIC[name]
  loaded = importlib.import_module(module)
  return loaded if attribute is None else getattr(loaded, attribute)


def __dir__():
  return sorted(set(globals()) | set(_PUBLIC))
