"""The PyTorch datasets under their first name:
pipeline/readers/torch_dataset.py."""

from pipeline._aliases import alias

alias(__name__, 'pipeline.readers.torch_dataset')
