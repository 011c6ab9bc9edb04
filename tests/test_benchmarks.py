"""benchmarks/seeds.py tells differing verdicts from crashed and interrupted runs, and reports
each evidence check's control outcome per seed (no notebook runs here: synthetic summaries)."""

import json
import sys
from pathlib import Path

import pytest

from lib.claims import ClaimChecks, negative

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
seeds = pytest.importorskip("seeds")
NotebookRun = pytest.importorskip("notebook_runs").NotebookRun


def summary(effect: float, control: float = -5.0) -> dict:
    """A one-claim chapter summary whose evidence has mean `effect` and a negative control."""
    checks = ClaimChecks("99_bench", "A benchmark chapter")
    checks.claim("a", "claim a", central=True)
    checks.premise("a", "the paper's regime", 1.0, True, criterion="> 0", source="measured")
    wobble = [0.0, 0.01, -0.01, 0.005]
    null = negative(
        "no effect", [control + w for w in wobble], alternative="a stand-in explanation"
    )
    checks.evidence("a", "effect", [effect + w for w in wobble], above=0.0, predicted=1.0,
                    paper="p", control=null)  # fmt: skip
    return checks.summary()


def run(outcome: str = "ok", error: str | None = None) -> NotebookRun:
    return NotebookRun("99_bench", 10.0, 20.0, 90.0, error, outcome)


def test_interrupted_and_crashed_runs_are_not_differing_verdicts():
    runs = [seeds.SeedRun(0, run(), summary(1.0)),
            seeds.SeedRun(1, run("interrupted", "a cell ran past the 600 s timeout"), None),
            seeds.SeedRun(2, run("crashed", "ValueError: boom"), None)]  # fmt: skip
    found = seeds.problems("99_bench", runs)
    assert found["differing"] == []
    assert found["interrupted"] == ["99_bench seed 1: a cell ran past the 600 s timeout"]
    assert found["crashed"] == ["99_bench seed 2: ValueError: boom"]
    assert seeds.verdict_rows(runs)["a"] == ["Reproduced", "interrupted", "crashed"]
    assert seeds.report(found) == seeds.EXIT["crashed"]
    assert seeds.report({**found, "crashed": []}) == seeds.EXIT["interrupted"]


def test_differing_verdicts_are_reported_as_such(capsys):
    runs = [seeds.SeedRun(0, run(), summary(1.0)), seeds.SeedRun(1, run(), summary(-1.0)),
            seeds.SeedRun(2, run("crashed", "AssertionError"), summary(1.0))]  # fmt: skip
    found = seeds.problems("99_bench", runs)
    assert found["differing"] == ["99_bench: a (Not reproduced / Reproduced)",
                                  "99_bench: chapter (Not reproduced / Reproduced)"]  # fmt: skip
    assert found["crashed"] == ["99_bench seed 2: AssertionError"]  # after finish(): compared
    assert seeds.report(found) == seeds.EXIT["differing"]
    assert "VERDICTS DIFFER BETWEEN SEEDS" in capsys.readouterr().out


def test_each_control_outcome_is_reported_per_seed():
    runs = [seeds.SeedRun(0, run(), summary(1.0)),
            seeds.SeedRun(1, run(), summary(1.0, control=1.0)),  # the control passes too
            seeds.SeedRun(2, run("interrupted", "stopped"), None)]  # fmt: skip
    assert seeds.control_rows(runs) == {"effect [negative]": ["fail", "pass, not counted", "-"]}
    assert seeds.verdict_rows(runs)["a"] == ["Reproduced", "Not tested", "interrupted"]


def test_a_broken_summary_is_a_crash_that_names_the_file(tmp_path):
    path = tmp_path / "99_bench.seed3.json"
    path.write_text(json.dumps(summary(1.0))[:50])
    read = seeds.read_back(tmp_path, "99_bench", 3, "quick", run())
    assert read.state == "crashed" and "99_bench.seed3.json" in read.unreadable
    assert seeds.read_back(tmp_path, "99_bench", 4, "quick", run()).state == "crashed"
    assert seeds.report({"differing": [], "crashed": [], "interrupted": []}) == 0


def test_a_cell_error_is_a_crash_and_a_timeout_or_dead_kernel_an_interruption():
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
    from notebook_runs import _failure

    cell_error = CellExecutionError("...\n\x1b[31mValueError\x1b[39m: boom", "ValueError", "boom")
    assert _failure(cell_error, 600) == ("ValueError: boom", "crashed")
    assert _failure(CellTimeoutError("slow"), 600) == (
        "a cell ran past the 600 s timeout", "interrupted")  # fmt: skip
    assert _failure(DeadKernelError("died"), 600)[1] == "interrupted"
    assert _failure(RuntimeError("odd"), 600) == ("RuntimeError: odd", "crashed")


def test_each_claims_verdicts_are_counted_over_the_seeds_that_finished(capsys):
    runs = [seeds.SeedRun(0, run(), summary(1.0)), seeds.SeedRun(1, run(), summary(1.0)),
            seeds.SeedRun(2, run(), summary(-1.0)),
            seeds.SeedRun(3, run("interrupted", "a timeout"), None)]  # fmt: skip
    counts = seeds.verdict_counts(runs)
    assert counts["a"] == "Reproduced 2, Not reproduced 1"
    seeds.show("99_bench", "quick", runs)
    assert "verdict counts over the 3 seeds that finished" in capsys.readouterr().out
