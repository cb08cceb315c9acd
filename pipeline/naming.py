"""Names of the files a dataset is made of (shards, metadata, rejects)."""

METADATA_FILE = 'metadata.json'
REJECTS_FILE = 'rejects.jsonl'
TEMP_DIR = '.wavbeam-incomplete'  # shards before the run succeeds
STARTED_FILE = 'started'  # in TEMP_DIR: the run could write here


def shard_name(dataset_name: str, split: str, shard: int,
               num_shards: int) -> str:
  return f'{shard_prefix(dataset_name, split)}-{shard:05d}-of-{num_shards:05d}'


def shard_prefix(dataset_name: str, split: str) -> str:
  """File-name prefix of a split's shards, as TFDS names them."""
  return f'{dataset_name}-{split}.tfrecord'


def join(directory: str, name: str) -> str:
  """Joins for local paths and URIs (gs://...) alike."""
  return directory.rstrip('/') + '/' + name
