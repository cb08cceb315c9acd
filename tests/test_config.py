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


def test_example_unit_file_refuses_what_does_not_apply():
  """--example_unit file: the window options and fft name themselves when
  given; --max_seconds and --min_seconds are checked, and only apply to
  it."""
  from pipeline.config import ConfigError, PipelineConfig

  def config(**kw):
    return PipelineConfig(input_dir='in', output_dir='out', **kw)

  whole = config(example_unit='file', n_fft=4096)
  assert whole.max_seconds == 60.0 and whole.min_seconds == 0.0
  for option, value in (('win_len', 1024), ('hop_len', 100), ('pad', True),
                        ('max_windows_per_signal', 3)):
    with pytest.raises(ConfigError, match=rf'--{option}={value!r}: does not '
                       'apply to --example_unit file'):
      config(example_unit='file', **{option: value})
  with pytest.raises(ConfigError, match='fft is one spectrum of a whole'):
    config(example_unit='file', features='signal,fft')
  with pytest.raises(ConfigError, match=r'--max_seconds=601.0: must be more '
                     'than 0 and at most 600'):
    config(example_unit='file', max_seconds=601.0)
  with pytest.raises(ConfigError, match=r'--min_seconds=5.0: must not '
                     'exceed --max_seconds=4'):
    config(example_unit='file', max_seconds=4.0, min_seconds=5.0)
  with pytest.raises(ConfigError, match=r'--min_seconds=-1.0: must be a '
                     'number of seconds'):
    config(example_unit='file', min_seconds=-1.0)
  with pytest.raises(ConfigError, match=r'--max_seconds=10.0: applies to '
                     '--example_unit file only'):
    config(max_seconds=10.0)
  with pytest.raises(ConfigError, match=r"--example_unit='clip': must be "
                     'one of window, file'):
    config(example_unit='clip')
  stored = json.loads(json.dumps(whole.to_json()))
  assert PipelineConfig.from_json(stored) == whole
