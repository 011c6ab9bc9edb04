# Scaling, Reproduced: one target per job. Every target creates .venv on first use.
PY    := .venv/bin/python
STAMP := .venv/.installed
BUILD := .venv/bin/jupyter-book build . --warningiserror --keep-going

.PHONY: test lint book full lab clean

LABSET := .venv/share/jupyter/lab/settings/overrides.json
$(STAMP): requirements.txt pyproject.toml
	python3 -m venv .venv
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	mkdir -p $(dir $(LABSET))  # JupyterLab opens MyST .md chapters as notebooks (Jupytext)
	echo '{"@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"markdown": "Jupytext Notebook", "myst": "Jupytext Notebook"}}}' > $(LABSET)
	touch $(STAMP)

lint: $(STAMP)  ## style first: it takes seconds (ruff formats the notebooks' code cells too)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

test: lint  ## lib's unit tests, every chapter under nbval, then the book from those executions
	$(PY) -m pytest
	$(BUILD)
	$(PY) -m pytest -m browser tests/test_book_pages.py tests/test_lab.py

book: $(STAMP)  ## the HTML book in _build/html; reuses the executions of the last `make test`
	$(PY) -m tests.harness prepare-cache
	$(BUILD)

full: $(STAMP)  ## the larger REPRO_SCALE=full sweeps (hours on a CPU)
	REPRO_SCALE=full $(PY) -m pytest notebooks book

lab: $(STAMP)  ## open the chapters in JupyterLab; it prints the address to open
	.venv/bin/jupyter lab --no-browser notebooks $$([ "$$(id -u)" = 0 ] && echo --allow-root)

clean:
	rm -rf _build .venv
