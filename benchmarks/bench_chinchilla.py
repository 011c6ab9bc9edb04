"""Refit Besiroglu et al.'s Chinchilla law with their full 4,500-start grid and print the result.

Run: `.venv/bin/python benchmarks/bench_chinchilla.py` (about 2 minutes on one core). The unit
test uses a coarse grid; this script checks that the full grid lands on the same optimum.
"""

import time
from pathlib import Path

import pandas as pd
from threadpoolctl import threadpool_limits

from lib.fit import fit_chinchilla

CSV = (
    Path(__file__).resolve().parent.parent / "data" / "chinchilla-epoch" / "svg_extracted_data.csv"
)
BESIROGLU2024 = {"E": 1.8172, "A": 477.8, "B": 2143.0, "alpha": 0.3473, "beta": 0.3672}
BESIROGLU2024_CI = {"E": (1.769, 1.871), "alpha": (0.317, 0.373), "beta": (0.331, 0.415)}


def main() -> None:
    threadpool_limits(1)  # many tiny solves: one BLAS thread is several times faster on 2 cores
    df = pd.read_csv(CSV).sort_values("loss").iloc[:-5]  # their 240 points
    N = df["Model Size"].to_numpy()
    D = df["Training FLOP"].to_numpy() / (6 * N)
    L = df["loss"].to_numpy()
    for grid in ("coarse", "full"):
        start = time.perf_counter()
        fit = fit_chinchilla(N, D, L, grid=grid)
        seconds = time.perf_counter() - start
        print(f"{grid:>6} grid: {seconds:6.1f} s, objective {fit.objective:.7f}")
        for name, published in BESIROGLU2024.items():
            print(f"    {name:>5}: ours {getattr(fit, name):10.4f}   Besiroglu et al. {published}")
    start = time.perf_counter()
    boot = fit_chinchilla(N, D, L, n_bootstrap=200, seed=0)
    print(f"bootstrap (200 resamples, {time.perf_counter() - start:.0f} s), 95% intervals:")
    for name, (p_lo, p_hi) in BESIROGLU2024_CI.items():
        lo, hi = boot.ci[name]
        print(f"    {name:>5}: ours ({lo:.3f}, {hi:.3f})   Besiroglu et al. ({p_lo}, {p_hi})")


if __name__ == "__main__":
    main()
