"""The one load_metadata of every reader, and the file system a reader
reads a dataset folder through: the local one for a path, TensorFlow's
tf.io.gfile for a URI (gs://...), so that only a remote dataset imports
TensorFlow."""

import functools
import os
from typing import Dict, Optional

from pipeline.contract import dataset as dataset_lib


def load_metadata(output_dir: str, parts=None,
                  variant: Optional[str] = None) -> Dict:
  """metadata.json of a complete dataset, merged with the parts --append
  added (all, or those `parts` names); of a sweep, the `variant`'s, as
  every reader reads it. DatasetError otherwise."""
  fs = file_system(output_dir)
  return dataset_lib.open_dataset(
      dataset_lib.variant_folder(output_dir, variant, fs), fs, parts)[1]


def file_system(path: str) -> dataset_lib.FileSystem:
  return gfile_system() if '://' in str(path) else dataset_lib.LOCAL


@functools.lru_cache(maxsize=None)
def gfile_system() -> dataset_lib.FileSystem:
  """tf.io.gfile as a dataset_lib.FileSystem (imports TensorFlow)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  def read_text(path: str) -> str:
    with tf.io.gfile.GFile(path, 'r') as f:
      return f.read()

  def stat(path: str) -> Optional[dataset_lib.FileInfo]:
    if not tf.io.gfile.exists(path):
      return None
    info = tf.io.gfile.stat(path)
    # gfile cannot tell a FIFO from a file; a local path is asked directly.
    regular = (not info.is_directory if '://' in path
               else os.path.isfile(path))
    return dataset_lib.FileInfo(info.length, regular)

  return dataset_lib.FileSystem(tf.io.gfile.exists, read_text,
                                tf.io.gfile.glob, stat)
