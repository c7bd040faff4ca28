# The two Quickstart commands: `make demo` (the headline job) and `make test` (every check).
# Both set up what they need by themselves: a local venv in .venv and the compiled core.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.deps-installed

.PHONY: demo test build check-rust check-python clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check "maturin>=1.5,<2" \
		"click>=8.1" "pyyaml>=6" "pandas>=2" "pytest>=8" "hypothesis>=6" "ruff>=0.6"
	touch $@

# Compiles the Rust core into the venv (incremental; release, as benchmarks need it).
build: $(STAMP)
	VIRTUAL_ENV=$(abspath $(VENV)) $(BIN)/maturin develop --release -q

demo: build
	@for b in flat node-only two-level multilevel linux; do \
		echo "=================== mehta-m1, --domains $$b ==================="; \
		$(BIN)/numasim topology mehta-m1 --domains $$b || exit $$?; \
		echo; \
	done
	@echo "=================== mehta-m1, 300 CPU-bound 200 ms processes, linux26 ==================="
	$(BIN)/numasim run --machine mehta-m1 --workload "n=300,kind=cpu,exec=200,arrival=random" \
		--policy linux26 --domains multilevel

check-rust:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo test -p numasim-core

check-python: build
	$(BIN)/ruff check python tests tools
	$(BIN)/ruff format --check python tests tools
	$(BIN)/pytest

test: check-rust check-python

clean:
	rm -rf $(VENV) target
