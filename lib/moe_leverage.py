"""Efficiency leverage of mixture-of-experts (MoE) models (Tian et al. 2025, arXiv:2507.17702).

Efficiency leverage EL = C_dense / C_moe at equal loss (Sec. 2): how much dense training compute
an MoE model is worth. This module holds
- the paper's joint law EL(A, G, C) (Eq. 13) with its Table 2 constants, `TIAN2025`;
- the EL estimator: log-log interpolation of a dense loss-vs-compute curve, flagging (never
  extrapolating) losses outside the dense range;
- fits of the law's pieces: log EL = a_A log A_hat (Eq. 10), the compute-dependent exponent
  alpha = a + d log10 C (Eq. 13 at fixed G), a held-out comparison of the two, within-group
  slopes;
- the compute-optimal frontier of a model family from isoFLOP runs, and the peak of a
  parabola with a bootstrap interval (the granularity optimum);
- loaders for Clark et al. (2022)'s dense and routed runs (`data/clark2022/`), their EL, and
  where their dense runs put the compute-optimal size.
Chapter 2's toy (the models and their training) is `lib.moe_toy`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lib import validate
from lib.data import data_file
from lib.fit import bootstrap_ci, r2_score


# ----------------------------------------------------------------------------- the joint law
@dataclass(frozen=True)
class JointLawConstants:
    """Constants of EL = A_hat^(alpha + gamma (log2 G)^2 + beta log2 G), alpha = a + d log10 C.

    A_start and A_max set the saturating activation ratio A_hat (Eq. 10, after Clark et al.).
    """

    a: float
    d: float
    gamma: float
    beta: float
    A_start: float
    A_max: float


# Tian et al. 2025, Table 2. The paper does not state the log bases; log10 for C and log2 for G
# is the only combination we found that gives both EL(3.1%, 12, 1e22) > 7 and G* in [8, 12].
TIAN2025 = JointLawConstants(
    a=1.23, d=-7.61e-2, gamma=1.67e-2, beta=-1.17e-1, A_start=1.63e-2, A_max=5.28e16
)


def activation_hat(A, constants: JointLawConstants = TIAN2025) -> np.ndarray:
    """Saturating activation ratio: 1/A_hat = 1/(A + (1/A_start - 1/A_max)^-1) + 1/A_max.

    A: activation ratio(s) in (0, 1], any shape (returned 1-D). Eq. 10 of Tian et al. 2025
    (the form of Clark et al. 2022).
    """
    A = validate.array("A", np.ravel(A), positive=True, high=1.0)
    shift = 1.0 / (1.0 / constants.A_start - 1.0 / constants.A_max)
    return 1.0 / (1.0 / (A + shift) + 1.0 / constants.A_max)


def el_joint(A, G, C, constants: JointLawConstants = TIAN2025) -> np.ndarray:
    """Eq. 13: EL(A, G, C) = A_hat^(a + d log10 C + gamma (log2 G)^2 + beta log2 G).

    A: activation ratio in (0, 1]; G: granularity 2 d_model / d_expert (> 0); C: training FLOPs
    (> 0). Arguments broadcast against each other.
    """
    A = validate.array("A", A, ndim=None, positive=True, high=1.0)
    G = validate.array("G", G, ndim=None, positive=True)
    C = validate.array("C", C, ndim=None, positive=True)
    A, G, C = np.broadcast_arrays(A, G, C)
    A_hat = activation_hat(A, constants).reshape(A.shape)
    lg = np.log2(G)
    exponent = (
        constants.a + constants.d * np.log10(C) + constants.gamma * lg**2 + constants.beta * lg
    )
    return A_hat**exponent


def optimal_granularity(constants: JointLawConstants = TIAN2025) -> float:
    """G* = 2^(-beta / (2 gamma)): the granularity that maximises EL when A_hat < 1 (Eq. 13)."""
    if constants.gamma <= 0:
        raise ValueError(f"gamma={constants.gamma} must be > 0 for an EL optimum in G")
    return float(2.0 ** (-constants.beta / (2.0 * constants.gamma)))


def compute_slope(A, constants: JointLawConstants = TIAN2025) -> np.ndarray:
    """d ln EL / d ln C = d ln(A_hat) / ln 10 at fixed A and G (Eq. 13): > 0 when d < 0."""
    return constants.d * np.log(activation_hat(A, constants)) / math.log(10.0)


def granularity_curvature(A, constants: JointLawConstants = TIAN2025) -> np.ndarray:
    """Second difference of ln EL over three doublings of G: 2 gamma ln(A_hat) (Eq. 13).

    Negative means ln EL is concave in log G (an optimum); it does not depend on G's units.
    """
    return 2.0 * constants.gamma * np.log(activation_hat(A, constants))


# ----------------------------------------------------------------------------- the estimator
@dataclass(frozen=True)
class Leverage:
    """EL of each MoE run (NaN where flagged) and whether its loss lay inside the dense range."""

    EL: np.ndarray
    C_equivalent: np.ndarray
    in_range: np.ndarray


def monotone_curve(C, L) -> tuple[np.ndarray, np.ndarray]:
    """Monotone dense curve: (log C, log L) with log L made non-increasing by isotonic regression.

    Where the regression ties points, only the smallest C of a tie is kept (the least compute
    that reaches that loss), so log L is strictly decreasing in the result.
    """
    from sklearn.isotonic import IsotonicRegression  # local: sklearn costs a second to import

    C = validate.array("C_dense", C, positive=True, min_size=2)
    L = validate.array("L_dense", L, positive=True, min_size=2)
    validate.same_length(C_dense=C, L_dense=L)
    order = np.argsort(C)
    logC, logL = np.log(C[order]), np.log(L[order])
    fitted = IsotonicRegression(increasing=False).fit_transform(logC, logL)
    keep = np.r_[True, np.diff(fitted) < 0]
    return logC[keep], fitted[keep]


def efficiency_leverage(C_dense, L_dense, C_moe, L_moe) -> Leverage:
    """EL = C_dense(L_moe) / C_moe, C_dense(L) by linear interpolation of log C on log L.

    C in FLOPs, L > 0 (loss or excess loss). Losses outside [min, max] of the monotone dense
    curve are flagged (in_range False, EL NaN), never extrapolated.
    """
    logC, logL = monotone_curve(C_dense, L_dense)
    C_moe = validate.array("C_moe", C_moe, positive=True)
    L_moe = validate.array("L_moe", L_moe, positive=True)
    validate.same_length(C_moe=C_moe, L_moe=L_moe)
    if len(logC) < 2:
        raise ValueError("the dense curve is flat after the isotonic fit; EL is undefined")
    x = np.log(L_moe)
    in_range = (x >= logL.min()) & (x <= logL.max())
    C_eq = np.exp(np.interp(x, logL[::-1], logC[::-1]))  # np.interp needs increasing abscissae
    C_eq = np.where(in_range, C_eq, np.nan)
    return Leverage(EL=C_eq / C_moe, C_equivalent=C_eq, in_range=in_range)


# ----------------------------------------------------------------------------- fits
def _points(min_points: int, **arrays) -> dict[str, np.ndarray]:
    """Validate positive 1-D arrays of equal length >= min_points (A also <= 1)."""
    out = {}
    for name, x in arrays.items():
        out[name] = validate.array(name, x, positive=True, high=1.0 if name == "A" else None)
    if validate.same_length(**out) < min_points:
        raise ValueError(f"need at least {min_points} points to fit, got {len(out['EL'])}")
    return out


@dataclass(frozen=True)
class ActivationLawFit:
    """log EL = a_A log A_hat (Eq. 10), least squares through the origin; r2 on log EL."""

    a_A: float
    r2: float
    ci: dict[str, tuple[float, float]]

    def predict(self, A, constants: JointLawConstants = TIAN2025) -> np.ndarray:
        return activation_hat(A, constants) ** self.a_A


def fit_activation_law(
    A, EL, n_bootstrap: int = 0, seed: int = 0, constants: JointLawConstants = TIAN2025
) -> ActivationLawFit:
    """Fit a_A in log EL = a_A log A_hat(A) with A_hat from `constants` (A_start, A_max fixed).

    Closed form a_A = sum(x y) / sum(x^2), x = log A_hat, y = log EL; 95% bootstrap CI over
    points when n_bootstrap > 0.
    """
    pts = _points(2, A=A, EL=EL)
    validate.integer("n_bootstrap", n_bootstrap, minimum=0)
    x, y = np.log(activation_hat(pts["A"], constants)), np.log(pts["EL"])

    def solve(idx: np.ndarray) -> dict[str, float]:
        sxx = float(np.sum(x[idx] ** 2))
        return {"a_A": float(np.sum(x[idx] * y[idx]) / sxx) if sxx > 0 else 0.0}

    a_A = solve(np.arange(len(x)))["a_A"]
    ci = bootstrap_ci(solve, len(x), n_bootstrap, validate.integer("seed", seed, minimum=0))
    return ActivationLawFit(a_A=a_A, r2=r2_score(y, a_A * x), ci=ci)


@dataclass(frozen=True)
class JointFit:
    """ln EL = (a + d log10 C) ln A_hat(A; A_start): Eq. 13 at one granularity (d = 0 for the
    activation-only law, Eq. 10)."""

    a: float
    d: float
    A_start: float

    def constants(self) -> JointLawConstants:
        """These constants as a JointLawConstants (no granularity terms; A_max of TIAN2025)."""
        return JointLawConstants(self.a, self.d, 0.0, 0.0, self.A_start, TIAN2025.A_max)

    def predict(self, A, C) -> np.ndarray:
        """EL at activation ratios A and compute C (FLOPs), broadcast together."""
        return el_joint(A, 1.0, C, self.constants())


A_START_GRID = np.geomspace(1e-4, 0.5, 241)  # candidate A_start of the profile fit (3.6% apart)


def _joint_lstsq(x: np.ndarray, log10_C: np.ndarray, y: np.ndarray, compute: bool):
    """Least squares of y = (a + d log10_C) x (d = 0 unless `compute`) for each row of x
    (S, n): a, d, SSE, each (S,)."""
    u, v = x, x * log10_C  # the two regressors
    suu, suv, svv = (u * u).sum(1), (u * v).sum(1), (v * v).sum(1)
    suy, svy = (u * y).sum(1), (v * y).sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):  # a singular fit gives NaN, skipped
        if compute:
            det = suu * svv - suv**2
            a, d = (svv * suy - suv * svy) / det, (suu * svy - suv * suy) / det
        else:
            a, d = suy / suu, np.zeros_like(suu)
        return a, d, ((y - a[:, None] * u - d[:, None] * v) ** 2).sum(1)


def fit_joint_law(A, C, EL, A_start: float | None = None, compute: bool = True) -> JointFit:
    """Fit a and d of ln EL = (a + d log10 C) ln A_hat by least squares on ln EL.

    A in (0, 1], C in FLOPs, EL > 0 (1-D, equal lengths >= 3). A_start=None also fits A_start,
    profiling it over A_START_GRID (vectorised: a bootstrap refits it hundreds of times); a
    number keeps it fixed. compute=False fixes d = 0: the activation-only law (Eq. 10).
    A_max stays TIAN2025's (no saturation at these scales).
    """
    pts = _points(3, A=A, C=C, EL=EL)
    validate.boolean("compute", compute)
    if A_start is None:
        starts = A_START_GRID
    else:
        starts = np.array([validate.real("A_start", A_start, low=0, low_open=True, high=1)])
    shift = 1.0 / (1.0 / starts - 1.0 / TIAN2025.A_max)  # Eq. 10 for every candidate A_start
    x = -np.log(1.0 / (pts["A"] + shift[:, None]) + 1.0 / TIAN2025.A_max)  # ln A_hat, (S, n)
    a, d, sse = _joint_lstsq(x, np.log10(pts["C"]), np.log(pts["EL"]), compute)
    if not np.isfinite(sse).any():
        raise ValueError("A and C do not determine a and d (e.g. all A = 1, or one C only)")
    best = int(np.nanargmin(sse))
    return JointFit(float(a[best]), float(d[best]), float(starts[best]))


@dataclass(frozen=True)
class LawComparison:
    """Held-out mean |ln EL_predicted - ln EL| of the joint law (Eq. 13: a, d) and of the
    activation-only law (Eq. 10: d = 0), their paired difference (joint - activation-only;
    negative when the joint law predicts better), 95% bootstrap intervals (empty without a
    bootstrap) and the two fits."""

    joint: float
    activation: float
    difference: float
    ci: dict[str, tuple[float, float]]
    joint_fit: JointFit
    activation_fit: JointFit
    n_train: int
    n_test: int


def compare_laws(A, C, EL, train, n_bootstrap: int = 0, seed: int = 0,
                 A_start: float | None = None) -> LawComparison:  # fmt: skip
    """Fit Eq. 13 (a, d) and its activation-only rival (a; d = 0) on points where `train` is
    True, and score both on the rest. A_start: fixed, or None to fit it for each law.

    The bootstrap resamples training and held-out points separately (each with replacement)
    and refits both laws on the same draw, so the difference is paired and each interval
    carries the uncertainty of the fits and of the score.
    """
    pts = _points(4, A=A, C=C, EL=EL)
    train = np.asarray(train)
    if train.dtype != bool or train.shape != pts["A"].shape:
        raise TypeError(f"train must be a boolean mask of {len(pts['A'])} entries")
    tr, te = np.flatnonzero(train), np.flatnonzero(~train)
    if len(tr) < 3 or len(te) < 1:
        raise ValueError(f"train needs >= 3 training and >= 1 held-out points, got {len(tr)} "
                         f"and {len(te)}")  # fmt: skip
    validate.integer("n_bootstrap", n_bootstrap, minimum=0)

    def score(i_train: np.ndarray, i_test: np.ndarray) -> tuple[np.ndarray, list[JointFit]]:
        fits = [fit_joint_law(*(pts[k][i_train] for k in ("A", "C", "EL")), A_start=A_start,
                              compute=compute) for compute in (True, False)]  # fmt: skip
        errors = [np.mean(np.abs(np.log(f.predict(pts["A"][i_test], pts["C"][i_test])
                                        / pts["EL"][i_test]))) for f in fits]  # fmt: skip
        return np.array([errors[0], errors[1], errors[0] - errors[1]]), fits

    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    (joint, activation, difference), fits = score(tr, te)
    ci = {}
    if n_bootstrap:
        draws = np.array([score(rng.choice(tr, len(tr)), rng.choice(te, len(te)))[0]
                          for _ in range(n_bootstrap)])  # fmt: skip
        lo, hi = np.percentile(draws, [2.5, 97.5], axis=0)
        ci = {k: (float(lo[i]), float(hi[i]))
              for i, k in enumerate(("joint", "activation", "difference"))}  # fmt: skip
    return LawComparison(float(joint), float(activation), float(difference), ci, fits[0],
                         fits[1], len(tr), len(te))  # fmt: skip


@dataclass(frozen=True)
class WithinSlopeFit:
    """y = b x + c_g with one intercept per group g; b is the pooled within-group slope."""

    b: float
    ci: dict[str, tuple[float, float]]


def fit_within_slope(x, y, groups, n_bootstrap: int = 2000, seed: int = 0) -> WithinSlopeFit:
    """Least-squares slope b of y = b x + c_g (fixed effects): demean x and y per group.

    Used for log EL = b log A + c_size on Clark et al.'s runs; 95% bootstrap CI over points.
    """
    x, y = validate.array("x", x, min_size=3), validate.array("y", y, min_size=3)
    g = np.asarray(groups)
    if g.ndim != 1:
        raise ValueError(f"groups must be 1-D labels, got shape {g.shape}")
    validate.same_length(x=x, y=y, groups=g)
    validate.integer("n_bootstrap", n_bootstrap, minimum=0)

    def solve(idx: np.ndarray) -> dict[str, float]:
        xi, yi, gi = x[idx], y[idx], g[idx]
        dx, dy = xi.copy(), yi.copy()
        for level in np.unique(gi):
            m = gi == level
            dx[m] -= xi[m].mean()
            dy[m] -= yi[m].mean()
        sxx = float(np.sum(dx * dx))
        return {"b": float(np.sum(dx * dy) / sxx) if sxx > 0 else 0.0}

    ci = bootstrap_ci(solve, len(x), n_bootstrap, validate.integer("seed", seed, minimum=0))
    return WithinSlopeFit(b=solve(np.arange(len(x)))["b"], ci=ci)


# ----------------------------------------------------------------------------- frontier, optimum
def isoflop_frontier(C, N, L):
    """The compute-optimal frontier of one model family from runs at (C, N, L).

    C: training FLOPs, N: model size (any positive measure, e.g. FLOPs per token), L: loss; runs
    with equal C (to 1e-6 in log2 C) form an isoFLOP curve. At each C the optimum is the vertex
    of the parabola in (ln N, ln L) through the lowest loss and its two neighbours (a local
    version of approach 2 of Hoffmann et al. 2022). `interior` is False when the lowest loss
    sits at the smallest or largest N trained at that C (the optimum may lie outside the sizes
    trained); then L and N_opt are those of the lowest run. Returns a DataFrame with C, L,
    N_opt, interior, n_runs, one row per C with at least 3 runs, C increasing.
    """
    import pandas as pd

    C = validate.array("C", C, positive=True, min_size=3)
    N = validate.array("N", N, positive=True)
    L = validate.array("L", L, positive=True)
    validate.same_length(C=C, N=N, L=L)
    rows = []
    for level in np.unique(np.round(np.log2(C), 6)):
        at = np.flatnonzero(np.round(np.log2(C), 6) == level)
        if len(at) < 3:
            continue
        at = at[np.argsort(N[at])]
        x, y = np.log(N[at]), np.log(L[at])
        i = int(np.argmin(y))
        interior = 0 < i < len(at) - 1
        x_opt, y_opt = x[i], y[i]
        if interior:
            c2, c1, c0 = np.polyfit(x[i - 1 : i + 2], y[i - 1 : i + 2], 2)
            x_opt = -c1 / (2 * c2)
            y_opt = c0 + c1 * x_opt + c2 * x_opt**2
        rows.append({"C": float(np.exp(np.log(C[at]).mean())), "L": float(np.exp(y_opt)),
                     "N_opt": float(np.exp(x_opt)), "interior": interior,
                     "n_runs": len(at)})  # fmt: skip
    return pd.DataFrame(rows, columns=["C", "L", "N_opt", "interior", "n_runs"])


@dataclass(frozen=True)
class OptimumFit:
    """Where a parabola fitted to y(x) peaks, clipped to the grid [x_min, x_max], its 95%
    bootstrap interval over replicates, and the parabola's curvature (2 c2; < 0 is concave)."""

    x_opt: float
    ci: tuple[float, float]
    curvature: float
    curvature_ci: tuple[float, float]


def _peak(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Peak of the least-squares parabola y = c2 x^2 + c1 x + c0 over [min x, max x], and 2 c2."""
    c2, c1, c0 = np.polyfit(x, y, 2)
    lo, hi = float(x.min()), float(x.max())
    if c2 < 0:
        return float(np.clip(-c1 / (2 * c2), lo, hi)), 2 * c2
    edges = np.array([lo, hi])  # convex or straight: the peak over the grid is an edge
    return float(edges[np.argmax(np.polyval([c2, c1, c0], edges))]), 2 * c2


def fit_optimum(x, Y, n_bootstrap: int = 1000, seed: int = 0) -> OptimumFit:
    """Peak of y over the grid x (n,) from replicate curves Y (R, n): the parabola through the
    mean curve, with a 95% percentile interval from resampling replicates (rows).

    The interval is widened, if needed, to hold the estimate. An optimum whose interval stays
    inside (x_min, x_max) is interior; one that reaches an edge is not resolved from it.
    """
    x = validate.array("x", x, min_size=3)
    Y = validate.array("Y", Y, ndim=2)
    if Y.shape[1] != len(x) or Y.shape[0] < 2:
        raise ValueError(f"Y must be (replicates >= 2, {len(x)}), got shape {Y.shape}")
    validate.integer("n_bootstrap", n_bootstrap, minimum=1)
    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    x_opt, curvature = _peak(x, Y.mean(axis=0))
    draws = np.array([_peak(x, Y[rng.integers(0, len(Y), len(Y))].mean(axis=0))
                      for _ in range(n_bootstrap)])  # fmt: skip
    (lo, c_lo), (hi, c_hi) = np.percentile(draws, [2.5, 97.5], axis=0)
    return OptimumFit(x_opt, (min(lo, x_opt), max(hi, x_opt)), curvature,
                      (min(c_lo, curvature), max(c_hi, curvature)))  # fmt: skip


# ----------------------------------------------------------------------------- Clark et al.
def load_clark_curves(path: Path | None = None):
    """Every evaluation after step 0 of every run in Clark et al. 2022's `curves.csv.gz`.

    Adds `C` = flops_per_step * step (training FLOPs as the dataset counts them, router
    included) and `A` = k / num_experts, the activation ratio of the routed layers (1 for
    dense runs, whose `k` column records a FLOP multiplier instead).
    """
    import pandas as pd  # local import keeps `import lib.moe_leverage` light

    path = data_file("clark2022/curves.csv.gz") if path is None else Path(path)
    if not path.is_file():
        raise ValueError(f"path={str(path)!r} does not exist; pass the Clark et al. curves file")
    runs = pd.read_csv(path)
    runs = runs[runs.step > 0].copy()
    runs["C"] = runs["flops_per_step"] * runs["step"]
    runs["A"] = np.where(runs["router_type"] == "Dense", 1.0, runs["k"] / runs["num_experts"])
    return runs.sort_values(["router_type", "dense_parameter_count", "num_experts", "step"])


def load_clark_final(path: Path | None = None):
    """The last evaluation of every run (one row per run; columns as `load_clark_curves`)."""
    curves = load_clark_curves(path)
    last = curves.sort_values("step").groupby("hyper_id").tail(1)
    return last.sort_values(["router_type", "dense_parameter_count", "num_experts"])


CLARK_ROUTERS = ("S-Base", "RL-R", "Hash")


def _clark_base(runs):
    """Clark et al.'s base configuration: top-1, every other layer routed, no FLOP multiplier."""
    missing = {"router_type", "k", "routing_frequency", "flop_increase", "C"} - set(runs.columns)
    if missing:
        raise ValueError(f"runs lacks columns {sorted(missing)}; pass load_clark_final()")
    return runs[(runs.k == 1) & (runs.routing_frequency == 0.5) & (runs.flop_increase == 1)]


def clark_leverage(runs, router: str = "S-Base"):
    """EL of one router's runs against the dense runs of Clark et al. 2022 (final val. loss).

    Base configuration only (`_clark_base`). The dense curve averages the seeds of each size.
    Adds `EL` (NaN out of the dense range) and `in_range`.
    """
    router = validate.choice("router", router, CLARK_ROUTERS)
    base = _clark_base(runs)
    dense = base[base.router_type == "Dense"].groupby("dense_parameter_count")
    dense = dense[["C", "loss_validation"]].mean()
    routed = base[base.router_type == router].copy()
    lev = efficiency_leverage(dense.C, dense.loss_validation, routed.C, routed.loss_validation)
    routed["EL"], routed["in_range"] = lev.EL, lev.in_range
    return routed


def clark_dense_isoflop(curves, n_budgets: int = 16):
    """Where Clark et al.'s dense runs put the compute-optimal size, budget by budget.

    curves: `load_clark_curves()`. At each of n_budgets compute budgets C (log-spaced over the
    dense runs' range), every dense size with a checkpoint range covering C gives a loss (ln L
    interpolated in ln step, seeds averaged); the best size is interior when it is neither the
    smallest nor the largest size available at that C. Returns a DataFrame with C, N_best,
    L, n_sizes, interior.
    """
    import pandas as pd

    validate.integer("n_budgets", n_budgets, minimum=2)
    dense = _clark_base(curves)
    dense = dense[dense.router_type == "Dense"]
    sizes = {N: g.groupby("step")[["loss_validation", "flops_per_step"]].mean()
             for N, g in dense.groupby("dense_parameter_count")}  # fmt: skip
    rows = []
    for C in np.geomspace(dense.C.min(), dense.C.max(), n_budgets):
        losses = {}
        for N, g in sizes.items():
            steps = C / g.flops_per_step.iloc[0]
            if g.index.min() <= steps <= g.index.max():
                losses[N] = float(
                    np.exp(
                        np.interp(
                            np.log(steps),
                            np.log(g.index.to_numpy()),
                            np.log(g.loss_validation.to_numpy()),
                        )
                    )
                )
        if not losses:
            continue
        Ns = sorted(losses)
        best = min(Ns, key=losses.get)
        rows.append({"C": float(C), "N_best": best, "L": losses[best], "n_sizes": len(Ns),
                     "interior": Ns[0] < best < Ns[-1]})  # fmt: skip
    return pd.DataFrame(rows)
