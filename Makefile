# flopfleet: `make demo` runs the main job, `make test` the tests; both set up .venv on first use.
#
# TORCH_SPEC pins the test environment's torch: on this platform torch==2.13.0 is a CPU build from local disk,
# while an unpinned torch downloads a CUDA build of several GB. With your own CUDA torch installed system-wide:
#     make demo TORCH_SPEC= VENV_ARGS=--system-site-packages
PYTHON ?= python3
VENV ?= .venv
VENV_ARGS ?=
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= agent,collector,dev
PYTEST_ARGS ?=
# make test runs the CPU tests in this many processes (pytest-xdist; each test file stays in one of them, so a file's
# shared servers and fixtures stay shared): 2 took the suite from 13.4 to 9.8 min on a 2-core machine (2026-12-02).
TEST_WORKERS ?= 2
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(subst =,_,$(subst $(eval) ,_,$(TORCH_SPEC)))

.PHONY: demo test test-gpu test-oldest lint format schema gpu-wheels clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV_ARGS) $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(if $(TORCH_SPEC),$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)")
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $@

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

test: $(STAMP)
	$(BIN)/python -m pytest -m "not gpu" $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile) $(PYTEST_ARGS)

test-gpu: $(STAMP)
	$(BIN)/python -m pytest -m gpu $(PYTEST_ARGS)

# The oldest torch and transformers the agent supports (pyproject's agent extra), in a venv of their own: the agent's
# tests run there as in .venv. PyPI's torch 2.2 is a CUDA build (about 2.5 GB with its nvidia-* wheels) that imports
# and runs without a GPU; it needs numpy < 2, and so a pyarrow before 26 for the collector the tests start. Another
# pair through the same target, e.g. the last transformers 4.x on this torch:
#     make test-oldest OLDEST_VENV=.venv-tf4 OLDEST_TORCH=torch==2.13.0 OLDEST_TRANSFORMERS=transformers==4.57.6
OLDEST_VENV ?= .venv-oldest
OLDEST_TORCH ?= torch==2.2.2
OLDEST_TRANSFORMERS ?= transformers==4.40.2
OLDEST_PINS ?= "numpy<2" "pyarrow<26"
OLDEST_TESTS ?= tests/agent tests/e2e
OLDEST_BIN := $(OLDEST_VENV)/bin
OLDEST_STAMP := $(OLDEST_VENV)/.installed-$(subst =,_,$(OLDEST_TORCH))-$(subst =,_,$(OLDEST_TRANSFORMERS))

$(OLDEST_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_BIN)/python -m pip install --quiet --upgrade pip
	$(OLDEST_BIN)/python -m pip install --quiet "$(OLDEST_TORCH)" "$(OLDEST_TRANSFORMERS)" $(OLDEST_PINS) \
		-e ".[agent,collector]" "pytest>=8"
	touch $@

test-oldest: $(OLDEST_STAMP)
	$(OLDEST_BIN)/python -c "import torch, transformers; print('torch', torch.__version__, transformers.__version__)"
	$(OLDEST_BIN)/python -m pytest -m "not gpu" $(OLDEST_TESTS) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy agent collector schemas

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

schema: $(STAMP)
	$(BIN)/python -c "from schemas.jsonschema import write_schemas; print(*write_schemas())"

# Wheels the lent GPU machine lacks (it has torch, transformers, httpx, typer, rich, nvidia-ml-py; no registry).
# httptools: the collector's HTTP limits (header cap and deadlines, connection cap) need its parser.
GPU_WHEELS := pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.7.0 typing-inspection==0.4.4 \
	typing-extensions==4.16.0 fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0 duckdb==2.0.1 \
	opentelemetry-api==1.45.2 httptools==0.9.0
gpu-wheels:
	$(PYTHON) -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
		--platform manylinux2014_x86_64 -d .whl $(GPU_WHEELS)

clean:
	rm -rf $(VENV) demo build *.egg-info .pytest_cache .mypy_cache .ruff_cache
