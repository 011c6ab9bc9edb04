"""Critical attention scaling: a simplified attention layer, its collapse metric and exact forms.

The model of Chen, Lin, Polyanskiy & Rigollet (ICLR 2026, arXiv:2510.05554), Sec. 2: queries,
keys and values are the identity, tokens are pre-normalised, y_i = x_i / ||x_i||, and

    x_i' = sum_j A_ij y_j + alpha x_i,   A_ij = softmax_j(beta <y_i, y_j>),   beta = gamma log n.

With pairwise cosine rho the phase transition sits at gamma_c = 1 / (1 - rho) (Theorem 2.1).
Tokens in clusters, with cosine rho_in inside a cluster and rho_out across, have a window of
gamma where attention spreads over a query's cluster but not beyond it (`cluster_exact`,
`window_edges`; the paper's intermediate phase, its Theorem C.2, in a two-level form of ours).
Everything here is numpy except `attention_torch` and `gradient_eta`, which import torch lazily.
Every public function validates its arguments through `lib.validate`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from lib import validate

# Peng et al. 2023 (YaRN, arXiv:2309.00071): logits are multiplied by (0.1 ln s + 1)^2,
# with s = n / n_train the context extension factor.
PENG2023_YARN_COEF = 0.1
SCHEMES = ("none", "qwen", "ssmax", "yarn")


# ---------------------------------------------------------------------------- arguments
def _rho(name: str, rho) -> float:
    """A pairwise cosine in [0, 1): rho = 1 means the tokens already coincide."""
    return validate.real(name, rho, low=0.0, high=1.0, high_open=True)


def _generator(seed) -> np.random.Generator:
    """A generator from a non-negative integer seed, or the generator itself to draw from."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(validate.integer("seed", seed, minimum=0))


def _tokens(X, name: str = "X") -> np.ndarray:
    """A finite token matrix of shape (n, d) with n >= 2 and no zero row (it is normalised)."""
    X = validate.array(name, X, ndim=2)
    if X.shape[0] < 2:
        raise ValueError(f"{name} must have at least 2 tokens (rows), got shape {X.shape}")
    if np.any(np.linalg.norm(X, axis=1) == 0):
        raise ValueError(f"{name} has a zero row, which cannot be normalised; pass non-zero tokens")
    return X


def _rows(m, n: int) -> int:
    """Number of query rows: all n when m is None, else min(m, n) for an integer m >= 2."""
    return n if m is None else min(validate.integer("m", m, minimum=2), n)


def gamma_c(rho: float) -> float:
    """Critical scaling factor gamma_c = 1 / (1 - rho) of Theorem 2.1."""
    return 1.0 / (1.0 - _rho("rho", rho))


# ---------------------------------------------------------------------------- tokens
def make_tokens(n: int, d: int, rho: float, seed) -> np.ndarray:
    """Gaussian almost-simplex tokens x_i = sqrt(rho) z_0 + sqrt(1 - rho) z_i, shape (n, d).

    z ~ N(0, I_d / d), so E||x_i||^2 = 1 and E<x_i, x_j> = rho (the paper's Sec. 3 setup).
    `seed` is a non-negative integer or a numpy Generator to draw from.
    """
    n, d = validate.integer("n", n, minimum=2), validate.integer("d", d, minimum=1)
    rho, rng = _rho("rho", rho), _generator(seed)
    z = rng.standard_normal((n + 1, d)) / math.sqrt(d)
    return math.sqrt(rho) * z[:1] + math.sqrt(1.0 - rho) * z[1:]


def _levels(rho_in, rho_out) -> tuple[float, float]:
    """Two cosine levels, 0 <= rho_out < rho_in < 1 (within clusters above across)."""
    rho_in, rho_out = _rho("rho_in", rho_in), _rho("rho_out", rho_out)
    if rho_out >= rho_in:
        raise ValueError(f"rho_out must be below rho_in, got {rho_out} >= {rho_in}")
    return rho_in, rho_out


def _cluster_args(n, cluster_size, rho_in, rho_out) -> tuple[int, int, float, float]:
    """Validate a two-level design: at least 2 clusters of cluster_size >= 2, rho_out < rho_in."""
    n = validate.integer("n", n, minimum=4)
    s = validate.integer("cluster_size", cluster_size, minimum=2, maximum=n // 2)
    if n % s:
        raise ValueError(f"cluster_size must divide n, got n = {n}, cluster_size = {s}")
    rho_in, rho_out = _levels(rho_in, rho_out)
    return n, s, rho_in, rho_out


def make_cluster_tokens(
    n: int, d: int, cluster_size: int, rho_in: float, rho_out: float, seed
) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian tokens in n / cluster_size clusters: X of shape (n, d) and cluster labels (n,).

    x_i = sqrt(rho_out) z_0 + sqrt(rho_in - rho_out) z_c(i) + sqrt(1 - rho_in) z_i with
    z ~ N(0, I_d / d): E<x_i, x_j> = rho_in within a cluster, rho_out across. Token i is in
    cluster i mod K, so the first m rows cover the clusters in turn.
    """
    n, s, rho_in, rho_out = _cluster_args(n, cluster_size, rho_in, rho_out)
    d, rng = validate.integer("d", d, minimum=1), _generator(seed)
    k = n // s
    z = rng.standard_normal((1 + k + n, d)) / math.sqrt(d)
    labels = np.arange(n) % k
    shared, centre, own = z[:1], z[1 : 1 + k][labels], z[1 + k :]
    X = math.sqrt(rho_out) * shared + math.sqrt(rho_in - rho_out) * centre
    return X + math.sqrt(1.0 - rho_in) * own, labels


def normalise(X) -> np.ndarray:
    """Pre-LayerNorm without gains: y_i = x_i / ||x_i||, shape (n, d)."""
    X = _tokens(X)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def mean_cosine(X) -> float:
    """Mean pairwise cosine <y_i, y_j> over i < j of a token matrix (n, d)."""
    Y = normalise(X)
    return float(np.mean((Y @ Y.T)[np.triu_indices(Y.shape[0], k=1)]))


# ---------------------------------------------------------------------------- the layer
def attention_rows(X, beta: float, m: int | None = None, alpha: float = 0.0) -> np.ndarray:
    """Outputs x_i' of the first m query rows against all n keys, shape (m, d).

    x_i' = sum_j softmax_j(beta <y_i, y_j>) y_j + alpha x_i (Sec. 2). Tokens are exchangeable,
    so the first m rows are a uniform random subset; this costs O(m n d) instead of O(n^2 d).
    """
    X = _tokens(X)
    beta = validate.real("beta", beta, low=0.0)
    alpha = validate.real("alpha", alpha, low=0.0)
    m = _rows(m, X.shape[0])
    Y = normalise(X)
    A = special.softmax(beta * (Y[:m] @ Y.T), axis=1)
    return A @ Y + alpha * X[:m]


def collapse_metric(X, X_out) -> float:
    """Collapse metric lambda of Eq. 3.2: mean over pairs i < j of (1 - cos'_ij) / (1 - cos_ij).

    X_out holds the outputs of the first m rows of X (shape (m, d)); lambda = 0 is full
    collapse, lambda = 1 leaves every angle as it was.
    """
    X, X_out = _tokens(X), _tokens(X_out, "X_out")
    m = X_out.shape[0]
    if m > X.shape[0] or X_out.shape[1] != X.shape[1]:
        raise ValueError(f"X_out must be the first m rows' outputs, got {X_out.shape} vs {X.shape}")
    Y = normalise(X[:m])
    return float(np.mean(_angle_ratios(Y @ Y.T, normalise(X_out))))


def _angle_ratios(cos_in: np.ndarray, Y_out: np.ndarray) -> np.ndarray:
    """(1 - cos'_ij) / (1 - cos_ij) for every pair i < j of the m rows, shape (m (m - 1) / 2,)."""
    i, j = np.triu_indices(Y_out.shape[0], k=1)
    return (1.0 - (Y_out @ Y_out.T)[i, j]) / (1.0 - cos_in[i, j])


def _query_cosines(X: np.ndarray, m: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Normalised tokens Y (n, d) and the cosines G (m, n) of the first m queries with all keys."""
    Y = normalise(X)
    return Y, Y[: _rows(m, X.shape[0])] @ Y.T


def _ratios_at(Y: np.ndarray, G: np.ndarray, beta: float) -> np.ndarray:
    """Angle ratios of the m query rows' outputs at inverse temperature beta (alpha = 0)."""
    out = special.softmax(beta * G, axis=1) @ Y
    return _angle_ratios(G[:, : G.shape[0]], out / np.linalg.norm(out, axis=1, keepdims=True))


def _betas(betas) -> np.ndarray:
    return validate.array("betas", np.atleast_1d(betas), nonnegative=True)


def collapse_curve(X, betas, m: int | None = None) -> np.ndarray:
    """lambda at each beta in `betas` for the first m query rows (alpha = 0); shape (len(betas),).

    The (m, n) cosines are computed once, so each beta costs one softmax and one (m, n) @ (n, d).
    """
    X, betas = _tokens(X), _betas(betas)
    Y, G = _query_cosines(X, m)
    return np.array([np.mean(_ratios_at(Y, G, b)) for b in betas])


def attention_entropy(X, betas, m: int | None = None) -> np.ndarray:
    """Mean Shannon entropy (nats) of the first m query rows' attention at each beta; (len(betas),).

    H_i = -sum_j A_ij log A_ij = logsumexp_j(z_ij) - sum_j A_ij z_ij with z = beta <y_i, y_j>.
    exp(H) is the effective number of keys a query attends to: n at beta = 0, 1 as beta -> inf.
    """
    X, betas = _tokens(X), _betas(betas)
    _, G = _query_cosines(X, m)

    def entropy(beta: float) -> float:
        z = beta * G
        return float(
            np.mean(special.logsumexp(z, axis=1) - np.sum(special.softmax(z, axis=1) * z, axis=1))
        )

    return np.array([entropy(b) for b in betas])


def crossing_gamma(X, rho: float, m: int | None = None, bracket=(0.1, 5.0)) -> float:
    """gamma* where lambda(beta = gamma log n) crosses its critical value 1 / (1 + 3 rho).

    `bracket` is in units of gamma_c; raises ValueError if lambda does not cross inside it.
    """
    X, rho = _tokens(X), _rho("rho", rho)
    lo, hi = (b * gamma_c(rho) for b in _bracket(bracket))
    log_n, lam_c = math.log(X.shape[0]), 1.0 / (1.0 + 3.0 * rho)
    Y, G = _query_cosines(X, m)
    return _root(lambda g: np.mean(_ratios_at(Y, G, g * log_n)) - lam_c, lo, hi, "lambda")


def _bracket(bracket) -> tuple[float, float]:
    lo, hi = validate.array("bracket", bracket, positive=True)
    if len(bracket) != 2 or lo >= hi:
        raise ValueError(f"bracket must be a pair (lo, hi) with 0 < lo < hi, got {bracket!r}")
    return float(lo), float(hi)


def _root(excess, lo: float, hi: float, what: str, xtol: float = 1e-4) -> float:
    """Root of excess(gamma) in [lo, hi] by Brent's method; a clear error if it does not cross."""
    if excess(lo) * excess(hi) > 0:
        raise ValueError(f"{what} does not cross its level for gamma in [{lo:g}, {hi:g}]; widen it")
    return float(optimize.brentq(excess, lo, hi, xtol=xtol))


# ---------------------------------------------------------------------------- beta*
def _top_weight_beta(gap: np.ndarray, target: float) -> float:
    """beta at which the mean top weight 1 / sum_j exp(beta gap_ij) equals `target`.

    gap: (m, n) scores minus each row's top score (<= 0, so no overflow). Float32 halves the
    cost of the exponentials; the root moves by less than 1e-6 in our pilots.
    """
    gap = gap.astype(np.float32, copy=False)

    def excess(beta: float) -> float:
        return float(np.mean(1.0 / np.exp(np.float32(beta) * gap).sum(axis=1))) - target

    return float(optimize.brentq(excess, 0.0, 1e3, xtol=1e-6))


def _target(target) -> float:
    return validate.probability("target", target, open_ends=True)


def self_weight(X, beta: float, m: int | None = None) -> np.ndarray:
    """Attention of each of the first m queries on itself, A_ii = softmax_j(beta <y_i, y_j>)_i."""
    X = _tokens(X)
    beta = validate.real("beta", beta, low=0.0)
    Y, G = _query_cosines(X, m)
    return np.exp(beta * np.sum(Y[: G.shape[0]] ** 2, axis=1) - special.logsumexp(beta * G, axis=1))


def critical_beta(X, m: int | None = None, target: float = 0.5) -> float:
    """beta* at which the mean self-weight of the first m queries equals `target` (default 1/2).

    A query's top score is its own (cosine 1), so this is the top weight of `iid_critical_beta`.
    """
    X, target = _tokens(X), _target(target)
    _, G = _query_cosines(X, m)
    return _top_weight_beta(G - np.diag(G)[:, None], target)


def iid_critical_beta(n: int, m: int, seed, target: float = 0.5) -> float:
    """Contrast model: beta at which the mean top weight of softmax(beta g), g ~ N(0, 1)^n, is 1/2.

    m rows of i.i.d. scores; this beta grows like sqrt(2 log n) (Giorlandino & Goldt 2025).
    `seed` is a non-negative integer or a numpy Generator to draw from.
    """
    n, m = validate.integer("n", n, minimum=2), validate.integer("m", m, minimum=1)
    target, rng = _target(target), _generator(seed)
    g = rng.standard_normal((m, n), dtype=np.float32)  # as precise as the root needs, and faster
    return _top_weight_beta(g - g.max(axis=1, keepdims=True), target)


# ---------------------------------------------------------------------------- clusters
def _cluster_setup(X, labels, m) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Y (n, d), query cosines G (m, n), and which pairs i < j of the m rows share a cluster."""
    labels = validate.integer_array("labels", labels, ndim=1)
    validate.same_length(X=X, labels=labels)
    Y, G = _query_cosines(X, m)
    i, j = np.triu_indices(G.shape[0], k=1)
    same = labels[i] == labels[j]
    if same.all() or not same.any():
        raise ValueError("the first m rows must hold pairs within and across clusters; raise m")
    return Y, G, same


def _split_lambdas(Y: np.ndarray, G: np.ndarray, same: np.ndarray, beta: float) -> np.ndarray:
    """(lambda_in, lambda_out): Eq. 3.2 over pairs within one cluster, and across clusters."""
    ratios = _ratios_at(Y, G, beta)
    return np.array([ratios[same].mean(), ratios[~same].mean()])


def cluster_lambdas(X, labels, betas, m: int | None = None) -> np.ndarray:
    """Collapse metric within and across clusters at each beta: shape (len(betas), 2).

    Column 0 is lambda_in, Eq. 3.2 averaged over pairs of the first m rows in one cluster;
    column 1 is lambda_out, over pairs in different clusters. labels: (n,) cluster of each token.
    """
    X, betas = _tokens(X), _betas(betas)
    Y, G, same = _cluster_setup(X, labels, m)
    return np.array([_split_lambdas(Y, G, same, b) for b in betas])


def window_edges(
    X, labels, m: int | None = None, level: float = 0.5, bracket=(0.05, 10.0)
) -> tuple[float, float]:
    """Edges (gamma_lo, gamma_hi) of the content-adaptive window, with beta = gamma log n.

    Below gamma_lo, lambda_out < level: the clusters merge. Above gamma_hi, lambda_in > level:
    each query keeps to itself. In between, angles shrink within clusters and survive across.
    """
    X, level = _tokens(X), validate.probability("level", level, open_ends=True)
    lo, hi = _bracket(bracket)
    Y, G, same = _cluster_setup(X, labels, m)
    log_n = math.log(X.shape[0])

    def edge(column: int, what: str) -> float:
        excess = lambda g: _split_lambdas(Y, G, same, g * log_n)[column] - level  # noqa: E731
        return _root(excess, lo, hi, what, xtol=1e-3)

    return edge(1, "lambda_out"), edge(0, "lambda_in")


def window_limits(kappa: float, rho_in: float, rho_out: float) -> tuple[float, float]:
    """Large-n window (gamma_1, gamma_2) for clusters of n^kappa tokens (our two-level analysis).

    With beta = gamma log n a query's weight on itself, on the rest of its cluster and on the
    other clusters grows like n^gamma, n^(kappa + gamma rho_in), n^(1 + gamma rho_out). Its
    cluster outweighs the rest for gamma > (1 - kappa) / (rho_in - rho_out) = gamma_1, and the
    rest of its cluster outweighs itself for gamma < kappa / (1 - rho_in) = gamma_2.
    """
    kappa = validate.real("kappa", kappa, low=0.0, high=1.0, low_open=True, high_open=True)
    rho_in, rho_out = _levels(rho_in, rho_out)
    return (1.0 - kappa) / (rho_in - rho_out), kappa / (1.0 - rho_in)


@dataclass(frozen=True)
class ClusterLayer:
    """One attention layer on an exact two-level simplex: weight shares and collapse metrics."""

    self_share: float  # A_ii
    cluster_share: float  # sum of A_ij over the query's cluster, itself included
    lam_in: float  # collapse metric over pairs within a cluster
    lam_out: float  # collapse metric over pairs across clusters
    entropy: float  # Shannon entropy of a query's attention (nats), as in `attention_entropy`
    own_share: float  # share of the non-self attention on the rest of the query's cluster
    spread: float  # effective number of non-self keys, exp(entropy of A_ij, j != i), over n


def explicit_clusters(n: int, cluster_size: int, rho_in: float, rho_out: float) -> np.ndarray:
    """Unit tokens with cosine exactly rho_in within and rho_out across clusters, (n, 1 + K + n).

    y_i = sqrt(rho_out) e_0 + sqrt(rho_in - rho_out) f_c(i) + sqrt(1 - rho_in) g_i, all
    orthonormal; token i is in cluster i mod K, as in `make_cluster_tokens`.
    """
    n, s, rho_in, rho_out = _cluster_args(n, cluster_size, rho_in, rho_out)
    k = n // s
    Y = np.zeros((n, 1 + k + n))
    Y[:, 0] = math.sqrt(rho_out)
    Y[np.arange(n), 1 + np.arange(n) % k] = math.sqrt(rho_in - rho_out)
    Y[:, 1 + k :] = math.sqrt(1.0 - rho_in) * np.eye(n)
    return Y


def cluster_exact(
    n: float, cluster_size: float, rho_in: float, rho_out: float, beta: float
) -> ClusterLayer:
    """Exact one-layer map on the two-level simplex of `explicit_clusters` (alpha = 0).

    A query in cluster C puts a on itself, b on each of the s - 1 others in C and c on each of
    the n - s tokens outside, so x_i' = u y_i + v S_C + c S with u = a - b, v = b - c and
    S_C, S the sums over C and over all tokens. The Gram entries of y_i, S_C and S follow from
    the two cosines; lambda_in = u^2 / ||x'||^2 as on the one-level simplex, and the entropy is
    -(a log a + (s - 1) b log b + (n - s) c log c). n and s may be
    real (n up to ~1e15) so that large-n limits can be probed.
    """
    n = validate.real("n", n, low=4.0)
    s = validate.real("cluster_size", cluster_size, low=2.0, high=n / 2)
    rho_in, rho_out = _levels(rho_in, rho_out)
    beta = validate.real("beta", beta, low=0.0)
    logw = np.array([beta, beta * rho_in + math.log(s - 1), beta * rho_out + math.log(n - s)])
    log_total = special.logsumexp(logw)
    self_w, rest_w, out_w = np.exp(logw - log_total)  # shares, kept accurate
    log_each = logw - log_total - np.log([1.0, s - 1, n - s])  # log a, log b, log c
    entropy = -float(np.dot([self_w, rest_w, out_w], log_each))
    a, b, c = self_w, rest_w / (s - 1), out_w / (n - s)
    u, v = a - b, b - c
    own = 1 + (s - 1) * rho_in  # <y_i, S_C>
    total = own + (n - s) * rho_out  # <y_i, S>
    common = 2 * c * total * (u + v * s) + c**2 * n * total  # terms shared by both Gram entries
    norm_sq = u**2 + 2 * u * v * own + v**2 * s * own + common
    across = u**2 * rho_out + 2 * u * v * s * rho_out + v**2 * s**2 * rho_out + common
    lam_out = (norm_sq - across) / (norm_sq * (1 - rho_out))
    # the non-self attention, renormalised: rest_w / (1 - a) on s - 1 keys, out_w / (1 - a) on n - s
    log_rest = special.logsumexp(logw[1:])
    own, log_p = np.exp(logw[1] - log_rest), logw[1:] - log_rest - np.log([s - 1, n - s])
    spread = math.exp(-float(np.dot([own, 1 - own], log_p))) / n
    return ClusterLayer(float(a), float(a + rest_w), float(u**2 / norm_sq), float(lam_out), entropy,
                        float(own), spread)  # fmt: skip


def cluster_attention(X, labels, betas, m: int | None = None) -> np.ndarray:
    """Where the first m queries attend, at each beta: shape (len(betas), 3), means over rows of

    column 0, the self-weight A_ii; column 1, the share of the non-self attention that falls on
    the rest of the query's cluster, sum_{j != i, c(j) = c(i)} A_ij / (1 - A_ii); column 2, the
    effective number of non-self keys over n, exp(H_i) / n with H_i the entropy of A_ij / (1 -
    A_ii) over j != i. Sparse, content-adaptive attention has columns 1 -> 1 and 2 -> 0.
    """
    X, betas = _tokens(X), _betas(betas)
    labels = validate.integer_array("labels", labels, ndim=1)
    validate.same_length(X=X, labels=labels)
    _, G = _query_cosines(X, m)
    rows = np.arange(G.shape[0])
    own = labels[rows, None] == labels[None, :]
    own[rows, rows] = False

    def shares(beta: float) -> np.ndarray:
        z = beta * G
        self_w = special.softmax(z, axis=1)[rows, rows]
        z[rows, rows] = -np.inf  # the non-self attention: drop the query itself
        p = special.softmax(z, axis=1)
        entropy = special.logsumexp(z, axis=1) - np.sum(p * np.where(p > 0, z, 0.0), axis=1)
        return np.array([self_w.mean(), np.sum(p * own, axis=1).mean(),
                         np.mean(np.exp(entropy)) / X.shape[0]])  # fmt: skip

    return np.array([shares(b) for b in betas])


def exact_window_edges(
    n: float, cluster_size: float, rho_in: float, rho_out: float, level: float = 0.5
) -> tuple[float, float]:
    """`window_edges` of the exact two-level simplex: (gamma_lo, gamma_hi), beta = gamma log n."""
    level = validate.probability("level", level, open_ends=True)
    cluster_exact(n, cluster_size, rho_in, rho_out, 0.0)  # validates the design once
    log_n = math.log(n)

    def edge(field: str) -> float:
        def excess(gamma: float) -> float:
            layer = cluster_exact(n, cluster_size, rho_in, rho_out, gamma * log_n)
            return getattr(layer, field) - level

        return _root(excess, 1e-3, 1e3, field, xtol=1e-8)

    return edge("lam_out"), edge("lam_in")


# ---------------------------------------------------------------------------- gradients
def attention_torch(X, beta: float, alpha: float = 0.0):
    """The same layer in torch on all n rows, via scaled_dot_product_attention; X is (n, d)."""
    import torch
    import torch.nn.functional as F

    if not isinstance(X, torch.Tensor) or X.ndim != 2:
        raise TypeError(f"X must be a 2-D torch tensor (n, d), got {type(X).__name__}")
    beta = validate.real("beta", beta, low=0.0)
    alpha = validate.real("alpha", alpha, low=0.0)
    Y = F.normalize(X, dim=-1)
    out = F.scaled_dot_product_attention(Y[None], Y[None], Y[None], scale=beta)[0]
    return out + alpha * X


def gradient_eta(X, beta: float, n_probes: int = 2, seed: int = 0) -> tuple[float, float]:
    """Normalised gradient norm eta = ||d X' / d X||_F^2 / (n d) (Theorems 2.4-2.5); (mean, s.e.).

    Hutchinson's estimator: E ||J^T u||^2 = ||J||_F^2 for u ~ N(0, I); one forward pass, then
    `n_probes` vector-Jacobian products with torch.autograd.grad. In float32, which costs half
    of float64 here and moves eta by far less than the probes' own noise (~1%).
    """
    import torch

    X = torch.as_tensor(_tokens(X), dtype=torch.float32).requires_grad_(True)
    beta = validate.real("beta", beta, low=0.0)
    n_probes = validate.integer("n_probes", n_probes, minimum=1)
    gen = torch.Generator().manual_seed(validate.integer("seed", seed, minimum=0))
    out = attention_torch(X, beta)
    draws = []
    for k in range(n_probes):
        u = torch.randn(X.shape, generator=gen, dtype=X.dtype)
        (g,) = torch.autograd.grad(out, X, u, retain_graph=k < n_probes - 1)
        draws.append(float(g.double().pow(2).sum()) / X.numel())
    sem = float(np.std(draws, ddof=1) / math.sqrt(n_probes)) if n_probes > 1 else math.nan
    return float(np.mean(draws)), sem


def eta_supercritical(X) -> float:
    """Supercritical limit of eta: the Jacobian of y = x/||x|| alone, mean_i (1/q_i)(1 - 1/d)."""
    X = _tokens(X)
    q = np.sum(X**2, axis=1)
    return float(np.mean(1.0 / q) * (1.0 - 1.0 / X.shape[1]))


# ---------------------------------------------------------------------------- exact simplex
@dataclass(frozen=True)
class SimplexLayer:
    """One attention layer on an exact simplex: weights, output cosine and collapse metric."""

    a: float  # self-weight A_ii
    b: float  # weight on each other token, A_ij for j != i
    rho_out: float  # output cosine <y_i', y_j'>
    lam: float  # collapse metric (1 - rho_out) / (1 - rho)


def explicit_simplex(n: int, rho: float, q: float = 1.0) -> np.ndarray:
    """n tokens sqrt(q)(sqrt(rho) e_0 + sqrt(1 - rho) e_i) in R^(n+1): ||x||^2 = q, cosines rho."""
    n, rho = validate.integer("n", n, minimum=2), _rho("rho", rho)
    q = validate.real("q", q, low=0.0, low_open=True)
    X = np.zeros((n, n + 1))
    X[:, 0] = math.sqrt(rho)
    X[:, 1:] = math.sqrt(1.0 - rho) * np.eye(n)
    return math.sqrt(q) * X


def simplex_exact(n: float, rho: float, beta: float, alpha: float = 0.0, q: float = 1.0):
    """Exact one-layer map on the simplex (Assumption 1), stable in log space for n up to 1e300.

    x_i' = c y_i + b S with S = sum_k y_k and c = a - b + alpha sqrt(q), where a = e^beta / Z,
    b = e^(beta rho) / Z, Z = e^beta + (n - 1) e^(beta rho). With <y_i, S> = 1 + (n - 1) rho and
    ||S||^2 = n (1 + (n - 1) rho): lambda = c^2 / ||x_i'||^2 exactly, rho' = 1 - (1 - rho) lambda.
    """
    n, rho = validate.real("n", n, low=2.0), _rho("rho", rho)
    beta, alpha = validate.real("beta", beta, low=0.0), validate.real("alpha", alpha, low=0.0)
    q = validate.real("q", q, low=0.0, low_open=True)
    t = math.log(n - 1.0) - beta * (1.0 - rho)  # log of (n - 1) e^(-beta (1 - rho))
    a = float(special.expit(-t))
    off = float(special.expit(t))  # total off-diagonal weight (n - 1) b = 1 - a, kept accurate
    b = off / (n - 1.0)
    c = a - b + alpha * math.sqrt(q)
    cross = off * (1.0 / (n - 1.0) + rho)  # b <y_i, S>
    tail = off**2 * n / (n - 1.0) * (1.0 / (n - 1.0) + rho)  # b^2 ||S||^2
    norm_sq = c**2 + 2.0 * c * cross + tail
    lam = c**2 / norm_sq
    return SimplexLayer(a=a, b=b, rho_out=1.0 - (1.0 - rho) * lam, lam=lam)


def large_n_forms(n, rho: float, gamma) -> SimplexLayer:
    """Large-n forms at beta = gamma log n, alpha = 0: a = 1 / (1 + n^(1 - gamma / gamma_c)),

    rho' = rho / (rho + (1 - rho) a^2) and lambda = a^2 / (rho + (1 - rho) a^2); arrays broadcast.
    """
    n = validate.array("n", n, ndim=None, low=2.0)
    gamma = validate.array("gamma", gamma, ndim=None, nonnegative=True)
    rho = _rho("rho", rho)
    a = special.expit(-(1.0 - gamma / gamma_c(rho)) * np.log(n))
    den = rho + (1.0 - rho) * a**2
    return SimplexLayer(a=a, b=(1.0 - a) / (n - 1.0), rho_out=rho / den, lam=a**2 / den)


# ---------------------------------------------------------------------------- practice
def practical_beta(n, scheme: str, n_train: int, beta_train: float) -> np.ndarray:
    """Inverse temperature beta_n that a length-scaling scheme applies at context length n.

    'none': beta_train; 'qwen': times log n / log n_train for n > n_train (Qwen logn_attn);
    'ssmax': s log n with s = beta_train / log n_train at every n (Nakanishi 2025);
    'yarn': times (0.1 ln s + 1)^2, s = max(n / n_train, 1) (Peng et al. 2023).
    """
    scheme = validate.choice("scheme", scheme, SCHEMES)
    n_train = validate.integer("n_train", n_train, minimum=2)
    beta_train = validate.real("beta_train", beta_train, low=0.0)
    n = validate.array("n", n, ndim=None, low=2.0)
    ratio = np.log(n) / math.log(n_train)
    factor = {
        "none": np.ones_like(n),
        "qwen": np.maximum(ratio, 1.0),
        "ssmax": ratio,
        "yarn": (PENG2023_YARN_COEF * np.log(np.maximum(n / n_train, 1.0)) + 1.0) ** 2,
    }[scheme]
    return beta_train * factor
