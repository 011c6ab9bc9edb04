"""lib.attention: exact simplex formulas (one and two cosine levels) against explicit simplices,
limits, the layer in torch, and a table of bad calls."""

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
    # the root search runs in float32 (see _top_weight_beta): agreement to ~1e-7
    assert at.critical_beta(X) == pytest.approx(math.log(n - 1) / (1 - rho), rel=1e-6)


def test_gaussian_tokens_have_unit_norm_and_cosine_rho_on_average():
    X = at.make_tokens(300, 1024, 0.5, seed=0)
    # the shared component z_0 has ||z_0||^2 = 1 +- sqrt(2 / d), so allow a few of those
    assert np.mean(np.sum(X**2, axis=1)) == pytest.approx(1.0, abs=0.05)
    assert at.mean_cosine(X) == pytest.approx(0.5, abs=0.05)


def test_a_generator_seed_draws_what_its_integer_seed_draws():
    from_int = at.make_tokens(10, 4, 0.5, seed=7)
    from_generator = at.make_tokens(10, 4, 0.5, np.random.default_rng(7))
    np.testing.assert_array_equal(from_int, from_generator)


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


def test_iid_critical_beta_of_two_scores_has_a_closed_form():
    """With n = 2 and target t, the top weight is 1 / (1 + e^(-beta |g1 - g2|)); one row
    (m = 1) gives beta = log(t / (1 - t)) / |g1 - g2|."""
    g = np.random.default_rng(3).standard_normal((1, 2), dtype=np.float32)
    beta = at.iid_critical_beta(2, 1, 3, target=0.9)
    assert beta == pytest.approx(math.log(9) / abs(float(g[0, 0] - g[0, 1])), rel=1e-5)


# ---------------------------------------------------------------------------- clusters
def test_explicit_clusters_have_unit_norm_and_two_cosine_levels():
    Y, labels = at.explicit_clusters(24, 4, 0.7, 0.1), np.arange(24) % 6
    np.testing.assert_allclose(np.sum(Y**2, axis=1), 1.0)
    cos = Y @ Y.T
    i, j = np.triu_indices(24, 1)
    same = labels[i] == labels[j]
    np.testing.assert_allclose(cos[i, j][same], 0.7, atol=1e-14)
    np.testing.assert_allclose(cos[i, j][~same], 0.1, atol=1e-14)


@pytest.mark.parametrize("beta", [0.3, 4.0, 12.0, 40.0])
def test_cluster_exact_matches_explicit_clusters(beta):
    n, s, rho_in, rho_out = 30, 5, 0.75, 0.25
    Y, labels = at.explicit_clusters(n, s, rho_in, rho_out), np.arange(n) % (n // s)
    exact = at.cluster_exact(n, s, rho_in, rho_out, beta)
    lam_in, lam_out = at.cluster_lambdas(Y, labels, [beta])[0]
    assert lam_in == pytest.approx(exact.lam_in, abs=1e-12)
    assert lam_out == pytest.approx(exact.lam_out, abs=1e-12)
    A = np.exp(beta * (Y @ Y.T))
    A /= A.sum(axis=1, keepdims=True)
    assert A[0, 0] == pytest.approx(exact.self_share, abs=1e-13)
    assert A[0, labels == labels[0]].sum() == pytest.approx(exact.cluster_share, abs=1e-13)
    entropy = at.attention_entropy(Y, [beta])[0]
    assert entropy == pytest.approx(-np.sum(A[0] * np.log(A[0])), abs=1e-12)
    assert entropy == pytest.approx(exact.entropy, abs=1e-12)


@pytest.mark.parametrize("beta", [0.0, 4.0, 12.0, 40.0])
def test_cluster_attention_matches_exact_two_level_and_brute_force(beta):
    n, s, rho_in, rho_out = 30, 5, 0.75, 0.25
    Y, labels = at.explicit_clusters(n, s, rho_in, rho_out), np.arange(n) % (n // s)
    exact = at.cluster_exact(n, s, rho_in, rho_out, beta)
    self_w, own, spread = at.cluster_attention(Y, labels, [beta])[0]
    A = np.exp(beta * (Y @ Y.T))
    A /= A.sum(axis=1, keepdims=True)
    P = A - np.diag(np.diag(A))
    P /= P.sum(axis=1, keepdims=True)  # the non-self attention of every query
    mates = (labels[:, None] == labels[None, :]) & ~np.eye(n, dtype=bool)
    brute_spread = np.mean(np.exp(-np.sum(P * np.log(np.where(P > 0, P, 1.0)), axis=1))) / n
    assert self_w == pytest.approx(exact.self_share, abs=1e-12)
    assert own == pytest.approx(np.mean(np.sum(P * mates, axis=1)), abs=1e-12)
    assert own == pytest.approx(exact.own_share, abs=1e-12)
    assert spread == pytest.approx(brute_spread, abs=1e-12)
    assert spread == pytest.approx(exact.spread, abs=1e-12)
    if beta == 0.0:  # uniform attention: the cluster's share of the others, all n - 1 keys
        assert own == pytest.approx((s - 1) / (n - 1)) and spread == pytest.approx((n - 1) / n)


def test_attention_entropy_limits():
    """Uniform attention at beta = 0 has entropy log n; a huge beta attends to the query only."""
    X = at.make_tokens(200, 64, 0.5, seed=2)
    low, high = at.attention_entropy(X, [0.0, 500.0], m=20)
    assert low == pytest.approx(math.log(200), abs=1e-12)
    assert high < 1e-6


def test_cluster_entropy_grows_like_kappa_log_n_inside_the_window():
    """Inside the window the attention spreads over the query's cluster of n^kappa tokens, so
    d H / d log n -> kappa; at a fixed beta it tends to 1 (all n tokens), at beta ~ log^2 n to 0."""
    rho_in, rho_out, gamma = 0.8, 0.2, 5 / 3
    entropy = lambda n, beta: at.cluster_exact(n, n**0.5, rho_in, rho_out, beta).entropy  # noqa: E731
    n1, n2 = 1e40, 1e80
    slope = lambda f: (entropy(n2, f(n2)) - entropy(n1, f(n1))) / math.log(n2 / n1)  # noqa: E731
    assert slope(lambda n: gamma * math.log(n)) == pytest.approx(0.5, abs=0.02)
    assert slope(lambda n: 5.0) == pytest.approx(1.0, abs=0.02)
    assert slope(lambda n: gamma * math.log(n) ** 2) == pytest.approx(0.0, abs=0.02)


def test_cluster_shares_switch_at_the_large_n_window_edges():
    """At n = 1e200 with clusters of sqrt(n), the query's cluster takes the weight above gamma_1
    and the rest of the cluster outweighs the query below gamma_2 (window_limits)."""
    n, rho_in, rho_out = 1e200, 0.8, 0.2
    g1, g2 = at.window_limits(0.5, rho_in, rho_out)
    share = lambda gamma: at.cluster_exact(n, 1e100, rho_in, rho_out, gamma * math.log(n))  # noqa: E731
    assert share(0.95 * g1).cluster_share < 1e-3 < 1 - 1e-3 < share(1.05 * g1).cluster_share
    assert share(0.95 * g2).self_share < 1e-3 < 1 - 1e-3 < share(1.05 * g2).self_share
    # inside the window the layer merges each cluster and keeps the clusters apart
    middle = share((g1 + g2) / 2)
    assert middle.lam_in < 1e-3 and middle.lam_out > 0.9


def test_gaussian_cluster_tokens_have_the_planted_cosines_and_window():
    X, labels = at.make_cluster_tokens(256, 2048, 16, 0.8, 0.2, seed=1)
    assert labels.tolist() == (np.arange(256) % 16).tolist()
    Y = at.normalise(X)
    cos = Y @ Y.T
    i, j = np.triu_indices(256, 1)
    same = labels[i] == labels[j]
    assert cos[i, j][same].mean() == pytest.approx(0.8, abs=0.05)
    assert cos[i, j][~same].mean() == pytest.approx(0.2, abs=0.05)
    edges = at.window_edges(X, labels, m=128)
    np.testing.assert_allclose(edges, at.exact_window_edges(256, 16, 0.8, 0.2), rtol=0.06)


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


# ---------------------------------------------------------------------------- bad input
NAN = float("nan")
X_OK = at.explicit_simplex(6, 0.5)
C_OK, LABELS_OK = at.explicit_clusters(8, 2, 0.8, 0.2), np.arange(8) % 4

BAD_CALLS = [
    (lambda: at.gamma_c(1.0), ValueError, r"rho must lie in \[0, 1\)"),
    (lambda: at.gamma_c(NAN), ValueError, "rho must be finite"),
    (lambda: at.gamma_c(True), TypeError, "rho must be a real number"),
    (lambda: at.make_tokens(1, 8, 0.5, 0), ValueError, "n must be >= 2"),
    (lambda: at.make_tokens(8, 0, 0.5, 0), ValueError, "d must be >= 1"),
    (lambda: at.make_tokens(8.0, 4, 0.5, 0), TypeError, "n must be an integer"),
    (lambda: at.make_tokens(8, 4, 0.5, -1), ValueError, "seed must be >= 0"),
    (lambda: at.make_tokens(8, 4, 0.5, "0"), TypeError, "seed must be an integer"),
    (lambda: at.make_cluster_tokens(12, 4, 5, 0.8, 0.2, 0), ValueError, "cluster_size must divide"),
    (lambda: at.make_cluster_tokens(12, 4, 3, 0.2, 0.8, 0), ValueError, "rho_out must be below"),
    (lambda: at.make_cluster_tokens(12, 4, 12, 0.8, 0.2, 0), ValueError, "cluster_size must be <="),
    (lambda: at.normalise(np.ones((1, 3))), ValueError, "at least 2 tokens"),
    (lambda: at.normalise(np.ones(3)), ValueError, "X must be a 2-D array"),
    (lambda: at.mean_cosine(np.zeros((3, 2))), ValueError, "X has a zero row"),
    (lambda: at.attention_rows(np.full((3, 2), NAN), 1.0), ValueError, "X contains NaN"),
    (lambda: at.attention_rows(X_OK, -1.0), ValueError, "beta must lie in"),
    (lambda: at.attention_rows(X_OK, 1.0, m=1), ValueError, "m must be >= 2"),
    (lambda: at.attention_rows(X_OK, 1.0, alpha=np.inf), ValueError, "alpha must be finite"),
    (lambda: at.attention_rows("tokens", 1.0), TypeError, "X must be an array of numbers"),
    (lambda: at.collapse_metric(np.ones((3, 2)), np.ones((4, 2))), ValueError, "X_out must be"),
    (lambda: at.collapse_curve(X_OK, [np.inf]), ValueError, "betas contains NaN or inf"),
    (lambda: at.collapse_curve(X_OK, [-1.0]), ValueError, "betas must be >= 0"),
    (lambda: at.attention_entropy(X_OK, [NAN]), ValueError, "betas contains NaN"),
    (lambda: at.attention_entropy(X_OK, [1.0], m=0), ValueError, "m must be >= 2"),
    (lambda: at.crossing_gamma(X_OK, 0.5, bracket=(1.5, 1.6)), ValueError, "does not cross"),
    (lambda: at.crossing_gamma(X_OK, 0.5, bracket=(2.0, 1.0)), ValueError, "bracket must be"),
    (lambda: at.self_weight(X_OK, NAN), ValueError, "beta must be finite"),
    (lambda: at.critical_beta(X_OK, target=1.0), ValueError, "target must lie in"),
    (lambda: at.iid_critical_beta(64, 0, 0), ValueError, "m must be >= 1"),
    (lambda: at.iid_critical_beta(64, 8, 0, target=True), TypeError, "target must be a real"),
    (lambda: at.cluster_lambdas(C_OK, LABELS_OK[:4], [1.0]), ValueError, "equal lengths"),
    (lambda: at.cluster_lambdas(C_OK, LABELS_OK + 0.5, [1.0]), ValueError, "whole numbers"),
    (lambda: at.cluster_lambdas(C_OK, np.zeros(8), [1.0]), ValueError, "within and across"),
    (lambda: at.window_edges(C_OK, LABELS_OK, level=1.5), ValueError, "level must lie in"),
    (lambda: at.window_limits(1.0, 0.8, 0.2), ValueError, "kappa must lie in"),
    (lambda: at.window_limits(0.5, 0.8, 0.8), ValueError, "rho_out must be below"),
    (lambda: at.explicit_clusters(9, 2, 0.8, 0.2), ValueError, "cluster_size must divide"),
    (lambda: at.cluster_exact(1e6, 1.0, 0.8, 0.2, 1.0), ValueError, "cluster_size must lie in"),
    (lambda: at.cluster_exact(1e6, 1e3, 0.8, 0.2, -2.0), ValueError, "beta must lie in"),
    (lambda: at.exact_window_edges(64, 8, 0.8, 0.2, level=0.0), ValueError, "level must lie in"),
    (lambda: at.attention_torch(X_OK, 1.0), TypeError, "X must be a 2-D torch tensor"),
    (lambda: at.gradient_eta(X_OK, 1.0, n_probes=0), ValueError, "n_probes must be >= 1"),
    (lambda: at.gradient_eta(X_OK, 1.0, seed=1.5), TypeError, "seed must be an integer"),
    (lambda: at.eta_supercritical([[1.0, 2.0]]), ValueError, "at least 2 tokens"),
    (lambda: at.explicit_simplex(4, 0.5, q=0.0), ValueError, "q must lie in"),
    (lambda: at.simplex_exact(1.0, 0.5, 1.0), ValueError, "n must lie in"),
    (lambda: at.simplex_exact(100.0, 0.5, 1.0, alpha=-1.0), ValueError, "alpha must lie in"),
    (lambda: at.large_n_forms(1.0, 0.5, 1.0), ValueError, "n must be >= 2"),
    (lambda: at.large_n_forms(10.0, 0.5, -1.0), ValueError, "gamma must be >= 0"),
    (lambda: at.practical_beta(100.0, "rope", 4096, 1.0), ValueError, "scheme must be one of"),
    (lambda: at.practical_beta(100.0, "qwen", 4096.0, 1.0), TypeError, "n_train must be an int"),
    (lambda: at.practical_beta([NAN], "qwen", 4096, 1.0), ValueError, "n contains NaN"),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD_CALLS)
def test_bad_calls_raise_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
