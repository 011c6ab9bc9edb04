"""Tests of lib.collapse: timescale arithmetic, the exact source, the numpy trainer against
torch, the scaling-law fit, the collapse statistics, the detector, and bad input."""

import math

import numpy as np
import pytest
import torch

from lib import collapse as C

torch.set_num_threads(1)
SOURCE = C.make_source(8, 1.2, 3, 0.5, seed=0)


# ----------------------------------------------------------------------------- timescale
def test_timescale_arithmetic_known_values():
    # T = 2770 steps, layer rate 0.015, tau = 0.2 -> lambda = 1 / (0.015 * 0.2 * 2770) = 0.120
    lam = C.weight_decay_from_tau(0.015, 0.2, 2770)
    assert lam == pytest.approx(0.12034, rel=1e-4)
    assert C.tau_from_weight_decay(0.015, lam, 2770) == pytest.approx(0.2)
    assert C.tau_from_weight_decay(1e-3, 0.1, 1000) == pytest.approx(10.0)


def test_power_lines_values_and_slope():
    for tpp, tau in ((20, 0.224), (80, 0.108), (234, 0.061)):
        assert C.tau_opt_power_lines(tpp) == pytest.approx(tau, abs=1e-3)
    # carrying a timescale along Power Lines' slope reproduces the fit's ratios
    carried = C.tau_at_tpp(C.tau_opt_power_lines(20), 20, 80)
    assert carried == pytest.approx(C.tau_opt_power_lines(80))


def test_muP_rates_and_every_layer_shares_tau():
    assert C.layer_rates(0.1, 32, 8) == {"input": 0.1, "hidden": 0.025, "readout": 0.025}
    run = C.Run(width=32, T=500, B=8, eta=0.1, tau=0.3)
    assert run.timescales() == pytest.approx({"input": 0.3, "hidden": 0.3, "readout": 0.3})
    frozen = C.Run(width=32, T=500, B=8, eta=0.1, tau=0.3, lam=(0.5, 0.5, 0.0))
    assert frozen.timescales()["input"] == pytest.approx(1 / (0.1 * 0.5 * 500))
    assert frozen.timescales()["readout"] == math.inf


def test_count_params_and_batch_rule():
    assert C.count_params(8, 32) == 2 * 32 * 8 + 64 + 8 * 32 + 32 == 864
    T, B = C.plan(8, 32, 2.0, 8, 2000.0)  # D = 1728 -> B = round(8 * 0.864^0.38) = 8
    assert (T, B) == (216, 8)
    T, B = C.plan(32, 32, 16.0, 8, 2000.0)  # D = 66048: B = round(8 * 33.0^0.38)
    assert B == round(8 * (66048 / 2000) ** 0.38) and T == round(66048 / B)


# ----------------------------------------------------------------------------- the source
def test_source_law_floor_and_monte_carlo():
    p_c = np.bincount(SOURCE.context, weights=SOURCE.prob, minlength=64)
    ranks = np.argsort(np.argsort(-p_c)) + 1  # Zipf in rank: p_c ~ rank^-1.2
    assert p_c == pytest.approx(ranks**-1.2 / np.sum(np.arange(1, 65.0) ** -1.2))
    # the floor is sum_c p_c H(P(. | c)), computed here from a dense table
    P = np.zeros((64, 8))
    P[SOURCE.context, SOURCE.token] = SOURCE.prob / p_c[SOURCE.context]
    H = -sum(p_c[c] * sum(p * math.log(p) for p in P[c] if p > 0) for c in range(64))
    assert SOURCE.entropy == pytest.approx(H)
    # sampled pairs follow the enumerated law
    run = C.Run(width=8, T=400, B=100, eta=0.1, tau=1.0, seed=3)
    x, y = C._sample_data(run, SOURCE)
    code = x.ravel() * 8 + y.ravel()
    freq = np.bincount(code, minlength=512)[SOURCE.context * 8 + SOURCE.token] / code.size
    se = np.sqrt(SOURCE.prob * (1 - SOURCE.prob) / code.size)
    assert np.all(np.abs(freq - SOURCE.prob) < 5 * se + 1e-12)


def test_fault_corrupts_labels_only_after_onset():
    clean = C._sample_data(C.Run(8, 200, 50, 0.1, 1.0, seed=1), SOURCE)
    bad = C._sample_data(C.Run(8, 200, 50, 0.1, 1.0, seed=1, fault_at=0.5, fault_frac=0.5), SOURCE)
    np.testing.assert_array_equal(clean[0], bad[0])  # same contexts
    np.testing.assert_array_equal(clean[1][:100], bad[1][:100])  # same labels before onset
    assert 0.3 < np.mean(clean[1][100:] != bad[1][100:]) < 0.5  # half redrawn, 1/8 unchanged


# ----------------------------------------------------------------------------- the model
def _stack(width, V, seeds):
    params = [np.stack(p) for p in zip(*(C._init_params(width, V, s) for s in seeds), strict=True)]
    rng = np.random.default_rng(0)
    params[2] = rng.normal(size=params[2].shape)  # non-zero readout, so every gradient flows
    params[3] = rng.normal(size=params[3].shape)
    return params


def test_gradients_match_torch_autograd():
    V, n, K, B = 8, 6, 3, 5
    params = _stack(n, V, range(K))
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, V * V, (K, B)), rng.integers(0, V, (K, B))
    tp = [torch.tensor(p, requires_grad=True) for p in params]
    X = torch.zeros(K, B, 2 * V, dtype=torch.float64)
    X.scatter_(2, torch.tensor(np.stack([x // V, V + x % V], axis=2)), 1.0)
    z = torch.relu(torch.relu(X @ tp[0]) @ tp[1]) @ tp[2] + tp[3][:, None, :]
    loss = torch.nn.functional.cross_entropy(z.transpose(1, 2), torch.tensor(y), reduction="none")
    loss.mean(dim=1).sum().backward()
    for ours, theirs in zip(C._gradients(params, x, y), tp, strict=True):
        np.testing.assert_allclose(ours, theirs.grad.numpy(), atol=1e-12)


def test_adamw_step_matches_torch():
    rng = np.random.default_rng(2)
    theta, grads = rng.normal(size=(2, 7)), rng.normal(size=(4, 2, 7))
    lr, lam = np.array([[0.01], [0.03]]), np.array([[0.5], [2.0]])
    p = torch.tensor(theta.copy(), requires_grad=True)
    opt = [torch.optim.AdamW([p], lr=0.01, betas=C.ADAM_BETAS, eps=C.ADAM_EPS, weight_decay=0.5)]
    q = torch.tensor(theta[1:].copy(), requires_grad=True)  # row 1 has its own lr and decay
    opt.append(torch.optim.AdamW([q], lr=0.03, betas=C.ADAM_BETAS, eps=C.ADAM_EPS,
                                 weight_decay=2.0))  # fmt: skip
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    for step, g in enumerate(grads, start=1):
        C._adamw_step(theta, g, m, v, lr, lam, step)
        p.grad, q.grad = torch.tensor(g), torch.tensor(g[1:])
        opt[0].step(), opt[1].step()
    np.testing.assert_allclose(theta[0], p.detach().numpy()[0], atol=1e-12)
    np.testing.assert_allclose(theta[1], q.detach().numpy()[0], atol=1e-12)


def test_population_loss_of_a_blank_model_is_log_V():
    blank = [np.zeros((1, 16, 4)), np.zeros((1, 4, 4)), np.zeros((1, 4, 8)), np.zeros((1, 8))]
    assert C._population_loss(blank, SOURCE) == pytest.approx([math.log(8)])


def test_schedule_warms_up_and_decays_to_zero():
    f = [C._lr_factor(t, 100) for t in range(100)]
    assert f[0] == pytest.approx(0.5) and f[1] == 1.0  # 2 warmup steps
    assert f[-1] == pytest.approx(1 / 98) and np.all(np.diff(f[2:]) < 0)


def test_train_stack_learns_is_deterministic_and_stacking_free():
    runs = [C.Run(8, 60, 16, 0.05, tau, seed=s, n_eval=4) for tau in (0.5, 5.0) for s in (1, 2)]
    L = C.train_stack(runs, SOURCE)
    assert L.shape == (4, 4) and np.all(L[:, -1] < math.log(8))
    np.testing.assert_array_equal(L, C.train_stack(runs, SOURCE))
    np.testing.assert_allclose(C.train_stack(runs[2:3], SOURCE)[0], L[2], rtol=1e-12)
    # train_runs regroups mixed widths and returns curves in the caller's order
    mixed = [runs[0], C.Run(6, 60, 16, 0.05, 0.5, seed=1, n_eval=4), runs[3]]
    out = C.train_runs(mixed, SOURCE, stack=1)
    np.testing.assert_allclose(out[[0, 2]], L[[0, 3]], rtol=1e-12)
    with pytest.raises(ValueError, match="stack needs one width"):
        C.train_stack(mixed, SOURCE)


def test_recipe_builds_width_major_families():
    recipe = C.Recipe(V=8, B_ref=4, D_ref=500.0, base_width=4)
    fam = recipe.family([4, 8], [2.0, 3.0], [0.5, 0.25], 0.1, [7, 9])
    assert [(r.width, r.seed, r.tau) for r in fam] == [(4, 7, 0.5), (4, 9, 0.5), (8, 7, 0.25),
                                                       (8, 9, 0.25)]  # fmt: skip
    assert (fam[2].T, fam[2].B) == C.plan(8, 8, 3.0, 4, 500.0)


# ----------------------------------------------------------------------------- scaling law
def test_fit_reducible_law_recovers_planted_parameters():
    N, D = np.meshgrid([800.0, 1600, 3200, 6400], [1e3, 4e3, 1.6e4, 6.4e4])
    planted = C.ReducibleLaw(0.5, 40.0, 12.0, 0.6, 0.35, 0.0)
    fit = C.fit_reducible_law(N.ravel(), D.ravel(), planted.predict(N.ravel(), D.ravel()), 0.5)
    for name in ("A", "B", "alpha", "beta"):
        assert getattr(fit, name) == pytest.approx(getattr(planted, name), rel=1e-4)
    assert fit.rms < 1e-8


def test_optimal_tpp_satisfies_the_compute_optimality_condition():
    law = C.ReducibleLaw(0.5, 40.0, 12.0, 0.6, 0.35, 0.0)
    N = 2000.0
    D = law.optimal_tpp(N) * N
    # alpha A N^-alpha = beta B D^-beta, and L is minimal along C = 6 N D at that split
    assert law.alpha * law.A * N**-law.alpha == pytest.approx(law.beta * law.B * D**-law.beta)
    C6 = N * D
    Ns = N * np.array([0.9, 1.0, 1.1])
    assert np.argmin(law.predict(Ns, C6 / Ns)) == 1
    assert C.ReducibleLaw(0.0, 1.0, 1.0, 0.5, 0.5, 0.0).optimal_tpp(123.0) == pytest.approx(1.0)


# ----------------------------------------------------------------------------- collapse
def test_rescaled_curves_collapse_and_stretched_ones_do_not():
    f = lambda s: 1 + 2 * np.exp(-5 * s)  # noqa: E731 (a planted universal shape)
    t = np.linspace(0.05, 1, 20)
    family = np.array([A * f(t) for A in (1.5, 2.0, 3.7)])  # L_n(t) = A_n f(t / T_n)
    assert C.spread(C.normalise(family), t) == pytest.approx(0.0, abs=1e-12)
    assert C.spread(C.normalise(np.vstack([family, 2.0 * f(t * 1.3)])), t) > 0.01
    e = C.normalise(np.array([[3.0, 2.0, 1.5], [4.0, 3.0, 2.0]]), L_hat=1.0)
    np.testing.assert_allclose(e, [[4.0, 2.0, 1.0], [3.0, 2.0, 1.0]])


def test_shape_variances_recover_planted_components():
    rng = np.random.default_rng(5)
    J, R, m = 4, 4000, 6
    truth = np.linspace(-1, 1, J)[:, None, None] * 0.02 * np.ones((1, 1, m))  # var 0.02^2 * 5/9
    shared = rng.normal(0, 0.01, (1, R, m))  # a seed effect common to all configs
    ell = 1.2 + truth + shared + rng.normal(0, 0.03, (J, R, m))
    v_sys, v_seed = C.shape_variances(ell, np.linspace(0.2, 1, m))
    assert v_sys == pytest.approx(0.02**2 * np.var(np.linspace(-1, 1, J), ddof=1), rel=0.05)
    assert v_seed == pytest.approx(0.01**2 + 0.03**2, rel=0.05)
    flat = 1.2 + shared + rng.normal(0, 0.03, (J, R, m))
    assert abs(C.collapse_ratio(flat, np.linspace(0.2, 1, m), n_avg=8)) < 0.1


def test_area_contrast_in_seed_sd_units():
    rng = np.random.default_rng(6)
    t = np.linspace(0.1, 1, 10)
    noise = rng.normal(0, 0.01, (2, 3000, 1))
    ell = 1.1 + np.array([0.0, 0.02])[:, None, None] + noise + 0 * t
    c = C.area_contrast(ell, t, 1, 0)
    assert c.shape == (3000,) and c.mean() == pytest.approx(2.0, abs=0.1)
    assert C.excess_area(np.array([[1.5, 1.0, 1.0]]), [0.1, 0.5, 1.0]) == pytest.approx([1 / 6])


def test_align_and_detect_planted_cases():
    t = np.arange(1, 21) / 20
    ell = 1 + np.exp(-4 * t) - np.exp(-4)
    assert C.align_final_loss(2.5 * ell[:6], ell[:6]) == pytest.approx(2.5)
    clean = C.detect(1.7 * ell, t, ell, 0.3, 0.01)
    assert clean.t_alarm == math.inf and clean.L_T_hat == pytest.approx(1.7)
    bumped = 1.7 * ell + np.where(t >= 0.5, 0.1, 0.0)
    assert C.detect(bumped, t, ell, 0.3, 0.01).t_alarm == pytest.approx(0.5)


# ----------------------------------------------------------------------------- bad input
T5 = np.arange(1, 6) / 5
GOOD = np.ones((2, 3, 5)) + np.arange(5)[::-1] * 0.1
BAD_CALLS = [
    (lambda: C.weight_decay_from_tau(0.0, 0.2, 100), ValueError, "eta"),
    (lambda: C.weight_decay_from_tau(0.1, float("nan"), 100), ValueError, "tau"),
    (lambda: C.tau_from_weight_decay(0.1, 0.1, 10.5), TypeError, "T must be an integer"),
    (lambda: C.tau_opt_power_lines(-1), ValueError, "TPP"),
    (lambda: C.tau_at_tpp(0.2, 20, True), TypeError, "TPP"),
    (lambda: C.make_source(8, 1.2, 9, 0.5, 0), ValueError, "n_support"),
    (lambda: C.make_source(8, 1.2, 3, 0.5, -1), ValueError, "seed"),
    (lambda: C.make_source(8.0, 1.2, 3, 0.5, 0), TypeError, "V"),
    (lambda: C.count_params(True, 32), TypeError, "width"),
    (lambda: C.layer_rates(0.1, 0, 8), ValueError, "width"),
    (lambda: C.Run(8, 100, 8, 0.1, 0.0), ValueError, "tau"),
    (lambda: C.Run(8, 10, 8, 0.1, 0.2), ValueError, "n_eval"),
    (lambda: C.Run(8, 100, 8, 0.1, 0.2, fault_at=1.5), ValueError, "fault_at"),
    (lambda: C.Run(8, 100, 8, 0.1, 0.2, lam=(0.1, 0.1)), TypeError, "lam"),
    (lambda: C.Run(8, 100, 8, 0.1, 0.2, seed=1.5), TypeError, "seed"),
    (lambda: C.plan(8, 32, float("inf"), 8, 2000.0), ValueError, "TPP"),
    (
        lambda: C.Recipe(8, 4, 500.0, 4).family([4, 8], [2.0], [0.5, 0.5], 0.1, [1]),
        ValueError,
        "lengths",
    ),
    (lambda: C.train_stack([], SOURCE), TypeError, "runs"),
    (lambda: C.train_runs([C.Run(8, 40, 8, 0.1, 0.2)], "source"), TypeError, "source"),
    (lambda: C.train_runs([C.Run(8, 40, 8, 0.1, 0.2)], SOURCE, stack=0), ValueError, "stack"),
    (lambda: C.normalise([2.0, 1.0], L_hat=1.5), ValueError, "L_hat"),
    (lambda: C.normalise([[2.0, np.nan]]), ValueError, "NaN"),
    (lambda: C.spread([[1.0, 1.0]], [0.5, 1.0]), ValueError, "ell"),
    (lambda: C.spread([[1.0, 1.0], [1.0, 1.0]], [0.5, 1.0], t_min=2.0), ValueError, "t_min"),
    (lambda: C.excess_area("curves", [0.5]), TypeError, "ell"),
    (lambda: C.align_final_loss([1.0, -1.0], [1.0, 1.0]), ValueError, "L_prefix"),
    (lambda: C.detect([1.0, 1.0], [0.5, 1.0], [1.0, 1.0], 1.0, 0.1), ValueError, "t_fit"),
    (lambda: C.detect([1.0, 1.0], [0.2, 1.0], [1.0, 1.0], 0.3, 0.0), ValueError, "threshold"),
    (
        lambda: C.fit_reducible_law([1.0, 2, 3], [1.0, 2, 3], [2.0, 2, 2], 0.5),
        ValueError,
        "at least 5",
    ),
    (lambda: C.fit_reducible_law(*[np.arange(1.0, 7)] * 3, E=3.0), ValueError, "floor"),
    (lambda: C.ReducibleLaw(0.5, 1.0, 1.0, 0.5, 0.5, 0.0).optimal_tpp(0.0), ValueError, "N"),
    (lambda: C.shape_variances(GOOD[:1], T5), ValueError, "configs"),
    (lambda: C.collapse_ratio(GOOD, T5, n_avg=0), ValueError, "n_avg"),
    (lambda: C.area_contrast(GOOD, T5, 1, 1), ValueError, "different"),
    (lambda: C.area_contrast(GOOD, T5, 2, 0), ValueError, "hi"),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD_CALLS)
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
