# Two commands set up and check everything on a fresh machine: `make test`, `make demo`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PYTEST_ARGS ?= -n 2

.PHONY: test demo install bench-op clean

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $@

install: $(VENV)/.installed

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

bench-op: install
	$(PY) benchmarks/bench_op_cpu.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info

# The main job: continuous vs softmax PatchTST on ETTh1 (short schedule), scores and a plot in demo_out/.
demo: install
	$(PY) -m tsattn.demo --epochs 3 --out demo_out
