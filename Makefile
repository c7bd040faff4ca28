# The two Quickstart commands: `make demo` (the headline job) and `make test` (every check).
# Both set up what they need by themselves: a local venv in .venv and the compiled core.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.deps-installed

SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test build browser kernel-tools kernel-image check-rust check-python clean

$(BIN)/python:
	@echo "numasim: creating $(VENV) with $(PYTHON)"
	@$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	@echo "numasim: installing the Python packages into $(VENV)"
	@$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	@$(BIN)/python -m pip install -q --disable-pip-version-check "maturin>=1.5,<2" \
		"click>=8.1" "pyyaml>=6" "pandas>=2" "numpy>=1.26" "pyarrow>=14" "scipy>=1.11" "matplotlib>=3.8" \
		"rich>=13" "pydantic>=2.6" "dask[distributed]>=2024.1" "pytest>=8" "hypothesis>=6" "ruff>=0.6"
	@touch $@

# Compiles the Rust core into the venv (incremental; release, as benchmarks need it). Its
# output goes to .venv/build.log and is shown only when the build fails.
build: $(STAMP)
	@echo "numasim: building the Rust core (release; a first build takes a few minutes)"
	@VIRTUAL_ENV=$(abspath $(VENV)) PIP_QUIET=1 $(BIN)/maturin develop --release -q \
		> $(VENV)/build.log 2>&1 || { cat $(VENV)/build.log; exit 1; }

# The headline experiment at its file's 510 replications (a rerun reuses the stored runs: see
# docs/experiments.md; `numasim reproduce origin-aware-m1 --fresh` starts over).
demo: build
	@$(BIN)/numasim reproduce origin-aware-m1 --out demo-out/origin-aware-m1

check-rust:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo test -p numasim-core

# Headless Chromium for the run-report test (tests/test_run_report.py), from Debian's packages.
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	command -v google-chrome >/dev/null || $(SUDO) apt-get install -y -q chromium || \
	{ $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium; }

# QEMU and a static busybox for `numasim kernel-run` (docs/kernel-runs.md), from Debian's
# packages; the kernel images are downloaded by kernel-run itself into ~/.cache/numasim.
kernel-tools:
	@command -v qemu-system-x86_64 >/dev/null && dpkg -s busybox-static >/dev/null 2>&1 || \
	$(SUDO) apt-get install -y -q qemu-system-x86 busybox-static || \
	{ $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q qemu-system-x86 busybox-static; }

# The newest Debian 6.12 kernel image (downloaded once into ~/.cache/numasim/kernels), for the
# tests that boot it under QEMU.
kernel-image: build kernel-tools
	@$(BIN)/python -m numasim.kernel.images 6.12 > /dev/null

check-python: build browser kernel-image
	$(BIN)/ruff check python tests tools
	$(BIN)/ruff format --check python tests tools
	$(BIN)/pytest

test: check-rust check-python

clean:
	rm -rf $(VENV) target
