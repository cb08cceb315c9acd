"""The numpy reader under its first name: pipeline/readers/numpy_dataset.py."""

from pipeline._aliases import alias

alias(__name__, 'pipeline.readers.numpy_dataset')
