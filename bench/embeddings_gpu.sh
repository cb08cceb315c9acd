#!/usr/bin/env bash
# The embedding feature on a GPU: the whole job's audio-seconds per second
# against the model's own batched rate, measured in the same session, on a
# wav2vec2-base-shaped model (hidden 768, 12 layers, random weights) in
# bfloat16, over 1 h of 10 s clips. Needs no network:
#
#   WHEELS=/path/to/wheels bench/embeddings_gpu.sh
#
# WHEELS: a folder holding wheels of requirements.txt and
# requirements-embeddings.txt (pip download -r ... -d WHEELS on a machine
# that can reach PyPI); VENV (default .venv-gpu) is made from them. With
# VENV set to an environment that already has them, WHEELS is not needed.
# About 3 minutes on one H100 after the install.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv-gpu}"
if [ ! -x "$venv/bin/python" ]; then
  : "${WHEELS:?set WHEELS to a folder of wheels, or VENV to a ready environment}"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --no-index --find-links "$WHEELS" \
    -r requirements.txt -r requirements-embeddings.txt
fi
"$venv/bin/python" -c 'import torch; assert torch.cuda.is_available(), "no GPU"'
exec "$venv/bin/python" -m bench.embeddings --device cuda --dtype bfloat16 \
  --hidden 768 --layers 12 --hours "${HOURS:-1}" --repeats "${REPEATS:-2}"
