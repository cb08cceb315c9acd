"""--variants: a value of the wrong type for an option is refused (exit
2) naming the variant, the option and the type it takes."""

import json
import os
import subprocess
import sys

import pytest

from pipeline import variants
from pipeline.config import ConfigError, PipelineConfig
from tests import helpers as H

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRINGS = 'a string of comma-separated names or an array of strings'
# A value of the wrong type for every option a variant may set, as TOML,
# and what the message says of it.
WRONG = {
    'features': ('5', f'--features=5: give {STRINGS}, not an integer'),
    'signal_dtype': ('{a = 1}', "--signal_dtype={'a': 1}: give a string, "
                     'not a table'),
    'feature_dtype': ('16', '--feature_dtype=16: give a string, not an '
                      'integer'),
    'n_fft': ('true', '--n_fft=True: give an integer, not a boolean'),
    'fft_hop': ('64.5', '--fft_hop=64.5: give an integer, not a float'),
    'fft_window': ('3', '--fft_window=3: give a string, not an integer'),
    'spectrogram_scale': ('["log"]', "--spectrogram_scale=['log']: give a "
                          'string, not an array'),
    'n_mels': ('{}', '--n_mels={}: give an integer, not a table'),
    'fmin': ('true', '--fmin=True: give a number, not a boolean'),
    'fmax': ('[7000]', '--fmax=[7000]: give a number, not an array'),
    'mel_power': ('2.0', '--mel_power=2.0: give an integer, not a float'),
    'n_mfcc': ('"x"', "--n_mfcc='x': is not a number (give an integer)"),
    'lpc_order': ('false', '--lpc_order=False: give an integer, not a '
                  'boolean'),
    'kaldi_num_mel_bins': ('23.5', '--kaldi_num_mel_bins=23.5: give an '
                           'integer, not a float'),
    'kaldi_frame_length': ('true', '--kaldi_frame_length=True: give a '
                           'number, not a boolean'),
    'kaldi_frame_shift': ('"ten"', "--kaldi_frame_shift='ten': is not a "
                          'number (give a number)'),
    'kaldi_low_freq': ('[20]', '--kaldi_low_freq=[20]: give a number, not '
                       'an array'),
    'kaldi_high_freq': ('{}', '--kaldi_high_freq={}: give a number, not a '
                        'table'),
    'kaldi_preemphasis_coefficient': (
        'false', '--kaldi_preemphasis_coefficient=False: give a number, '
        'not a boolean'),
    'kaldi_window_type': ('1', '--kaldi_window_type=1: give a string, not '
                          'an integer'),
    'kaldi_snip_edges': ('false', '--kaldi_snip_edges=False: give a '
                         'string, not a boolean'),
    'kaldi_remove_dc_offset': ('1', '--kaldi_remove_dc_offset=1: give a '
                               'string, not an integer'),
    'kaldi_use_power': ('2.0', '--kaldi_use_power=2.0: give a string, not '
                        'a float'),
    'kaldi_round_to_power_of_two': ('[]', '--kaldi_round_to_power_of_two=[]'
                                    ': give a string, not an array'),
    'kaldi_sample_scale': ('"big"', "--kaldi_sample_scale='big': is not a "
                           'number (give a number)'),
    'whisper_n_mels': ('80.5', '--whisper_n_mels=80.5: give an integer, '
                       'not a float'),
    'whisper_pad': ('30', '--whisper_pad=30: give a string, not an '
                    'integer'),
    'embedding_model': ('1', '--embedding_model=1: give a string, not an '
                        'integer'),
    'embedding_layers': ('[6]', "--embedding_layers=[6]: give a string, "
                         'not an array'),
    'embedding_pool': ('true', '--embedding_pool=True: give a string, not '
                       'a boolean'),
    'embedding_device': ('{}', '--embedding_device={}: give a string, not '
                         'a table'),
    'embedding_dtype': ('16', '--embedding_dtype=16: give a string, not an '
                        'integer'),
    'embedding_batch_seconds': ('false', '--embedding_batch_seconds=False: '
                                'give a number, not a boolean'),
}


def _config(path) -> PipelineConfig:
  return PipelineConfig(input_dir='in', output_dir='out', variants=str(path))


@pytest.mark.parametrize('name, text', [
    ('v.json', '{"a": {"n_fft": 256}}'), ('v.toml', '[a]\nn_fft = 256\n')])
def test_a_byte_order_mark_is_not_part_of_the_file(tmp_path, name, text):
  path = tmp_path / name
  path.write_bytes(b'\xef\xbb\xbf' + text.encode())
  assert variants.read(str(path)) == {'a': {'n_fft': 256}}


def test_every_variant_option_is_in_the_table():
  assert set(WRONG) == variants.FEATURE_OPTIONS


@pytest.mark.parametrize('option', sorted(WRONG))
def test_a_wrong_type_names_the_variant_option_and_type(tmp_path, option):
  text, message = WRONG[option]
  path = tmp_path / 'v.toml'
  path.write_text(f'[good]\nn_fft = 256\n\n[bad]\n{option} = {text}\n')
  with pytest.raises(ConfigError) as raised:
    variants.configs(_config(path))
  assert str(raised.value) == f"--variants={str(path)!r}: variant 'bad': " \
      + message


@pytest.mark.parametrize('option', sorted(WRONG))
@pytest.mark.parametrize('value,kind', [
    ({'x': 1}, 'an object'), (True, 'a boolean'), ([[1]], 'an array'),
])
def test_objects_booleans_and_nested_arrays_are_refused_in_json(
    tmp_path, option, value, kind):
  path = tmp_path / 'v.json'
  path.write_text(json.dumps({'a': {option: value}}))
  with pytest.raises(ConfigError, match=f"variant 'a': --{option}=") as raised:
    variants.configs(_config(path))
  assert kind in str(raised.value), str(raised.value)


def test_null_is_refused_where_an_option_has_a_value(tmp_path):
  path = tmp_path / 'v.json'
  path.write_text(json.dumps({'a': {'n_fft': None}}))
  with pytest.raises(ConfigError, match='--n_fft=None: give an integer, '
                     'not null'):
    variants.configs(_config(path))
  # --fmax is unset by default: null leaves it so.
  path.write_text(json.dumps({'a': {'fmax': None}}))
  assert variants.configs(_config(path))['a'].fmax is None


def test_values_of_the_right_type_are_taken_as_the_command_line_takes_them(
    tmp_path):
  path = tmp_path / 'v.toml'
  path.write_text('[a]\nfeatures = ["log_mel", "mfcc"]\nn_mfcc = "20"\n'
                  'fmin = 125\nfmax = "7000"\nfft_window = "hamming"\n')
  config = variants.configs(_config(path))['a']
  assert (config.features, config.n_mfcc, config.fmin, config.fmax,
          config.fft_window) == (('log_mel', 'mfcc'), 20, 125.0, 7000.0,
                                 'hamming')


@pytest.mark.slow  # starts the command
@pytest.mark.parametrize('option', ['features', 'fmin'])
def test_the_command_exits_2_before_anything_runs(tmp_path, option):
  H.write_wav(str(tmp_path / 'in' / 'a' / 'x.wav'), H.noise(8192))
  text, message = WRONG[option]
  (tmp_path / 'v.toml').write_text(f'[a]\n{option} = {text}\n')
  proc = subprocess.run(
      [sys.executable, '-m', 'pipeline.run', '--input_dir',
       str(tmp_path / 'in'), '--output_dir', str(tmp_path / 'out'),
       '--variants', str(tmp_path / 'v.toml'), '--win_len', '4096'],
      cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert f"variant 'a': {message}" in proc.stderr
  assert 'Traceback' not in proc.stderr
  assert not (tmp_path / 'out').exists()
