"""Tests of lib.sgd_limits: closed forms, quadrature vs Monte Carlo, simulators vs the ODEs."""

from __future__ import annotations

import math

import numpy as np
import pytest

import lib.sgd_limits as S


def test_tensor_noise_covariance_matches_explicit_tensor_contraction():
    """grad_x <W, x^{(x)3}> has covariance k I + k(k-1) x x^T (the simulator's shortcut)."""
    rng = np.random.default_rng(0)
    N, k, n = 8, 3, 20000
    x = rng.standard_normal(N)
    x /= np.linalg.norm(x)
    W = rng.standard_normal((n, N, N, N))
    Z = (np.einsum("sabc,b,c->sa", W, x, x) + np.einsum("sabc,a,c->sb", W, x, x)
         + np.einsum("sabc,a,b->sc", W, x, x))  # fmt: skip
    expected = k * np.eye(N) + k * (k - 1) * np.outer(x, x)
    assert np.abs(np.cov(Z.T) - expected).max() < 0.25


def test_k3_fixed_points_match_cubic_roots():
    np.testing.assert_allclose(S.tensor_pca_fixed_points(3, 2.0, 0.4), [0.1010, 0.9456], atol=1e-3)
    np.testing.assert_allclose(S.tensor_pca_fixed_points(3, 2.0, 0.8), [0.2091, 0.8789], atol=1e-3)
    threshold = 4 * 2.0 / (3 * math.sqrt(3))  # no recovery above 4 lam / 3^{3/2}
    assert len(S.tensor_pca_fixed_points(3, 2.0, threshold * 0.99)) == 2
    assert len(S.tensor_pca_fixed_points(3, 2.0, threshold * 1.01)) == 0
    for m in S.tensor_pca_fixed_points(3, 2.0, 1.4):
        assert abs(S.tensor_pca_drift(m, 3, 2.0, 1.4)) < 1e-12


def test_k2_fixed_point_and_logistic_closed_form_match_ode():
    (m_star,) = S.tensor_pca_fixed_points(2, 1.0, 1.2)
    assert m_star == pytest.approx(math.sqrt(1 - 1.2 / 2))
    assert len(S.tensor_pca_fixed_points(2, 1.0, 2.4)) == 0
    s = np.linspace(0, 6, 31)
    for c_eff in (0.6, 1.2, 2.0, 2.4):
        ode = S.solve_tensor_pca_ode(2, 1.0, c_eff, 0.3, s)
        np.testing.assert_allclose(S.overlap_k2(s, 1.0, c_eff, 0.3), ode, atol=1e-6)


def test_linear_link_quadrature_matches_closed_forms():
    m, R, sigma, c = 0.3, 1.2, 0.5, 1.3
    e = R - 2 * m + 1
    dm, dR = S.single_index_drift(m, R, "linear", sigma, c)
    assert dR - 2 * dm == pytest.approx(-(2 * c - c**2) * e + c**2 * sigma**2, abs=1e-9)
    dm, dR = S.single_index_drift(m, R, "linear", sigma, c, normalized=True)
    assert dm == pytest.approx(c * math.sqrt(2 / math.pi) * (1 - m) / math.sqrt(e + sigma**2))
    e_star = S.linear_error_fixed_point(3.0, sigma, normalized=True)
    assert S.single_index_fixed_point("linear", sigma, 3.0, True)[1] == pytest.approx(1 + e_star)
    assert S.linear_error_fixed_point(1.0, sigma) == pytest.approx(sigma**2)
    assert S.linear_error_fixed_point(2.0, sigma) == math.inf
    c_x = S.linear_crossover(sigma)
    assert 1.6 < c_x < 1.8
    assert S.linear_error_fixed_point(c_x, sigma) == pytest.approx(
        S.linear_error_fixed_point(c_x, sigma, True)
    )


@pytest.mark.parametrize("link", ["relu", "tanh"])
def test_quadrature_matches_monte_carlo(link):
    rng = np.random.default_rng(1)
    m, R, sigma, c, n = 0.4, 1.5, 0.5, 1.0, 400_000
    lv = rng.standard_normal(n)
    lx = m * lv + math.sqrt(R - m**2) * rng.standard_normal(n)
    f, fp = S._numpy_link(link)
    g = (f(lx) - f(lv) - sigma * rng.standard_normal(n)) * fp(lx)
    dm, dR = S.single_index_drift(m, R, link, sigma, c)
    assert dm == pytest.approx(-c * np.mean(g * lv), abs=5e-3)
    assert dR == pytest.approx(-2 * c * np.mean(g * lx) + c**2 * np.mean(g**2), abs=2e-2)
    dm, dR = S.single_index_drift(m, R, link, sigma, c, normalized=True)
    assert dm == pytest.approx(-c * np.mean(np.sign(g) * lv), abs=5e-3)
    assert dR == pytest.approx(-2 * c * np.mean(np.sign(g) * lx) + c**2 * np.mean(g != 0), abs=1e-2)


def test_tensor_simulator_follows_ode_and_momentum_equivalence():
    tr = S.simulate_tensor_pca(600, 3, 2.0, [0.4] * 4 + [0.2] * 4, [0.0] * 4 + [0.5] * 4,
                               m0=0.5, s_max=2.0, n_save=11, seed=3)  # fmt: skip
    assert tr.m.shape == (11, 8) and tr.m[0] == pytest.approx(0.5, abs=1e-6)
    ode = S.solve_tensor_pca_ode(3, 2.0, 0.4, 0.5, tr.s)
    assert np.abs(tr.m[:, :4].mean(1) - ode).max() < 0.04
    assert np.abs(tr.m[:, 4:].mean(1) - ode).max() < 0.04
    again = S.simulate_tensor_pca(600, 3, 2.0, 0.4, m0=0.5, s_max=0.5, n_save=3, seed=3)
    assert np.array_equal(again.m, S.simulate_tensor_pca(600, 3, 2.0, 0.4, m0=0.5, s_max=0.5,
                                                         n_save=3, seed=3).m)  # fmt: skip


def test_single_index_simulator_follows_ode():
    for normalized in (False, True):
        tr = S.simulate_single_index(500, "linear", 0.5, [1.0] * 6, normalized=normalized,
                                     s_max=2.0, n_save=5, seed=2)  # fmt: skip
        assert tr.R[0] == pytest.approx(1.0, abs=1e-5) and tr.m[0] == pytest.approx(0.0, abs=1e-6)
        m, R = S.solve_single_index_ode("linear", 0.5, 1.0, normalized, 0.0, 1.0, tr.s)
        assert np.abs(tr.m.mean(1) - m).max() < 0.05
        assert np.abs(tr.R.mean(1) - R).max() < 0.1


def test_c_effective():
    assert S.c_effective(0.6, 0.5) == pytest.approx(1.2)
    np.testing.assert_allclose(S.c_effective([1.0, 1.0], [0.0, 0.75]), [1.0, 4.0])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: S.simulate_tensor_pca(1, 2, 1.0, 1.0), "N must"),
        (lambda: S.simulate_tensor_pca(10, 1, 1.0, 1.0), "k must"),
        (lambda: S.simulate_tensor_pca(10, 2, 1.0, -1.0), "c must"),
        (lambda: S.simulate_tensor_pca(10, 2, 1.0, 1.0, beta=1.0), "beta must"),
        (lambda: S.simulate_tensor_pca(10, 2, 1.0, [1.0, 2.0], beta=[0.0, 0.1, 0.2]), "shape"),
        (lambda: S.simulate_tensor_pca(10, 2, 1.0, 1.0, m0=1.5), "m0 must"),
        (lambda: S.simulate_tensor_pca(10, 2, float("nan"), 1.0), "lam must"),
        (lambda: S.simulate_single_index(10, "cubic", 0.5, 1.0), "link"),
        (lambda: S.simulate_single_index(10, "relu", -0.5, 1.0), "sigma must"),
        (lambda: S.single_index_drift(0.1, 1.0, "relu", 0.0, 1.0, normalized=True), "sigma must"),
        (lambda: S.single_index_drift(0.1, 0.0, "relu", 0.5, 1.0), "R must"),
        (lambda: S.solve_tensor_pca_ode(3, 2.0, 0.4, 0.5, [1.0, 0.5]), "increasing"),
        (lambda: S.overlap_k2([-1.0], 1.0, 1.0, 0.1), "s must"),
        (lambda: S.linear_error_fixed_point(0.0, 0.5), "c must"),
        (lambda: S.c_effective(float("inf"), 0.5), "c must"),
    ],
)
def test_invalid_arguments_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()
