"""The features of a wavbeam dataset, computed from live audio.

    from pipeline.featurizer import featurizer

    featurize = featurizer('out/')          # reads out/metadata.json
    featurize('take.wav')                   # {'signal': (n, win_len), ...}
    featurize(samples, 44100)               # a numpy array, [n] or
                                            # [n, channels]

A model trained on a dataset sees, at inference, the features the dataset
holds: the recording's channels mixed, resampled to the dataset's rate,
cut into windows and featurized with every option of the run that wrote
it (metadata.json keeps them), by the pipeline's own code. Every array
has one row per window, in window order. Given the file the dataset was
written from, or its samples as soundfile reads them (an MP3: its path),
the arrays equal the stored examples' bit for bit (tested).

`tf_featurizer` is the same for TensorFlow serving
(pipeline/featurizer/tf_graph.py). No Beam here, and no TensorFlow until
tf_featurizer is called.
"""
from pipeline import _aliases
from pipeline.featurizer.base import DatasetOptions, FeaturizerError
from pipeline.featurizer.numpy_featurizer import (Featurizer, featurizer,
                                                  tf_featurizer)

__all__ = ['DatasetOptions', 'Featurizer', 'FeaturizerError', 'featurizer',
           'tf_featurizer']

# `pipeline.featurizer(out)`: this package, called, is its featurizer.
_aliases.call_as(__name__, 'featurizer')
