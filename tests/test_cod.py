"""lib.cod: Eq. (4), MeanShift, Lemma 1, the maps, the pipeline and rivals, the toy, bad input."""

import numpy as np
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


def test_rival_maps_on_known_points():
    xs, ys = [0.2, 0.4, 0.6], [0.1, 0.3, 0.5]  # full = subset - 0.1 on the small models
    assert cod.apply_mapping(xs, ys, [0.8], "linear")[0] == pytest.approx(0.7)
    assert cod.apply_mapping(xs, ys, [0.8], "isotonic")[0] == pytest.approx(0.5)  # flat beyond
    assert cod.apply_mapping(xs, ys, [1.0], "monotone")[0] == pytest.approx(1.0)  # pinned
    assert cod.apply_mapping(xs, ys, [0.4], "monotone")[0] == pytest.approx(0.3)
    assert cod.apply_mapping(xs, [0.9, 0.95, 1.0], [1.0], "linear")[0] == 1.0  # clipped


def planted_clusters(C: np.ndarray) -> np.ndarray:
    """80 items on two Eq. (4) curves (40 each, tiny noise) and 10 zero-performance items."""
    easy, hard = cod.cod_law(C, 0, 2.0, 1.0, 0.1), cod.cod_law(C, 0, 6.0, 1.0, 0.2)
    P = np.concatenate([np.tile(easy, (40, 1)), np.tile(hard, (40, 1)), np.zeros((10, len(C)))])
    P = np.clip(P + np.random.default_rng(2).normal(0, 0.005, P.shape), 0, 1)
    P[-10:] = 0.0
    return P


def test_predict_cod_on_planted_clusters():
    C = np.geomspace(1, 16, 7)
    P = planted_clusters(C)
    res = cod.predict_cod(P, C, [64.0])
    assert res.kept.sum() == 2 and not res.subset_mask[-10:].any()
    assert 0.5 < res.subset_share() <= 80 / 90  # members farther than R stay unclustered
    want = (cod.cod_law([64.0], 0, 2, 1, 0.1) + cod.cod_law([64.0], 0, 6, 1, 0.2))[0] / 2
    assert res.subset_pred[0] == pytest.approx(want, abs=0.02)
    # the mapping through the small models' (subset, full) points: 80 of 90 items in the subset
    assert res.full_pred(P)[0] == pytest.approx(want * 80 / 90, abs=0.03)
    # weights: the hard items count three times; the subset law leans towards them
    w = np.r_[np.ones(40), 3 * np.ones(40), np.ones(10)]
    heavy = cod.predict_cod(P, C, [64.0], weights=w)
    assert heavy.subset_pred[0] == pytest.approx(
        (cod.cod_law([64.0], 0, 2, 1, 0.1) + 3 * cod.cod_law([64.0], 0, 6, 1, 0.2))[0] / 4,
        abs=0.02,
    )


def test_random_clusters_and_one_group_keep_the_shapes():
    C = np.geomspace(1, 16, 7)
    P = planted_clusters(C)
    res = cod.predict_cod(P, C, [64.0])
    active = P.max(axis=1) > 0
    shuffled = cod.random_clusters(res.clustering, active, seed=0)
    assert np.all(shuffled.labels[~active] == -1)
    assert np.array_equal(np.bincount(shuffled.labels + 1), np.bincount(res.clustering.labels + 1))
    assert not np.array_equal(shuffled.labels, res.clustering.labels)
    one = cod.extrapolate_clusters(P, C, [64.0], cod.one_group(active), rule=False)
    assert one.kept.tolist() == [True] and one.subset_mask.sum() == 80


def test_linear_in_log_compute_recovers_a_planted_line_and_clips():
    C = np.array([1.0, 10.0, 100.0])
    acc = 0.1 + 0.05 * np.log10(C)
    np.testing.assert_allclose(cod.linear_in_log_compute(C, acc, [1e3, 1e4]), [0.25, 0.30])
    steep = 0.3 + 0.3 * np.log10(C)  # 0.3, 0.6, 0.9: the line passes 1 before C = 1e3
    assert cod.linear_in_log_compute(C, steep, 1e3)[0] == 1.0


def test_steady_items_drop_what_falls_between_adjacent_models():
    P = np.array([
        [0.1, 0.2, 0.3, 0.4],  # rises: kept
        [0.5, 0.47, 0.6, 0.7],  # falls by 3 pp: kept
        [0.5, 0.3, 0.6, 0.7],  # falls by 20 pp: dropped
        [0.0, 0.0, 0.0, 0.0],  # never answered: not active, dropped
    ])  # fmt: skip
    assert cod.steady_items(P).tolist() == [True, True, False, False]
    assert cod.steady_items(P, max_drop=0.25).tolist() == [True, True, True, False]


def test_world_items_follow_theorem_1():
    config = cod.WorldConfig((0.5, 0.2, 0.2, 0.1), (0.0, 2.0), (0.5, 0.5), (2.0, 2.0), 0.0,
                             (-1.0, -1.0), 1.0, 0.0, 0.0, 0.3, (1.0, 2.0, 0.5), 0.0)  # fmt: skip
    world = cod.make_item_world(4000, config, seed=0)
    shares = np.bincount(world.kind, minlength=4) / 4000
    assert shares == pytest.approx([0.5, 0.2, 0.2, 0.1], abs=0.03)
    assert np.all(world.beta[world.kind == 1] == 2.0) and np.all(world.gamma == 0.0)
    m = cod.evaluate_model(world, log_C=1.0, seed=1)
    at_threshold = cod.evaluate_model(world, log_C=1.0, seed=1).P  # deterministic per seed
    np.testing.assert_array_equal(m.P, at_threshold)
    growing = world.kind <= 1  # no noise: p = exp(-ln2 10^(-beta (logC - logC*)))
    want = np.exp(-np.log(2) * 10.0 ** (-world.beta * (1.0 - world.log_threshold)))
    np.testing.assert_allclose(m.P[growing], want[growing], rtol=1e-12)
    assert np.all(m.P[world.kind == 3] == 0.0) and m.L == pytest.approx(1.0 + 2.0 * 10**-0.5)
    noisy = world.kind == 2
    assert 0.1 < m.P[noisy].mean() < 0.4 and m.P[noisy].std() > 0.05  # wobbles around e^-1
    shift = cod.family_offsets(world, seed=3)
    assert shift.shape == (4000,) and shift.std() == pytest.approx(0.3, rel=0.1)
    other = cod.evaluate_model(world, 1.0, seed=1, family=shift)
    assert not np.allclose(other.P[growing], m.P[growing])


WORLD = cod.WorldConfig((0.6, 0.2, 0.15, 0.05), (-1.0, 5.0), (0.3, 0.9), (1.5, 3.0), 0.4,
                        (-3.0, 0.0), 1.0, 0.1, 0.05, 0.3, (1.7, 1.5, 0.1), 0.003)  # fmt: skip
LOG_C = np.linspace(0.0, 3.0, 6)


def test_run_toy_is_reproducible_and_refuses_leaks():
    a = cod.run_toy(WORLD, 400, LOG_C, 4.0, 3.5, 100, seed=7)
    b = cod.run_toy(WORLD, 400, LOG_C, 4.0, 3.5, 100, seed=7)
    assert a.comparison.pred == b.comparison.pred
    assert a.features.shape == (400, 6)
    np.testing.assert_allclose(a.features * 100, np.round(a.features * 100), atol=1e-9)
    r = a.comparison
    assert {"COD", "direct fit + anchor", "loss route", "no clustering", "random clusters",
            "COD, linear map + anchor", "carry over", "linear mean", "linear mean + anchor",
            "random clusters, second draw"} <= set(r.pred)  # fmt: skip
    assert r.truth == pytest.approx(a.target.P.mean())
    assert np.isfinite(r.subset_error_pp()) == r.cod.predicted
    with pytest.raises(ValueError, match="leaks the answer"):
        cod.run_toy(WORLD, 400, LOG_C, 4.0, 4.0, 100, seed=7)  # anchor at the target
    with pytest.raises(ValueError, match="method must be one of"):
        r.abs_error_pp("oracle")


def test_compare_methods_on_planted_clusters():
    C = np.geomspace(1, 16, 7)
    P = planted_clusters(C)
    truth = planted_clusters(np.array([64.0]))[:, 0]
    r = cod.compare_methods(P, C, 64.0, truth, L=2 + 3 * C**-0.5, seed=0)
    assert r.cod.predicted and r.abs_error_pp("COD") < 3.0  # clean clusters: COD is close
    assert r.abs_error_pp("COD, no mapping") > 5.0  # 10 zero items: the subset is easier
    assert abs(r.subset_error_pp()) < 2.0


# ----------------------------------------------------------------------------- bad input
P4 = np.full((5, 4), 0.5)


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
        (lambda: cod.apply_mapping([0.5], [0.5], [0.5], "cubic"), ValueError, "how must be one"),
        (lambda: cod.apply_mapping([0.5] * 2, [0.5, 0.6], [0.5], "linear"), ValueError, "distinct"),
        (lambda: cod.predict_cod(np.zeros((5, 3)), [1.0, 2.0], [3.0]), ValueError, "one C per"),
        (lambda: cod.predict_cod(np.zeros((5, 2)), [1.0, 2.0], [-3.0]), ValueError, "C_target"),
        (lambda: cod.predict_cod(np.zeros((5, 2)), [1, 2], [3], seed=-1), ValueError, "seed"),
        (lambda: cod.predict_cod(P4, [1, 2, 3, 4], [5], weights=[1] * 4), ValueError, "weights"),
        (lambda: cod.predict_cod(P4, [1, 2, 3, 4], [5], weights=[-1] * 5), ValueError, "weights"),
        (lambda: cod.random_clusters(cod.one_group([True] * 5), [True], 0), ValueError, "active"),
        (lambda: cod.loss_route([1, 2, 3], [1, 1, 1], [0.1] * 4, [4]), ValueError, "equal"),
        (
            lambda: cod.loss_route([1, 2, 3], [1, 1, 1], [0.1] * 3, [4], (0, 0.5)),
            ValueError,
            "anchor\\[0\\]",
        ),
        (
            lambda: cod.linear_in_log_compute([1, 2], [0.1, 0.2, 0.3], [4]),
            ValueError,
            "equal lengths",
        ),
        (lambda: cod.steady_items(np.full((3, 1), 0.5)), ValueError, "at least 2 models"),
        (lambda: cod.steady_items(P4, max_drop=-0.1), ValueError, "max_drop must lie in"),
        (lambda: cod.gadre_loss_law([1e6], [20], 1, 1, "b", 1), TypeError, "b must be a real"),
        (lambda: cod.fit_gadre_loss([1.0, -2.0, 3.0, 4.0], [1] * 4, [1] * 4), ValueError, "N must"),
        (lambda: cod.fit_gadre_loss([1, 2, 3], [1] * 3, [1] * 3), ValueError, "at least 4"),
        (lambda: cod.error_vs_loss([1.0], 1, np.inf, 1), ValueError, "gamma must be finite"),
        (lambda: cod.fit_error_vs_loss([1.0, 2.0, 3.0], [0.5, 1.5, 0.2]), ValueError, "err must"),
        (lambda: cod.make_item_world(0, WORLD, 0), ValueError, "n_items must be >= 1"),
        (lambda: cod.make_item_world(5, "world", 0), TypeError, "config must be a WorldConfig"),
        (
            lambda: cod.make_item_world(
                5, cod.WorldConfig(**{**WORLD.__dict__, "fractions": (0.5, 0.5, 0.5, 0)}), 0
            ),
            ValueError,
            "summing to 1",
        ),  # fmt: skip
        (lambda: cod.evaluate_model("w", 1.0, 0), TypeError, "world must be an ItemWorld"),
        (
            lambda: cod.evaluate_model(cod.make_item_world(5, WORLD, 0), 1.0, 0, family=[0.0]),
            ValueError,
            "equal lengths",
        ),
        (lambda: cod.sampled_pass_rates([0.5], 0, 0), ValueError, "n_samples must be >= 1"),
        (lambda: cod.sampled_pass_rates([0.5], 1.0, 0), TypeError, "n_samples must be an"),
        (lambda: cod.compare_methods(P4, [1, 2, 3, 4], 4.0, [0.5] * 5), ValueError, "leaks"),
        (lambda: cod.compare_methods(P4, [1, 2, 3, 4], 9.0, [1.5] * 5), ValueError, "target_P"),
        (lambda: cod.silhouette_vs_shuffled(np.zeros((4, 2)), [0, 1]), ValueError, "labels"),
    ],
)
def test_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()
