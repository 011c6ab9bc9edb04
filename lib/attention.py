"""Critical attention scaling: a simplified attention layer, its collapse metric and exact forms.

The model of Chen, Lin, Polyanskiy & Rigollet (ICLR 2026, arXiv:2510.05554), Sec. 2: queries,
keys and values are the identity, tokens are pre-normalised, y_i = x_i / ||x_i||, and

    x_i' = sum_j A_ij y_j + alpha x_i,   A_ij = softmax_j(beta <y_i, y_j>),   beta = gamma log n.

With pairwise cosine rho the phase transition sits at gamma_c = 1 / (1 - rho) (Theorem 2.1).
Everything here is numpy except `attention_torch` and `gradient_eta`, which import torch lazily.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

# Peng et al. 2023 (YaRN, arXiv:2309.00071): logits are multiplied by (0.1 ln s + 1)^2,
# with s = n / n_train the context extension factor.
PENG2023_YARN_COEF = 0.1
SCHEMES = ("none", "qwen", "ssmax", "yarn")


# ---------------------------------------------------------------------------- validation
def _finite(name: str, value: float, lo: float = -math.inf, hi: float = math.inf) -> float:
    """Return value as a float if it is finite and lo <= value <= hi, else raise ValueError."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and lo <= value <= hi):
        raise ValueError(f"{name} must be finite and in [{lo}, {hi}], got {value}")
    return value


def _rho(rho: float) -> float:
    """Validate a pairwise cosine: 0 <= rho < 1 (rho = 1 means all tokens already coincide)."""
    rho = _finite("rho", rho, 0.0)
    if rho >= 1.0:
        raise ValueError(f"rho must be in [0, 1), got {rho}; rho = 1 is already collapsed")
    return rho


def _count(name: str, value: int, minimum: int) -> int:
    """Validate an integer count >= minimum."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _tokens(X) -> np.ndarray:
    """Validate a token matrix: finite, shape (n, d) with n >= 2, no zero rows."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"X must have shape (n, d) with n >= 2, got {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or inf; pass finite tokens")
    if np.any(np.linalg.norm(X, axis=1) == 0):
        raise ValueError("X has a zero row, which cannot be normalised; pass non-zero tokens")
    return X


def gamma_c(rho: float) -> float:
    """Critical scaling factor gamma_c = 1 / (1 - rho) of Theorem 2.1."""
    return 1.0 / (1.0 - _rho(rho))


# ---------------------------------------------------------------------------- simulation
def make_tokens(n: int, d: int, rho: float, seed: int) -> np.ndarray:
    """Gaussian almost-simplex tokens x_i = sqrt(rho) z_0 + sqrt(1 - rho) z_i, shape (n, d).

    z ~ N(0, I_d / d), so E||x_i||^2 = 1 and E<x_i, x_j> = rho (the paper's Sec. 3 setup).
    """
    n, d, rho = _count("n", n, 2), _count("d", d, 1), _rho(rho)
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n + 1, d)) / math.sqrt(d)
    return math.sqrt(rho) * z[:1] + math.sqrt(1.0 - rho) * z[1:]


def normalise(X) -> np.ndarray:
    """Pre-LayerNorm without gains: y_i = x_i / ||x_i||, shape (n, d)."""
    X = _tokens(X)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def attention_rows(X, beta: float, m: int | None = None, alpha: float = 0.0) -> np.ndarray:
    """Outputs x_i' of the first m query rows against all n keys, shape (m, d).

    x_i' = sum_j softmax_j(beta <y_i, y_j>) y_j + alpha x_i (Sec. 2). Tokens are exchangeable,
    so the first m rows are a uniform random subset; this costs O(m n d) instead of O(n^2 d).
    """
    X = _tokens(X)
    beta, alpha = _finite("beta", beta, 0.0), _finite("alpha", alpha, 0.0)
    m = X.shape[0] if m is None else min(_count("m", m, 2), X.shape[0])
    Y = normalise(X)
    A = special.softmax(beta * (Y[:m] @ Y.T), axis=1)
    return A @ Y + alpha * X[:m]


def collapse_metric(X, X_out) -> float:
    """Collapse metric lambda of Eq. 3.2: mean over pairs i < j of (1 - cos'_ij) / (1 - cos_ij).

    X_out holds the outputs of the first m rows of X (shape (m, d)); lambda = 0 is full
    collapse, lambda = 1 leaves every angle as it was.
    """
    X, X_out = _tokens(X), _tokens(X_out)
    m = X_out.shape[0]
    if m > X.shape[0] or X_out.shape[1] != X.shape[1]:
        raise ValueError(f"X_out must be the first m rows' outputs, got {X_out.shape} vs {X.shape}")
    Y = normalise(X[:m])
    return _lambda(Y @ Y.T, normalise(X_out))


def _lambda(cos_in: np.ndarray, Y_out: np.ndarray) -> float:
    """lambda from the (m, m) input cosines and the normalised (m, d) outputs (Eq. 3.2)."""
    i, j = np.triu_indices(Y_out.shape[0], k=1)
    cos_out = Y_out @ Y_out.T
    return float(np.mean((1.0 - cos_out[i, j]) / (1.0 - cos_in[i, j])))


def collapse_curve(X, betas, m: int | None = None) -> np.ndarray:
    """lambda at each beta in `betas` for the first m query rows (alpha = 0); shape (len(betas),).

    The (m, n) cosines are computed once, so each beta costs one softmax and one (m, n) @ (n, d).
    """
    X = _tokens(X)
    betas = np.atleast_1d(np.asarray(betas, dtype=float))
    if betas.ndim != 1 or not np.all(np.isfinite(betas)) or np.any(betas < 0):
        raise ValueError(f"betas must be a 1-D array of finite values >= 0, got {betas}")
    Y, G = _query_cosines(X, m)
    return np.array([_lambda_at(Y, G, b) for b in betas])


def _query_cosines(X: np.ndarray, m: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Normalised tokens Y (n, d) and the cosines G (m, n) of the first m queries with all keys."""
    m = X.shape[0] if m is None else min(_count("m", m, 2), X.shape[0])
    Y = normalise(X)
    return Y, Y[:m] @ Y.T


def _lambda_at(Y: np.ndarray, G: np.ndarray, beta: float) -> float:
    """lambda of the layer at inverse temperature beta, from precomputed Y and G."""
    return _lambda(G[:, : G.shape[0]], normalise(special.softmax(beta * G, axis=1) @ Y))


def mean_cosine(X) -> float:
    """Mean pairwise cosine <y_i, y_j> over i < j of a token matrix (n, d)."""
    Y = normalise(X)
    return float(np.mean((Y @ Y.T)[np.triu_indices(Y.shape[0], k=1)]))


def self_weight(X, beta: float, m: int | None = None) -> np.ndarray:
    """Attention of each of the first m queries on itself, A_ii = softmax_j(beta <y_i, y_j>)_i."""
    X = _tokens(X)
    beta = _finite("beta", beta, 0.0)
    m = X.shape[0] if m is None else min(_count("m", m, 1), X.shape[0])
    Y = normalise(X)
    scores = beta * (Y[:m] @ Y.T)
    return np.exp(beta * np.sum(Y[:m] ** 2, axis=1) - special.logsumexp(scores, axis=1))


def critical_beta(X, m: int | None = None, target: float = 0.5) -> float:
    """beta* at which the mean self-weight of the first m queries equals `target` (default 1/2)."""
    target = _finite("target", target, 0.0, 1.0)
    if not 0.0 < target < 1.0:
        raise ValueError(f"target must be strictly between 0 and 1, got {target}")
    X = _tokens(X)
    m = X.shape[0] if m is None else min(_count("m", m, 1), X.shape[0])
    Y = normalise(X)
    G = Y[:m] @ Y.T  # cosines, computed once for the whole root search
    gap = G - np.diag(G)[:, None]  # <y_i, y_j> - <y_i, y_i>; the first m columns are the queries

    def excess(beta: float) -> float:
        return float(np.mean(np.exp(-special.logsumexp(beta * gap, axis=1)))) - target

    return float(optimize.brentq(excess, 0.0, 1e4, xtol=1e-10))


def crossing_gamma(X, rho: float, m: int | None = None, bracket=(0.1, 5.0)) -> float:
    """gamma* where lambda(beta = gamma log n) crosses its critical value 1 / (1 + 3 rho).

    `bracket` is in units of gamma_c; raises ValueError if lambda does not cross inside it.
    """
    X, rho = _tokens(X), _rho(rho)
    log_n, lam_c = math.log(X.shape[0]), 1.0 / (1.0 + 3.0 * rho)
    Y, G = _query_cosines(X, m)

    def excess(gamma: float) -> float:
        return _lambda_at(Y, G, gamma * log_n) - lam_c

    lo, hi = (b * gamma_c(rho) for b in bracket)
    if excess(lo) * excess(hi) > 0:
        raise ValueError(f"lambda does not cross {lam_c:.3f} for gamma in [{lo}, {hi}]; widen it")
    return float(optimize.brentq(excess, lo, hi, xtol=1e-4))


def iid_critical_beta(n: int, m: int, seed: int, target: float = 0.5) -> float:
    """Contrast model: beta at which the mean top weight of softmax(beta g), g ~ N(0, 1)^n, is 1/2.

    With i.i.d. Gaussian scores this beta grows like sqrt(2 log n) (Giorlandino & Goldt 2025).
    """
    n, m = _count("n", n, 2), _count("m", m, 1)
    target = _finite("target", target, 0.0, 1.0)
    g = np.random.default_rng(seed).standard_normal((m, n))
    gap = g - g.max(axis=1, keepdims=True)

    def excess(beta: float) -> float:
        return float(np.mean(np.exp(-special.logsumexp(beta * gap, axis=1)))) - target

    return float(optimize.brentq(excess, 0.0, 1e4, xtol=1e-10))


# ---------------------------------------------------------------------------- gradients
def attention_torch(X, beta: float, alpha: float = 0.0):
    """The same layer in torch on all n rows, via scaled_dot_product_attention; X is (n, d)."""
    import torch.nn.functional as F

    Y = F.normalize(X, dim=-1)
    out = F.scaled_dot_product_attention(Y[None], Y[None], Y[None], scale=float(beta))[0]
    return out + alpha * X


def gradient_eta(X, beta: float, n_probes: int = 2, seed: int = 0) -> tuple[float, float]:
    """Normalised gradient norm eta = ||d X' / d X||_F^2 / (n d) (Theorems 2.4-2.5); (mean, s.e.).

    Hutchinson's estimator: E ||J^T u||^2 = ||J||_F^2 for u ~ N(0, I); one forward pass, then
    `n_probes` vector-Jacobian products with torch.autograd.grad (torch.func.vjp gives the same
    numbers but its first call cost ~9 s of set-up on our CPU).
    """
    import torch

    X = torch.as_tensor(_tokens(X)).requires_grad_(True)
    beta, n_probes = _finite("beta", beta, 0.0), _count("n_probes", n_probes, 1)
    out = attention_torch(X, beta)
    gen = torch.Generator().manual_seed(seed)
    draws = []
    for k in range(n_probes):
        u = torch.randn(X.shape, generator=gen, dtype=X.dtype)
        (g,) = torch.autograd.grad(out, X, u, retain_graph=k < n_probes - 1)
        draws.append(float(g.pow(2).sum()) / X.numel())
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
    n, rho, q = _count("n", n, 2), _rho(rho), _finite("q", q, 0.0)
    if q == 0:
        raise ValueError("q must be > 0, got 0; pass the squared token norm")
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
    n, rho = _finite("n", n, 2.0), _rho(rho)
    beta, alpha, q = _finite("beta", beta, 0.0), _finite("alpha", alpha, 0.0), _finite("q", q, 0.0)
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
    n, gamma = np.asarray(n, dtype=float), np.asarray(gamma, dtype=float)
    if not (np.all(np.isfinite(n)) and np.all(n >= 2)):
        raise ValueError(f"n must be finite and >= 2, got {n}")
    if not (np.all(np.isfinite(gamma)) and np.all(gamma >= 0)):
        raise ValueError(f"gamma must be finite and >= 0, got {gamma}")
    rho = _rho(rho)
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
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    n_train, beta_train = _count("n_train", n_train, 2), _finite("beta_train", beta_train, 0.0)
    n = np.asarray(n, dtype=float)
    if not (np.all(np.isfinite(n)) and np.all(n >= 2)):
        raise ValueError(f"n must be finite and >= 2, got {n}")
    ratio = np.log(n) / math.log(n_train)
    factor = {
        "none": np.ones_like(n),
        "qwen": np.maximum(ratio, 1.0),
        "ssmax": ratio,
        "yarn": (PENG2023_YARN_COEF * np.log(np.maximum(n / n_train, 1.0)) + 1.0) ** 2,
    }[scheme]
    return beta_train * factor
