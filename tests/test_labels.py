"""transforms/planning/labels and the listing's --exclude: classes renamed by
--label_map, the class of --silence_from recordings, and the files a
pattern leaves out, on their own (the runs are in
tests/test_speech_commands.py)."""

import pytest

from pipeline.config import ConfigError, PipelineConfig
from transforms.inputs import labels
from transforms.inputs import listing
from tests import helpers as H


def _config(**kw):
  return PipelineConfig(input_dir='/in', output_dir='/out', **kw)


def test_a_label_map_renames_named_classes_and_the_rest():
  config = _config(label_map='yes,cat=animal,dog=animal,*=_unknown_')
  assert [labels.file_label(f'/in/{c}/x.wav', config) for c in (
      'yes', 'cat', 'dog', 'bed')] == ['yes', 'animal', 'animal',
                                       '_unknown_']
  # No class stays no class (the file is rejected for it, not renamed).
  assert labels.file_label('/in/x.wav', config) == ''
  # Without *, the classes the map does not name keep theirs.
  assert labels.renamed('bed', _config(label_map='cat=animal').label_map) \
      == 'bed'


def test_silence_recordings_take_the_silence_label_and_skip_the_map():
  config = _config(silence_from='_background_noise_/*', label_map='*=other',
                   silence_label='quiet')
  assert labels.file_label('/in/_background_noise_/a.wav', config) == 'quiet'
  assert labels.file_label('/in/_background_noise_/deep/b.wav',
                           config) == 'quiet'  # * crosses /
  assert labels.file_label('/in/yes/_background_noise_.wav',
                           config) == 'other'


def test_dataset_classes_are_sorted_after_renaming_and_checked():
  config = _config(label_map='yes,no,*=_unknown_',
                   silence_from='_background_noise_/*')
  block = [(i, f'/in/{p}', None) for i, p in enumerate(
      ['_background_noise_/n.wav', 'bed/1.wav', 'no/1.wav', 'yes/1.wav',
       'yes/2.wav', 'zoo/1.wav'])]
  pairs = labels.classes_of_block(block, config)
  assert pairs == [(None, '_silence_'), ('bed', '_unknown_'), ('no', 'no'),
                   ('yes', 'yes'), ('zoo', '_unknown_')]
  assert labels.dataset_classes(pairs, config) == [
      '_silence_', '_unknown_', 'no', 'yes']
  # An --append part keeps the dataset's classes first.
  assert labels.dataset_classes(pairs, config, known=('yes', 'no')) == [
      'yes', 'no', '_silence_', '_unknown_']
  typo = _config(label_map='yes,nope,*=_unknown_')
  with pytest.raises(ConfigError, match=r"names 'nope', which no file of "
                     r'the corpus has as its class \(the corpus has '
                     r'_background_noise_, bed, no, yes, zoo\)'):
    labels.dataset_classes(labels.classes_of_block(block, typo), typo)
  # Not checked where the files are only an --append part's new ones.
  assert labels.dataset_classes([('yes', 'yes')], typo, check=False) == [
      'yes']


def test_excluded_paths_keep_their_index_and_are_counted_apart():
  config = _config(exclude='skip/*,*.tmp.wav')
  paths = ['/in/a/1.wav', '/in/a/2.tmp.wav', '/in/b/1.wav',
           '/in/skip/deep/x.wav']
  excluded = listing.excluded_paths(config, paths)
  assert excluded == {
      '/in/a/2.tmp.wav': 'excluded: matches --exclude *.tmp.wav',
      '/in/skip/deep/x.wav': 'excluded: matches --exclude skip/*'}
  blocks, unusable = listing.index_blocks(paths, excluded=excluded)
  assert [(i, p) for _, block in blocks for i, p, _ in block] == [
      (0, '/in/a/1.wav'), (2, '/in/b/1.wav')]
  assert sorted((r.path, r.stage) for r in unusable) == [
      ('/in/a/2.tmp.wav', 'exclude'), ('/in/skip/deep/x.wav', 'exclude')]
  assert all(r.is_excluded and not r.is_note for r in unusable)


@pytest.mark.parametrize('options, message', [
    ({'exclude': 'skip/*,nothing/*'},
     "--exclude='nothing/\\*': matches no file under /in"),
    ({'silence_from': 'Skip/*'}, "--silence_from='Skip/\\*': matches no "
     'file'),  # case-sensitive
    ({'silence_from': 'skip/*', 'exclude': 'skip/deep/*'},
     "--silence_from='skip/\\*': every file it matches is left out by "
     '--exclude=skip/deep/\\*'),
])
def test_patterns_that_leave_nothing_are_refused(options, message):
  paths = ['/in/a/1.wav', '/in/skip/deep/x.wav']
  with pytest.raises(ConfigError, match=message):
    listing.excluded_paths(_config(**options), paths)


@pytest.mark.parametrize('options, paths, refused', [
    ({}, ['/in/a.wav', '/in/b.wav'], 'a.wav'),
    ({}, ['/in/b.wav', '/in/dog/a.wav'], None),  # b.wav rejected alone
    ({'label_from': 'suffix'}, ['/in/x/a.wav', '/in/y/b.wav'], 'x/a.wav'),
    ({'label_from': 'suffix'}, ['/in/a.wav', '/in/b_cat.wav'], None),
    ({'split_from': 'subdir'}, ['/in/train/a.wav', '/in/test/b.wav'],
     'test/b.wav'),
    ({'split_from': 'subdir'}, ['/in/train/a.wav', '/in/test/dog/b.wav'],
     None),
    ({'label_from': 'none'}, ['/in/a.wav'], None),
    ({}, [], None),
])
def test_a_label_from_that_finds_no_class_anywhere_is_refused(
    options, paths, refused):
  """An unlabeled corpus run without --label_from none: refused before it
  runs, naming the first file and the options that fit, rather than every
  file rejected for having no class."""
  config = _config(**options)
  if refused is None:
    labels.check_label_from(paths, config)
    return
  with pytest.raises(ConfigError) as e:
    labels.check_label_from(paths, config)
  assert e.value.option == 'label_from'
  assert (f'finds no class in any of the {len(paths)} files (e.g. '
          f'{refused})') in str(e.value)
  assert '--label_from none' in str(e.value)
  assert '--manifest_label_column' in str(e.value)


def test_the_files_checked_for_a_class_leave_out_excluded_and_silence(
    tmp_path):
  """Excluded files and --silence_from recordings take no class from
  --label_from: a corpus whose other files are in class folders passes,
  and one whose only file in a folder is excluded does not."""
  for rel in ('loose.wav', 'noise/n.wav', 'junk/x.wav'):
    H.write_wav(str(tmp_path / 'in' / rel), H.noise(100))
  config = PipelineConfig(input_dir=str(tmp_path / 'in'), output_dir='/out',
                          exclude='junk/*', silence_from='noise/*')
  assert list(listing.label_from_paths(config)) == [
      str(tmp_path / 'in' / 'loose.wav')]
  with pytest.raises(ConfigError, match=r'any of the 1 files \(e\.g\. '
                     r'loose\.wav\)'):
    labels.check_label_from(listing.label_from_paths(config), config)
  H.write_wav(str(tmp_path / 'in' / 'dog' / 'a.wav'), H.noise(100))
  labels.check_label_from(listing.label_from_paths(config), config)
