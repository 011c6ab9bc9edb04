"""Seed benchmark: run chapters under several base seeds and print the verdicts side by side.

    .venv/bin/python benchmarks/seeds.py 08                  # base seeds 0 to 9
    .venv/bin/python benchmarks/seeds.py --seeds 0 1 2       # every chapter, three seeds

A chapter's verdict must not depend on REPRO_SEED: the script prints every claim's verdict and
the chapter verdict under each seed, each claim's verdict counts over the seeds (e.g.
"Reproduced 8, Inconclusive 2": the numbers a borderline claim shows beside its verdict, see
shared VERDICTS.md), and each evidence check's control outcome (a control that came out wrong
makes its check not count). Summaries go to a temporary folder. Three problems
are told apart, because only the first says anything about the verdicts:
- **differing**: two seeds that both finished give a claim different verdicts (exit status 1);
- **crashed**: a cell raised, or the summary is unreadable (exit status 2 if nothing differs);
- **interrupted**: a timeout, a dead kernel, Ctrl-C or SIGTERM (exit status 3 if nothing else).
A crash after `finish()` still saved a summary: its verdicts are compared with the others.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from notebook_runs import NotebookRun, chapters, execute, stop_on_sigterm

from lib.claims import SummaryError, read_summary, summary_name
from lib.scale import scale as run_scale

EXIT = {"differing": 1, "crashed": 2, "interrupted": 3}


@dataclass(frozen=True)
class SeedRun:
    """One chapter run under one base seed and the summary it saved (None if it saved none)."""

    seed: int
    run: NotebookRun
    summary: dict | None
    unreadable: str | None = None  # why a saved summary could not be read

    @property
    def state(self) -> str:
        """'ok', 'crashed' or 'interrupted' (an unreadable or missing summary is a crash)."""
        if self.run.outcome != "ok":
            return self.run.outcome
        return "ok" if self.summary is not None else "crashed"


def read_back(results: Path, chapter: str, seed: int, scale: str, run: NotebookRun) -> SeedRun:
    """The run with the summary it saved in `results`, validated by lib.claims."""
    path = results / summary_name(chapter, scale, seed)
    if not path.exists():
        return SeedRun(seed, run, None)
    try:
        return SeedRun(seed, run, read_summary(path))
    except SummaryError as err:
        return SeedRun(seed, run, None, str(err))


def verdict_rows(runs: list[SeedRun]) -> dict[str, list[str]]:
    """Claim id (and 'chapter') -> its verdict under each seed, or why there is none."""
    ids = next(([c["id"] for c in r.summary["claims"]] for r in runs if r.summary), [])
    rows = {}
    for claim in [*ids, "chapter"]:
        rows[claim] = [
            r.state if r.summary is None
            else r.summary["verdict"] if claim == "chapter"
            else next((c["verdict"] for c in r.summary["claims"] if c["id"] == claim), "absent")
            for r in runs
        ]  # fmt: skip
    return rows


def verdict_counts(runs: list[SeedRun]) -> dict[str, str]:
    """Claim id (and 'chapter') -> its verdicts counted over the seeds that finished, most
    frequent first, e.g. 'Reproduced 8, Inconclusive 2'."""
    finished = [r.summary is not None for r in runs]
    counts = {}
    for claim, cells in verdict_rows(runs).items():
        seen = Counter(c for c, ok in zip(cells, finished, strict=True) if ok)
        counts[claim] = ", ".join(f"{v} {n}" for v, n in seen.most_common()) or "no run finished"
    return counts


def control_rows(runs: list[SeedRun]) -> dict[str, list[str]]:
    """Each evidence check -> its control's outcome under each seed ('not counted' when the
    control came out wrong, so the check does not count)."""
    rows: dict[str, list[str]] = {}
    for i, r in enumerate(runs):
        for check in (r.summary or {}).get("checks", []):
            if check["kind"] == "evidence":
                key = f"{check['quantity'][:40]} [{check['control']['kind']}]"
                cell = check["control"]["outcome"] + ("" if check["counts"] else ", not counted")
                rows.setdefault(key, [""] * len(runs))[i] = cell
    return {key: [c or "-" for c in cells] for key, cells in rows.items()}


def problems(chapter: str, runs: list[SeedRun]) -> dict[str, list[str]]:
    """What went wrong, by kind: differing claims, crashed seeds, interrupted seeds."""
    found = {"differing": [], "crashed": [], "interrupted": []}
    for claim, cells in verdict_rows(runs).items():
        finished = {cell for r, cell in zip(runs, cells, strict=True) if r.summary is not None}
        if len(finished) > 1:
            found["differing"].append(f"{chapter}: {claim} ({' / '.join(sorted(finished))})")
    for r in runs:
        if r.state != "ok":
            why = r.unreadable or r.run.error or "finished without saving a summary"
            found[r.state].append(f"{chapter} seed {r.seed}: {why}")
    return found


def show(chapter: str, scale: str, runs: list[SeedRun]) -> None:
    """Print one chapter's verdicts, control outcomes and runs."""
    header = "".join(f"{'seed ' + str(r.seed):>16s}" for r in runs)
    print(f"\n{chapter} ({scale})\n  {'claim':44s}{header}")
    for claim, cells in verdict_rows(runs).items():
        print(f"  {claim:44s}" + "".join(f"{c:>16s}" for c in cells))
    finished = sum(r.summary is not None for r in runs)
    print(f"  verdict counts over the {finished} seeds that finished")
    for claim, counts in verdict_counts(runs).items():
        print(f"  {claim:44s}{counts}")
    print(f"  {'control outcome of each evidence check':44s}")
    for check, cells in control_rows(runs).items():
        print(f"  {check:44s}" + "".join(f"{c:>20s}" for c in cells))
    for r in runs:
        how = "ok" if r.state == "ok" else f"{r.state}: {r.unreadable or r.run.error}"
        print(f"  seed {r.seed}: {r.run.wall_s:.0f} s wall, {r.run.cpu_s:.0f} s cpu, {how}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="chapter numbers (default: all)")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(10)))
    args = parser.parse_args()
    scale = run_scale()  # checks every REPRO_* setting first
    stop_on_sigterm()
    sys.stdout.reconfigure(line_buffering=True)  # each line as it comes, even into a file
    found = {"differing": [], "crashed": [], "interrupted": []}
    for path in chapters(args.chapters):
        runs: list[SeedRun] = []
        with tempfile.TemporaryDirectory() as results:
            for seed in args.seeds:
                env = {"REPRO_SEED": str(seed), "REPRO_RESULTS_DIR": results}
                run = execute(path, env, timeout_s=10 * 1800)
                runs.append(read_back(Path(results), path.stem, seed, scale, run))
                if run.stop:
                    break
        show(path.stem, scale, runs)
        for kind, items in problems(path.stem, runs).items():
            found[kind] += items
        if runs[-1].run.stop:
            print("\nstopped: the remaining seeds and chapters were not run")
            break
    return report(found)


def report(found: dict[str, list[str]]) -> int:
    """Print the problems by kind and return the exit status (0 when there are none)."""
    titles = {
        "differing": "VERDICTS DIFFER BETWEEN SEEDS",
        "crashed": "CRASHED RUNS",
        "interrupted": "INTERRUPTED RUNS (their verdicts are unknown, not different)",
    }
    for kind, items in found.items():
        if items:
            print(f"\n{titles[kind]}:\n" + "\n".join(f"  {item}" for item in items))
    if not any(found.values()):
        print("\nsame verdicts under every seed")
    return next((EXIT[kind] for kind in EXIT if found[kind]), 0)


if __name__ == "__main__":
    sys.exit(main())
