"""TFDV statistics of a wavbeam dataset, in TFDV's own environment.

TFDV's last release for Python 3.11 (1.16.1) needs TensorFlow 2.16 and
numpy < 2, so it cannot share wavbeam's environment:

    python3 -m venv tfdv && tfdv/bin/pip install \\
        tensorflow-data-validation==1.16.1 \\
        tfx-bsl==1.16.1 tensorflow-metadata==1.16.1 tensorflow==2.16.2 \\
        tensorflow-serving-api==2.16.1 'apache-beam[gcp]==2.60.0' \\
        pyarrow==10.0.1 numpy==1.26.4 pandas==1.5.3
    tfdv/bin/python bench/tfdv_stats.py OUT [--split train]

Prints, for every feature of the split, the kind of statistics TFDV
computed (numeric, string or bytes) and, for numeric ones, mean, std, min
and max; exits 1 when a float feature got no numeric statistics. Uses only
TFDV and the standard library (no wavbeam import).
"""

import argparse
import json
import os
import sys

import tensorflow_data_validation as tfdv
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_metadata.proto.v0 import statistics_pb2


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('output_dir')
  parser.add_argument('--split', default='train')
  args = parser.parse_args(argv)
  with open(os.path.join(args.output_dir, 'metadata.json')) as f:
    meta = json.load(f)
  with open(os.path.join(args.output_dir, 'schema.pbtxt')) as f:
    schema = text_format.Parse(f.read(), schema_pb2.Schema())
  shards = [os.path.join(args.output_dir, s['file'])
            for s in meta['splits'][args.split]['shards']]
  stats = tfdv.generate_statistics_from_tfrecord(
      data_location=shards[0] if len(shards) == 1 else
      os.path.join(args.output_dir, f'{meta["name"]}-{args.split}.tfrecord-*'),
      stats_options=tfdv.StatsOptions(schema=schema))
  anomalies = tfdv.validate_statistics(stats, schema)
  missing = []
  for feature in stats.datasets[0].features:
    name = feature.path.step[0]
    kind = feature.WhichOneof('stats')
    kind_name = statistics_pb2.FeatureNameStatistics.Type.Name(feature.type)
    line = f'{name}: {kind_name} {kind}'
    if kind == 'num_stats':
      n = feature.num_stats
      line += (f' mean {n.mean:.6g} std {n.std_dev:.6g} min {n.min:.6g} '
               f'max {n.max:.6g}')
    print(line)
    if meta['schema'][name]['dtype'].startswith('float') and \
        meta['schema'][name]['encoding'] == 'float_list' and \
        kind != 'num_stats':
      missing.append(name)
  print(f'anomalies: {len(anomalies.anomaly_info)}')
  if missing:
    print(f'no numeric statistics for float features {missing}')
    return 1
  return 0


if __name__ == '__main__':
  sys.exit(main())
