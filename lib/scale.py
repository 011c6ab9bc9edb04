"""Run-size settings shared by every chapter.

`REPRO_SCALE=quick` (the default) is what the book shows and the tests run; `REPRO_SCALE=full`
runs larger sweeps for a patient CPU. Any other value is an error, never a guess
(`lib.settings` reads it). Every chapter is sized for a CPU: torch work runs on the CPU.
"""

from __future__ import annotations

import sys
from typing import TypeVar

from lib import settings

SCALES = ("quick", "full")
T = TypeVar("T")


def scale() -> str:
    """Return the run size named by the REPRO_SCALE environment variable ('quick' or 'full')."""
    return settings.get("REPRO_SCALE")


def by_scale(quick: T, full: T) -> T:
    """Pick `quick` or `full` according to REPRO_SCALE, e.g. `n_seeds = by_scale(3, 10)`."""
    return full if scale() == "full" else quick


def single_thread() -> None:
    """Use one BLAS thread, and one torch thread if torch is imported (call it after the imports).

    On 2 cores, multithreaded BLAS made small solves and tiny training loops several times
    slower (measured in the book's build notes), so chapters opt in to one thread.
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    if "torch" in sys.modules:  # importing torch here would cost numpy-only chapters seconds
        sys.modules["torch"].set_num_threads(1)
