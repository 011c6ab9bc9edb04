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
  its Theorems 1 and 3 symbol by symbol;
- the critical data size n*/d at which a curated set starts to beat the full set
  (`critical_ratios`) is the root of our formula's tuned-ridge error difference: the
  "phase transition curve tied to data size and quality" of the paper's abstract.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np
from scipy.integrate import quad
from scipy.optimize import brentq, least_squares, minimize_scalar

from lib import validate

KINDS = ("all", "random", "keep_hard", "keep_easy", "bands")
MIN_BAND = 0.05  # matched_bands: narrowest band or gap of a match that is not degenerate
LOG10_LAMBDA_RANGE = (-4.0, 2.0)  # ridge penalties searched when tuning: 1e-4 to 100
SQRT_2PI = math.sqrt(2 * math.pi)
_NORMAL = NormalDist()  # its inverse cdf is exact and ~50x cheaper per call than scipy's


# Scalar normal pdf and cdf for quadrature integrands: scipy.stats' per-call overhead made the
# cached constants ~30x slower to compute, and these are exact to double precision.
def _phi(t: float) -> float:
    return math.exp(-0.5 * t * t) / SQRT_2PI


def _Phi(t: float) -> float:
    return 0.5 * math.erfc(-t / math.sqrt(2))


def _instance(name: str, value, kind: type):
    """Return value if it is a `kind`, else a TypeError naming the argument."""
    if not isinstance(value, kind):
        raise TypeError(
            f"{name} must be a {kind.__name__}, got {type(value).__name__} {value!r}; "
            f"build one with {kind.__name__}(...)"
        )
    return value


@dataclass(frozen=True)
class Rule:
    """A curation rule: kind, the fraction p_q = E[q(G)] that q keeps, and label awareness.

    kind 'bands' keeps |t| in [e0, e1] u [e2, e3] u ... for `edges` (e0 < e1 < ...; build it
    with `band_rule`, which sets p_q); the other kinds take no edges.
    """

    kind: str
    p_q: float = 1.0
    label_aware: bool = False
    edges: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        validate.choice("kind", self.kind, KINDS)
        p_q = validate.real("p_q", self.p_q, low=0.0, high=1.0, low_open=True)
        validate.boolean("label_aware", self.label_aware)
        if self.kind == "all" and p_q != 1:
            raise ValueError(f"kind='all' keeps everything, so p_q must be 1, got {p_q}")
        if (self.kind == "bands") != bool(self.edges):
            raise ValueError(
                f"edges go with kind='bands' only (kind={self.kind!r}, edges={self.edges!r}); "
                "build a band rule with band_rule((e0, e1, ...))"
            )
        if self.kind == "bands" and abs(p_q - _band_mass(self.edges)) > 1e-9:
            raise ValueError(f"p_q={p_q} is not the mass of bands {self.edges}; use band_rule")

    @property
    def alpha(self) -> float:
        """Margin threshold alpha with E[q(G)] = p_q, G ~ N(0, 1) (inf/0 for all/random)."""
        if self.kind == "keep_hard":  # p_q = 2 Phi(alpha) - 1
            return _NORMAL.inv_cdf((1 + self.p_q) / 2)
        if self.kind == "keep_easy":  # p_q = 2 (1 - Phi(alpha))
            return _NORMAL.inv_cdf(1 - self.p_q / 2)
        return {"all": math.inf, "random": 0.0}.get(self.kind, math.nan)  # bands: see edges


def _band_mass(edges: tuple[float, ...]) -> float:
    """P(|G| in the bands) = 2 sum (Phi(e_2k+1) - Phi(e_2k)) for G ~ N(0, 1)."""
    return 2 * sum(_Phi(hi) - _Phi(lo) for lo, hi in zip(edges[::2], edges[1::2], strict=True))


def band_rule(edges: Sequence[float], label_aware: bool = False) -> Rule:
    """Rule keeping |x.w_o| in [e0, e1] u [e2, e3] u ...: an even number of finite, increasing
    margins >= 0; its p_q is the kept mass."""
    edges = tuple(float(e) for e in validate.array("edges", edges, min_size=2))
    if len(edges) % 2 or edges[0] < 0 or np.any(np.diff(edges) <= 0):
        raise ValueError(
            f"edges must be an even number of increasing margins >= 0 (pairs [lo, hi]), got "
            f"{edges}; e.g. (0.3, 1.2)"
        )
    return Rule("bands", _band_mass(edges), label_aware, edges)


FULL = Rule("all")  # the full data set, the baseline every curated set is compared with


def _expect_even(func, rule: Rule) -> float:
    """E[q(G) f(G)] for an even function f, G ~ N(0, 1), by quadrature over g >= 0."""
    if rule.kind == "bands":
        bands = list(zip(rule.edges[::2], rule.edges[1::2], strict=True))
        return 2 * sum(quad(lambda g: func(g) * _phi(g), lo, hi, epsabs=1e-13, epsrel=1e-11)[0]
                       for lo, hi in bands)  # fmt: skip
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


def _tau(rho_g) -> float:
    """tau = rho_g / sqrt(1 - rho_g^2) for an oracle-generator alignment in (-1, 1)."""
    rho_g = validate.real("rho_g", rho_g, low=-1.0, high=1.0, low_open=True, high_open=True)
    return rho_g / math.sqrt(1 - rho_g**2)


def curation_constants(rule: Rule, rho_g: float) -> CurationConstants:
    """p = E[q], gamma = E[q G^2], beta = 2E[q phi(tau G)], beta~ = 2E[q Phi(tau G) G].

    tau = rho_g / sqrt(1 - rho_g^2). By symmetry of q, E[q G] = 0, so beta~ is computed as
    2E[q G (Phi(tau G) - 1/2)], whose integrand is even.
    """
    _instance("rule", rule, Rule)
    tau = _tau(rho_g)
    return CurationConstants(
        p=_expect_even(lambda g: 1.0, rule),
        gamma=_expect_even(lambda g: g * g, rule),
        beta=2 * _expect_even(lambda g: _phi(tau * g), rule),
        beta_tilde=2 * _expect_even(lambda g: g * (_Phi(tau * g) - 0.5), rule),
    )


def _constants_vector(rule: Rule, rho_g: float) -> np.ndarray:
    c = curation_constants(rule, rho_g)
    return np.array([c.p, c.gamma, c.beta, c.beta_tilde])


def matched_bands(rule: Rule, rho_g: float, core: float, start: Sequence[float]) -> Rule:
    """A rule with the same four Theorem 1 constants (p, gamma, beta, beta~) as `rule`, but
    another shape: it keeps |t| <= core and two bands [e0, e1] u [e2, e3] beyond it.

    Solves the 4 equations for the 4 edges by least squares from `start` (4 increasing edges
    above core, kept increasing as cumulative exponentials); raises if no exact match.
    """
    _instance("rule", rule, Rule)
    core = validate.real("core", core, low=0.0, low_open=True)
    start = validate.array("start", start, positive=True)
    if start.size != 4 or start[0] <= core or np.any(np.diff(start) <= 0):
        raise ValueError(f"start must be 4 increasing edges above core={core}, got {start}")
    target = _constants_vector(rule, rho_g)
    edges = lambda z: (0.0, core, *(core + np.cumsum(np.exp(z))).tolist())  # noqa: E731
    misfit = lambda z: _constants_vector(band_rule(edges(z)), rho_g) - target  # noqa: E731
    failure = f"no rule [0, {core}] + two bands matches {rule} at rho_g={rho_g} from {start}"
    return _solve_edges(misfit, edges, np.log(np.diff(start, prepend=core)), failure,
                        "try other start edges or another core")  # fmt: skip


def _solve_edges(misfit, edges, z0: np.ndarray, failure: str, remedy: str) -> Rule:
    """The band rule at edges(z) for the z that solves misfit(z) = 0 by least squares from z0;
    ValueError (`failure`, the residual, `remedy`) if no exact solution whose band widths and
    gaps are all at least MIN_BAND is found there."""
    fit = least_squares(misfit, z0, xtol=1e-15, ftol=1e-15, gtol=1e-15)
    residual = np.abs(fit.fun).max()
    if residual > 1e-9 or np.diff(edges(fit.x)).min() < MIN_BAND:
        raise ValueError(f"{failure} with widths and gaps >= {MIN_BAND} (residual "
                         f"{residual:.1e}); {remedy}")  # fmt: skip
    return band_rule(edges(fit.x))


CONSTANT_NAMES = ("p", "gamma", "beta", "beta_tilde")  # Theorem 1's constants, in this order


def mismatched_bands(rule: Rule, rho_g: float, constant: str, factor: float,
                     start: Sequence[float]) -> Rule:  # fmt: skip
    """A rule [0, e0] u [e1, e2] u [e3, e4] whose Theorem 1 constants equal `rule`'s except
    `constant` (one of CONSTANT_NAMES), which is `factor` times `rule`'s: three matched, one not.

    Solves the 4 equations for the 5 edges by least squares from `start` (5 increasing edges,
    kept increasing as cumulative exponentials); raises if no exact solution is found there.
    """
    _instance("rule", rule, Rule)
    validate.choice("constant", constant, CONSTANT_NAMES)
    factor = validate.real("factor", factor, low=0.0, low_open=True)
    start = validate.array("start", start, positive=True)
    if start.size != 5 or np.any(np.diff(start) <= 0):
        raise ValueError(f"start must be 5 increasing edges > 0, got {start}")
    target = _constants_vector(rule, rho_g)
    target[CONSTANT_NAMES.index(constant)] *= factor
    edges = lambda z: (0.0, *np.cumsum(np.exp(z)).tolist())  # noqa: E731
    misfit = lambda z: _constants_vector(band_rule(edges(z)), rho_g) / target - 1  # noqa: E731
    return _solve_edges(misfit, edges, np.log(np.diff(start, prepend=0.0)),
                        f"no rule of three bands has {rule}'s constants with {constant} x "
                        f"{factor} at rho_g={rho_g} from start {tuple(start)}",
                        "try another factor or start")  # fmt: skip


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


def kept_moments(rule: Rule, rho_g: float) -> KeptMoments:
    """Kept-sample moments by 1-D quadrature (our derivation; cached, no n, d or lambda)."""
    _instance("rule", rule, Rule)
    _tau(rho_g)  # validates rho_g before it becomes a cache key
    return _kept_moments(rule, float(rho_g))


@lru_cache(maxsize=4096)
def _kept_moments(rule: Rule, rho_g: float) -> KeptMoments:
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
        validate.real("rho", self.rho, low=-1.0, high=1.0)
        # The oracle never is the truth (rho_star < 1), and never is the generator.
        validate.real("rho_star", self.rho_star, low=-1.0, high=1.0, low_open=True, high_open=True)
        validate.real("rho_g", self.rho_g, low=-1.0, high=1.0, low_open=True, high_open=True)
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
    rho = validate.real("rho", rho, low=-1.0, high=1.0)
    rho_star = validate.real("rho_star", rho_star, low=-1.0, high=1.0, low_open=True,
                             high_open=True)  # fmt: skip
    return Geometry(rho=rho, rho_star=rho_star, rho_g=rho * rho_star)


@dataclass(frozen=True)
class RidgePrediction:
    """Deterministic-equivalent prediction: test error, cosines of w with w* and w_o, kappa."""

    error: float
    cos_star: float
    cos_o: float
    kappa: float


def _sizes(n, d, lam) -> tuple[float, int, float]:
    """Validated sample size n > 0, dimension d >= 3 and ridge penalty lam > 0."""
    n = validate.real("n", n, low=0.0, low_open=True)
    d = validate.integer("d", d, minimum=3)
    lam = validate.real("lam", lam, low=0.0, low_open=True)
    return n, d, lam


def predict_error(n: float, d: int, lam: float, geometry: Geometry, rule: Rule) -> RidgePrediction:
    """Our proportional-limit ridge equivalent on kept samples (n_k = p n, lam_k = lam/p).

    kappa solves kappa = lam_k + (kappa/n_k) tr S(S+kappa)^-1 with S = diag(M, I_{d-2});
    mean m = (M+kappa)^-1 M theta; s2 = (sigma2 + kappa^2 theta'M(M+kappa)^-2 theta) /
    (1 - tr S^2(S+kappa)^-2 / n_k); |w|^2 = |m|^2 + (s2/n_k) tr S(S+kappa)^-2;
    E = arccos(e*'m / |w|)/pi, the paper's arccos(m0 / sqrt(nu0))/pi with (our reading)
    m0 = e*'m, the limit of <w, w*>, and nu0 = |w|^2.
    """
    n, d, lam = _sizes(n, d, lam)
    _instance("geometry", geometry, Geometry)
    mom = kept_moments(_instance("rule", rule, Rule), geometry.rho_g)
    return _predict(n, d, lam, geometry, mom)


def _predict(n: float, d: int, lam: float, geometry: Geometry, mom: KeptMoments) -> RidgePrediction:
    """predict_error without validation; the 2x2 algebra in Python floats for speed."""
    n_k, lam_k = mom.p * n, lam / mom.p
    mu, V = np.linalg.eigh(mom.M)
    (mu0, mu1), (t0, t1) = mu.tolist(), (V.T @ mom.theta).tolist()  # theta in M's eigenbasis
    bulk = d - 2

    def excess(kappa: float) -> float:  # kappa (1 - df1/n_k) - lam_k, increasing in kappa
        df1 = bulk / (1 + kappa) + mu0 / (mu0 + kappa) + mu1 / (mu1 + kappa)
        return kappa * (1 - df1 / n_k) - lam_k

    hi = lam_k + 1.0
    while excess(hi) <= 0:
        hi *= 2
    kappa = brentq(excess, 0.0, hi, xtol=1e-15, rtol=1e-13)
    a0, a1 = mu0 + kappa, mu1 + kappa
    df2 = bulk / (1 + kappa) ** 2 + (mu0 / a0) ** 2 + (mu1 / a1) ** 2
    bias = kappa**2 * (mu0 * t0**2 / a0**2 + mu1 * t1**2 / a1**2)
    s2 = (mom.sigma2 + bias) / (1 - df2 / n_k)
    m = V @ np.array([mu0 / a0 * t0, mu1 / a1 * t1])
    trace = bulk / (1 + kappa) ** 2 + mu0 / a0**2 + mu1 / a1**2
    norm_w = math.sqrt(float(m @ m) + s2 * trace / n_k)
    cos_star = float(geometry.w_star_coords()[:2] @ m / norm_w)
    return RidgePrediction(error_from_cos(cos_star), cos_star, float(m[0] / norm_w), kappa)


def error_from_cos(cos: float | np.ndarray) -> float | np.ndarray:
    """Test error P(sign(x.w) != sign(x.w*)) = arccos(cos(w, w*))/pi for x ~ N(0, I)."""
    cos = validate.array("cos", cos, ndim=None)
    if np.any(np.abs(cos) > 1 + 1e-9):
        raise ValueError(f"cos must be cosines in [-1, 1], got max |cos| {np.abs(cos).max():g}")
    out = np.arccos(np.clip(cos, -1.0, 1.0)) / np.pi
    return float(out) if out.ndim == 0 else out


def predict_best_lambda(
    n: float, d: int, lams: Sequence[float], geometry: Geometry, rule: Rule
) -> tuple[float, float]:
    """Smallest predicted error over a fixed ridge grid `lams`; returns (error, best lam)."""
    lams = validate.array("lams", lams, positive=True)
    errors = [predict_error(n, d, lam, geometry, rule).error for lam in lams]
    best = int(np.argmin(errors))
    return errors[best], float(lams[best])


def predict_tuned(n: float, d: int, geometry: Geometry, rule: Rule) -> tuple[float, float]:
    """Predicted error with the ridge penalty tuned on [1e-4, 100]; returns (error, lam).

    A grid of one point per decade finds the basin and a bounded Brent search in log10 lam
    refines it: the learner gets its best penalty, as if tuned on an ideal validation set.
    """
    n, d, _ = _sizes(n, d, 1.0)
    _instance("geometry", geometry, Geometry)
    mom = kept_moments(_instance("rule", rule, Rule), geometry.rho_g)
    error = lambda t: _predict(n, d, 10.0**t, geometry, mom).error  # noqa: E731
    grid = np.linspace(*LOG10_LAMBDA_RANGE, 7)
    k = int(np.argmin([error(t) for t in grid]))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
    best = minimize_scalar(error, bounds=(lo, hi), method="bounded", options={"xatol": 1e-3})
    return float(best.fun), float(10.0**best.x)


def curation_gain(ratio: float, d: int, geometry: Geometry, rule: Rule) -> float:
    """E(rule) - E(full set) at n = ratio * d, each with its tuned penalty (< 0: less is more)."""
    ratio = validate.real("ratio", ratio, low=0.0, low_open=True)
    d = validate.integer("d", d, minimum=3)
    curated = predict_tuned(ratio * d, d, geometry, rule)[0]
    return curated - predict_tuned(ratio * d, d, geometry, FULL)[0]


def critical_ratios(
    d: int,
    geometry: Geometry,
    rule: Rule,
    grid: Sequence[float] = tuple(np.geomspace(0.5, 1e3, 25)),
) -> tuple[float, ...]:
    """Data sizes n*/d where `curation_gain` changes sign: the phase boundaries in n/d.

    The gain is scanned on `grid` (n/d values, increasing) and each sign change is refined by
    Brent's method in log(n/d); an empty tuple means the same regime over the whole grid.
    """
    grid = validate.array("grid", grid, positive=True, min_size=2)
    if np.any(np.diff(grid) <= 0):
        raise ValueError("grid must be increasing n/d values, e.g. np.geomspace(0.5, 1e3, 25)")
    gain = lambda log_r: curation_gain(math.exp(log_r), d, geometry, rule)  # noqa: E731
    signs = np.sign([gain(math.log(r)) for r in grid])
    return tuple(
        math.exp(brentq(gain, math.log(grid[i]), math.log(grid[i + 1]), xtol=1e-5))
        for i in range(grid.size - 1)
        if signs[i] * signs[i + 1] < 0
    )


def predict_collapse(
    n: float, d: int, lam: float, rho0: float, rho_star: float, rule: Rule, rounds: int
) -> np.ndarray:
    """Errors over self-training rounds (rounds+1,), round 0 = the first generator's error.

    Our map: the fluctuation of w is asymptotically orthogonal to span(w*, w_o), so the next
    generator w/|w| has alignments (cos_star, cos_o); the oracle w_o stays fixed.
    """
    rounds = validate.integer("rounds", rounds, minimum=1)
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
    _instance("geometry", geometry, Geometry)
    d = validate.integer("d", d, minimum=3)
    _instance("rng", rng, np.random.Generator)
    Q, _ = np.linalg.qr(rng.standard_normal((d, 3)))
    s = math.sqrt(1 - geometry.rho_star**2)
    c1 = (geometry.rho_g - geometry.rho * geometry.rho_star) / s  # w_g along Q[:, 1]
    c2 = math.sqrt(max(1 - geometry.rho**2 - c1**2, 0.0))
    w_star = Q[:, 0]
    w_o = geometry.rho_star * Q[:, 0] + s * Q[:, 1]
    w_g = geometry.rho * Q[:, 0] + c1 * Q[:, 1] + c2 * Q[:, 2]
    return w_star, w_g / np.linalg.norm(w_g), w_o


def keep_mask(rule: Rule, g, y, rng: np.random.Generator) -> np.ndarray:
    """Boolean keep indicator from oracle margins g = X w_o (n,) and labels y (n,) in {-1, 1}."""
    _instance("rule", rule, Rule)
    g, y = validate.array("g", g), validate.array("y", y)
    validate.same_length(g=g, y=y)
    return _keep(rule, g, y, _instance("rng", rng, np.random.Generator))


def _keep(rule: Rule, g: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """keep_mask without validation, for the simulation loops."""
    if rule.kind == "bands":  # inside a band: an odd number of edges lie at or below |g|
        keep = np.searchsorted(rule.edges, np.abs(g), side="right") % 2 == 1
    elif rule.kind == "keep_hard":
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


def fit_ridge(X, y, keep, lams) -> np.ndarray:
    """Ridge w = (X'DX/n + lam I)^-1 X'Dy/n for each lam; X (n, d) -> weights (len(lams), d).

    A few penalties are solved directly; a longer grid shares one eigendecomposition.
    """
    X, y = validate.array("X", X, ndim=2), validate.array("y", y)
    lams = validate.array("lams", np.atleast_1d(lams), positive=True)
    if not isinstance(keep, np.ndarray) or keep.dtype != bool or keep.shape != y.shape:
        raise TypeError(f"keep must be a boolean array shaped like y {y.shape}, got {keep!r:.60}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have one label per row of X ({X.shape[0]}), got {y.shape}")
    return _ridge(X, y, keep, lams)


def _ridge(X: np.ndarray, y: np.ndarray, keep: np.ndarray, lams: np.ndarray) -> np.ndarray:
    """fit_ridge without validation, for the simulation loops (their inputs are generated)."""
    n, d = X.shape
    Xk, yk = X[keep], y[keep]
    A, c = Xk.T @ Xk / n, Xk.T @ yk / n
    if lams.size <= 3:
        return np.array([np.linalg.solve(A + lam * np.eye(d), c) for lam in lams])
    evals, U = np.linalg.eigh(A)
    return ((U.T @ c)[None, :] / (evals[None, :] + lams[:, None])) @ U.T


def _cosines(W: np.ndarray, w: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(W, axis=-1)
    return np.where(norms > 0, W @ w / np.where(norms > 0, norms, 1.0), 0.0)


def _seed(seed) -> int | list[int]:
    """A seed for numpy: a non-negative integer or a list of them (bools refused)."""
    if isinstance(seed, list | tuple):
        return [validate.integer("seed", s, minimum=0) for s in seed]
    return validate.integer("seed", seed, minimum=0)


def _draw(n: int, d: int, geometry: Geometry, rng: np.random.Generator):
    """One data set: the truth w* (d,), features X (n, d), labels y = sign(X w_g), margins X w_o."""
    w_star, w_g, w_o = make_directions(geometry, d, rng)
    X = rng.standard_normal((n, d))
    return w_star, X, np.where(X @ w_g >= 0, 1.0, -1.0), X @ w_o


def _rules(rules) -> list[Rule]:
    """The rules of a simulation as a non-empty list of Rule, else a clear error."""
    if isinstance(rules, Rule) or len(rules) == 0:
        raise ValueError(
            "rules must be a non-empty list, e.g. [Rule('all'), Rule('keep_hard', 0.5)]"
        )
    return [_instance(f"rules[{i}]", r, Rule) for i, r in enumerate(rules)]


def simulate_errors(
    n: int, d: int, lams, geometry: Geometry, rules: Sequence[Rule], seed
) -> np.ndarray:
    """Test errors (len(rules), len(lams)) of ridge on one draw of n samples, curated by each rule.

    All rules see the same features and labels, so rule-to-rule differences are paired.
    """
    n, d = validate.integer("n", n, minimum=1), validate.integer("d", d, minimum=3)
    lams = validate.array("lams", np.atleast_1d(lams), positive=True)
    rules = _rules(rules)
    rng = np.random.default_rng(_seed(seed))
    w_star, X, y, g = _draw(n, d, geometry, rng)
    out = np.empty((len(rules), lams.size))
    for i, rule in enumerate(rules):
        W = _ridge(X, y, _keep(rule, g, y, rng), lams)
        out[i] = error_from_cos(_cosines(W, w_star))
    return out


@dataclass(frozen=True)
class Cell:
    """One simulated configuration: n samples, a geometry, rules and each rule's ridge penalty."""

    n: int
    geometry: Geometry
    rules: tuple[Rule, ...]
    lams: tuple[float, ...]

    def __post_init__(self) -> None:
        validate.integer("n", self.n, minimum=1)
        _instance("geometry", self.geometry, Geometry)
        for i, rule in enumerate(self.rules):
            _instance(f"rules[{i}]", rule, Rule)
        lams = validate.array("lams", self.lams, positive=True)
        if lams.size != len(self.rules) or len(self.rules) == 0:
            raise ValueError(
                f"give one penalty per rule: {len(self.rules)} rules, {lams.size} lams"
            )


def tuned_cell(n: int, d: int, geometry: Geometry, rules: Sequence[Rule]) -> Cell:
    """A Cell whose penalties are the ones `predict_tuned` calls best for each rule."""
    rules = _rules(rules)
    lams = tuple(predict_tuned(n, d, geometry, rule)[1] for rule in rules)
    return Cell(n, geometry, tuple(rules), lams)


def simulate_cells(cells: Sequence[Cell], d: int, seed: int) -> list[np.ndarray]:
    """One replicate: for cell i (seeded [seed, i]) the errors (len(rules),), each rule at its
    own penalty, all rules on the same draw (paired)."""
    d, seed = validate.integer("d", d, minimum=3), validate.integer("seed", seed, minimum=0)
    out = []
    for i, cell in enumerate(cells):
        _instance(f"cells[{i}]", cell, Cell)
        rng = np.random.default_rng([seed, i])
        w_star, X, y, g = _draw(cell.n, d, cell.geometry, rng)
        W = np.concatenate([_ridge(X, y, _keep(rule, g, y, rng), np.array([lam]))
                            for rule, lam in zip(cell.rules, cell.lams, strict=True)])  # fmt: skip
        out.append(error_from_cos(_cosines(W, w_star)))
    return out


def simulate_replicates(cells: Sequence[Cell], d: int, seeds: Sequence[int]) -> np.ndarray:
    """`simulate_cells` for each seed -> (len(seeds), len(cells), rules); equal rule counts."""
    if isinstance(seeds, int | np.integer) or len(seeds) == 0:
        raise ValueError(f"seeds must be a non-empty list of integer seeds, got {seeds!r}")
    counts = {len(_instance(f"cells[{i}]", c, Cell).rules) for i, c in enumerate(cells)}
    if len(counts) != 1:
        raise ValueError(f"every cell must have the same number of rules, got {sorted(counts)}")
    return np.array([simulate_cells(cells, d, seed) for seed in seeds])


def simulate_oracle_relabel(
    n: int, d: int, lam: float, rho0: float, rho_star: float, rounds: int, seed
) -> np.ndarray:
    """The rival of curation in self-training: each round labels fresh data with the oracle
    itself, y = sign(x.w_o), and fits ridge on all of it; errors (rounds+1,), round 0 = the
    first generator's error. Directions are drawn as in `simulate_collapse` (same seed, same
    w*, w_o)."""

    def oracle_labels(X, w_gen, w_o, rng):  # the generator labels nothing here
        y = np.where(X @ w_o >= 0, 1.0, -1.0)
        return y, np.ones(len(y), dtype=bool)

    return _self_training(n, d, lam, rho0, rho_star, rounds, seed, oracle_labels)


def simulate_collapse(
    n: int, d: int, lam: float, rho0: float, rho_star: float, rule: Rule, rounds: int, seed
) -> np.ndarray:
    """Simulated errors (rounds+1,) when each round's ridge model labels the next round's data."""
    _instance("rule", rule, Rule)

    def curated_labels(X, w_gen, w_o, rng):
        y = np.where(X @ w_gen >= 0, 1.0, -1.0)
        return y, _keep(rule, X @ w_o, y, rng)

    return _self_training(n, d, lam, rho0, rho_star, rounds, seed, curated_labels)


def _self_training(n, d, lam, rho0, rho_star, rounds, seed, label) -> np.ndarray:
    """Errors (rounds+1,) of a self-training loop, round 0 = the first generator's. Directions
    w*, w_gen, w_o as `make_directions` draws them; each round draws X (n, d), asks
    `label(X, w_gen, w_o, rng)` for labels y (n,) and a keep mask (n,), fits ridge on the kept
    rows, and the fit's direction w / |w| becomes the next generator."""
    n = validate.integer("n", n, minimum=1)
    _, d, lam = _sizes(n, d, lam)
    rounds = validate.integer("rounds", rounds, minimum=1)
    rng = np.random.default_rng(_seed(seed))
    w_star, w_gen, w_o = make_directions(independent_errors(rho0, rho_star), d, rng)
    errors = [error_from_cos(w_gen @ w_star)]
    for _ in range(rounds):
        X = rng.standard_normal((n, d))
        y, keep = label(X, w_gen, w_o, rng)
        w = _ridge(X, y, keep, np.array([lam]))[0]
        w_gen = w / np.linalg.norm(w)
        errors.append(error_from_cos(w_gen @ w_star))
    return np.array(errors)
