# Two commands set up and check everything on a fresh machine: `make test`, `make demo`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PYTEST_ARGS ?= -n 2

.PHONY: test install bench-op clean

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
