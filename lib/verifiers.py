"""Test-time scaling with an imperfect verifier: rejection sampling and best-of-N from a ROC curve.

Dorner, Chen, Cruz & Yang (ICLR 2026, "ROC-n-reroll") show that, for one query with base
accuracy pi (the chance that one generated answer is correct), the accuracy of rejection
sampling (RS) and best-of-N (BoN) depends on the verifier only through its ROC curve T(F)
(true-positive rate T against false-positive rate F). This module holds that theory as functions
of a piecewise-linear ROC, synthetic instances whose ROC is known, independent Monte-Carlo
simulators of both strategies, and both strategies run on a recorded stream of real draws
(`bon_on_stream`, `rs_on_stream`, with `rs_threshold` setting a randomised threshold).

A ROC is a pair of arrays `(fpr, tpr)` of the same shape (m,), non-decreasing, from (0, 0) to
(1, 1). Between vertices it is linear: that is the ROC of thresholding with random tie-breaking
among equal scores (or of a randomised threshold), so for discrete scores it is exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.stats import binomtest, norm

from lib import validate

Sampler = Callable[[int, np.random.Generator], tuple[np.ndarray, np.ndarray]]


# --------------------------------------------------------------------------- validation


def _check_base_acc(base_acc: float) -> float:
    return validate.probability("base_acc", base_acc, open_ends=True)


def _check_roc(fpr, tpr) -> tuple[np.ndarray, np.ndarray]:
    """Validate a ROC given as vertex arrays: non-decreasing rates from (0, 0) to (1, 1)."""
    F = validate.array("fpr", fpr, low=0.0, high=1.0, min_size=2)
    T = validate.array("tpr", tpr, low=0.0, high=1.0, min_size=2)
    validate.same_length(fpr=F, tpr=T)
    for name, x in (("fpr", F), ("tpr", T)):
        if np.any(np.diff(x) < 0):
            raise ValueError(f"{name} must be non-decreasing from (0, 0) to (1, 1), got {x}")
    if F[0] != 0 or T[0] != 0 or F[-1] != 1 or T[-1] != 1:
        raise ValueError(f"the ROC must start at (0, 0) and end at (1, 1), got {F}, {T}")
    return F, T


def _check_counts(name: str, n) -> np.ndarray:
    return validate.integer_array(name, n, minimum=1)


# --------------------------------------------------------------------------- theory


def roc_from_scores(pos, neg, pos_weight=None, neg_weight=None) -> tuple[np.ndarray, np.ndarray]:
    """Empirical ROC (fpr, tpr) of verifier scores of correct (`pos`) and wrong (`neg`) answers.

    One vertex per distinct score s, descending: F = P[neg >= s], T = P[pos >= s], after (0, 0).
    Tied scores thus form one linear segment, which is what random tie-breaking realises.
    Optional non-negative weights make each score count in proportion (a weighted sample).
    """
    pos = validate.array("pos", np.ravel(pos))
    neg = validate.array("neg", np.ravel(neg))
    rates = []
    for name, x, w in (("pos", pos, pos_weight), ("neg", neg, neg_weight)):
        w = np.ones_like(x) if w is None else validate.array(f"{name}_weight", w, nonnegative=True)
        validate.same_length(**{name: x, f"{name}_weight": w})
        if w.sum() <= 0:
            raise ValueError(f"{name}_weight must not be all zero")
        rates.append((x, w / w.sum()))
    thresholds = np.unique(np.concatenate([pos, neg]))[::-1]
    (T, F) = (_rate_at_or_above(x, w, thresholds) for x, w in rates)
    return np.concatenate([[0.0], F]), np.concatenate([[0.0], T])


def _rate_at_or_above(x: np.ndarray, w: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Weighted P[x >= s] at each threshold s (descending); exactly 1 at the lowest score."""
    order = np.argsort(x)
    tail = np.concatenate([np.cumsum(w[order][::-1])[::-1], [0.0]])  # weight at or above rank i
    rate = np.minimum(tail[np.searchsorted(x[order], thresholds, side="left")], 1.0)
    rate[thresholds <= x.min()] = 1.0  # rounding must not leave the ROC short of (1, 1)
    return rate


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


def concavity_gap(fpr, tpr) -> float:
    """Largest vertical gap between a ROC and its least concave majorant (0 when concave).

    Prop. 5 of Dorner et al. (RS at least as accurate as BoN at equal compute) assumes a
    concave ROC; this measures how far a piecewise-linear ROC is from one. A vertical segment
    counts at its top, T(F) = max T at that F.
    """
    F, T = _check_roc(fpr, tpr)
    F, first = np.unique(F[::-1], return_index=True)  # distinct F, each with its largest T
    T = T[::-1][first]
    hull = [0]  # the upper hull, by Andrew's monotone chain over points sorted by F
    for k in range(1, F.size):
        while len(hull) >= 2:
            i, j = hull[-2], hull[-1]
            if (F[j] - F[i]) * (T[k] - T[i]) - (T[j] - T[i]) * (F[k] - F[i]) < 0:
                break  # j lies above the chord from i to k: keep it
            hull.pop()
        hull.append(k)
    return float(np.max(np.interp(F, F[hull], T[hull]) - T))


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


def _check_stream(scores, correct) -> tuple[np.ndarray, np.ndarray]:
    scores = validate.array("scores", scores)
    correct = np.asarray(correct)
    if correct.dtype != bool or correct.shape != scores.shape:
        raise TypeError(f"correct must be a boolean array shaped like scores {scores.shape}")
    return scores, correct


def bon_on_stream(scores, correct, n: int, rng: np.random.Generator) -> float:
    """Best-of-n measured on a stream of draws: consecutive disjoint groups of n (a remainder
    is dropped), the arg-max score kept with random tie-breaking; the share of correct picks."""
    scores, correct = _check_stream(scores, correct)
    n = int(_check_counts("n", n))
    groups = scores.size // n
    if groups == 0:
        raise ValueError(f"a stream of {scores.size} draws holds no group of n = {n}")
    pick = argmax_random_ties(scores[: groups * n].reshape(groups, n), rng)
    return float(correct[: groups * n].reshape(groups, n)[np.arange(groups), pick].mean())


def rs_threshold(scores, compute: float) -> tuple[float, float]:
    """The randomised threshold whose acceptance rate on `scores` is 1 / compute.

    Accept a draw when its score is above `level`, or equal to it with probability `gamma`:
    P[s > level] + gamma P[s = level] = 1 / compute. Returns (level, gamma), gamma in (0, 1].
    """
    scores = validate.array("scores", scores)
    compute = validate.real("compute", compute, low=1.0)
    levels, counts = np.unique(scores, return_counts=True)
    above = np.concatenate([np.cumsum(counts[::-1])[::-1][1:], [0]]) / scores.size  # P[s > l]
    k = int(np.flatnonzero(above < 1 / compute)[0])  # the highest level still needed
    gamma = (1 / compute - above[k]) / (counts[k] / scores.size)
    return float(levels[k]), float(min(gamma, 1.0))


@dataclass(frozen=True)
class StreamRS:
    """Rejection sampling measured on a stream: accuracy, mean draws per episode, episodes."""

    accuracy: float
    compute: float
    episodes: int


def rs_on_stream(scores, correct, level: float, gamma: float, rng: np.random.Generator) -> StreamRS:
    """Rejection sampling run along a stream of draws with a randomised threshold.

    Each episode draws until one draw is accepted (score > level, or = level with probability
    gamma) and returns it; an unfinished last episode is dropped.
    """
    scores, correct = _check_stream(scores, correct)
    gamma = validate.real("gamma", gamma, low=0.0, high=1.0, low_open=True)
    accept = (scores > level) | ((scores == level) & (rng.random(scores.size) < gamma))
    where = np.flatnonzero(accept)
    if where.size == 0:
        raise ValueError(f"no draw of the stream passes level {level} (gamma {gamma})")
    return StreamRS(float(correct[where].mean()), float((where[-1] + 1) / where.size),
                    int(where.size))  # fmt: skip


@dataclass(frozen=True)
class Prediction:
    """Theory applied to calibration draws: BoN at each n, RS at each threshold, 95% intervals.

    BoN intervals are bootstrap percentiles over resamples of the calibration draws. RS accuracy
    at a threshold is the share k / m of correct answers among the m calibration draws at or
    above it, so its interval is exact (Clopper-Pearson): it stays honest when k = m, where a
    bootstrap collapses to a point.
    """

    bon: np.ndarray
    bon_lo: np.ndarray
    bon_hi: np.ndarray
    rs_accuracy: np.ndarray
    rs_lo: np.ndarray
    rs_hi: np.ndarray
    rs_compute: np.ndarray


def predict_from_calibration(scores, correct, n, thresholds, n_boot: int,
                             rng: np.random.Generator) -> Prediction:  # fmt: skip
    """Estimate pi and the ROC from calibration draws, predict BoN(n) and RS(thresholds)."""
    scores = validate.array("scores", scores)
    correct = np.asarray(correct)
    if correct.dtype != bool or correct.shape != scores.shape:
        raise TypeError(f"correct must be a boolean array shaped like scores {scores.shape}")
    if not 0 < correct.sum() < correct.size:
        raise ValueError("calibration draws need both correct and wrong answers")
    thresholds = validate.array("thresholds", thresholds, high=scores.max())
    n = _check_counts("n", n)
    n_boot = validate.integer("n_boot", n_boot, minimum=2)
    pi = correct.mean()
    bon = bon_accuracy(*roc_from_scores(scores[correct], scores[~correct]), pi, n)
    boots = []
    while len(boots) < n_boot:
        i = rng.integers(0, scores.size, scores.size)
        if 0 < correct[i].sum() < i.size:
            pos, neg = scores[i][correct[i]], scores[i][~correct[i]]
            boots.append(bon_accuracy(*roc_from_scores(pos, neg), correct[i].mean(), n))
    bon_lo, bon_hi = np.percentile(boots, [2.5, 97.5], axis=0)
    accepted = scores[:, None] >= thresholds  # (draws, thresholds)
    m, k = accepted.sum(axis=0), (accepted & correct[:, None]).sum(axis=0)
    ci = [
        binomtest(int(kj), int(mj)).proportion_ci(0.95, "exact")
        for kj, mj in zip(k, m, strict=True)
    ]
    return Prediction(bon, bon_lo, bon_hi, k / m, np.array([c.low for c in ci]),
                      np.array([c.high for c in ci]), scores.size / m)  # fmt: skip


# --------------------------------------------------------------------------- a real pair


@dataclass(frozen=True)
class JudgedQuery:
    """One real query: a generator's answer distribution and a pool of judge scores per answer.

    answer_probs: (k,) probability that the generator answers each of k labels; correct: the
    true label; pool: (m, k) scores a noisy judge gave each label in m independent calls. An
    answer is a label drawn from answer_probs, scored by a uniformly drawn row of the pool, so
    the pool's empirical law is the query's exact score distribution (discrete, with ties).
    """

    answer_probs: np.ndarray
    correct: int
    pool: np.ndarray

    @property
    def pi(self) -> float:
        """Base accuracy: the chance that one generated answer is correct."""
        return float(self.answer_probs[self.correct])

    def roc(self) -> tuple[np.ndarray, np.ndarray]:
        """Exact ROC of the pool: the correct label's scores against the wrong labels' scores,
        each wrong label weighted by its share of the wrong answers."""
        wrong = np.delete(np.arange(self.answer_probs.size), self.correct)
        weight = np.broadcast_to(self.answer_probs[wrong], (len(self.pool), wrong.size))
        return roc_from_scores(self.pool[:, self.correct], self.pool[:, wrong].ravel(),
                               neg_weight=weight.ravel())  # fmt: skip

    def sample(self, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Draw `size` answers: (scores, correct) arrays of shape (size,)."""
        labels = rng.choice(self.answer_probs.size, size=size, p=self.answer_probs)
        scores = self.pool[rng.integers(0, len(self.pool), size), labels]
        return scores, labels == self.correct


def judge_digits(
    seed: int,
    n_queries: int,
    n_generator: int = 60,
    n_verifier: int = 150,
    noise: float = 0.5,
    calls: int = 5,
    pool: int = 1000,
) -> list[JudgedQuery]:
    """A real generator-verifier pair on scikit-learn's 8x8 digits, one JudgedQuery per test image.

    Generator: a logistic regression trained on `n_generator` images, sampled at temperature 1.
    Judge: a second logistic regression trained on `n_verifier` other images; like the paper's
    LLM judges (a 0-10 score averaged over 5 runs), it scores a label by round(10 p) / 10 of its
    probability on a noisy copy of the image (Gaussian pixel noise, std `noise` on [0, 1] pixels),
    averaged over `calls` calls. Splits and noise come from `seed`.
    """
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    seed = validate.integer("seed", seed, minimum=0)
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    n_gen = validate.integer("n_generator", n_generator, minimum=10)
    n_ver = validate.integer("n_verifier", n_verifier, minimum=10)
    n_q = validate.integer("n_queries", n_queries, minimum=1, maximum=len(y) - n_gen - n_ver)
    noise = validate.real("noise", noise, low=0.0)
    calls = validate.integer("calls", calls, minimum=1)
    pool = validate.integer("pool", pool, minimum=1)
    rng = np.random.default_rng(seed)
    split = int(rng.integers(2**31))  # stratified splits: every digit is seen by both models
    gen_i, rest = train_test_split(
        np.arange(len(y)), train_size=n_gen, stratify=y, random_state=split
    )
    ver_i, query_i = train_test_split(rest, train_size=n_ver, stratify=y[rest], random_state=split)
    query_i = rng.permutation(query_i)
    generator = LogisticRegression(max_iter=2000).fit(X[gen_i], y[gen_i])
    judge = LogisticRegression(max_iter=2000).fit(X[ver_i], y[ver_i])
    queries = []
    for i in query_i[:n_q]:
        noisy = X[i] + noise * rng.standard_normal((pool * calls, X.shape[1]))
        probs = judge.predict_proba(noisy).reshape(pool, calls, -1)
        scores = np.round(10 * probs).mean(axis=1) / 10  # (pool, 10): each label's score
        queries.append(JudgedQuery(generator.predict_proba(X[i : i + 1])[0], int(y[i]), scores))
    return queries
