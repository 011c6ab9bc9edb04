"""The notebook harness: every MyST-markdown notebook (chapters, scorecard) as tests under nbval.

Each code cell is one test item, reported as `notebooks/x.md:LINE (cell N)`. Sources store no
outputs, so nothing is compared: the notebooks' own asserts do the checking. Budgets (front
matter `repro: budget_s`, default 180 s; `budget_full_s`, default 1800 s, under
REPRO_SCALE=full) are promises about an idle 2-core machine, measured by
`benchmarks/budget.py`, not here: a correct chapter must pass on a slow or busy machine (a
shared 2-core runner can be 10x slower than idle). The harness keeps only a safety timeout, so
a stuck chapter still fails: SAFETY_FACTOR times the budget and never under SAFETY_FLOOR_S
(`--notebook-safety-factor 0` turns it off); nbval's own fixed waits (60 s for a kernel to
start, 5 s for a cell's output) are raised to match. Once a cell fails, the notebook's later
cells are skipped. Tests that read the chapters'
summaries (tests/test_scorecard.py) run after the notebooks, so they see this run's summaries.

Under pytest-xdist (`make test` runs `-n 2 --dist loadfile`) a notebook's cells stay on one
worker and the notebooks are handed out first, the largest budget first, so that two chapters
share the two cores instead of one chapter's serial cells leaving a core idle. Order between
workers is not guaranteed, so `make test` runs the tests that read summaries after, in a
second pass (`--summary-readers skip`, then `only`).

One execution serves the tests and the book: when a notebook passes at the default settings
(REPRO_SCALE=quick, REPRO_SEED=0), its outputs are written into the jupyter-cache that the book
build reads (`_build/.jupyter_cache`), under the key myst-nb computes from the notebook's code, so
`make book` re-executes nothing. The cache is wiped whenever `lib/` or the pins change (the code
key does not see them): `python -m tests.harness prepare-cache` does it for `make book`.
The root `conftest.py` loads these hooks.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import math
import re
import shutil
import sys
import time
from pathlib import Path

import jupytext
import pytest
import yaml
from nbval.plugin import IPyNbCell, IPyNbFile

from lib.runs import base_seed
from lib.scale import scale

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "_build" / ".jupyter_cache"  # execute.cache in _config.yml
CACHE_KEY = ROOT / "_build" / ".jupyter_cache.key"  # what the cached executions depend on
KEYED = [
    "requirements.txt",
    "pyproject.toml",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "lib").rglob("*.py")),
]

DEFAULT_BUDGET_S = {"quick": 180.0, "full": 1800.0}  # per notebook, by REPRO_SCALE
SAFETY_FACTOR = 30.0  # a notebook fails only past 30x its budget: budgets are benchmarked
SAFETY_FLOOR_S = 1800.0  # a kernel's start and imports cost the same whatever the budget
OUTPUT_WAIT_S = 300.0  # nbval waits 5 s for each output message once a cell has run
KERNEL_START_S = 600.0  # nbval waits 60 s for a kernel to start
# Test files that read the summaries the chapters write (book/results/): run after the notebooks
AFTER_NOTEBOOKS = ("test_scorecard.py", "test_summary_files.py")
BUDGET_KEY = {"quick": "budget_s", "full": "budget_full_s"}  # front matter `repro:` keys
CODE_CELL = re.compile(r"^```\{code-cell\}")


NOTEBOOK_SECONDS: dict[str, float] = {}  # notebook path -> wall time of its cells so far


def pytest_addoption(parser):
    """--notebook-safety-factor: the safety timeout in budgets (0 turns it off);
    --summary-readers: run only, or skip, what reads this run's summaries (for a parallel run)."""
    parser.addoption(
        "--notebook-safety-factor", type=float, default=SAFETY_FACTOR, metavar="N",
        help=f"stop a notebook past N times its budget, never before {SAFETY_FLOOR_S:.0f} s "
        f"(default {SAFETY_FACTOR:g}; 0: no time limit)",
    )  # fmt: skip
    parser.addoption(
        "--summary-readers", choices=("all", "skip", "only"), default="all",
        help="the tests in " + ", ".join(AFTER_NOTEBOOKS) + " and book/'s notebooks read the "
        "summaries the chapters write: 'skip' leaves them out (a parallel pass, where they would "
        "race the chapters), 'only' runs just them (the pass after); default: all, in order",
    )  # fmt: skip


def pytest_ignore_collect(collection_path, config):
    """With --summary-readers only (or skip), do not even import the test files, or parse the
    notebooks, that the pass leaves out."""
    choice = config.getoption("summary_readers")
    path = Path(collection_path)
    if choice == "all" or not path.is_file():
        return None
    test_file = path.suffix == ".py" and path.name.startswith("test_")
    if not (test_file or path.suffix == ".md"):
        return None
    return True if reads_summaries(path) != (choice == "only") else None


def reads_summaries(path: Path) -> bool:
    """Whether the test file or notebook at `path` reads the chapters' summaries: a test file in
    AFTER_NOTEBOOKS, or a notebook under book/, such as the scorecard."""
    return path.name in AFTER_NOTEBOOKS or (path.suffix == ".md" and path.parent.name == "book")


def patient_nbval(config) -> None:
    """Give nbval's fixed kernel-start wait the harness's patience (called at configure)."""
    if config.option.nbval_kernel_startup_timeout == 60:  # nbval's default, not the user's
        config.option.nbval_kernel_startup_timeout = KERNEL_START_S


def safety_timeout(budget_s: float, factor: float) -> float:
    """Seconds a notebook may run before it is taken for stuck (inf when factor is 0)."""
    if factor < 0:
        raise pytest.UsageError(f"--notebook-safety-factor must be >= 0, got {factor:g}")
    return math.inf if factor == 0 else max(SAFETY_FLOOR_S, factor * budget_s)


def shown(path: Path, root: Path) -> str:
    """`path` relative to the rootdir where it lies below it, else in full."""
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def pytest_runtest_logreport(report):
    """Keep each notebook's wall time so far, as its cells report it (also from xdist workers)."""
    seconds = dict(report.user_properties).get("notebook_seconds")
    if report.when == "call" and seconds is not None:
        NOTEBOOK_SECONDS[report.nodeid.split("::")[0]] = seconds


def pytest_terminal_summary(terminalreporter):
    """Print each notebook's wall time (budgets are checked by benchmarks/budget.py)."""
    if NOTEBOOK_SECONDS:
        terminalreporter.section("notebook wall times (budgets: benchmarks/budget.py)")
        for path, seconds in NOTEBOOK_SECONDS.items():
            terminalreporter.write_line(f"{seconds:7.1f} s  {path}")


def cache_key() -> str:
    """A digest of everything outside a notebook's code that its outputs depend on."""
    digest = hashlib.sha256()
    for name in KEYED:
        digest.update(name.encode() + b"\0" + (ROOT / name).read_bytes() + b"\0")
    return digest.hexdigest()


def prepare_cache() -> None:
    """Wipe the book's execution cache if lib/ or the pins changed since it was written."""
    key = cache_key()
    if CACHE_KEY.exists() and CACHE_KEY.read_text() == key:
        return
    shutil.rmtree(CACHE, ignore_errors=True)
    CACHE_KEY.parent.mkdir(parents=True, exist_ok=True)
    CACHE_KEY.write_text(key)


def caching() -> bool:
    """Executions feed the book only at the settings the book shows."""
    return scale() == "quick" and base_seed() == 0


def cache_execution(path: Path, outputs: list[list], seconds: float) -> None:
    """Store a passing notebook's outputs in the jupyter-cache, keyed as myst-nb keys it."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from myst_nb.core.read import read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    extensions = config.get("parse", {}).get("myst_enable_extensions", [])
    nb = read_myst_markdown_notebook(
        path.read_text(encoding="utf-8"), MdParserConfig(enable_extensions=extensions), path=path
    )
    code = [c for c in nb.cells if c.cell_type == "code"]
    if len(code) != len(outputs):
        raise RuntimeError(
            f"{path}: myst-nb reads {len(code)} code cells, the tests ran {len(outputs)}"
        )
    for n, (cell, outs) in enumerate(zip(code, outputs, strict=True), start=1):
        cell.outputs, cell.execution_count = outs, n
        for out in outs:
            if out.get("output_type") == "execute_result":
                out["execution_count"] = n
    bundle = CacheBundleIn(nb, str(path), data={"execution_seconds": seconds})
    with _cache_lock():  # two xdist workers may finish a notebook at the same moment
        get_cache(str(CACHE)).cache_notebook_bundle(bundle, check_validity=False, overwrite=True)


@contextlib.contextmanager
def _cache_lock():
    """Hold an exclusive lock on the execution cache (a lock file beside it) while writing."""
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    with open(CACHE.parent / ".jupyter_cache.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def pytest_sessionstart(session):
    """Make the execution cache consistent with lib/ and the pins before notebooks write to it
    (once, in the process that starts any xdist workers)."""
    if caching() and not hasattr(session.config, "workerinput"):
        prepare_cache()


def pytest_collection_modifyitems(config, items):
    """Keep or drop the summary readers (--summary-readers), then order: chapters first, the
    largest budget first (xdist hands out files in this order), the unit tests next, and the
    summary readers last, after every chapter has rewritten its summary."""
    choice = config.getoption("summary_readers")
    if choice != "all":
        wanted = choice == "only"
        config.hook.pytest_deselected(items=[i for i in items if reads_summaries(i.path) != wanted])
        items[:] = [i for i in items if reads_summaries(i.path) == wanted]

    def order(item) -> tuple:
        reader = reads_summaries(item.path)
        chapter = item.parent if isinstance(item, MystCell) and not reader else None
        budget = chapter.budget_s if chapter is not None else 0.0
        return (reader, chapter is None, -budget)

    items.sort(key=order)  # stable: cells keep their order within a notebook


def pytest_collect_file(file_path, parent):
    """Collect `.md` files under notebooks/ and book/ whose front matter names a kernel."""
    if file_path.suffix != ".md" or file_path.parent.name not in ("notebooks", "book"):
        return None
    if "_tmp_jupytext_" in file_path.name:  # left by an interrupted `jupytext --pipe`
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
        self.factor = self.config.getoption("notebook_safety_factor")
        self.timeout_s = safety_timeout(self.budget_s, self.factor)
        self.started_at: float | None = None
        self.failed_cell: int | None = None
        lines = [i + 1 for i, line in enumerate(text.splitlines()) if CODE_CELL.match(line)]
        cells = [c for c in self.nb.cells if c.cell_type == "code"]
        self.n_cells, self.outputs = len(cells), {}
        if len(lines) != len(cells):
            raise ValueError(
                f"{self.path}: found {len(lines)} code-cell fences, {len(cells)} cells"
            )
        for n, (line, cell) in enumerate(zip(lines, cells, strict=True)):
            item = MystCell.from_parent(
                self, name=f"line {line} (cell {n})", cell_num=n, cell=cell,
                options={"check": False}, line=line,
            )  # fmt: skip
            # The harness times the notebook; pytest-timeout (0: off) is the last safety net.
            net = 0 if math.isinf(self.timeout_s) else self.timeout_s + 60
            item.add_marker(pytest.mark.timeout(net))
            yield item


class MystCell(IPyNbCell):
    """One code cell; its timeout is what is left of the notebook's safety timeout."""

    def __init__(self, *args, line: int, **kwargs):
        from collections import defaultdict

        kwargs["options"] = defaultdict(bool, kwargs["options"])
        super().__init__(*args, **kwargs)
        self.line = line
        self.output_timeout = OUTPUT_WAIT_S  # nbval's 5 s fails a cell on a busy machine

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
                f"{notebook.path.name} ran past {notebook.timeout_s:.0f} s (its safety timeout: "
                f"{notebook.factor:g}x its {notebook.budget_s:g} s budget, at least "
                f"{SAFETY_FLOOR_S:.0f} s): is it stuck? --notebook-safety-factor 0 turns it off"
            )
        self.config.option.nbval_cell_timeout = None if math.isinf(left) else left
        try:
            super().runtest()
        except BaseException:
            notebook.failed_cell = self.cell_num
            raise
        finally:
            seconds = time.monotonic() - notebook.started_at
            self.user_properties.append(("notebook_seconds", seconds))
        notebook.outputs[self.cell_num] = self.test_outputs
        if len(notebook.outputs) == notebook.n_cells and caching():
            outputs = [notebook.outputs[n] for n in range(notebook.n_cells)]
            cache_execution(notebook.path, outputs, time.monotonic() - notebook.started_at)

    def reportinfo(self):
        rel = shown(self.path, self.config.rootpath)
        return self.path, self.line - 1, f"{rel}:{self.line} (cell {self.cell_num})"


if __name__ == "__main__":
    if sys.argv[1:] != ["prepare-cache"]:
        raise SystemExit("usage: python -m tests.harness prepare-cache")
    prepare_cache()
