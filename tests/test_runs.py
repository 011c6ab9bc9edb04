"""lib.runs: seeds from REPRO_SEED, and a parallel map that is ordered and deterministic."""

import numpy as np
import pytest

from lib.runs import base_seed, rng, run_jobs, seeds


def noisy_solve(seed: int, n: int) -> float:
    """A job whose result depends on its seed and on floating-point summation order."""
    g = np.random.default_rng(seed)
    a = g.standard_normal((n, n))
    return float(np.linalg.solve(a @ a.T + np.eye(n), g.standard_normal(n)).sum())


def square(x: int) -> int:
    return x * x


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


@pytest.mark.parametrize("value", ["-1", "1.5", "abc", " "])
def test_a_bad_base_seed_is_a_clear_error(monkeypatch, value):
    monkeypatch.setenv("REPRO_SEED", value)
    with pytest.raises(ValueError, match="REPRO_SEED"):
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
                        ("REPRO_BACKEND", "spark")]:  # fmt: skip
        monkeypatch.setenv(name, value)
        with pytest.raises(ValueError, match=name):
            run_jobs(square, [1, 2])
        monkeypatch.delenv(name)


@pytest.mark.parametrize(
    ("fn", "jobs", "error"),
    [(3, [1], TypeError), (square, "abc", TypeError), (square, {1, 2}, TypeError)],
)
def test_bad_calls_are_clear_errors(fn, jobs, error):
    with pytest.raises(error):
        run_jobs(fn, jobs)


def test_a_bad_dask_address_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("REPRO_BACKEND", "dask")
    monkeypatch.setenv("REPRO_DASK_SCHEDULER", "localhost:1")
    with pytest.raises(ValueError, match="tcp://host:port"):
        run_jobs(square, [1, 2])
    monkeypatch.setenv("REPRO_DASK_SCHEDULER", "tcp://127.0.0.1:1")
    with pytest.raises(ValueError, match="cannot reach the Dask scheduler"):
        run_jobs(square, [1, 2])


def test_a_dask_cluster_gives_the_same_results_as_loky(monkeypatch):
    distributed = pytest.importorskip("distributed")
    expected = run_jobs(noisy_solve, JOBS, n_workers=2)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)  # fmt: skip
    with cluster:
        monkeypatch.setenv("REPRO_BACKEND", "dask")
        monkeypatch.setenv("REPRO_DASK_SCHEDULER", cluster.scheduler_address)
        assert run_jobs(noisy_solve, JOBS) == expected
