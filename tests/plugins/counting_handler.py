"""A model handler of a caller's own for the embedding feature: wavbeam's,
that also appends a line to a file for every forward pass over audio
(from whatever process runs it): its examples, and their distinct
lengths, so that a test can count them. The
launcher's pass over one silent window, which gives each variant's
shapes, is not counted."""

import numpy as np

from transforms.features import embedding_models


class CountingHandler(embedding_models.EmbeddingModelHandler):

  def __init__(self, model: str, log: str, loads: str = None):
    super().__init__(model, 'cpu', 'float32')
    self.log, self.loads = log, loads

  def load_model(self):
    if self.loads:
      with open(self.loads, 'a') as f:
        f.write('loaded\n')
    return super().load_model()

  def run_inference(self, batch, model, inference_args=None):
    if any(np.any(x) for x in batch):
      with open(self.log, 'a') as f:
        f.write(f'{len(batch)} {len({len(x) for x in batch})}\n')
    return super().run_inference(batch, model, inference_args)
