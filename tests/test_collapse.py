"""Tests of lib.collapse: timescale arithmetic, the exact teacher, the numpy trainer against
torch, faults, the collapse statistics, the detectors, the forecasts, and bad input."""

import math

import numpy as np
import pytest
import torch

from lib import collapse as C

torch.set_num_threads(1)
TEACHER = C.Teacher(a=1.0, b=1.3, sigma=0.5, seed=3)


# ----------------------------------------------------------------------------- timescale
def test_timescale_arithmetic_known_values():
    # T = 2770 steps, rate 0.015, tau = 0.2 -> lambda = 1 / (0.015 * 0.2 * 2770) = 0.120
    lam = C.weight_decay_from_tau(0.015, 0.2, 2770)
    assert lam == pytest.approx(0.12034, rel=1e-4)
    assert C.tau_from_weight_decay(0.015, lam, 2770) == pytest.approx(0.2)
    assert C.tau_from_weight_decay(1e-3, 0.1, 1000) == pytest.approx(10.0)


def test_power_lines_values_and_slope():
    for tpp, tau in ((20, 0.224), (80, 0.108), (234, 0.061)):
        assert C.tau_opt_power_lines(tpp) == pytest.approx(tau, abs=1e-3)
    carried = C.tau_at_tpp(C.tau_opt_power_lines(20), 20, 80)
    assert carried == pytest.approx(C.tau_opt_power_lines(80))


def test_run_rate_decay_and_batch_rule():
    run = C.Run(width=128, T=500, B=8, eta=0.1, tau=0.3, base_width=32)
    assert run.rate == pytest.approx(0.05)  # 0.1 * sqrt(32 / 128)
    assert C.tau_from_weight_decay(run.rate, run.decay, run.T) == pytest.approx(0.3)
    assert C.Run(32, 500, 8, 0.1, 0.3, lam=0.0).decay == 0.0
    assert C.plan(32, 40.0, 4, 1280.0) == (320, 4)  # D = 1280 = D_ref: B = B_ref
    T, B = C.plan(256, 40.0, 4, 1280.0)  # D = 10240: B = round(4 * 8^0.38)
    assert B == round(4 * 8**0.38) and T == round(10240 / B)
    fam = C.Recipe(B_ref=4, D_ref=1280.0, base_width=32).family([32, 64], 20.0, [0.5, 1.0], 0.1,
                                                               [7, 9])  # fmt: skip
    assert [(r.width, r.seed, r.tau) for r in fam] == [(32, 7, 0.5), (32, 9, 0.5), (64, 7, 1.0),
                                                       (64, 9, 1.0)]  # fmt: skip


def test_schedule_and_faults():
    clean = C.Run(32, 200, 4, 0.1, 1.0).schedule()
    assert clean[3] == pytest.approx(1.0) and clean[-1] == pytest.approx(1 / 196)  # warmup 4 steps
    assert np.all(np.diff(clean[4:]) < 0)
    bug = C.Run(32, 200, 4, 0.1, 1.0, fault="lr_bug", fault_at=0.5).schedule()
    np.testing.assert_array_equal(bug[:100], clean[:100])
    assert np.all(bug[100:] == 1.0)  # restarts at the peak and stays
    spike = C.Run(32, 200, 4, 0.1, 1.0, fault="spike").schedule()
    np.testing.assert_allclose(spike[100:102], C.SPIKE_FACTOR * clean[100:102])
    np.testing.assert_array_equal(spike[102:], clean[102:])
    shard = C.Run(32, 200, 4, 0.1, 1.0, fault="shard").noisy_steps()
    assert np.flatnonzero(shard).tolist() == list(range(100, 110))  # 5% of 200 steps
    assert not C.Run(32, 200, 4, 0.1, 1.0).noisy_steps().any()


# ----------------------------------------------------------------------------- the teacher
def test_teacher_spectrum_tail_and_monte_carlo_loss():
    lam, w = TEACHER.modes(50)
    np.testing.assert_allclose(lam * w**2, np.arange(1, 51.0) ** -1.3)
    direct = np.sum(np.arange(51, 2_000_001.0) ** -1.3)  # plus the integral of the rest
    assert TEACHER.tail(50) == pytest.approx(direct + 2_000_000**-0.3 / 0.3, rel=1e-5)
    assert TEACHER.floor == 0.25
    # the exact population loss equals a Monte Carlo estimate on fresh samples (20 modes)
    d, rng = 20, np.random.default_rng(4)
    theta, Q = rng.normal(size=(1, d)), np.linalg.qr(rng.normal(size=(d, d)))[0][None]
    lam, w_star = TEACHER.modes(d)
    z = rng.normal(size=(200_000, d)) * np.sqrt(lam)
    noise = rng.normal(size=200_000) * math.sqrt(TEACHER.floor + TEACHER.tail(d))
    sq = (z @ (theta[0] @ Q[0]) - z @ w_star - noise) ** 2
    exact = C.population_loss(theta, Q, TEACHER)[0]
    assert abs(sq.mean() - exact) < 3 * sq.std() / math.sqrt(sq.size)


# ----------------------------------------------------------------------------- the trainer
def test_gradient_matches_torch_autograd():
    rng = np.random.default_rng(1)
    K, B, d = 3, 5, 6
    theta, Q = rng.normal(size=(K, d)), rng.normal(size=(K, d, d))
    z, y = rng.normal(size=(K, B, d)), rng.normal(size=(K, B))
    t = torch.tensor(theta, requires_grad=True)
    w = (t[:, None, :] @ torch.tensor(Q))[:, 0]  # w = Q^T theta
    loss = ((torch.tensor(z) @ w[:, :, None])[:, :, 0] - torch.tensor(y)) ** 2
    loss.mean(dim=1).sum().backward()
    np.testing.assert_allclose(C._gradient(theta, Q, z, y), t.grad.numpy(), atol=1e-12)


def test_adamw_step_matches_torch():
    rng = np.random.default_rng(2)
    theta, grads = rng.normal(size=(2, 7)), rng.normal(size=(4, 2, 7))
    lr, lam = np.array([[0.01], [0.03]]), np.array([[0.5], [2.0]])
    params = [torch.tensor(theta[k : k + 1].copy(), requires_grad=True) for k in range(2)]
    opts = [
        torch.optim.AdamW([p], lr=float(lr[k, 0]), betas=C.ADAM_BETAS, eps=C.ADAM_EPS,
                          weight_decay=float(lam[k, 0]))
        for k, p in enumerate(params)
    ]  # fmt: skip
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    for step, g in enumerate(grads, start=1):
        C._adamw_step(theta, g, m, v, lr, lam, step)
        for k, (p, opt) in enumerate(zip(params, opts, strict=True)):
            p.grad = torch.tensor(g[k : k + 1])
            opt.step()
    for k, p in enumerate(params):
        np.testing.assert_allclose(theta[k], p.detach().numpy()[0], atol=1e-12)


def test_a_run_does_not_depend_on_its_stack_and_learns():
    runs = [C.Run(16, 120, 4, 0.12, tau, seed=s, n_eval=20) for s, tau in ((1, 1.0), (2, 0.25))]
    alone = C.train_stack(runs[:1], TEACHER)
    together = C.train_stack(runs, TEACHER)
    np.testing.assert_allclose(alone[0], together[0], rtol=1e-12)
    start = TEACHER.floor + TEACHER.tail(16) + 2 * (TEACHER.signal() - TEACHER.tail(16))
    assert together[:, -1].max() < 0.5 * start  # far below the loss at initialisation
    assert np.all(together > TEACHER.floor + TEACHER.tail(16))  # never below the width's floor
    faulty = C.train_stack([C.Run(16, 120, 4, 0.12, 1.0, seed=1, n_eval=20, fault="shard")],
                           TEACHER)  # fmt: skip
    np.testing.assert_allclose(faulty[0, :10], alone[0, :10])  # identical before the onset
    assert faulty[0, 10] > alone[0, 10]


# ----------------------------------------------------------------------------- collapse
def test_rescaled_curves_collapse_and_stretched_ones_do_not():
    t = np.linspace(0.05, 1, 20)
    f = 1 + 2 * np.exp(-5 * t)  # a planted universal shape
    family = np.array([A * f for A in (1.5, 2.0, 3.7)])  # L_n(t) = A_n f(t)
    e = C.normalise(family)
    np.testing.assert_allclose(e, np.broadcast_to(f / f[-1], e.shape))
    np.testing.assert_allclose(C.normalise(np.array([[3.0, 2.0, 1.5]]), L_hat=1.0), [[4, 2, 1]])


def test_shape_variances_and_rho_interval_recover_planted_components():
    rng = np.random.default_rng(5)
    J, R, m = 4, 4000, 6
    truth = np.linspace(-1, 1, J)[:, None, None] * 0.02 * np.ones((1, 1, m))
    shared = rng.normal(0, 0.01, (1, R, m))  # a seed effect common to all configs
    ell = 1.2 + truth + shared + rng.normal(0, 0.03, (J, R, m))
    v_sys, v_seed = C.shape_variances(ell, np.linspace(0.2, 1, m))
    assert v_sys == pytest.approx(0.02**2 * np.var(np.linspace(-1, 1, J), ddof=1), rel=0.05)
    assert v_seed == pytest.approx(0.01**2 + 0.03**2, rel=0.05)
    small = rng.normal(0, 0.03, (J, 24, m)) + 1.2  # collapsed: rho = 0, interval around it
    rho, lo, hi = C.collapse_ratio_interval(small, np.linspace(0.2, 1, m))
    assert lo < 0 < hi < 1 and lo <= rho <= hi
    apart = small + np.linspace(-1, 1, J)[:, None, None] * 0.1  # rho ~ 0.1^2 (5/9) / 0.03^2
    assert C.collapse_ratio_interval(apart, np.linspace(0.2, 1, m))[1] > 1


def test_area_contrast_in_seed_sd_units():
    rng = np.random.default_rng(6)
    t = np.linspace(0.1, 1, 10)
    ell = 1.1 + np.array([0.0, 0.02])[:, None, None] + rng.normal(0, 0.01, (2, 3000, 1)) + 0 * t
    c = C.area_contrast(ell, t, 1, 0)
    assert c.shape == (3000,) and c.mean() == pytest.approx(2.0, abs=0.1)
    assert C.excess_area(np.array([[1.5, 1.0, 1.0]]), [0.1, 0.5, 1.0]) == pytest.approx([1 / 6])


# ----------------------------------------------------------------------------- applications
T20 = np.arange(1, 21) / 20
SHAPE = 1 + np.exp(-4 * T20) - np.exp(-4)


def test_alignment_and_drift_on_planted_curves():
    assert C.align_final_loss(2.5 * SHAPE[:6], SHAPE[:6]) == pytest.approx(2.5)
    x = C.drift(1.7 * SHAPE, T20, SHAPE, 0.3)
    assert np.all(np.isnan(x[T20 <= 0.3])) and np.isnan(x[-1])
    np.testing.assert_allclose(x[(T20 > 0.3) & (T20 < 1)], 0.0, atol=1e-12)  # any scale
    bumped = 1.7 * SHAPE * np.where(T20 >= 0.5, 1.1, 1.0)
    first = C.first_alarm(C.drift(bumped, T20, SHAPE, 0.3), T20, 0.05)
    assert first == pytest.approx(0.5)
    rise = C.raw_rise(np.array([3.0, 2.0, 2.5, 1.0]), np.array([0.25, 0.5, 0.75, 1.0]), 0.3)
    np.testing.assert_allclose(rise, [np.nan, 0.0, 0.25, 0.0])
    assert C.first_alarm(rise, [0.25, 0.5, 0.75, 1.0], 0.3) == math.inf


def test_detector_scores_in_seed_sd_units():
    rng = np.random.default_rng(7)
    noise = 1 + 0.01 * rng.standard_normal((400, T20.size)) * (T20 > 0.3)
    det = C.fit_detector(2.0 * SHAPE * noise, T20, 0.3)
    np.testing.assert_allclose(det.ell_bar, SHAPE / SHAPE[-1], rtol=1e-2)
    s = det.scores(2.0 * SHAPE * np.where(T20 >= 0.6, 1.1, 1.0))
    assert abs(s[T20 == 0.6][0]) > 5 and np.nanmax(np.abs(s[T20 < 0.6])) < 0.5


def test_compute_optimal_width_and_power_law_forecast():
    N = np.array([32.0, 64, 128, 256])
    assert C.compute_optimal_width(N, 1 + (np.log(N) - np.log(90)) ** 2) == pytest.approx(90)
    assert math.isnan(C.compute_optimal_width(N, 1 + (np.log(N) - np.log(900)) ** 2))
    assert math.isnan(C.compute_optimal_width(N, 3 - (np.log(N) - np.log(90)) ** 2))
    t = np.linspace(0.05, 0.3, 11)
    assert C.extrapolate_power_law(t, 0.8 + 0.3 * t**-0.7) == pytest.approx(1.1, rel=1e-4)


def test_bootstrap_argmin_finds_a_clear_minimum():
    losses = np.array([[1.0, 1.1, 0.9], [0.5, 0.6, 0.4], [2.0, 2.2, 1.9]])
    assert np.all(C.bootstrap_argmin(losses, seed=0, n_boot=50) == 1)


# ----------------------------------------------------------------------------- bad input
T5 = np.arange(1, 6) / 5
GOOD = np.ones((2, 3, 5)) + np.arange(5)[::-1] * 0.1
BAD_CALLS = [
    (lambda: C.weight_decay_from_tau(0.0, 0.2, 100), ValueError, "eta"),
    (lambda: C.weight_decay_from_tau(0.1, float("nan"), 100), ValueError, "tau"),
    (lambda: C.tau_from_weight_decay(0.1, 0.1, 10.5), TypeError, "T must be an integer"),
    (lambda: C.tau_opt_power_lines(-1), ValueError, "TPP"),
    (lambda: C.tau_at_tpp(0.2, 20, True), TypeError, "TPP"),
    (lambda: C.Teacher(a=1.0, b=1.0, sigma=1.0), ValueError, "b"),
    (lambda: C.Teacher(a=1.0, b=1.3, sigma=-1.0), ValueError, "sigma"),
    (lambda: TEACHER.modes(0), ValueError, "d"),
    (lambda: C.Run(8, 100, 8, 0.1, 0.0), ValueError, "tau"),
    (lambda: C.Run(8, 10, 8, 0.1, 0.2), ValueError, "n_eval"),
    (lambda: C.Run(8, 100, 8, 0.1, 0.2, fault="bitflip"), ValueError, "fault"),
    (lambda: C.Run(8, 100, 8, 0.1, 0.2, fault_at=1.0), ValueError, "fault_at"),
    (lambda: C.Run(8, 100, 8, 0.1, 0.2, lam=-0.1), ValueError, "lam"),
    (lambda: C.Run(8, 100, 8, 0.1, 0.2, seed=1.5), TypeError, "seed"),
    (lambda: C.plan(8, float("inf"), 8, 2000.0), ValueError, "TPP"),
    (lambda: C.Recipe(4, 500.0, 4).family([4, 8], 2.0, [0.5], 0.1, [1]), ValueError, "lengths"),
    (lambda: C.train_stack([], TEACHER), TypeError, "runs"),
    (lambda: C.train_runs([C.Run(8, 40, 8, 0.1, 0.2)], "teacher"), TypeError, "teacher"),
    (lambda: C.train_runs([C.Run(8, 40, 8, 0.1, 0.2)], TEACHER, stack=0), ValueError, "stack"),
    (
        lambda: C.train_stack([C.Run(8, 40, 8, 0.1, 0.2), C.Run(16, 40, 8, 0.1, 0.2)], TEACHER),
        ValueError,
        "one width",
    ),  # fmt: skip
    (lambda: C.normalise([2.0, 1.0], L_hat=1.5), ValueError, "L_hat"),
    (lambda: C.normalise([[2.0, np.nan]]), ValueError, "NaN"),
    (lambda: C.excess_area("curves", [0.5]), TypeError, "ell"),
    (lambda: C.excess_area([[1.0, 1.0]], [0.5, 1.0], t_min=2.0), ValueError, "t_min"),
    (lambda: C.shape_variances(GOOD[:1], T5), ValueError, "configs"),
    (lambda: C.collapse_ratio(GOOD, T5, n_avg=0), ValueError, "n_avg"),
    (lambda: C.collapse_ratio_interval(GOOD[:, :2], T5), ValueError, "replicates"),
    (lambda: C.area_contrast(GOOD, T5, 1, 1), ValueError, "different"),
    (lambda: C.area_contrast(GOOD, T5, 2, 0), ValueError, "hi"),
    (lambda: C.align_final_loss([1.0, -1.0], [1.0, 1.0]), ValueError, "L_prefix"),
    (lambda: C.drift([1.0, 1.0], [0.5, 1.0], [1.0, 1.0], 1.0), ValueError, "t_start"),
    (lambda: C.drift([1.0, 1.0, 1.0], [0.5, 1.0], [1.0, 1.0], 0.3), ValueError, "lengths"),
    (lambda: C.fit_detector(np.ones((2, 5)), T5, 0.3), ValueError, ">= 3 curves"),
    (lambda: C.raw_rise([1.0, 0.0], [0.5, 1.0], 0.3), ValueError, "L"),
    (lambda: C.first_alarm([1.0, 1.0], [0.5, 1.0], 0.0), ValueError, "threshold"),
    (lambda: C.compute_optimal_width([1.0, 2.0], [1.0, 2.0]), ValueError, ">= 3"),
    (lambda: C.extrapolate_power_law([0.1, 0.2, 0.3], [3, 2, 1]), ValueError, "at least 4"),
    (lambda: C.bootstrap_argmin(np.ones((3, 1)), seed=0), ValueError, "replicates"),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD_CALLS)
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
