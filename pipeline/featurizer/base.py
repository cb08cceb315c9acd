"""What both featurizers share: the dataset's options as metadata.json
states them, and the error for a request neither can honour."""

import json
from typing import Mapping, Optional, Sequence, Tuple

import numpy as np

from pipeline.config import ConfigError, PipelineConfig
from pipeline.contract import dataset as dataset_lib
from pipeline.contract import metadata as metadata_lib
from pipeline.contract import naming
from pipeline.contract import schema as schema_lib
from pipeline.contract.errors import DatasetError, WavbeamError
from transforms.features import registry


class FeaturizerError(WavbeamError, ValueError):
  """A recording (or a request) the featurizer cannot featurize as the
  dataset was; the message names the problem."""


class DatasetOptions:
  """What a dataset's metadata.json says about its features: the run's
  config, its sample rate, and the features stored, built in
  (config.features) or computed by a function of the caller's
  (extra_features, which metadata.json cannot keep)."""

  def __init__(self, dataset_dir: str, variant: Optional[str] = None):
    folder = dataset_lib.variant_folder(dataset_dir, variant)
    if variant is None:
      _refuse_a_sweep(dataset_dir)
    self.dir, metadata = dataset_lib.open_dataset(folder)
    where = naming.join(self.dir, naming.METADATA_FILE)
    try:
      self.config = PipelineConfig.from_json(metadata['config'])
    except (ConfigError, TypeError) as e:
      raise DatasetError(f'{where}: the options it was written with cannot '
                         f'be used by this wavbeam ({e})') from e
    self.sample_rate = metadata['sample_rate']
    if not self.sample_rate:
      raise DatasetError(f'{where}: the dataset holds no examples, so it has '
                         'no sample rate to featurize at')
    self.specs = metadata_lib.schema_of(metadata).as_dict()
    own = (set(schema_lib.BASE_KEYS) |
           set(self.config.manifest_extra_columns) |
           {s.length_key for s in self.specs.values() if s.variable})
    self.extras = tuple(k for k in sorted(self.specs)
                        if k not in own and k not in self.config.features)
    # What a feature was computed with (a model's files), as now.
    for name, recorded in metadata.get('features', {}).items():
      try:
        registry.get(name).check_provenance(self.config, recorded)
      except ConfigError as e:
        raise FeaturizerError(f'{self.dir}: {e}') from e
      except KeyError:
        pass  # a feature of a --feature_module not importable here

  def wanted(self, features: Optional[Sequence[str]]) -> Tuple[str, ...]:
    """The features asked for (None: every one stored), each checked."""
    if features is None:
      return tuple(self.config.features) + self.extras
    if isinstance(features, str):
      features = (features,)
    unknown = [f for f in features
               if f not in self.config.features and f not in self.extras]
    if unknown:
      raise FeaturizerError(
          f'unknown feature {unknown}: the dataset at {self.dir} stores '
          f'{list(self.config.features) + list(self.extras)}')
    if not features:
      raise FeaturizerError('features=[]: name at least one feature')
    return tuple(dict.fromkeys(features))

  def check_specs(self, out: Mapping[str, np.ndarray]) -> None:
    """FeaturizerError unless every array is, row by row, what the
    dataset stores: a function given for an extra feature may not be the
    one the dataset was written with."""
    for name, value in out.items():
      spec = self.specs.get(name)
      if spec is None:  # a dataset without examples states no schema
        continue
      dtype, shape = str(value.dtype), tuple(value.shape[1:])
      if spec.variable:  # --example_unit file: its own length
        shape = (spec.shape[0],) + shape[1:]
      if (dtype, shape) != (spec.dtype, spec.shape):
        raise FeaturizerError(
            f'feature {name!r}: computed {dtype}{list(shape)} per window, '
            f'but the dataset at {self.dir} stores '
            f'{spec.dtype}{list(spec.shape)}')


def _refuse_a_sweep(output_dir: str) -> None:
  """DatasetError naming the variants when output_dir is a sweep's folder
  (--variants) rather than a dataset."""
  fs = dataset_lib.LOCAL
  index = naming.join(output_dir, naming.VARIANTS_FILE)
  if fs.exists(naming.join(output_dir, naming.METADATA_FILE)) or \
      not fs.exists(index):
    return
  try:
    names = sorted(json.loads(fs.read_text(index))['variants'])
  except (ValueError, KeyError, TypeError, OSError) as e:
    raise DatasetError(f'{index}: not a sweep index ({e})') from e
  raise DatasetError(f'{output_dir} is a sweep of one dataset per variant '
                     f'({", ".join(names)}): pass variant= one of them')
