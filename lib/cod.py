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
cluster is below g + (1 - g) e^(-1 - c). The baselines live here too: the direct Eq. (4) fit
of the whole benchmark, and the route through the loss of Gadre et al. 2024 (arXiv:2403.08540).

The toy benchmark (`make_fact_benchmark`) is fact recall: items (subject, relation) with
answers of 1-3 value tokens, Zipf-distributed training frequency and relation-specific value
priors, some scored against a wrong key. `train_fact_models` trains one shape of a family of
small networks on several such benchmarks at once and returns exact per-item pass rates.
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
    """Labels (n_items,) with -1 for unclustered items; bandwidth R; cluster centres (k, dim);
    the MeanShift rounds Alg. 1 took."""

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
                centers.append(X[members].mean(axis=0))
                added += 1
        if added == 0:
            break
    return Clustering(labels, R, np.array(centers).reshape(-1, X.shape[1]), rounds)


# ----------------------------------------------------------------------------- mapping
@dataclass(frozen=True)
class MonotoneMap:
    """f: subset accuracy -> full accuracy; monotone, through (0, 0) and (1, 1), inside [0, 1]."""

    x: np.ndarray
    y: np.ndarray

    def __call__(self, s) -> np.ndarray:
        s = np.atleast_1d(validate.array("s", s, ndim=None, low=0.0, high=1.0))
        return np.clip(interpolate.PchipInterpolator(self.x, self.y)(s), 0.0, 1.0)


def fit_mapping(subset_acc, full_acc) -> MonotoneMap:
    """Monotone map from subset to full accuracy through (0, 0), the points and (1, 1).

    The paper fits a cubic smoothing spline with RMSE <= 0.005 on the points; an
    unconstrained spline can overshoot between close points, so we make the points monotone
    (isotonic regression) and interpolate them with PCHIP, which keeps monotonicity and
    [0, 1] and has RMSE 0 on monotone points.
    """
    xs = validate.array("subset_acc", subset_acc, low=0.0, high=1.0)
    ys = validate.array("full_acc", full_acc, low=0.0, high=1.0)
    validate.same_length(subset_acc=xs, full_acc=ys)
    x = np.concatenate([[0.0], xs, [1.0]])
    y = IsotonicRegression(y_min=0.0, y_max=1.0).fit_transform(x, np.concatenate([[0], ys, [1]]))
    order = np.argsort(x, kind="stable")
    keep = np.concatenate([[True], np.diff(x[order]) > 1e-9])
    return MonotoneMap(x[order][keep], y[order][keep])


# ----------------------------------------------------------------------------- pipeline
@dataclass(frozen=True)
class CodPrediction:
    """One COD run: clustering, per-cluster fits, kept clusters, the subset and its law."""

    clustering: Clustering
    fits: tuple[CodLawFit, ...]
    kept: np.ndarray  # (n_clusters,) bool
    subset_mask: np.ndarray  # (n_items,) bool, the predictable subset
    subset_pred: np.ndarray  # (n_targets,) extrapolated subset accuracy; NaN if nothing kept

    def full_pred(self, P, anchor=None) -> np.ndarray:
        """f(subset_pred) with f fitted on the small models' (subset, full) accuracies, P
        (n_items, n_models), plus an anchor model's pass rates (n_items,) if given."""
        P = validate.array("P", P, ndim=2, low=0.0, high=1.0)
        if P.shape[0] != len(self.subset_mask):
            raise ValueError(f"P has {P.shape[0]} items, the prediction {len(self.subset_mask)}")
        if not self.kept.any():  # no predictable subset: COD makes no prediction
            return np.full(len(self.subset_pred), np.nan)
        xs, ys = P[self.subset_mask].mean(axis=0), P.mean(axis=0)
        if anchor is not None:
            a = validate.array("anchor", anchor, low=0.0, high=1.0)
            validate.same_length(anchor=a, subset_mask=self.subset_mask)
            xs, ys = np.append(xs, a[self.subset_mask].mean()), np.append(ys, a.mean())
        return fit_mapping(xs, ys)(self.subset_pred)


def predict_cod(P, C, C_target, seed: int = 0) -> CodPrediction:
    """COD's stages 1-4. P: (n_items, n_models) small-model pass rates; C: (n_models,) compute.

    C and C_target must share one unit (we use C / C_1). Zero-performance items are dropped
    before clustering (they stay in the full set); the subset prediction is the size-weighted
    mean of the kept clusters' Eq. (4) laws at C_target.
    """
    P = validate.array("P", P, ndim=2, low=0.0, high=1.0)
    C = validate.array("C", C, positive=True)
    C_target = np.atleast_1d(validate.array("C_target", C_target, ndim=None, positive=True))
    seed = validate.integer("seed", seed, minimum=0)
    if P.shape[1] != len(C):
        raise ValueError(f"P has {P.shape[1]} models but C has {len(C)}; pass one C per model")
    active = np.flatnonzero(P.max(axis=1) > 0)
    cl = improved_meanshift(P[active], seed=seed)
    labels = np.full(len(P), -1)
    labels[active] = cl.labels
    clustering = Clustering(labels, cl.bandwidth, cl.centers, cl.rounds)
    fits = tuple(fit_cod_law(C, P[labels == k].mean(axis=0)) for k in range(cl.n_clusters))
    kept = np.array([f.extrapolatable for f in fits], dtype=bool)
    subset = np.isin(labels, np.flatnonzero(kept))
    pred = np.full(len(C_target), np.nan)
    if kept.any():
        sizes = np.array([np.sum(labels == k) for k in np.flatnonzero(kept)])
        laws = np.array([fits[k].predict(C_target) for k in np.flatnonzero(kept)])
        pred = sizes @ laws / sizes.sum()
    return CodPrediction(clustering, fits, kept, subset, pred)


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
@dataclass(frozen=True)
class FactBenchmark:
    """Fact recall: item (subject, relation) -> answer of ell value tokens, trained with Zipf
    frequency. answer and key: (n_items, ell_max) value ids (0..n_values-1), -1 past ell; key
    differs from answer on mislabelled items (a broken benchmark item)."""

    subject: np.ndarray  # (n_items,) in 0..n_subjects-1
    relation: np.ndarray  # (n_items,) in 0..n_relations-1
    answer: np.ndarray  # as trained
    key: np.ndarray  # as scored
    freq: np.ndarray  # (n_items,) training probability of each item
    mislabelled: np.ndarray  # (n_items,) bool
    n_subjects: int
    n_relations: int
    n_values: int

    @property
    def n_items(self) -> int:
        return len(self.answer)

    @property
    def ell(self) -> np.ndarray:
        """Answer length of each item, in tokens."""
        return (self.answer >= 0).sum(axis=1)


def make_fact_benchmark(
    n_subjects: int, n_relations: int, n_values: int, ell_max: int, zipf: float,
    mislabel_frac: float, seed: int, typicality: float = 0.0,
) -> FactBenchmark:  # fmt: skip
    """All n_subjects * n_relations facts, 1..ell_max random value tokens each, Zipf frequency.

    Item i of random rank r_i has training probability proportional to r_i^-zipf. Each
    (relation, answer position) draws its values from its own prior p(v) ~ rank(v)^-typicality
    (0: uniform), so some answers are typical and easy to guess. A fraction mislabel_frac of
    items is scored against a key that differs from the trained answer at every position.
    """
    n_subjects = validate.integer("n_subjects", n_subjects, minimum=1)
    n_relations = validate.integer("n_relations", n_relations, minimum=1)
    n_values = validate.integer("n_values", n_values, minimum=2)
    ell_max = validate.integer("ell_max", ell_max, minimum=1)
    zipf = validate.real("zipf", zipf, low=0.0)
    mislabel_frac = validate.real("mislabel_frac", mislabel_frac, low=0.0, high=1.0, high_open=True)
    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    n = n_subjects * n_relations
    ell = rng.integers(1, ell_max + 1, n)
    used = np.arange(ell_max)[None, :] < ell[:, None]  # (n, ell_max)
    subject, relation = np.divmod(np.arange(n), n_relations)
    ranks = np.tile(np.arange(1.0, n_values + 1), (n_relations, ell_max, 1))
    prior = rng.permuted(ranks, axis=-1) ** -validate.real("typicality", typicality, low=0.0)
    prior /= prior.sum(-1, keepdims=True)  # (n_relations, ell_max, n_values)
    cdf = prior.cumsum(-1)[relation]  # (n, ell_max, n_values)
    drawn = np.minimum((rng.random((n, ell_max, 1)) > cdf).sum(-1), n_values - 1)
    answer = np.where(used, drawn, -1)
    mislabelled = rng.random(n) < mislabel_frac
    wrong = (answer + rng.integers(1, n_values, (n, ell_max))) % n_values  # never the answer
    key = np.where(used & mislabelled[:, None], wrong, answer)
    freq = (rng.permutation(n) + 1.0) ** -zipf
    return FactBenchmark(subject, relation, answer, key, freq / freq.sum(), mislabelled, n_subjects,
                         n_relations, n_values)  # fmt: skip


@dataclass(frozen=True)
class FactModel:
    """One trained model: width, depth, parameters N, training compute C = 6 N D (D: examples
    seen), the exact pass rate of every item P (n_items,) = exp(-answer NLL of its key), and
    the population loss L on the trained answers (nats per answer token)."""

    width: int
    depth: int
    N: int
    C: float
    P: np.ndarray
    L: float


def _init_params(seeds: list[int], sizes: list[tuple[int, int]], n_inputs: int) -> list:
    """Stacked parameters of one network per seed: an embedding (n_inputs, width) ~ N(0, 1),
    then per layer W (fan_in, fan_out) and b (1, fan_out) ~ U(+-1/sqrt(fan_in)) (torch.nn's
    default initialisation), each network drawn from its own seed and the shape."""
    import torch

    nets = []
    for seed in seeds:
        state = np.random.SeedSequence([seed, *np.ravel(sizes)]).generate_state(1, np.uint64)[0]
        gen = torch.Generator().manual_seed(int(state >> np.uint64(1)))
        net = [torch.randn(n_inputs, sizes[0][0], generator=gen)]
        for fan_in, fan_out in sizes:
            for shape in ((fan_in, fan_out), (1, fan_out)):
                net.append((2 * torch.rand(*shape, generator=gen) - 1) * fan_in**-0.5)
        nets.append(net)
    return [torch.stack(group).requires_grad_() for group in zip(*nets, strict=True)]


def _logits(params: list, s, r, n_subjects: int):
    """Logits (n_models, B, ell_max * n_values) of subjects s and relations r, (n_models, B)
    each: embed both (summed), GELU layers, a linear head with one block per answer position."""
    import torch
    import torch.nn.functional as F

    models = torch.arange(len(s))[:, None]
    h = params[0][models, s] + params[0][models, r + n_subjects]
    layers = list(zip(params[1::2], params[2::2], strict=True))
    for W, b in layers[:-1]:
        h = F.gelu(torch.baddbmm(b, h, W))
    W, b = layers[-1]
    return torch.baddbmm(b, h, W)


def _answer_nll(logits, target):
    """Per-item answer NLL (nats, summed over answer positions) of `target` (..., ell_max);
    logits (..., ell_max * n_values). Positions past the answer (-1) count 0."""
    import torch.nn.functional as F

    flat = logits.reshape(target.numel(), -1)
    token = F.cross_entropy(flat, target.reshape(-1), ignore_index=-1, reduction="none")
    return token.view(target.shape).sum(dim=-1)


def train_fact_models(
    benches: list[FactBenchmark], width: int, depth: int, tokens_per_param: float,
    seeds: list[int], lr: float = 4e-2, batch_size: int = 1024,
) -> list[FactModel]:  # fmt: skip
    """Train one network of a shape on each benchmark (independent weights, data and seeds).

    Network: subject and relation embeddings of size `width` (summed), `depth` GELU layers of
    4 x width, one linear head per answer position. AdamW (no weight decay), 5% linear
    warm-up then cosine decay to 0.1 lr, D = tokens_per_param * N examples drawn with the
    items' frequencies; seeds[k] fixes the data stream of benches[k] (the same for every
    shape: one corpus, read further by larger models) and, with the shape, the initialisation.
    The models train side by side as batched matrix products: they are so small that a step
    costs mostly per-call overhead, and batching them halves the CPU time.
    """
    import torch

    benches, seeds = _check_family(benches, seeds)
    width = validate.integer("width", width, minimum=1)
    depth = validate.integer("depth", depth, minimum=1)
    ratio = validate.real("tokens_per_param", tokens_per_param, low=0, low_open=True)
    lr = validate.real("lr", lr, low=0, high=1, low_open=True)
    batch_size = validate.integer("batch_size", batch_size, minimum=1)
    b0 = benches[0]
    sizes = [(width, 4 * width)] + [(4 * width, 4 * width)] * (depth - 1)
    sizes.append((4 * width, b0.answer.shape[1] * b0.n_values))
    params = _init_params(seeds, sizes, b0.n_subjects + b0.n_relations)
    N = sum(p[0].numel() for p in params)
    steps = max(20, round(ratio * N / batch_size))
    batches, subject, relation, answer, key = _stacked_data(benches, seeds, steps, batch_size)
    take = torch.arange(len(benches))[:, None]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    for step in range(1, steps + 1):
        i = batches[:, step - 1]  # (R, B) item ids
        logits = _logits(params, subject[take, i], relation[take, i], b0.n_subjects)
        target = answer[take, i]
        # each model's own mean loss per answer token; their sum keeps the models independent
        loss = (_answer_nll(logits, target).sum(1) / (target >= 0).sum((1, 2))).sum()
        for group in opt.param_groups:
            group["lr"] = lr * _schedule(step, steps, max(1, steps // 20))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    with torch.no_grad():
        logits = _logits(params, subject, relation, b0.n_subjects)
        P = torch.exp(-_answer_nll(logits, key)).numpy().astype(float)  # (R, n_items)
        nll = _answer_nll(logits, answer).numpy().astype(float)
    C = 6.0 * N * steps * batch_size
    return [FactModel(width, depth, N, C, P[k], float(b.freq @ nll[k] / (b.freq @ b.ell)))
            for k, b in enumerate(benches)]  # fmt: skip


def _stacked_data(benches: list[FactBenchmark], seeds: list[int], steps: int, batch_size: int):
    """Tensors for side-by-side training: item ids of every step's batch (R, steps, B), drawn
    with each benchmark's frequencies from its seed, and subject, relation, answer and key
    stacked over the benchmarks."""
    import torch

    batches = np.stack([
        np.random.default_rng(seed).choice(b.n_items, size=(steps, batch_size), p=b.freq)
        for b, seed in zip(benches, seeds, strict=True)])  # fmt: skip
    fields = [
        np.stack([getattr(b, f) for b in benches]) for f in ("subject", "relation", "answer", "key")
    ]
    return (torch.from_numpy(batches), *map(torch.from_numpy, fields))


def _schedule(step: int, steps: int, warmup: int) -> float:
    """Learning-rate multiplier at `step` (1-based): linear warm-up, then cosine decay to 0.1."""
    if step <= warmup:
        return step / warmup
    return 0.1 + 0.45 * (1 + np.cos(np.pi * (step - warmup) / max(1, steps - warmup)))


def _check_family(benches, seeds) -> tuple[list[FactBenchmark], list[int]]:
    """Validate a list of same-shaped benchmarks and one seed per benchmark."""
    if not isinstance(benches, list | tuple) or not benches:
        raise TypeError(f"benches must be a non-empty list of FactBenchmark, got {benches!r:.60}")
    if not all(isinstance(b, FactBenchmark) for b in benches):
        raise TypeError("benches must hold FactBenchmark objects (make_fact_benchmark)")
    shape = {(b.n_subjects, b.n_relations, b.n_values, b.answer.shape) for b in benches}
    if len(shape) > 1:
        raise ValueError(f"benches must share one shape, got {sorted(shape)}")
    if not isinstance(seeds, list | tuple) or len(seeds) != len(benches):
        raise ValueError(f"seeds must be a list with one seed per benchmark ({len(benches)})")
    seeds = [validate.integer(f"seeds[{k}]", s, minimum=0) for k, s in enumerate(seeds)]
    return list(benches), seeds


def sampled_pass_rates(P, n_samples: int, seed: int) -> np.ndarray:
    """Pass rates as the paper measures them, Binomial(n_samples, P) / n_samples, from exact
    pass rates P (any shape, in [0, 1])."""
    P = validate.array("P", P, ndim=None, low=0.0, high=1.0)
    n_samples = validate.integer("n_samples", n_samples, minimum=1)
    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    return rng.binomial(n_samples, P) / n_samples


@dataclass(frozen=True)
class Comparison:
    """Every method's predicted full-set accuracy at each target, the truth, and COD's run."""

    truth: np.ndarray  # (n_targets,) expected accuracy (mean exact pass rate)
    pred: dict[str, np.ndarray]  # method -> (n_targets,)
    cod: CodPrediction
    features: np.ndarray  # (n_items, n_small) sampled pass rates COD clustered
    subset_truth: np.ndarray  # (n_targets,) true accuracy of COD's subset (all items if none)
    direct: CodLawFit  # the direct Eq. (4) fit of the whole benchmark
    cod_predicted: bool  # False: COD kept no cluster and fell back to the last small model

    def abs_error_pp(self, method: str) -> np.ndarray:
        """|predicted - true| in percentage points, (n_targets,)."""
        return 100 * np.abs(self.pred[validate.choice("method", method, self.pred)] - self.truth)


def compare_methods(
    small: list[FactModel], targets: list[FactModel], anchor: FactModel, n_samples: int,
    seed: int,
) -> Comparison:  # fmt: skip
    """Predict the targets' accuracy from the small models with COD, the direct Eq. (4) fit
    and the loss route, each also given the anchor (another family's model): COD adds it to
    its mapping, the direct fit to its points, the loss route to its accuracy-vs-loss fit.

    Features and observed accuracies are `sampled_pass_rates`; compute is in units of the
    smallest model's. "COD, no mapping" takes the subset accuracy for the full set's. A COD
    that keeps no cluster predicts nothing; it then falls back to the last small model's
    accuracy (no extrapolation) and `cod_predicted` is False.
    """
    for name, models in (("small", small), ("targets", targets)):
        if not isinstance(models, list | tuple) or not models:
            raise TypeError(f"{name} must be a non-empty list of FactModel")
        if not all(isinstance(m, FactModel) for m in models):
            raise TypeError(f"{name} must hold FactModel objects (train_fact_models)")
    if not isinstance(anchor, FactModel):
        raise TypeError(f"anchor must be a FactModel, got {type(anchor).__name__}")
    if len(small) < 4:
        raise ValueError(f"small needs >= 4 models to fit Eq. (4), got {len(small)}")
    rng = np.random.SeedSequence(validate.integer("seed", seed, minimum=0)).generate_state(2)
    P = sampled_pass_rates(np.column_stack([m.P for m in small]), n_samples, int(rng[0]))
    P_a = sampled_pass_rates(anchor.P, n_samples, int(rng[1]))
    C, L = np.array([m.C for m in small]) / small[0].C, np.array([m.L for m in small])
    C_t, C_a = np.array([m.C for m in targets]) / small[0].C, anchor.C / small[0].C
    acc, truth = P.mean(axis=0), np.array([m.P.mean() for m in targets])
    cod = predict_cod(P, C, C_t, seed=int(rng[0]) % 2**31)
    flat = np.full(len(targets), acc[-1])
    direct = fit_cod_law(C, acc)
    with_anchor = fit_cod_law(np.append(C, C_a), np.append(acc, P_a.mean()))
    pred = {
        "COD": cod.full_pred(P) if cod.kept.any() else flat,
        "COD + anchor": cod.full_pred(P, anchor=P_a) if cod.kept.any() else flat,
        "COD, no mapping": cod.subset_pred if cod.kept.any() else flat,
        "direct fit": direct.predict(C_t),
        "direct fit + anchor": with_anchor.predict(C_t),
        "loss route": loss_route(C, L, acc, C_t),
        "loss route + anchor": loss_route(C, L, acc, C_t, anchor=(anchor.L, P_a.mean())),
    }  # fmt: skip
    # without a subset, the fallback predicts the whole benchmark: its "subset" is everything
    subset = np.array([m.P[cod.subset_mask].mean() for m in targets]) if cod.kept.any() else truth
    return Comparison(truth, pred, cod, P, subset, direct, bool(cod.kept.any()))


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


def gadre_task_cod(runs, small: list[str], targets: list[str], tasks: list[str]) -> CodPrediction:
    """COD with Gadre et al.'s tasks as its items: features are the tasks' accuracies
    (1 - err_<task>) over the `small` runs ordered by C = 6 N D (units of the smallest run's).

    runs: their table indexed by run name, with flops_6ND and err_<task> columns.
    """
    import pandas as pd

    if not isinstance(runs, pd.DataFrame):
        raise TypeError(f"runs must be a pandas DataFrame, got {type(runs).__name__}")
    missing = [n for n in [*small, *targets] if n not in runs.index]
    missing += [f"err_{t}" for t in tasks if f"err_{t}" not in runs.columns]
    if missing or not small or not targets or not tasks:
        raise ValueError(
            f"small, targets and tasks must be non-empty and in runs; missing {missing}"
        )
    sm = runs.loc[small].sort_values("flops_6ND")
    C = sm["flops_6ND"].to_numpy(dtype=float)
    C_t = runs.loc[targets, "flops_6ND"].to_numpy(dtype=float) / C[0]
    P = 1 - sm[[f"err_{t}" for t in tasks]].to_numpy(dtype=float).T  # (n_tasks, n_small)
    return predict_cod(np.clip(P, 0.0, 1.0), C / C[0], C_t)
