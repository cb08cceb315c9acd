"""Batches handed from DataLoader workers in reused shared memory
(pipeline.torch_batches): the lease travels through DataLoader's own
pickling, kept batches are never overwritten, and each buffer's file
descriptor crosses once."""

import gc
import os
import subprocess
import sys
import textwrap
from multiprocessing.reduction import ForkingPickler

import torch
from torch.multiprocessing import reductions

from pipeline.readers import batching
from pipeline.readers import torch_batches
from tests.test_batching import check, examples

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
del reductions  # imported for its side effect: tensors pickle by fd


def _handed_over(batch):
  """What the training process gets from a worker: the batch pickled as
  DataLoader's queue pickles it, and unpickled."""
  return ForkingPickler.loads(bytes(ForkingPickler.dumps(batch)))


def test_the_lease_follows_the_last_tensor_across_pickling():
  buffers = torch_batches.SharedBatchBuffers()
  batch = _handed_over(next(buffers.handed_over(examples(4), 4, False)))
  check(batch, 0, 4, to_numpy=lambda t: t.numpy())
  assert isinstance(batch['spectrogram'], torch.Tensor)
  assert buffers.idle() == 0
  spectrogram = batch['spectrogram'][1:]  # a view outlives the dict
  del batch
  gc.collect()
  assert buffers.idle() == 0
  view = spectrogram.numpy()[0]  # and a numpy array made from the view
  del spectrogram
  gc.collect()
  assert buffers.idle() == 0 and view[0, 0] == 1
  del view
  gc.collect()
  assert buffers.idle() == 1


def test_kept_batches_stay_and_buffers_cross_once():
  buffers = torch_batches.SharedBatchBuffers()
  kept, sent, first = [], 0, 0
  for handed in buffers.handed_over(examples(80), 4, False):
    sent += handed.fields[2] is not None
    batch = _handed_over(handed)
    del handed
    check(batch, first, 4, to_numpy=lambda t: t.numpy())
    if first in (0, 40):
      batch['spectrogram'] += 1000
      kept.append((first, batch))
    first += 4
    del batch
  assert sent == len(buffers) == 3  # 2 kept, 1 reused for the others
  for first, batch in kept:
    assert batch['index'].tolist() == list(range(first, first + 4))
    assert float(batch['spectrogram'][0, 0, 0]) == first + 1000


def test_in_process_batches_are_tensors_of_reused_buffers():
  buffers = batching.BatchBuffers()
  first = 0
  for arrays in buffers.batches(examples(20), 4, False):
    tensors = torch_batches.tensors(arrays)
    del arrays
    check(tensors, first, 4, to_numpy=lambda t: t.numpy())
    first += 4
    del tensors
  assert len(buffers) == 1


def test_workers_hand_batches_over_in_a_few_buffers():
  """In a real DataLoader with 2 workers, over several epochs: every batch
  right, kept ones intact, and the buffers few and sent once each
  (counted as the file descriptors the training process receives:
  DataLoader's own batching sends one per batch and tensor); with workers
  made afresh each epoch, the training process lets go of the buffers of
  those that exited."""
  script = textwrap.dedent('''
      import numpy as np, torch
      from torch.multiprocessing import reductions
      from pipeline.readers import torch_batches

      class Data(torch.utils.data.IterableDataset):
        def __iter__(self):
          info = torch.utils.data.get_worker_info()
          if not hasattr(self, 'buffers'):
            self.buffers = torch_batches.SharedBatchBuffers()
          examples = ({'i': np.full(1000, i, np.int64)}
                      for i in range(info.id, 400, info.num_workers))
          return self.buffers.handed_over(examples, 10, False)

      received = []
      rebuild = reductions.rebuild_storage_fd
      def counted(*args):
        received.append(1)
        return rebuild(*args)
      reductions.rebuild_storage_fd = counted
      loader = torch.utils.data.DataLoader(
          Data(), batch_size=None, num_workers=2, persistent_workers=True)
      kept = []
      for epoch in range(5):
        seen = []
        for batch in loader:
          values = batch['i'].numpy()
          assert (values == values[:, :1]).all()
          seen += values[:, 0].tolist()
          if epoch == 0 and len(kept) < 3:
            kept.append((values[:, 0].copy(), batch))
        assert sorted(seen) == list(range(400)), seen
      for first, batch in kept:
        assert (batch['i'].numpy()[:, 0] == first).all()
      print(len(received))
      del kept, batch, loader
      # Workers made afresh each epoch: the mappings of exited ones go.
      fresh = torch.utils.data.DataLoader(Data(), batch_size=None,
                                          num_workers=2)
      for epoch in range(3):
        assert sum(len(b['i']) for b in fresh) == 400
      print(len(torch_batches._MAPPED))
  ''')
  proc = subprocess.run([sys.executable, '-c', script], cwd=ROOT,
                        capture_output=True, text=True, check=False)
  assert proc.returncode == 0, proc.stderr
  descriptors, pools = map(int, proc.stdout.split()[-2:])
  assert pools == 2  # the last epoch's workers; 8 without the clean-up
  # 200 batches; each worker's buffers: those prefetched, in use or kept.
  assert 0 < descriptors <= 2 * (batching.MAX_IDLE + 2) + 3
