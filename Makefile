# One virtual environment per checkout, created on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo test test-fast bench clean

# The demo needs the runtime, TensorFlow and matplotlib; tests and benches
# also the clients the output is checked against (PyTorch among them).
$(STAMP): requirements.txt requirements-tf.txt requirements-inspect.txt \
          setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -r requirements.txt -r requirements-tf.txt \
	    -r requirements-inspect.txt
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

$(TEST_STAMP): $(STAMP) requirements-test.txt requirements-torch.txt \
               requirements-array_record.txt requirements-embeddings.txt
	$(BIN)/pip install --quiet -r requirements-test.txt
	touch $@

demo: $(STAMP)
	$(BIN)/python -m pipeline.demo

test: $(TEST_STAMP)
	$(BIN)/ruff check --quiet .
	$(BIN)/python -m pytest -q tests

# The pure functions and the small pieces, without whole runs (about a
# minute on two cores): the loop while changing code; `make test` before
# a commit.
test-fast: $(TEST_STAMP)
	$(BIN)/ruff check --quiet .
	$(BIN)/python -m pytest -q -m "not slow" tests

bench: $(TEST_STAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) scratch .pytest_cache
