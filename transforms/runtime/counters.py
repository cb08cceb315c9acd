"""Beam metrics the pipeline keeps, by name: one place for the DoFns that
count and for the launcher that reports (Dataflow's and Flink's UIs show
them too while a job runs).
"""

from apache_beam.metrics import Metrics

NAMESPACE = 'wavbeam'

FILES_PROBED = 'files_probed'
FILES_REJECTED = 'files_rejected'
WINDOWS_REJECTED = 'windows_rejected'
EXAMPLES_WRITTEN = 'examples_written'
BYTES_WRITTEN = 'bytes_written'
SHARDS_WRITTEN = 'shards_written'


def counter(name):
  return Metrics.counter(NAMESPACE, name)
