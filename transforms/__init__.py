"""The job's stages, in the order data passes through them: runtime/
(what every stage runs on), inputs/, planning/, features/, writing/. Each
imports only the stages before it (tests/test_layers.py)."""
