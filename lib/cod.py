"""Clustering-On-Difficulty (COD) downstream prediction (Xu et al. 2025, arXiv:2502.17262 v4).

COD predicts a large model's benchmark accuracy from the per-item pass rates of small models:
(1) each item's feature vector is its pass rates across the small models, ordered by compute;
(2) items are clustered with an improved MeanShift (minimum cluster size K, bandwidth capped
at U); (3) a cluster is kept ("extrapolatable") iff its fitted Eq. (4) parameters satisfy
a > 1, b > 0.1, 0 <= c < 1; (4) the kept clusters' laws are extrapolated to the target compute
and averaged by size; (5) a monotone map f takes that subset accuracy to full-set accuracy.

Eq. (4): y(C) = g + (1 - g) exp(-a C^-b - c). Here C is always in units of the smallest
model's training compute (C / C_1), so "a > 1" means: the smallest model's pass rate on the
cluster is below g + (1 - g) e^(-1 - c). The loss-to-error baseline of Gadre et al. 2024
(arXiv:2403.08540) lives here too, because the chapter compares COD with it.

The toy benchmark (`make_fact_benchmark`) is fact recall with Zipf-distributed training
frequencies and 1-3 token answers; `train_checkpoints` trains one `lib.lm` model with
`lib.train` and scores every item at a geometric series of token budgets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import interpolate, optimize
from sklearn.cluster import MeanShift, estimate_bandwidth
from sklearn.isotonic import IsotonicRegression

from lib.fit import as_array

# Xu et al. 2025 defaults (Sec. 3 and Alg. 1): minimum cluster size K, bandwidth quantile Q,
# extrapolatable-cluster thresholds on Eq. (4)'s a, b, c.
XU2025_K = 10
XU2025_Q = 0.1
XU2025_A_MIN = 1.0
XU2025_B_MIN = 0.1
XU2025_C_RANGE = (0.0, 1.0)  # 0 <= c < 1
MAX_MEANSHIFT_ROUNDS = 5  # rounds of Alg. 1; later rounds rarely add a cluster
# Bounds of the Eq. (4) fit: g in [0, 0.99], a in [0, 1e3], b in [0, 5], c in [-3, 10].
# c may go negative so that the "0 <= c" rule can reject a cluster at all.
COD_LAW_BOUNDS = ([0.0, 0.0, 0.0, -3.0], [0.99, 1e3, 5.0, 10.0])


def _probabilities(name: str, p, ndim: int = 1) -> np.ndarray:
    arr = as_array(name, p, ndim=ndim)
    if arr.min() < 0 or arr.max() > 1:
        raise ValueError(f"{name} must lie in [0, 1], got range [{arr.min():g}, {arr.max():g}]")
    return arr


# ----------------------------------------------------------------------------- Eq. (4)
def cod_law(C, g: float, a: float, b: float, c: float) -> np.ndarray:
    """Eq. (4) of Xu et al. 2025: y(C) = g + (1 - g) exp(-a C^-b - c); C in units of C_1."""
    C = as_array("C", C, positive=True)
    return g + (1 - g) * np.exp(-a * C**-b - c)


@dataclass(frozen=True)
class CodLawFit:
    """Fitted Eq. (4) parameters and the root-mean-square residual (accuracy units)."""

    g: float
    a: float
    b: float
    c: float
    rmse: float

    def predict(self, C) -> np.ndarray:
        """y(C) with C in units of the smallest model's compute."""
        return cod_law(C, self.g, self.a, self.b, self.c)

    @property
    def extrapolatable(self) -> bool:
        """The paper's rule: keep the cluster iff a > 1, b > 0.1 and 0 <= c < 1."""
        lo, hi = XU2025_C_RANGE
        return self.a > XU2025_A_MIN and self.b > XU2025_B_MIN and lo <= self.c < hi


def fit_cod_law(C, y) -> CodLawFit:
    """Least-squares fit of Eq. (4) to accuracies y (in [0, 1]) at compute C (units of C_1).

    Multi-start trust-region least squares inside COD_LAW_BOUNDS; the best residual wins.
    """
    C, y = as_array("C", C, positive=True), _probabilities("y", y)
    if C.shape != y.shape or C.size < 4:
        raise ValueError(f"C and y need equal length >= 4, got {C.size} and {y.size}")

    def residuals(theta: np.ndarray) -> np.ndarray:
        return cod_law(C, *theta) - y

    starts = [
        (g0, a0, b0, c0)
        for g0 in (0.0, 0.5 * y.min())
        for a0 in (2.0, 20.0)
        for b0 in (0.5, 1.5)
        for c0 in (0.0,)
    ]
    fits = [optimize.least_squares(residuals, s, bounds=COD_LAW_BOUNDS) for s in starts]
    best = min(fits, key=lambda r: r.cost)
    rmse = float(np.sqrt(np.mean(best.fun**2)))
    return CodLawFit(*map(float, best.x), rmse=rmse)


# ----------------------------------------------------------------------------- clustering
def am_gm_gap(p) -> float:
    """Relative gap (mu_a - mu_g) / mu_a of positive pass rates p (Lemma 1 of Xu et al.).

    Lemma 1: mu_a - mu_g ~= sigma^2 / (2 mu_a) for small spread, so a small gap means the
    items are homogeneous in difficulty and Eq. (4) holds for their mean.
    """
    p = as_array("p", p, positive=True)
    mu_a = p.mean()
    return float((mu_a - np.exp(np.log(p).mean())) / mu_a)


@dataclass(frozen=True)
class Clustering:
    """Labels (n_items,) with -1 for unclustered items; bandwidth R; cluster centres (k, dim)."""

    labels: np.ndarray
    bandwidth: float
    centers: np.ndarray

    @property
    def n_clusters(self) -> int:
        return len(self.centers)


def improved_meanshift(
    X, K: int = XU2025_K, Q: float = XU2025_Q, U: float | None = None, seed: int = 0
) -> Clustering:
    """Alg. 1 of Xu et al.: MeanShift with bandwidth R = min(estimate_bandwidth(Q), U).

    X: (n_items, dim) features in [0, 1]. U defaults to sqrt(dim) / 10 (a tenth of the largest
    possible distance). Each round clusters the unlabelled items; members farther than R from
    their centre are reset, clusters with < K members are dropped; stop when nothing changes.
    """
    X = _probabilities("X", X, ndim=2)
    if not isinstance(K, int) or K < 1:
        raise ValueError(f"K={K!r} must be a positive integer, e.g. 10")
    if not 0 < Q <= 1:
        raise ValueError(f"Q={Q!r} must be in (0, 1], e.g. 0.1")
    U = np.sqrt(X.shape[1]) / 10 if U is None else U
    if not U > 0:
        raise ValueError(f"U={U!r} must be > 0")
    R = float(min(estimate_bandwidth(X, quantile=Q, random_state=seed), U))
    R = R if R > 0 else float(U)  # estimate_bandwidth is 0 when most items coincide
    labels, centers = np.full(len(X), -1), []
    for _ in range(MAX_MEANSHIFT_ROUNDS):
        free = np.flatnonzero(labels == -1)
        if len(free) < K:
            break
        ms = MeanShift(bandwidth=R, bin_seeding=True).fit(X[free])
        added = 0
        for k, centre in enumerate(ms.cluster_centers_):
            members = free[(ms.labels_ == k) & (np.linalg.norm(X[free] - centre, axis=1) <= R)]
            if len(members) >= K:
                labels[members] = len(centers)
                centers.append(X[members].mean(axis=0))
                added += 1
        if added == 0:
            break
    return Clustering(labels, R, np.array(centers).reshape(-1, X.shape[1]))


# ----------------------------------------------------------------------------- mapping
@dataclass(frozen=True)
class MonotoneMap:
    """f: subset accuracy -> full accuracy; monotone, through (0, 0) and (1, 1), inside [0, 1]."""

    x: np.ndarray
    y: np.ndarray

    def __call__(self, s) -> np.ndarray:
        s = np.clip(as_array("s", np.atleast_1d(s)), 0.0, 1.0)
        return np.clip(interpolate.PchipInterpolator(self.x, self.y)(s), 0.0, 1.0)


def fit_mapping(subset_acc, full_acc) -> MonotoneMap:
    """Monotone map from subset to full accuracy through (0, 0), the points and (1, 1).

    The paper uses a cubic smoothing spline with RMSE <= 0.005 on the points; an
    unconstrained spline can explode between close points, so we make the points monotone
    (isotonic regression) and interpolate them with PCHIP, which keeps monotonicity and
    [0, 1] and has RMSE 0 on monotone data.
    """
    xs, ys = _probabilities("subset_acc", subset_acc), _probabilities("full_acc", full_acc)
    if xs.shape != ys.shape:
        raise ValueError(f"subset_acc {xs.shape} and full_acc {ys.shape} must match")
    x = np.concatenate([[0.0], xs, [1.0]])
    y = IsotonicRegression(y_min=0.0, y_max=1.0).fit_transform(x, np.concatenate([[0], ys, [1]]))
    keep = np.concatenate([[True], np.diff(np.sort(x)) > 1e-9])
    order = np.argsort(x)
    return MonotoneMap(x[order][keep], y[order][keep])


# ----------------------------------------------------------------------------- pipeline
@dataclass(frozen=True)
class CodPrediction:
    """One COD run: clustering, per-cluster fits, kept clusters, subset and full predictions."""

    clustering: Clustering
    fits: tuple[CodLawFit, ...]
    kept: np.ndarray  # (n_clusters,) bool
    subset_mask: np.ndarray  # (n_items,) bool, the predictable subset
    subset_pred: np.ndarray  # (n_targets,) extrapolated subset accuracy
    full_pred: np.ndarray  # (n_targets,) f(subset_pred)
    mapping: MonotoneMap


def predict_cod(
    P, C, C_target, anchor: tuple[float, float] | None = None, seed: int = 0
) -> CodPrediction:
    """COD end to end. P: (n_items, n_models) small-model pass rates; C: (n_models,) compute.

    C and C_target must share one unit (we use C / C_1). Zero-performance items are dropped
    before clustering but stay in the full set. anchor = (subset acc, full acc) of an extra
    model, or None; it only adds a point to the mapping.
    """
    P, C = _probabilities("P", P, ndim=2), as_array("C", C, positive=True)
    C_target = as_array("C_target", np.atleast_1d(C_target), positive=True)
    if P.shape[1] != len(C):
        raise ValueError(f"P has {P.shape[1]} models but C has {len(C)}")
    active = np.flatnonzero(P.max(axis=1) > 0)
    cl = improved_meanshift(P[active], seed=seed)
    labels = np.full(len(P), -1)
    labels[active] = cl.labels
    fits = tuple(fit_cod_law(C, P[labels == k].mean(axis=0)) for k in range(cl.n_clusters))
    kept = np.array([f.extrapolatable for f in fits], dtype=bool)
    subset = np.isin(labels, np.flatnonzero(kept))
    sizes = np.array([np.sum(labels == k) for k in range(cl.n_clusters)])[kept]
    preds = np.array([f.predict(C_target) for f, k in zip(fits, kept, strict=True) if k])
    if not kept.any():  # no predictable subset: COD makes no prediction (NaN)
        nan = np.full(len(C_target), np.nan)
        return CodPrediction(Clustering(labels, cl.bandwidth, cl.centers), fits, kept, subset,
                             nan, nan, fit_mapping([0.5], [0.5]))  # fmt: skip
    subset_pred = sizes @ preds / sizes.sum()
    xs, ys = P[subset].mean(axis=0), P.mean(axis=0)
    if anchor is not None:
        xs, ys = np.append(xs, anchor[0]), np.append(ys, anchor[1])
    f = fit_mapping(xs, ys)
    full_labels = Clustering(labels, cl.bandwidth, cl.centers)
    return CodPrediction(full_labels, fits, kept, subset, subset_pred, f(subset_pred), f)


# ----------------------------------------------------------------------------- baselines
def gadre_loss_law(N, M, a: float, c: float, b: float, E: float) -> np.ndarray:
    """Gadre et al. 2024's reparametrised law: L(N, M) = E + a N^b + c 6^(b/2) (M N)^b, b < 0.

    N: parameters; M: tokens per parameter (D / N); L in nats/token.
    """
    N, M = as_array("N", N, positive=True), as_array("M", M, positive=True)
    return E + a * N**b + c * 6 ** (b / 2) * (M * N) ** b


def fit_gadre_loss(N, M, L) -> np.ndarray:
    """Fit (a, c, b, E) of `gadre_loss_law` with their curve_fit grid of starts, best RMSE."""
    N, M, L = (as_array(k, v, positive=True) for k, v in (("N", N), ("M", M), ("L", L)))
    if not N.shape == M.shape == L.shape or N.size < 4:
        raise ValueError(f"N, M, L need equal length >= 4, got {N.size}, {M.size}, {L.size}")
    best, best_cost = None, np.inf
    for a0 in (1e2, 3e2, 1e3, 3e3):
        for c0 in (1e2, 3e2, 1e3, 3e3):
            for b0 in (-0.1, -0.3):
                for E0 in (0.0, 1.0, 2.0, 10.0):
                    try:
                        theta, _ = optimize.curve_fit(
                            lambda x, *p: gadre_loss_law(x[0], x[1], *p),
                            (N, M), L, p0=[a0, c0, b0, E0], maxfev=10000,
                        )  # fmt: skip
                    except RuntimeError:  # this start did not converge; others will
                        continue
                    cost = float(np.sum((gadre_loss_law(N, M, *theta) - L) ** 2))
                    if cost < best_cost:
                        best, best_cost = theta, cost
    if best is None:
        raise ValueError("no start of the Gadre loss fit converged")
    return best


def error_vs_loss(L, k: float, gamma: float, eps: float) -> np.ndarray:
    """Gadre et al. 2024, Eq. 5: Err(L) = eps - k exp(-gamma L) (top-1 error, L in nats)."""
    return eps - k * np.exp(-gamma * as_array("L", L))


def fit_error_vs_loss(L, err) -> np.ndarray:
    """Fit (k, gamma, eps) of `error_vs_loss` by scipy curve_fit from (1, 1, 1), as they did."""
    L, err = as_array("L", L), _probabilities("err", err)
    if L.shape != err.shape or L.size < 3:
        raise ValueError(f"L and err need equal length >= 3, got {L.size} and {err.size}")
    theta, _ = optimize.curve_fit(lambda x, *p: error_vs_loss(x, *p), L, err, p0=[1, 1, 1],
                                  maxfev=10000)  # fmt: skip
    return theta


# ----------------------------------------------------------------------------- toy benchmark
@dataclass(frozen=True)
class FactBenchmark:
    """Fact recall: item (s, r) -> answer of ell value tokens; training frequency ~ Zipf.

    rows: (n_items, 2 + ell_max) token ids [s, r, v_1..v_ell, PAD...] as trained;
    key: the answer key used for scoring (differs from rows for mislabelled items);
    freq: (n_items,) training probability of each item; vocab: s ids, r ids, values, PAD.
    """

    rows: np.ndarray
    key: np.ndarray
    ell: np.ndarray
    freq: np.ndarray
    mislabelled: np.ndarray
    vocab_size: int

    @property
    def n_items(self) -> int:
        return len(self.rows)


def make_fact_benchmark(
    n_subjects: int, n_relations: int, n_values: int, ell_max: int, zipf: float,
    mislabel_frac: float, seed: int,
) -> FactBenchmark:  # fmt: skip
    """All n_subjects * n_relations facts, 1..ell_max random value tokens each, Zipf frequency.

    Item i of random rank r_i has training probability proportional to r_i^-zipf; a fraction
    mislabel_frac of items is scored against a fresh random key (a broken benchmark item).
    """
    for name, v in (("n_subjects", n_subjects), ("n_relations", n_relations),
                    ("n_values", n_values), ("ell_max", ell_max)):  # fmt: skip
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}={v!r} must be a positive integer")
    if not (zipf >= 0 and 0 <= mislabel_frac < 1):
        raise ValueError(f"zipf={zipf!r} must be >= 0 and mislabel_frac={mislabel_frac!r} in [0,1)")
    rng = np.random.default_rng(seed)
    n = n_subjects * n_relations
    pad = n_subjects + n_relations + n_values
    ell = rng.integers(1, ell_max + 1, n)
    rows = np.full((n, 2 + ell_max), pad)
    rows[:, 0] = np.repeat(np.arange(n_subjects), n_relations)
    rows[:, 1] = n_subjects + np.tile(np.arange(n_relations), n_subjects)
    answer_slot = np.arange(ell_max)[None, :] < ell[:, None]  # (n, ell_max)
    values = n_subjects + n_relations + rng.integers(0, n_values, (n, ell_max))
    rows[:, 2:] = np.where(answer_slot, values, pad)
    mislabelled = rng.random(n) < mislabel_frac
    key = rows.copy()
    fresh = n_subjects + n_relations + rng.integers(0, n_values, (n, ell_max))
    key[:, 2:] = np.where(answer_slot & mislabelled[:, None], fresh, rows[:, 2:])
    freq = (rng.permutation(n) + 1.0) ** -zipf
    return FactBenchmark(rows, key, ell, freq / freq.sum(), mislabelled, pad + 1)


def sample_rows(bench: FactBenchmark, n_rows: int, seed: int) -> np.ndarray:
    """n_rows training sequences (n_rows, 2 + ell_max) drawn with the items' Zipf frequencies."""
    if not isinstance(n_rows, int) or n_rows < 1:
        raise ValueError(f"n_rows={n_rows!r} must be a positive integer")
    rng = np.random.default_rng(seed)
    return bench.rows[rng.choice(bench.n_items, size=n_rows, p=bench.freq)]


def item_pass_rates(model, bench: FactBenchmark) -> np.ndarray:
    """Exact T=1 pass rate of every item: prod_j p(key_j | s, r, key_<j), shape (n_items,).

    This is the expected exact-match accuracy of sampling at temperature 1, i.e.
    exp(-answer loss), as Theorem 1 of Xu et al. assumes.
    """
    import torch  # local import: torch costs seconds and the fitting code does not need it

    x = torch.from_numpy(bench.key)
    with torch.no_grad():
        logits, _ = model(x[:, :-1])  # (n, S, V)
        logp = torch.log_softmax(logits, dim=-1).gather(-1, x[:, 1:, None])[..., 0]
    answer = np.arange(1, bench.key.shape[1])[None, :] - 1 <= bench.ell[:, None]
    answer[:, 0] = False  # position 0 predicts the relation token, not the answer
    return np.exp((logp.numpy().astype(np.float64) * answer).sum(axis=1))


@dataclass(frozen=True)
class Family:
    """Checkpoints of increasing compute: C (n,) training FLOPs, P (n_items, n) pass rates,
    L (n,) validation loss in nats/token on fresh rows of the training distribution."""

    C: np.ndarray
    P: np.ndarray
    L: np.ndarray


def train_checkpoints(
    bench: FactBenchmark, model_cfg, ends: list[int], batch_size: int, lr: float, seed: int,
    n_train_rows: int = 200_000,
) -> Family:  # fmt: skip
    """Train one lib.lm model with lib.train at a constant lr; score items at each step in ends.

    One run of ends[-1] steps (10 warm-up steps, no weight decay); a callback scores every item
    and the validation loss when the run passes each step in ends. C = 3 x forward FLOPs/token
    x tokens seen so far, as lib.train counts it.
    """
    from lib.lm import flops_per_token  # local imports: they pull in torch
    from lib.train import TrainConfig, evaluate, train

    if list(ends) != sorted(set(ends)) or ends[0] < 1:
        raise ValueError(f"ends={ends!r} must be strictly increasing positive step counts")
    seq_len = bench.rows.shape[1] - 1
    rows = sample_rows(bench, n_train_rows, seed)
    val = sample_rows(bench, 4096, seed + 10_000)
    cfg = TrainConfig(
        steps=ends[-1], batch_size=batch_size, seq_len=seq_len, lr=lr, schedule="constant",
        warmup_steps=min(10, ends[-1]), weight_decay=0.0, seed=seed,
    )  # fmt: skip
    flops_per_step = 3 * flops_per_token(model_cfg, seq_len) * batch_size * seq_len
    C, P, L = [], [], []

    def score(done: int, model) -> None:
        if done in ends:
            model.eval()
            C.append(flops_per_step * done)
            P.append(item_pass_rates(model, bench))
            L.append(evaluate(model, val, seq_len, max_windows=4096))

    train(model_cfg, cfg, rows, callback=score)
    return Family(np.array(C), np.stack(P, axis=1), np.array(L))


def binomial_pass_rates(P, n_samples: int, seed: int) -> np.ndarray:
    """Pass rates estimated from n_samples sampled answers per item: Binomial(n, p) / n."""
    P = np.asarray(P, dtype=float)
    P = _probabilities("P", P, ndim=max(P.ndim, 1))
    if not isinstance(n_samples, int) or n_samples < 1:
        raise ValueError(f"n_samples={n_samples!r} must be a positive integer, e.g. 100")
    return np.random.default_rng(seed).binomial(n_samples, P) / n_samples


@dataclass(frozen=True)
class MethodErrors:
    """Predicted full-set accuracy at each target for every method, and the truth."""

    truth: np.ndarray  # (n_targets,)
    pred: dict  # method name -> (n_targets,) predicted accuracy
    cod: CodPrediction
    cod_subset_truth: np.ndarray  # (n_targets,) true accuracy of COD's predictable subset

    def abs_error_pp(self, method: str) -> np.ndarray:
        """|predicted - true| in percentage points, (n_targets,)."""
        return 100 * np.abs(self.pred[method] - self.truth)


def compare_methods(
    P, C, L, n_small: int, anchor: tuple | None = None, seed: int = 0
) -> MethodErrors:
    """Predict targets P[:, n_small:] with COD, a direct Eq. (4) fit and the loss route.

    P: (n_items, n_models) pass rates; C: (n_models,) compute in units of C_1; L: (n_models,)
    validation loss. anchor = (P_a (n_items,), C_a, L_a) of a model from another family, or
    None; with it each method also runs once more, given the same anchor: COD adds it to the
    mapping, the direct fit to its points, the loss route to its accuracy-vs-loss fit.
    """
    from lib.fit import fit_saturating_power_law  # the loss law L(C) = E + A C^-alpha

    P, C, L = _probabilities("P", P, 2), as_array("C", C, positive=True), as_array("L", L)
    if not 4 <= n_small < P.shape[1] or len(C) != P.shape[1] or len(L) != P.shape[1]:
        raise ValueError(f"need 4 <= n_small={n_small} < n_models={P.shape[1]} = len(C), len(L)")
    acc, Cs, Ct = P.mean(axis=0), C[:n_small], C[n_small:]
    cod = predict_cod(P[:, :n_small], Cs, Ct, seed=seed)
    L_hat = fit_saturating_power_law(Cs, L[:n_small]).predict(Ct)
    pred = {
        "COD": cod.full_pred,
        "direct fit": fit_cod_law(Cs, acc[:n_small]).predict(Ct),
        "loss route": 1 - error_vs_loss(L_hat, *fit_error_vs_loss(L[:n_small], 1 - acc[:n_small])),
    }
    if anchor is not None:
        P_a, C_a, L_a = anchor
        sub = cod.subset_mask if cod.kept.any() else np.ones(len(P), dtype=bool)
        f = fit_mapping(
            np.append(P[sub, :n_small].mean(axis=0), P_a[sub].mean()),
            np.append(acc[:n_small], P_a.mean()),
        )
        pred["COD + anchor"] = f(cod.subset_pred) if cod.kept.any() else cod.full_pred
        pred["direct fit + anchor"] = fit_cod_law(
            np.append(Cs, C_a), np.append(acc[:n_small], P_a.mean())
        ).predict(Ct)
        theta = fit_error_vs_loss(
            np.append(L[:n_small], L_a), 1 - np.append(acc[:n_small], P_a.mean())
        )
        pred["loss route + anchor"] = 1 - error_vs_loss(L_hat, *theta)
    subset_truth = P[cod.subset_mask, n_small:].mean(axis=0) if cod.kept.any() else cod.full_pred
    return MethodErrors(acc[n_small:], pred, cod, subset_truth)


def gadre_task_comparison(runs, small: list[str], loss_runs: list[str], targets: list[str],
                          anchor: str, tasks: list[str], seed: int = 0) -> dict:  # fmt: skip
    """COD with tasks as items vs Gadre's loss-to-error route on held-out open_lm runs.

    runs: the Gadre et al. table indexed by run name; small: runs whose per-task accuracies
    (1 - err_<task>) are COD's features, ordered by C = 6 N D; loss_runs: the runs of Gadre's
    loss fit; anchor: the one larger run their error fit also sees (COD gets it too, in its
    mapping). Returns true and predicted mean accuracy over `tasks` (NaN if COD keeps nothing).
    """
    sm = runs.loc[small].sort_values("flops_6ND")
    C = sm["flops_6ND"].to_numpy() / sm["flops_6ND"].min()
    Ct = runs.loc[targets, "flops_6ND"].to_numpy() / sm["flops_6ND"].min()
    cols = [f"err_{t}" for t in tasks]
    P = 1 - sm[cols].to_numpy().T  # (n_tasks, n_small)
    P_a = 1 - runs.loc[anchor, cols].to_numpy(dtype=float)
    truth = 1 - runs.loc[targets, cols].to_numpy().mean(axis=1)
    res = predict_cod(P, C, Ct, seed=seed)
    sub = res.subset_mask if res.kept.any() else np.ones(len(P), dtype=bool)
    f = fit_mapping(np.append(P[sub].mean(axis=0), P_a[sub].mean()),
                    np.append(P.mean(axis=0), P_a.mean()))  # fmt: skip
    g = runs.loc[loss_runs]
    theta = fit_gadre_loss(g["params"], g["tokens_per_param"], g["loss_c4_val"])
    e = runs.loc[[*loss_runs, anchor]]
    phi = fit_error_vs_loss(e["loss_c4_val"], e[cols].mean(axis=1))
    tg = runs.loc[targets]
    L_hat = gadre_loss_law(tg["params"], tg["tokens_per_param"], *theta)
    gadre = 1 - error_vs_loss(L_hat, *phi)
    cod_anchor = f(res.subset_pred) if res.kept.any() else res.full_pred
    return {"truth": truth, "COD": res.full_pred, "COD + anchor": cod_anchor,
            "loss to error": gadre, "cod": res}  # fmt: skip


def silhouette_vs_shuffled(X, labels, seed: int = 0) -> tuple[float, float]:
    """Silhouette of the clustered items, and of KMeans (same k) on column-shuffled features.

    Shuffling each feature column across items keeps every model's pass-rate distribution but
    destroys the items' scaling curves: a control with no real clusters. NaN if k < 2.
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    X, labels = as_array("X", X, ndim=2), np.asarray(labels)
    if labels.shape != (len(X),):
        raise ValueError(f"labels must have shape ({len(X)},), got {labels.shape}")
    on = labels >= 0
    k = len(np.unique(labels[on]))
    if k < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    Xs = np.column_stack([rng.permutation(col) for col in X[on].T])
    control = KMeans(n_clusters=k, n_init=4, random_state=seed).fit_predict(Xs)
    return float(silhouette_score(X[on], labels[on])), float(silhouette_score(Xs, control))
