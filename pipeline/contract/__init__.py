"""The dataset contract: what a wavbeam dataset is, on disk.

The lowest layer. The writer (transforms/), every reader (replay,
numpy_reader, torch_dataset, array_record_source) and the commands
(run, verify, inspect) import it; it imports nothing above it, and no
Beam or TensorFlow (the readers import it without them):

- errors: WavbeamError, the base of every error the tool raises on
  purpose, and DatasetError, the readers';
- schema: FeatureSpec and Schema, one description of an example, and the
  base keys every example has;
- example_codec: the tf.train.Example encoder and decoder the schema
  drives;
- tfrecord: record framing (CRCs), and the `tfrecord` package's index;
- array_record_file: the ArrayRecord copies (--array_record);
- naming: file and folder names (shards, temp folder, TFDS layout);
- metadata: metadata.json, written and read, one checked reader;
- parts: the parts --append adds, and the merged view readers read by;
- dataset: opening a dataset folder, with the caller's file system calls:
  its metadata, a split, and the files it lists, checked;
- tfds_info, tfx_schema: the TFDS and TFX files.
"""
