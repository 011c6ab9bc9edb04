"""lib.attention: exact simplex formulas against an explicit simplex, limits, and the layer."""

import math

import numpy as np
import pytest

from lib import attention as at


@pytest.mark.parametrize("n", [5, 50])
@pytest.mark.parametrize("beta", [0.5, 3.0, 10.0])
@pytest.mark.parametrize("alpha", [0.0, 0.7])
def test_simplex_exact_matches_explicit_simplex(n, beta, alpha):
    rho, q = 0.3, 2.3
    X = at.explicit_simplex(n, rho, q)
    out = at.attention_rows(X, beta, alpha=alpha)
    exact = at.simplex_exact(n, rho, beta, alpha, q)
    assert at.collapse_metric(X, out) == pytest.approx(exact.lam, abs=1e-12)
    assert at.mean_cosine(out) == pytest.approx(exact.rho_out, abs=1e-12)
    weights = at.self_weight(X, beta)
    np.testing.assert_allclose(weights, exact.a, atol=1e-13)
    assert exact.a + (n - 1) * exact.b == pytest.approx(1.0, abs=1e-14)


def test_explicit_simplex_has_norm_q_and_cosine_rho():
    X = at.explicit_simplex(7, 0.4, q=3.0)
    np.testing.assert_allclose(np.sum(X**2, axis=1), 3.0)
    Y = at.normalise(X)
    cos = Y @ Y.T
    np.testing.assert_allclose(cos[np.triu_indices(7, 1)], 0.4, atol=1e-14)


@pytest.mark.parametrize("rho", [0.3, 0.5])
def test_theorem_2_1_limits_at_huge_n(rho):
    """lim rho' = 1, 4 rho / (1 + 3 rho), rho below, at and above gamma_c (Theorem 2.1)."""
    n, gc = 1e12, at.gamma_c(rho)
    targets = {0.5: 1.0, 1.0: 4 * rho / (1 + 3 * rho), 2.0: rho}
    for factor, target in targets.items():
        exact = at.simplex_exact(n, rho, factor * gc * math.log(n))
        assert exact.rho_out == pytest.approx(target, abs=1e-3)
    # stays finite and exact far beyond float range of n itself in the exponent
    assert at.simplex_exact(1e300, rho, 2 * gc * math.log(1e300)).lam == pytest.approx(1.0)


def test_large_n_forms_agree_with_exact_and_critical_values():
    rho, n = 0.5, 1e9
    for gamma in [1.0, 1.8, 2.0, 2.3, 3.0]:
        exact = at.simplex_exact(n, rho, gamma * math.log(n))
        approx = at.large_n_forms(n, rho, gamma)
        assert approx.lam == pytest.approx(exact.lam, abs=1e-6)
    crit = at.large_n_forms(n, rho, at.gamma_c(rho))
    assert crit.a == pytest.approx(0.5)
    assert crit.lam == pytest.approx(1 / (1 + 3 * rho))
    assert crit.rho_out == pytest.approx(4 * rho / (1 + 3 * rho))


def test_finite_n_critical_beta_on_simplex_is_log_n_minus_one_over_one_minus_rho():
    n, rho = 64, 0.5
    X = at.explicit_simplex(n, rho)
    assert at.critical_beta(X) == pytest.approx(math.log(n - 1) / (1 - rho), rel=1e-8)


def test_gaussian_tokens_have_unit_norm_and_cosine_rho_on_average():
    X = at.make_tokens(300, 1024, 0.5, seed=0)
    # the shared component z_0 has ||z_0||^2 = 1 +- sqrt(2 / d), so allow a few of those
    assert np.mean(np.sum(X**2, axis=1)) == pytest.approx(1.0, abs=0.05)
    assert at.mean_cosine(X) == pytest.approx(0.5, abs=0.05)


def test_collapse_curve_matches_layer_and_crossing_is_near_gamma_c():
    X = at.make_tokens(256, 512, 0.5, seed=0)
    betas = [1.0, 8.0, 30.0]
    direct = [at.collapse_metric(X, at.attention_rows(X, b, m=40)) for b in betas]
    np.testing.assert_allclose(at.collapse_curve(X, betas, m=40), direct, rtol=1e-12)
    # the realised cosine of these tokens sets gamma_c; the crossing lies near it
    gc_hat = 1 / (1 - at.mean_cosine(X))
    assert at.crossing_gamma(X, 0.5, m=64) == pytest.approx(gc_hat, rel=0.05)


def test_iid_critical_beta_grows_slower_than_log_n():
    b_small, b_big = (
        np.mean([at.iid_critical_beta(n, 64, s) for s in range(3)]) for n in (64, 4096)
    )
    assert b_big / b_small < math.log(4096) / math.log(64)
    assert 2.0 < b_small < 4.5  # of order sqrt(2 log 64) = 2.9


def test_torch_layer_matches_numpy_and_eta_hits_supercritical_limit():
    torch = pytest.importorskip("torch")
    X = at.make_tokens(64, 32, 0.5, seed=1)
    out = at.attention_torch(torch.as_tensor(X), 3.0, alpha=0.5).numpy()
    np.testing.assert_allclose(out, at.attention_rows(X, 3.0, alpha=0.5), atol=1e-12)
    eta, sem = at.gradient_eta(X, 200.0, n_probes=8, seed=0)  # attention ~ identity
    assert eta == pytest.approx(at.eta_supercritical(X), rel=0.1)
    assert sem > 0
    assert at.gradient_eta(X, 0.0, n_probes=4, seed=0)[0] < 0.1 * eta  # uniform attention


def test_practical_beta_schemes():
    n = np.array([64.0, 4096.0, 4096.0**2])
    assert np.allclose(at.practical_beta(n, "none", 4096, 2.0), 2.0)
    assert np.allclose(at.practical_beta(n, "qwen", 4096, 2.0), [2.0, 2.0, 4.0])
    assert np.allclose(at.practical_beta(n, "ssmax", 4096, 2.0), [1.0, 2.0, 4.0])
    assert at.practical_beta(4096.0 * 32, "yarn", 4096, 1.0) == pytest.approx(
        (0.1 * math.log(32) + 1) ** 2
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda: at.gamma_c(1.0),
        lambda: at.gamma_c(float("nan")),
        lambda: at.make_tokens(1, 8, 0.5, 0),
        lambda: at.make_tokens(8, 0, 0.5, 0),
        lambda: at.attention_rows(np.ones((1, 3)), 1.0),
        lambda: at.attention_rows(np.full((3, 2), np.nan), 1.0),
        lambda: at.attention_rows(np.zeros((3, 2)), 1.0),
        lambda: at.attention_rows(np.ones((3, 2)), -1.0),
        lambda: at.collapse_metric(np.ones((3, 2)), np.ones((4, 2))),
        lambda: at.collapse_curve(np.eye(3), [np.inf]),
        lambda: at.critical_beta(np.eye(3), target=1.0),
        lambda: at.crossing_gamma(at.explicit_simplex(8, 0.5), 0.5, bracket=(1.5, 1.6)),
        lambda: at.simplex_exact(1.0, 0.5, 1.0),
        lambda: at.explicit_simplex(4, 0.5, q=0.0),
        lambda: at.large_n_forms(1.0, 0.5, 1.0),
        lambda: at.large_n_forms(10.0, 0.5, -1.0),
        lambda: at.practical_beta(100.0, "rope", 4096, 1.0),
        lambda: at.gradient_eta(np.eye(3), 1.0, n_probes=0),
    ],
)
def test_bad_inputs_raise_value_error(call):
    with pytest.raises(ValueError):
        call()
