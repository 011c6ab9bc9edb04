"""The statistics behind an outcome: intervals, the three-way judgement, the detectable effect.

A check's replicates x_1..x_R give a mean m and SE s; with q the t quantile at 97.5%
(Bonferroni-adjusted over S settings), the interval [m - q s, m + q s] is judged against the
criterion [low, high] and the predicted effect (`judge`). An inconclusive outcome reports the
minimum detectable effect (q + t_0.8) s and the replicates that would bring it under the
predicted effect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from lib import validate
from lib.claims.records import sig

LEVEL = 0.95  # two-sided confidence of every evidence interval
POWER = 0.80  # power behind the detectable effect
MIN_REPLICATES = 3
RANK = {"fail": 0, "inconclusive": 1, "pass": 2}  # the worst setting decides


def criterion_bounds(above, below, within, settings: int) -> tuple[np.ndarray, np.ndarray, str]:
    """Lower and upper bounds of the criterion per setting, and its text."""
    given = [x is not None for x in (above, below, within)]
    if sum(given) != 1:
        raise ValueError("give exactly one criterion: above=t, below=t or within=(a, b)")
    if within is not None:
        if not isinstance(within, tuple | list) or len(within) != 2:
            raise TypeError(f"within must be a pair (a, b), got {within!r}")
        low = validate.array("within[0]", within[0], ndim=None)
        high = validate.array("within[1]", within[1], ndim=None)
        if np.any(low >= high):
            raise ValueError(f"within=(a, b) needs a < b, got {within!r}")
        text = f"in [{sig(float(np.min(low)), 3)}, {sig(float(np.max(high)), 3)}]"
        if low.size > 1 or high.size > 1:
            text = "within each setting's tolerance"
    elif above is not None:
        low, high = validate.array("above", above, ndim=None), np.array(np.inf)
        text = f"> {sig(float(low.flat[0]), 3)}" if low.size == 1 else "> each setting's bound"
    else:
        low, high = np.array(-np.inf), validate.array("below", below, ndim=None)
        text = f"< {sig(float(high.flat[0]), 3)}" if high.size == 1 else "< each setting's bound"
    try:
        low, high = (np.broadcast_to(b, (settings,)).astype(float) for b in (low, high))
    except ValueError:
        raise ValueError(
            f"criterion bounds must be scalars or one per setting ({settings})"
        ) from None
    return low, high, text


def judge(lo: float, hi: float, low: float, high: float, predicted: float) -> str:
    """Outcome of an interval [lo, hi] against the criterion [low, high] and predicted effect."""
    if lo > low and hi < high:
        return "pass"
    if hi < low or lo > high:
        return "fail"
    return "inconclusive" if lo <= predicted <= hi else "fail"


def t_interval(values, settings: int = 1) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Mean, SE and the t quantile of a 95% interval, Bonferroni-adjusted over `settings`.

    values: (settings, replicates) array. Returns (mean, se, q, q_power) with the quantile
    q = t_{1 - 0.025/settings, R-1} and q_power = t_{0.8, R-1} (for the detectable effect).
    """
    n_rep = values.shape[1]
    mean = values.mean(axis=1)
    se = values.std(axis=1, ddof=1) / math.sqrt(n_rep)
    q = float(stats.t.ppf(1 - (1 - LEVEL) / 2 / settings, n_rep - 1))
    return mean, se, q, float(stats.t.ppf(POWER, n_rep - 1))


def rate_interval(successes: int, trials: int, settings: int = 1) -> tuple[float, float, float]:
    """Rate and its exact (Clopper-Pearson) 95% interval, Bonferroni-adjusted over `settings`."""
    trials = validate.integer("trials", trials, minimum=1)
    k = validate.integer("successes", successes, minimum=0, maximum=trials)
    ci = stats.binomtest(k, trials).proportion_ci(1 - (1 - LEVEL) / settings, "exact")
    return k / trials, float(ci.low), float(ci.high)


def replicate_matrix(name: str, values) -> np.ndarray:
    """Values as a (settings, replicates) array with at least MIN_REPLICATES replicates."""
    values = validate.array(name, values, ndim=None)
    if values.ndim not in (1, 2):
        raise ValueError(f"{name} must be (replicates,) or (settings, replicates), "
                         f"got shape {values.shape}")  # fmt: skip
    values = values.reshape(1, -1) if values.ndim == 1 else values
    if values.shape[1] < MIN_REPLICATES:
        raise ValueError(f"{name} needs >= {MIN_REPLICATES} replicates, got {values.shape[1]}")
    return values


@dataclass(frozen=True)
class Judged:
    """The deciding setting of a replicated check: its numbers and outcome."""

    setting: int
    estimate: float
    lo: float
    hi: float
    outcome: str
    detectable: float | None
    needed: int | None


def judge_replicates(values: np.ndarray, low, high, predicted) -> Judged:
    """Judge every setting of `values` (S, R); the worst outcome, then the smallest margin
    inside the bounds, decides. Inconclusive outcomes get a detectable effect and replicates."""
    settings, n_rep = values.shape
    mean, se, q, q_power = t_interval(values, settings)
    rows = zip(mean - q * se, mean + q * se, low, high, predicted, strict=True)
    outcomes = [judge(*row) for row in rows]
    margin = np.minimum(mean - q * se - low, high - mean - q * se)
    k = min(range(settings), key=lambda i: (RANK[outcomes[i]], margin[i]))
    detectable = needed = None
    if outcomes[k] == "inconclusive":
        detectable = (q + q_power) * float(se[k])
        effect = min(abs(predicted[k] - low[k]), abs(predicted[k] - high[k]))
        # Replicates that bring the detectable effect under the predicted one; when it is
        # already under (an unlucky draw), at least twice as many as were run.
        needed = max(math.ceil(n_rep * (detectable / effect) ** 2), 2 * n_rep)
    return Judged(k, float(mean[k]), float(mean[k] - q * se[k]), float(mean[k] + q * se[k]),
                  outcomes[k], detectable, needed)  # fmt: skip


def detectable_from_interval(lo: float, hi: float) -> float:
    """The detectable effect behind a 95% interval: its half-width scaled to 80% power."""
    z = stats.norm.ppf(1 - (1 - LEVEL) / 2)
    return (hi - lo) / 2 * (z + stats.norm.ppf(POWER)) / z


def holds_for(lo: float, hi: float, low: float, high: float,
              predicted: float) -> tuple[str, float | None, float | None]:  # fmt: skip
    """The thresholds over which an outcome holds, given its interval [lo, hi].

    Moves one bound of the criterion [low, high] (the one that decides: the bound whose own
    judgement is the outcome, the nearer one on a tie) with the other and the predicted effect
    fixed, and returns (bound, a, b): the outcome of `judge` stays the same for every value of
    that bound in (a, b); None is an open side. For `above=t` a pass holds for t < lo, a fail
    for t > hi (t > lo when the interval excludes the predicted effect), an inconclusive
    outcome for t in [lo, hi].
    """
    inside = lo <= predicted <= hi
    sides = []
    if math.isfinite(low):  # a lower bound t: the criterion reads 'value > t'
        outcome = judge(lo, hi, low, math.inf, predicted)
        span = {"pass": (None, lo), "fail": (lo if not inside else hi, None),
                "inconclusive": (lo, hi)}[outcome]  # fmt: skip
        sides.append(("low", outcome, span, abs(lo - low)))
    if math.isfinite(high):  # an upper bound t: 'value < t'
        outcome = judge(lo, hi, -math.inf, high, predicted)
        span = {"pass": (hi, None), "fail": (None, hi if not inside else lo),
                "inconclusive": (lo, hi)}[outcome]  # fmt: skip
        sides.append(("high", outcome, span, abs(high - hi)))
    overall = judge(lo, hi, low, high, predicted)
    deciding = [side for side in sides if side[1] == overall] or sides
    bound, _, (a, b), _ = min(deciding, key=lambda side: side[3])
    return bound, a, b


FRAGILE = 0.10  # an outcome is fragile when a threshold move of 10% would change it


def fragile(bound: str, a: float | None, b: float | None, low: float, high: float,
            estimate: float) -> bool:  # fmt: skip
    """Whether the outcome changes if the deciding threshold moves by less than FRAGILE of its
    own size (of the estimate's, for a threshold at 0): the `holds_for` edge is that close."""
    threshold = low if bound == "low" else high
    edges = [e for e in (a, b) if e is not None]
    margin = min(abs(e - threshold) for e in edges) if edges else math.inf
    return margin < FRAGILE * max(abs(threshold), abs(estimate))
