# gpushare: `make demo` and `make test` work on a fresh machine with only the base toolchain
# (Rust, Python 3.9+ with venv). Both create .venv at the repository root on first use; later runs
# reuse it and only rebuild what changed.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.deps-installed
# CPU builds of everything gpushare talks to, plus the notebook stack.
DEPS := numpy torch "jax[cpu]" tensorflow-cpu ipython ipykernel pytest maturin nbformat nbclient pandas tqdm
CARGO_FLAGS ?=

.PHONY: demo test test-rust test-python develop lab bench clean-venv

$(STAMP):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(DEPS)
	touch $(STAMP)

# maturin develop rebuilds only when the Rust or Python sources changed (cargo is incremental).
develop: $(STAMP)
	$(VENV)/bin/maturin develop -q --release --features python 2>&1 | grep -v "^📦\|^🔗\|^🐍\|^⚠️" || true
	$(PY) -c "import gpushare, gpushare._native"

demo: develop
	$(PY) examples/cpu_demo.py

test-rust:
	cargo test --no-default-features -q $(CARGO_FLAGS)

test-python: develop
	$(PY) -m pytest -q tests

test: develop test-rust test-python

bench: develop
	$(PY) benchmarks/bench_core.py

lab: develop
	$(PIP) install -q jupyterlab
	$(VENV)/bin/jupyter lab notebooks/

clean-venv:
	rm -rf $(VENV)
