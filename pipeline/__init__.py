"""wavbeam: WAV corpora to sharded TFRecord datasets with Apache Beam.

This package must stay importable without Beam: `pipeline.replay` (training
code) imports it with TensorFlow only. Beam is imported by the modules that
build and run the graph (`pipeline.graph`, `pipeline.run`).
"""
