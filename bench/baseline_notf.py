"""Baseline without TensorFlow: bench.baseline_numpy's loop, the same
tf.train.Example bytes, never importing TensorFlow.

The Example messages come from their schema declared here (the fields of
tensorflow/core/example/{example,feature}.proto, built with protobuf's
descriptor classes), and the TFRecord framing is written by hand: length,
masked CRC32C of the length, data, masked CRC32C of the data. It skips
TensorFlow's import (2-3 s), the fastest honest hand-written peer;
bench.baseline_numpy is the loop a typical user writes.

    python -m bench.baseline_notf IN OUT [--win_len 32768] [--procs 1]
        [--audio_format wav]
"""

import argparse
import os
import struct
import subprocess
import sys

from bench.baseline_numpy import list_audio


def example_class():
  """tf.train.Example's message class, from its schema alone."""
  from google.protobuf import descriptor_pb2
  from google.protobuf import descriptor_pool
  from google.protobuf import message_factory
  field = descriptor_pb2.FieldDescriptorProto
  proto = descriptor_pb2.FileDescriptorProto(
      name='bench_example.proto', package='bench', syntax='proto3')

  def message(name, *fields, nested=()):
    m = proto.message_type.add(name=name)
    for f in fields:
      m.field.add().CopyFrom(f)
    for n in nested:
      m.nested_type.add().CopyFrom(n)
    return m

  def repeated(kind):
    return field(name='value', number=1, label=field.LABEL_REPEATED,
                 type=kind)
  message('BytesList', repeated(field.TYPE_BYTES))
  message('FloatList', repeated(field.TYPE_FLOAT))
  message('Int64List', repeated(field.TYPE_INT64))
  feature = message('Feature', *(
      field(name=name, number=number, label=field.LABEL_OPTIONAL,
            type=field.TYPE_MESSAGE, type_name=f'.bench.{kind}',
            oneof_index=0)
      for number, name, kind in ((1, 'bytes_list', 'BytesList'),
                                 (2, 'float_list', 'FloatList'),
                                 (3, 'int64_list', 'Int64List'))))
  feature.oneof_decl.add(name='kind')
  entry = descriptor_pb2.DescriptorProto(name='FeatureEntry')
  entry.options.map_entry = True
  entry.field.add(name='key', number=1, label=field.LABEL_OPTIONAL,
                  type=field.TYPE_STRING)
  entry.field.add(name='value', number=2, label=field.LABEL_OPTIONAL,
                  type=field.TYPE_MESSAGE, type_name='.bench.Feature')
  message('Features', field(
      name='feature', number=1, label=field.LABEL_REPEATED,
      type=field.TYPE_MESSAGE, type_name='.bench.Features.FeatureEntry'),
          nested=(entry,))
  message('Example', field(name='features', number=1,
                           label=field.LABEL_OPTIONAL,
                           type=field.TYPE_MESSAGE,
                           type_name='.bench.Features'))
  pool = descriptor_pool.DescriptorPool()
  pool.Add(proto)
  return message_factory.GetMessageClass(
      pool.FindMessageTypeByName('bench.Example'))


def masked_crc(data: bytes) -> int:
  import crc32c
  crc = crc32c.crc32c(data)
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def framed(record: bytes) -> bytes:
  """A TFRecord: length, its masked CRC32C, data, its masked CRC32C."""
  length = struct.pack('<Q', len(record))
  return (length + struct.pack('<I', masked_crc(length)) + record +
          struct.pack('<I', masked_crc(record)))


def write_part(input_dir, output_dir, win_len, part, parts, n_fft=512,
               fft_hop=256, audio_format='wav'):
  import numpy as np
  import soundfile as sf
  example = example_class()
  paths = list_audio(input_dir, audio_format)
  classes = sorted({os.path.basename(os.path.dirname(p)) for p in paths})
  window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)).astype(
      np.float32)
  os.makedirs(output_dir, exist_ok=True)
  count = 0
  with open(os.path.join(output_dir, f'data-{part}.tfrecord'), 'wb') as w:
    for index in range(part, len(paths), parts):
      path = paths[index]
      x, _ = sf.read(path, dtype='float64')
      n = len(x) // win_len
      if n == 0:
        continue
      wins = x[:n * win_len].reshape(n, win_len)
      signal = np.clip(np.rint(wins * 2**31), -2**31, 2**31 - 1).astype(
          np.int32)
      frames = np.lib.stride_tricks.sliding_window_view(
          wins.astype(np.float32), n_fft, axis=-1)[:, ::fft_hop]
      spec = np.abs(np.fft.rfft(frames * window, axis=-1))
      label = os.path.basename(os.path.dirname(path))
      for i in range(n):
        e = example()
        f = e.features.feature
        f['signal'].bytes_list.value.append(signal[i].tobytes())
        f['spectrogram'].bytes_list.value.append(spec[i].tobytes())
        f['class'].bytes_list.value.append(label.encode())
        f['filepath'].bytes_list.value.append(path.encode())
        f['index'].int64_list.value.append(index)
        f['target'].int64_list.value.append(classes.index(label))
        f['num_classes'].int64_list.value.append(len(classes))
        f['win_start_idx'].int64_list.value.append(i * win_len)
        w.write(framed(e.SerializeToString()))
        count += 1
  return count


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('input_dir')
  parser.add_argument('output_dir')
  parser.add_argument('--win_len', type=int, default=32768)
  parser.add_argument('--procs', type=int, default=1)
  parser.add_argument('--audio_format', default='wav')
  parser.add_argument('--part', type=int, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.procs == 1 or args.part is not None:
    print(write_part(args.input_dir, args.output_dir, args.win_len,
                     args.part or 0, args.procs,
                     audio_format=args.audio_format))
    return
  children = [subprocess.Popen(
      [sys.executable, '-m', 'bench.baseline_notf', args.input_dir,
       args.output_dir, '--win_len', str(args.win_len), '--procs',
       str(args.procs), '--part', str(k), '--audio_format',
       args.audio_format]) for k in range(args.procs)]
  if any(child.wait() for child in children):
    sys.exit(1)


if __name__ == '__main__':
  main()
