"""A refused value is shown as its user wrote it: the manifest cell, the
label map file and its key, the option's text, not the value as parsed
(rounded, sorted, lowercased, made absolute)."""

import json

import pytest

from pipeline.config import ConfigError, PipelineConfig
from transforms.inputs import manifest as manifest_lib


def _config(tmp_path, **kw) -> PipelineConfig:
  return PipelineConfig(input_dir=str(tmp_path / 'in'),
                        output_dir=str(tmp_path / 'out'), **kw)


@pytest.mark.parametrize('start,end,shown', [
    ('2', '1.9999999999', "end='1.9999999999' is not after start='2'"),
    ('2.50', '2.5', "end='2.5' is not after start='2.50'"),
    ('1e0', '0.5', "end='0.5' is not after start='1e0'"),
])
def test_a_segment_that_ends_before_it_starts_shows_the_cells(
    tmp_path, start, end, shown):
  (tmp_path / 'in').mkdir()
  (tmp_path / 'm.csv').write_text(f'path,start,end\na.wav,0,0.5\n'
                                  f'a.wav,{start},{end}\n')
  config = _config(tmp_path, manifest=str(tmp_path / 'm.csv'),
                   manifest_start_column='start', manifest_end_column='end')
  with pytest.raises(ConfigError) as raised:
    manifest_lib.read(config)
  assert str(raised.value) == (f"--manifest={str(tmp_path / 'm.csv')!r}: "
                               f'line 3: {shown}')


@pytest.mark.parametrize('mapping,shown', [
    ({'yes': ''}, "key 'yes' maps to ''"),
    ({'yes': 'y', 'no': '*'}, "key 'no' maps to '*'"),
    ({'': 'y'}, "key '' maps to 'y'"),
    ({'yes': 'a\tb'}, "key 'yes' maps to 'a\\tb': a class name holds"),
])
def test_a_label_map_file_is_named_with_the_key(tmp_path, mapping, shown):
  path = tmp_path / 'map.json'
  path.write_text(json.dumps(mapping))
  with pytest.raises(ConfigError) as raised:
    _config(tmp_path, label_map=str(path))
  assert str(raised.value).startswith(f'--label_map={str(path)!r}: {shown}')


def test_a_label_map_file_is_named_where_the_whole_map_is_refused(tmp_path):
  path = tmp_path / 'map.json'
  path.write_text(json.dumps({'yes': 'y'}))
  with pytest.raises(ConfigError, match=r"^--label_map='[^']*map\.json': "
                     '--label_from none gives no classes'):
    _config(tmp_path, label_map=str(path), label_from='none')


@pytest.mark.parametrize('kw,message', [
    ({'label_map': 'yes, no=*'},
     "--label_map='yes, no=*': 'no=*': give CLASS=NEW"),
    ({'label_map': 'b=x, a=x, b=y'},
     "--label_map='b=x, a=x, b=y': renames a class twice"),
    ({'splits': 'train=0.80,test=0.3'},
     "--splits='train=0.80,test=0.3': fractions must sum to 1"),
    ({'splits': 'train=.5,dev=1e-1'},
     "--splits='train=.5,dev=1e-1': fractions must sum to 1"),
    ({'audio_formats': 'WAV,.Flac,mp4'},
     "--audio_formats='WAV,.Flac,mp4': unknown ['mp4']"),
    ({'audio_formats': 'wav,WAV'}, "--audio_formats='wav,WAV': lists a "
     'repeat'),
    ({'features': 'signal, fft', 'example_unit': 'file'},
     "--features='signal, fft': fft is one spectrum"),
    ({'exclude': './a/*,a/*'}, "--exclude='./a/*,a/*': lists a pattern "
     'twice'),
    ({'silence_from': './noise/*', 'label_from': 'none'},
     "--silence_from='./noise/*': --label_from none gives no classes"),
    ({'split_lists': 'validation = v.txt, validation=w.txt'},
     "--split_lists='validation = v.txt, validation=w.txt': names a split "
     'twice'),
    ({'manifest': 'm.csv,x.csv', 'manifest_split_column': 'split',
      'splits': 'train=0.5,test=0.5'},
     "--manifest='m.csv,x.csv': the manifest gives the splits"),
    ({'manifest': 'm.csv', 'manifest_split_column': 'fold',
      'fold_splits': 'a = 1 ; a=2'},
     "--fold_splits='a = 1 ; a=2': names a split twice"),
    ({'manifest': 'm.csv', 'manifest_extra_columns': 'x, y,x'},
     "--manifest_extra_columns='x, y,x': lists a column twice"),
    ({'manifest': 'm.csv', 'manifest_audio_extension': 'mp3',
      'audio_formats': 'WAV'},
     "--manifest_audio_extension='mp3': is not one of --audio_formats=WAV,"),
])
def test_options_given_as_text_are_shown_as_written(tmp_path, kw, message):
  with pytest.raises(ConfigError) as raised:
    _config(tmp_path, **kw)
  assert str(raised.value).startswith(message), str(raised.value)


def test_options_given_as_values_are_shown_as_their_text(tmp_path):
  """From Python, as tuples: shown as the command line would give them."""
  with pytest.raises(ConfigError, match=r"^--splits='train=0\.8,test=0\.3'"):
    _config(tmp_path, splits=(('train', 0.8), ('test', 0.3)))
  with pytest.raises(ConfigError, match=r"^--label_map='a=\*': a=\*: give "):
    _config(tmp_path, label_map=(('a', '*'),))
