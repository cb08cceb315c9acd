"""The TensorFlow reader under its first name:
pipeline/readers/tf_dataset.py."""

from pipeline._aliases import alias

alias(__name__, 'pipeline.readers.tf_dataset')
