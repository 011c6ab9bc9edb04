"""lib.runs: seeds from REPRO_SEED, and a parallel map that is ordered and deterministic, on
local workers that die with their parent and on a Dask cluster that fails loudly when lost."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from lib import runs
from lib.runs import ClusterError, base_seed, rng, run_jobs, seeds
from lib.settings import SettingError

ROOT = Path(__file__).resolve().parent.parent


def noisy_solve(seed: int, n: int) -> float:
    """A job whose result depends on its seed and on floating-point summation order."""
    g = np.random.default_rng(seed)
    a = g.standard_normal((n, n))
    return float(np.linalg.solve(a @ a.T + np.eye(n), g.standard_normal(n)).sum())


def square(x: int) -> int:
    return x * x


def where_run(x: int) -> tuple[int, int]:
    """The job's number and the process that ran it."""
    return x, os.getpid()


def apply(f, x):
    """A job whose first item is a function (Dask would read such a tuple as a task)."""
    return f(x)


def slow_square(x: int, started: str) -> int:
    """A job that says it started (a file in `started`), then takes its time."""
    Path(started, f"job{x}").touch()
    time.sleep(30)
    return x * x


def gil_bound(seed: int, n: int) -> tuple[float, int]:
    """A chapter-sized job: seeded NumPy draws, then one C call (sum over a range) that holds
    the GIL for about half a second, so the worker cannot send results while it runs."""
    g = np.random.default_rng(seed)
    a = g.standard_normal((80, 80))
    return float(np.linalg.eigvalsh(a @ a.T).sum()), sum(range(n + seed))


def raise_timeout(x: int) -> int:
    """A job that fails with a TimeoutError of its own."""
    raise TimeoutError(f"the job's own timeout {x}")


JOBS = [(s, 60) for s in range(7)]


def test_seeds_come_from_the_base_seed(monkeypatch):
    monkeypatch.setenv("REPRO_SEED", "0")
    first = seeds("sweep", 5)
    assert first == seeds("sweep", 5) and len(set(first)) == 5
    assert seeds("sweep", 3) == first[:3]  # more replicates extend, never reshuffle
    assert not set(first) & set(seeds("other", 5))  # experiments do not share seeds
    monkeypatch.setenv("REPRO_SEED", "1")
    assert base_seed() == 1 and not set(first) & set(seeds("sweep", 5))
    assert rng("x").random() != np.random.default_rng(0).random()
    monkeypatch.setenv("REPRO_SEED", str(2**32 - 1))  # the largest base seed
    assert base_seed() == 2**32 - 1 and len(set(seeds("sweep", 5))) == 5


@pytest.mark.parametrize("value", ["-1", "1.5", "abc", " ", " 1", "²", "٣", "1" * 40, "4294967296"])
def test_a_bad_base_seed_is_a_clear_error(monkeypatch, value):
    monkeypatch.setenv("REPRO_SEED", value)
    with pytest.raises(SettingError, match="REPRO_SEED=.*pass an integer from 0 to 4294967295"):
        base_seed()


def test_results_come_in_job_order_and_identical_for_any_worker_count():
    one = run_jobs(noisy_solve, JOBS, n_workers=1)
    assert one == [noisy_solve(*job) for job in JOBS]
    assert run_jobs(noisy_solve, JOBS, n_workers=2) == one
    assert run_jobs(square, list(range(5)), n_workers=2) == [0, 1, 4, 9, 16]  # non-tuple jobs
    assert run_jobs(square, []) == []


def test_workers_and_backend_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("REPRO_WORKERS", "2")
    assert run_jobs(square, [1, 2, 3]) == [1, 4, 9]
    for name, value in [("REPRO_WORKERS", "0"), ("REPRO_WORKERS", "two"),
                        ("REPRO_WORKERS", "²"), ("REPRO_BACKEND", "spark"),
                        ("REPRO_BACKEND", "DASK ")]:  # fmt: skip
        monkeypatch.setenv(name, value)
        with pytest.raises(SettingError, match=name):
            run_jobs(square, [1, 2])
        monkeypatch.delenv(name)


@pytest.mark.parametrize(
    ("fn", "jobs", "error"),
    [(3, [1], TypeError), (square, "abc", TypeError), (square, {1, 2}, TypeError)],
)
def test_bad_calls_are_clear_errors(fn, jobs, error):
    with pytest.raises(error):
        run_jobs(fn, jobs)


def test_local_workers_exit_when_their_parent_is_killed():
    script = (
        "import os, time\nfrom lib.runs import run_jobs\n"
        "print(*sorted({p for _, p in run_jobs(lambda x: (x, os.getpid()), list(range(8)), "
        "n_workers=2)}), flush=True)\ntime.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        workers = [int(pid) for pid in parent.stdout.readline().split()]
    finally:
        parent.kill()
        parent.wait(timeout=30)
    assert workers and parent.pid not in workers
    deadline = time.monotonic() + 30  # loky alone would keep them for 300 s
    while time.monotonic() < deadline and any(map(_alive, workers)):
        time.sleep(0.2)
    assert not any(map(_alive, workers)), "local workers outlived their killed parent"


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# ------------------------------------------------------------------------------ Dask
distributed = pytest.importorskip("distributed")


def test_a_bad_dask_address_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(runs, "DASK_CONNECT_S", 1.0)
    monkeypatch.setenv("REPRO_BACKEND", "dask")
    for bad in ("localhost:1", "inproc://nothing", "tcp://host", "tcp://host:99999", "x" * 10**5):
        monkeypatch.setenv("REPRO_DASK_SCHEDULER", bad)
        with pytest.raises(SettingError, match="REPRO_DASK_SCHEDULER=.*pass tcp://host:port"):
            run_jobs(square, [1, 2])
    monkeypatch.setenv("REPRO_DASK_SCHEDULER", "tcp://127.0.0.1:1")
    with pytest.raises(ClusterError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:1"):
        run_jobs(square, [1, 2])


@pytest.fixture(scope="module")
def one_worker_cluster():
    """A scheduler and one single-thread worker process (the setup where joblib's Dask
    backend fell back to running every job in the caller)."""
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:  # fmt: skip
        yield cluster.scheduler_address


def test_a_dask_cluster_runs_every_job_and_gives_the_same_results_as_loky(
    monkeypatch, one_worker_cluster
):
    expected = run_jobs(noisy_solve, JOBS, n_workers=2)
    monkeypatch.setenv("REPRO_BACKEND", "dask")
    monkeypatch.setenv("REPRO_DASK_SCHEDULER", one_worker_cluster)
    assert run_jobs(noisy_solve, JOBS) == expected
    ran = run_jobs(where_run, [(k,) for k in range(4)])
    assert [job for job, _ in ran] == [0, 1, 2, 3]
    assert os.getpid() not in {pid for _, pid in ran}  # on the cluster, not in this process
    assert run_jobs(apply, [(square, 3), (abs, -2)]) == [9, 2]
    with pytest.raises(ZeroDivisionError):  # a job's own error comes back as itself
        run_jobs(lambda x: 1 / x, [1, 0])


def big(n: int) -> np.ndarray:
    """A job whose result takes a while to send."""
    return np.full(n, 1.5)


@pytest.mark.timeout(120)
def test_a_result_slower_to_fetch_than_a_poll_still_arrives(monkeypatch, one_worker_cluster):
    """A fetch cut short by the poll starts again: with a fixed poll it would never finish."""
    monkeypatch.setattr(runs, "DASK_POLL_S", 0.001)
    monkeypatch.setenv("REPRO_BACKEND", "dask")
    monkeypatch.setenv("REPRO_DASK_SCHEDULER", one_worker_cluster)
    [result] = run_jobs(big, [5_000_000])
    assert result.shape == (5_000_000,) and result.sum() == 7_500_000


def test_a_chapter_sized_run_on_two_busy_workers_finishes_and_equals_loky(monkeypatch):
    """Issue 60: a finished job's result may still be in transit from a worker whose next job
    holds the GIL; the watcher took that poll timeout for the job's own and stopped the run."""
    jobs = [(seed, 10**7) for seed in range(8)]
    expected = run_jobs(gil_bound, jobs, n_workers=2)
    monkeypatch.setattr(runs, "DASK_POLL_S", 0.1)  # polls often, so results are often in transit
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:  # fmt: skip
        monkeypatch.setenv("REPRO_BACKEND", "dask")
        monkeypatch.setenv("REPRO_DASK_SCHEDULER", cluster.scheduler_address)
        assert run_jobs(gil_bound, jobs) == expected
        with pytest.raises(TimeoutError, match="the job's own timeout 2") as error:
            run_jobs(raise_timeout, [2, 3])
    assert any("raised on a Dask worker" in note for note in error.value.__notes__)


def _start(command: list[str]) -> subprocess.Popen:
    """A Dask scheduler or worker process that sees this checkout's packages."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.Popen([sys.executable, "-m", *command], env=env, stderr=subprocess.DEVNULL)


def test_losing_the_scheduler_mid_run_is_one_clear_error(monkeypatch, tmp_path):
    info = tmp_path / "scheduler.json"
    started = tmp_path / "started"
    started.mkdir()
    scheduler = _start(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                        "--no-dashboard", "--scheduler-file", str(info)])  # fmt: skip
    procs = [scheduler]
    try:
        deadline = time.monotonic() + 120
        while not info.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)  # the file is written in one go; let it land
        address = json.loads(info.read_text())["address"]
        procs.append(_start(["distributed.cli.dask_worker", address, "--no-nanny", "--nthreads",
                             "1", "--no-dashboard"]))  # fmt: skip

        def kill_the_scheduler_once_a_job_runs() -> None:
            while not list(started.iterdir()):
                time.sleep(0.05)
            scheduler.send_signal(signal.SIGKILL)

        threading.Thread(target=kill_the_scheduler_once_a_job_runs, daemon=True).start()
        monkeypatch.setenv("REPRO_BACKEND", "dask")
        monkeypatch.setenv("REPRO_DASK_SCHEDULER", address)
        began = time.monotonic()
        with pytest.raises(ClusterError) as error:
            run_jobs(slow_square, [(k, str(started)) for k in range(3)])
        assert time.monotonic() - began < 150  # not a hang
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=30)
    message = str(error.value)
    assert f"lost its connection to the Dask scheduler at {address}" in message
    assert f"(REPRO_DASK_SCHEDULER={address})" in message and "unset REPRO_BACKEND" in message


def test_a_cluster_whose_workers_all_die_fails_clearly_and_soon(monkeypatch, tmp_path):
    monkeypatch.setattr(runs, "DASK_GRACE_S", 2.0)
    with distributed.LocalCluster(n_workers=0, processes=True, dashboard_address=":0") as cluster:
        address = cluster.scheduler_address
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        worker = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--no-nanny",
                  "--nthreads", "1", "--no-dashboard"]  # fmt: skip
        procs = [subprocess.Popen(worker, env=env, stderr=subprocess.DEVNULL) for _ in range(2)]
        try:
            with distributed.Client(address, set_as_default=False) as client:
                client.wait_for_workers(2, timeout=120)
            killed_at = []

            def kill_every_worker_once_a_job_runs() -> None:
                while not list(tmp_path.iterdir()):
                    time.sleep(0.05)
                for proc in procs:
                    proc.send_signal(signal.SIGKILL)
                killed_at.append(time.monotonic())

            killer = threading.Thread(target=kill_every_worker_once_a_job_runs, daemon=True)
            killer.start()
            monkeypatch.setenv("REPRO_BACKEND", "dask")
            monkeypatch.setenv("REPRO_DASK_SCHEDULER", address)
            with pytest.raises(ClusterError, match=f"no worker on the Dask cluster at {address}"
                               rf" \(REPRO_DASK_SCHEDULER={address}\)"):  # fmt: skip
                run_jobs(slow_square, [(k, str(tmp_path)) for k in range(4)])
            failed_at = time.monotonic()
            killer.join(timeout=10)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait(timeout=30)
    assert killed_at and failed_at - killed_at[0] < runs.DASK_GRACE_S + 30  # not a hang
