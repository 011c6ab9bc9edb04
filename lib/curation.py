"""Data curation with an imperfect oracle: exact ridge test-error curves and simulations.

Model of Dohmatob, Pezeshki & Askari-Hemmat (ICLR 2026, arXiv:2511.03492), isotropic case:
features x ~ N(0, I_d); three unit directions, the truth w*, the label generator w_g
(labels y = sign(x.w_g)) and the oracle w_o that curates; alignments rho = <w_g, w*>,
rho* = <w_o, w*>, rho_g = <w_o, w_g>. A rule keeps sample i when q(x_i.w_o) = 1 (keep-hard
q = 1{|t| <= alpha}, keep-easy q = 1{|t| >= alpha}); the label-aware variant also requires
y_i = sign(x_i.w_o). Ridge on the kept samples, w = (X'DX/n + lam I)^-1 X'Dy/n, has test error
E = arccos(<w, w*>/|w|)/pi against the truth (exact for any fixed w).

Which part is whose:
- the four constants p, gamma, beta, beta_tilde (`curation_constants`) are the paper's
  (Theorem 1), computed here by 1-D quadrature;
- the kept-sample moments, the label-aware moments and the ridge deterministic equivalent
  (`kept_moments`, `predict_error`, `predict_collapse`) are OUR derivation of the paper's
  setting (a standard Gaussian-equivalent ridge formula applied to the two non-Gaussian
  directions); they have the paper's arccos(m0/sqrt(nu0)) form but were not compared with
  its Theorems 1 and 3 symbol by symbol.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.integrate import quad
from scipy.optimize import brentq
from scipy.stats import norm

KINDS = ("all", "random", "keep_hard", "keep_easy")
SQRT_2PI = math.sqrt(2 * math.pi)


# Scalar normal pdf and cdf for quadrature integrands: scipy.stats' per-call overhead made the
# cached constants ~30x slower to compute, and these are exact to double precision.
def _phi(t: float) -> float:
    return math.exp(-0.5 * t * t) / SQRT_2PI


def _Phi(t: float) -> float:
    return 0.5 * math.erfc(-t / math.sqrt(2))


def _check_unit_interval(name: str, value: float, closed: bool = False) -> float:
    """Return value as float if it lies in (-1, 1) (or [-1, 1] when closed), else raise."""
    value = float(value)
    ok = -1 <= value <= 1 if closed else -1 < value < 1
    if not math.isfinite(value) or not ok:
        interval = "[-1, 1]" if closed else "(-1, 1)"
        raise ValueError(f"{name}={value} must be a finite alignment in {interval}")
    return value


@dataclass(frozen=True)
class Rule:
    """A curation rule: kind, the fraction p_q = E[q(G)] that q keeps, and label awareness."""

    kind: str
    p_q: float = 1.0
    label_aware: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r} is unknown; use one of {KINDS}")
        if not (math.isfinite(self.p_q) and 0 < self.p_q <= 1):
            raise ValueError(f"p_q={self.p_q} must be a kept fraction in (0, 1]")
        if self.kind == "all" and self.p_q != 1:
            raise ValueError(f"kind='all' keeps everything, so p_q must be 1, got {self.p_q}")

    @property
    def alpha(self) -> float:
        """Margin threshold alpha with E[q(G)] = p_q, G ~ N(0, 1) (inf/0 for all/random)."""
        if self.kind == "keep_hard":  # p_q = 2 Phi(alpha) - 1
            return float(norm.ppf((1 + self.p_q) / 2))
        if self.kind == "keep_easy":  # p_q = 2 (1 - Phi(alpha))
            return float(norm.ppf(1 - self.p_q / 2))
        return math.inf if self.kind == "all" else 0.0


def _expect_even(func, rule: Rule) -> float:
    """E[q(G) f(G)] for an even function f, G ~ N(0, 1), by quadrature over g >= 0."""
    if rule.kind == "keep_hard":
        lo, hi = 0.0, rule.alpha
    elif rule.kind == "keep_easy":
        lo, hi = rule.alpha, math.inf
    else:
        lo, hi = 0.0, math.inf
    value, _ = quad(lambda g: func(g) * _phi(g), lo, hi, epsabs=1e-13, epsrel=1e-11)
    # A random rule keeps each point with probability p_q whatever its margin.
    return 2 * value * (rule.p_q if rule.kind == "random" else 1.0)


@dataclass(frozen=True)
class CurationConstants:
    """The paper's four constants of a label-agnostic rule (Theorem 1 of dohmatob2025curation)."""

    p: float
    gamma: float
    beta: float
    beta_tilde: float


def curation_constants(rule: Rule, rho_g: float) -> CurationConstants:
    """p = E[q], gamma = E[q G^2], beta = 2E[q phi(tau G)], beta~ = 2E[q Phi(tau G) G].

    tau = rho_g / sqrt(1 - rho_g^2). By symmetry of q, E[q G] = 0, so beta~ is computed as
    2E[q G (Phi(tau G) - 1/2)], whose integrand is even.
    """
    tau = _tau(rho_g)
    return CurationConstants(
        p=_expect_even(lambda g: 1.0, rule),
        gamma=_expect_even(lambda g: g * g, rule),
        beta=2 * _expect_even(lambda g: _phi(tau * g), rule),
        beta_tilde=2 * _expect_even(lambda g: g * (_Phi(tau * g) - 0.5), rule),
    )


def _tau(rho_g: float) -> float:
    rho_g = _check_unit_interval("rho_g", rho_g)
    return rho_g / math.sqrt(1 - rho_g**2)


@dataclass(frozen=True)
class KeptMoments:
    """Moments of kept samples in the basis (w_o, u): kept fraction p, M (2, 2) and b (2,).

    M = E[k v v']/p and b = E[k y v]/p for v = (x.w_o, x.u), u the unit part of w_g
    orthogonal to w_o; theta = M^-1 b is the best linear predictor of y on kept samples and
    sigma2 = 1 - b'theta its residual (the sign nonlinearity acts as noise).
    """

    p: float
    M: np.ndarray
    b: np.ndarray

    @property
    def theta(self) -> np.ndarray:
        return np.linalg.solve(self.M, self.b)

    @property
    def sigma2(self) -> float:
        return float(1.0 - self.b @ self.theta)


@lru_cache(maxsize=4096)
def kept_moments(rule: Rule, rho_g: float) -> KeptMoments:
    """Kept-sample moments by 1-D quadrature (our derivation; cached, no n, d or lambda)."""
    tau = _tau(rho_g)
    if not rule.label_aware:  # M = diag(gamma/p, 1), b = (beta~, beta)/p
        c = curation_constants(rule, rho_g)
        M, b, p = np.diag([c.gamma / c.p, 1.0]), np.array([c.beta_tilde, c.beta]) / c.p, c.p
    else:  # also keep only y = sign(g): P(agree | g) = Phi(tau |g|); integrands even in g
        agree = lambda g: _Phi(tau * abs(g))  # noqa: E731
        p = _expect_even(agree, rule)
        m00 = _expect_even(lambda g: g * g * agree(g), rule)
        m01 = _expect_even(lambda g: abs(g) * _phi(tau * g), rule)
        m11 = _expect_even(lambda g: agree(g) - tau * abs(g) * _phi(tau * g), rule)
        b0 = _expect_even(lambda g: abs(g) * agree(g), rule)
        b1 = _expect_even(lambda g: _phi(tau * g), rule)
        M, b = np.array([[m00, m01], [m01, m11]]) / p, np.array([b0, b1]) / p
    M.setflags(write=False)
    b.setflags(write=False)
    return KeptMoments(p=float(p), M=M, b=b)


@dataclass(frozen=True)
class Geometry:
    """Alignments: rho = <w_g, w*>, rho_star = <w_o, w*>, rho_g = <w_o, w_g> (unit vectors)."""

    rho: float
    rho_star: float
    rho_g: float

    def __post_init__(self) -> None:
        _check_unit_interval("rho", self.rho, closed=True)
        _check_unit_interval("rho_star", self.rho_star)  # the oracle never is the truth
        _check_unit_interval("rho_g", self.rho_g)
        if self.w_star_coords()[2] < -1e-12:
            raise ValueError(
                f"alignments rho={self.rho}, rho_star={self.rho_star}, rho_g={self.rho_g} are "
                "not realisable by three unit vectors (Gram matrix not positive semidefinite)"
            )

    def w_star_coords(self) -> np.ndarray:
        """w* in the basis (w_o, u, rest) as (rho*, c1, c2^2) with c2^2 = 1 - rho*^2 - c1^2."""
        s = math.sqrt(1 - self.rho_g**2)
        c1 = (self.rho - self.rho_g * self.rho_star) / s
        return np.array([self.rho_star, c1, 1.0 - self.rho_star**2 - c1**2])


def independent_errors(rho: float, rho_star: float) -> Geometry:
    """Geometry in which generator and oracle err in orthogonal directions: rho_g = rho rho*."""
    return Geometry(rho=rho, rho_star=rho_star, rho_g=rho * rho_star)


@dataclass(frozen=True)
class RidgePrediction:
    """Deterministic-equivalent prediction: test error, cosines of w with w* and w_o, kappa."""

    error: float
    cos_star: float
    cos_o: float
    kappa: float


def _check_sizes(n: float, d: int, lam: float) -> None:
    if not (math.isfinite(n) and n > 0):
        raise ValueError(f"n={n} must be a positive number of samples")
    if int(d) != d or d < 3:
        raise ValueError(f"d={d} must be an integer dimension >= 3")
    if not (math.isfinite(lam) and lam > 0):
        raise ValueError(f"lam={lam} must be a positive ridge penalty (use e.g. 1e-8 for OLS)")


def predict_error(n: float, d: int, lam: float, geometry: Geometry, rule: Rule) -> RidgePrediction:
    """Our proportional-limit ridge equivalent on kept samples (n_k = p n, lam_k = lam/p).

    kappa solves kappa = lam_k + (kappa/n_k) tr S(S+kappa)^-1 with S = diag(M, I_{d-2});
    mean m = (M+kappa)^-1 M theta; tau2 = (sigma2 + kappa^2 theta'M(M+kappa)^-2 theta) /
    (1 - tr S^2(S+kappa)^-2 / n_k); |w|^2 = |m|^2 + (tau2/n_k) tr S(S+kappa)^-2;
    E = arccos(e*'m / |w|)/pi.
    """
    _check_sizes(n, d, lam)
    mom = kept_moments(rule, geometry.rho_g)
    n_k, lam_k = mom.p * n, lam / mom.p
    mu, V = np.linalg.eigh(mom.M)
    theta_v = V.T @ mom.theta  # theta in M's eigenbasis

    def excess(kappa: float) -> float:  # kappa (1 - df1/n_k) - lam_k, increasing in kappa
        df1 = (d - 2) / (1 + kappa) + np.sum(mu / (mu + kappa))
        return kappa * (1 - df1 / n_k) - lam_k

    hi = lam_k + 1.0
    while excess(hi) <= 0:
        hi *= 2
    kappa = brentq(excess, 0.0, hi, xtol=1e-15, rtol=1e-13)
    df2 = (d - 2) / (1 + kappa) ** 2 + np.sum(mu**2 / (mu + kappa) ** 2)
    bias = kappa**2 * np.sum(mu * theta_v**2 / (mu + kappa) ** 2)
    tau2 = (mom.sigma2 + bias) / (1 - df2 / n_k)
    m = V @ (mu / (mu + kappa) * theta_v)
    trace = (d - 2) / (1 + kappa) ** 2 + np.sum(mu / (mu + kappa) ** 2)
    norm_w = math.sqrt(m @ m + tau2 * trace / n_k)
    cos_star = float(geometry.w_star_coords()[:2] @ m / norm_w)
    return RidgePrediction(error_from_cos(cos_star), cos_star, float(m[0] / norm_w), kappa)


def error_from_cos(cos: float | np.ndarray) -> float | np.ndarray:
    """Test error P(sign(x.w) != sign(x.w*)) = arccos(cos(w, w*))/pi for x ~ N(0, I)."""
    cos = np.asarray(cos, dtype=float)
    if not np.all(np.isfinite(cos)) or np.any(np.abs(cos) > 1 + 1e-9):
        raise ValueError(f"cos={cos} must be finite cosines in [-1, 1]")
    out = np.arccos(np.clip(cos, -1.0, 1.0)) / np.pi
    return float(out) if out.ndim == 0 else out


def predict_best_lambda(
    n: float, d: int, lams: tuple[float, ...], geometry: Geometry, rule: Rule
) -> tuple[float, float]:
    """Smallest predicted error over a fixed ridge grid `lams`; returns (error, best lam)."""
    if len(lams) == 0:
        raise ValueError("lams is empty; pass a grid of positive penalties, e.g. (0.01, 0.1, 1)")
    errors = [predict_error(n, d, lam, geometry, rule).error for lam in lams]
    best = int(np.argmin(errors))
    return errors[best], float(lams[best])


def predict_collapse(
    n: float, d: int, lam: float, rho0: float, rho_star: float, rule: Rule, rounds: int
) -> np.ndarray:
    """Errors over self-training rounds (rounds+1,), round 0 = the first generator's error.

    Our map: the fluctuation of w is asymptotically orthogonal to span(w*, w_o), so the next
    generator w/|w| has alignments (cos_star, cos_o); the oracle w_o stays fixed.
    """
    if int(rounds) != rounds or rounds < 1:
        raise ValueError(f"rounds={rounds} must be a positive integer")
    geometry = independent_errors(rho0, rho_star)
    errors = [error_from_cos(rho0)]
    for _ in range(rounds):
        pred = predict_error(n, d, lam, geometry, rule)
        errors.append(pred.error)
        geometry = Geometry(rho=pred.cos_star, rho_star=rho_star, rho_g=pred.cos_o)
    return np.array(errors)


# ---- Simulation ----------------------------------------------------------------------------


def make_directions(
    geometry: Geometry, d: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit vectors (w*, w_g, w_o) in R^d with the exact alignments, by QR of 3 Gaussians."""
    if int(d) != d or d < 3:
        raise ValueError(f"d={d} must be an integer dimension >= 3")
    Q, _ = np.linalg.qr(rng.standard_normal((int(d), 3)))
    s = math.sqrt(1 - geometry.rho_star**2)
    c1 = (geometry.rho_g - geometry.rho * geometry.rho_star) / s  # w_g along Q[:, 1]
    c2 = math.sqrt(max(1 - geometry.rho**2 - c1**2, 0.0))
    w_star = Q[:, 0]
    w_o = geometry.rho_star * Q[:, 0] + s * Q[:, 1]
    w_g = geometry.rho * Q[:, 0] + c1 * Q[:, 1] + c2 * Q[:, 2]
    return w_star, w_g / np.linalg.norm(w_g), w_o


def keep_mask(rule: Rule, g: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Boolean keep indicator from oracle margins g = X w_o (n,) and labels y (n,) in {-1, 1}."""
    g, y = np.asarray(g, dtype=float), np.asarray(y, dtype=float)
    if g.shape != y.shape or g.ndim != 1:
        raise ValueError(f"g and y must be 1-D of one length, got {g.shape} and {y.shape}")
    if rule.kind == "keep_hard":
        keep = np.abs(g) <= rule.alpha
    elif rule.kind == "keep_easy":
        keep = np.abs(g) >= rule.alpha
    elif rule.kind == "random":
        keep = rng.random(g.shape) < rule.p_q
    else:
        keep = np.ones(g.shape, dtype=bool)
    if rule.label_aware:
        keep &= y == np.where(g >= 0, 1.0, -1.0)
    return keep


def fit_ridge(X: np.ndarray, y: np.ndarray, keep: np.ndarray, lams: np.ndarray) -> np.ndarray:
    """Ridge w = (X'DX/n + lam I)^-1 X'Dy/n for each lam; X (n, d) -> weights (len(lams), d).

    One eigendecomposition of X'DX/n serves every penalty of the grid.
    """
    lams = np.atleast_1d(np.asarray(lams, dtype=float))
    if X.ndim != 2 or y.shape != (X.shape[0],) or keep.shape != y.shape:
        shapes = f"{X.shape}, {y.shape}, {keep.shape}"
        raise ValueError(f"need X (n, d), y (n,), keep (n,); got {shapes}")
    if not np.all(np.isfinite(lams)) or np.any(lams <= 0):
        raise ValueError(f"lams={lams} must be positive finite ridge penalties")
    n = X.shape[0]
    Xk, yk = X[keep], y[keep]
    evals, U = np.linalg.eigh(Xk.T @ Xk / n)
    proj = U.T @ (Xk.T @ yk / n)
    return (proj[None, :] / (evals[None, :] + lams[:, None])) @ U.T


def _cosines(W: np.ndarray, w: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(W, axis=-1)
    return np.where(norms > 0, W @ w / np.where(norms > 0, norms, 1.0), 0.0)


def simulate_errors(
    n: int, d: int, lams, geometry: Geometry, rules: list[Rule], seed: int | list[int]
) -> np.ndarray:
    """Test errors (len(rules), len(lams)) of ridge on one draw of n samples, curated by each rule.

    All rules see the same features and labels, so rule-to-rule differences are paired.
    """
    _check_sizes(n, d, float(np.min(lams)))
    rng = np.random.default_rng(seed)
    w_star, w_g, w_o = make_directions(geometry, d, rng)
    X = rng.standard_normal((int(n), int(d)))
    y = np.where(X @ w_g >= 0, 1.0, -1.0)
    g = X @ w_o
    out = np.empty((len(rules), np.size(lams)))
    for i, rule in enumerate(rules):
        W = fit_ridge(X, y, keep_mask(rule, g, y, rng), np.asarray(lams, dtype=float))
        out[i] = error_from_cos(_cosines(W, w_star))
    return out


def simulate_collapse(
    n: int, d: int, lam: float, rho0: float, rho_star: float, rule: Rule, rounds: int, seed
) -> np.ndarray:
    """Simulated errors (rounds+1,) when each round's ridge model labels the next round's data."""
    _check_sizes(n, d, lam)
    if int(rounds) != rounds or rounds < 1:
        raise ValueError(f"rounds={rounds} must be a positive integer")
    rng = np.random.default_rng(seed)
    w_star, w_gen, w_o = make_directions(independent_errors(rho0, rho_star), d, rng)
    errors = [error_from_cos(w_gen @ w_star)]
    for _ in range(rounds):
        X = rng.standard_normal((int(n), int(d)))
        y = np.where(X @ w_gen >= 0, 1.0, -1.0)
        w = fit_ridge(X, y, keep_mask(rule, X @ w_o, y, rng), np.array([lam]))[0]
        w_gen = w / np.linalg.norm(w)
        errors.append(error_from_cos(w_gen @ w_star))
    return np.array(errors)


def simulate_seeds(
    n: int, d: int, lams, geometry: Geometry, rules: list[Rule], n_seeds: int, key: tuple
) -> np.ndarray:
    """`simulate_errors` for seeds [*key, s], s < n_seeds -> (n_seeds, len(rules), len(lams))."""
    if int(n_seeds) != n_seeds or n_seeds < 2:
        raise ValueError(f"n_seeds={n_seeds} must be an integer >= 2 (for a standard error)")
    draws = [simulate_errors(n, d, lams, geometry, rules, [*key, s]) for s in range(n_seeds)]
    return np.stack(draws)
