"""Seed benchmark: run chapters under several base seeds and print the verdicts side by side.

    .venv/bin/python benchmarks/seeds.py 08 --seeds 0 1 2
    .venv/bin/python benchmarks/seeds.py --seeds 0 1 2 3 4      # every chapter

A chapter's verdict must not depend on REPRO_SEED: the script prints every claim's verdict and
the chapter verdict under each seed, and exits non-zero if any differs from seed 0's (or a run
crashes before saving its summary). Summaries go to a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from notebook_runs import chapters, execute


def verdicts(results: Path, chapter: str, seed: int, scale: str) -> dict[str, str] | None:
    """Claim id -> verdict (and 'chapter' -> chapter verdict) from a saved summary."""
    name = chapter + ("" if scale == "quick" else f".{scale}")
    path = results / (name + ("" if seed == 0 else f".seed{seed}") + ".json")
    if not path.exists():
        return None
    summary = json.loads(path.read_text())
    table = {claim["id"]: claim["verdict"] for claim in summary["claims"]}
    return table | {"chapter": summary["verdict"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="chapter numbers (default: all)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    args = parser.parse_args()
    scale = os.environ.get("REPRO_SCALE", "quick")
    stable = True
    for path in chapters(args.chapters):
        with tempfile.TemporaryDirectory() as results:
            table, notes = {}, []
            for seed in args.seeds:
                env = {"REPRO_SEED": str(seed), "REPRO_RESULTS_DIR": results}
                run = execute(path, env, timeout_s=10 * 1800)
                table[seed] = verdicts(Path(results), path.stem, seed, scale)
                stable &= run.error is None  # a crash after finish() still saved a summary
                notes.append(
                    f"seed {seed}: {run.wall_s:.0f} s" + (f", {run.error}" if run.error else "")
                )
        print(f"\n{path.stem} ({scale})")
        claims = next((list(t) for t in table.values() if t), [])
        print(f"  {'claim':28s}" + "".join(f"{'seed ' + str(s):>20s}" for s in args.seeds))
        for claim in claims:
            row = [(table[s] or {}).get(claim, "crashed") for s in args.seeds]
            stable &= len(set(row)) == 1
            print(f"  {claim:28s}" + "".join(f"{v:>20s}" for v in row))
        stable &= bool(claims) and all(table.values())
        for note in notes:
            print("  " + note)
    print("\nsame verdicts under every seed" if stable else "\nVERDICTS DIFFER BETWEEN SEEDS")
    return 0 if stable else 1


if __name__ == "__main__":
    sys.exit(main())
