"""Unit tests of lib.moe_leverage: the published law, the EL estimator, fits, the frontier,
the optimum, the real data."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lib.moe_leverage import (
    TIAN2025,
    JointLawConstants,
    activation_hat,
    clark_dense_isoflop,
    clark_leverage,
    compare_laws,
    compute_slope,
    efficiency_leverage,
    el_joint,
    fit_activation_law,
    fit_joint_law,
    fit_optimum,
    fit_within_slope,
    granularity_curvature,
    isoflop_frontier,
    load_clark_curves,
    load_clark_final,
    optimal_granularity,
)


# ---------------------------------------------------------------------------- published law
def test_joint_law_reproduces_published_anchors():
    # Tian et al. 2025: EL > 7 at A = 3.1%, G = 12, 1e22 FLOPs; G* in 8-12; A_hat(1) ~ 1.
    assert el_joint(0.031, 12, 1e22) == pytest.approx(7.245, abs=0.01)
    assert optimal_granularity() == pytest.approx(2 ** (0.117 / (2 * 0.0167)), rel=1e-12)
    assert 8 <= optimal_granularity() <= 12
    assert activation_hat(1.0)[0] == pytest.approx(1.0163, abs=1e-4)
    assert activation_hat(0.031)[0] == pytest.approx(0.0473, abs=1e-4)
    assert abs(el_joint(1.0, 12, 1e22) - 1) < 0.02


def test_joint_law_closed_form_and_broadcasting():
    A, G, C = 0.1, 8.0, 1e20
    exponent = TIAN2025.a + TIAN2025.d * 20 + TIAN2025.gamma * 9 + TIAN2025.beta * 3
    assert el_joint(A, G, C) == pytest.approx(activation_hat(A)[0] ** exponent, rel=1e-12)
    assert el_joint([0.5, 0.25, 0.125], 12, [[1e18], [1e22]]).shape == (2, 3)
    # more sparsity, more leverage at large compute
    assert np.all(np.diff(el_joint([0.5, 0.25, 0.125, 0.0625], 12, 1e22)) > 0)


def test_compute_slope_and_curvature_are_the_laws_derivatives():
    A, C, h = 0.125, 1e20, 1e-4
    up, down = el_joint(A, 12, C * math.exp(h)), el_joint(A, 12, C * math.exp(-h))
    assert compute_slope(A)[0] == pytest.approx(float(np.log(up / down)) / (2 * h), rel=1e-6)
    ln = np.log(el_joint(A, [8.0, 16.0, 32.0], C))
    assert granularity_curvature(A)[0] == pytest.approx(ln[0] - 2 * ln[1] + ln[2], rel=1e-9)
    assert compute_slope(A)[0] > 0 and granularity_curvature(A)[0] < 0  # Table 2's signs


# ---------------------------------------------------------------------------- EL estimator
def test_leverage_recovers_planted_power_law():
    # dense L = 10 C^-0.5; an MoE at C = 100 with the loss of a dense model at C = 400: EL = 4
    C = np.logspace(1, 4, 7)
    lev = efficiency_leverage(C, 10 * C**-0.5, [100.0, 100.0], [10 * 400.0**-0.5, 10 * 100**-0.5])
    np.testing.assert_allclose(lev.EL, [4.0, 1.0], rtol=1e-12)
    assert lev.in_range.all()


def test_leverage_flags_instead_of_extrapolating():
    C = np.array([1.0, 10.0, 100.0])
    lev = efficiency_leverage(C, [3.0, 2.0, 1.0], [5.0, 5.0], [0.5, 4.0])
    assert not lev.in_range.any() and np.isnan(lev.EL).all()


def test_leverage_makes_a_noisy_dense_curve_monotone():
    # a non-monotone bump is pooled by isotonic regression; the result stays finite and positive
    lev = efficiency_leverage([1, 10, 100, 1000], [4.0, 2.0, 2.2, 1.0], [10.0], [1.5])
    assert lev.in_range[0] and 10 < lev.C_equivalent[0] < 1000


# ---------------------------------------------------------------------------- fits
def test_activation_law_recovers_planted_exponent():
    A = np.repeat([1.0, 0.5, 0.25, 0.125], 3)
    EL = activation_hat(A) ** -0.6 * np.exp(np.random.default_rng(0).normal(0, 0.01, A.size))
    fit = fit_activation_law(A, EL, n_bootstrap=200, seed=1)
    assert fit.a_A == pytest.approx(-0.6, abs=0.02)
    assert fit.ci["a_A"][0] < -0.6 < fit.ci["a_A"][1] and fit.r2 > 0.99
    np.testing.assert_allclose(fit.predict([0.25]), activation_hat(0.25) ** fit.a_A)


def test_joint_law_fit_recovers_planted_constants():
    A = np.tile([1.0, 0.5, 0.25, 0.125, 0.03, 0.004], 3)
    C = np.repeat([1e8, 1e9, 1e10], 6)
    planted = JointLawConstants(0.5, -0.1, 0.0, 0.0, 0.02, TIAN2025.A_max)
    EL = el_joint(A, 1.0, C, planted)
    fixed = fit_joint_law(A, C, EL, A_start=0.02)
    assert (fixed.a, fixed.d) == pytest.approx((0.5, -0.1), rel=1e-9)
    free = fit_joint_law(A, C, EL)  # A_start profiled on a 3.6%-spaced grid
    assert free.A_start == pytest.approx(0.02, rel=0.04)
    np.testing.assert_allclose(free.predict(A, C), EL, rtol=0.02)


def test_activation_only_law_is_the_joint_law_with_d_zero():
    A = np.tile([1.0, 0.5, 0.25, 0.125], 3)
    C = np.repeat([1e8, 1e9, 1e10], 4)
    EL = activation_hat(A) ** -0.8
    fit = fit_joint_law(A, C, EL, A_start=TIAN2025.A_start, compute=False)
    assert fit.d == 0.0 and fit.a == pytest.approx(-0.8, rel=1e-9)


def test_compare_laws_prefers_the_joint_law_when_leverage_grows_with_compute():
    A = np.tile([1.0, 0.5, 0.25, 0.125, 0.0625], 4)
    C = np.repeat([1e8, 1e9, 1e10, 1e11], 5)
    planted = JointLawConstants(0.3, -0.1, 0.0, 0.0, 0.01, TIAN2025.A_max)
    noise = np.exp(np.random.default_rng(2).normal(0, 0.01, A.size))
    EL = el_joint(A, 1.0, C, planted) * noise
    test = compare_laws(A, C, EL, C < 1e11, 100, seed=3, A_start=0.01)
    assert test.joint < 0.03 < test.activation
    assert test.difference == pytest.approx(test.joint - test.activation)
    assert test.ci["difference"][1] < 0 and (test.n_train, test.n_test) == (15, 5)
    # without growth the compute term buys nothing on held-out points
    flat = el_joint(A, 1.0, 1e9, planted) * noise
    assert compare_laws(A, C, flat, C < 1e11, A_start=0.01).difference > -0.01


def test_within_slope_ignores_group_offsets():
    x = np.tile(np.log([2.0, 4.0, 8.0, 16.0]), 3)
    groups = np.repeat(["s", "m", "l"], 4)
    y = 0.3 * x + np.repeat([0.0, 1.0, -2.0], 4)
    fit = fit_within_slope(x, y, groups, n_bootstrap=100)
    assert fit.b == pytest.approx(0.3, rel=1e-12)
    assert fit.ci["b"] == pytest.approx((0.3, 0.3), rel=1e-9)


# ---------------------------------------------------------------------------- frontier, optimum
def chinchilla_runs(c: float = 1.0):
    """Runs on a lattice of sizes N and tokens D with L = 0.5 + (c N)^-0.5 + D^-0.5."""
    N, D = np.meshgrid(2.0 ** np.arange(2, 12), 2.0 ** np.arange(4, 14))
    N, D = N.ravel(), D.ravel()
    return N * D, N, 0.5 + (c * N) ** -0.5 + D**-0.5


def test_frontier_finds_the_planted_compute_optimum():
    C, N, L = chinchilla_runs()
    front = isoflop_frontier(C, N, L)
    inner = front[front.interior]
    assert len(inner) >= 5 and not front.interior.all()  # the lattice's corners are edges
    # with equal exponents the optimum is N = D = sqrt(C), L* = 0.5 + 2 C^-1/4
    np.testing.assert_allclose(inner.N_opt, np.sqrt(inner.C), rtol=0.05)
    np.testing.assert_allclose(inner.L, 0.5 + 2 * inner.C**-0.25, rtol=0.01)
    assert (front.n_runs >= 3).all() and np.all(np.diff(front.C) > 0)


def test_leverage_on_a_frontier_recovers_a_planted_parameter_multiplier():
    # a family with c = 4 times the useful parameters per FLOP reaches dense L*(4 C) at C
    dense, moe = (isoflop_frontier(*chinchilla_runs(c)) for c in (1.0, 4.0))
    dense, moe = dense[dense.interior], moe[moe.interior]
    lev = efficiency_leverage(dense.C, dense.L, moe.C, moe.L)
    assert lev.in_range.sum() >= 3
    np.testing.assert_allclose(lev.EL[lev.in_range], 4.0, rtol=0.1)


def test_optimum_of_a_planted_parabola_and_of_a_monotone_curve():
    x = np.log2([4.0, 8.0, 16.0, 32.0])
    rng = np.random.default_rng(0)
    peaked = -((x - 3.5) ** 2) + rng.normal(0, 0.05, (10, 4))
    fit = fit_optimum(x, peaked, n_bootstrap=200, seed=1)
    assert fit.x_opt == pytest.approx(3.5, abs=0.1) and 2 < fit.ci[0] < 3.5 < fit.ci[1] < 5
    assert fit.curvature == pytest.approx(-2.0, rel=0.1) and fit.curvature_ci[1] < 0
    rising = x + rng.normal(0, 0.05, (10, 4))  # no interior optimum: the peak is the last edge
    edge = fit_optimum(x, rising, n_bootstrap=200, seed=1)
    assert edge.x_opt == pytest.approx(5.0) and edge.ci[1] == pytest.approx(5.0)


# ---------------------------------------------------------------------------- Clark et al.
def test_clark_final_rows_and_leverage():
    runs = load_clark_final()
    assert len(runs) == 223 and runs.hyper_id.is_unique
    assert set(runs.router_type) == {"Dense", "S-Base", "RL-R", "Hash"}
    assert (runs.C > 0).all() and runs.A.between(0, 1).all()
    sbase = clark_leverage(runs, "S-Base")
    inside = sbase[sbase.in_range]
    assert len(sbase) == 53 and len(inside) == 39
    assert (inside.EL > 1).all()  # every in-range routed run beats its dense equivalent


def test_clark_dense_runs_put_the_optimum_at_the_edge_of_their_grid():
    # published data: at almost every budget the best dense size is the largest with a
    # checkpoint there, so the compute-optimal size lies outside the sizes x checkpoints trained
    for n_budgets in (12, 16, 24):
        front = clark_dense_isoflop(load_clark_curves(), n_budgets=n_budgets)
        assert len(front) == n_budgets and front.interior.sum() <= 1
    assert (front.n_sizes >= 1).all() and np.all(np.diff(front.C) > 0)


# ---------------------------------------------------------------------------- bad input
BAD_CALLS = [
    (lambda: activation_hat(0.0), ValueError, "A must be > 0"),
    (lambda: activation_hat(1.5), ValueError, "A must be <= 1"),
    (lambda: el_joint(np.nan, 8, 1e20), ValueError, "A contains NaN"),
    (lambda: el_joint(0.1, 0.0, 1e20), ValueError, "G must be > 0"),
    (lambda: el_joint(0.1, 8, -1.0), ValueError, "C must be > 0"),
    (lambda: el_joint(0.1, 8, np.inf), ValueError, "C contains NaN or inf"),
    (lambda: el_joint("0.1", 8, 1e20), TypeError, "A must be an array"),
    (lambda: efficiency_leverage([1.0], [1.0], [1.0], [1.0]), ValueError, "C_dense has 1"),
    (lambda: efficiency_leverage([1, -2], [2, 1], [1], [1.5]), ValueError, "C_dense must be > 0"),
    (lambda: efficiency_leverage([1, 2], [2, 1], [1], [np.nan]), ValueError, "L_moe contains"),
    (lambda: efficiency_leverage([1, 2], [2, 1], [1, 2], [1.5]), ValueError, "equal lengths"),
    (lambda: fit_activation_law([1.0, 0.5, 0.25], [1.0, 0.0, 2.0]), ValueError, "EL must be > 0"),
    (
        lambda: fit_activation_law([1.0, 0.5], [1.0, 2.0], n_bootstrap=True),
        TypeError,
        "n_bootstrap must be an integer",
    ),
    (lambda: fit_joint_law([1.0, 0.5], [1e8, 1e9], [1.0, 2.0]), ValueError, "at least 3"),
    (
        lambda: fit_joint_law([1, 0.5, 0.2], [1e8] * 3, [1, 2, 4], A_start=0.0),
        ValueError,
        "A_start must lie in",
    ),
    (lambda: fit_joint_law([0.5] * 3, [1e8] * 3, [1, 2, 4]), ValueError, "determine"),
    (
        lambda: fit_joint_law([1, 0.5, 0.2], [1e8, 1e9, 1e10], [1, 2, 4], compute=1),
        TypeError,
        "compute must be",
    ),
    (
        lambda: compare_laws([0.5] * 6, [1e8] * 6, [2.0] * 6, [1, 0, 1, 0, 1, 0]),
        TypeError,
        "train must be a boolean mask",
    ),
    (
        lambda: compare_laws([0.5] * 6, [1e8] * 6, [2.0] * 6, [True] * 6),
        ValueError,
        ">= 1 held-out",
    ),
    (
        lambda: fit_within_slope([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0], ["a", "a", "b"]),
        ValueError,
        "equal lengths",
    ),
    (
        lambda: fit_within_slope([1.0, 2.0, 3.0], [1, 2, 3], [["a"], ["a"], ["b"]]),
        ValueError,
        "groups must be 1-D",
    ),
    (lambda: isoflop_frontier([1.0, 2.0], [1.0, 2.0], [1.0, 2.0]), ValueError, "C has 2"),
    (lambda: isoflop_frontier([1.0] * 3, [1.0, 0.0, 2.0], [1.0] * 3), ValueError, "N must be"),
    (lambda: fit_optimum([1.0, 2.0, 3.0], np.ones((1, 3))), ValueError, "replicates >= 2"),
    (lambda: fit_optimum([1.0, 2.0, 3.0], np.ones((4, 2))), ValueError, "Y must be"),
    (lambda: fit_optimum([1.0, 2.0], np.ones((4, 2))), ValueError, "x has 2"),
    (lambda: clark_leverage(load_clark_final(), "Switch"), ValueError, "router must be one of"),
    (lambda: clark_leverage(pd.DataFrame({"k": [1]}), "Hash"), ValueError, "runs lacks columns"),
    (lambda: load_clark_final("/nonexistent/curves.csv.gz"), ValueError, "does not exist"),
    (lambda: clark_dense_isoflop(load_clark_curves(), n_budgets=1), ValueError, "n_budgets"),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD_CALLS)
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(")):
        call()
