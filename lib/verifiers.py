"""Test-time scaling with an imperfect verifier: rejection sampling and best-of-N from a ROC curve.

Dorner, Chen, Cruz & Yang (ICLR 2026, "ROC-n-reroll") show that, for one query with base
accuracy pi (the chance that one generated answer is correct), the accuracy of rejection
sampling (RS) and best-of-N (BoN) depends on the verifier only through its ROC curve T(F)
(true-positive rate T against false-positive rate F). This module holds that theory as functions
of a piecewise-linear ROC, synthetic instances whose ROC is known, and independent Monte-Carlo
simulators of both strategies.

A ROC is a pair of arrays `(fpr, tpr)` of the same shape (m,), non-decreasing, from (0, 0) to
(1, 1). Between vertices it is linear: that is the ROC of thresholding with random tie-breaking
among equal scores (or of a randomised threshold), so for discrete scores it is exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

Sampler = Callable[[int, np.random.Generator], tuple[np.ndarray, np.ndarray]]


# --------------------------------------------------------------------------- validation


def _check_base_acc(base_acc: float) -> float:
    pi = float(base_acc)
    if not np.isfinite(pi) or not 0.0 < pi < 1.0:
        raise ValueError(f"base_acc must be a probability strictly between 0 and 1, got {base_acc}")
    return pi


def _check_roc(fpr, tpr) -> tuple[np.ndarray, np.ndarray]:
    """Validate a ROC given as vertex arrays; return them as float arrays."""
    F, T = np.asarray(fpr, dtype=float), np.asarray(tpr, dtype=float)
    if F.ndim != 1 or F.shape != T.shape or F.size < 2:
        raise ValueError(f"fpr and tpr must be 1-D of one length >= 2, got {F.shape}, {T.shape}")
    for name, x in (("fpr", F), ("tpr", T)):
        if not np.all(np.isfinite(x)) or x.min() < 0 or x.max() > 1:
            raise ValueError(f"{name} must hold finite rates in [0, 1], got {x}")
        if np.any(np.diff(x) < 0):
            raise ValueError(f"{name} must be non-decreasing from (0, 0) to (1, 1), got {x}")
    if F[0] != 0 or T[0] != 0 or F[-1] != 1 or T[-1] != 1:
        raise ValueError(f"the ROC must start at (0, 0) and end at (1, 1), got {F}, {T}")
    return F, T


def _check_counts(name: str, n) -> np.ndarray:
    arr = np.asarray(n)
    if arr.size == 0 or not np.issubdtype(arr.dtype, np.number) or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite positive integers, got {n!r}")
    if np.any(arr < 1) or np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must be integers >= 1 (samples per query), got {n!r}")
    return arr.astype(np.int64)


# --------------------------------------------------------------------------- theory


def roc_from_scores(pos, neg) -> tuple[np.ndarray, np.ndarray]:
    """Empirical ROC (fpr, tpr) of verifier scores of correct (`pos`) and wrong (`neg`) answers.

    One vertex per distinct score s, descending: F = P[neg >= s], T = P[pos >= s], after (0, 0).
    Tied scores thus form one linear segment, which is what random tie-breaking realises.
    """
    pos, neg = np.asarray(pos, dtype=float).ravel(), np.asarray(neg, dtype=float).ravel()
    for name, x in (("pos", pos), ("neg", neg)):
        if x.size == 0 or not np.all(np.isfinite(x)):
            raise ValueError(f"{name} must be a non-empty array of finite scores, got {x}")
    thresholds = np.unique(np.concatenate([pos, neg]))[::-1]
    # Counting scores >= s with searchsorted on sorted copies: O((n + m) log(n + m)).
    F = 1.0 - np.searchsorted(np.sort(neg), thresholds, side="left") / neg.size
    T = 1.0 - np.searchsorted(np.sort(pos), thresholds, side="left") / pos.size
    return np.concatenate([[0.0], F]), np.concatenate([[0.0], T])


def bon_accuracy(fpr, tpr, base_acc: float, n):
    """Exact best-of-N accuracy for a piecewise-linear ROC (Prop. 4 of Dorner et al. 2026).

    ACC(N) = 1 - N (1 - pi) int_0^1 psi(F)^(N-1) dF, psi(F) = (1 - pi)(1 - F) + pi (1 - T(F)).
    On a segment psi is linear, so the integral is closed-form; summed, it reads
    ACC(N) = sum_k (psi_k^N - psi_{k+1}^N) * pi dT_k / (pi dT_k + (1 - pi) dF_k):
    P[the best score lies in segment k] times the share of correct answers there. No quadrature
    (trapezoid rules fail at large N) and no cancellation. `n` scalar or array; same shape out.
    """
    F, T = _check_roc(fpr, tpr)
    pi = _check_base_acc(base_acc)
    N = _check_counts("n", n)
    psi = (1 - pi) * (1 - F) + pi * (1 - T)  # P[score below the threshold at vertex k]
    mass = pi * np.diff(T) + (1 - pi) * np.diff(F)
    share = np.divide(pi * np.diff(T), mass, out=np.zeros_like(mass), where=mass > 0)
    acc = [np.sum((psi[:-1] ** k - psi[1:] ** k) * share) for k in N.ravel()]
    acc = np.asarray(acc).reshape(N.shape)
    return float(acc) if acc.ndim == 0 else acc


def rs_curve(fpr, tpr, base_acc: float) -> tuple[np.ndarray, np.ndarray]:
    """Rejection sampling at each ROC vertex but (0, 0): (expected compute, accuracy) arrays.

    Accept the first sample the thresholded verifier passes (Prop. 1): acceptance rate
    q = pi T + (1 - pi) F, compute C = 1 / q samples (geometric), accuracy A = pi T / q.
    """
    F, T = _check_roc(fpr, tpr)
    pi = _check_base_acc(base_acc)
    q = pi * T + (1 - pi) * F
    keep = q > 0
    return 1.0 / q[keep], pi * T[keep] / q[keep]


def rs_accuracy(fpr, tpr, base_acc: float, compute):
    """Exact RS accuracy at expected compute C >= 1 samples (randomised threshold on a segment).

    On a segment both pi T and q = pi T + (1 - pi) F are linear in F, so pi T is a linear function
    of q there: A(C) = interp(1 / C) * C, exact. Beyond the first vertex A is the limit.
    """
    F, T = _check_roc(fpr, tpr)
    pi = _check_base_acc(base_acc)
    C = np.asarray(compute, dtype=float)
    if C.size == 0 or not np.all(np.isfinite(C)) or np.any(C < 1):
        raise ValueError(f"compute must be finite expected sample counts >= 1, got {compute!r}")
    q = pi * T + (1 - pi) * F
    q, first = np.unique(q, return_index=True)  # q is non-decreasing; keep one vertex per value
    acc = np.interp(1.0 / C, q, pi * T[first]) * C
    return float(acc) if acc.ndim == 0 else acc


def limit_accuracy(fpr, tpr, base_acc: float) -> float:
    """Infinite-compute accuracy of RS and BoN (Prop. 2, Thm. 1): set by the slope T'(0).

    A_inf = pi T'(0) / (pi T'(0) + 1 - pi), T'(0) the slope of the first non-degenerate segment
    (a vertical first segment, T'(0) = inf, gives 1).
    """
    F, T = _check_roc(fpr, tpr)
    pi = _check_base_acc(base_acc)
    k = np.flatnonzero((F > 0) | (T > 0))[0]
    return float(pi * T[k] / (pi * T[k] + (1 - pi) * F[k]))


# --------------------------------------------------------------------------- instances


@dataclass(frozen=True)
class Instance:
    """One query with a Gaussian verifier whose ROC is known in closed form.

    Correct answers (probability pi) score ~ N(mu, 1). Wrong answers score ~ N(0, 1), except a
    fraction rho of "convincing wrong answers" that score ~ N(mu + delta, 1). Scores are clipped
    at `ceiling` (a saturating judge). delta = 0: concave ROC with T'(0) = 1 / rho; delta > 0:
    convincing wrong answers outscore correct ones and the ROC is not concave.
    """

    pi: float
    mu: float
    rho: float = 0.0
    delta: float = 0.0
    ceiling: float = np.inf

    def __post_init__(self) -> None:
        _check_base_acc(self.pi)
        if not np.isfinite(self.mu) or self.mu <= 0:
            raise ValueError(f"mu must be a finite score gap > 0, got {self.mu}")
        if not 0.0 <= self.rho < 1.0:
            raise ValueError(f"rho must be a fraction in [0, 1), got {self.rho}")
        if not np.isfinite(self.delta) or np.isnan(self.ceiling):
            raise ValueError(f"delta must be finite and ceiling a number, got {self}")

    def rates(self, tau) -> tuple[np.ndarray, np.ndarray]:
        """(F, T) of the threshold rule score >= tau; clipping puts all mass above at tau."""
        tau = np.asarray(tau, dtype=float)
        F = (1 - self.rho) * norm.sf(tau) + self.rho * norm.sf(tau - self.mu - self.delta)
        T = norm.sf(tau - self.mu)
        above = tau > self.ceiling
        return np.where(above, 0.0, F), np.where(above, 0.0, T)

    def roc(self, per_unit: int = 100) -> tuple[np.ndarray, np.ndarray]:
        """The ROC at thresholds k / per_unit in [-10, 16] below the ceiling, plus the ceiling.

        Exact at the vertices, linear between. The grid does not depend on the instance, so
        judges that differ only in their ceiling share every vertex below the lowest ceiling.
        """
        if int(per_unit) != per_unit or per_unit < 1:
            raise ValueError(f"per_unit must be an integer >= 1 threshold per unit, got {per_unit}")
        tau = np.arange(16 * per_unit, -10 * per_unit - 1, -1) / per_unit
        if self.ceiling < 16:  # one vertex at the ceiling holds all the clipped mass
            tau = np.concatenate([[self.ceiling], tau[tau < self.ceiling]])
        F, T = self.rates(tau)
        return np.concatenate([[0.0], F, [1.0]]), np.concatenate([[0.0], T, [1.0]])

    def limit(self) -> float:
        """Closed-form infinite-compute accuracy pi T'(0) / (pi T'(0) + 1 - pi)."""
        pi = self.pi
        if np.isfinite(self.ceiling):  # a chord from (0, 0) to the clipped vertex
            F, T = self.rates(self.ceiling)
            return float(pi * T / (pi * T + (1 - pi) * F))
        if self.rho == 0 or self.delta < 0:
            return 1.0  # T'(0) = inf: correct answers own the top of the score range
        return pi / (pi + self.rho * (1 - pi)) if self.delta == 0 else 0.0

    def threshold_for_compute(self, compute: float) -> float:
        """Score threshold whose acceptance rate pi T + (1 - pi) F equals 1 / compute."""
        if not np.isfinite(compute) or compute <= 1:
            raise ValueError(f"compute must be a finite expected sample count > 1, got {compute}")

        def excess(tau: float) -> float:
            F, T = self.rates(tau)
            return float(self.pi * T + (1 - self.pi) * F) - 1.0 / compute

        return brentq(excess, -20.0, min(self.ceiling, 40.0) - 1e-12, xtol=1e-12)

    def sample(self, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Draw `size` answers: (scores, correct) arrays of shape (size,)."""
        correct = rng.random(size) < self.pi
        convincing = ~correct & (rng.random(size) < self.rho)
        mean = np.where(correct, self.mu, np.where(convincing, self.mu + self.delta, 0.0))
        return np.minimum(mean + rng.standard_normal(size), self.ceiling), correct


# --------------------------------------------------------------------------- simulation


def argmax_random_ties(scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Row-wise arg-max of a (reps, N) score array, breaking ties uniformly at random."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2 or scores.shape[1] == 0 or not np.all(np.isfinite(scores)):
        raise ValueError(f"scores must be a finite (reps, N) array with N >= 1, got {scores.shape}")
    is_max = scores == scores.max(axis=1, keepdims=True)
    # A uniform key on the tied entries, -1 elsewhere: its arg-max is a uniform pick among ties.
    return np.argmax(np.where(is_max, rng.random(scores.shape), -1.0), axis=1)


def simulate_bon(sample: Sampler, n: int, reps: int, rng: np.random.Generator):
    """Monte-Carlo best-of-N: `reps` fresh groups of n answers; return (accuracy, its SE)."""
    n, reps = int(_check_counts("n", n)), int(_check_counts("reps", reps))
    scores, correct = sample(reps * n, rng)
    pick = argmax_random_ties(scores.reshape(reps, n), rng)
    hits = correct.reshape(reps, n)[np.arange(reps), pick]
    return float(hits.mean()), float(hits.std(ddof=1) / np.sqrt(reps))


@dataclass(frozen=True)
class RSResult:
    """Simulated rejection sampling: accuracy and mean samples drawn, each with its SE."""

    accuracy: float
    accuracy_se: float
    compute: float
    compute_se: float


def simulate_rs(sample: Sampler, threshold: float, episodes: int, rng: np.random.Generator,
                block: int = 16, max_draws: int = 10**6) -> RSResult:  # fmt: skip
    """Monte-Carlo RS: per episode, draw answers one by one until score >= threshold."""
    episodes = int(_check_counts("episodes", episodes))
    if not np.isfinite(threshold):
        raise ValueError(f"threshold must be a finite score, got {threshold}")
    draws, hits = np.zeros(episodes, dtype=np.int64), np.zeros(episodes, dtype=bool)
    pending = np.arange(episodes)
    while pending.size:  # vectorised: each pending episode looks at its next `block` draws
        drawn = sample(pending.size * block, rng)
        scores, correct = (x.reshape(pending.size, block) for x in drawn)
        accept = scores >= threshold
        first, found = np.argmax(accept, axis=1), accept.any(axis=1)
        draws[pending] += np.where(found, first + 1, block)
        hits[pending[found]] = correct[found, first[found]]
        pending = pending[~found]
        if pending.size and draws[pending].min() > max_draws:
            raise ValueError(f"threshold {threshold} accepts almost nothing; lower it")
    se = lambda x: float(x.std(ddof=1) / np.sqrt(episodes))  # noqa: E731
    return RSResult(float(hits.mean()), se(hits), float(draws.mean()), se(draws))


@dataclass(frozen=True)
class Prediction:
    """Theory applied to a calibration sample: BoN at each n, RS at each threshold, with SEs."""

    bon: np.ndarray
    bon_se: np.ndarray
    rs_accuracy: np.ndarray
    rs_accuracy_se: np.ndarray
    rs_compute: np.ndarray


def _plug_in(scores, correct, n, thresholds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pi = correct.mean()
    F, T = roc_from_scores(scores[correct], scores[~correct])
    pos, neg = scores[correct][:, None], scores[~correct][:, None]
    q_T, q_F = (pos >= thresholds).mean(axis=0), (neg >= thresholds).mean(axis=0)
    q = pi * q_T + (1 - pi) * q_F  # the ROC vertex of each threshold, Prop. 1
    return bon_accuracy(F, T, pi, n), pi * q_T / q, 1.0 / q


def predict_from_calibration(scores, correct, n, thresholds, n_boot: int,
                             rng: np.random.Generator) -> Prediction:  # fmt: skip
    """Estimate pi and the ROC from calibration draws, predict BoN(n) and RS(thresholds).

    The SEs are bootstrap standard deviations over `n_boot` resamples of the calibration draws.
    """
    scores, correct = np.asarray(scores, dtype=float), np.asarray(correct, dtype=bool)
    thresholds = np.asarray(thresholds, dtype=float)
    if scores.shape != correct.shape or scores.ndim != 1 or not 0 < correct.sum() < correct.size:
        raise ValueError(f"need 1-D scores/correct of one shape with both labels, got {correct}")
    if not np.all(np.isfinite(thresholds)) or np.any(thresholds > scores.max()):
        raise ValueError(f"thresholds must be finite and <= the top score, got {thresholds}")
    bon, rs_a, rs_c = _plug_in(scores, correct, n, thresholds)
    boots = []
    while len(boots) < n_boot:
        i = rng.integers(0, scores.size, scores.size)
        if 0 < correct[i].sum() < i.size and scores[i].max() >= thresholds.max():
            boots.append(_plug_in(scores[i], correct[i], n, thresholds)[:2])
    bon_se, rs_se = (np.std([b[k] for b in boots], axis=0, ddof=1) for k in (0, 1))
    return Prediction(bon, bon_se, rs_a, rs_se, rs_c)
