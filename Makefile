# Scaling, Reproduced: one target per job. Every target creates .venv on first use.
PY    := .venv/bin/python
STAMP := .venv/.installed
BUILD := .venv/bin/jupyter-book build . --warningiserror --keep-going

.PHONY: test lint format book course full lab clean
# Notebooks' code cells are linted as notebooks: Jupytext hands ruff an .ipynb view of each one.
NOTEBOOKS := $(filter-out %_tmp_jupytext_%,$(wildcard notebooks/*.md)) book/scorecard.md book/teaching.md
RUFF      := $(CURDIR)/.venv/bin/ruff
RUFFCFG   := --config $(CURDIR)/pyproject.toml
NBRUFF    := .venv/bin/jupytext --quiet --pipe-fmt ipynb

LABSET := .venv/share/jupyter/lab/settings/overrides.json
$(STAMP): requirements.txt pyproject.toml
	python3 -m venv .venv
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	mkdir -p $(dir $(LABSET))  # JupyterLab opens MyST .md chapters as notebooks (Jupytext)
	echo '{"@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"markdown": "Jupytext Notebook", "myst": "Jupytext Notebook"}}}' > $(LABSET)
	touch $(STAMP)

lint: $(STAMP)  ## style first, it takes seconds: ruff on lib/, tests/ and the notebooks' code
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(NBRUFF) --check "$(RUFF) check $(RUFFCFG) --output-format concise {}" $(NOTEBOOKS)
	$(NBRUFF) --check "$(RUFF) format --check $(RUFFCFG) {}" $(NOTEBOOKS)

format: $(STAMP)  ## apply ruff's formatting everywhere, the notebooks' code cells included
	$(PY) -m ruff check --fix-only --quiet .
	$(PY) -m ruff format .
	$(NBRUFF) --pipe "$(RUFF) check --fix-only --quiet $(RUFFCFG) {}" $(NOTEBOOKS)
	$(NBRUFF) --pipe "$(RUFF) format --quiet $(RUFFCFG) {}" $(NOTEBOOKS)

# Two pytest workers, one per core, each running a whole notebook (or test file) at a time on one
# core: REPRO_WORKERS=1 runs a chapter's jobs in its kernel (their results do not depend on the
# worker count), OMP_NUM_THREADS=1 keeps torch and BLAS to one thread. Two chapters side by side
# use the cores better than one chapter on both. The tests that read this run's summaries (the
# scorecard's among them) run after every chapter has written its own.
test: lint  ## lib's unit tests, every chapter under nbval, then the book from those executions
	REPRO_WORKERS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder \
	    --summary-readers skip
	$(PY) -m pytest --summary-readers only
	$(MAKE) course  # the book offers the pack's notebooks for download
	$(BUILD)
	$(PY) -m pytest -m browser tests/test_book_pages.py tests/test_lab.py

book: course  ## the HTML book in _build/html; reuses the executions of the last `make test`
	$(PY) -m tests.harness prepare-cache
	$(BUILD)

course: $(STAMP)  ## the course pack: _build/course/scaling-reproduced-course/ and its .zip
	$(PY) tools/course_pack.py _build/course

full: $(STAMP)  ## the larger REPRO_SCALE=full sweeps (hours on a CPU)
	REPRO_SCALE=full $(PY) -m pytest notebooks book

lab: $(STAMP)  ## open the chapters in JupyterLab; it prints the address to open
	.venv/bin/jupyter lab --no-browser notebooks $$([ "$$(id -u)" = 0 ] && echo --allow-root)

clean:
	rm -rf _build .venv
