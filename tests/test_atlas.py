"""Tests of lib.atlas: published check values, closed forms and planted parameters."""

import math

import numpy as np
import pytest
from scipy import optimize

from lib import atlas


def test_muennighoff2023_published_check_values():
    # check values printed with the constants (shared/data/README.md, from their released code)
    L = atlas.muennighoff_loss([6.34e9, 8.67e9], [242e9, 178e9], 25e9)
    np.testing.assert_allclose(L, [2.2256441, 2.2269634], atol=5e-7)


def test_effective_data_closed_forms():
    U, lam = 100.0, 0.2
    assert atlas.effective_data(50.0, U, lam) == 50.0  # no repetition below U
    assert atlas.effective_data(U, U, lam) == pytest.approx(U)  # continuous at D = U
    eps = 1e-6  # slope 1 just above U: the first repeat counts fully
    slope = (atlas.effective_data(U + eps, U, lam) - U) / eps
    assert slope == pytest.approx(1.0, rel=1e-4)
    assert atlas.effective_data(1e9, U, lam) == pytest.approx(U * (1 + 1 / lam))  # saturation
    assert atlas.effective_data(7.0, math.inf, lam) == 7.0  # uncapped language


def test_effective_data_equals_muennighoff_form():
    U, R_star = 25.0, 15.387756
    D = np.linspace(30.0, 2000.0, 7)
    R = D / U - 1
    muennighoff = U + U * R_star * (1 - np.exp(-R / R_star))
    np.testing.assert_allclose(atlas.effective_data(D, U, 1 / R_star), muennighoff, rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs, word",
    [({"D": -1.0, "U": 1.0, "lam": 1.0}, "D"), ({"D": 1.0, "U": 0.0, "lam": 1.0}, "U"),
     ({"D": 1.0, "U": 1.0, "lam": 0.0}, "lam"), ({"D": np.nan, "U": 1.0, "lam": 1.0}, "D")],
)  # fmt: skip
def test_effective_data_rejects_bad_input(kwargs, word):
    with pytest.raises(ValueError, match=word):
        atlas.effective_data(**kwargs)


def test_curse_multipliers_match_numerical_optimum():
    phi, psi, alpha, beta, r = 0.11, -0.04, 0.46, 0.149, 4.0
    n_mult, d_mult, c_mult = atlas.curse_multipliers(phi, psi, alpha, beta, r)
    # minimise log C = log N + log(K D_t) at the loss of the compute-optimal K = 1 point
    A, B, K = 1.0, 1.0, r

    def loss(N, D):
        return A / N**alpha + B / D**beta

    N0 = 1.0  # compute-optimal start: alpha A / N^alpha = beta B / D^beta
    D0 = (beta * B / (alpha * A)) ** (1 / beta)
    target = loss(N0, D0)
    cons = {"type": "eq", "fun": lambda z: A * K**phi * np.exp(-alpha * z[0])
            + B * K**psi * np.exp(-beta * z[1]) - target}  # fmt: skip
    res = optimize.minimize(lambda z: z[0] + z[1], [0.1, math.log(D0)], constraints=[cons],
                            method="SLSQP", options={"ftol": 1e-12})  # fmt: skip
    assert math.exp(res.x[0]) / N0 == pytest.approx(n_mult, rel=1e-3)
    assert K * math.exp(res.x[1]) / D0 == pytest.approx(d_mult, rel=1e-3)
    assert c_mult == pytest.approx(n_mult * d_mult)


def test_curse_multipliers_reproduce_paper_table():
    e_n, e_d = atlas.LONGPRE2025_EXPONENTS
    alpha = atlas.LONGPRE2025_PHI / e_n
    beta = atlas.LONGPRE2025_PSI / (e_d - 1)
    for r, (n_paper, d_paper) in atlas.LONGPRE2025_MULTIPLIERS.items():
        n_mult, d_mult, _ = atlas.curse_multipliers(
            atlas.LONGPRE2025_PHI, atlas.LONGPRE2025_PSI, alpha, beta, r
        )
        assert n_mult == pytest.approx(n_paper, rel=0.02)
        assert d_mult == pytest.approx(d_paper, rel=0.02)


def test_curse_multipliers_reject_bad_input():
    with pytest.raises(ValueError, match="alpha"):
        atlas.curse_multipliers(0.1, -0.1, 0.0, 0.2, 2.0)
    with pytest.raises(ValueError, match="phi"):
        atlas.curse_multipliers(math.nan, -0.1, 0.3, 0.2, 2.0)


def _curve(D, B=50.0, beta=0.5, E=1.0):
    return E + B / D**beta


def test_bts_known_answers():
    D = np.geomspace(100, 10_000, 30)
    d = 1000.0
    # bilingual curve = mono curve in total tokens: s is as good as t -> BTS = 1
    same = atlas.bilingual_transfer_score(d, D, _curve(D), D, _curve(D))
    assert same[0] == pytest.approx(1, abs=1e-2)
    # bilingual curve = mono curve stretched 2x in tokens: no transfer -> BTS = 0
    bts, cens = atlas.bilingual_transfer_score(d, D, _curve(D), 2 * D, _curve(D))
    assert cens == "" and bts == pytest.approx(0, abs=1e-2)


def test_bts_censoring():
    D = np.geomspace(100, 10_000, 30)
    never = atlas.bilingual_transfer_score(1000.0, D, _curve(D), D[:20], _curve(D[:20]) + 1.0)
    assert never == (pytest.approx(-(D[19] - 2000) / 1000), "<")
    early = atlas.bilingual_transfer_score(1000.0, D, _curve(D), D, 0.3 * _curve(D))
    assert early[1] == ">"
    with pytest.raises(ValueError, match="d_mono"):
        atlas.bilingual_transfer_score(1e6, D, _curve(D), D, _curve(D))


def test_atlas_fit_recovers_planted_transfer_weights():
    rng = np.random.default_rng(0)
    n = 300
    N = rng.choice([1e3, 3e3, 1e4, 3e4, 1e5], n)
    D_t, D_a, D_o = (rng.uniform(1e3, 1e5, n) for _ in range(3))
    inf = np.full(n, np.inf)
    X = {"N": N, "D_t": D_t, "U_t": inf, "D_a": D_a, "U_a": inf, "D_other": D_o, "U_other": inf}
    law = atlas.atlas_law(["a", "other"], repetition=False)
    theta = np.array([math.log(1.5), math.log(30.0), math.log(200.0), 0.4, 0.5, 0.6, 0.1])
    L = law.f(theta, X) * np.exp(rng.normal(0, 0.002, n))
    fit = atlas.fit_law(law, X, L)
    assert fit.values["tau_a"] == pytest.approx(0.6, abs=0.1)
    assert fit.values["tau_other"] == pytest.approx(0.1, abs=0.1)
    assert fit.values["beta"] == pytest.approx(0.5, abs=0.05)


def test_atlas_fit_recovers_planted_repetition_decay():
    rng = np.random.default_rng(2)
    n = 200
    N = rng.choice([1e3, 1e4, 1e5], n)
    U = np.full(n, 2e3)
    D = U * rng.uniform(0.5, 40.0, n)  # up to 40 epochs: S saturates at U (1 + 1 / lambda)
    X = {"N": N, "D_t": D, "U_t": U}
    law = atlas.atlas_law([])
    assert law.params[-1] == "log_lam"
    theta = np.array([math.log(1.5), math.log(30.0), math.log(200.0), 0.4, 0.5, math.log(0.1)])
    L = law.f(theta, X) * np.exp(rng.normal(0, 0.001, n))
    fit = atlas.fit_law(law, X, L)
    assert math.exp(fit.values["log_lam"]) == pytest.approx(0.1, rel=0.2)


def test_fit_law_bounds_E_by_the_floor():
    rng = np.random.default_rng(3)
    N = rng.choice([1e3, 1e4, 1e5], 60)
    D = rng.uniform(1e3, 1e5, 60)
    law = atlas.chinchilla_law("D_t")
    X = {"N": N, "D_t": D}
    L = law.f(np.array([math.log(1.0), math.log(30.0), math.log(200.0), 0.4, 0.5]), X)
    assert math.exp(atlas.fit_law(law, X, L).values["logE"]) == pytest.approx(1.0, rel=0.02)
    bounded = atlas.fit_law(law, X, L, E_min=1.2)  # a floor above the planted E binds
    assert math.exp(bounded.values["logE"]) >= 1.2 - 1e-9
    with pytest.raises(ValueError, match="E_min"):
        atlas.fit_law(law, X, L, E_min=-1.0)


def test_curse_fit_recovers_phi_and_bootstrap_covers_it():
    rng = np.random.default_rng(1)
    K = np.repeat([1, 2, 4, 8], 40).astype(float)
    N = rng.choice([1e3, 1e4, 1e5], K.size)
    D = rng.uniform(1e3, 1e5, K.size)
    law = atlas.curse_law()
    theta = np.array([0.0, math.log(30.0), math.log(200.0), 0.4, 0.5, 0.2, -0.3])
    X = {"K": K, "N": N, "D_t": D}
    L = law.f(theta, X) * np.exp(rng.normal(0, 0.002, K.size))
    fit = atlas.fit_law(law, X, L)
    assert fit.values["phi"] == pytest.approx(0.2, abs=0.05)
    boot = atlas.bootstrap_law(fit, X, L, groups=np.arange(K.size) // 4, n_boot=20, seed=0)
    lo, hi = boot.ci["phi"]
    assert lo < 0.2 < hi or abs(fit.values["phi"] - 0.2) < 0.02


def test_fit_law_rejects_mismatched_features():
    with pytest.raises(ValueError, match="X\\['N'\\]"):
        atlas.fit_law(atlas.chinchilla_law("D_t"), {"N": np.ones(3), "D_t": np.ones(4)},
                      np.ones(4))  # fmt: skip


def test_languages_share_scripts():
    specs = [atlas.LangSpec("a", "f", 0), atlas.LangSpec("b", "f", 0), atlas.LangSpec("c", "g", 1)]
    langs = atlas.build_languages(specs, 8, (0.5, 0.3, 0.2), seed=0)
    assert langs["a"].vocab_size == 16
    assert set(langs["a"].token_map) == set(langs["b"].token_map) == set(range(8))
    assert set(langs["c"].token_map) == set(range(8, 16))
    with pytest.raises(ValueError, match="mix"):
        atlas.build_languages(specs, 8, (0.5, 0.5, 0.5), seed=0)


def test_mixture_batch_fn_samples_languages_by_weight():
    import torch

    pools = {k: np.full((4, 40), i) for i, k in enumerate("abc")}
    fn = atlas.mixture_batch_fn(pools, {"a": 0.75, "c": 0.25}, 400, 8)
    x, y = fn(0, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (400, 8)
    assert set(x[:, 0].tolist()) == {0, 2}
    assert (x[:, 0] == 0).float().mean().item() == pytest.approx(0.75, abs=0.06)
    with pytest.raises(ValueError, match="weights"):
        atlas.mixture_batch_fn(pools, {"a": 0.55, "c": 0.5}, 4, 8)
    with pytest.raises(ValueError, match="weights"):
        atlas.mixture_batch_fn(pools, {"z": 1.0}, 4, 8)


def test_crossover_tokens_paper_legend_is_self_consistent():
    # ATLAS Fig. 6 reports crossovers of 144-283B tokens at N = 2B; the Fig. 7 legend agrees
    D_star = atlas.crossover_tokens(2e9, *atlas.LONGPRE2025_CROSSOVER)
    assert 144e9 <= D_star <= 283e9
    caption = atlas.crossover_tokens(2e9, atlas.LONGPRE2025_CROSSOVER[0], 1.65)
    assert caption > 1e12  # the caption's mix of the two versions: ~1.9T tokens
    assert atlas.crossover_tokens(10.0, 6.0, 2.0) == pytest.approx(10.0)  # 6 N^2 / (6 N) = N
    with pytest.raises(ValueError, match="k="):
        atlas.crossover_tokens(1e9, -1.0, 1.5)
    with pytest.raises(ValueError, match="N"):
        atlas.crossover_tokens(0.0, 1.0, 1.5)


def test_crossover_budget_known_answers():
    D = np.array([1.0, 10.0, 100.0, 1000.0])
    L_ft = np.array([2.0, 1.8, 1.7, 1.65])
    # the gap scratch - finetune is +0.2 at D = 10 and -0.2 at D = 100: crossing at sqrt(10 * 100)
    L_s = L_ft + np.array([1.0, 0.2, -0.2, -0.3])
    assert atlas.crossover_budget(D, L_ft, L_s) == (pytest.approx(10**1.5), "")
    assert atlas.crossover_budget(D, L_ft, L_ft + 0.1) == (1000.0, ">")  # never caught up
    assert atlas.crossover_budget(D, L_ft, L_ft - 0.1) == (1.0, "<")  # never behind
    with pytest.raises(ValueError, match="increasing"):
        atlas.crossover_budget(D[::-1], L_ft, L_s)
    with pytest.raises(ValueError, match="1-D"):
        atlas.crossover_budget(D, L_ft[:3], L_s)


def test_run_toy_returns_final_state_and_finetunes_from_it():
    from lib.train import build_model, evaluate

    langs = atlas.build_languages([atlas.LangSpec("a", "f", 0)], 8, (0.5, 0.3, 0.2), seed=0)
    pools = {"a": langs["a"].sample(64, seed=1, n_streams=8)}
    val = {"a": langs["a"].sample(17 * 4, seed=2, n_streams=4)}
    first = atlas.run_toy(8, 8, {"a": 1.0}, pools, val, steps=30, eval_every=10, seed=0)
    model = build_model(atlas.toy_config(8, 8), seed=1)
    model.load_state_dict(first.state)  # the state alone reproduces the final validation loss
    assert evaluate(model, val["a"], 16, max_windows=128) == pytest.approx(first.loss["a"][-1])
    again = atlas.run_toy(8, 8, {"a": 1.0}, pools, val, 10, 10, seed=0, init_state=first.state)
    scratch = atlas.run_toy(8, 8, {"a": 1.0}, pools, val, 10, 10, seed=0)
    assert again.loss["a"][0] < scratch.loss["a"][0]  # finetuning starts from what was learnt
