"""schema.pbtxt: a tensorflow_metadata Schema for TFX tooling (TFXIO).

Raw-bytes arrays are BYTES features: the schema cannot state their decoded
dtype and shape, so annotations carry them (tags `wavbeam.dtype:int32`,
`wavbeam.shape:127,257`, `wavbeam.encoding:raw_bytes_little_endian`).
Written as protobuf text by hand so the pipeline needs no TFX package.
"""

from typing import List, Mapping

from pipeline import schema as schema_lib

FILE_NAME = 'schema.pbtxt'
_TYPES = {schema_lib.RAW_BYTES: 'BYTES', schema_lib.BYTES_LIST: 'BYTES',
          schema_lib.INT64_LIST: 'INT', schema_lib.FLOAT_LIST: 'FLOAT'}


def text(metadata: Mapping) -> str:
  schema = schema_lib.Schema.from_json(metadata['schema'])
  lines: List[str] = []
  for key, spec in schema.features:
    lines += ['feature {', f'  name: "{key}"',
              f'  type: {_TYPES[spec.encoding]}']
    if key == 'target' and metadata['num_classes'] > 0:
      lines += ['  int_domain {', '    min: 0',
                f'    max: {metadata["num_classes"] - 1}',
                '    is_categorical: true', '  }']
    lines += ['  presence {', '    min_fraction: 1.0', '  }', '  shape {',
              '  }']
    if spec.encoding == schema_lib.RAW_BYTES:
      lines += ['  annotation {',
                f'    tag: "wavbeam.dtype:{spec.dtype}"',
                f'    tag: "wavbeam.shape:{",".join(map(str, spec.shape))}"',
                '    tag: "wavbeam.encoding:raw_bytes_little_endian"',
                '  }']
    lines.append('}')
  return '\n'.join(lines) + '\n'
