"""The ArrayRecord (Grain) source under its first name:
pipeline/readers/array_record.py."""

from pipeline._aliases import alias

alias(__name__, 'pipeline.readers.array_record')
