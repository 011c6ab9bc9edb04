"""Tests of lib.curation: closed forms, planted geometries, Monte Carlo moments, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from lib.curation import (
    FULL,
    Cell,
    Geometry,
    Rule,
    band_rule,
    critical_ratios,
    curation_constants,
    curation_gain,
    error_from_cos,
    fit_ridge,
    independent_errors,
    keep_mask,
    kept_moments,
    make_directions,
    matched_bands,
    mismatched_bands,
    predict_best_lambda,
    predict_collapse,
    predict_error,
    predict_tuned,
    simulate_cells,
    simulate_collapse,
    simulate_errors,
    simulate_oracle_relabel,
    simulate_replicates,
    tuned_cell,
)

GEO = independent_errors(0.9, 0.9)
RNG = np.random.default_rng(0)


@pytest.mark.parametrize("ratio", [2.0, 20.0])
def test_ols_no_pruning_matches_closed_form(ratio):
    # rho = 1, lambda -> 0, psi = d/n < 1: E = arctan(sqrt((pi/2 - 1) psi / (1 - psi))) / pi
    psi = 1 / ratio
    closed = math.atan(math.sqrt((math.pi / 2 - 1) * psi / (1 - psi))) / math.pi
    pred = predict_error(ratio * 100, 100, 1e-10, Geometry(1.0, 0.9, 0.9), FULL)
    assert pred.error == pytest.approx(closed, abs=1e-7)


def test_infinite_data_recovers_generator_error():
    pred = predict_error(1e10, 100, 1e-6, independent_errors(0.7, 0.9), FULL)
    assert pred.error == pytest.approx(math.acos(0.7) / math.pi, abs=1e-5)


@pytest.mark.parametrize("p_q", [0.2, 0.5, 0.9])
def test_constants_match_closed_forms(p_q):
    rho_g = 0.6
    s = math.sqrt(1 - rho_g**2)
    hard = Rule("keep_hard", p_q)
    a = hard.alpha
    c = curation_constants(hard, rho_g)
    assert c.p == pytest.approx(p_q, abs=1e-12)
    assert c.gamma == pytest.approx(p_q - 2 * a * norm.pdf(a), abs=1e-12)
    beta = math.sqrt(2 * (1 - rho_g**2) / math.pi) * (2 * norm.cdf(a / s) - 1)
    assert c.beta == pytest.approx(beta, abs=1e-12)
    easy = Rule("keep_easy", p_q)
    ce = curation_constants(easy, rho_g)
    assert ce.p == pytest.approx(p_q, abs=1e-12)
    assert ce.gamma == pytest.approx(p_q + 2 * easy.alpha * norm.pdf(easy.alpha), abs=1e-12)
    # keep-hard and keep-easy at complementary fractions add up to the full-data constants
    full = curation_constants(FULL, rho_g)
    comp = curation_constants(Rule("keep_easy", 1 - p_q), rho_g)
    assert c.beta_tilde + comp.beta_tilde == pytest.approx(full.beta_tilde, abs=1e-10)
    assert full.beta_tilde == pytest.approx(rho_g * math.sqrt(2 / math.pi), abs=1e-12)


@pytest.mark.parametrize(
    "rule",
    [
        Rule("keep_hard", 0.5, True),
        Rule("keep_easy", 0.3, True),
        Rule("keep_easy", 0.4),
        Rule("random", 0.5, True),
    ],
)
def test_kept_moments_match_monte_carlo(rule):
    rng = np.random.default_rng(0)
    rho_g, n = 0.7, 200_000
    gz = rng.standard_normal((n, 2))
    y = np.where(rho_g * gz[:, 0] + math.sqrt(1 - rho_g**2) * gz[:, 1] >= 0, 1.0, -1.0)
    keep = keep_mask(rule, gz[:, 0], y, rng)
    mom = kept_moments(rule, rho_g)
    assert mom.p == pytest.approx(keep.mean(), abs=4e-3)
    v, yk = gz[keep], y[keep]
    np.testing.assert_allclose(mom.M, v.T @ v / len(yk), atol=1.5e-2)
    np.testing.assert_allclose(mom.b, v.T @ yk / len(yk), atol=1e-2)


def test_directions_have_exact_alignments():
    geo = Geometry(0.8, 0.9, 0.85)
    w_star, w_g, w_o = make_directions(geo, 50, np.random.default_rng(1))
    assert np.linalg.norm(w_star) == pytest.approx(1.0)
    assert w_g @ w_star == pytest.approx(0.8)
    assert w_o @ w_star == pytest.approx(0.9)
    assert w_o @ w_g == pytest.approx(0.85)


@pytest.mark.parametrize("lams", [[0.1, 1.0], [0.01, 0.1, 1.0, 10.0]])
def test_fit_ridge_matches_direct_solve(lams):
    """Both paths (a direct solve for a few penalties, one eigendecomposition for a grid)."""
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((40, 5)), rng.standard_normal(40)
    keep = rng.random(40) < 0.6
    W = fit_ridge(X, y, keep, np.array(lams))
    D = np.diag(keep.astype(float))
    for w, lam in zip(W, lams, strict=True):
        direct = np.linalg.solve(X.T @ D @ X / 40 + lam * np.eye(5), X.T @ D @ y / 40)
        np.testing.assert_allclose(w, direct, atol=1e-10)


def test_simulation_agrees_with_theory():
    geo, rules = independent_errors(0.9, 0.95), (FULL, Rule("keep_easy", 0.4, True))
    cell = Cell(2000, geo, rules, (0.1, 0.1))
    sims = simulate_replicates([cell], 100, list(range(6)))[:, 0]  # (6 replicates, 2 rules)
    assert np.array_equal(sims[1], simulate_cells([cell], 100, 1)[0])
    for i, rule in enumerate(rules):
        mean, se = sims[:, i].mean(), sims[:, i].std(ddof=1) / math.sqrt(6)
        assert abs(mean - predict_error(2000, 100, 0.1, geo, rule).error) <= max(4 * se, 0.01)


def test_cells_use_each_rules_own_penalty():
    """A cell with penalties (a, b) gives what simulate_errors gives at a and at b."""
    rules, lams = (FULL, Rule("keep_hard", 0.5)), (0.05, 2.0)
    errors = simulate_cells([Cell(300, GEO, rules, lams)], 20, 7)[0]
    by_grid = simulate_errors(300, 20, list(lams), GEO, list(rules), [7, 0])
    np.testing.assert_allclose(errors, np.diagonal(by_grid), atol=1e-12)


def test_tuned_penalty_beats_a_grid():
    geo = independent_errors(1.0, 0.95)
    tuned, lam = predict_tuned(500, 100, geo, Rule("keep_hard", 0.5))
    grid, _ = predict_best_lambda(500, 100, (1e-3, 0.01, 0.1, 1.0, 10.0), geo,
                                  Rule("keep_hard", 0.5))  # fmt: skip
    assert tuned <= grid + 1e-9 and 1e-4 <= lam <= 100
    assert tuned == pytest.approx(predict_error(500, 100, lam, geo, Rule("keep_hard", 0.5)).error)
    assert tuned_cell(500, 100, geo, [FULL]).lams == (predict_tuned(500, 100, geo, FULL)[1],)


def test_critical_ratio_is_where_the_gain_changes_sign():
    geo, rule = independent_errors(1.0, 0.95), Rule("keep_hard", 0.5)
    (root,) = critical_ratios(100, geo, rule, np.geomspace(1, 100, 12))
    assert curation_gain(root, 100, geo, rule) == pytest.approx(0.0, abs=1e-6)
    assert curation_gain(root / 1.5, 100, geo, rule) > 0 > curation_gain(root * 1.5, 100, geo, rule)
    # Keep-easy at a weak generator (rho < rho*) wins at every size: no boundary.
    assert critical_ratios(100, independent_errors(0.8, 0.95), Rule("keep_easy", 0.5),
                           np.geomspace(1, 100, 6)) == ()  # fmt: skip


def test_collapse_without_curation_degrades_monotonically():
    theory = predict_collapse(1000, 100, 0.1, 0.95, 0.9, FULL, rounds=4)
    assert theory[0] == pytest.approx(math.acos(0.95) / math.pi)
    assert np.all(np.diff(theory) > 0)
    sim = simulate_collapse(1000, 100, 0.1, 0.95, 0.9, FULL, rounds=4, seed=0)
    assert sim.shape == (5,) and sim[0] == pytest.approx(theory[0])


def test_best_lambda_picks_the_grid_minimum():
    geo = independent_errors(1.0, 0.95)
    err, lam = predict_best_lambda(100, 100, (0.01, 0.1, 1.0), geo, FULL)
    errs = [predict_error(100, 100, x, geo, FULL).error for x in (0.01, 0.1, 1.0)]
    assert err == min(errs) and lam == (0.01, 0.1, 1.0)[int(np.argmin(errs))]


def test_one_band_from_zero_is_keep_hard():
    alpha = Rule("keep_hard", 0.4).alpha
    band, hard = band_rule((0.0, alpha)), Rule("keep_hard", 0.4)
    assert band.p_q == pytest.approx(0.4, abs=1e-12)
    assert curation_constants(band, 0.7) == pytest.approx(curation_constants(hard, 0.7))
    g = np.linspace(-3, 3, 601)
    assert np.array_equal(keep_mask(band, g, np.sign(g), RNG), keep_mask(hard, g, np.sign(g), RNG))


def test_bands_keep_what_their_edges_say():
    rule = band_rule((0.2, 0.5, 1.0, 1.5))
    g = np.array([0.1, 0.3, -0.3, 0.7, 1.2, -1.2, 1.8])
    assert keep_mask(rule, g, np.ones(7), RNG).tolist() == [0, 1, 1, 0, 1, 1, 0]
    kept = keep_mask(rule, RNG.standard_normal(400_000), np.ones(400_000), RNG).mean()
    assert kept == pytest.approx(rule.p_q, abs=3e-3)


def test_matched_bands_share_the_four_constants_but_not_the_shape():
    target = band_rule((0.3, 0.7, 1.1, 1.9))
    match = matched_bands(target, 0.95, 0.1, (0.5, 0.9, 1.3, 1.9))
    a, b = curation_constants(target, 0.95), curation_constants(match, 0.95)
    assert np.allclose([a.p, a.gamma, a.beta, a.beta_tilde],
                       [b.p, b.gamma, b.beta, b.beta_tilde], atol=1e-9)  # fmt: skip
    assert match.edges[:2] == (0.0, 0.1) and len(match.edges) == 6
    # same constants, so the same predicted error (Theorem 1 depends on the rule through them)
    geo = independent_errors(1.0, 0.95)
    assert predict_error(500, 100, 0.1, geo, match).error == pytest.approx(
        predict_error(500, 100, 0.1, geo, target).error, abs=1e-8
    )


def test_mismatched_bands_match_three_constants_and_miss_the_fourth():
    target = band_rule((0.3, 0.7, 1.1, 1.9))
    miss = mismatched_bands(target, 0.95, "gamma", 1.1, (0.1, 0.5, 0.9, 1.3, 1.9))
    a, b = curation_constants(target, 0.95), curation_constants(miss, 0.95)
    assert np.allclose([a.p, a.beta, a.beta_tilde], [b.p, b.beta, b.beta_tilde], atol=1e-9)
    assert b.gamma == pytest.approx(1.1 * a.gamma, rel=1e-9)
    assert miss.edges[0] == 0.0 and len(miss.edges) == 6


def test_oracle_relabel_reaches_the_oracle_error_with_abundant_data():
    # labels from w_o on 40 000 points in d = 20: the fit tends to w_o, error arccos(rho*)/pi
    errors = simulate_oracle_relabel(40_000, 20, 1e-6, 0.95, 0.9, 2, 0)
    assert errors[0] == pytest.approx(math.acos(0.95) / math.pi, abs=1e-12)
    assert errors[1:] == pytest.approx([math.acos(0.9) / math.pi] * 2, abs=0.01)


CELL = Cell(50, GEO, (FULL,), (0.1,))
X4, Y4, KEEP4 = np.ones((4, 2)), np.ones(4), np.ones(4, dtype=bool)

BAD_CALLS = [
    # (call, error, words the message must contain)
    (lambda: Rule("keep_medium", 0.5), ValueError, "kind must be one of"),
    (lambda: Rule("keep_hard", 1.5), ValueError, "p_q must lie in"),
    (lambda: Rule("keep_hard", float("nan")), ValueError, "p_q must be finite"),
    (lambda: Rule("keep_hard", True), TypeError, "p_q must be a real number"),
    (lambda: Rule("all", 0.5), ValueError, "p_q must be 1"),
    (lambda: Rule("keep_hard", 0.5, 1), TypeError, "label_aware must be True or False"),
    (lambda: Rule("bands", 0.5), ValueError, "edges go with kind='bands' only"),
    (lambda: Rule("keep_hard", 0.5, False, (0.1, 0.2)), ValueError, "edges go with"),
    (lambda: Rule("bands", 0.5, False, (0.1, 0.2)), ValueError, "not the mass of bands"),
    (lambda: band_rule((0.5, 0.2)), ValueError, "even number of increasing margins"),
    (lambda: band_rule((0.1, 0.2, 0.3)), ValueError, "even number of increasing margins"),
    (lambda: band_rule((0.1, math.inf)), ValueError, "edges contains NaN or inf"),
    (lambda: matched_bands(FULL, 0.9, 0.1, (0.5, 0.9, 1.3)), ValueError, "4 increasing edges"),
    (lambda: matched_bands(FULL, 0.9, 0.6, (0.5, 0.9, 1.3, 2)), ValueError, "above core"),
    (lambda: matched_bands(Rule("keep_hard", 0.5), 0.95, 0.1, (0.5, 0.9, 1.3, 1.9)), ValueError,
     "no rule"),
    (lambda: matched_bands(FULL, 0.95, 0.1, (0.5, 0.9, 1.3, 1.9)), ValueError, "no rule"),
    (lambda: mismatched_bands(FULL, 0.95, "delta", 1.1, (0.1, 0.5, 0.9, 1.3, 1.9)), ValueError,
     "constant must be one of"),
    (lambda: mismatched_bands(FULL, 0.95, "p", 1.1, (0.1, 0.5, 0.9, 1.3)), ValueError,
     "5 increasing edges"),
    (lambda: mismatched_bands(FULL, 0.95, "p", 1.1, (0.1, 0.5, 0.9, 1.3, 1.9)), ValueError,
     "no rule of three bands"),
    (lambda: Geometry(0.9, 1.0, 0.9), ValueError, "rho_star must lie in"),
    (lambda: Geometry("0.9", 0.9, 0.9), TypeError, "rho must be a real number"),
    (lambda: Geometry(0.0, 0.99, 0.99), ValueError, "not realisable"),
    (lambda: independent_errors(1.2, 0.9), ValueError, "rho must lie in"),
    (lambda: curation_constants(FULL, float("nan")), ValueError, "rho_g must be finite"),
    (lambda: curation_constants("all", 0.5), TypeError, "rule must be a Rule"),
    (lambda: kept_moments(FULL, 1.0), ValueError, "rho_g must lie in"),
    (lambda: predict_error(100, 10, 0.0, GEO, FULL), ValueError, "lam must lie in"),
    (lambda: predict_error(-5, 10, 0.1, GEO, FULL), ValueError, "n must lie in"),
    (lambda: predict_error(100, 10.0, 0.1, GEO, FULL), TypeError, "d must be an integer"),
    (lambda: predict_error(100, True, 0.1, GEO, FULL), TypeError, "d must be an integer"),
    (lambda: predict_error(100, 10, 0.1, (0.9, 0.9, 0.81), FULL), TypeError, "geometry must be"),
    (lambda: predict_error(math.inf, 10, 0.1, GEO, FULL), ValueError, "n must be finite"),
    (lambda: predict_best_lambda(100, 10, (), GEO, FULL), ValueError, "lams is empty"),
    (lambda: predict_best_lambda(100, 10, (0.1, -1), GEO, FULL), ValueError, "lams must be > 0"),
    (lambda: predict_tuned(100, 2, GEO, FULL), ValueError, "d must be >= 3"),
    (lambda: curation_gain(0.0, 10, GEO, FULL), ValueError, "ratio must lie in"),
    (lambda: curation_gain(5.0, "10", GEO, FULL), TypeError, "d must be an integer"),
    (lambda: tuned_cell(100, 10, GEO, FULL), ValueError, "rules must be a non-empty list"),
    (lambda: critical_ratios(10, GEO, FULL, [1.0]), ValueError, "grid has 1 entries"),
    (lambda: critical_ratios(10, GEO, FULL, [5.0, 1.0]), ValueError, "grid must be increasing"),
    (lambda: predict_collapse(100, 10, 0.1, 0.9, 0.9, FULL, 0), ValueError, "rounds must be >= 1"),
    (lambda: predict_collapse(100, 10, 0.1, 0.9, 0.9, FULL, 2.0), TypeError, "rounds must be"),
    (lambda: make_directions(GEO, 2, RNG), ValueError, "d must be >= 3"),
    (lambda: make_directions(GEO, 5, 0), TypeError, "rng must be a Generator"),
    (lambda: error_from_cos(1.5), ValueError, "cos must be cosines"),
    (lambda: error_from_cos(np.nan), ValueError, "cos contains NaN"),
    (lambda: keep_mask(FULL, np.ones(3), np.ones(4), RNG), ValueError, "equal lengths"),
    (lambda: keep_mask(FULL, "abc", np.ones(3), RNG), TypeError, "g must be an array"),
    (lambda: fit_ridge(X4, Y4, KEEP4, [-1.0]), ValueError, "lams must be > 0"),
    (lambda: fit_ridge(X4, Y4, np.ones(4), [0.1]), TypeError, "keep must be a boolean"),
    (lambda: fit_ridge(X4, np.ones(3), KEEP4[:3], [0.1]), ValueError, "one label per row"),
    (lambda: fit_ridge(np.ones(4), Y4, KEEP4, [0.1]), ValueError, "X must be a 2-D array"),
    (lambda: simulate_errors(100, 10, [0.1], GEO, [], 0), ValueError, "rules must be"),
    (lambda: simulate_errors(100, 10, [0.1], GEO, [FULL], -1), ValueError, "seed must be >= 0"),
    (lambda: simulate_errors(10.5, 10, [0.1], GEO, [FULL], 0), TypeError, "n must be an integer"),
    (lambda: Cell(50, GEO, (FULL,), (0.1, 0.2)), ValueError, "one penalty per rule"),
    (lambda: Cell(50, GEO, ("all",), (0.1,)), TypeError, "rules[0] must be a Rule"),
    (lambda: simulate_cells([CELL], 10, 1.5), TypeError, "seed must be an integer"),
    (lambda: simulate_cells([GEO], 10, 0), TypeError, "cells[0] must be a Cell"),
    (lambda: simulate_replicates([CELL], 10, 3), ValueError, "seeds must be a non-empty list"),
    (lambda: simulate_replicates([CELL, Cell(50, GEO, (FULL, FULL), (0.1, 0.1))], 10, [0]),
     ValueError, "same number of rules"),
    (lambda: simulate_collapse(100, 10, 0.1, 0.9, 0.9, FULL, 2, True), TypeError, "seed must be"),
    (lambda: simulate_collapse(100, 10, float("nan"), 0.9, 0.9, FULL, 2, 0), ValueError, "lam"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "error", "message"), BAD_CALLS)
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        call()
