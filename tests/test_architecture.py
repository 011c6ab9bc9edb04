"""Tests of lib.architecture: accounting, task floor, U-shape and law fits, search, decode cost."""

import math

import numpy as np
import pytest

from lib.architecture import (
    BIAN2025,
    BIAN2025_1B,
    BIAN2025_TABLE1,
    LookupTask,
    PublishedLaw,
    UFactor,
    argmin_numeric,
    candidate_shapes,
    decode_cost,
    design,
    fit_conditional_law,
    fit_u_shape,
    measure_decode,
    predict_loss,
    search_architecture,
    shape_ratios,
    spearman_over_repeats,
    table1_config,
)
from lib.lm import KVCache, LMConfig


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
    with pytest.raises(ValueError, match="r="):
        design(8000, 24, -1.0, 2, 4)
    with pytest.raises(ValueError, match="N="):
        design(float("nan"), 24, 1.0, 2, 4)


def test_lookup_task_floor_and_rule():
    task = LookupTask()
    assert task.entropy_floor() == pytest.approx(0.74741, abs=1e-5)
    x = task.sample(20_000, seed=3)
    rule = task.table()[x[:, 4], x[:, 2], x[:, 0]]
    assert np.mean(x[:, 5] == rule) == pytest.approx(0.9 + 0.1 / 8, abs=0.01)
    assert LookupTask(p_rule=1.0).entropy_floor() == pytest.approx(4 * math.log(8) / 23)
    with pytest.raises(ValueError, match="T="):
        LookupTask(T=5)
    with pytest.raises(ValueError, match="p_rule"):
        LookupTask(p_rule=1.5)
    with pytest.raises(ValueError, match="n="):
        task.sample(0, seed=0)


def test_fit_u_shape_recovers_planted_coefficients():
    z = np.geomspace(0.1, 1.0, 6)
    planted = UFactor(1.0, 0.2, 0.05)
    fit = fit_u_shape(z, planted(z))
    assert (fit.c0, fit.c1, fit.c2) == pytest.approx((1.0, 0.2, 0.05))
    assert fit.z_star == pytest.approx(0.25)
    with pytest.raises(ValueError, match="z must"):
        fit_u_shape([0.1, -0.2, 0.3], [1, 1, 1])
    with pytest.raises(ValueError, match="equal length"):
        fit_u_shape([0.1, 0.2, 0.3], [1, 1, 1, 1])


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
    with pytest.raises(ValueError, match="equal length"):
        fit_conditional_law(x, r, L[:-1], L_opt)


def test_search_picks_fastest_feasible():
    assert search_architecture([2.0, 1.9, 2.2, 1.95], [1.0, 2.0, 5.0, 3.0], 2.0) == 3
    assert search_architecture([2.5, 2.6], [1.0, 2.0], 2.0) == -1
    # 5.0 and 4.9 tie within 5%: the tie goes to the lower predicted loss
    assert search_architecture([2.0, 1.9, 1.99, 1.95], [1.0, 2.0, 5.0, 4.9], 2.0, 0.05) == 3
    assert search_architecture([2.0, 1.9, 1.99, 1.95], [1.0, 2.0, 5.0, 4.9], 2.0, 0.01) == 2
    with pytest.raises(ValueError, match="rel_tol"):
        search_architecture([1.0], [1.0], 2.0, rel_tol=1.0)
    with pytest.raises(ValueError, match="throughput"):
        search_architecture([1.0], [0.0], 2.0)
    with pytest.raises(ValueError, match="L_target"):
        search_architecture([1.0], [1.0], math.inf)
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
    with pytest.raises(ValueError, match="x_range"):
        candidate_shapes(18_432, (32,), (1,), 2, 4, (0.4, 0.2), r_range)
    with pytest.raises(ValueError, match="n_tol"):
        candidate_shapes(18_432, (32,), (1,), 2, 4, x_range, r_range, n_tol=1.5)


def test_decode_cost_kv_matches_cache_tensors():
    cfg = LMConfig(
        vocab_size=16,
        d_model=32,
        n_layers=3,
        n_heads=8,
        n_kv_heads=2,
        d_ff=40,
        max_seq_len=64,
        d_head=4,
    )
    c = decode_cost(cfg, batch_size=5, context=40)
    cache = KVCache(cfg, 5, 64)
    cache.pos = 40
    assert c.kv_bytes == cache.nbytes() / 5 == 2 * 3 * 2 * 4 * 40 * 4
    assert c.bytes == c.weight_bytes + c.kv_bytes
    with pytest.raises(ValueError, match="context"):
        decode_cost(cfg, 5, 0)


def test_measure_decode_shapes_and_validation():
    cfgs = [design(20_000, d, 1.0, 2, 8, 1, 16, 40) for d in (16, 32)]
    t = measure_decode(cfgs, batch_size=2, context=16, n_steps=3, n_repeats=2)
    assert t.tokens_per_cpu_s.shape == (2, 2) and np.all(t.tokens_per_wall_s > 0)
    assert list(t.kv_bytes_measured) == [decode_cost(c, 2, 16).kv_bytes for c in cfgs]
    with pytest.raises(ValueError, match="max_seq_len"):
        measure_decode(cfgs, batch_size=2, context=39, n_steps=3, n_repeats=1)


def test_spearman_over_repeats():
    samples = np.array([[1.0, 1.1], [2.0, 2.1], [3.0, 3.1]])
    rho, sd = spearman_over_repeats([1, 2, 3], samples)
    assert rho == 1.0 and sd == 0.0
    with pytest.raises(ValueError, match="knob"):
        spearman_over_repeats([1, 2], samples)


def test_train_final_losses_matches_direct_training():
    from lib.architecture import train_final_losses
    from lib.train import TrainConfig, train

    task = LookupTask()
    tr, va = task.sample(256, seed=1), task.sample(64, seed=2)
    cfg = design(2000, 16, 1.0, 1, 4, 1, task.V, task.T)
    tcfg = TrainConfig(steps=5, batch_size=8, seq_len=23, lr=1e-2, eval_windows=64)
    direct = float(train(cfg, tcfg, tr, va).eval_loss[-1])
    assert train_final_losses([(cfg, tcfg)], tr, va, n_workers=1) == [direct]
    with pytest.raises(ValueError, match="n_workers"):
        train_final_losses([(cfg, tcfg)], tr, va, n_workers=0)
