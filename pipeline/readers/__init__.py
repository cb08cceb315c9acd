"""The readers of a dataset: TensorFlow (tf_dataset), numpy
(numpy_dataset), PyTorch (torch_dataset) and ArrayRecord for Grain
(array_record). None imports Beam."""
