"""lib.cod: Eq. (4), MeanShift, Lemma 1, the mapping, the pipeline, the toy family, bad input."""

import numpy as np
import pandas as pd
import pytest
from sklearn.cluster import MeanShift

from lib import cod


# ----------------------------------------------------------------------------- Eq. (4)
def test_cod_law_limits():
    C = np.array([1e-6, 1.0, 1e9])
    y = cod.cod_law(C, g=0.25, a=2.0, b=0.5, c=0.3)
    assert y[0] == pytest.approx(0.25, abs=1e-9)  # tiny compute: chance level g
    assert y[1] == pytest.approx(0.25 + 0.75 * np.exp(-2.3))
    assert y[2] == pytest.approx(0.25 + 0.75 * np.exp(-0.3), abs=1e-3)  # ceiling g+(1-g)e^-c


def test_fit_cod_law_recovers_planted_curve_and_applies_rule():
    C = np.geomspace(1, 16, 7)
    fit = cod.fit_cod_law(C, cod.cod_law(C, 0.05, 3.0, 0.8, 0.2))
    assert fit.rmse < 1e-4 and not fit.on_bound
    assert (fit.g, fit.a, fit.b, fit.c) == pytest.approx((0.05, 3.0, 0.8, 0.2), rel=1e-2, abs=1e-3)
    assert fit.predict([64.0])[0] == pytest.approx(cod.cod_law([64.0], 0.05, 3, 0.8, 0.2)[0])
    assert fit.extrapolatable  # a = 3 > 1, b = 0.8 > 0.1, c = 0.2 in [0, 1), off the bounds
    assert not cod.CodLawFit(0.0, 0.5, 0.8, 0.2, 0.0).extrapolatable  # a <= 1
    assert not cod.CodLawFit(0.0, 3.0, 0.8, 1.5, 0.0).extrapolatable  # c >= 1
    assert not cod.CodLawFit(0.0, 3.0, 0.8, 0.2, 0.0, on_bound=True).extrapolatable


def test_a_step_is_fitted_on_the_exponent_bound():
    """A cluster that jumps between two adjacent models wants b -> infinity: not pinned down."""
    C = np.geomspace(1, 16, 7)
    fit = cod.fit_cod_law(C, np.where(C < 5, 0.02, 0.9))
    assert fit.on_bound and not fit.extrapolatable


# ----------------------------------------------------------------------------- clustering
def test_am_gm_gap_matches_lemma_1():
    p = np.exp(np.random.default_rng(0).normal(np.log(0.3), 0.05, 20_000))
    gap = cod.am_gm_gap(p) * p.mean()
    assert gap == pytest.approx(p.var() / (2 * p.mean()), rel=0.05)
    assert cod.am_gm_gap(np.full(5, 0.4)) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("bandwidth", [0.08, 0.15])
def test_mean_shift_matches_scikit_learn(bandwidth):
    rng = np.random.default_rng(4)
    X = np.clip(rng.beta(0.5, 2, (300, 1)) + rng.normal(0, 0.05, (300, 5)), 0, 1)
    centres, labels = cod.mean_shift(X, bandwidth)
    ref = MeanShift(bandwidth=bandwidth).fit(X)
    np.testing.assert_allclose(centres, ref.cluster_centers_, atol=1e-12)
    np.testing.assert_array_equal(labels, ref.labels_)


def test_improved_meanshift_recovers_blobs_and_keeps_invariants():
    rng = np.random.default_rng(1)
    centres = np.array([[0.1] * 4, [0.5] * 4, [0.9] * 4])
    X = np.clip(np.concatenate([c + rng.normal(0, 0.02, (60, 4)) for c in centres]), 0, 1)
    X = np.concatenate([X, np.full((3, 4), [0.3, 0.7, 0.3, 0.7])])  # 3 stragglers: < K items
    cl = cod.improved_meanshift(X, K=10)
    assert cl.n_clusters == 3 and cl.rounds >= 1
    assert np.all(cl.labels[-3:] == -1)
    for k in range(cl.n_clusters):
        members = X[cl.labels == k]
        assert len(members) >= 10
        assert np.all(np.linalg.norm(members - cl.centers[k], axis=1) <= cl.bandwidth + 1e-9)
    for blob in (cl.labels[:60], cl.labels[60:120], cl.labels[120:180]):
        assert len(set(blob[blob >= 0])) == 1  # one blob, one label
        assert np.mean(blob >= 0) >= 0.5  # members farther than R (tight, Q = 0.1) are reset


def test_silhouette_beats_shuffled_control_on_blobs():
    rng = np.random.default_rng(3)
    X = np.clip(np.concatenate([rng.normal(m, 0.02, (50, 3)) for m in (0.2, 0.8)]), 0, 1)
    ours, control = cod.silhouette_vs_shuffled(X, np.repeat([0, 1], 50), seed=0)
    assert ours > 0.8 and control < ours
    assert np.isnan(cod.silhouette_vs_shuffled(X, np.zeros(100, dtype=int))[0])  # one cluster


# ----------------------------------------------------------------------------- mapping, pipeline
def test_mapping_is_monotone_and_pinned():
    f = cod.fit_mapping([0.2, 0.4, 0.41, 0.6], [0.1, 0.3, 0.29, 0.5])  # one non-monotone pair
    y = f(np.linspace(0, 1, 101))
    assert y[0] == pytest.approx(0.0) and y[-1] == pytest.approx(1.0)
    assert np.all(np.diff(y) >= -1e-12) and y.min() >= 0 and y.max() <= 1
    assert f([0.2])[0] == pytest.approx(0.1)


def test_predict_cod_on_planted_clusters():
    C = np.geomspace(1, 16, 7)
    easy, hard = cod.cod_law(C, 0, 2.0, 1.0, 0.1), cod.cod_law(C, 0, 6.0, 1.0, 0.2)
    P = np.concatenate([np.tile(easy, (40, 1)), np.tile(hard, (40, 1)), np.zeros((10, 7))])
    P = np.clip(P + np.random.default_rng(2).normal(0, 0.005, P.shape), 0, 1)
    P[-10:] = 0.0  # zero-performance items are dropped before clustering
    res = cod.predict_cod(P, C, [64.0])
    assert res.kept.sum() == 2 and not res.subset_mask[-10:].any()
    want = (cod.cod_law([64.0], 0, 2, 1, 0.1) + cod.cod_law([64.0], 0, 6, 1, 0.2))[0] / 2
    assert res.subset_pred[0] == pytest.approx(want, abs=0.02)
    # the mapping through the small models' (subset, full) points: 80 of 90 items in the subset
    assert res.full_pred(P)[0] == pytest.approx(want * 80 / 90, abs=0.03)


def planted_family(n_small: int = 7) -> tuple[list, list, cod.FactModel]:
    """FactModels whose pass rates follow Eq. (4) in two planted clusters, L a power law."""
    C = np.geomspace(1.0, 64.0, n_small + 2)  # the last two: target and anchor
    easy, hard = cod.cod_law(C, 0.0, 2.0, 1.0, 0.1), cod.cod_law(C, 0.0, 8.0, 1.2, 0.2)
    P = np.concatenate([np.tile(easy, (200, 1)), np.tile(hard, (200, 1))])
    models = [cod.FactModel(8, 1, 100, float(c), P[:, i], float(0.2 + 2 * c**-0.5))
              for i, c in enumerate(C)]  # fmt: skip
    return models[:n_small], [models[n_small]], models[n_small + 1]


def test_compare_methods_on_a_planted_family():
    small, target, anchor = planted_family()
    r = cod.compare_methods(small, target, anchor, n_samples=100, seed=0)
    # binomial noise of 100 samples splits the two curves into a few clusters, all regular
    assert r.cod_predicted and r.cod.subset_mask.mean() > 0.5
    assert r.abs_error_pp("COD")[0] < 2.0  # clean clusters: COD nails the target
    assert r.abs_error_pp("COD, no mapping")[0] < 2.0
    assert set(r.pred) >= {"direct fit + anchor", "loss route", "loss route + anchor"}


# ----------------------------------------------------------------------------- toy family
def test_fact_benchmark_keys_priors_and_frequencies():
    b = cod.make_fact_benchmark(8, 5, 6, 3, zipf=1.0, mislabel_frac=0.5, seed=0, typicality=2.0)
    assert b.n_items == 40 and b.freq.sum() == pytest.approx(1.0)
    assert np.all((b.answer >= 0).sum(axis=1) == b.ell) and set(b.ell) <= {1, 2, 3}
    assert np.all(b.key[~b.mislabelled] == b.answer[~b.mislabelled])
    used = b.answer[b.mislabelled] >= 0
    assert np.all(b.key[b.mislabelled][used] != b.answer[b.mislabelled][used])
    wide = cod.make_fact_benchmark(64, 32, 8, 1, 1.0, 0.0, 1, typicality=2.0)
    top = [np.bincount(wide.answer[wide.relation == r, 0], minlength=8).max() for r in range(32)]
    assert np.mean(top) / 64 > 0.4  # p(mode) = 1 / H_8(2) = 0.65 with typicality 2


def test_train_fact_models_are_independent_and_learn():
    b1 = cod.make_fact_benchmark(8, 4, 4, 2, 1.0, 0.1, seed=1, typicality=1.0)
    b2 = cod.make_fact_benchmark(8, 4, 4, 2, 1.0, 0.1, seed=2, typicality=1.0)
    pair = cod.train_fact_models([b1, b2], 4, 1, 40, [5, 6], batch_size=64)
    alone = cod.train_fact_models([b2], 4, 1, 40, [6], batch_size=64)[0]
    np.testing.assert_allclose(pair[1].P, alone.P, atol=1e-6)  # stacking changes nothing
    assert pair[1].L == pytest.approx(alone.L, rel=1e-6)
    assert alone.N == 12 * 4 + (4 * 16 + 16) + (16 * 8 + 8)  # embedding, hidden, heads
    assert alone.C == pytest.approx(6 * alone.N * round(40 * alone.N / 64) * 64)
    untrained = cod.train_fact_models([b2], 4, 1, 1e-9, [6], batch_size=1)[0]  # 20 steps
    assert alone.P.mean() > untrained.P.mean() and alone.L < untrained.L


def test_sampled_pass_rates_are_binomial():
    r = cod.sampled_pass_rates(np.array([0.0, 1.0, 0.5]), 100, seed=0)
    assert r[0] == 0 and r[1] == 1 and 0.3 < r[2] < 0.7
    np.testing.assert_array_equal(r, cod.sampled_pass_rates([0.0, 1.0, 0.5], 100, seed=0))


# ----------------------------------------------------------------------------- bad input
B = cod.make_fact_benchmark(4, 2, 4, 2, 1.0, 0.0, 0)
SMALL, TARGET, ANCHOR = planted_family(5)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: cod.cod_law([0.0, 1.0], 0, 1, 1, 0), ValueError, "C must be > 0"),
        (lambda: cod.cod_law([1.0], True, 1, 1, 0), TypeError, "g must be a real number"),
        (lambda: cod.cod_law([1.0], 0, np.nan, 1, 0), ValueError, "a must be finite"),
        (lambda: cod.fit_cod_law([1, 2, 3], [0.1, 0.2, 0.3]), ValueError, "C has 3 entries"),
        (lambda: cod.fit_cod_law([1, 2, 3, 4], [0.1, 0.2, 1.3, 0.4]), ValueError, "y must be <= 1"),
        (lambda: cod.fit_cod_law([1, 2, 3, 4], [0.1] * 5), ValueError, "equal lengths"),
        (lambda: cod.am_gm_gap([0.1, np.nan]), ValueError, "p contains NaN"),
        (lambda: cod.am_gm_gap([0.1, 0.0]), ValueError, "p must be > 0"),
        (lambda: cod.mean_shift(np.zeros((5, 2)), 0.0), ValueError, "bandwidth must lie"),
        (lambda: cod.mean_shift(np.zeros(5), 0.1), ValueError, "X must be a 2-D"),
        (lambda: cod.improved_meanshift(np.full((20, 2), 0.5), K=0), ValueError, "K must be >= 1"),
        (lambda: cod.improved_meanshift(np.full((20, 2), 0.5), K=2.5), TypeError, "K must be an"),
        (lambda: cod.improved_meanshift(np.full((20, 2), 2.0)), ValueError, "X must be <= 1"),
        (lambda: cod.improved_meanshift(np.full((20, 2), 0.5), Q=0), ValueError, "Q must lie"),
        (lambda: cod.fit_mapping([0.1, 0.2], [0.1]), ValueError, "equal lengths"),
        (lambda: cod.fit_mapping([0.1, "x"], [0.1, 0.2]), TypeError, "subset_acc must be an"),
        (lambda: cod.fit_mapping([0.5], [0.5])(1.5), ValueError, "s must be <= 1"),
        (lambda: cod.predict_cod(np.zeros((5, 3)), [1.0, 2.0], [3.0]), ValueError, "one C per"),
        (lambda: cod.predict_cod(np.zeros((5, 2)), [1.0, 2.0], [-3.0]), ValueError, "C_target"),
        (lambda: cod.predict_cod(np.zeros((5, 2)), [1, 2], [3], seed=-1), ValueError, "seed"),
        (lambda: cod.loss_route([1, 2, 3], [1, 1, 1], [0.1] * 4, [4]), ValueError, "equal"),
        (
            lambda: cod.loss_route([1, 2, 3], [1, 1, 1], [0.1] * 3, [4], (0, 0.5)),
            ValueError,
            "anchor\\[0\\]",
        ),
        (lambda: cod.gadre_loss_law([1e6], [20], 1, 1, "b", 1), TypeError, "b must be a real"),
        (lambda: cod.fit_gadre_loss([1.0, -2.0, 3.0, 4.0], [1] * 4, [1] * 4), ValueError, "N must"),
        (lambda: cod.fit_gadre_loss([1, 2, 3], [1] * 3, [1] * 3), ValueError, "at least 4"),
        (lambda: cod.error_vs_loss([1.0], 1, np.inf, 1), ValueError, "gamma must be finite"),
        (lambda: cod.fit_error_vs_loss([1.0, 2.0, 3.0], [0.5, 1.5, 0.2]), ValueError, "err must"),
        (lambda: cod.make_fact_benchmark(0, 2, 2, 1, 1.0, 0.0, 0), ValueError, "n_subjects"),
        (lambda: cod.make_fact_benchmark(2, 2, 2, 1, 1.0, 1.0, 0), ValueError, "mislabel_frac"),
        (lambda: cod.make_fact_benchmark(2, 2, 2, True, 1.0, 0.0, 0), TypeError, "ell_max"),
        (lambda: cod.make_fact_benchmark(2, 2, 2, 1, -1.0, 0.0, 0), ValueError, "zipf"),
        (lambda: cod.train_fact_models([B], 0, 1, 10, [0]), ValueError, "width must be >= 1"),
        (lambda: cod.train_fact_models([B], 4, 1, 10, [0, 1]), ValueError, "one seed per"),
        (lambda: cod.train_fact_models([], 4, 1, 10, []), TypeError, "benches must be"),
        (lambda: cod.train_fact_models([B], 4, 1, 10, [0], lr=2.0), ValueError, "lr must lie"),
        (lambda: cod.train_fact_models([B], 4, 1, 0, [0]), ValueError, "tokens_per_param"),
        (lambda: cod.sampled_pass_rates([0.5], 0, 0), ValueError, "n_samples must be >= 1"),
        (lambda: cod.sampled_pass_rates([0.5], 1.0, 0), TypeError, "n_samples must be an"),
        (lambda: cod.compare_methods(SMALL[:3], TARGET, ANCHOR, 100, 0), ValueError, ">= 4"),
        (lambda: cod.compare_methods(SMALL, TARGET, None, 100, 0), TypeError, "anchor must be"),
        (lambda: cod.compare_methods(SMALL, [1.0], ANCHOR, 100, 0), TypeError, "targets must"),
        (lambda: cod.silhouette_vs_shuffled(np.zeros((4, 2)), [0, 1]), ValueError, "labels"),
        (lambda: cod.gadre_task_cod([], ["a"], ["b"], ["c"]), TypeError, "runs must be a pandas"),
        (lambda: cod.gadre_task_cod(pd.DataFrame(), ["a"], ["b"], ["c"]), ValueError, "missing"),
    ],
)
def test_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_comparison_rejects_unknown_method():
    r = cod.compare_methods(SMALL, TARGET, ANCHOR, 100, 0)
    with pytest.raises(ValueError, match="method must be one of"):
        r.abs_error_pp("oracle")
