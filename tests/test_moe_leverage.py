"""Unit tests of lib.moe_leverage: the published law, the EL estimator, fits, the toy, the data."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lib.moe_leverage import (
    TIAN2025,
    JointLawConstants,
    MLPSpec,
    ToyConfig,
    _Bank,
    activation_hat,
    clark_leverage,
    compute_slope,
    dense_mlp,
    efficiency_leverage,
    el_joint,
    fit_activation_law,
    fit_joint_law,
    fit_within_slope,
    granularity_curvature,
    heldout_joint_law,
    load_clark_final,
    make_memory_task,
    optimal_granularity,
    run_toy_replicate,
    toy_leverage,
    train_bank,
    wsd_lr,
)

SMALL = ToyConfig(n_keys=64, d_in=6, d_out=3, batch=32, warmup=5)


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


def test_heldout_test_scores_a_law_that_holds_near_zero():
    A = np.tile([1.0, 0.5, 0.25, 0.125, 0.0625], 4)
    C = np.repeat([1e8, 1e9, 1e10, 1e11], 5)
    planted = JointLawConstants(0.3, -0.05, 0.0, 0.0, 0.01, TIAN2025.A_max)
    noise = np.exp(np.random.default_rng(2).normal(0, 0.01, A.size))
    test = heldout_joint_law(A, C, el_joint(A, 1.0, C, planted) * noise, C < 1e10, 50, seed=3)
    assert test.error < 0.05 and test.ci[0] <= test.error <= test.ci[1]
    assert (test.n_train, test.n_test) == (10, 10)


def test_within_slope_ignores_group_offsets():
    x = np.tile(np.log([2.0, 4.0, 8.0, 16.0]), 3)
    groups = np.repeat(["s", "m", "l"], 4)
    y = 0.3 * x + np.repeat([0.0, 1.0, -2.0], 4)
    fit = fit_within_slope(x, y, groups, n_bootstrap=100)
    assert fit.b == pytest.approx(0.3, rel=1e-12)
    assert fit.ci["b"] == pytest.approx((0.3, 0.3), rel=1e-9)


# ---------------------------------------------------------------------------- the toy
def test_memory_task_is_zipf_and_seeded():
    task = make_memory_task(SMALL, seed=4)
    assert task.keys.shape == (64, 6) and task.values.shape == (64, 3)
    assert task.p.sum() == pytest.approx(1.0) and np.all(np.diff(task.p) < 0)
    assert task.p[0] / task.p[1] == pytest.approx(2**SMALL.zipf)
    np.testing.assert_array_equal(task.keys, make_memory_task(SMALL, seed=4).keys)
    # the loss of f = 0 is the p-weighted mean square of the values
    expected = float(task.p @ (task.values**2).mean(axis=1))
    assert task.loss_of(np.zeros_like(task.values)) == pytest.approx(expected)


def test_mlp_spec_counts_the_papers_way():
    moe = MLPSpec(n_experts=16, top_k=2, d_expert=4)
    assert moe.A == 1 / 8 and moe.units == 64 and moe.granularity(16) == 8.0
    assert moe.flops(16, 8) == 2 * 2 * 4 * (16 + 8)  # active experts only
    assert moe.flops(16, 8, router=True) == 2 * 2 * 4 * 24 + 2 * 16 * 16
    dense = dense_mlp(8)
    assert dense.dense and dense.A == 1.0 and dense.flops(16, 8) == moe.flops(16, 8)
    assert dense.flops(16, 8, router=True) == dense.flops(16, 8)


def test_bank_gradient_matches_finite_differences():
    specs = [dense_mlp(5), MLPSpec(4, 2, 3), MLPSpec(3, 1, 2), MLPSpec(2, 2, 2), dense_mlp(2)]
    bank = _Bank(specs, 4, 3, seed=0, dtype=np.float64)
    rng = np.random.default_rng(5)
    bank.p["W2"][:] = rng.standard_normal(bank.p["W2"].shape)
    bank.p["b1"][:] = 0.1 * rng.standard_normal(bank.p["b1"].shape)
    X, Y, balance = rng.standard_normal((7, 4)), rng.standard_normal((7, 3)), 0.3

    def objective() -> float:  # sum of every model's loss and balance loss
        f = bank.forward(X)
        probs, chosen, _ = f["routes"]
        aux = balance * bank.expert_n * chosen.mean(axis=0) / bank.expert_k * probs.mean(axis=0)
        return float(((f["out"] - Y) ** 2).mean(axis=(1, 2)).sum() + aux.sum())

    bank.backward(X, Y, balance)
    analytic, numeric = bank.grad.copy(), np.zeros_like(bank.grad)
    for i in range(len(bank.theta)):
        old = bank.theta[i]
        bank.theta[i] = old + 1e-6
        up = objective()
        bank.theta[i] = old - 1e-6
        numeric[i] = (up - objective()) / 2e-6
        bank.theta[i] = old
    np.testing.assert_allclose(analytic, numeric, atol=1e-7)


def test_routing_picks_top_k_and_renormalises():
    bank = _Bank([MLPSpec(8, 3, 2), MLPSpec(4, 1, 2)], 5, 2, seed=1, dtype=np.float64)
    X = np.random.default_rng(0).standard_normal((50, 5))
    probs, chosen, gates = bank._route(X)
    logits = X @ bank.p["Wr"]
    assert (chosen[:, :8].sum(1) == 3).all() and (chosen[:, 8:].sum(1) == 1).all()
    np.testing.assert_array_equal(chosen[:, :8], logits[:, :8] >= np.sort(logits[:, :8])[:, [5]])
    np.testing.assert_allclose(gates[:, :8].sum(1), 1.0)
    np.testing.assert_allclose(probs[:, 8:].sum(1), 1.0)


def test_models_in_a_bank_train_as_if_alone():
    # a model's init stream and batches do not depend on the other models of its bank
    task = make_memory_task(SMALL, seed=0)
    for spec in (MLPSpec(4, 2, 2), dense_mlp(8)):
        alone = train_bank(task, [spec], (60,), SMALL, seed=1)
        crowd = train_bank(task, [spec, dense_mlp(16), MLPSpec(8, 2, 2)], (60,), SMALL, seed=1)
        assert crowd.loss[0, 0] == pytest.approx(alone.loss[0, 0], rel=1e-4)
        assert crowd.loss[0, 0] != crowd.loss[0, 1]


def test_budget_branches_equal_runs_trained_alone():
    task = make_memory_task(SMALL, seed=0)
    specs = [dense_mlp(8), MLPSpec(4, 2, 2)]
    both = train_bank(task, specs, (50, 100), SMALL, seed=2)
    for i, budget in enumerate((50, 100)):
        alone = train_bank(task, specs, (budget,), SMALL, seed=2)
        np.testing.assert_array_equal(both.loss[i], alone.loss[0])
    assert both.loss[1, 0] < both.loss[0, 0]  # more steps, lower loss
    assert np.isnan(both.load_entropy[:, 0]).all() and (both.load_entropy[:, 1] <= 1).all()


def test_wsd_schedule():
    config = ToyConfig(lr=1e-2, warmup=10, decay_frac=0.2)
    lrs = np.array([wsd_lr(step, 100, config) for step in range(100)])
    assert lrs[0] == pytest.approx(1e-3) and lrs[9] == pytest.approx(1e-2)
    assert (lrs[10:80] == 1e-2).all() and lrs[99] == pytest.approx(1e-2 / 20)
    assert np.all(np.diff(lrs[80:]) < 0)


def test_replicate_and_leverage_table():
    specs = [dense_mlp(w) for w in (2, 4, 8, 16, 32)] + [MLPSpec(2, 2, 2), MLPSpec(8, 2, 2)]
    result = run_toy_replicate(SMALL, specs, (40, 80), seed=5)
    table = toy_leverage(result.loss, specs, result.budgets, SMALL)
    assert len(table) == 4 and set(table.A) == {1.0, 0.25}
    assert (table.EL_router[table.in_range] < table.EL[table.in_range]).all()
    assert (table.C == 3 * 2 * 2 * 2 * (6 + 3) * table.budget * SMALL.batch).all()


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
        lambda: heldout_joint_law([0.5] * 6, [1e8] * 6, [2.0] * 6, [1, 0, 1, 0, 1, 0]),
        TypeError,
        "train must be a boolean mask",
    ),
    (
        lambda: heldout_joint_law([0.5] * 6, [1e8] * 6, [2.0] * 6, [True] * 5 + [False]),
        ValueError,
        ">= 3 points on each side",
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
    (lambda: MLPSpec(4, 5, 2), ValueError, "top_k must be <= 4"),
    (lambda: MLPSpec(4, 2, 2.5), TypeError, "d_expert must be an integer"),
    (lambda: dense_mlp(True), TypeError, "width must be an integer"),
    (lambda: MLPSpec(4, 2, 2).flops(0, 3), ValueError, "d_in must be >= 1"),
    (lambda: ToyConfig(lr=float("nan")), ValueError, "lr must be finite"),
    (lambda: ToyConfig(batch=0), ValueError, "batch must be >= 1"),
    (lambda: ToyConfig(zipf=-1.0), ValueError, "zipf must lie in"),
    (lambda: make_memory_task(SMALL, seed=-1), ValueError, "seed must be >= 0"),
    (lambda: make_memory_task({"n_keys": 8}, seed=0), TypeError, "config must be a ToyConfig"),
    (
        lambda: train_bank(make_memory_task(SMALL, 0), [dense_mlp(2)], (4,), SMALL, 0),
        ValueError,
        "decay before warmup",
    ),
    (
        lambda: train_bank(make_memory_task(SMALL, 0), dense_mlp(2), (40,), SMALL, 0),
        TypeError,
        "specs must be a non-empty list",
    ),
    (
        lambda: run_toy_replicate(SMALL, [dense_mlp(2)], (40,), seed=1.5),
        TypeError,
        "seed must be an integer",
    ),
    (
        lambda: toy_leverage(np.ones((2, 2)), [dense_mlp(2), dense_mlp(4)], (40,), SMALL),
        ValueError,
        "loss must be",
    ),
    (lambda: clark_leverage(load_clark_final(), "Switch"), ValueError, "router must be one of"),
    (lambda: clark_leverage(pd.DataFrame({"k": [1]}), "Hash"), ValueError, "runs lacks columns"),
    (lambda: load_clark_final("/nonexistent/curves.csv.gz"), ValueError, "does not exist"),
    (lambda: wsd_lr(100, 100, SMALL), ValueError, "step must be <= 99"),
    (lambda: wsd_lr(0, 100, None), TypeError, "config must be a ToyConfig"),
    (lambda: make_memory_task(SMALL, 0).loss_of(np.zeros((3, 3))), ValueError, "predictions must"),
    (lambda: train_bank(None, [dense_mlp(2)], (40,), SMALL, 0), TypeError, "task must be"),
    (
        lambda: toy_leverage(np.ones((1, 2)), [dense_mlp(2), MLPSpec(2, 1, 1)], (40,), None),
        TypeError,
        "config must be a ToyConfig",
    ),
    (
        lambda: toy_leverage(np.ones((1, 2)), [dense_mlp(2), MLPSpec(2, 1, 1)], (4.5,), SMALL),
        TypeError,
        "budgets",
    ),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD_CALLS)
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(")):
        call()
