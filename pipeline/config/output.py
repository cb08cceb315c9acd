"""The options of what is written: the output folder and the dataset's
name and version in it, how its splits are cut into shards and by which
sink, what a run does with a dataset already there, and --variants."""

import dataclasses
import re
from typing import Optional

from pipeline.config.fields import (
    MAX_COUNT, at_most, check_choices, opt, positive)
from pipeline.contract import naming
from pipeline.contract.errors import ConfigError

COMPRESSIONS = ('none', 'gzip')
SINKS = ('shards', 'write_to_tfrecord')
DEFAULT_SHARD_BYTES = 150 * 2**20  # TFRecord advice: shards of 100-200 MB
# Upper bounds, past which a value is a typo rather than a choice.
MAX_SHARDS = 10**6
MAX_SHARD_BYTES = 2**40


@dataclasses.dataclass(frozen=True, kw_only=True)
class OutputOptions:
  output_dir: str = opt('folder (or URI) the dataset is written to',
                        required=True)
  dataset_name: str = opt('name used in shard file names', default='wavbeam')
  num_shards: Optional[int] = opt(
      'write this many shards per split (at most one per example; '
      '--sink write_to_tfrecord writes this many, empty ones included)',
      default=None)
  max_examples_per_shard: Optional[int] = opt(
      'start a new shard after this many examples', default=None)
  max_shard_bytes: int = opt(
      'start a new shard after this many bytes (the default sharding)',
      default=DEFAULT_SHARD_BYTES)
  compression: str = opt('shard compression', default='none',
                         choices=COMPRESSIONS)
  sink: str = opt(
      "shards: wavbeam's own shard writer (deterministic layout and global "
      "shuffle); write_to_tfrecord: Beam's file-based sink (the files of "
      'WriteToTFRecord) with runner-chosen sharding (or --num_shards), '
      'fused with the feature work, in no global order (no shuffle of any '
      'kind, no --shuffle_seed)',
      default='shards', choices=SINKS)
  array_record: bool = opt(
      'also write every shard as ArrayRecord (the same Example bytes, '
      'uncompressed, one record per group) for random access: '
      'tfds.data_source, Grain, PyTorch map-style datasets; local output '
      'only, --sink shards only; needs the array-record package '
      "(pip install '.[array_record]')", default=False)
  overwrite: bool = opt('replace a dataset already in output_dir',
                        default=False)
  resume: bool = opt(
      'finish the run that was stopped in output_dir (killed, interrupted, '
      'out of memory): its finished shards are checked and kept, the rest '
      'computed, giving the files an uninterrupted run gives; refused '
      '(exit 2) when an option, an input file or wavbeam itself changed '
      'since (see docs/failures.md)', default=False)
  append: bool = opt(
      'add to the complete dataset in output_dir the recordings of '
      'input_dir it does not hold yet, as a new part (part-00001, ...; '
      'listed in parts.json), with the same options it was written with; a '
      'recording whose content changed since is reported, not read again',
      default=False)
  dataset_version: str = opt('version recorded for TFDS (x.y.z)',
                             default='1.0.0')
  tfds_layout: bool = opt(
      'write into OUT/{dataset_name}/{dataset_version}/ so that '
      'tfds.load(dataset_name, data_dir=OUT) finds it', default=False)
  variants: Optional[str] = opt(
      'a JSON or TOML file mapping variant names to feature options (e.g. '
      '[mfcc20] features = "log_mel,mfcc", n_mfcc = 20): each variant is a '
      'complete dataset in OUT/<variant>/ with the run\'s other options, '
      'and OUT/variants.json lists them and what differs (default: none)',
      default=None)

  @property
  def dataset_dir(self) -> str:
    """Where the dataset's files go: output_dir, or the TFDS layout in it."""
    if self.tfds_layout:
      return '/'.join([self.output_dir.rstrip('/'), self.dataset_name,
                       self.dataset_version])
    return self.output_dir

  def _validate_output(self):
    if not self.output_dir:
      raise ConfigError('output_dir', self.output_dir, 'is required')
    if not re.fullmatch(r'\d+\.\d+\.\d+', self.dataset_version):
      raise ConfigError('dataset_version', self.dataset_version,
                        'must look like 1.0.0')
    if not naming.is_dataset_name(self.dataset_name):
      raise ConfigError('dataset_name', self.dataset_name,
                        f'use {naming.DATASET_NAME_RULE} only')
    positive('max_shard_bytes', self.max_shard_bytes)
    for name in ('num_shards', 'max_examples_per_shard'):
      if getattr(self, name) is not None:
        positive(name, getattr(self, name))
    at_most('max_shard_bytes', self.max_shard_bytes, MAX_SHARD_BYTES)
    for name, bound in (('num_shards', MAX_SHARDS),
                        ('max_examples_per_shard', MAX_COUNT)):
      if getattr(self, name) is not None:
        at_most(name, getattr(self, name), bound)
    check_choices(self, OutputOptions)
    # An unknown --split_from is refused as such, by the split options'
    # checks (after these).
    if self.sink == 'write_to_tfrecord' and self.split_from == 'subdir':
      raise ConfigError('sink', self.sink, 'needs the split names before '
                        'the run (one sink per split): use '
                        '--splits, or --sink shards with --split_from '
                        'subdir')

  def _validate_writing(self):
    """How the dataset is written: what --sink write_to_tfrecord needs of
    the splits (checked before), --array_record of the sink, and the
    options that exclude each other."""
    if (self.sink == 'write_to_tfrecord' and self.manifest_split_column and
        not self.fold_splits):
      raise ConfigError('sink', self.sink, 'needs the split names before '
                        'the run, which --manifest_split_column='
                        f'{self.manifest_split_column} leaves to the rows: '
                        'map its values with --fold_splits, or use --sink '
                        'shards')
    if self.array_record and self.sink != 'shards':
      raise ConfigError('array_record', True, 'needs --sink shards (the '
                        "ArrayRecord files are written beside wavbeam's own "
                        'shards)')
    if self.append and self.overwrite:
      raise ConfigError('append', True, 'give --append or --overwrite, not '
                        'both')
    if self.resume and self.overwrite:
      raise ConfigError('resume', True, 'give --resume (keep what the '
                        'stopped run finished) or --overwrite (start again), '
                        'not both')
    if self.resume and self.sink != 'shards':
      raise ConfigError('resume', True, f'needs --sink shards: with --sink '
                        f'{self.sink} Beam writes every file at the end of '
                        'the job, so a stopped run leaves no finished shard '
                        'to keep')
    if self.variants:
      for name in ('tfds_layout',):
        if getattr(self, name):
          raise ConfigError(name, True, f'works on one dataset, and '
                            f'--variants={self.variants} writes one per '
                            'variant: tfds.builder_from_directory loads a '
                            'variant\'s folder as it is, or write the '
                            'variant alone, with its options and --'
                            f'{name}')
    if self.num_shards is not None and self.max_examples_per_shard is not None:
      raise ConfigError('num_shards', self.num_shards,
                        'give either --num_shards or --max_examples_per_shard')
