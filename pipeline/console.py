"""What the commands print: wording shared by run, inspect and verify."""


def plural(count: int, noun: str) -> str:
  """'1 shard', '2 shards', '0 files'."""
  return f'{count} {noun}{"" if count == 1 else "s"}'
