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
# Distributions of wall-clock times (ms since the epoch): the first start
# and the last end of shard writing bound the phase whose throughput scales
# with workers, without the runner's fixed start-up and planning stages.
SHARD_STARTED_MS = 'shard_started_ms'
SHARD_FINISHED_MS = 'shard_finished_ms'


def counter(name):
  return Metrics.counter(NAMESPACE, name)


def distribution(name):
  return Metrics.distribution(NAMESPACE, name)
