# One virtual environment per checkout, created on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo test test-fast bench clean prism

# Beam's Prism runner, a Go program built from the Go module proxy into the
# venv once (about 5 min on 2 cores; Go's module and build caches keep it
# after). Without a Go toolchain there is nothing to build, and the Prism
# test says so when it skips.
PRISM_VERSION := v2.77.0
PRISM := $(BIN)/prism

# The demo needs the runtime, TensorFlow and matplotlib; tests and benches
# also the clients the output is checked against (PyTorch among them).
# The environment is about 11 GB, 6.7 of them PyTorch's CUDA libraries (the
# only Linux wheel PyPI serves, run here on CPU): pip keeps no second copy
# of the wheels in its cache, and PyTorch is installed on its own, so that
# a command's downloaded wheels, held until it ends, are never all at once
# on the disk beside what they install.
PIP := $(BIN)/pip install --quiet --no-cache-dir

$(STAMP): requirements.txt requirements-tf.txt requirements-inspect.txt \
          setup.py
	$(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements.txt -r requirements-tf.txt -r requirements-inspect.txt
	$(PIP) --no-deps --no-build-isolation -e .
	touch $@

$(TEST_STAMP): $(STAMP) requirements-test.txt requirements-torch.txt \
               requirements-array_record.txt requirements-embeddings.txt
	$(PIP) -r requirements-torch.txt
	$(PIP) -r requirements-test.txt
	touch $@

demo: $(STAMP)
	$(BIN)/python -m pipeline.demo

# Two pytest workers, each given whole modules (--dist loadfile), so that a
# module's fixtures (its corpora, its runs) are made once: most of a test's
# time is a command's process starting on one core, and two overlap. The
# modules go in the order tests/conftest.py collects them, longest first.
PYTEST := $(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder

test: $(TEST_STAMP) prism
	$(BIN)/ruff check --quiet .
	$(PYTEST) tests

prism: $(STAMP)
	@if [ -x $(PRISM) ]; then :; \
	elif command -v go >/dev/null; then \
	  echo "building Beam's Prism runner $(PRISM_VERSION) into $(PRISM)"; \
	  GOBIN=$(abspath $(BIN)) go install \
	    github.com/apache/beam/sdks/v2/go/cmd/prism@$(PRISM_VERSION); \
	else echo "no Go toolchain: Beam's Prism runner is not built"; fi

# The pure functions and the small pieces, without whole runs (about a
# minute on two cores): the loop while changing code; `make test` before
# a commit.
test-fast: $(TEST_STAMP)
	$(BIN)/ruff check --quiet .
	$(PYTEST) -m "not slow" tests

bench: $(TEST_STAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) scratch .pytest_cache
