"""pipeline/config: the option table in docs/options.md is --help's; a
config comes back from the JSON metadata.json keeps of it."""

import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_options_page_lists_every_option_as_help_does():
  from pipeline import config as config_lib
  with open(os.path.join(ROOT, 'docs', 'options.md'), encoding='utf-8') as f:
    options_page = f.read()
  assert config_lib.options_markdown() in options_page
  assert '`--quiet`' in options_page
  assert '`--verbose`' in options_page


def test_readme_links_to_the_options_page():
  with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
    assert '(docs/options.md)' in f.read()


def test_a_config_is_rebuilt_from_its_json():
  """metadata.json's `config` gives back the run's PipelineConfig, every
  kind of option included; an option missing from it takes its default,
  one this version does not know is refused."""
  from pipeline.config import ConfigError, PipelineConfig
  configs = [
      PipelineConfig(input_dir='in', output_dir='out',
                     splits='train=0.8,test=0.2', features='signal,mfcc',
                     fmax=4000.0, hop_len=100, pad=True, win_len=1024,
                     audio_formats='wav,flac', signal_dtype='int16'),
      PipelineConfig(input_dir='in', output_dir='out',
                     manifest='train=a.csv,test=b.csv',
                     manifest_label_column='label',
                     manifest_extra_columns='sentence,client'),
      PipelineConfig(input_dir='in', output_dir='out', manifest='m.csv',
                     manifest_split_column='fold',
                     fold_splits='train=1,2;test=3'),
      PipelineConfig(input_dir='in', output_dir='out',
                     split_lists='validation=v.txt,test=t.txt'),
  ]
  for config in configs:
    stored = json.loads(json.dumps(config.to_json()))
    assert PipelineConfig.from_json(stored) == config
  stored = configs[0].to_json()
  del stored['fft_window']
  assert PipelineConfig.from_json(stored).fft_window == 'hann'
  with pytest.raises(ConfigError, match="--window_shape=3: is not an option "
                     'of this wavbeam'):
    PipelineConfig.from_json(dict(configs[0].to_json(), window_shape=3))
