"""lib.cod: Eq. (4), the improved MeanShift, Lemma 1, the mapping and the toy benchmark."""

import numpy as np
import pytest

from lib import cod


def test_cod_law_limits():
    C = np.array([1e-6, 1.0, 1e9])
    y = cod.cod_law(C, g=0.25, a=2.0, b=0.5, c=0.3)
    assert y[0] == pytest.approx(0.25, abs=1e-9)  # tiny compute: chance level g
    assert y[1] == pytest.approx(0.25 + 0.75 * np.exp(-2.3))
    assert y[2] == pytest.approx(0.25 + 0.75 * np.exp(-0.3), abs=1e-3)  # ceiling g+(1-g)e^-c


def test_fit_cod_law_recovers_planted_curve_and_applies_rule():
    C = np.geomspace(1, 20, 8)
    y = cod.cod_law(C, 0.0, 3.0, 0.8, 0.2)
    fit = cod.fit_cod_law(C, y)
    assert fit.rmse < 1e-3
    assert fit.predict([60.0])[0] == pytest.approx(cod.cod_law([60.0], 0, 3, 0.8, 0.2)[0], abs=0.01)
    assert fit.extrapolatable  # a = 3 > 1, b = 0.8 > 0.1, c = 0.2 in [0, 1)
    assert not cod.CodLawFit(0.0, 0.5, 0.8, 0.2, 0.0).extrapolatable  # a <= 1
    assert not cod.CodLawFit(0.0, 3.0, 0.8, 1.5, 0.0).extrapolatable  # c >= 1


def test_am_gm_gap_matches_lemma_1():
    p = np.exp(np.random.default_rng(0).normal(np.log(0.3), 0.05, 20_000))
    gap = cod.am_gm_gap(p) * p.mean()
    assert gap == pytest.approx(p.var() / (2 * p.mean()), rel=0.05)
    assert cod.am_gm_gap(np.full(5, 0.4)) == pytest.approx(0.0, abs=1e-12)


def test_improved_meanshift_recovers_blobs_and_keeps_invariants():
    rng = np.random.default_rng(1)
    centres = np.array([[0.1] * 4, [0.5] * 4, [0.9] * 4])
    X = np.clip(np.concatenate([c + rng.normal(0, 0.02, (60, 4)) for c in centres]), 0, 1)
    X = np.concatenate([X, np.full((3, 4), [0.3, 0.7, 0.3, 0.7])])  # 3 stragglers: < K items
    cl = cod.improved_meanshift(X, K=10)
    assert cl.n_clusters == 3
    assert np.all(cl.labels[-3:] == -1)
    for k in range(cl.n_clusters):
        members = X[cl.labels == k]
        assert len(members) >= 10
        assert np.all(np.linalg.norm(members - cl.centers[k], axis=1) <= cl.bandwidth + 1e-9)
    for blob in (cl.labels[:60], cl.labels[60:120], cl.labels[120:180]):
        assert len(set(blob[blob >= 0])) == 1  # one blob, one label
        assert np.mean(blob >= 0) >= 0.5  # members farther than R (tight, Q = 0.1) are reset


def test_mapping_is_monotone_and_pinned():
    f = cod.fit_mapping([0.2, 0.4, 0.41, 0.6], [0.1, 0.3, 0.29, 0.5])  # one non-monotone pair
    s = np.linspace(0, 1, 101)
    y = f(s)
    assert y[0] == pytest.approx(0.0) and y[-1] == pytest.approx(1.0)
    assert np.all(np.diff(y) >= -1e-12) and y.min() >= 0 and y.max() <= 1
    assert f([0.2])[0] == pytest.approx(0.1)


def test_predict_cod_on_planted_clusters():
    C = np.geomspace(1, 10, 7)
    easy = cod.cod_law(C, 0, 2.0, 1.0, 0.1)
    hard = cod.cod_law(C, 0, 6.0, 1.0, 0.2)
    P = np.concatenate([np.tile(easy, (40, 1)), np.tile(hard, (40, 1)), np.zeros((10, 7))])
    P = np.clip(P + np.random.default_rng(2).normal(0, 0.005, P.shape), 0, 1)
    P[-10:] = 0.0  # zero-performance items are dropped before clustering
    res = cod.predict_cod(P, C, [20.0])
    assert res.kept.sum() == 2 and not res.subset_mask[-10:].any()
    want = (cod.cod_law([20.0], 0, 2, 1, 0.1) + cod.cod_law([20.0], 0, 6, 1, 0.2))[0] / 2
    assert res.subset_pred[0] == pytest.approx(want, abs=0.02)


def test_fact_benchmark_and_binomial_rates():
    b = cod.make_fact_benchmark(4, 5, 6, 3, zipf=1.0, mislabel_frac=0.5, seed=0)
    assert b.rows.shape == (20, 5) and b.freq.sum() == pytest.approx(1.0)
    pad = b.vocab_size - 1
    assert np.all((b.rows[:, 2:] != pad).sum(axis=1) == b.ell)
    assert np.all(b.key[~b.mislabelled] == b.rows[~b.mislabelled])
    r = cod.binomial_pass_rates(np.array([0.0, 1.0, 0.5]), 100, seed=0)
    assert r[0] == 0 and r[1] == 1 and 0.3 < r[2] < 0.7


def test_silhouette_beats_shuffled_control_on_blobs():
    rng = np.random.default_rng(3)
    X = np.clip(np.concatenate([rng.normal(m, 0.02, (50, 3)) for m in (0.2, 0.8)]), 0, 1)
    ours, control = cod.silhouette_vs_shuffled(X, np.repeat([0, 1], 50), seed=0)
    assert ours > 0.8 and control < ours


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: cod.cod_law([0.0, 1.0], 0, 1, 1, 0), "C"),
        (lambda: cod.fit_cod_law([1, 2, 3], [0.1, 0.2, 0.3]), "length"),
        (lambda: cod.fit_cod_law([1, 2, 3, 4], [0.1, 0.2, 1.3, 0.4]), "y"),
        (lambda: cod.improved_meanshift(np.full((20, 2), 0.5), K=0), "K"),
        (lambda: cod.improved_meanshift(np.full((20, 2), 2.0)), "X"),
        (lambda: cod.am_gm_gap([0.1, np.nan]), "p"),
        (lambda: cod.fit_mapping([0.1, 0.2], [0.1]), "match"),
        (lambda: cod.make_fact_benchmark(0, 2, 2, 1, 1.0, 0.0, 0), "n_subjects"),
        (lambda: cod.binomial_pass_rates([0.5], 0, 0), "n_samples"),
        (lambda: cod.predict_cod(np.zeros((5, 3)), [1.0, 2.0], [3.0]), "models"),
    ],
)
def test_bad_inputs_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()
