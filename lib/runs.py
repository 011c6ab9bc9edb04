"""Independent runs: seeds derived from one base seed, and a parallel map over jobs.

Every random draw in a chapter starts from `REPRO_SEED` (default 0): `seeds("sweep", 5)` gives
five replicate seeds for the experiment named "sweep", and two base seeds share no replicate.
`run_jobs(fn, jobs)` maps a function over independent jobs (replicates, sizes, settings) on
joblib's loky processes, one BLAS/torch thread each, results in job order and bit-identical
whatever the number of workers:

    results = run_jobs(train_one, [(width, seed) for width in WIDTHS for seed in SEEDS])

Settings (environment variables, read by `lib.settings`):
- `REPRO_WORKERS`: worker processes (default: the cores this process may use).
- `REPRO_BACKEND=dask` with `REPRO_DASK_SCHEDULER=tcp://host:port`: run every job on the
  workers of that Dask cluster (needs `distributed`); `loky` is the default. A job's own
  exception comes back as itself. A cluster that cannot be reached, that drops the connection
  to its scheduler (Dask then cancels every job), or that has no worker for `DASK_GRACE_S`
  seconds while jobs are unfinished, stops the run with a `ClusterError` naming its address
  and REPRO_DASK_SCHEDULER.

Local workers exit when the process that started them dies (a killed kernel), rather than
idling for loky's five minutes.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import traceback
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from lib import settings, validate

BACKENDS = ("loky", "dask")
DASK_CONNECT_S = 10.0  # how long to wait for the scheduler to answer when a run starts
DASK_GRACE_S = 60.0  # how long a cluster may lack its scheduler or every worker mid-run
DASK_POLL_S = 1.0  # how often a waiting run checks on the cluster
PARENT_POLL_S = 1.0  # how often a local worker checks that its parent is alive


class ClusterError(RuntimeError):
    """The Dask cluster named by REPRO_DASK_SCHEDULER cannot be reached or was lost."""


def base_seed() -> int:
    """The base seed named by REPRO_SEED (default 0): an integer in [0, 2**32 - 1]."""
    return settings.get("REPRO_SEED")


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
    value = settings.get("REPRO_WORKERS")
    if value is not None:
        return value
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def backend() -> str:
    """The backend named by REPRO_BACKEND: 'loky' (default) or 'dask'."""
    return settings.get("REPRO_BACKEND")


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


def _exit_with_parent(parent: int) -> None:
    """Loky worker initializer: exit as soon as `parent` (the process that started the pool,
    e.g. a kernel) is gone, instead of idling for loky's timeout."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def run_jobs(
    fn: Callable, jobs: Sequence, *, desc: str | None = None, n_workers: int | None = None
) -> list:
    """Return [fn(*job) for job in jobs] (fn(job) for a non-tuple job), run in parallel.

    Jobs must be independent and carry their own seeds; `fn` and its jobs must pickle (a
    module-level function, or one defined in a notebook). A tqdm bar shows progress when `desc`
    is given. Locally, one worker (or one job) runs in this process, with the same one-thread
    setting, so results are identical for any worker count; on a Dask cluster every job runs
    on the cluster's workers, however many they are (`n_workers` applies to local runs).
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
        if chosen == "dask":
            return _run_on_dask(fn, jobs, bar)
        if n == 1 or len(jobs) == 1:
            return [_advance(bar, _single_threaded(fn, job)) for job in jobs]
        from joblib import Parallel, delayed, parallel_config

        calls = [delayed(_single_threaded)(fn, job) for job in jobs]
        # inner_max_num_threads=1 sets OMP/MKL/OpenBLAS threads to 1 before a worker imports
        # torch or numpy; _single_threaded then holds it for libraries already loaded.
        tied = {"initializer": _exit_with_parent, "initargs": (os.getpid(),)}
        with parallel_config(backend="loky", inner_max_num_threads=1, **tied):
            pool = Parallel(n_jobs=min(n, len(jobs)), return_as="generator")
            return [_advance(bar, r) for r in pool(calls)]


def _advance(bar, result):
    """Tick the progress bar once and pass the result through."""
    bar.update()
    return result


# ------------------------------------------------------------------------------ Dask


def _run_on_dask(fn: Callable, jobs: Sequence, bar) -> list:
    """Submit every job to the cluster at REPRO_DASK_SCHEDULER; results in job order."""
    address = settings.get("REPRO_DASK_SCHEDULER")
    try:
        from distributed import Client
    except ImportError as err:
        raise ClusterError("REPRO_BACKEND=dask needs the 'distributed' package") from err
    try:
        client = Client(address, timeout=f"{DASK_CONNECT_S}s", set_as_default=False)
    except (OSError, TimeoutError) as err:
        raise ClusterError(f"cannot reach the Dask scheduler at {address} "
                           f"(REPRO_DASK_SCHEDULER={address}): {err}; start the cluster, or "
                           "unset REPRO_BACKEND and REPRO_DASK_SCHEDULER to run here"
                           ) from None  # fmt: skip
    try:
        # partial() hides each job from Dask, which reads a tuple starting with a callable as
        # a task; pure=False gives every job its own key even where two jobs are equal.
        futures = [client.submit(partial(_outcome, fn, job), pure=False) for job in jobs]
        watch = _ClusterWatch(client, address, futures)
        return [_advance(bar, watch.result(i)) for i in range(len(futures))]
    finally:
        with contextlib.suppress(OSError, TimeoutError):  # a lost scheduler cannot say goodbye
            client.close(timeout=DASK_CONNECT_S)


@dataclass(frozen=True)
class _Outcome:
    """What a job did on a Dask worker: its value, or the exception it raised (with the
    worker's traceback as text), so that no error of the job's can pass for the cluster's."""

    value: Any = None
    error: BaseException | None = None
    trace: str = ""

    def unwrap(self) -> Any:
        """The job's value, or its own exception raised again here."""
        if self.error is None:
            return self.value
        self.error.add_note(f"(raised on a Dask worker)\n{self.trace}")
        raise self.error


def _outcome(fn: Callable, job: Any) -> _Outcome:
    """Run one job on a Dask worker and wrap what it did (see _Outcome)."""
    try:
        return _Outcome(value=_single_threaded(fn, job))
    except Exception as error:
        return _Outcome(error=error, trace=traceback.format_exc())


class _ClusterWatch:
    """Waits for each job's result, checking every DASK_POLL_S that the cluster still has its
    scheduler and a worker; raises ClusterError once it has lacked one for DASK_GRACE_S."""

    def __init__(self, client, address: str, futures: list):
        self.client, self.address, self.futures = client, address, futures
        self.lost_since: float | None = None

    def result(self, i: int):
        """The result of job i (its own exception if it raised)."""
        from distributed import KilledWorker

        future, wait_s = self.futures[i], DASK_POLL_S
        while True:
            try:
                outcome = future.result(timeout=wait_s)
            except TimeoutError:
                # Only a poll: jobs raise inside an _Outcome. The job runs, or it has finished
                # and its result is still on its way from a busy worker; a timed-out fetch
                # starts again, so a large result gets longer each time.
                if future.done():
                    wait_s = min(2 * wait_s, DASK_GRACE_S)
                self.check()
                continue
            except KilledWorker:
                raise self.lost(f"lost every worker that ran job {i}") from None
            except CancelledError:  # the client cancels every job when its scheduler goes
                raise self.lost("lost its connection to the Dask scheduler") from None
            return outcome.unwrap()

    def problem(self) -> str | None:
        """What is wrong with the cluster now, or None."""
        if self.client.status != "running":
            return "lost its connection to the Dask scheduler"
        try:
            alive = len(self.client.nthreads())
        except (OSError, TimeoutError):
            return "cannot reach the Dask scheduler"
        return None if alive else "has no worker on the Dask cluster"

    def lost(self, problem: str, for_s: float | None = None) -> ClusterError:
        """The one error for a lost cluster: what happened, the address and the setting."""
        left = sum(not f.done() or f.cancelled() for f in self.futures)
        during = "" if for_s is None else f" for {for_s:g} s"
        return ClusterError(
            f"the run {problem} at {self.address} (REPRO_DASK_SCHEDULER={self.address})"
            f"{during}, with {left} of {len(self.futures)} jobs unfinished: the cluster was "
            "lost. Restart the scheduler and its workers, or unset REPRO_BACKEND and "
            "REPRO_DASK_SCHEDULER to run here"
        )

    def check(self) -> None:
        """Raise ClusterError if the cluster has lacked its scheduler or every worker for
        DASK_GRACE_S seconds."""
        problem = self.problem()
        if problem is None:
            self.lost_since = None
            return
        now = time.monotonic()
        self.lost_since = self.lost_since if self.lost_since is not None else now
        if now - self.lost_since >= DASK_GRACE_S:
            raise self.lost(problem, DASK_GRACE_S)
