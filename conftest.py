"""Run every MyST-markdown notebook (chapters and the scorecard) as tests under nbval.

Each code cell is one test item, reported as `notebooks/x.md:LINE (cell N)`. Sources store no
outputs, so nothing is compared: the notebooks' own asserts do the checking. Budgets (front
matter `repro: budget_s`, default 180 s; `budget_full_s`, default 1800 s, under
REPRO_SCALE=full) are promises about an idle 2-core machine, measured by
`benchmarks/budget.py`, not here: a correct chapter must pass on a slow or busy machine. The
harness keeps only a safety timeout of SAFETY_FACTOR times the budget, so a stuck chapter still
fails. Once a cell fails, the notebook's later cells are skipped. Tests that read the chapters'
summaries (tests/test_scorecard.py) run after the notebooks, so they see this run's summaries.
"""

from __future__ import annotations

import re
import time

import jupytext
import pytest
from nbval.plugin import IPyNbCell, IPyNbFile

from lib.scale import scale

DEFAULT_BUDGET_S = {"quick": 180.0, "full": 1800.0}  # per notebook, by REPRO_SCALE
SAFETY_FACTOR = 10  # a notebook fails only past 10x its budget: budgets are benchmarked
AFTER_NOTEBOOKS = ("test_scorecard.py",)  # test files that read the summaries the chapters write
BUDGET_KEY = {"quick": "budget_s", "full": "budget_full_s"}  # front matter `repro:` keys
CODE_CELL = re.compile(r"^```\{code-cell\}")


NOTEBOOK_SECONDS: dict[str, float] = {}  # notebook path -> wall time of its cells so far


def pytest_terminal_summary(terminalreporter):
    """Print each notebook's wall time (budgets are checked by benchmarks/budget.py)."""
    if NOTEBOOK_SECONDS:
        terminalreporter.section("notebook wall times (budgets: benchmarks/budget.py)")
        for path, seconds in NOTEBOOK_SECONDS.items():
            terminalreporter.write_line(f"{seconds:7.1f} s  {path}")


def pytest_collection_modifyitems(items):
    """Run the summary-reading tests last, after every notebook has rewritten its summary."""
    items.sort(key=lambda item: item.path.name in AFTER_NOTEBOOKS)


def pytest_collect_file(file_path, parent):
    """Collect `.md` files under notebooks/ and book/ whose front matter names a kernel."""
    if file_path.suffix != ".md" or file_path.parent.name not in ("notebooks", "book"):
        return None
    text = file_path.read_text(encoding="utf-8")
    if not text.startswith("---") or "kernelspec:" not in text.split("\n---", 1)[0]:
        return None
    return MystNotebook.from_parent(parent, path=file_path)


class MystNotebook(IPyNbFile):
    """A Jupytext MyST notebook run cell by cell in a kernel started in its own folder."""

    def collect(self):
        text = self.path.read_text(encoding="utf-8")
        self.nb = jupytext.reads(text, fmt="md:myst")
        run = scale()
        repro = self.nb.metadata.get("repro", {})
        self.budget_s = float(repro.get(BUDGET_KEY[run], DEFAULT_BUDGET_S[run]))
        self.timeout_s = SAFETY_FACTOR * self.budget_s
        self.started_at: float | None = None
        self.failed_cell: int | None = None
        lines = [i + 1 for i, line in enumerate(text.splitlines()) if CODE_CELL.match(line)]
        cells = [c for c in self.nb.cells if c.cell_type == "code"]
        if len(lines) != len(cells):
            raise ValueError(
                f"{self.path}: found {len(lines)} code-cell fences, {len(cells)} cells"
            )
        for n, (line, cell) in enumerate(zip(lines, cells, strict=True)):
            item = MystCell.from_parent(
                self, name=f"line {line} (cell {n})", cell_num=n, cell=cell,
                options={"check": False}, line=line,
            )  # fmt: skip
            item.add_marker(pytest.mark.timeout(self.timeout_s + 60))  # the harness times cells
            yield item


class MystCell(IPyNbCell):
    """One code cell; its timeout is what is left of the notebook's safety timeout."""

    def __init__(self, *args, line: int, **kwargs):
        from collections import defaultdict

        kwargs["options"] = defaultdict(bool, kwargs["options"])
        super().__init__(*args, **kwargs)
        self.line = line

    def setup(self):
        notebook = self.parent
        if notebook.failed_cell is not None:
            pytest.skip(f"cell {notebook.failed_cell} of this notebook failed")
        if notebook.started_at is None:
            notebook.started_at = time.monotonic()

    def runtest(self):
        notebook = self.parent
        left = notebook.timeout_s - (time.monotonic() - notebook.started_at)
        if left <= 0:
            notebook.failed_cell = self.cell_num
            pytest.fail(
                f"{notebook.path.name} ran past {notebook.timeout_s:.0f} s "
                f"({SAFETY_FACTOR}x its {notebook.budget_s:.0f} s budget): is it stuck?"
            )
        self.config.option.nbval_cell_timeout = left
        try:
            super().runtest()
        except BaseException:
            notebook.failed_cell = self.cell_num
            raise
        finally:
            rel = str(notebook.path.relative_to(self.config.rootpath))
            NOTEBOOK_SECONDS[rel] = time.monotonic() - notebook.started_at

    def reportinfo(self):
        rel = self.path.relative_to(self.config.rootpath)
        return self.path, self.line - 1, f"{rel}:{self.line} (cell {self.cell_num})"
