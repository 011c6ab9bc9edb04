"""Tests of lib.architecture: accounting, toy task, law fits across sizes, search, decode cost."""

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from lib.architecture import (
    BIAN2025,
    BIAN2025_1B,
    BIAN2025_TABLE1,
    LagTask,
    PublishedLaw,
    UFactor,
    argmin_numeric,
    bootstrap_optimum,
    bounded_optimum,
    candidate_shapes,
    carry_over,
    decode_cost,
    design,
    final_losses,
    fit_across_sizes,
    fit_chinchilla_lsq,
    fit_conditional_law,
    fit_shape_law,
    fit_u_shape,
    is_diverged,
    llama_like,
    load_openlm_morph,
    measure_decode,
    noise_ceiling,
    predict_loss,
    rank_scores,
    search_architecture,
    shape_ratios,
    spearman_by_round,
    sweep_shapes,
    table1_config,
)
from lib.fit import ChinchillaFit
from lib.lm import KVCache, LMConfig
from lib.train import TrainConfig, train


def _independent_ratios(d, f, n_layers, n_h, n_kv, d_h):
    """Table 1 accounting written out by hand, independent of lib.lm.count_params."""
    attn = n_layers * (2 * d * n_h * d_h + 2 * d * n_kv * d_h)
    mlp = n_layers * 3 * d * f
    return d / math.sqrt(attn + mlp), mlp / attn


def test_table1_accounting_matches_print_except_llama_3b():
    for row in BIAN2025_TABLE1:
        x, r, _ = shape_ratios(table1_config(row))
        xi, ri = _independent_ratios(
            row.d, row.f, row.n_layers, row.n_heads, row.n_kv_heads, row.d_head
        )
        assert x == pytest.approx(xi) and r == pytest.approx(ri)
        assert abs(x - row.x_printed) <= 0.0005
        if row.name == "LLaMA-3.2-3B":
            assert r == pytest.approx(3.0) and row.r_printed == 4.80  # the misprint
        else:
            assert abs(r - row.r_printed) <= 0.005 * row.r_printed


def test_published_optima():
    assert round(BIAN2025.a.z_star, 3) == 0.080 and round(BIAN2025.b.z_star, 2) == 1.03
    assert round(BIAN2025_1B.a.z_star, 3) == 0.074 and round(BIAN2025_1B.b.z_star, 2) == 1.22
    for f in (BIAN2025.a, BIAN2025.b, BIAN2025_1B.a, BIAN2025_1B.b):
        assert argmin_numeric(f) == pytest.approx(f.z_star, rel=1e-7)
    assert math.isnan(UFactor(1.0, -0.1, 0.2).z_star)


def test_design_hits_requested_shape():
    cfg = design(8000, 24, 1.0, 2, 4)
    x, r, N = shape_ratios(cfg)
    assert abs(N - 8000) / 8000 < 0.05 and r == pytest.approx(1.0, abs=0.1)
    assert x == pytest.approx(24 / math.sqrt(N))
    g = design(12_000_000, 512, 1.0, 6, 32, gqa=4)
    assert g.n_heads % 4 == 0 and g.n_heads // g.n_kv_heads == 4


def test_llama_like_has_fixed_ratios_and_sits_in_the_grid():
    for d, layers in ((24, 1), (32, 2)):
        x, r, N = shape_ratios(llama_like(d, layers, 4, 8, 16))
        assert (
            r == 3.0 and x == pytest.approx(1 / math.sqrt(16 * layers)) and N == 16 * d * d * layers
        )
    base = llama_like(24, 1, 4, 8, 16)
    grid = sweep_shapes(9216, (0.125, 0.25, 0.5), 1.0, (1.0, 3.0), 0.25, 1, 4, 8, 16)
    assert base == grid["r"][1] and grid["x"][1] == grid["r"][0]  # the shared centre
    assert [c.d_model for c in grid["x"]] == [12, 24, 48]


def test_lag_task_floor_and_sampling():
    uniform = LagTask(unary=0, pairs=0)
    assert uniform.floor(uniform.sample(50, seed=0)) == pytest.approx(math.log(8))
    # One unary lag: x_t ~ softmax(U_1[x_{t-1}]), so the empirical transitions match the table.
    task = LagTask(V=4, T=12, unary=1, pairs=0, table_seed=3)
    x = task.sample(20_000, seed=1)
    ((_, weight, U),) = task.terms()
    p = np.exp(weight * U) / np.exp(weight * U).sum(axis=1, keepdims=True)
    counts = np.zeros((4, 4))
    np.add.at(counts, (x[:, :-1].ravel(), x[:, 1:].ravel()), 1)
    assert counts / counts.sum(axis=1, keepdims=True) == pytest.approx(p, abs=0.01)
    # The floor is the mean -log p of the tokens, here by hand from the same table.
    by_hand = -np.log(p[x[:, :-1], x[:, 1:]]).mean()
    assert task.floor(x) == pytest.approx(by_hand, rel=1e-12)
    assert task.floor(x) < math.log(4)
    assert np.array_equal(task.sample(5, seed=7), task.sample(5, seed=7))


def test_fit_u_shape_recovers_planted_coefficients():
    z = np.geomspace(0.1, 1.0, 6)
    planted = UFactor(1.0, 0.2, 0.05)
    fit = fit_u_shape(z, planted(z))
    assert (fit.c0, fit.c1, fit.c2) == pytest.approx((1.0, 0.2, 0.05))
    assert fit.z_star == pytest.approx(0.25)


def test_fit_conditional_law_recovers_optima():
    rng = np.random.default_rng(0)
    x, r = rng.uniform(0.05, 0.2, 40), rng.uniform(0.5, 5, 40)
    L_opt = rng.choice([3.0, 2.8, 2.6], 40)
    L = predict_loss(BIAN2025, x, r, L_opt)
    law = fit_conditional_law(x, r, L, L_opt)
    assert law.b.c0 == 1.0
    assert law.a.z_star == pytest.approx(BIAN2025.a.z_star, rel=1e-4)
    assert law.b.z_star == pytest.approx(BIAN2025.b.z_star, rel=1e-4)
    assert predict_loss(law, x, r, L_opt) == pytest.approx(L, rel=1e-6)


def _planted_sizes(law=BIAN2025, sizes=(10**8, 2 * 10**8, 4 * 10**8)):
    """The same (x, r) grid at each size; L_opt falls with N. Returns x, r, N, L."""
    xs, rs = np.array([0.04, 0.06, 0.08, 0.12, 0.16]), np.array([0.5, 1.0, 2.0, 4.0])
    x, r = (a.ravel() for a in np.meshgrid(xs, rs))
    N = np.repeat(sizes, len(x))
    L_opt = 2.0 + 1e3 / N**0.3
    return np.tile(x, 3), np.tile(r, 3), N, predict_loss(law, np.tile(x, 3), np.tile(r, 3), L_opt)


def test_fit_across_sizes_and_rank_scores_recover_a_planted_law():
    x, r, N, L = _planted_sizes()
    small, test = N < 4 * 10**8, N == 4 * 10**8
    law = fit_across_sizes(x[small], r[small], N[small], L[small])
    assert law.a.z_star == pytest.approx(BIAN2025.a.z_star, rel=1e-4)
    assert law.b.z_star == pytest.approx(BIAN2025.b.z_star, rel=1e-4)
    # Two replicates at the test size: exact, and one whose best shape lost 0.5 nats.
    L_T = np.column_stack([L[test], L[test]])
    best = int(np.argmin(L[test]))
    L_T[best, 1] += 0.5
    rho, regret = rank_scores(predict_loss(law, x[test], r[test], 1.0), L_T)
    expected = stats.spearmanr(L[test], L_T[:, 1]).statistic
    assert rho == pytest.approx([1.0, expected]) and expected < 0.9
    assert regret == pytest.approx([0.0, L_T[best, 1] - L_T[:, 1].min()])


def test_rank_scores_of_a_constant_prediction_is_a_random_pick():
    L = np.array([[1.0, 2.0], [2.0, 1.0], [3.0, 1.5]])
    rho, regret = rank_scores(np.ones(3), L)
    assert rho == pytest.approx([0.0, 0.0])
    assert regret == pytest.approx([1.0, 0.5])  # mean minus min per replicate
    rho, regret = rank_scores(np.array([[3.0, 1.0], [2.0, 2.0], [1.0, 3.0]]), L)  # per replicate
    assert rho == pytest.approx([-1.0, -0.5]) and regret == pytest.approx([2.0, 1.0])


def test_is_diverged():
    flags = is_diverged([1.0, np.nan, np.inf, math.log(8), 2.0], V=8)
    assert flags.tolist() == [False, True, True, True, False]


def test_noise_ceiling_is_replicate_against_replicate():
    L = np.array([[1.0, 1.1, 1.2], [2.0, 2.1, 2.2], [3.0, 3.1, 3.2], [4.0, 4.1, 4.2]])
    rho, regret = noise_ceiling(L)
    assert rho == pytest.approx([1.0, 1.0, 1.0]) and regret == pytest.approx([0.0, 0.0, 0.0])
    L[0, 2], L[3, 2] = 4.5, 0.5  # the third replicate swaps the extremes: ranks 4 2 3 1
    # replicates 1 and 2 agree (1) and each meets the third at -0.8; the third meets both at -0.8
    rho, regret = noise_ceiling(L)
    assert rho == pytest.approx([0.1, 0.1, -0.8])
    # the third picks shape 4, which costs the others 3 nats; they pick shape 1, which costs it 4
    assert regret == pytest.approx([1.5, 1.5, 4.0])


def test_bounded_optimum_reads_an_edge_as_the_edge():
    assert bounded_optimum(UFactor(1.0, 0.2, 0.05), 0.1, 1.0) == pytest.approx(0.25)
    assert bounded_optimum(UFactor(1.0, 0.2, 0.05), 0.5, 1.0) == pytest.approx(0.5)  # clipped
    assert bounded_optimum(UFactor(1.0, -0.2, 0.05), 0.1, 10.0) == 10.0  # falls forever
    assert bounded_optimum(UFactor(1.0, 0.2, -0.05), 0.1, 10.0) == 0.1  # rises forever


def test_fit_chinchilla_lsq_recovers_a_planted_law():
    rng = np.random.default_rng(0)
    N, D = rng.uniform(1e7, 1e9, 30), rng.uniform(1e9, 1e11, 30)
    planted = ChinchillaFit(1.8, 480.0, 2100.0, 0.35, 0.37, 0.0)
    fit = fit_chinchilla_lsq(N, D, planted.predict(N, D))
    assert (fit.E, fit.alpha, fit.beta) == pytest.approx((1.8, 0.35, 0.37), rel=1e-3)
    again = fit_chinchilla_lsq(N, D, planted.predict(N, D), start=fit)
    assert again.predict(N, D) == pytest.approx(planted.predict(N, D), rel=1e-6)


def test_fit_shape_law_recovers_a_planted_factor_and_its_bootstrap_is_tight():
    rng = np.random.default_rng(2)
    N, D, x = rng.uniform(1e7, 1e9, 40), rng.uniform(1e9, 1e11, 40), rng.uniform(0.05, 0.2, 40)
    ref = ChinchillaFit(1.8, 480.0, 2100.0, 0.35, 0.37, 0.0)
    factor = UFactor(1.0, 0.1, 0.008)  # x* = 0.08
    L = factor(x) * ref.predict(N, D)
    exact = fit_shape_law(N, D, x, L, reference=ref)  # the true reference: the factor exactly
    assert (exact.factor.c0, exact.factor.c1, exact.factor.c2) == pytest.approx((1.0, 0.1, 0.008))
    # two stages: a fitted reference absorbs a little of the factor, so x* is close, not exact
    law = fit_shape_law(N, D, x, L)
    assert law.factor.z_star == pytest.approx(0.08, rel=0.02)
    assert law.predict(N, D, x) == pytest.approx(L, rel=0.02)
    # resamples move the reference too, so the optimum spreads although the data are exact
    boot = np.exp(bootstrap_optimum(law, N, D, x, L, 0.02, 0.4, 40, seed=3))
    assert np.median(boot) == pytest.approx(0.08, rel=0.05)
    assert np.percentile(boot, 2.5) < 0.08 < np.percentile(boot, 97.5)


def test_carry_over_interpolates_in_log_x_and_holds_the_ends():
    out = carry_over([0.1, 0.4], [2.0, 4.0], [0.05, 0.2, 1.0])
    assert out == pytest.approx([1.0, 1.5, 2.0])  # normalised by the best, midpoint in ln x


def test_load_openlm_morph_counts_non_embedding_parameters():
    runs = load_openlm_morph()
    assert len(runs) == 76
    row = runs[(runs.variant == "80M_v1") & (runs.tokens_per_param_label == 20)].iloc[0]
    assert row.N == 78914048 - 2 * 50432 * 512  # untied input and output embeddings
    assert row.x == pytest.approx(512 / math.sqrt(row.N))
    assert row["size"] == 80e6 and row.D == 1610612736


def test_search_picks_fastest_feasible():
    assert search_architecture([2.0, 1.9, 2.2, 1.95], [1.0, 2.0, 5.0, 3.0], 2.0) == 3
    assert search_architecture([2.5, 2.6], [1.0, 2.0], 2.0) == -1
    # 5.0 and 4.9 tie within 5%: the tie goes to the lower predicted loss
    assert search_architecture([2.0, 1.9, 1.99, 1.95], [1.0, 2.0, 5.0, 4.9], 2.0, 0.05) == 3
    assert search_architecture([2.0, 1.9, 1.99, 1.95], [1.0, 2.0, 5.0, 4.9], 2.0, 0.01) == 2
    assert isinstance(BIAN2025, PublishedLaw)


def test_candidate_shapes_stay_in_range_and_are_distinct():
    x_range, r_range = (0.2, 0.4), (1.0, 3.0)
    shapes = candidate_shapes(18_432, (16, 24, 32, 36, 40, 48, 64), (0.5, 1, 2, 3, 5), 2, 4,
                              x_range, r_range)  # fmt: skip
    assert shapes and len(set(shapes)) == len(shapes)
    for cfg in shapes:
        x, r, n = shape_ratios(cfg)
        assert x_range[0] <= x <= x_range[1] and r_range[0] <= r <= r_range[1]
        assert abs(n / 18_432 - 1) <= 0.05 and cfg.n_kv_heads == cfg.n_heads
    # d = 16 gives x = 0.12 and d = 64 gives x = 0.47 at this N: both fall outside x_range
    assert {c.d_model for c in shapes} <= {32, 36, 40, 48}


def test_decode_cost_kv_matches_cache_tensors():
    cfg = LMConfig(vocab_size=16, d_model=32, n_layers=3, n_heads=8, n_kv_heads=2, d_ff=40,
                   max_seq_len=64, d_head=4)  # fmt: skip
    c = decode_cost(cfg, batch_size=5, context=40)
    cache = KVCache(cfg, 5, 64)
    cache.pos = 40
    assert c.kv_bytes == cache.nbytes() / 5 == 2 * 3 * 2 * 4 * 40 * 4
    assert c.bytes == c.weight_bytes + c.kv_bytes


def test_measure_decode_shapes_and_determinism_of_order():
    cfgs = [design(20_000, d, 1.0, 2, 8, 1, 16, 40) for d in (16, 32)]
    t = measure_decode(cfgs, batch_size=2, context=16, n_steps=3, n_rounds=2, seed=0)
    assert t.tokens_per_cpu_s.shape == (2, 2) and np.all(t.tokens_per_wall_s > 0)
    assert list(t.kv_bytes_measured) == [decode_cost(c, 2, 16).kv_bytes for c in cfgs]


def test_spearman_by_round():
    samples = np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]])
    assert spearman_by_round([1, 2, 3], samples).tolist() == [1.0, -1.0]


def test_final_losses_match_direct_training():
    task = LagTask(T=12, unary=4, pairs=1)
    tr, va = task.sample(256, seed=1), task.sample(64, seed=2)
    cfg = design(2000, 16, 1.0, 1, 4, 1, task.V, task.T)
    tcfg = TrainConfig(steps=5, batch_size=8, seq_len=11, lr=1e-2, eval_windows=64)
    direct = float(train(cfg, tcfg, tr, va).eval_loss[-1])
    assert final_losses([(cfg, tcfg)], tr, va) == [direct]


CFG = design(2304, 12, 1.0, 1, 4, 1, 8, 16)
TCFG = TrainConfig(steps=1, batch_size=2, seq_len=15, lr=1e-2)

GADRE = Path(__file__).resolve().parent.parent / "data" / "gadre2024" / "gadre2024_models.csv"
BAD_CALLS = [
    # (call, error, message)
    (lambda: design(8000, 24, -1.0, 2, 4), ValueError, "r must lie in"),
    (lambda: design(float("nan"), 24, 1.0, 2, 4), TypeError, "N must be an integer"),
    (lambda: design(8000, 24, 1.0, True, 4), TypeError, "n_layers must be an integer"),
    (lambda: design(8000, 24, 1.0, 2, 4, gqa=0), ValueError, "gqa must be >= 1"),
    (lambda: llama_like(26, 1, 4, 8, 16), ValueError, "multiple of d_head"),
    (lambda: shape_ratios("cfg"), TypeError, "cfg must be an LMConfig"),
    (lambda: table1_config(("LLaMA", 2048)), TypeError, "row must be a Table1Row"),
    (lambda: sweep_shapes(9216, [0.25, -1], 1.0, [1.0], 0.25, 1, 4, 8, 16), ValueError, "x_grid"),
    (lambda: LagTask(T=5), ValueError, "T must be >= 7"),
    (lambda: LagTask(unary_decay=math.nan), ValueError, "unary_decay must be finite"),
    (lambda: LagTask(V=True), TypeError, "V must be an integer"),
    (lambda: LagTask().sample(0, seed=0), ValueError, "n must be >= 1"),
    (lambda: LagTask().sample(4, seed=1.5), TypeError, "seed must be an integer"),
    (lambda: LagTask().floor(np.full((2, 16), 9)), ValueError, "tokens must be <= 7"),
    (lambda: LagTask().floor(np.zeros((2, 10))), ValueError, "T=16 columns"),
    (lambda: final_losses([], None, None), ValueError, "non-empty list"),
    (lambda: final_losses([(CFG, {"steps": 1})], None, None), TypeError, "TrainConfig"),
    (lambda: is_diverged([1.0], V=1), ValueError, "V must be >= 2"),
    (lambda: is_diverged("1.0", V=8), TypeError, "L must be an array"),
    (lambda: fit_u_shape([0.1, -0.2, 0.3], [1, 1, 1]), ValueError, "z must be > 0"),
    (lambda: fit_u_shape([0.1, 0.2, 0.3], [1, 1, 1, 1]), ValueError, "equal lengths"),
    (lambda: fit_u_shape([0.1, 0.2], [1, 1]), ValueError, "at least 3"),
    (lambda: argmin_numeric(BIAN2025.a, lo=2.0, hi=1.0), ValueError, "lo=2.0 must be < hi"),
    (lambda: argmin_numeric((1, 2, 3)), TypeError, "factor must be a UFactor"),
    (lambda: predict_loss(BIAN2025, [0.1], [1.0], [math.inf]), ValueError, "L_opt contains"),
    (lambda: predict_loss("law", [0.1], [1.0], [1.0]), TypeError, "law must be a PublishedLaw"),
    (
        lambda: fit_conditional_law([0.1] * 5, [1.0] * 5, [2.0] * 4, [1.0] * 5),
        ValueError,
        "at least 5",
    ),
    (
        lambda: fit_conditional_law([0.1] * 6, [1.0] * 6, [2.0] * 5, [1.0] * 5),
        ValueError,
        "equal lengths",
    ),
    (
        lambda: fit_across_sizes([0.1] * 5, [1.0] * 5, [1e3] * 5, [np.nan] * 5),
        ValueError,
        "L contains NaN",
    ),
    (lambda: noise_ceiling([[1.0, 2.0]] * 2), ValueError, "n_shapes >= 3"),
    (lambda: noise_ceiling([[1.0, np.nan]] * 3), ValueError, "L contains NaN"),
    (lambda: rank_scores([1.0, 2.0], [[1.0]] * 3), ValueError, "predicted must be"),
    (lambda: bounded_optimum((1, 2, 3), 0.1, 1.0), TypeError, "factor must be a UFactor"),
    (lambda: bounded_optimum(BIAN2025.a, 1.0, 0.5), ValueError, "hi must lie"),
    (
        lambda: fit_shape_law([1e7] * 5, [1e9] * 5, [0.1] * 5, [3.0] * 5, reference=1),
        TypeError,
        "reference must be",
    ),  # fmt: skip
    (lambda: fit_chinchilla_lsq([1e7] * 5, [1e9] * 5, [3.0] * 4), ValueError, "at least 5"),
    (lambda: fit_chinchilla_lsq([1e7] * 5, [1e9] * 5, [3.0] * 5, start=1), TypeError, "start"),
    (
        lambda: bootstrap_optimum(None, [1e7] * 5, [1e9] * 5, [0.1] * 5, [3.0] * 5, 0.1, 1, 2, 0),
        TypeError,
        "law must be a ShapeLaw",
    ),  # fmt: skip
    (lambda: carry_over([0.1], [2.0], [0.2]), ValueError, "at least 2"),
    (lambda: load_openlm_morph(GADRE), ValueError, "lacks the columns"),
    (
        lambda: candidate_shapes(9216, [24], [1.0], 1, 4, (0.4, 0.2), (1, 3)),
        ValueError,
        "x_range must be",
    ),
    (
        lambda: candidate_shapes(9216, [24.5], [1.0], 1, 4, (0.1, 0.9), (1, 3)),
        ValueError,
        "whole hidden sizes",
    ),
    (
        lambda: candidate_shapes(9216, [24], [1.0], 1, 4, (0.1, 0.9), (1, 3), n_tol=1.5),
        ValueError,
        "n_tol must lie in",
    ),
    (lambda: search_architecture([1.0], [0.0], 2.0), ValueError, "throughput must be > 0"),
    (lambda: search_architecture([1.0], [1.0], math.inf), ValueError, "L_target must be finite"),
    (lambda: search_architecture([1.0], [1.0], 2.0, rel_tol=1.0), ValueError, "rel_tol"),
    (lambda: search_architecture([1.0, 2.0], [1.0], 2.0), ValueError, "equal lengths"),
    (lambda: decode_cost(CFG, 5, 0), ValueError, "context must be >= 1"),
    (lambda: decode_cost(CFG, 5.0, 4), TypeError, "batch_size must be an integer"),
    (lambda: measure_decode([CFG], 2, 15, 3, 1, seed=0), ValueError, "max_seq_len >="),
    (lambda: measure_decode([], 2, 4, 3, 1, seed=0), ValueError, "non-empty list"),
    (lambda: measure_decode([CFG], 2, 4, 3, True, seed=0), TypeError, "n_rounds must be"),
    (lambda: spearman_by_round([1, 2], [[1.0], [2.0]]), ValueError, "at least 3"),
    (lambda: spearman_by_round([1, 2, 3], [[1.0], [2.0]]), ValueError, "one row per knob"),
    (lambda: UFactor(1.0, 0.1, 0.1)(0.0), ValueError, "z must be > 0"),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD_CALLS)
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
