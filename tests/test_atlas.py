"""Tests of lib.atlas: closed forms, planted parameters, the stacked trainer, and bad calls."""

import math

import numpy as np
import pytest

from lib import atlas


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
    ("phi", "psi", "alpha", "beta", "r"),
    [(0.11, -0.04, 0.46, 0.149, 2.0), (0.11, -0.04, 0.46, 0.149, 16.0), (0.3, -1.0, 0.4, 1.2, 2.0),
     (-0.1, 0.2, 0.8, 0.3, 4.0)],
)  # fmt: skip
def test_iso_loss_optimum_matches_the_closed_form(phi, psi, alpha, beta, r):
    n_num, d_num = atlas.iso_loss_multipliers(phi, psi, alpha, beta, r)
    n_alg, d_alg, c_alg = atlas.curse_multipliers(phi, psi, alpha, beta, r)
    assert n_num == pytest.approx(n_alg, rel=1e-5)
    assert d_num == pytest.approx(d_alg, rel=1e-5)
    assert c_alg == pytest.approx(n_alg * d_alg)


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


def _planted_atlas_data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    N = rng.choice([1e3, 3e3, 1e4, 3e4, 1e5], n)
    D_t, D_a, D_o = (rng.uniform(1e3, 1e5, n) for _ in range(3))
    inf = np.full(n, np.inf)
    X = {"N": N, "D_t": D_t, "U_t": inf, "D_a": D_a, "U_a": inf, "D_other": D_o, "U_other": inf}
    law = atlas.atlas_law(["a", "other"], repetition=False)
    theta = np.array([math.log(1.5), math.log(30.0), math.log(200.0), 0.4, 0.5, 0.6, 0.1])
    return law, X, law.f(theta, X) * np.exp(rng.normal(0, 0.002, n))


def test_atlas_fit_recovers_planted_transfer_weights():
    law, X, L = _planted_atlas_data()
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


def planted_curse_world(seed: int, Ks, per_K: int, Ns, theta) -> tuple[dict, np.ndarray]:
    """Runs (K, N, D_t) and losses from the curse law at `theta`, with 0.2% log-normal noise."""
    rng = np.random.default_rng(seed)
    K = np.repeat(Ks, per_K).astype(float)
    X = {"K": K, "N": rng.choice(Ns, K.size), "D_t": rng.uniform(1e3, 1e5, K.size)}
    return X, atlas.curse_law().f(np.array(theta), X) * np.exp(rng.normal(0, 0.002, K.size))


def test_curse_fit_recovers_phi():
    theta = [0.0, math.log(30.0), math.log(200.0), 0.4, 0.5, 0.2, -0.3]
    X, L = planted_curse_world(1, [1, 2, 4, 8], 40, [1e3, 1e4, 1e5], theta)
    fit = atlas.fit_law(atlas.curse_law(), X, L)
    assert fit.values["phi"] == pytest.approx(0.2, abs=0.05)
    assert fit.values["psi"] == pytest.approx(-0.3, abs=0.1)


def test_two_stage_curse_fit_recovers_planted_exponents():
    theta = [0.5, math.log(30.0), math.log(200.0), 0.4, 0.5, 0.25, -0.2]
    X, L = planted_curse_world(2, [1, 2, 4], 60, [1e2, 1e3, 1e4], theta)
    fit = atlas.fit_curse_law(X, L)
    assert fit.law.name == "curse"
    assert fit.values["alpha"] == pytest.approx(0.4, abs=0.05)  # the K = 1 (Chinchilla) stage
    assert fit.values["phi"] == pytest.approx(0.25, abs=0.03)
    assert fit.values["psi"] == pytest.approx(-0.2, abs=0.05)
    with pytest.raises(ValueError, match="points with K = 1"):
        several = X["K"] > 1
        atlas.fit_curse_law({k: v[several] for k, v in X.items()}, L[several])


def test_bigram_overlap_known_answers():
    s = np.array([[0, 1, 0, 1, 0]])  # pairs 01, 10, 01, 10
    t = np.array([[0, 1, 1, 1, 1]])  # pairs 01, 11, 11, 11
    assert atlas.bigram_overlap(s, s, 4) == pytest.approx(1.0)
    assert atlas.bigram_overlap(s, t, 4) == pytest.approx(0.25)  # min(1/2, 1/4) on the pair 01
    assert atlas.bigram_overlap(s, s + 2, 4) == 0.0  # disjoint ids share no bigram


def test_languages_share_scripts():
    specs = [atlas.LangSpec("a", "f", 0), atlas.LangSpec("b", "f", 0), atlas.LangSpec("c", "g", 1)]
    langs = atlas.build_languages(specs, 8, (0.5, 0.3, 0.2), seed=0)
    assert langs["a"].vocab_size == 16
    assert set(langs["a"].token_map) == set(langs["b"].token_map) == set(range(8))
    assert set(langs["c"].token_map) == set(range(8, 16))
    world = atlas.sample_world(langs, {"a": 2, "b": 3, "c": 1}, seed=1)
    assert world.pools["b"].shape == (3, atlas.ROW_LEN) and world.vocab == 16
    assert world.val["c"].min() >= 8  # script 1 writes ids 8..15
    assert world.floors["a"] == pytest.approx(langs["a"].entropy_rate())


def test_unrelated_language_shares_no_grammar():
    specs = [atlas.LangSpec("a", "f", 0), atlas.LangSpec("b", "g", 1), atlas.LangSpec("z", None, 2)]
    langs = atlas.build_languages(specs, 8, (1.0, 0.0, 0.0), seed=0)  # all universal grammar
    P = {k: lang.chain.next_probs for k, lang in langs.items()}
    np.testing.assert_allclose(P["a"], P["b"])  # related languages: the universal grammar
    assert not np.allclose(P["z"], P["a"])  # family None: its private grammar alone
    again = atlas.build_languages(specs[:2], 8, (1.0, 0.0, 0.0), seed=0)
    np.testing.assert_allclose(again["a"].chain.next_probs, P["a"])  # others are unchanged


def test_stack_worlds_renames_and_keeps_every_language():
    specs = [atlas.LangSpec("a", "f", 0), atlas.LangSpec("b", "g", 1)]
    one = atlas.sample_world(
        atlas.build_languages(specs, 8, (0.5, 0.3, 0.2), 0), {"a": 2, "b": 1}, 1
    )
    two = atlas.sample_world(
        atlas.build_languages(specs, 8, (0.5, 0.3, 0.2), 5), {"a": 1, "b": 1}, 2
    )
    both = atlas.stack_worlds({"x": one, "y": two})
    assert set(both.pools) == {"x/a", "x/b", "y/a", "y/b"} and both.vocab == one.vocab
    np.testing.assert_array_equal(both.pools["y/a"], two.pools["a"])
    assert both.floors["x/b"] == one.floors["b"] and both.val["y/b"] is two.val["b"]


def test_mixture_sampler_draws_languages_by_weight():
    pools = {k: np.full((4, 40), i) for i, k in enumerate("abc")}
    runs = [atlas.ToyRun({"a": 0.75, "c": 0.25}, 0, ("a",)), atlas.ToyRun({"b": 1.0}, 1, ("b",))]
    draws = [atlas.mixture_sampler(runs, pools, seed=0)() for _ in range(2)]
    x, y = draws[0]
    assert x.shape == y.shape == (2, atlas.BATCH, atlas.SEQ_LEN)
    assert set(x[1].flatten().tolist()) == {1}
    many = np.concatenate([atlas.mixture_sampler(runs, pools, seed=s)()[0][0, :, 0].numpy()
                           for s in range(40)])  # fmt: skip
    assert set(many.tolist()) == {0, 2}
    assert np.mean(many == 0) == pytest.approx(0.75, abs=0.06)
    again = atlas.mixture_sampler(runs, pools, seed=0)()[0]
    assert (again == x).all()  # the seed fixes the batches


def _tiny_world():
    langs = atlas.build_languages([atlas.LangSpec("a", "f", 0), atlas.LangSpec("b", "g", 1)], 8,
                                  (0.5, 0.3, 0.2), seed=0)  # fmt: skip
    return atlas.sample_world(langs, {"a": 4, "b": 4}, seed=1)


def test_stacked_logits_equal_the_lm_forward():
    import torch

    from lib.train import build_model

    cfg = atlas.toy_config(8, 16)
    models = [build_model(cfg, seed) for seed in (3, 4)]
    P = {k: torch.stack([m.state_dict()[k] for m in models]) for k in models[0].state_dict()}
    x = torch.randint(16, (2, 5, atlas.SEQ_LEN), generator=torch.Generator().manual_seed(0))
    stacked = atlas.stacked_logits(P, x)
    for m, model in enumerate(models):
        torch.testing.assert_close(stacked[m], model(x[m])[0], atol=1e-6, rtol=1e-5)


def test_train_toys_learns_is_deterministic_and_finetunes():
    from lib.train import build_model, evaluate

    world = _tiny_world()
    runs = [atlas.ToyRun({"a": 1.0}, 0, ("a",)), atlas.ToyRun({"a": 0.5, "b": 0.5}, 1, ("a", "b"))]
    first = atlas.train_toys(8, world.vocab, runs, world.pools, world.val, 40, 10, seed=0)
    assert first[0].tokens.tolist() == [k * 10 * atlas.BATCH * atlas.SEQ_LEN for k in (1, 2, 3, 4)]
    assert set(first[1].loss) == {"a", "b"}
    assert first[0].loss["a"][-1] < first[0].loss["a"][0] < math.log(world.vocab) + 0.1
    again = atlas.train_toys(8, world.vocab, runs, world.pools, world.val, 40, 10, seed=0)
    np.testing.assert_array_equal(first[1].loss["b"], again[1].loss["b"])
    model = build_model(atlas.toy_config(8, world.vocab), seed=5)
    model.load_state_dict(first[0].state)  # the state alone reproduces the final loss
    final = evaluate(model, world.val["a"], atlas.SEQ_LEN, max_windows=atlas.EVAL_WINDOWS)
    assert final == pytest.approx(first[0].loss["a"][-1], rel=1e-5)
    ft = atlas.ToyRun({"a": 1.0}, 0, ("a",), init_state=first[0].state)
    cont = atlas.train_toys(8, world.vocab, [ft, runs[0]], world.pools, world.val, 10, 10, seed=2)
    assert cont[0].loss["a"][0] < cont[1].loss["a"][0]  # finetuning starts from what was learnt
    small = atlas.train_toys(8, world.vocab, runs[:1], world.pools, world.val, 20, 10, 0, batch=4)
    assert small[0].tokens.tolist() == [10 * 4 * atlas.SEQ_LEN, 20 * 4 * atlas.SEQ_LEN]


def test_crossover_tokens_paper_legend_is_self_consistent():
    # ATLAS Fig. 6 reports crossovers of 144-283B tokens at N = 2B; the Fig. 7 legend agrees
    D_star = atlas.crossover_tokens(2e9, *atlas.LONGPRE2025_CROSSOVER)
    assert 144e9 <= D_star <= 283e9
    caption = atlas.crossover_tokens(2e9, atlas.LONGPRE2025_CROSSOVER[0], 1.65)
    assert caption > 1e12  # the caption's mix of the two versions: ~1.9T tokens
    assert atlas.crossover_tokens(10.0, 6.0, 2.0) == pytest.approx(10.0)  # 6 N^2 / (6 N) = N


def test_crossover_budget_known_answers():
    D = np.array([1.0, 10.0, 100.0, 1000.0])
    L_ft = np.array([2.0, 1.8, 1.7, 1.65])
    # the gap scratch - finetune is +0.2 at D = 10 and -0.2 at D = 100: crossing at sqrt(10 * 100)
    L_s = L_ft + np.array([1.0, 0.2, -0.2, -0.3])
    assert atlas.crossover_budget(D, L_ft, L_s) == (pytest.approx(10**1.5), "")
    assert atlas.crossover_budget(D, L_ft, L_ft + 0.1) == (1000.0, ">")  # never caught up
    assert atlas.crossover_budget(D, L_ft, L_ft - 0.1) == (1.0, "<")  # never behind
    # a bump of checkpoint noise crosses the raw curves (gap -0.01 at D = 100), not the
    # monotone ones (gap +0.01), so it is no crossover
    bumpy_ft, bumpy_s = np.array([2.0, 1.88, 1.92, 1.8]), np.array([2.2, 1.95, 1.91, 1.85])
    assert atlas.crossover_budget(D, bumpy_ft, bumpy_s) == (1000.0, ">")


@pytest.mark.parametrize(
    ("phi", "psi", "alpha", "beta"),
    [(1.648, -1.819, 0.894, 1.791), (0.464, 0.096, 1.556, 2.668), (-2.25, -0.76, 0.722, 0.023)],
)  # fmt: skip
def test_iso_loss_converges_where_one_slsqp_start_did_not(phi, psi, alpha, beta):
    # parameters where SLSQP from the K = 1 optimum alone stopped with "Positive directional
    # derivative for linesearch" (issue 50): scaled variables and restarts reach the optimum
    n_num, d_num = atlas.iso_loss_multipliers(phi, psi, alpha, beta, 2.0)
    n_alg, d_alg, _ = atlas.curse_multipliers(phi, psi, alpha, beta, 2.0)
    assert n_num == pytest.approx(n_alg, rel=1e-4) and d_num == pytest.approx(d_alg, rel=1e-4)


# ----------------------------------------------------------------------------- bad calls
_LAW = atlas.chinchilla_law("D_t")
_X = {"N": np.full(4, 1e3), "D_t": np.array([1e3, 2e3, 4e3, 8e3])}
_L = np.array([3.0, 2.9, 2.8, 2.7])
_D = np.geomspace(100, 10_000, 10)
_SPECS = [atlas.LangSpec("a", "f", 0)]
_RUN = atlas.ToyRun({"a": 1.0}, 0, ("a",))
_POOLS = {"a": np.zeros((2, 40), dtype=np.int64)}
_VAL = {"a": np.zeros((16, 136), dtype=np.int64)}
BAD_CALLS = [
    # the cases of issue 20: NaN in X, inf in L, a missing X key
    (lambda: atlas.fit_law(_LAW, _X | {"D_t": np.array([1e3, np.nan, 4e3, 8e3])}, _L),
     ValueError, r"X\['D_t'\] contains NaN"),
    (lambda: atlas.fit_law(_LAW, _X, np.array([3.0, np.inf, 2.8, 2.7])), ValueError,
     "L contains NaN or inf"),
    (lambda: atlas.fit_law(_LAW, {"N": _X["N"]}, _L), ValueError, r"lacks \['D_t'\].*needs keys"),
    (lambda: atlas.fit_law(_LAW, _X | {"N": np.ones(3)}, _L), ValueError, r"X\['N'\] has shape"),
    (lambda: atlas.fit_law(_LAW, _X, _L, E_min=-1.0), ValueError, "E_min"),
    (lambda: atlas.fit_law("chinchilla", _X, _L), TypeError, "law must be a Law"),
    (lambda: atlas.fit_law(_LAW, [1, 2], _L), TypeError, "X must be a dict"),
    (lambda: atlas.fit_law(_LAW, _X, _L, starts=[(0.1, 1.0)]), ValueError, r"starts\[0\]"),
    (lambda: atlas.fit_law(_LAW, _X | {"D_t": -_X["D_t"]}, _L), ValueError, r"X\['D_t'\] must"),
    (lambda: atlas.effective_data(-1.0, 1.0, 1.0), ValueError, "D must be >= 0"),
    (lambda: atlas.effective_data(1.0, 0.0, 1.0), ValueError, "U must be > 0"),
    (lambda: atlas.effective_data(1.0, 1.0, 0.0), ValueError, "lam must lie in"),
    (lambda: atlas.effective_data(np.nan, 1.0, 1.0), ValueError, "D contains NaN"),
    (lambda: atlas.effective_data(1.0, 1.0, True), TypeError, "lam must be a real number"),
    (lambda: atlas.curse_multipliers(0.1, -0.1, 0.0, 0.2, 2.0), ValueError, "alpha must lie in"),
    (lambda: atlas.curse_multipliers(math.nan, -0.1, 0.3, 0.2, 2.0), ValueError, "phi must be"),
    (lambda: atlas.iso_loss_multipliers(0.1, -0.1, 0.3, 0.2, "2"), TypeError, "r must be"),
    (lambda: atlas.chinchilla_law("D"), ValueError, "D_key must be one of"),
    (lambda: atlas.atlas_law("A2"), TypeError, "sources must be a list"),
    (lambda: atlas.atlas_law(["A2"], repetition=1), TypeError, "repetition must be True"),
    (lambda: atlas.bigram_overlap(_POOLS["a"], _POOLS["a"] + 16, 16), ValueError, "tokens_t"),
    (lambda: atlas.bigram_overlap(_POOLS["a"][0], _POOLS["a"], 16), ValueError, "tokens_s must"),
    (lambda: atlas.train_toys(8, 16, [_RUN], _POOLS, _VAL, 10, 5, 0, batch=0), ValueError,
     "batch must be"),
    (lambda: atlas.bilingual_transfer_score(1e6, _D, _curve(_D), _D, _curve(_D)), ValueError,
     "d_mono must lie in"),
    (lambda: atlas.bilingual_transfer_score(1e3, _D, _curve(_D)[:5], _D, _curve(_D)), ValueError,
     "equal lengths"),
    (lambda: atlas.build_languages(_SPECS, 8, (0.5, 0.5, 0.5), seed=0), ValueError, "mix must"),
    (lambda: atlas.build_languages(["a"], 8, (0.5, 0.3, 0.2), seed=0), TypeError, "LangSpec"),
    (lambda: atlas.build_languages(_SPECS, 8.0, (0.5, 0.3, 0.2), seed=0), TypeError,
     "n_concepts must be an integer"),
    (lambda: atlas.build_languages(_SPECS, 8, (0.5, 0.3, 0.2), seed=-1), ValueError, "seed"),
    (lambda: atlas.sample_world({}, {}, seed=0), TypeError, "langs must be"),
    (lambda: atlas.stack_worlds({"x": _POOLS}), TypeError, "tag -> World"),
    (lambda: atlas.ToyRun({"a": 0.6, "b": 0.6}, 0, ("a",)), ValueError, "sum to 1"),
    (lambda: atlas.ToyRun({"a": 1.0}, True, ("a",)), TypeError, "seed must be an integer"),
    (lambda: atlas.ToyRun({"a": 1.0}, 0, "a"), TypeError, "evals must be"),
    (lambda: atlas.toy_config(7, 16), ValueError, "d_model must be even"),
    (lambda: atlas.train_toys(8, 16, _RUN, _POOLS, _VAL, 10, 5, 0), TypeError, "runs must be"),
    (lambda: atlas.train_toys(8, 16, [_RUN], _POOLS, _VAL, 0, 5, 0), ValueError, "steps must be"),
    (lambda: atlas.train_toys(8, 16, [_RUN], {}, _VAL, 10, 5, 0), ValueError, "not in pools"),
    (lambda: atlas.train_toys(8, 16, [_RUN], _POOLS, {}, 10, 5, 0), ValueError, "not in val"),
    (lambda: atlas.train_toys(8, 16, [atlas.ToyRun({"a": 1.0}, 0, ("a",), {"w": 1})], _POOLS,
                              _VAL, 10, 5, 0), ValueError, "does not fit"),
    (lambda: atlas.crossover_tokens(1e9, -1.0, 1.5), ValueError, "k must lie in"),
    (lambda: atlas.crossover_tokens(0.0, 1.0, 1.5), ValueError, "N must be > 0"),
    (lambda: atlas.crossover_budget(_D[::-1], _curve(_D), _curve(_D)), ValueError, "increasing"),
    (lambda: atlas.crossover_budget(_D, _curve(_D)[:3], _curve(_D)), ValueError, "equal lengths"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "error", "message"), BAD_CALLS)
def test_bad_calls_get_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
