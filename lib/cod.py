"""Clustering-On-Difficulty (COD) downstream prediction (Xu et al. 2025, arXiv:2502.17262 v4).

COD predicts a large model's benchmark accuracy from the per-item pass rates of small models:
(1) each item's feature vector is its pass rates across the small models, ordered by compute;
(2) items are clustered with an improved MeanShift (minimum cluster size K, bandwidth capped
at U); (3) a cluster is kept ("extrapolatable") iff its fitted Eq. (4) parameters satisfy
a > 1, b > 0.1, 0 <= c < 1 (and, here, no parameter sits on a bound of the fit); (4) the kept
clusters' laws are extrapolated to the target compute and averaged by size; (5) a monotone
map f takes that subset accuracy to full-set accuracy.

Eq. (4): y(C) = g + (1 - g) exp(-a C^-b - c). Here C is always in units of the smallest
model's training compute (C / C_1), so "a > 1" means: the smallest model's pass rate on the
cluster is below g + (1 - g) e^(-1 - c). The rivals live here too: the direct Eq. (4) fit of
the whole benchmark, the route through the loss of Gadre et al. 2024 (arXiv:2403.08540), the
same pipeline without clustering, and linear or isotonic maps in place of COD's.

The toy benchmark (`make_item_world`) is a population of items whose answer loss follows
Theorem 1's power law L(C) = alpha C^-beta + gamma (smooth items, and steep "emergent" ones),
plus items whose pass rate wobbles from model to model without a trend (noisy) and items no
model can answer (broken); `evaluate_model` gives one model's exact pass rates and loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import interpolate, optimize
from scipy.spatial.distance import cdist
from sklearn.cluster import estimate_bandwidth
from sklearn.isotonic import IsotonicRegression

from lib import validate

# Xu et al. 2025 defaults (Sec. 3 and Alg. 1): minimum cluster size K, bandwidth quantile Q,
# extrapolatable-cluster thresholds on Eq. (4)'s a, b, c, and samples behind each pass rate.
XU2025_K = 10
XU2025_Q = 0.1
XU2025_A_MIN = 1.0
XU2025_B_MIN = 0.1
XU2025_C_RANGE = (0.0, 1.0)  # 0 <= c < 1
XU2025_SAMPLES = 100
# Alg. 1 repeats until no round adds a cluster; this cap is a guard that never binds here.
MAX_MEANSHIFT_ROUNDS = 100
# A referee's filter with no clustering: keep the items whose pass rate never falls by more
# than this between adjacent small models (issue 67 of this book; not from the paper).
STEADY_MAX_DROP = 0.05
# Bounds of the Eq. (4) fit on (g, ln a, b, c). c may go negative so that the "0 <= c" rule
# can reject a cluster at all. A fit that ends on one of these bounds (g's lower bound 0, the
# chance level of an open-answer benchmark, excepted) has not pinned the law down.
COD_LAW_BOUNDS = ((0.0, -10.0, 0.0, -3.0), (0.99, 20.0, 10.0, 10.0))
ON_BOUND_RTOL = 1e-3  # "on a bound": within this fraction of the parameter's range


# ----------------------------------------------------------------------------- Eq. (4)
def cod_law(C, g: float, a: float, b: float, c: float) -> np.ndarray:
    """Eq. (4) of Xu et al. 2025: y(C) = g + (1 - g) exp(-a C^-b - c); C in units of C_1."""
    C = validate.array("C", C, positive=True)
    g, a, b, c = (validate.real(k, v) for k, v in zip("gabc", (g, a, b, c), strict=True))
    return g + (1 - g) * np.exp(-a * C**-b - c)


@dataclass(frozen=True)
class CodLawFit:
    """Fitted Eq. (4) parameters, the RMS residual (accuracy units), and whether the fit ended
    on a bound of COD_LAW_BOUNDS (then the law is not pinned down by the points)."""

    g: float
    a: float
    b: float
    c: float
    rmse: float
    on_bound: bool = False

    def predict(self, C) -> np.ndarray:
        """y(C) with C in units of the smallest model's compute."""
        return cod_law(C, self.g, self.a, self.b, self.c)

    @property
    def extrapolatable(self) -> bool:
        """The paper's rule a > 1, b > 0.1, 0 <= c < 1, and the fit is off every bound."""
        lo, hi = XU2025_C_RANGE
        rule = self.a > XU2025_A_MIN and self.b > XU2025_B_MIN and lo <= self.c < hi
        return rule and not self.on_bound


def _on_bound(theta: np.ndarray) -> bool:
    """True if a fitted (g, ln a, b, c) sits on a bound (g = 0 excepted: chance level)."""
    lo, hi = (np.array(b) for b in COD_LAW_BOUNDS)
    tol = ON_BOUND_RTOL * (hi - lo)
    at_lo, at_hi = theta - lo <= tol, hi - theta <= tol
    at_lo[0] = False
    return bool(np.any(at_lo | at_hi))


def fit_cod_law(C, y) -> CodLawFit:
    """Least-squares fit of Eq. (4) to accuracies y (in [0, 1]) at compute C (units of C_1).

    Trust-region least squares on (g, ln a, b, c) inside COD_LAW_BOUNDS (ln a, because a
    spans orders of magnitude) with the analytic Jacobian, from a grid of starts; the best
    residual wins.
    """
    C = validate.array("C", C, positive=True, min_size=4)
    y = validate.array("y", y, low=0.0, high=1.0, min_size=4)
    validate.same_length(C=C, y=y)
    log_C = np.log(C)

    def residuals(theta: np.ndarray) -> np.ndarray:
        g, log_a, b, c = theta
        return g + (1 - g) * np.exp(-np.exp(log_a - b * log_C) - c) - y

    def jacobian(theta: np.ndarray) -> np.ndarray:
        g, log_a, b, c = theta
        u = np.exp(log_a - b * log_C)  # a C^-b
        e = np.exp(-u - c)
        return np.column_stack([1 - e, -(1 - g) * e * u, (1 - g) * e * u * log_C, -(1 - g) * e])

    starts = [(0.5 * y.min(), la0, b0, 0.0) for la0 in (0.5, 3.0) for b0 in (0.5, 2.0)]
    fits = [optimize.least_squares(residuals, s, jac=jacobian, bounds=COD_LAW_BOUNDS)
            for s in starts]  # fmt: skip
    best = min(fits, key=lambda r: r.cost)
    g, log_a, b, c = map(float, best.x)
    rmse = float(np.sqrt(np.mean(best.fun**2)))
    return CodLawFit(g, float(np.exp(log_a)), b, c, rmse=rmse, on_bound=_on_bound(best.x))


# ----------------------------------------------------------------------------- clustering
def am_gm_gap(p) -> float:
    """Relative gap (mu_a - mu_g) / mu_a of positive pass rates p (Lemma 1 of Xu et al.).

    Lemma 1: mu_a - mu_g ~= sigma^2 / (2 mu_a) for small spread, so a small gap means the
    items are homogeneous in difficulty and Eq. (4) holds for their mean.
    """
    p = validate.array("p", p, positive=True)
    mu_a = p.mean()
    return float((mu_a - np.exp(np.log(p).mean())) / mu_a)


@dataclass(frozen=True)
class Clustering:
    """Labels (n_items,) with -1 for unclustered items; bandwidth R; cluster centres (k, dim),
    the MeanShift modes every member lies within R of; the MeanShift rounds Alg. 1 took."""

    labels: np.ndarray
    bandwidth: float
    centers: np.ndarray
    rounds: int

    @property
    def n_clusters(self) -> int:
        return len(self.centers)


def mean_shift(X, bandwidth: float, max_iter: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's MeanShift (flat kernel, a seed at every item, cluster_all=True), with all
    seeds climbing at once: returns centres (k, dim) and labels (n,).

    Hand-written because scikit-learn queries neighbours once per seed and step, which costs
    ~10 s on 1,500 items here; one (seeds, items) distance matrix per step gives the same
    centres and labels (tests/test_cod.py compares them) 30x faster.
    """
    X = validate.array("X", X, ndim=2)
    bandwidth = validate.real("bandwidth", bandwidth, low=0, low_open=True)
    max_iter = validate.integer("max_iter", max_iter, minimum=1)
    n, stop = len(X), 1e-3 * bandwidth  # scikit-learn's convergence threshold
    means, final, counts, active = X.copy(), np.zeros_like(X), np.zeros(n, int), np.arange(n)
    for step in range(max_iter + 1):
        if len(active) == 0:
            break
        within = cdist(means[active], X) <= bandwidth  # (active seeds, items)
        n_in = within.sum(axis=1)
        new = within @ X / np.maximum(n_in, 1)[:, None]
        shift = np.linalg.norm(new - means[active], axis=1)
        done = (n_in == 0) | (shift <= stop) | (step == max_iter)
        idx = done & (n_in > 0)
        final[active[idx]], counts[active[idx]] = new[idx], n_in[idx]
        means[active], active = new, active[~done]
    # Keep one centre per converged point, by intensity (ties: the larger coordinates), and
    # drop every centre within the bandwidth of a more intense one.
    centres, first = np.unique(final[counts > 0], axis=0, return_index=True)
    intensity = counts[counts > 0][first]
    order = np.lexsort([*centres.T[::-1], intensity])[::-1]
    centres = centres[order]
    near, unique = cdist(centres, centres) <= bandwidth, np.ones(len(centres), dtype=bool)
    for i in range(len(centres)):
        if unique[i]:
            unique[near[i]] = False
            unique[i] = True
    centres = centres[unique]
    return centres, cdist(X, centres).argmin(axis=1)


def improved_meanshift(
    X, K: int = XU2025_K, Q: float = XU2025_Q, U: float | None = None, seed: int = 0
) -> Clustering:
    """Alg. 1 of Xu et al.: MeanShift with bandwidth R = min(estimate_bandwidth(Q), U).

    X: (n_items, dim) features in [0, 1]. U defaults to sqrt(dim) / 10 (a tenth of the largest
    possible distance). Each round clusters the unlabelled items with `mean_shift` (a seed at
    every item, scikit-learn's default); members farther than R from their centre are reset,
    clusters with < K members are dropped; stop when a round adds no cluster.
    """
    X = validate.array("X", X, ndim=2, low=0.0, high=1.0)
    K = validate.integer("K", K, minimum=1)
    Q = validate.real("Q", Q, low=0.0, high=1.0, low_open=True)
    U = np.sqrt(X.shape[1]) / 10 if U is None else validate.real("U", U, low=0, low_open=True)
    seed = validate.integer("seed", seed, minimum=0)
    R = float(min(estimate_bandwidth(X, quantile=Q, random_state=seed % 2**32), U))
    R = R if R > 0 else float(U)  # estimate_bandwidth is 0 when most items coincide
    labels, centers, rounds = np.full(len(X), -1), [], 0
    while rounds < MAX_MEANSHIFT_ROUNDS:
        free = np.flatnonzero(labels == -1)
        if len(free) < K:
            break
        rounds += 1
        centres, found = mean_shift(X[free], R)
        added = 0
        for k, centre in enumerate(centres):
            members = free[(found == k) & (np.linalg.norm(X[free] - centre, axis=1) <= R)]
            if len(members) >= K:
                labels[members] = len(centers)
                centers.append(centre)
                added += 1
        if added == 0:
            break
    return Clustering(labels, R, np.array(centers).reshape(-1, X.shape[1]), rounds)


# ----------------------------------------------------------------------------- mapping
MAPPINGS = ("monotone", "linear", "isotonic")


@dataclass(frozen=True)
class MonotoneMap:
    """f: subset accuracy -> full accuracy; monotone, through (0, 0) and (1, 1), inside [0, 1]."""

    x: np.ndarray
    y: np.ndarray

    def __call__(self, s) -> np.ndarray:
        s = np.atleast_1d(validate.array("s", s, ndim=None, low=0.0, high=1.0))
        return np.clip(interpolate.PchipInterpolator(self.x, self.y)(s), 0.0, 1.0)


def _map_points(subset_acc, full_acc) -> tuple[np.ndarray, np.ndarray]:
    xs = validate.array("subset_acc", subset_acc, low=0.0, high=1.0)
    ys = validate.array("full_acc", full_acc, low=0.0, high=1.0)
    validate.same_length(subset_acc=xs, full_acc=ys)
    return xs, ys


def fit_mapping(subset_acc, full_acc) -> MonotoneMap:
    """COD's map from subset to full accuracy: monotone, through (0, 0), the points, (1, 1).

    The paper fits a cubic smoothing spline with RMSE <= 0.005 on the points; an
    unconstrained spline can overshoot between close points, so we make the points monotone
    (isotonic regression) and interpolate them with PCHIP, which keeps monotonicity and
    [0, 1] and has RMSE 0 on monotone points.
    """
    xs, ys = _map_points(subset_acc, full_acc)
    x = np.concatenate([[0.0], xs, [1.0]])
    y = IsotonicRegression(y_min=0.0, y_max=1.0).fit_transform(x, np.concatenate([[0], ys, [1]]))
    order = np.argsort(x, kind="stable")
    keep = np.concatenate([[True], np.diff(x[order]) > 1e-9])
    return MonotoneMap(x[order][keep], y[order][keep])


def apply_mapping(subset_acc, full_acc, s, how: str = "monotone") -> np.ndarray:
    """Map subset accuracies s to full accuracies with a map fitted on the (subset_acc,
    full_acc) points: COD's `fit_mapping` ("monotone"), or a rival a practitioner would use
    on the same points: least squares line ("linear", clipped to [0, 1]) or isotonic
    regression without the (0, 0), (1, 1) end points ("isotonic", flat beyond the points)."""
    xs, ys = _map_points(subset_acc, full_acc)
    s = np.atleast_1d(validate.array("s", s, ndim=None, low=0.0, high=1.0))
    how = validate.choice("how", how, MAPPINGS)
    if how == "monotone":
        return fit_mapping(xs, ys)(s)
    if how == "linear":
        if len(xs) < 2 or np.ptp(xs) == 0:
            raise ValueError("a linear map needs >= 2 distinct subset accuracies")
        slope, intercept = np.polyfit(xs, ys, 1)
        return np.clip(intercept + slope * s, 0.0, 1.0)
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(xs, ys)
    return iso.predict(s)


# ----------------------------------------------------------------------------- pipeline
@dataclass(frozen=True)
class CodPrediction:
    """One COD run: clustering, per-cluster fits, kept clusters, the subset and its law.

    weights: (n_items,) each item's share of the benchmark score (1 / n_items unless given).
    """

    clustering: Clustering
    fits: tuple[CodLawFit, ...]
    kept: np.ndarray  # (n_clusters,) bool
    subset_mask: np.ndarray  # (n_items,) bool, the predictable subset
    subset_pred: np.ndarray  # (n_targets,) extrapolated subset accuracy; NaN if nothing kept
    weights: np.ndarray  # (n_items,), sums to 1

    @property
    def predicted(self) -> bool:
        """Whether COD kept a cluster (else it makes no prediction)."""
        return bool(self.kept.any())

    def subset_share(self) -> float:
        """The predictable subset's share of the benchmark score (weighted items)."""
        return float(self.weights[self.subset_mask].sum())

    def full_pred(self, P, anchor=None, mapping: str = "monotone") -> np.ndarray:
        """Map subset_pred to the full set with a map fitted on the small models' (subset,
        full) accuracies, P (n_items, n_models), plus an anchor's pass rates (n_items,) if
        given; `mapping` picks COD's map or a rival (`apply_mapping`). NaN if nothing kept."""
        P = validate.array("P", P, ndim=2, low=0.0, high=1.0)
        if P.shape[0] != len(self.subset_mask):
            raise ValueError(f"P has {P.shape[0]} items, the prediction {len(self.subset_mask)}")
        if not self.predicted:
            return np.full(len(self.subset_pred), np.nan)
        w, m = self.weights, self.subset_mask
        xs, ys = w[m] @ P[m] / w[m].sum(), w @ P
        if anchor is not None:
            a = validate.array("anchor", anchor, low=0.0, high=1.0)
            validate.same_length(anchor=a, subset_mask=m)
            xs, ys = np.append(xs, w[m] @ a[m] / w[m].sum()), np.append(ys, w @ a)
        return apply_mapping(xs, ys, np.clip(self.subset_pred, 0.0, 1.0), mapping)


def _weights(weights, n: int) -> np.ndarray:
    if weights is None:
        return np.full(n, 1.0 / n)
    w = validate.array("weights", weights, nonnegative=True)
    if len(w) != n or w.sum() <= 0:
        raise ValueError(f"weights must be {n} non-negative numbers with a positive sum")
    return w / w.sum()


def predict_cod(P, C, C_target, seed: int = 0, K: int = XU2025_K, weights=None) -> CodPrediction:
    """COD's stages 1-4. P: (n_items, n_models) small-model pass rates; C: (n_models,) compute.

    C and C_target must share one unit (we use C / C_1). Zero-performance items are dropped
    before clustering (they stay in the full set); `extrapolate_clusters` does the rest.
    weights: each item's share of the score (equal by default; real data may weight tasks).
    """
    P = validate.array("P", P, ndim=2, low=0.0, high=1.0)
    C = validate.array("C", C, positive=True)
    validate.array("C_target", C_target, ndim=None, positive=True)
    seed = validate.integer("seed", seed, minimum=0)
    if P.shape[1] != len(C):
        raise ValueError(f"P has {P.shape[1]} models but C has {len(C)}; pass one C per model")
    active = np.flatnonzero(P.max(axis=1) > 0)
    cl = improved_meanshift(P[active], K=K, seed=seed)
    labels = np.full(len(P), -1)
    labels[active] = cl.labels
    clustering = Clustering(labels, cl.bandwidth, cl.centers, cl.rounds)
    return extrapolate_clusters(P, C, C_target, clustering, weights=weights)


def extrapolate_clusters(P, C, C_target, clustering: Clustering, weights=None,
                         rule: bool = True) -> CodPrediction:  # fmt: skip
    """COD's stages 2-4 for given clusters: fit Eq. (4) to each cluster's mean pass rate, keep
    the extrapolatable ones (`rule=False` keeps all) and average their laws at C_target by
    weight. P: (n_items, n_models); labels -1 are unclustered."""
    P = validate.array("P", P, ndim=2, low=0.0, high=1.0)
    C = validate.array("C", C, positive=True)
    C_target = np.atleast_1d(validate.array("C_target", C_target, ndim=None, positive=True))
    labels, k = clustering.labels, clustering.n_clusters
    if labels.shape != (len(P),) or (k and labels.max() >= k):
        raise ValueError(f"clustering must label the {len(P)} items with -1..{k - 1}")
    w = _weights(weights, len(P))
    sizes = np.array([w[labels == j].sum() for j in range(k)])
    fits = tuple(fit_cod_law(C, w[labels == j] @ P[labels == j] / sizes[j]) for j in range(k))
    kept = np.array([f.extrapolatable or not rule for f in fits], dtype=bool)
    pred = np.full(len(C_target), np.nan)
    if kept.any():
        laws = np.array([fits[j].predict(C_target) for j in np.flatnonzero(kept)])
        pred = sizes[kept] @ laws / sizes[kept].sum()
    return CodPrediction(clustering, fits, kept, np.isin(labels, np.flatnonzero(kept)), pred, w)


def random_clusters(clustering: Clustering, active, seed: int) -> Clustering:
    """The negative control of clustering on difficulty: the same cluster sizes and the same
    number of unclustered items, but the labels shuffled at random among the active items."""
    active = np.asarray(active, dtype=bool)
    if active.shape != clustering.labels.shape:
        raise ValueError(f"active must be {clustering.labels.shape[0]} booleans, one per item")
    labels = clustering.labels.copy()
    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    labels[active] = rng.permutation(labels[active])
    return Clustering(labels, clustering.bandwidth, clustering.centers, 0)


def one_group(active) -> Clustering:
    """No clustering: every active item in one group (the rival "same pipeline, no clusters")."""
    active = np.asarray(active, dtype=bool)
    return Clustering(np.where(active, 0, -1), np.nan, np.zeros((1, 0)), 0)


# ----------------------------------------------------------------------------- baselines
def loss_route(C, L, acc, C_target, anchor: tuple[float, float] | None = None) -> np.ndarray:
    """The route through the loss: L(C) = E + A C^-alpha fitted on the small models, then
    Gadre et al.'s Eq. 5 accuracy-vs-loss map (fitted on the small models, plus an anchor's
    (L, acc) if given) at the extrapolated loss. C, L, acc: (n_models,); returns (n_targets,)."""
    from lib.fit import fit_saturating_power_law

    C = validate.array("C", C, positive=True, min_size=3)
    L = validate.array("L", L, positive=True, min_size=3)
    acc = validate.array("acc", acc, low=0.0, high=1.0, min_size=3)
    validate.same_length(C=C, L=L, acc=acc)
    C_target = validate.array("C_target", np.atleast_1d(C_target), positive=True)
    L_hat = fit_saturating_power_law(C, L).predict(C_target)
    if anchor is not None:
        L_a = validate.real("anchor[0]", anchor[0], low=0, low_open=True)
        acc_a = validate.probability("anchor[1]", anchor[1])
        L, acc = np.append(L, L_a), np.append(acc, acc_a)
    return 1 - error_vs_loss(L_hat, *fit_error_vs_loss(L, 1 - acc))


def linear_in_log_compute(C, acc, C_target) -> np.ndarray:
    """The first rival a practitioner tries: the least-squares line acc = u + v log10 C
    through the small models' (compute, score) points, read at C_target, clipped to [0, 1].
    C, acc: (n_models,); returns (n_targets,)."""
    C = validate.array("C", C, positive=True, min_size=2)
    acc = validate.array("acc", acc, low=0.0, high=1.0, min_size=2)
    validate.same_length(C=C, acc=acc)
    C_target = validate.array("C_target", np.atleast_1d(C_target), positive=True)
    slope, intercept = np.polyfit(np.log10(C), acc, 1)
    return np.clip(intercept + slope * np.log10(C_target), 0.0, 1.0)


def steady_items(P, max_drop: float = STEADY_MAX_DROP) -> np.ndarray:
    """A filter with no clustering: the active items whose pass rate never falls by more than
    `max_drop` between adjacent small models. P: (n_items, n_models) ordered by compute;
    returns (n_items,) bool."""
    P = validate.array("P", P, ndim=2, low=0.0, high=1.0)
    max_drop = validate.real("max_drop", max_drop, low=0.0)
    if P.shape[1] < 2:
        raise ValueError(f"P must hold at least 2 models (columns), got {P.shape[1]}")
    return (P.max(axis=1) > 0) & (np.diff(P, axis=1).min(axis=1) >= -max_drop)


def gadre_loss_law(N, M, a: float, c: float, b: float, E: float) -> np.ndarray:
    """Gadre et al. 2024's reparametrised law: L(N, M) = E + a N^b + c 6^(b/2) (M N)^b, b < 0.

    N: parameters; M: tokens per parameter (D / N); L in nats/token.
    """
    N, M = validate.array("N", N, positive=True), validate.array("M", M, positive=True)
    a, c, b, E = (validate.real(k, v) for k, v in zip("acbE", (a, c, b, E), strict=True))
    return E + a * N**b + c * 6 ** (b / 2) * (M * N) ** b


def fit_gadre_loss(N, M, L) -> np.ndarray:
    """Fit (a, c, b, E) of `gadre_loss_law` with their curve_fit grid of starts, best RMSE."""
    N, M, L = (validate.array(k, v, positive=True) for k, v in (("N", N), ("M", M), ("L", L)))
    if validate.same_length(N=N, M=M, L=L) < 4:
        raise ValueError(f"N, M, L need at least 4 points, got {len(N)}")

    def law(x, a, c, b, E):
        return E + a * x[0] ** b + c * 6 ** (b / 2) * (x[1] * x[0]) ** b

    best, best_cost = None, np.inf
    for p0 in [(a0, c0, b0, E0) for a0 in (1e2, 3e2, 1e3, 3e3) for c0 in (1e2, 3e2, 1e3, 3e3)
               for b0 in (-0.1, -0.3) for E0 in (0.0, 1.0, 2.0, 10.0)]:  # fmt: skip
        try:
            theta, _ = optimize.curve_fit(law, (N, M), L, p0=p0, maxfev=10000)
        except RuntimeError:  # this start did not converge; others will
            continue
        cost = float(np.sum((law((N, M), *theta) - L) ** 2))
        if cost < best_cost:
            best, best_cost = theta, cost
    if best is None:
        raise ValueError("no start of the Gadre loss fit converged")
    return best


def error_vs_loss(L, k: float, gamma: float, eps: float) -> np.ndarray:
    """Gadre et al. 2024, Eq. 5: Err(L) = eps - k exp(-gamma L) (top-1 error, L in nats)."""
    L = validate.array("L", L)
    k, gamma, eps = (validate.real(n, v) for n, v in (("k", k), ("gamma", gamma), ("eps", eps)))
    return eps - k * np.exp(-gamma * L)


def fit_error_vs_loss(L, err) -> np.ndarray:
    """Fit (k, gamma, eps) of `error_vs_loss` by scipy curve_fit from (1, 1, 1), as they did."""
    L = validate.array("L", L, min_size=3)
    err = validate.array("err", err, low=0.0, high=1.0, min_size=3)
    validate.same_length(L=L, err=err)
    theta, _ = optimize.curve_fit(lambda x, k, gamma, eps: eps - k * np.exp(-gamma * x), L, err,
                                  p0=[1, 1, 1], maxfev=10000)  # fmt: skip
    return theta


# ----------------------------------------------------------------------------- toy benchmark
ITEM_KINDS = ("smooth", "emergent", "noisy", "broken")


@dataclass(frozen=True)
class WorldConfig:
    """How a toy benchmark's items scale (`make_item_world`); compute as log10(C / C_1)."""

    fractions: tuple[float, float, float, float]  # of smooth, emergent, noisy, broken items
    log_threshold: tuple[float, float]  # log10 C* ~ U(range): pass rate e^-gamma / 2 at C*
    smooth_beta: tuple[float, float]  # exponent of a smooth item's answer loss ~ U(range)
    emergent_beta: tuple[float, float]  # exponent of an emergent (steep) item's ~ U(range)
    gamma_max: float  # irreducible answer loss ~ U(0, gamma_max): ceiling e^-gamma
    noisy_logit: tuple[float, float]  # mean logit of a noisy item's pass rate ~ U(range)
    noisy_sd: float  # SD of a noisy item's logit from model to model (no trend in C)
    item_noise: float  # SD (decades) of an item's threshold from model to model
    model_noise: float  # SD (decades) of a model's effective compute
    family_noise: float  # SD (decades) of an item's threshold between model families
    loss: tuple[float, float, float]  # validation loss E + A C_eff^-alpha (nats/token)
    loss_noise: float  # SD of a measured validation loss (nats/token)


@dataclass(frozen=True)
class ItemWorld:
    """A toy benchmark: each item's kind (index into ITEM_KINDS) and scaling parameters."""

    config: WorldConfig
    kind: np.ndarray  # (n_items,)
    log_threshold: np.ndarray  # (n_items,) log10 C*
    beta: np.ndarray  # (n_items,) exponent of the answer loss
    gamma: np.ndarray  # (n_items,) irreducible answer loss
    noisy_logit: np.ndarray  # (n_items,) mean logit (noisy items only)

    @property
    def n_items(self) -> int:
        return len(self.kind)


def make_item_world(n_items: int, config: WorldConfig, seed: int) -> ItemWorld:
    """Draw n_items items: kinds with config.fractions, then each kind's parameters."""
    n = validate.integer("n_items", n_items, minimum=1)
    if not isinstance(config, WorldConfig):
        raise TypeError(f"config must be a WorldConfig, got {type(config).__name__}")
    frac = validate.array("config.fractions", config.fractions, nonnegative=True)
    if len(frac) != len(ITEM_KINDS) or not np.isclose(frac.sum(), 1.0):
        raise ValueError(f"config.fractions must be 4 shares summing to 1, got {frac}")
    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    kind = rng.choice(len(ITEM_KINDS), size=n, p=frac)
    beta = np.where(kind == 1, rng.uniform(*config.emergent_beta, n),
                    rng.uniform(*config.smooth_beta, n))  # fmt: skip
    threshold, gamma = rng.uniform(*config.log_threshold, n), rng.uniform(0, config.gamma_max, n)
    return ItemWorld(config, kind, threshold, beta, gamma, rng.uniform(*config.noisy_logit, n))


@dataclass(frozen=True)
class ToyModel:
    """One model of the toy world: compute C (units of C_1), the exact pass rate of every item
    P (n_items,) and its validation loss L (nats/token)."""

    C: float
    P: np.ndarray
    L: float


def evaluate_model(world: ItemWorld, log_C: float, seed: int, family=None) -> ToyModel:
    """A model trained with compute 10^log_C (units of C_1) in `world`, with its own noise.

    Smooth and emergent items: Theorem 1's answer loss L = ln2 (C_eff / C*)^-beta + gamma and
    pass rate e^-L, with the model's effective compute C_eff (model_noise) and each item's
    threshold C* shifted per model (item_noise) and per family (`family`: (n_items,) decades,
    from `family_offsets`; None for the main family). Noisy items: a logistic pass rate that
    wobbles around its mean logit with no trend. Broken items: 0.
    """
    if not isinstance(world, ItemWorld):
        raise TypeError(f"world must be an ItemWorld, got {type(world).__name__}")
    log_C = validate.real("log_C", log_C)
    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    cfg, n = world.config, world.n_items
    shift = np.zeros(n) if family is None else validate.array("family", family)
    validate.same_length(family=shift, items=world.kind)
    lc = log_C + cfg.model_noise * rng.normal()
    t = world.log_threshold + shift + cfg.item_noise * rng.normal(size=n)
    answer_loss = np.log(2) * 10.0 ** np.minimum(-world.beta * (lc - t), 3.0) + world.gamma
    noisy = 1 / (1 + np.exp(-(world.noisy_logit + cfg.noisy_sd * rng.normal(size=n))))
    P = np.select([world.kind <= 1, world.kind == 2], [np.exp(-answer_loss), noisy], 0.0)
    E, A, alpha = cfg.loss
    L = E + A * 10.0 ** (-alpha * lc) + cfg.loss_noise * rng.normal()
    return ToyModel(float(10.0**log_C), P, float(L))


def family_offsets(world: ItemWorld, seed: int) -> np.ndarray:
    """Per-item threshold offsets (decades) of another model family, (n_items,)."""
    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    return world.config.family_noise * rng.normal(size=world.n_items)


def sampled_pass_rates(P, n_samples: int, seed: int) -> np.ndarray:
    """Pass rates as the paper measures them, Binomial(n_samples, P) / n_samples, from exact
    pass rates P (any shape, in [0, 1])."""
    P = validate.array("P", P, ndim=None, low=0.0, high=1.0)
    n_samples = validate.integer("n_samples", n_samples, minimum=1)
    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    return rng.binomial(n_samples, P) / n_samples


# ----------------------------------------------------------------------------- comparison
@dataclass(frozen=True)
class Anchor:
    """A model of another family that every method may use: its pass rates P (n_items,), its
    compute C (units of C_1; below the target's) and its validation loss L (None: unknown)."""

    P: np.ndarray
    C: float
    L: float | None = None


@dataclass(frozen=True)
class Comparison:
    """Every method's predicted score at the target, the truth, and COD's runs behind them:
    `cod` on its clusters, `control` on the same clusters shuffled at random."""

    truth: float
    pred: dict[str, float]
    cod: CodPrediction
    control: CodPrediction | None  # None when the comparison ran without it
    target_P: np.ndarray  # (n_items,) the target's per-item scores

    def abs_error_pp(self, method: str) -> float:
        """|predicted - true| score at the target, in percentage points."""
        return 100 * abs(self.pred[validate.choice("method", method, self.pred)] - self.truth)

    def subset_error_pp(self, run: str = "cod") -> float:
        """EE: a run's extrapolated subset score minus the target's true score on that subset
        (pp); NaN when the run kept no cluster."""
        r = {"cod": self.cod, "control": self.control}[
            validate.choice("run", run, ("cod", "control"))
        ]
        if r is None or not r.predicted:
            return float("nan")
        w, m = r.weights, r.subset_mask
        return float(100 * (r.subset_pred[0] - w[m] @ self.target_P[m] / w[m].sum()))


def _or(x: np.ndarray, fallback: float) -> float:
    """A prediction, or the fallback (the largest small model's score) where it is NaN."""
    return float(fallback if np.isnan(x[0]) else x[0])


def compare_methods(P, C, C_target: float, target_P, *, L=None, anchor: Anchor | None = None,
                    weights=None, seed: int = 0, K: int = XU2025_K,
                    control: bool = True) -> Comparison:  # fmt: skip
    """Predict the target's score from the small models with COD and its rivals.

    P: (n_items, n_small) small models' pass rates; C: (n_small,) compute; target_P: the
    target's true per-item scores; L: (n_small,) validation losses (None: no loss route).
    Methods: COD (its monotone map, or a linear or isotonic one), the direct Eq. (4) fit, a
    line in log compute through the scores ("linear mean"), the loss route, "no clustering"
    (one group of all active items, no filter, COD's map), and the negative control "random
    clusters" (COD's clusters shuffled, and a second independent shuffle, "random clusters,
    second draw", without the anchor; `control=False` skips both);
    each also with the anchor, which may sit nowhere at or above the target's compute. A run
    that keeps no cluster falls back to the largest small model's score ("carry over").
    """
    P = validate.array("P", P, ndim=2, low=0.0, high=1.0)
    C = validate.array("C", C, positive=True)
    C_target = validate.real("C_target", C_target, low=0.0, low_open=True)
    seen = [*C, *([] if anchor is None else [anchor.C])]
    if max(seen) >= C_target:
        raise ValueError(f"a model with C = {max(seen):g} >= C_target = {C_target:g} leaks the "
                         "answer: fit on models smaller than the target")  # fmt: skip
    w = _weights(weights, len(P))
    target_P = validate.array("target_P", target_P, low=0.0, high=1.0)
    acc, active = w @ P, P.max(axis=1) > 0
    cod = predict_cod(P, C, [C_target], seed=seed, K=K, weights=w)
    shuffled = random_clusters(cod.clustering, active, seed)
    negative = extrapolate_clusters(P, C, [C_target], shuffled, w) if control else None
    second = None
    if control:
        reshuffled = random_clusters(cod.clustering, active, seed + 1)
        second = extrapolate_clusters(P, C, [C_target], reshuffled, w)
    alone = extrapolate_clusters(P, C, [C_target], one_group(active), w, rule=False)
    pred = {"carry over": float(acc[-1])}
    for suffix, a in (("", None), (" + anchor", anchor)):
        P_a = None if a is None else a.P
        for name, run in (("COD", cod), ("random clusters", negative)):
            if run is None:
                continue
            for how, label in (("monotone", ""), ("linear", ", linear map"),
                               ("isotonic", ", isotonic map")):  # fmt: skip
                pred[name + label + suffix] = _or(run.full_pred(P, P_a, how), acc[-1])
        pred["no clustering" + suffix] = _or(alone.full_pred(P, P_a), acc[-1])
        xs, ys = (C, acc) if a is None else (np.append(C, a.C), np.append(acc, w @ a.P))
        pred["direct fit" + suffix] = float(fit_cod_law(xs, ys).predict([C_target])[0])
        pred["linear mean" + suffix] = float(linear_in_log_compute(xs, ys, [C_target])[0])
        if L is not None:
            extra = None if a is None or a.L is None else (a.L, float(w @ a.P))
            pred["loss route" + suffix] = float(loss_route(C, L, acc, [C_target], extra)[0])
    pred["COD, no mapping"] = _or(cod.subset_pred, acc[-1])
    if second is not None:
        pred["random clusters, second draw"] = _or(second.full_pred(P), acc[-1])
    return Comparison(float(w @ target_P), pred, cod, negative, target_P)


@dataclass(frozen=True)
class ToyRun:
    """One replicate of the toy: its world, the models' exact pass rates, the sampled
    features the methods saw, and their comparison at the target."""

    world: ItemWorld
    small: tuple[ToyModel, ...]
    target: ToyModel
    anchor: ToyModel  # another family, below the target's compute
    replica: ToyModel  # a second model at the largest small compute (item consistency)
    features: np.ndarray  # (n_items, n_small) sampled pass rates
    comparison: Comparison


def run_toy(config: WorldConfig, n_items: int, log_C, log_C_target: float, log_C_anchor: float,
            n_samples: int, seed: int) -> ToyRun:  # fmt: skip
    """Draw a world and a model family from `seed`, and compare the methods on it.

    log_C: (n_small,) log10 compute of the small models (units of C_1); the target and the
    anchor (another family, `family_offsets`) sit at log_C_target and log_C_anchor. Every
    model, the sampling and COD's seed come from their own child of `seed`.
    """
    log_C = validate.array("log_C", log_C, min_size=4)
    state = np.random.SeedSequence(validate.integer("seed", seed, minimum=0)).generate_state(
        len(log_C) + 6
    )
    world = make_item_world(n_items, config, int(state[0]))
    small = tuple(evaluate_model(world, lc, int(s)) for lc, s in zip(log_C, state[6:], strict=True))
    target = evaluate_model(world, log_C_target, int(state[1]))
    family = family_offsets(world, int(state[2]))
    anchor = evaluate_model(world, log_C_anchor, int(state[3]), family=family)
    replica = evaluate_model(world, log_C[-1], int(state[4]))
    draws = np.random.SeedSequence(int(state[5])).generate_state(3)
    P = sampled_pass_rates(np.column_stack([m.P for m in small]), n_samples, int(draws[0]))
    P_a = sampled_pass_rates(anchor.P, n_samples, int(draws[1]))
    C = np.array([m.C for m in small]) / small[0].C
    comparison = compare_methods(
        P, C, target.C / small[0].C, target.P, L=[m.L for m in small],
        anchor=Anchor(P_a, anchor.C / small[0].C, anchor.L), seed=int(draws[2]) % 2**31,
    )  # fmt: skip
    return ToyRun(world, small, target, anchor, replica, P, comparison)


def silhouette_vs_shuffled(X, labels, seed: int = 0) -> tuple[float, float]:
    """Silhouette of the clustered items (labels >= 0), and of KMeans with as many clusters on
    the same items after shuffling each feature column across them.

    Shuffling keeps every model's pass-rate distribution but breaks the items' scaling curves:
    a control with no real clusters. Both are measured on the clustering features, so this is
    an audit of the clustering, never evidence that the clusters are real. NaN if k < 2.
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    X = validate.array("X", X, ndim=2)
    labels = np.asarray(labels)
    if labels.shape != (len(X),) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be {len(X)} integers (-1: unclustered), got {labels!r:.60}")
    on = labels >= 0
    k = len(np.unique(labels[on]))
    if k < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    shuffled = np.column_stack([rng.permutation(col) for col in X[on].T])
    control = KMeans(n_clusters=k, n_init=4, random_state=int(rng.integers(2**31))).fit(shuffled)
    return float(silhouette_score(X[on], labels[on])), float(
        silhouette_score(shuffled, control.labels_)
    )
