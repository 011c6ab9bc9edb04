"""Run-size and device settings shared by every chapter.

`REPRO_SCALE=quick` (the default) is what the book shows and the tests run; `REPRO_SCALE=full`
runs larger sweeps for a patient CPU or a GPU. Any other value is an error, never a guess.
"""

from __future__ import annotations

import os
import sys
from typing import TypeVar

SCALES = ("quick", "full")
T = TypeVar("T")


def scale() -> str:
    """Return the run size named by the REPRO_SCALE environment variable ('quick' or 'full')."""
    value = os.environ.get("REPRO_SCALE", "quick").strip().lower()
    if value not in SCALES:
        raise ValueError(f"REPRO_SCALE={value!r} is not a known scale; use one of {SCALES}")
    return value


def by_scale(quick: T, full: T) -> T:
    """Pick `quick` or `full` according to REPRO_SCALE, e.g. `n_seeds = by_scale(3, 10)`."""
    return full if scale() == "full" else quick


def device(prefer: str = "cpu"):
    """Return a torch device: 'cpu' (default) or 'cuda' when asked for and present.

    Set REPRO_DEVICE=cuda (or pass prefer='cuda') to use a GPU; asking for CUDA on a machine
    without one is an error rather than a silent fallback.
    """
    import torch  # local import: torch costs seconds to import and not every chapter needs it

    choice = os.environ.get("REPRO_DEVICE", prefer).strip().lower()
    if choice not in ("cpu", "cuda"):
        raise ValueError(f"device {choice!r} is not supported; use 'cpu' or 'cuda'")
    if choice == "cuda" and not torch.cuda.is_available():
        raise ValueError("CUDA was asked for (REPRO_DEVICE=cuda) but torch sees no GPU; use 'cpu'")
    return torch.device(choice)


def single_thread() -> None:
    """Use one BLAS thread, and one torch thread if torch is imported (call it after the imports).

    On 2 cores, multithreaded BLAS made small solves and tiny training loops several times
    slower (measured in the book's build notes), so chapters opt in to one thread.
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    if "torch" in sys.modules:  # importing torch here would cost numpy-only chapters seconds
        sys.modules["torch"].set_num_threads(1)
