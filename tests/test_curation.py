"""Tests of lib.curation: closed forms, planted geometries, Monte Carlo moments, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from lib.curation import (
    Geometry,
    Rule,
    curation_constants,
    error_from_cos,
    fit_ridge,
    independent_errors,
    keep_mask,
    kept_moments,
    make_directions,
    predict_best_lambda,
    predict_collapse,
    predict_error,
    simulate_collapse,
    simulate_errors,
    simulate_seeds,
)


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """Small solves run several times faster on one BLAS thread on a shared 2-core machine."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


@pytest.mark.parametrize("ratio", [2.0, 20.0])
def test_ols_no_pruning_matches_closed_form(ratio):
    # rho = 1, lambda -> 0, psi = d/n < 1: E = arctan(sqrt((pi/2 - 1) psi / (1 - psi))) / pi
    psi = 1 / ratio
    closed = math.atan(math.sqrt((math.pi / 2 - 1) * psi / (1 - psi))) / math.pi
    pred = predict_error(ratio * 100, 100, 1e-10, Geometry(1.0, 0.9, 0.9), Rule("all"))
    assert pred.error == pytest.approx(closed, abs=1e-7)


def test_infinite_data_recovers_generator_error():
    pred = predict_error(1e10, 100, 1e-6, independent_errors(0.7, 0.9), Rule("all"))
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
    full = curation_constants(Rule("all"), rho_g)
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


def test_fit_ridge_matches_direct_solve():
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((40, 5)), rng.standard_normal(40)
    keep = rng.random(40) < 0.6
    W = fit_ridge(X, y, keep, np.array([0.1, 1.0]))
    D = np.diag(keep.astype(float))
    for w, lam in zip(W, [0.1, 1.0], strict=True):
        direct = np.linalg.solve(X.T @ D @ X / 40 + lam * np.eye(5), X.T @ D @ y / 40)
        np.testing.assert_allclose(w, direct, atol=1e-10)


def test_simulation_agrees_with_theory():
    geo, rules = independent_errors(0.9, 0.95), [Rule("all"), Rule("keep_easy", 0.4, True)]
    sims = simulate_seeds(2000, 100, [0.1], geo, rules, 6, (3,))
    assert np.array_equal(sims[1], simulate_errors(2000, 100, [0.1], geo, rules, [3, 1]))
    for i, rule in enumerate(rules):
        mean, se = sims[:, i, 0].mean(), sims[:, i, 0].std(ddof=1) / math.sqrt(6)
        assert abs(mean - predict_error(2000, 100, 0.1, geo, rule).error) <= max(4 * se, 0.01)


def test_collapse_without_curation_degrades_monotonically():
    theory = predict_collapse(1000, 100, 0.1, 0.95, 0.9, Rule("all"), rounds=4)
    assert theory[0] == pytest.approx(math.acos(0.95) / math.pi)
    assert np.all(np.diff(theory) > 0)
    sim = simulate_collapse(1000, 100, 0.1, 0.95, 0.9, Rule("all"), rounds=4, seed=0)
    assert sim.shape == (5,) and sim[0] == pytest.approx(theory[0])


def test_best_lambda_picks_the_grid_minimum():
    geo = independent_errors(1.0, 0.95)
    err, lam = predict_best_lambda(100, 100, (0.01, 0.1, 1.0), geo, Rule("all"))
    errs = [predict_error(100, 100, x, geo, Rule("all")).error for x in (0.01, 0.1, 1.0)]
    assert err == min(errs) and lam == (0.01, 0.1, 1.0)[int(np.argmin(errs))]


def test_invalid_inputs_raise():
    with pytest.raises(ValueError, match="kind"):
        Rule("keep_medium", 0.5)
    with pytest.raises(ValueError, match="p_q"):
        Rule("keep_hard", 1.5)
    with pytest.raises(ValueError, match="p_q"):
        Rule("all", 0.5)
    with pytest.raises(ValueError, match="rho_star"):
        Geometry(0.9, 1.0, 0.9)
    with pytest.raises(ValueError, match="not realisable"):
        Geometry(0.0, 0.99, 0.99)
    with pytest.raises(ValueError, match="rho_g"):
        curation_constants(Rule("all"), float("nan"))
    with pytest.raises(ValueError, match="lam"):
        predict_error(100, 10, 0.0, independent_errors(0.9, 0.9), Rule("all"))
    with pytest.raises(ValueError, match="n="):
        predict_error(-5, 10, 0.1, independent_errors(0.9, 0.9), Rule("all"))
    with pytest.raises(ValueError, match="d="):
        make_directions(independent_errors(0.9, 0.9), 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="cos"):
        error_from_cos(1.5)
    with pytest.raises(ValueError, match="rounds"):
        predict_collapse(100, 10, 0.1, 0.9, 0.9, Rule("all"), rounds=0)
    with pytest.raises(ValueError, match="lams"):
        fit_ridge(np.ones((4, 2)), np.ones(4), np.ones(4, dtype=bool), np.array([-1.0]))
    with pytest.raises(ValueError, match="g and y"):
        keep_mask(Rule("all"), np.ones(3), np.ones(4), np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_seeds"):
        simulate_seeds(100, 10, [0.1], independent_errors(0.9, 0.9), [Rule("all")], 1, (0,))
    with pytest.raises(ValueError, match="lams"):
        predict_best_lambda(100, 10, (), independent_errors(0.9, 0.9), Rule("all"))
