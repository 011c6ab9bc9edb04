"""Independent runs: seeds derived from one base seed, and a parallel map over jobs.

Every random draw in a chapter starts from `REPRO_SEED` (default 0): `seeds("sweep", 5)` gives
five replicate seeds for the experiment named "sweep", and two base seeds share no replicate.
`run_jobs(fn, jobs)` maps a function over independent jobs (replicates, sizes, settings) on
joblib's loky processes, one BLAS/torch thread each, results in job order and bit-identical
whatever the number of workers:

    results = run_jobs(train_one, [(width, seed) for width in WIDTHS for seed in SEEDS])

Settings (environment variables):
- `REPRO_WORKERS`: worker processes (default: the cores this process may use).
- `REPRO_BACKEND=dask` with `REPRO_DASK_SCHEDULER=tcp://host:port`: send the jobs to a Dask
  cluster through joblib's Dask backend (needs `distributed`); `loky` is the default.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from lib import validate

BACKENDS = ("loky", "dask")


def base_seed() -> int:
    """The base seed named by REPRO_SEED (default 0): a non-negative integer, else an error."""
    value = os.environ.get("REPRO_SEED", "0").strip()
    if not value.isdigit():
        raise ValueError(
            f"REPRO_SEED={value!r} is not a non-negative integer; use e.g. REPRO_SEED=1"
        )
    return int(value)


def _sequence(stream: str) -> np.random.SeedSequence:
    validate.text("stream", stream)
    return np.random.SeedSequence([base_seed(), zlib.crc32(stream.encode())])


def seeds(stream: str, n: int) -> list[int]:
    """`n` independent integer seeds (< 2**63) for the experiment `stream` under REPRO_SEED."""
    n = validate.integer("n", n, minimum=1)
    children = _sequence(stream).spawn(n)
    return [int(c.generate_state(1, np.uint64)[0] >> np.uint64(1)) for c in children]


def rng(stream: str) -> np.random.Generator:
    """A NumPy generator for the experiment `stream` under REPRO_SEED (for one-off draws)."""
    return np.random.default_rng(_sequence(stream))


def workers() -> int:
    """Worker processes: REPRO_WORKERS if set (a positive integer), else the usable cores."""
    value = os.environ.get("REPRO_WORKERS")
    if value is None:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if not value.strip().isdigit() or int(value) < 1:
        raise ValueError(f"REPRO_WORKERS={value!r} is not a positive integer; use e.g. 2")
    return int(value)


def backend() -> str:
    """The joblib backend named by REPRO_BACKEND: 'loky' (default) or 'dask'."""
    value = os.environ.get("REPRO_BACKEND", "loky").strip().lower()
    if value not in BACKENDS:
        raise ValueError(f"REPRO_BACKEND={value!r} is not a known backend; use one of {BACKENDS}")
    return value


def _single_threaded(fn: Callable, job: Any) -> Any:
    """Call fn(*job) (fn(job) if job is not a tuple) with one BLAS and one torch thread."""
    from threadpoolctl import threadpool_limits

    torch = __import__("sys").modules.get("torch")
    torch_threads = torch.get_num_threads() if torch is not None else None
    try:
        if torch is not None:
            torch.set_num_threads(1)
        with threadpool_limits(1):
            return fn(*job) if isinstance(job, tuple) else fn(job)
    finally:
        if torch is not None:
            torch.set_num_threads(torch_threads)


@contextmanager
def _dask_client():
    address = os.environ.get("REPRO_DASK_SCHEDULER", "").strip()
    if not address.startswith(("tcp://", "tls://", "inproc://")):
        raise ValueError(
            f"REPRO_BACKEND=dask needs REPRO_DASK_SCHEDULER=tcp://host:port, got {address!r}"
        )
    try:
        from distributed import Client
    except ImportError as err:
        raise ValueError("REPRO_BACKEND=dask needs the 'distributed' package") from err
    try:
        client = Client(address, timeout="10s")
    except OSError as err:
        raise ValueError(f"cannot reach the Dask scheduler at {address}: {err}") from None
    try:
        yield client
    finally:
        client.close()


def run_jobs(
    fn: Callable, jobs: Sequence, *, desc: str | None = None, n_workers: int | None = None
) -> list:
    """Return [fn(*job) for job in jobs] (fn(job) for a non-tuple job), run in parallel.

    Jobs must be independent and carry their own seeds; `fn` and its jobs must pickle (a
    module-level function, or one defined in a notebook). A tqdm bar shows progress when `desc`
    is given. One worker (or one job) runs in this process, with the same one-thread setting,
    so results are identical for any worker count.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if isinstance(jobs, str | bytes) or not isinstance(jobs, Sequence):
        raise TypeError(f"jobs must be a list or tuple of jobs, got {type(jobs).__name__}")
    n = workers() if n_workers is None else validate.integer("n_workers", n_workers, minimum=1)
    chosen = backend()
    if len(jobs) == 0:
        return []
    from tqdm.auto import tqdm

    with tqdm(total=len(jobs), desc=desc, disable=desc is None) as bar:
        if chosen == "loky" and (n == 1 or len(jobs) == 1):
            return [_advance(bar, _single_threaded(fn, job)) for job in jobs]
        from joblib import Parallel, delayed, parallel_config

        calls = [delayed(_single_threaded)(fn, job) for job in jobs]
        if chosen == "dask":
            with _dask_client(), parallel_config(backend="dask"):
                return [_advance(bar, r) for r in Parallel(return_as="generator")(calls)]
        # inner_max_num_threads=1 sets OMP/MKL/OpenBLAS threads to 1 before a worker imports
        # torch or numpy; _single_threaded then holds it for libraries already loaded.
        with parallel_config(backend="loky", inner_max_num_threads=1):
            pool = Parallel(n_jobs=min(n, len(jobs)), return_as="generator")
            return [_advance(bar, r) for r in pool(calls)]


def _advance(bar, result):
    """Tick the progress bar once and pass the result through."""
    bar.update()
    return result
