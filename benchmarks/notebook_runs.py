"""Run chapters as a reader would, measuring wall and CPU time; shared by budget.py and seeds.py.

Each chapter runs in a fresh kernel started in notebooks/ (as the tests and the book run it),
under the environment given (REPRO_SCALE, REPRO_SEED, REPRO_RESULTS_DIR, ...). CPU time is the
sum over the kernel and every process it starts (the parallel runner's workers), sampled
while it runs, so it is close to what the run would cost on an idle machine.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import jupytext
import psutil
import yaml
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
DEFAULT_BUDGET_S = {"quick": 180.0, "full": 1800.0}
BUDGET_KEY = {"quick": "budget_s", "full": "budget_full_s"}


OUTCOMES = ("ok", "crashed", "interrupted")
STOPPING = threading.Event()  # set once Ctrl-C or SIGTERM asked the benchmark to stop


@dataclass(frozen=True)
class NotebookRun:
    """One execution of a chapter: times, the budget at its scale, and how it ended: "ok",
    "crashed" (a cell raised) or "interrupted" (a timeout, a dead kernel, Ctrl-C or SIGTERM),
    with the error; `stop` is set when the user asked the whole benchmark to stop."""

    chapter: str
    wall_s: float
    cpu_s: float
    budget_s: float
    error: str | None
    outcome: str = "ok"
    stop: bool = False


def chapters(selected: list[str]) -> list[Path]:
    """The chapter files whose names start with one of `selected` (all when empty)."""
    paths = sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.md") if "_tmp_jupytext_" not in p.name)
    if not selected:
        return paths
    chosen = [p for p in paths if any(p.name.startswith(s.zfill(2)) for s in selected)]
    if not chosen:
        raise SystemExit(f"no chapter matches {selected}; chapters: {[p.stem for p in paths]}")
    return chosen


def budget(path: Path, scale: str) -> float:
    """The chapter's time budget at `scale`, from its front matter (`repro:`)."""
    front = yaml.safe_load(path.read_text(encoding="utf-8").split("\n---", 1)[0].strip("-\n"))
    return float(front.get("repro", {}).get(BUDGET_KEY[scale], DEFAULT_BUDGET_S[scale]))


class _CpuSampler(threading.Thread):
    """Sum the CPU seconds of a process tree, sampling every `period` seconds until stopped."""

    def __init__(self, root_pid: int, period: float = 0.25):
        super().__init__(daemon=True)
        self.root, self.period, self.seen = root_pid, period, {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.period):
            self.sample()

    def sample(self) -> None:
        try:
            procs = psutil.Process(self.root).children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for proc in procs:
            try:
                t = proc.cpu_times()
                self.seen[proc.pid] = t.user + t.system  # children are sampled themselves
            except psutil.NoSuchProcess:
                pass

    @property
    def cpu_s(self) -> float:
        return sum(self.seen.values())


def execute(path: Path, env: dict[str, str], timeout_s: float) -> NotebookRun:
    """Execute one chapter under `env` (added to this process's environment) and time it."""
    scale = env.get("REPRO_SCALE", os.environ.get("REPRO_SCALE", "quick"))
    nb = jupytext.reads(path.read_text(encoding="utf-8"), fmt="md:myst")
    client = NotebookClient(nb, timeout=int(timeout_s), kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})  # fmt: skip
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits this process's environment
    sampler = _CpuSampler(os.getpid())
    start, error, outcome = time.monotonic(), None, "ok"
    try:
        sampler.start()
        failure = _execute_in_thread(client)
        if failure is not None:  # report it, run the next chapter
            error, outcome = _failure(failure, timeout_s)
    finally:
        wall = time.monotonic() - start
        sampler.done.set()
        sampler.join()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key)
            else:
                os.environ[key] = value
    stop = STOPPING.is_set()
    if stop and outcome != "ok":  # its kernel was stopped with the benchmark
        error, outcome = "stopped by Ctrl-C or SIGTERM", "interrupted"
    return NotebookRun(path.stem, wall, sampler.cpu_s, budget(path, scale), error, outcome, stop)


def _execute_in_thread(client: NotebookClient) -> BaseException | None:
    """Run the notebook in a thread and return what it raised, if anything. Outside the main
    thread nbclient installs no signal handlers: its own would shut the kernel down on SIGTERM
    or Ctrl-C and then restore the default, so a later signal killed the benchmark silently."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            client.execute()
        except BaseException as err:  # noqa: BLE001 - handed to the caller
            raised.append(err)

    worker = threading.Thread(target=run, name="notebook", daemon=True)
    worker.start()
    while worker.is_alive():  # a short join, so that signal handlers run meanwhile
        worker.join(0.5)
    return raised[0] if raised else None


def _failure(err: BaseException, timeout_s: float) -> tuple[str, str]:
    """(error, outcome) of a run that raised: a cell's error is a crash; a timeout or a dead
    kernel is an interruption."""
    if isinstance(err, CellExecutionError):
        last = str(err).strip().splitlines()[-1]
        return re.sub(r"\x1b\[[0-9;]*m", "", last)[:200], "crashed"  # without its colours
    if isinstance(err, CellTimeoutError):
        return f"a cell ran past the {timeout_s:.0f} s timeout", "interrupted"
    if isinstance(err, DeadKernelError):
        return "the kernel died (killed, or out of memory)", "interrupted"
    return f"{type(err).__name__}: {err}"[:200], "crashed"


def stop_on_sigterm() -> None:
    """Turn SIGTERM (e.g. from `timeout`) and Ctrl-C into a stop: the kernel of the run in
    progress is killed, that run is marked interrupted, and the benchmark reports the runs it
    finished instead of dying without a word."""

    def stop(signum, frame):
        STOPPING.set()
        for child in psutil.Process().children(recursive=True):  # the kernel and its workers
            try:
                child.kill()
            except psutil.Error:
                pass

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
