"""Fitting scaling laws: power laws, the Chinchilla law, logistic and logit-linear laws.

Every fitter validates its input, returns a frozen result with the parameters as attributes,
95% bootstrap intervals in `.ci` (empty unless `n_bootstrap > 0`) and a `predict` method.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special

from lib import validate

GRIDS = ("coarse", "full")
# Besiroglu et al. 2024 (arXiv:2404.10102), Sec. 3: L-BFGS-B from every point of this grid.
BESIROGLU2024_GRID = {
    "alpha": (0.0, 0.5, 1.0, 1.5, 2.0),
    "beta": (0.0, 0.5, 1.0, 1.5, 2.0),
    "e": (-1.0, -0.5, 0.0, 0.5, 1.0),
    "a": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
    "b": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
}
COARSE_GRID = {
    "alpha": (0.5, 1.0),
    "beta": (0.5, 1.0),
    "e": (-1.0, 0.0, 1.0),
    "a": (0.0, 10.0, 20.0),
    "b": (0.0, 10.0, 20.0),
}


# ---------------------------------------------------------------------------- validation
as_array = validate.array  # the name chapters and modules have used; one validator behind it


def _same_length(min_points: int, **arrays: np.ndarray) -> int:
    n = validate.same_length(**arrays)
    if n < min_points:
        raise ValueError(f"need at least {min_points} points to fit, got {n}")
    return n


def _check_bootstrap(n_bootstrap: int, seed: int) -> None:
    validate.integer("n_bootstrap", n_bootstrap, minimum=0)
    validate.integer("seed", seed, minimum=0)


def _distinct(name: str, x: np.ndarray, at_least: int = 2) -> None:
    if np.unique(x).size < at_least:
        raise ValueError(f"{name} has {np.unique(x).size} distinct value(s); a fit needs "
                         f"at least {at_least}")  # fmt: skip


def bootstrap_ci(
    refit: Callable[[np.ndarray], dict[str, float]], n: int, n_bootstrap: int, seed: int
) -> dict[str, tuple[float, float]]:
    """95% percentile intervals of `refit(indices)` over `n_bootstrap` resamples of n points."""
    _check_bootstrap(n_bootstrap, seed)
    if n_bootstrap == 0:
        return {}
    rng = np.random.default_rng(seed)
    draws = [refit(rng.integers(0, n, size=n)) for _ in range(n_bootstrap)]
    return {
        k: (float(np.percentile([d[k] for d in draws], 2.5)),
            float(np.percentile([d[k] for d in draws], 97.5)))
        for k in draws[0]
    }  # fmt: skip


# ---------------------------------------------------------------------------- power laws
@dataclass(frozen=True)
class PowerLawFit:
    """y = A x^-alpha, fitted by least squares in log-log space."""

    A: float
    alpha: float
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)

    def predict(self, x) -> np.ndarray:
        return self.A * as_array("x", x, positive=True) ** -self.alpha


def fit_power_law(x, y, n_bootstrap: int = 0, seed: int = 0) -> PowerLawFit:
    """Fit y = A x^-alpha by linear least squares of log y on log x (x, y > 0, 1-D)."""
    x, y = as_array("x", x, positive=True), as_array("y", y, positive=True)
    n = _same_length(2, x=x, y=y)
    _check_bootstrap(n_bootstrap, seed)
    _distinct("x", x)

    def solve(idx: np.ndarray) -> dict[str, float]:
        slope, intercept = np.polyfit(np.log(x[idx]), np.log(y[idx]), 1)
        return {"A": float(np.exp(intercept)), "alpha": float(-slope)}

    best = solve(np.arange(n))
    return PowerLawFit(**best, ci=bootstrap_ci(solve, n, n_bootstrap, seed))


@dataclass(frozen=True)
class SaturatingPowerLawFit:
    """y = E + A x^-alpha: a power law that bends towards the floor E."""

    E: float
    A: float
    alpha: float
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)

    def predict(self, x) -> np.ndarray:
        return self.E + self.A * as_array("x", x, positive=True) ** -self.alpha


def _fit_saturating(x: np.ndarray, y: np.ndarray, starts: list[tuple]) -> dict[str, float]:
    """Least squares on log residuals log y - log(E + A x^-alpha) from several starts."""
    log_x, log_y = np.log(x), np.log(y)

    def residuals(theta: np.ndarray) -> np.ndarray:
        E, log_A, alpha = theta
        return np.logaddexp(np.log(max(E, 1e-300)), log_A - alpha * log_x) - log_y

    bounds = ([0.0, -np.inf, 0.0], [y.min(), np.inf, 10.0])
    fits = [optimize.least_squares(residuals, s, bounds=bounds, method="trf") for s in starts]
    best = min(fits, key=lambda r: r.cost)
    E, log_A, alpha = best.x
    return {"E": float(E), "A": float(np.exp(log_A)), "alpha": float(alpha)}


def fit_saturating_power_law(x, y, n_bootstrap: int = 0, seed: int = 0) -> SaturatingPowerLawFit:
    """Fit y = E + A x^-alpha (E >= 0, alpha in [0, 10]) with multi-start least squares."""
    x, y = as_array("x", x, positive=True), as_array("y", y, positive=True)
    n = _same_length(3, x=x, y=y)
    _check_bootstrap(n_bootstrap, seed)
    _distinct("x", x, 3)
    scale = float(np.median(np.log(x)))
    starts = [
        (E, np.log(max(y.max() - E, 1e-12)) + alpha * scale, alpha)
        for E in (0.0, 0.5 * y.min(), 0.9 * y.min())
        for alpha in (0.1, 0.5, 1.0, 2.0)
    ]
    best = _fit_saturating(x, y, starts)
    start = [(best["E"], np.log(best["A"]), best["alpha"])]
    ci = bootstrap_ci(lambda idx: _fit_saturating(x[idx], y[idx], start), n, n_bootstrap, seed)
    return SaturatingPowerLawFit(**best, ci=ci)


# ---------------------------------------------------------------------------- Chinchilla
@dataclass(frozen=True)
class ChinchillaFit:
    """L(N, D) = E + A / N^alpha + B / D^beta (Hoffmann et al. 2022, Eq. 2)."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float
    objective: float
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)

    def predict(self, N, D) -> np.ndarray:
        N, D = as_array("N", N, positive=True), as_array("D", D, positive=True)
        return self.E + self.A / N**self.alpha + self.B / D**self.beta


def _huber(r: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Huber loss of residuals r and its derivative (quadratic within delta, linear beyond)."""
    small = np.abs(r) <= delta
    loss = np.where(small, 0.5 * r**2, delta * (np.abs(r) - 0.5 * delta))
    return loss, np.where(small, r, delta * np.sign(r))


def _chinchilla_objective(theta, log_N, log_D, log_L, delta):
    """Summed Huber loss of LSE(a - alpha log N, b - beta log D, e) - log L, with gradient."""
    a, b, e, alpha, beta = theta
    terms = np.stack([a - alpha * log_N, b - beta * log_D, np.full_like(log_N, e)])  # (3, n)
    log_L_hat = special.logsumexp(terms, axis=0)
    weights = np.exp(terms - log_L_hat)  # softmax: d log_L_hat / d term
    loss, dloss = _huber(log_L_hat - log_L, delta)
    grad = np.array(
        [
            np.sum(dloss * weights[0]),
            np.sum(dloss * weights[1]),
            np.sum(dloss * weights[2]),
            -np.sum(dloss * weights[0] * log_N),
            -np.sum(dloss * weights[1] * log_D),
        ]
    )
    return float(np.sum(loss)), grad


# The summed Huber objective is ~1e-3 at the optimum, so L-BFGS-B's default tolerances stop a
# start that is already close after a step or two: bootstrap refits (which start at the best
# fit) then barely move and their intervals come out far too narrow. Tight tolerances fix it.
LBFGSB_OPTIONS = {"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20_000}


def _chinchilla_minimise(starts, log_N, log_D, log_L, delta) -> optimize.OptimizeResult:
    args = (log_N, log_D, log_L, delta)
    fits = [
        optimize.minimize(
            _chinchilla_objective,
            s,
            args=args,
            jac=True,
            method="L-BFGS-B",
            options=LBFGSB_OPTIONS,
        )  # fmt: skip
        for s in starts
    ]
    return min(fits, key=lambda r: r.fun)


def fit_chinchilla(
    N, D, L, grid: str = "coarse", huber_delta: float = 1e-3, n_bootstrap: int = 0, seed: int = 0
) -> ChinchillaFit:
    """Fit L = E + A/N^alpha + B/D^beta as Besiroglu et al. 2024 did.

    log L is modelled as LSE(a - alpha log N, b - beta log D, e) with A = e^a, B = e^b,
    E = e^e; the Huber loss (delta = huber_delta) of the log-loss residuals is summed over
    points and minimised by L-BFGS-B from every start of the grid ('full': their 4,500 starts;
    'coarse': 108). Bootstrap refits start from the best fit.
    """
    N, D, L = (as_array(k, v, positive=True) for k, v in (("N", N), ("D", D), ("L", L)))
    n = _same_length(5, N=N, D=D, L=L)
    validate.choice("grid", grid, GRIDS)
    huber_delta = validate.real("huber_delta", huber_delta, low=0.0, low_open=True)
    _check_bootstrap(n_bootstrap, seed)
    g = BESIROGLU2024_GRID if grid == "full" else COARSE_GRID
    starts = [np.array(s) for s in itertools.product(g["a"], g["b"], g["e"], g["alpha"], g["beta"])]
    logs = np.log(N), np.log(D), np.log(L)
    best = _chinchilla_minimise(starts, *logs, huber_delta)

    def params(theta: np.ndarray) -> dict[str, float]:
        a, b, e, alpha, beta = theta
        return {"E": np.exp(e), "A": np.exp(a), "B": np.exp(b), "alpha": alpha, "beta": beta}

    def refit(idx: np.ndarray) -> dict[str, float]:
        res = _chinchilla_minimise([best.x], *(v[idx] for v in logs), huber_delta)
        return {k: float(v) for k, v in params(res.x).items()}

    fit = {k: float(v) for k, v in params(best.x).items()}
    ci = bootstrap_ci(refit, n, n_bootstrap, seed)
    return ChinchillaFit(**fit, objective=float(best.fun), ci=ci)


# ---------------------------------------------------------------------------- sigmoids
@dataclass(frozen=True)
class LogisticFit:
    """y = lo + (hi - lo) / (1 + exp(-k (x - x0)))."""

    lo: float
    hi: float
    k: float
    x0: float
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)

    def predict(self, x) -> np.ndarray:
        x = as_array("x", x)
        return self.lo + (self.hi - self.lo) * special.expit(self.k * (x - self.x0))


def _fit_logistic(x, y, lo, hi) -> dict[str, float]:
    free_lo, free_hi = lo is None, hi is None

    def unpack(theta: np.ndarray) -> tuple[float, float, float, float]:
        k, x0, *rest = theta
        lo_ = rest.pop(0) if free_lo else lo
        hi_ = rest.pop(0) if free_hi else hi
        return lo_, hi_, k, x0

    def residuals(theta: np.ndarray) -> np.ndarray:
        lo_, hi_, k, x0 = unpack(theta)
        return lo_ + (hi_ - lo_) * special.expit(k * (x - x0)) - y

    spread = max(float(np.ptp(x)), 1e-12)
    extra = [y.min()] * free_lo + [y.max()] * free_hi
    starts = [
        [sign * s / spread, x0, *extra]
        for sign in (1.0, -1.0)
        for s in (1.0, 4.0, 16.0)
        for x0 in np.quantile(x, [0.25, 0.5, 0.75])
    ]
    best = min((optimize.least_squares(residuals, s) for s in starts), key=lambda r: r.cost)
    return dict(zip(("lo", "hi", "k", "x0"), map(float, unpack(best.x)), strict=True))


def fit_logistic(
    x, y, lower: float | None = None, upper: float | None = None, n_bootstrap: int = 0,
    seed: int = 0,
) -> LogisticFit:  # fmt: skip
    """Fit a four-parameter logistic curve; pass `lower`/`upper` to fix its floor/ceiling."""
    x, y = as_array("x", x), as_array("y", y)
    n_free = 2 + (lower is None) + (upper is None)
    n = _same_length(n_free + 1, x=x, y=y)
    _check_bootstrap(n_bootstrap, seed)
    _distinct("x", x)
    lower = None if lower is None else validate.real("lower", lower)
    upper = None if upper is None else validate.real("upper", upper)
    if lower is not None and upper is not None and not lower < upper:
        raise ValueError(f"lower must be < upper, got {lower} and {upper}")
    best = _fit_logistic(x, y, lower, upper)
    ci = bootstrap_ci(lambda idx: _fit_logistic(x[idx], y[idx], lower, upper), n, n_bootstrap, seed)
    return LogisticFit(**best, ci=ci)


@dataclass(frozen=True)
class LogitLinearFit:
    """logit(p) = w x + b: a sigmoid in x whose slope w and offset b are fitted in logit space."""

    w: float
    b: float
    r2: float
    eps: float
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)

    def predict(self, x) -> np.ndarray:
        """Predicted probability sigmoid(w x + b)."""
        return special.expit(self.w * as_array("x", x) + self.b)


def fit_logit_linear(
    x, p, eps: float = 0.01, n_bootstrap: int = 0, seed: int = 0
) -> LogitLinearFit:
    """Clip p to [eps, 1 - eps], then fit logit(p) = w x + b by least squares; r2 in logit space."""
    x, p = as_array("x", x), as_array("p", p)
    n = _same_length(2, x=x, p=p)
    if np.any((p < 0) | (p > 1)):
        raise ValueError(f"p must be probabilities in [0, 1], got range [{p.min()}, {p.max()}]")
    eps = validate.real("eps", eps, low=0.0, high=0.5, low_open=True, high_open=True)
    _check_bootstrap(n_bootstrap, seed)
    _distinct("x", x)
    z = special.logit(np.clip(p, eps, 1 - eps))

    def solve(idx: np.ndarray) -> dict[str, float]:
        if np.ptp(x[idx]) == 0:  # a resample with one distinct x has no slope: skip its draw
            idx = np.arange(n)
        w, b = np.polyfit(x[idx], z[idx], 1)
        return {"w": float(w), "b": float(b)}

    best = solve(np.arange(n))
    r2 = r2_score(z, best["w"] * x + best["b"])
    return LogitLinearFit(**best, r2=r2, eps=eps, ci=bootstrap_ci(solve, n, n_bootstrap, seed))


# ---------------------------------------------------------------------------- metrics
def r2_score(y, y_hat) -> float:
    """Coefficient of determination 1 - SS_res / SS_tot of predictions y_hat for data y."""
    y, y_hat = as_array("y", y), as_array("y_hat", y_hat)
    _same_length(2, y=y, y_hat=y_hat)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0:
        raise ValueError("y is constant, so R^2 is undefined; pass data with some spread")
    return 1.0 - float(np.sum((y - y_hat) ** 2)) / ss_tot


def relative_error(y, y_hat) -> np.ndarray:
    """Elementwise |y_hat - y| / |y| (a fraction, not a percentage); y must be non-zero."""
    y, y_hat = as_array("y", y), as_array("y_hat", y_hat)
    _same_length(1, y=y, y_hat=y_hat)
    if np.any(y == 0):
        raise ValueError("y contains zeros, so relative error is undefined there")
    return np.abs(y_hat - y) / np.abs(y)
