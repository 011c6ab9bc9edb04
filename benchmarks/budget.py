"""Budget benchmark: run chapters at a scale and print wall time against each one's budget.

    .venv/bin/python benchmarks/budget.py            # every chapter, quick scale
    .venv/bin/python benchmarks/budget.py 08 11      # chosen chapters
    REPRO_SCALE=full .venv/bin/python benchmarks/budget.py 09

Budgets (front matter `repro: budget_s`, at most 180 s at the quick scale) are promises about
an idle machine with 2 cores: run this on one. It exits non-zero if a chapter fails or runs
over its budget. Summaries go to a temporary folder, so the committed ones are not touched.
CPU time (kernel plus workers) shows what a busy machine would have cost.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from notebook_runs import chapters, execute, stop_on_sigterm

from lib.scale import scale as run_scale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="chapter numbers, e.g. 08 11 (default: all)")
    args = parser.parse_args()
    scale = run_scale()  # checks every REPRO_* setting first
    print(f"scale {scale}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    print(f"{'chapter':40s} {'wall s':>8s} {'cpu s':>8s} {'budget s':>9s}  result")
    over = 0
    stop_on_sigterm()
    with tempfile.TemporaryDirectory() as results:
        for path in chapters(args.chapters):
            env = {"REPRO_RESULTS_DIR": results}
            run = execute(path, env, timeout_s=10 * 1800)
            ok = run.error is None and run.wall_s <= run.budget_s
            over += not ok
            result = f"{run.outcome}: {run.error}" if run.error else "ok" if ok else "OVER BUDGET"
            print(f"{run.chapter:40s} {run.wall_s:8.1f} {run.cpu_s:8.1f} {run.budget_s:9.0f}  "
                  f"{result}", flush=True)  # fmt: skip
            if run.stop:
                print("stopped: the remaining chapters were not run")
                break
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
