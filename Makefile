# One virtual environment per checkout, created on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): requirements.txt requirements-tf.txt requirements-inspect.txt \
          requirements-test.txt setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -r requirements-test.txt
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

demo: $(STAMP)
	$(BIN)/python -m pipeline.demo

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

bench: $(STAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) scratch .pytest_cache
