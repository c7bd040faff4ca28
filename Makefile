# The two Quickstart commands: `make demo` (the headline job) and `make test` (every check).
# Both set up what they need by themselves: a local venv in .venv and the compiled core.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.deps-installed

SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test build browser check-rust check-python clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check "maturin>=1.5,<2" \
		"click>=8.1" "pyyaml>=6" "pandas>=2" "pyarrow>=14" "scipy>=1.11" "matplotlib>=3.8" \
		"rich>=13" "pydantic>=2.6" "dask[distributed]>=2024.1" "pytest>=8" "hypothesis>=6" "ruff>=0.6"
	touch $@

# Compiles the Rust core into the venv (incremental; release, as benchmarks need it).
build: $(STAMP)
	VIRTUAL_ENV=$(abspath $(VENV)) $(BIN)/maturin develop --release -q

# The headline experiment, with few replications so that it finishes in well under a minute
# (`numasim reproduce multilevel-altix` alone uses the file's default replications).
demo: build
	$(BIN)/numasim reproduce origin-aware-m1 --out demo-out/origin-aware-m1

check-rust:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo test -p numasim-core

# Headless Chromium for the run-report test (tests/test_run_report.py), from Debian's packages.
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	command -v google-chrome >/dev/null || $(SUDO) apt-get install -y -q chromium || \
	{ $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium; }

check-python: build browser
	$(BIN)/ruff check python tests tools
	$(BIN)/ruff format --check python tests tools
	$(BIN)/pytest

test: check-rust check-python

clean:
	rm -rf $(VENV) target
