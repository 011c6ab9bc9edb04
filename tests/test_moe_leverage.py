"""Unit tests of lib.moe_leverage: the published law, the EL estimator, the fits, the toy task."""

from __future__ import annotations

import numpy as np
import pytest

from lib.moe_leverage import (
    TIAN2025,
    activation_hat,
    efficiency_leverage,
    el_joint,
    exact_excess_loss,
    fit_activation_law,
    fit_within_slope,
    load_clark_final,
    make_pair_memory,
    optimal_granularity,
    training_flops,
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


@pytest.mark.parametrize(
    "kwargs", [dict(A=0.0), dict(A=1.5), dict(A=np.nan), dict(G=0.0), dict(C=-1.0), dict(C=np.inf)]
)
def test_joint_law_rejects_bad_input(kwargs):
    args = dict(A=0.1, G=8.0, C=1e20) | kwargs
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        el_joint(**args)


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


@pytest.mark.parametrize(
    "args, name",
    [
        (([1.0], [1.0], [1.0], [1.0]), "C_dense"),
        (([1.0, -2.0], [2.0, 1.0], [1.0], [1.5]), "C_dense"),
        (([1.0, 2.0], [2.0, 1.0], [1.0], [np.nan]), "L_moe"),
        (([1.0, 2.0], [2.0, 1.0], [1.0, 2.0], [1.5]), "C_moe"),
    ],
)
def test_leverage_rejects_bad_input(args, name):
    with pytest.raises(ValueError, match=name):
        efficiency_leverage(*args)


# ---------------------------------------------------------------------------- fits
def test_activation_law_recovers_planted_exponent():
    A = np.repeat([1.0, 0.5, 0.25, 0.125], 3)
    EL = activation_hat(A) ** -0.6 * np.exp(np.random.default_rng(0).normal(0, 0.01, A.size))
    fit = fit_activation_law(A, EL, n_bootstrap=200, seed=1)
    assert fit.a_A == pytest.approx(-0.6, abs=0.02)
    assert fit.ci["a_A"][0] < -0.6 < fit.ci["a_A"][1] and fit.r2 > 0.99
    np.testing.assert_allclose(fit.predict([0.25]), activation_hat(0.25) ** fit.a_A)


def test_within_slope_ignores_group_offsets():
    x = np.tile(np.log([2.0, 4.0, 8.0, 16.0]), 3)
    groups = np.repeat(["s", "m", "l"], 4)
    y = 0.3 * x + np.repeat([0.0, 1.0, -2.0], 4)
    fit = fit_within_slope(x, y, groups, n_bootstrap=100)
    assert fit.b == pytest.approx(0.3, rel=1e-12)
    assert fit.ci["b"] == pytest.approx((0.3, 0.3), rel=1e-9)


def test_fits_reject_bad_input():
    with pytest.raises(ValueError, match="EL"):
        fit_activation_law([1.0, 0.5, 0.25], [1.0, 0.0, 2.0])
    with pytest.raises(ValueError, match="lengths"):
        fit_within_slope([1.0, 2.0, 3.0], [1.0, 2.0], ["a", "a", "b"])


# ---------------------------------------------------------------------------- toy task
def test_pair_memory_rows_and_entropy():
    task = make_pair_memory(4, 3, zipf=0.0, seed=0)
    assert task.vocab_size == 12 and task.p.sum() == pytest.approx(1.0)
    assert task.entropy() == pytest.approx(np.log(16) / 3)  # uniform pairs: H(a, b) = ln 16
    rows = task.sample(500, seed=1)
    assert rows.shape == (500, 4) and (rows[:, 0] == 11).all()
    assert rows[:, 1].max() < 4 and (rows[:, 2] >= 4).all() and (rows[:, 3] >= 8).all()
    pair = rows[:, 1] * 4 + rows[:, 2] - 4
    np.testing.assert_array_equal(rows[:, 3], 8 + task.value[pair])  # value is a function


def test_exact_excess_loss_of_the_uniform_predictor():
    torch = pytest.importorskip("torch")
    task = make_pair_memory(4, 3, zipf=1.2, seed=0)

    class Uniform(torch.nn.Module):
        def forward(self, idx):
            return torch.zeros(*idx.shape, task.vocab_size), torch.zeros(())

    # uniform prediction costs ln V per token; the floor is H(a, b) / 3
    assert exact_excess_loss(Uniform(), task) == pytest.approx(
        np.log(task.vocab_size) - task.entropy(), rel=1e-6
    )  # float32 logits


def test_training_flops_counts_router_only_when_asked():
    from lib.lm import LMConfig, MoEConfig

    cfg = LMConfig(
        vocab_size=20,
        d_model=8,
        n_layers=1,
        n_heads=1,
        n_kv_heads=1,
        d_ff=16,
        max_seq_len=3,
        moe=MoEConfig(4, 2, 2),
        d_head=4,
    )
    attn, active = 2 * 8 * 4 * 2, 3 * 8 * 2 * 2  # Wq, Wo, Wk, Wv; two SwiGLU experts
    M = 3 * (2 * (attn + active) + 4 * 3 * 4)
    assert training_flops(cfg, 3) == pytest.approx(M)
    assert training_flops(cfg, 3, include_router=True) == pytest.approx(M + 3 * 2 * 8 * 4)


def test_make_pair_memory_rejects_bad_input():
    with pytest.raises(ValueError, match="n_a"):
        make_pair_memory(1, 3, 1.0, 0)
    with pytest.raises(ValueError, match="zipf"):
        make_pair_memory(4, 3, -1.0, 0)
    with pytest.raises(ValueError, match="n="):
        make_pair_memory(4, 3, 1.0, 0).sample(0, seed=0)


# ---------------------------------------------------------------------------- Clark et al.
def test_clark_final_rows():
    runs = load_clark_final()
    assert len(runs) == 223 and runs.hyper_id.is_unique
    assert set(runs.router_type) == {"Dense", "S-Base", "RL-R", "Hash"}
    assert (runs.C > 0).all() and runs.A.between(0, 1).all()
    with pytest.raises(ValueError, match="path"):
        load_clark_final("/nonexistent/curves.csv.gz")
