"""Tests of lib.collapse: timescale arithmetic, exact sources, collapse metric, detector."""

import math

import numpy as np
import pytest
import torch

from lib import collapse as C
from lib.synth import random_chain
from lib.train import build_model

torch.set_num_threads(1)


def test_timescale_arithmetic_known_values():
    # pilot numbers: T = 2770 steps, hidden-layer rate 0.015, tau = 0.2 -> lambda = 0.120
    lam = C.weight_decay_from_tau(0.015, 0.2, 2770)
    assert lam == pytest.approx(1 / (0.015 * 0.2 * 2770)) and lam == pytest.approx(0.1203, 1e-3)
    assert C.tau_from_weight_decay(0.015, lam, 2770) == pytest.approx(0.2)
    # tau = B / (eta lambda D) with T = D / B
    assert C.tau_from_weight_decay(1e-3, 0.1, 1000) == pytest.approx(10.0)


def test_power_lines_values():
    for tpp, tau in ((20, 0.224), (80, 0.108), (234, 0.061)):
        assert C.tau_opt_power_lines(tpp) == pytest.approx(tau, abs=1e-3)


def test_mup_groups_recover_tau_and_freeze():
    model = build_model(C.toy_config(16, 8, 2), 0)
    groups = C.mup_groups(model, eta=0.02, d_base=8, tau=0.25, T=400)
    lr = {g["name"]: g["lr"] for g in groups}
    assert lr["hidden"] == pytest.approx(0.01) and lr["embedding"] == 0.02
    assert C.group_timescales(groups, 400) == pytest.approx({"embedding": 0.25, "hidden": 0.25})
    n = sum(p.numel() for g in groups for p in g["params"])
    assert n == sum(p.numel() for p in model.parameters())
    frozen = C.mup_groups(model, 0.02, 8, 0.25, 400, lam=(0.5, 0.5))
    assert C.group_timescales(frozen, 400) == pytest.approx({"embedding": 0.25, "hidden": 0.5})
    with pytest.raises(ValueError, match="lam"):
        C.mup_groups(model, 0.02, 8, 0.25, 400, lam=(0.5,))


def test_plan_steps_batch_grows_as_power_lines():
    T0, B0 = C.plan_steps(1000, 10, 2, 50, 1e4)
    assert (T0, B0) == (100, 50)
    T1, B1 = C.plan_steps(16000, 10, 2, 50, 1e4)
    assert B1 == round(50 * 16**0.38) and T1 == round(160000 / (2 * B1))


def test_window_distribution_matches_entropy_rate_and_monte_carlo():
    chain = random_chain(4, order=2, n_support=3, alpha=1.0, seed=1)
    W, P = C.window_distribution(chain, 3)
    assert P.sum() == pytest.approx(1.0) and W.shape[1] == 4
    # full-context position: conditional entropy equals the entropy rate exactly
    H_full = C.bayes_loss(W, P) * 3 - C.bayes_loss(W[:, :3], P) * 2
    assert H_full == pytest.approx(chain.entropy_rate(), abs=1e-10)
    # Monte-Carlo: sampled windows have the enumerated frequencies
    x = chain.sample(4, seed=0, n_streams=20000)
    codes = (x * 4 ** np.arange(3, -1, -1)).sum(axis=1)
    freq = np.bincount(codes, minlength=256)[(W * 4 ** np.arange(3, -1, -1)).sum(axis=1)]
    se = np.sqrt(P * (1 - P) / 20000)
    assert np.all(np.abs(freq / 20000 - P) < 5 * se + 1e-12)


def test_zipf_source_probabilities_and_floor():
    W, P = C.zipf_context_windows(8, 1.3, 3, 0.5, seed=0)
    assert W.shape == (64 * 3, 3) and P.sum() == pytest.approx(1.0)
    c = W[:, 0] * 8 + W[:, 1]
    p_c = np.bincount(c, weights=P)
    ranks = np.argsort(np.argsort(-p_c)) + 1
    assert p_c == pytest.approx(ranks.astype(float) ** -1.3 / np.sum(np.arange(1, 65.0) ** -1.3))
    assert 0 < C.bayes_loss(W, P) < math.log(8)


def test_population_loss_of_uniform_model_is_log_V():
    class Uniform(torch.nn.Module):
        def forward(self, x):
            return torch.zeros(*x.shape, 8), torch.zeros(())

    W, P = C.zipf_context_windows(8, 1.3, 3, 0.5, seed=0)
    L = C.population_loss(Uniform(), torch.as_tensor(W), torch.as_tensor(P))
    assert L == pytest.approx(math.log(8))


def test_collapse_residual_zero_for_rescaled_curves_and_positive_when_stretched():
    f = lambda s: 1 + 2 * np.exp(-5 * s)  # noqa: E731 (a planted universal shape)
    t = np.linspace(0.05, 1, 20)
    family = np.array([A * f(t) for A in (1.5, 2.0, 3.7)])  # L_n(t) = A_n f(t / T_n)
    assert C.spread(C.normalise(family), t) == pytest.approx(0.0, abs=1e-12)
    stretched = np.vstack([family, 2.0 * f(t * 1.3)])
    assert C.spread(C.normalise(stretched), t) > 0.01


def test_align_recovers_planted_final_loss():
    t = np.linspace(0.05, 1, 20)
    ell = 1 + np.exp(-4 * t) - np.exp(-4)
    assert C.align_final_loss(2.5 * ell[:6], ell[:6]) == pytest.approx(2.5)


def test_detect_flags_planted_bump_and_not_clean():
    t = np.arange(1, 21) / 20
    ell = 1 + np.exp(-4 * t) - np.exp(-4)
    clean = C.detect(1.7 * ell, t, ell, 0.3, 0.01)
    assert clean.t_alarm == math.inf and clean.L_T_hat == pytest.approx(1.7)
    bumped = 1.7 * ell + np.where(t >= 0.5, 0.1, 0.0)
    assert C.detect(bumped, t, ell, 0.3, 0.01).t_alarm == pytest.approx(0.5)


def test_train_curve_is_deterministic_and_learns():
    W, P = C.zipf_context_windows(8, 1.3, 3, 0.5, seed=0)
    run = C.Run(d_model=8, T=40, B=16, eta=0.03, tau=0.5, n_eval=4)
    a = C.train_curve(run, W, P, 8, 8)
    b = C.train_curve(run, W, P, 8, 8)
    np.testing.assert_array_equal(a.L, b.L)
    assert a.L[-1] < math.log(8) and a.taus == pytest.approx({"embedding": 0.5, "hidden": 0.5})
    assert a.D == 40 * 16 * 2


def test_invalid_inputs_raise():
    with pytest.raises(ValueError, match="eta"):
        C.weight_decay_from_tau(0.0, 0.2, 100)
    with pytest.raises(ValueError, match="TPP"):
        C.tau_opt_power_lines(-1)
    with pytest.raises(ValueError, match="L_hat"):
        C.normalise([2.0, 1.0], L_hat=1.5)
    with pytest.raises(ValueError, match="NaN"):
        C.spread([[1.0, np.nan], [1.0, 1.0]], [0.5, 1.0])
    with pytest.raises(ValueError, match="ell"):
        C.spread([[1.0, 1.0]], [0.5, 1.0])
    with pytest.raises(ValueError, match="t_fit"):
        C.detect([1.0, 1.0], [0.5, 1.0], [1.0, 1.0], 1.0, 0.1)
    with pytest.raises(ValueError, match="schedule"):
        C.Run(8, 100, 8, 0.01, 0.2, schedule="cosine")
    with pytest.raises(ValueError, match="decay_frac"):
        C.Run(8, 100, 8, 0.01, 0.2, schedule="wsd", decay_frac=0.0)
    with pytest.raises(ValueError, match="fault_at"):
        C.Run(8, 100, 8, 0.01, 0.2, fault_at=1.5)
    with pytest.raises(ValueError, match="n_eval"):
        C.Run(8, 10, 8, 0.01, 0.2, n_eval=20)
    with pytest.raises(ValueError, match="S="):
        C.window_distribution(random_chain(4, order=3, seed=0), 1)


def test_bracket_minimum_known_cases():
    rng = np.random.default_rng(0)
    seed_effect = rng.normal(0, 0.1, size=(3, 1))  # shared by every grid value: paired away
    bowl = (np.arange(5) - 2.0) ** 2 * 0.01 + 1.0 + seed_effect + rng.normal(0, 1e-3, (3, 5))
    assert C.bracket_minimum(bowl) == C.Bracket(2, True, True)
    ramp = np.linspace(2, 1, 5) + seed_effect
    assert C.bracket_minimum(ramp) == C.Bracket(4, False, False)  # at the edge of the grid
    flat = np.array([1.3, 1.0, 1.0, 1.0, 1.3]) + seed_effect + rng.normal(0, 0.05, (3, 5))
    b = C.bracket_minimum(flat)  # a flat floor: the ends are worse, the neighbours are not
    assert 1 <= b.index <= 3 and b.ends_worse and not b.neighbours_worse
    with pytest.raises(ValueError, match="n_seeds"):
        C.bracket_minimum(bowl[:1])
