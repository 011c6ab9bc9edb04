"""Tests of lib.sgd_limits: closed forms, quadrature vs Monte Carlo, the moving-frame simulators
against brute-force N-dimensional ones and against the ODEs, and a table of bad calls."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import lib.sgd_limits as S

NAN, INF = float("nan"), float("inf")


# ----------------------------------------------------------------------------- brute force


def brute_tensor_pca(N, k, lam, c, beta, normalized, m0, n_steps, rows, seed):
    """The N-dimensional spherical SGD / SGD-M / SGD-U of simulate_tensor_pca, written plainly.

    The noise gradient of <W, x^{(x)k}> is drawn from its law: sqrt(k) xi, plus a part along x
    that the tangent projection removes (see the covariance test below). Returns m at the end.
    """
    gen = np.random.default_rng(seed)
    x = gen.standard_normal((rows, N))
    x[:, 0] = 0.0
    x *= math.sqrt(1 - m0**2) / np.linalg.norm(x, axis=1, keepdims=True)
    x[:, 0] = m0
    u = np.zeros_like(x)
    step = c / math.sqrt(N) if normalized else c / N
    for _ in range(n_steps):
        g = math.sqrt(k) * gen.standard_normal((rows, N))
        g[:, 0] += k * lam * x[:, 0] ** (k - 1)
        g -= (g * x).sum(1, keepdims=True) * x
        if normalized:
            g /= np.linalg.norm(g, axis=1, keepdims=True)
        u = beta * u + step * g
        x = x + u
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x[:, 0]


def brute_single_index(N, link, sigma, c, beta, normalized, n_steps, rows, seed):
    """The N-dimensional online SGD of simulate_single_index, from m = 0, R = 1."""
    f, fp = S._link(link)
    gen = np.random.default_rng(seed)
    x = gen.standard_normal((rows, N))
    x[:, 0] = 0.0
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    u = np.zeros_like(x)
    step = c / math.sqrt(N) if normalized else c / N
    for _ in range(n_steps):
        a = gen.standard_normal((rows, N))
        lx = (a * x).sum(1)
        g = (f(lx) - f(a[:, 0]) - sigma * gen.standard_normal(rows)) * fp(lx)
        if normalized:
            g = np.sign(g) / np.linalg.norm(a, axis=1)
        u = beta * u - step * g[:, None] * a
        x = x + u
    return x[:, 0], (x * x).sum(1)


def same_law(a, b):
    """Two samples of one law: a two-sample Kolmogorov-Smirnov test at a strict level."""
    return stats.ks_2samp(a, b).pvalue > 1e-3


@pytest.mark.parametrize("beta, normalized", [(0.0, False), (0.6, False), (0.0, True)])
def test_moving_frame_tensor_matches_brute_force(beta, normalized):
    """The 3-axis frame is the N-dimensional process in law (N = 24, where any error would show)."""
    N, rows, n_steps = 24, 3000, 36
    frame = S.simulate_tensor_pca(N, 3, 1.5, [1.0] * rows, beta, normalized, m0=0.4,
                                  s_max=n_steps / N, n_save=2, seed=5).m[-1]  # fmt: skip
    brute = brute_tensor_pca(N, 3, 1.5, 1.0, beta, normalized, 0.4, n_steps, rows, seed=6)
    assert same_law(frame, brute)
    assert abs(frame.std() / brute.std() - 1) < 0.1


@pytest.mark.parametrize("link, beta, normalized", [("linear", 0.5, False), ("relu", 0.0, True)])
def test_moving_frame_single_index_matches_brute_force(link, beta, normalized):
    N, rows, n_steps = 20, 3000, 40
    tr = S.simulate_single_index(N, link, 0.5, [1.5] * rows, beta, normalized,
                                 s_max=n_steps / N, n_save=2, seed=7)  # fmt: skip
    m, R = brute_single_index(N, link, 0.5, 1.5, beta, normalized, n_steps, rows, seed=8)
    assert same_law(tr.m[-1], m)
    assert same_law(tr.R[-1], R)


def test_reframe_keeps_every_inner_product_with_v_x_and_u():
    gen = np.random.default_rng(0)
    x, u = gen.standard_normal((5, S.FRAME)), gen.standard_normal((5, S.FRAME))
    before = [x[:, 0], u[:, 0], (x * x).sum(1), (u * u).sum(1), (x * u).sum(1)]
    S._reframe(x, u)
    after = [x[:, 0], u[:, 0], (x * x).sum(1), (u * u).sum(1), (x * u).sum(1)]
    for b, a in zip(before, after, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)
    assert np.all(x[:, 2:] == 0) and np.all(u[:, 3] == 0)


def test_uniform_start_has_the_overlap_law_of_a_uniform_point():
    """m0=None: m(0) is the first coordinate of a uniform point, variance 1 / N."""
    tr = S.simulate_tensor_pca(50, 2, 1.0, [0.1] * 4000, s_max=0.02, n_save=2, seed=1)
    assert tr.m[0].var() == pytest.approx(1 / 50, rel=0.08)
    assert np.all(tr.R[0] == pytest.approx(1.0))
    # uniform_overlaps gives the very starts the simulator draws for the same seed
    np.testing.assert_array_equal(S.uniform_overlaps(1, 50, 4000), tr.m[0])


# ----------------------------------------------------------------------------- closed forms


def test_tensor_noise_covariance_matches_explicit_tensor_contraction():
    """grad_x <W, x^{(x)3}> has covariance k I + k(k-1) x x^T (the simulators' shortcut)."""
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


def test_gradient_moments_match_closed_forms():
    """Linear link: g ~ N(0, e + sigma^2); ReLU at x = v: g = -sigma eps when the unit is on."""
    sigma = 0.5
    for m, R in ((0.0, 1.0), (0.3, 1.2), (1.0, 1.0)):
        var = R - 2 * m + 1 + sigma**2
        abs_g, g2, p = S.gradient_moments("linear", sigma, m, R)
        assert abs_g == pytest.approx(math.sqrt(2 * var / math.pi), abs=1e-10)
        assert g2 == pytest.approx(var, abs=1e-10) and p == pytest.approx(1.0)
    abs_g, g2, p = S.gradient_moments("relu", sigma, 1.0, 1.0)
    assert abs_g == pytest.approx(0.5 * sigma * math.sqrt(2 / math.pi), abs=1e-10)
    assert g2 == pytest.approx(0.5 * sigma**2, abs=1e-10) and p == pytest.approx(0.5)


@pytest.mark.parametrize("link, m, R", [("relu", 0.0, 1.0), ("relu", 0.4, 1.5), ("tanh", 0.4, 1.5)])
def test_gradient_moments_match_monte_carlo(link, m, R):
    rng = np.random.default_rng(2)
    n, sigma = 400_000, 0.5
    lv = rng.standard_normal(n)
    lx = m * lv + math.sqrt(R - m**2) * rng.standard_normal(n)
    f, fp = S._link(link)
    g = (f(lx) - f(lv) - sigma * rng.standard_normal(n)) * fp(lx)
    abs_g, g2, p = S.gradient_moments(link, sigma, m, R)
    assert abs_g == pytest.approx(np.abs(g).mean(), rel=1e-2)
    assert g2 == pytest.approx(np.mean(g**2), rel=1e-2)
    assert p == pytest.approx(np.mean(g != 0), abs=5e-3)


@pytest.mark.parametrize("link", ["relu", "tanh"])
def test_quadrature_matches_monte_carlo(link):
    rng = np.random.default_rng(1)
    m, R, sigma, c, n = 0.4, 1.5, 0.5, 1.0, 400_000
    lv = rng.standard_normal(n)
    lx = m * lv + math.sqrt(R - m**2) * rng.standard_normal(n)
    f, fp = S._link(link)
    g = (f(lx) - f(lv) - sigma * rng.standard_normal(n)) * fp(lx)
    dm, dR = S.single_index_drift(m, R, link, sigma, c)
    assert dm == pytest.approx(-c * np.mean(g * lv), abs=5e-3)
    assert dR == pytest.approx(-2 * c * np.mean(g * lx) + c**2 * np.mean(g**2), abs=2e-2)
    dm, dR = S.single_index_drift(m, R, link, sigma, c, normalized=True)
    assert dm == pytest.approx(-c * np.mean(np.sign(g) * lv), abs=5e-3)
    assert dR == pytest.approx(-2 * c * np.mean(np.sign(g) * lx) + c**2 * np.mean(g != 0), abs=1e-2)


# ----------------------------------------------------------------------------- simulators vs ODEs


def test_tensor_simulator_follows_ode_and_momentum_equivalence():
    tr = S.simulate_tensor_pca(2000, 3, 2.0, [0.4] * 16 + [0.2] * 16, [0.0] * 16 + [0.5] * 16,
                               m0=0.5, s_max=2.0, n_save=11, seed=3)  # fmt: skip
    assert tr.m.shape == (11, 32) and tr.m[0] == pytest.approx(0.5)
    ode = S.solve_tensor_pca_ode(3, 2.0, 0.4, 0.5, tr.s)
    assert np.abs(tr.m[:, :16].mean(1) - ode).max() < 0.01
    assert np.abs(tr.m[:, 16:].mean(1) - ode).max() < 0.01
    again = S.simulate_tensor_pca(2000, 3, 2.0, [0.4] * 16 + [0.2] * 16, [0.0] * 16 + [0.5] * 16,
                                  m0=0.5, s_max=2.0, n_save=11, seed=3)  # fmt: skip
    assert np.array_equal(again.m, tr.m)


def test_normalized_tensor_pca_is_sgd_at_c_over_sqrt_k():
    tr = S.simulate_tensor_pca(2000, 2, 1.0, 1.2, normalized=np.ones(16, bool), m0=0.5,
                               s_max=3.0, n_save=4, seed=4)  # fmt: skip
    expected = S.overlap_k2(tr.s, 1.0, S.c_normalized_tensor(1.2, 2), 0.5)
    assert np.abs(tr.m.mean(1) - expected).max() < 0.01


def test_single_index_simulator_follows_ode():
    for normalized in (False, True):
        tr = S.simulate_single_index(500, "linear", 0.5, [1.0] * 16, normalized=normalized,
                                     s_max=2.0, n_save=5, seed=2)  # fmt: skip
        assert tr.R[0] == pytest.approx(1.0) and tr.m[0] == pytest.approx(0.0)
        m, R = S.solve_single_index_ode("linear", 0.5, 1.0, normalized, 0.0, 1.0, tr.s)
        assert np.abs(tr.m.mean(1) - m).max() < 0.03
        assert np.abs(tr.R.mean(1) - R).max() < 0.05
        np.testing.assert_allclose(tr.distance, tr.R - 2 * tr.m + 1)


def test_starting_overlaps_can_differ_per_row():
    """m0 per row: a start at x = v (m = 1) and one at m = 0, side by side in one call."""
    tr = S.simulate_tensor_pca(500, 2, 1.0, [0.5, 0.5], m0=[1.0, 0.0], s_max=0.01, n_save=2)
    np.testing.assert_allclose(tr.m[0], [1.0, 0.0])
    tr = S.simulate_single_index(500, "linear", 0.5, [0.5] * 3, m0=[1.0, 0.0, -0.5], R0=1.0,
                                 s_max=0.01, n_save=2)  # fmt: skip
    np.testing.assert_allclose(tr.m[0], [1.0, 0.0, -0.5])
    np.testing.assert_allclose(tr.R[0], 1.0)
    np.testing.assert_allclose(tr.distance[0], [0.0, 2.0, 3.0])


def test_c_effective_and_c_normalized_tensor():
    assert S.c_effective(0.6, 0.5) == pytest.approx(1.2)
    np.testing.assert_allclose(S.c_effective([1.0, 1.0], [0.0, 0.75]), [1.0, 4.0])
    assert S.c_normalized_tensor(2.0, 4) == pytest.approx(1.0)


# ----------------------------------------------------------------------------- bad calls

BAD_CALLS = [
    (lambda: S.simulate_tensor_pca(3, 2, 1.0, 1.0), ValueError, "N must be >= 4"),
    (lambda: S.simulate_tensor_pca(True, 2, 1.0, 1.0), TypeError, "N must be an integer"),
    (lambda: S.simulate_tensor_pca(10, 1, 1.0, 1.0), ValueError, "k must be >= 2"),
    (lambda: S.simulate_tensor_pca(10, 2.0, 1.0, 1.0), TypeError, "k must be an integer"),
    (lambda: S.simulate_tensor_pca(10, 2, NAN, 1.0), ValueError, "lam must be finite"),
    (lambda: S.simulate_tensor_pca(10, 2, 1.0, -1.0), ValueError, "c must be > 0"),
    (lambda: S.simulate_tensor_pca(10, 2, 1.0, True), TypeError, "c must be numbers"),
    (lambda: S.simulate_tensor_pca(10, 2, 1.0, [1.0, INF]), ValueError, "c contains NaN or inf"),
    (lambda: S.simulate_tensor_pca(10, 2, 1.0, "1.0"), TypeError, "c must be an array"),
    (lambda: S.simulate_tensor_pca(10, 2, 1.0, 1.0, beta=1.0), ValueError, "beta must lie in"),
    (lambda: S.simulate_tensor_pca(10, 2, 1.0, 1.0, beta=-0.1), ValueError, "beta must be >= 0"),
    (
        lambda: S.simulate_tensor_pca(10, 2, 1.0, [1.0, 2.0], [0.0, 0.1, 0.2]),
        ValueError,
        "must broadcast",
    ),
    (lambda: S.simulate_tensor_pca(10, 2, 1.0, [[1.0]]), ValueError, "scalars or 1-D"),
    (
        lambda: S.simulate_tensor_pca(10, 2, 1.0, 1.0, normalized=1),
        TypeError,
        "normalized must be True/False",
    ),
    (lambda: S.simulate_tensor_pca(10, 2, 1.0, 1.0, m0=1.5), ValueError, "m0 must lie in"),
    (lambda: S.simulate_tensor_pca(10, 2, 1.0, 1.0, s_max=0.0), ValueError, "s_max must lie in"),
    (lambda: S.simulate_tensor_pca(10, 2, 1.0, 1.0, n_save=1), ValueError, "n_save must be >= 2"),
    (lambda: S.simulate_tensor_pca(10, 2, 1.0, 1.0, seed=-1), ValueError, "seed must be >= 0"),
    (
        lambda: S.simulate_tensor_pca(10, 2, 1.0, 1.0, seed=0.5),
        TypeError,
        "seed must be an integer",
    ),
    (lambda: S.simulate_single_index(10, "cubic", 0.5, 1.0), ValueError, "link must be one of"),
    (lambda: S.simulate_single_index(10, "relu", -0.5, 1.0), ValueError, "sigma must lie in"),
    (lambda: S.simulate_single_index(10, "relu", 0.5, 1.0, R0=0.0), ValueError, "R0 must lie in"),
    (lambda: S.simulate_single_index(10, "relu", 0.5, 1.0, m0=2.0), ValueError, "m0 must lie in"),
    (lambda: S.simulate_single_index(10, "relu", 0.5, 1.0, beta="0"), TypeError, "beta must be"),
    (
        lambda: S.simulate_single_index(10, "relu", 0.5, [1.0, 1.0], m0=[0.0, 0.1, 0.2]),
        ValueError,
        "m0 must be a number or one per row",
    ),
    (
        lambda: S.simulate_tensor_pca(10, 2, 1.0, [1.0] * 2, m0=[0.0, NAN]),
        ValueError,
        "m0 contains",
    ),
    (lambda: S.simulate_tensor_pca(10, 2, 1.0, 1.0, m0=True), TypeError, "m0 must be numbers"),
    (lambda: S.gradient_moments("relu", 0.0, 0.0, 1.0), ValueError, "sigma must lie in"),
    (lambda: S.gradient_moments("relu", 0.5, 1.5, 1.0), ValueError, "m must lie in"),
    (lambda: S.gradient_moments("gelu", 0.5, 0.0, 1.0), ValueError, "link must be one of"),
    (lambda: S.c_effective(INF, 0.5), ValueError, "c contains NaN or inf"),
    (lambda: S.c_effective(1.0, NAN), ValueError, "beta contains NaN or inf"),
    (lambda: S.c_normalized_tensor(1.0, True), TypeError, "k must be an integer"),
    (lambda: S.tensor_pca_drift(0.5, 3, 2.0, 0.0), ValueError, "c_eff must lie in"),
    (lambda: S.tensor_pca_drift(1.5, 3, 2.0, 0.4), ValueError, "m must be <= 1"),
    (lambda: S.solve_tensor_pca_ode(3, 2.0, 0.4, 0.5, [1.0, 0.5]), ValueError, "increasing"),
    (lambda: S.solve_tensor_pca_ode(3, 2.0, 0.4, 0.5, [0.0, NAN]), ValueError, "s contains"),
    (lambda: S.solve_tensor_pca_ode(3, 2.0, 0.4, True, [0.0, 1.0]), TypeError, "m0 must be a real"),
    (lambda: S.overlap_k2([-1.0], 1.0, 1.0, 0.1), ValueError, "s must be >= 0"),
    (lambda: S.overlap_k2([1.0], 1.0, "1.0", 0.1), TypeError, "c_eff must be a real"),
    (lambda: S.tensor_pca_fixed_points(3, -2.0, 0.4), ValueError, "lam must lie in"),
    (
        lambda: S.single_index_drift(0.1, 1.0, "relu", 0.0, 1.0, normalized=True),
        ValueError,
        "sigma must be > 0",
    ),
    (lambda: S.single_index_drift(0.1, 0.0, "relu", 0.5, 1.0), ValueError, "R must lie in"),
    (
        lambda: S.single_index_drift(0.1, 1.0, "relu", 0.5, 1.0, normalized=1),
        TypeError,
        "normalized must be True or False",
    ),
    (
        lambda: S.solve_single_index_ode("relu", 0.5, 1.0, False, 0.0, 1.0, [[0.0, 1.0]]),
        ValueError,
        "1-D grid",
    ),
    (lambda: S.single_index_fixed_point("gelu", 0.5, 1.0, False), ValueError, "link must be"),
    (lambda: S.linear_error_fixed_point(0.0, 0.5), ValueError, "c must lie in"),
    (lambda: S.linear_error_fixed_point(1.0, 0.5, normalized="yes"), TypeError, "normalized"),
    (lambda: S.linear_crossover(0.0), ValueError, "sigma must lie in"),
]


@pytest.mark.parametrize("call, error, message", BAD_CALLS)
def test_bad_calls_raise_clear_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_admissible_edge_interpolates_the_first_miss_in_log_c():
    c = np.array([1.0, 2.0, 4.0, 8.0])
    # overlap 0.9, 0.7, 0.3, 0.1: theta = 0.5 is crossed halfway between c = 2 and c = 4
    assert S.admissible_edge(c, [0.9, 0.7, 0.3, 0.1], 0.5) == pytest.approx((2 * math.sqrt(2), 0))
    # a later recovery does not count: the edge is before the first miss; NaN (diverged) misses
    assert S.admissible_edge(c, [0.9, 0.4, 0.9, 0.9], 0.5)[0] == pytest.approx(2**0.8)
    assert S.admissible_edge(c, [0.9, NAN, 0.9, 0.9], 0.5)[0] == pytest.approx(2 ** (0.4 / 0.9))
    # censored at either end
    assert S.admissible_edge(c, [0.4, 0.3, 0.2, 0.1], 0.5) == (1.0, -1)
    assert S.admissible_edge(c, [0.9, 0.8, 0.7, 0.6], 0.5) == (8.0, 1)
    edges, censored = S.admissible_edge(c, [[0.9, 0.7, 0.3, 0.1], [0.4, 0.3, 0.2, 0.1]], 0.5)
    np.testing.assert_allclose(edges, [2 * math.sqrt(2), 1.0])
    np.testing.assert_array_equal(censored, [0, -1])


def test_admissible_edge_rejects_a_bad_grid():
    with pytest.raises(ValueError, match="increasing"):
        S.admissible_edge([2.0, 1.0], [0.9, 0.1], 0.5)
    with pytest.raises(ValueError, match="2 values per curve"):
        S.admissible_edge([1.0, 2.0], [0.9, 0.5, 0.1], 0.5)
