"""The commands: `wavbeam run|inspect|verify|demo` (cli.py), each also
`python -m pipeline.commands.NAME` and, under its first name,
`python -m pipeline.run` (`.verify`, `.inspect_dataset`, `.demo`)."""
