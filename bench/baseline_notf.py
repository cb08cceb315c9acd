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

import os
import struct

from bench.baseline_numpy import run_parts, windowed_files


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
  example = example_class()
  os.makedirs(output_dir, exist_ok=True)
  count = 0
  with open(os.path.join(output_dir, f'data-{part}.tfrecord'), 'wb') as w:
    for index, path, label, classes, signal, spec in windowed_files(
        input_dir, win_len, part, parts, n_fft, fft_hop, audio_format):
      n = len(signal)
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
  run_parts(argv, 'bench.baseline_notf', write_part,
            __doc__.split('\n\n')[0])


if __name__ == '__main__':
  main()
