# Scaling, Reproduced: one target per job. `make test` and `make book` create .venv on first use.
PY      := .venv/bin/python
STAMP   := .venv/.installed
# The execution cache keys on notebook code only, so it is wiped whenever lib/ or the pins change.
LIBSTAMP := _build/.lib-stamp

.PHONY: test book full lab clean

$(STAMP): requirements.txt pyproject.toml
	python3 -m venv .venv
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $(STAMP)

test: $(STAMP)  ## unit tests of lib/, then every chapter under nbval
	$(PY) -m pytest

full: $(STAMP)  ## the larger REPRO_SCALE=full sweeps (hours on a CPU)
	REPRO_SCALE=full $(PY) -m pytest notebooks book

$(LIBSTAMP): $(STAMP) $(wildcard lib/*.py) requirements.txt
	rm -rf _build/.jupyter_cache
	mkdir -p _build && touch $(LIBSTAMP)

book: $(STAMP) $(LIBSTAMP)  ## execute every chapter (cached) and build the HTML into _build/html
	.venv/bin/jupyter-book build . --warningiserror --keep-going

LABSET := .venv/share/jupyter/lab/settings/overrides.json
lab: $(STAMP)  ## open the chapters in JupyterLab (MyST .md files open as notebooks)
	test -x .venv/bin/jupyter-lab || $(PY) -m pip install --quiet jupyterlab==4.6.6
	mkdir -p $(dir $(LABSET))
	echo '{"@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"markdown": "Jupytext Notebook", "myst": "Jupytext Notebook"}}}' > $(LABSET)
	.venv/bin/jupyter lab notebooks

clean:
	rm -rf _build .venv
