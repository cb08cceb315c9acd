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
  assert config_lib.features_markdown() in options_page
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
      PipelineConfig(input_dir='in', output_dir='out', exclude='a/*,b.wav',
                     label_map='yes,no=nope,*=_unknown_',
                     silence_from='noise/*', silence_windows=30),
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


def _parsed(*argv):
  from pipeline import config as config_lib
  config, rest = config_lib.parse_known_args(
      ['--input_dir', 'in', '--output_dir', 'out', *argv])
  assert not rest
  return config


def test_pattern_options_are_repeatable_or_comma_separated():
  config = _parsed('--exclude', 'a/*', '--exclude', './b/*,c//d.wav',
                   '--silence_from', '_background_noise_/*')
  assert config.exclude == ('a/*', 'b/*', 'c/d.wav')
  assert config.silence_from == ('_background_noise_/*',)
  assert _parsed().exclude == () and _parsed().silence_from == ()


def test_a_label_map_inline_or_from_a_json_file(tmp_path):
  from pipeline.config import ConfigError
  inline = _parsed('--label_map', 'yes, no ,cat=animal,*=_unknown_')
  assert inline.label_map == (('*', '_unknown_'), ('cat', 'animal'),
                              ('no', 'no'), ('yes', 'yes'))
  path = tmp_path / 'map.json'
  path.write_text(json.dumps({'yes': 'yes', 'no': 'no', 'cat': 'animal',
                              '*': '_unknown_'}))
  assert _parsed('--label_map', str(path)).label_map == inline.label_map
  # An editor's byte-order mark is not part of the text.
  path.write_bytes(b'\xef\xbb\xbf' + path.read_bytes())
  assert _parsed('--label_map', str(path)).label_map == inline.label_map
  # The map itself is the option (--append compares it), not the file.
  assert inline.to_json()['label_map'][1] == ['cat', 'animal']
  for text, message in (
      ('{"a": "b", "a": "c"}', "\\['a'\\] given twice"),
      ('[["a", "b"]]', 'must be a JSON object'),
      ('{"a": {"b": "c"}}', 'must be a JSON object'),
      ('{"a": ', 'is not valid')):
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
      _parsed('--label_map', str(path))
  with pytest.raises(ConfigError, match='cannot be read'):
    _parsed('--label_map', str(tmp_path / 'missing.json'))


@pytest.mark.parametrize('options, message', [
    ({'label_map': 'a=b,a=c'}, "--label_map='a=b,a=c': renames a class "
     'twice'),
    ({'label_map': 'a=*'}, 'give CLASS=NEW with a NEW class name'),
    ({'label_map': '=b'}, "'=b' is not CLASS=NEW or CLASS"),
    ({'label_map': 'a', 'label_from': 'none'}, '--label_from none gives no '
     'classes to rename'),
    ({'exclude': '/abs/*'}, "--exclude='/abs/\\*': pattern '/abs/\\*': give a "
     'glob relative to input_dir'),
    ({'exclude': 'a/../b'}, 'give a glob relative to input_dir'),
    ({'silence_from': 'gs://b/x'}, 'give a glob relative to input_dir'),
    ({'exclude': 'a/*,a/*'}, 'lists a pattern twice'),
    ({'silence_windows': 5}, '--silence_windows=5: needs --silence_from'),
    ({'silence_label': 'quiet'}, "--silence_label='quiet': needs "
     '--silence_from'),
    ({'silence_from': 'n/*', 'silence_windows': 0}, 'must be a positive'),
    ({'silence_from': 'n/*', 'silence_label': ''}, 'give a class name'),
    ({'silence_from': 'n/*', 'label_from': 'none'}, '--label_from none '
     'gives no classes'),
    ({'silence_from': 'n/*', 'exclude': 'x/*,n/*'},
     "--silence_from='n/\\*': every file it matches is left out by "
     '--exclude=n/\\*'),
    ({'silence_from': 'n/a.wav', 'exclude': 'n/*'}, 'a file cannot be both'),
])
def test_impossible_label_and_pattern_options_are_refused(options, message):
  from pipeline.config import ConfigError, PipelineConfig
  with pytest.raises(ConfigError, match=message):
    PipelineConfig(input_dir='in', output_dir='out', **options)


def test_a_silence_pattern_may_overlap_an_exclusion():
  """Excluding some of the silence recordings is a choice, not a clash."""
  from pipeline.config import PipelineConfig
  config = PipelineConfig(input_dir='in', output_dir='out',
                          silence_from='noise/*',
                          exclude='noise/white_noise.wav')
  assert config.silence_from == ('noise/*',)


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
                     '--example_unit file or segment only'):
    config(max_seconds=10.0)
  with pytest.raises(ConfigError, match=r"--example_unit='clip': must be "
                     'one of window, file, segment'):
    config(example_unit='clip')
  stored = json.loads(json.dumps(whole.to_json()))
  assert PipelineConfig.from_json(stored) == whole


@pytest.mark.parametrize('options, message', [
    ({'example_unit': 'segment'}, '--example_unit=.segment.: needs segments'),
    ({'manifest_start_column': 's'}, '--manifest_start_column=.s.: needs '
     '--manifest'),
    ({'manifest': 'm.csv', 'manifest_start_column': 's'}, 'needs one of '
     '--manifest_end_column and --manifest_duration_column'),
    ({'manifest': 'm.csv', 'manifest_start_column': 's',
      'manifest_end_column': 'e', 'manifest_duration_column': 'd'},
     'needs one of'),
    ({'manifest': 'm.csv', 'manifest_end_column': 'e'},
     '--manifest_end_column=.e.: needs --manifest_start_column'),
    ({'manifest': 'm.csv', 'manifest_start_column': 's',
      'manifest_end_column': 'e', 'example_unit': 'file'},
     '--example_unit=.file.: makes one example of a whole recording'),
    ({'split_by': 'speaker'}, '--split_by=.speaker.: needs --manifest'),
    ({'manifest': 'm.csv', 'split_by': 'speaker',
      'manifest_split_column': 'split'}, '--split_by=.speaker.: assigns'),
    ({'lhotse_supervisions': 's.jsonl'}, 'needs --lhotse_recordings'),
    ({'lhotse_recordings': 'r.jsonl', 'manifest': 'm.csv'},
     'give --lhotse_recordings or --manifest, not both'),
    ({'lhotse_recordings': 'r.jsonl', 'fold_splits': 'a=1'},
     '--fold_splits=.*is a --manifest option'),
    ({'lhotse_recordings': 'r.jsonl', 'manifest_label_column': 'speaker'},
     'needs --manifest or --lhotse_supervisions'),
    ({'example_unit': 'segment', 'lhotse_recordings': 'r.jsonl',
      'lhotse_supervisions': 's.jsonl', 'win_len': 100},
     'does not apply to --example_unit segment'),
])
def test_segment_options_are_refused_where_they_cannot_apply(options,
                                                             message):
  from pipeline.config import ConfigError, PipelineConfig
  with pytest.raises(ConfigError, match=message):
    PipelineConfig(input_dir='in', output_dir='out', **options)


def test_lhotse_supervisions_store_their_usual_fields_by_default():
  from pipeline.config import PipelineConfig
  config = PipelineConfig(input_dir='in', output_dir='out',
                          lhotse_recordings='r.jsonl.gz',
                          lhotse_supervisions='s.jsonl.gz',
                          example_unit='segment')
  assert config.manifest_extra_columns == ('id', 'text', 'speaker',
                                           'language')
  assert config.has_segments and config.variable_length
  assert PipelineConfig.from_json(config.to_json()) == config
