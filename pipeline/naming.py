"""Names of the files a dataset is made of (shards, metadata, rejects)."""

METADATA_FILE = 'metadata.json'
REJECTS_FILE = 'rejects.jsonl'
SHARD_NAME_TEMPLATE = '-SSSSS-of-NNNNN'


def shard_prefix(dataset_name: str, split: str) -> str:
  """File-name prefix of a split's shards, as TFDS names them."""
  return f'{dataset_name}-{split}.tfrecord'


def join(directory: str, name: str) -> str:
  """Joins for local paths and URIs (gs://...) alike."""
  return directory.rstrip('/') + '/' + name
