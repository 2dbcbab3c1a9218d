# gpushare: `make demo` and `make test` work on a fresh machine with only the base toolchain
# (Rust, Python 3.9+ with venv). Both create .venv at the repository root on first use; later runs
# reuse it and only rebuild what changed.

# bash: the browser-deps recipe needs pipefail to see apt-get fail through tee.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
# What the demo runs: the tour notebook (torch, JAX, TensorFlow and NumPy, a pandas frame and a
# matplotlib plot) through `gpushare run` on the ipykernel kernel, the `gpushare bench` sweep, and
# maturin to build the extension.
DEMO_DEPS := numpy torch "jax[cpu]" tensorflow-cpu ipython ipykernel maturin pandas matplotlib
# What only the tests add. The CPU conformance matrix runs MLX ("mlx[cpu]": the core wheel has no
# backend on Linux, mlx-cpu is 10.5 MB), Warp's CPU device (warp-lang, one 150 MB wheel for CPU and
# CUDA: about a tenth of what torch, TensorFlow and Paddle already take, and the only way its
# legacy-only DLPack is checked on every change) and cuda.core (cuda-core, 6.6 MB, which describes
# host memory without a GPU). PyCUDA has no wheel: its sdist needs the CUDA toolkit, so CI tests its
# adapter against a stand-in (docs/pycuda-on-gpu.md). JupyterLab renders notebooks for the browser tests.
TEST_DEPS := paddlepaddle "mlx[cpu]" warp-lang cuda-core pytest nbformat nbclient ipywidgets tqdm jupyterlab
LAB_DEPS := jupyterlab
# One stamp per dependency set, named by a checksum of its list: pip runs again only when that
# list changes, not on every run and not when anything else in this file does.
deps_stamp = $(VENV)/.deps-$(1)-$(shell printf '%s' '$(2)' | cksum | cut -d' ' -f1)
DEMO_STAMP := $(call deps_stamp,demo,$(DEMO_DEPS))
TEST_STAMP := $(call deps_stamp,test,$(TEST_DEPS))
LAB_STAMP := $(call deps_stamp,lab,$(LAB_DEPS))
VENV_STAMP := $(VENV)/.created
CARGO_FLAGS ?=

.PHONY: demo test test-rust test-python test-dist test-oldnumpy develop dist lab bench browser-deps clean-venv

$(VENV_STAMP):
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PIP) install -q --upgrade pip
	@touch $@

# $(1): the set's name, $(2): its packages.
define install_deps
	@echo "Installing $(1) dependencies (once; a few minutes on a fresh machine): $(2)"
	@$(PIP) install -q $(2)
	@rm -f $(VENV)/.deps-$(1)-*
	@touch $@
endef

$(DEMO_STAMP): | $(VENV_STAMP)
	$(call install_deps,demo,$(DEMO_DEPS))

$(TEST_STAMP): $(DEMO_STAMP)
	$(call install_deps,test,$(TEST_DEPS))

$(LAB_STAMP): $(DEMO_STAMP)
	$(call install_deps,lab,$(LAB_DEPS))

# maturin develop rebuilds only when the Rust or Python sources changed (cargo is incremental); its
# output is shown only when it fails. A .venv made before the distribution was renamed holds
# gpushare's old "gpushare" install (its summary names DLPack; the unrelated PyPI project's does
# not): removed so that one copy remains.
develop: $(DEMO_STAMP)
	@$(PY) -c "import importlib.metadata as m; s = m.metadata('gpushare')['Summary'] or ''; exit(0 if 'DLPack' in s else 1)" 2>/dev/null \
	  && $(PIP) uninstall -q -y gpushare || true
	@test -f $(VENV)/.built || echo "Building gpushare (once; a few minutes on a fresh machine)"
	@out=$$($(VENV)/bin/maturin develop -q --release 2>&1) || { echo "$$out"; exit 1; }
	@$(PY) -c "import gpushare, gpushare._native" && touch $(VENV)/.built

# The main job, on CPU (CUDA hidden, so the outputs read the same on any machine): the tour notebook
# executed by gpushare's own runner against the gpushare kernel, and a small transfer-path sweep.
DEMO_ENV := CUDA_VISIBLE_DEVICES=
demo: develop
	@$(VENV)/bin/gpushare kernel install --sys-prefix >/dev/null
	@mkdir -p out
	$(DEMO_ENV) $(VENV)/bin/gpushare run notebooks/01_tour_cpu.ipynb -o out/01_tour_cpu.ipynb --timeout 600
	$(DEMO_ENV) $(VENV)/bin/gpushare bench 'torch->jax' --sizes 4KiB,64KiB --device cpu --json out/bench.json --html out/bench.html
	@echo
	@echo "Outputs:"
	@echo "  out/01_tour_cpu.ipynb   the tour, executed: make lab opens it in JupyterLab"
	@echo "  out/bench.html          torch->jax on CPU, every transfer path at 4 KiB and 64 KiB (open in a browser)"
	@echo "  out/bench.json          the same sweep as data"

test-rust:
	cargo test --workspace --exclude gpushare-python -q $(CARGO_FLAGS)

# The whole Python set, the browser tests included: they fail, rather than skip, without a browser,
# and the run ends with a line that says how many of them ran.
test-python: develop $(TEST_STAMP) browser-deps
	GPUSHARE_REQUIRE_BROWSER=1 GPUSHARE_BROWSER_DEPS_LOG=$(CURDIR)/$(BROWSER_LOG) $(PY) -m pytest -q tests

# Headless Chromium for tests/test_browser*.py, installed with apt-get when we are root, and
# JupyterLab. What the install printed stays on the terminal and in $(BROWSER_LOG); when it fails,
# `make test`'s browser tests fail (they do not skip) and quote that log's end.
BROWSER_LOG := $(VENV)/browser-deps.log
browser-deps: $(TEST_STAMP)
	@: > $(BROWSER_LOG)
	@set -o pipefail; $(PY) -c "import jupyterlab" 2>/dev/null || $(PIP) install -q jupyterlab 2>&1 | tee -a $(BROWSER_LOG) \
	  || echo "browser-deps: could not install jupyterlab; the browser tests will fail" | tee -a $(BROWSER_LOG)
	@command -v chromium >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "browser-deps: installing chromium with apt-get"; \
	    set -o pipefail; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } 2>&1 | tee -a $(BROWSER_LOG) \
	      || echo "browser-deps: apt-get could not install chromium (its output is above); the browser tests will fail" | tee -a $(BROWSER_LOG); \
	  else \
	    echo "browser-deps: no chromium, and apt-get as root is not available to install it; the browser tests will fail" | tee -a $(BROWSER_LOG); \
	  fi; }

# What users install: an abi3 wheel (CPython 3.9+) for manylinux2014 (glibc 2.17), linked against
# zig's glibc 2.17 stubs whatever this machine's glibc is, stripped (pyproject.toml), and an sdist.
# tests/test_dist.py checks them: tag, glibc floor, no libcuda, no symbols, sdist contents.
DIST_TOOLS := $(VENV)/.dist-tools
$(DIST_TOOLS): $(DEMO_STAMP)
	$(PIP) install -q ziglang auditwheel
	touch $(DIST_TOOLS)

# maturin finds zig as `python3 -m ziglang`, so the venv goes first on PATH.
dist: $(DIST_TOOLS)
	rm -rf dist
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/maturin build -q --release --zig --compatibility manylinux2014 -i $(PY) -o dist
	$(VENV)/bin/maturin sdist -o dist

# The oldest NumPy gpushare supports, on the oldest Python it supports where this machine has one
# (scripts/oldest_python.sh), with nothing else but IPython: NumPy's DLPack export changed in 2.1
# (max_version, versioned capsules, READ_ONLY). gpushare comes from the wheel `make dist` built.
OLD_VENV := .venv-oldnumpy
OLD_NUMPY := 1.26.*
test-oldnumpy: dist
	@old=$$(scripts/oldest_python.sh); \
	if [ -z "$$old" ]; then echo "test-oldnumpy: SKIPPED: no Python 3.9-3.12 here (NumPy 1.26 has wheels for those only)"; exit 0; fi; \
	set -e; test -x $(OLD_VENV)/bin/python || $$old -m venv $(OLD_VENV); \
	$(OLD_VENV)/bin/python -m pip install -q "numpy==$(OLD_NUMPY)" pytest dist/*.whl; \
	$(OLD_VENV)/bin/python -m pip install -q --force-reinstall --no-deps dist/*.whl; \
	$(OLD_VENV)/bin/python -c "import sys, numpy, gpushare; assert numpy.__version__.startswith('1.26.'), numpy.__version__; print('test-oldnumpy: Python', sys.version.split()[0], '| NumPy', numpy.__version__, '| gpushare', gpushare.__version__, 'from', gpushare.__file__)"; \
	$(OLD_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/test_numpy_compat.py

# The wheel and sdist as built (tests/test_dist.py skips without GPUSHARE_DIST); building the sdist
# into a wheel shares target/ so that only gpushare itself is compiled again.
test-dist: dist $(TEST_STAMP)
	GPUSHARE_DIST=dist CARGO_TARGET_DIR=$${CARGO_TARGET_DIR:-$(CURDIR)/target} $(PY) -m pytest -q tests/test_dist.py

test: develop browser-deps test-rust test-python test-dist test-oldnumpy

bench: develop
	$(PY) benchmarks/bench_core.py

# JupyterLab rooted at the repository, so that out/ and notebooks/ are both in its file browser; it
# opens the executed tour when `make demo` has made it.
lab: develop $(LAB_STAMP)
	@$(VENV)/bin/gpushare kernel install --sys-prefix >/dev/null
	$(VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)" $(wildcard out/01_tour_cpu.ipynb)

clean-venv:
	rm -rf $(VENV) $(OLD_VENV)
