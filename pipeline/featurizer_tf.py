"""The TensorFlow featurizer under its first name:
pipeline/featurizer/tf_graph.py."""

from pipeline._aliases import alias

alias(__name__, 'pipeline.featurizer.tf_graph')
