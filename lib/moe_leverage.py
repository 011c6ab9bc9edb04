"""Efficiency leverage of mixture-of-experts (MoE) models (Tian et al. 2025, arXiv:2507.17702).

Efficiency leverage EL = C_dense / C_moe at equal loss (Sec. 2): how much dense training compute
an MoE model is worth. This module holds
- the paper's joint law EL(A, G, C) (Eq. 13) with its Table 2 constants, `TIAN2025`;
- the EL estimator: log-log interpolation of a dense loss-vs-compute curve, flagging (never
  extrapolating) losses outside the dense range;
- fits of the law's pieces: log EL = a_A log A_hat (Eq. 10), the compute-dependent exponent
  alpha = a + d log10 C (Eq. 13 at fixed G), a held-out test of it, and within-group slopes;
- chapter 2's toy: a Zipf-weighted associative memory (random keys to random values) that
  dense and MoE ReLU MLPs must store, all trained in lockstep on the same batches, with
  warmup-stable-decay branches giving several step budgets from one run;
- a loader for Clark et al. (2022)'s dense and routed runs (`data/clark2022/`) and their EL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lib import validate
from lib.fit import bootstrap_ci, r2_score

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "clark2022"


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


def dense_frontier(C, L) -> tuple[np.ndarray, np.ndarray]:
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
    logC, logL = dense_frontier(C_dense, L_dense)
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
    """ln EL = (a + d log10 C) ln A_hat(A; A_start): Eq. 13 at one granularity."""

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


def _joint_lstsq(x: np.ndarray, log10_C: np.ndarray, y: np.ndarray):
    """Least squares of y = (a + d log10_C) x for each row of x (S, n): a, d, SSE, each (S,)."""
    u, v = x, x * log10_C  # the two regressors
    suu, suv, svv = (u * u).sum(1), (u * v).sum(1), (v * v).sum(1)
    suy, svy = (u * y).sum(1), (v * y).sum(1)
    det = suu * svv - suv**2
    with np.errstate(divide="ignore", invalid="ignore"):  # det = 0: a, d, SSE are NaN, skipped
        a = (svv * suy - suv * svy) / det
        d = (suu * svy - suv * suy) / det
        return a, d, ((y - a[:, None] * u - d[:, None] * v) ** 2).sum(1)


def fit_joint_law(A, C, EL, A_start: float | None = None) -> JointFit:
    """Fit a and d of ln EL = (a + d log10 C) ln A_hat by least squares on ln EL.

    A in (0, 1], C in FLOPs, EL > 0 (1-D, equal lengths >= 3). A_start=None also fits A_start,
    profiling it over A_START_GRID (vectorised: the held-out bootstrap refits it hundreds of
    times); a number keeps it fixed. A_max stays TIAN2025's (no saturation at toy scale).
    """
    pts = _points(3, A=A, C=C, EL=EL)
    if A_start is None:
        starts = A_START_GRID
    else:
        starts = np.array([validate.real("A_start", A_start, low=0, low_open=True, high=1)])
    shift = 1.0 / (1.0 / starts - 1.0 / TIAN2025.A_max)  # Eq. 10 for every candidate A_start
    x = -np.log(1.0 / (pts["A"] + shift[:, None]) + 1.0 / TIAN2025.A_max)  # ln A_hat, (S, n)
    a, d, sse = _joint_lstsq(x, np.log10(pts["C"]), np.log(pts["EL"]))
    if not np.isfinite(sse).any():
        raise ValueError("A and C do not determine a and d (e.g. all A = 1, or one C only)")
    best = int(np.nanargmin(sse))
    return JointFit(float(a[best]), float(d[best]), float(starts[best]))


@dataclass(frozen=True)
class HeldOutTest:
    """Mean |ln EL_predicted - ln EL| on held-out points, its 95% bootstrap interval, the fit."""

    error: float
    ci: tuple[float, float]
    fit: JointFit
    n_train: int
    n_test: int


def heldout_joint_law(A, C, EL, train, n_bootstrap: int = 400, seed: int = 0) -> HeldOutTest:
    """Fit Eq. 13 (a, d, A_start) on points where `train` is True, score it on the rest.

    The interval resamples training and held-out points separately (each with replacement)
    and refits every time, so it carries the uncertainty of the fit and of the score.
    """
    pts = _points(6, A=A, C=C, EL=EL)
    train = np.asarray(train)
    if train.dtype != bool or train.shape != pts["A"].shape:
        raise TypeError(f"train must be a boolean mask of {len(pts['A'])} entries")
    tr, te = np.flatnonzero(train), np.flatnonzero(~train)
    if min(len(tr), len(te)) < 3:
        raise ValueError(f"train needs >= 3 points on each side, got {len(tr)} and {len(te)}")
    validate.integer("n_bootstrap", n_bootstrap, minimum=1)

    def score(i_train: np.ndarray, i_test: np.ndarray) -> tuple[float, JointFit]:
        fit = fit_joint_law(*(pts[k][i_train] for k in ("A", "C", "EL")))
        pred = fit.predict(pts["A"][i_test], pts["C"][i_test])
        return float(np.mean(np.abs(np.log(pred / pts["EL"][i_test])))), fit

    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    draws = [score(rng.choice(tr, len(tr)), rng.choice(te, len(te)))[0] for _ in range(n_bootstrap)]
    error, fit = score(tr, te)
    ci = (float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5)))
    return HeldOutTest(error, ci, fit, len(tr), len(te))


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


# ----------------------------------------------------------------------------- the toy
@dataclass(frozen=True)
class ToyConfig:
    """Settings of the toy: the memory task, and the optimiser every model shares.

    Task: n_keys keys in R^d_in, values in R^d_out, key k queried with probability
    proportional to (k + zipf_shift)^-zipf (a shift flattens the head, so no single key
    dominates the loss). Adam (betas 0.9, 0.99) without weight decay on batches of keys drawn
    from p; warmup-stable-decay learning rate: linear warmup, constant lr, then linear decay
    to 0 over the last decay_frac of a budget. balance is the Switch load-balancing
    coefficient (0.01, as in Tian et al. 2025).
    """

    n_keys: int = 1024
    d_in: int = 16
    d_out: int = 8
    zipf: float = 1.2
    zipf_shift: float = 0.0
    batch: int = 128
    lr: float = 3e-3
    warmup: int = 25
    decay_frac: float = 0.2
    balance: float = 0.01

    def __post_init__(self) -> None:
        validate.integer("n_keys", self.n_keys, minimum=2)
        for name in ("d_in", "d_out", "batch", "warmup"):
            validate.integer(name, getattr(self, name), minimum=1)
        validate.real("zipf", self.zipf, low=0)
        validate.real("zipf_shift", self.zipf_shift, low=0)
        validate.real("lr", self.lr, low=0, low_open=True, high=1)
        validate.real("decay_frac", self.decay_frac, low=0, low_open=True, high=1)
        validate.real("balance", self.balance, low=0)


@dataclass(frozen=True, eq=False)
class MemoryTask:
    """Associative memory: K random keys (K, d_in) map to random values (K, d_out).

    Key k is queried with probability p_k proportional to k^-zipf. Values are independent of
    the keys, so a model can only store them: parameters, not FLOPs, limit the loss
    L(f) = sum_k p_k |f(x_k) - y_k|^2 / d_out (0 for perfect recall, about 1 for f = 0).
    """

    keys: np.ndarray  # (K, d_in), standard normal
    values: np.ndarray  # (K, d_out), standard normal
    p: np.ndarray  # (K,) query probabilities, decreasing

    def loss_of(self, predictions) -> np.ndarray:
        """Exact loss of predictions (..., K, d_out) at every key: (...,), no sampling noise."""
        predictions = validate.array("predictions", predictions, ndim=None)
        if predictions.shape[-2:] != self.values.shape:
            raise ValueError(f"predictions must end in (K, d_out) = {self.values.shape}, "
                             f"got shape {predictions.shape}")  # fmt: skip
        return ((predictions - self.values) ** 2).mean(axis=-1) @ self.p


def _check_config(config) -> ToyConfig:
    if not isinstance(config, ToyConfig):
        raise TypeError(f"config must be a ToyConfig, got {type(config).__name__}")
    return config


def make_memory_task(config: ToyConfig, seed: int) -> MemoryTask:
    """A MemoryTask of `config`'s size with Gaussian keys and values, drawn from `seed`."""
    _check_config(config)
    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    p = (np.arange(1, config.n_keys + 1) + config.zipf_shift) ** -config.zipf
    keys = rng.standard_normal((config.n_keys, config.d_in))
    return MemoryTask(keys, rng.standard_normal((config.n_keys, config.d_out)), p / p.sum())


@dataclass(frozen=True)
class MLPSpec:
    """One toy model: a ReLU MLP whose hidden layer is n_experts experts of width d_expert,
    top_k of them used per key. A dense MLP of width h is MLPSpec(1, 1, h) (`dense_mlp`)."""

    n_experts: int
    top_k: int
    d_expert: int

    def __post_init__(self) -> None:
        validate.integer("n_experts", self.n_experts, minimum=1)
        validate.integer("d_expert", self.d_expert, minimum=1)
        validate.integer("top_k", self.top_k, minimum=1, maximum=self.n_experts)

    @property
    def dense(self) -> bool:
        return self.n_experts == 1

    @property
    def A(self) -> float:
        """Activation ratio A = top_k / n_experts (Tian et al. 2025, Sec. 2; no shared expert)."""
        return self.top_k / self.n_experts

    @property
    def units(self) -> int:
        """Hidden units stored: n_experts * d_expert."""
        return self.n_experts * self.d_expert

    def granularity(self, d_in: int) -> float:
        """G = 2 d_in / d_expert: the paper's 2 d_model / d_expert, input width as d_model."""
        return 2.0 * validate.integer("d_in", d_in, minimum=1) / self.d_expert

    def flops(self, d_in: int, d_out: int, router: bool = False) -> float:
        """Forward FLOPs per key: 2 top_k d_expert (d_in + d_out), + 2 d_in E with the router."""
        d_in = validate.integer("d_in", d_in, minimum=1)
        d_out = validate.integer("d_out", d_out, minimum=1)
        active = 2.0 * self.top_k * self.d_expert * (d_in + d_out)
        return active + (2.0 * d_in * self.n_experts if router and not self.dense else 0.0)


def dense_mlp(width: int) -> MLPSpec:
    """A dense ReLU MLP of hidden width `width`."""
    return MLPSpec(1, 1, validate.integer("width", width, minimum=1))


class _Bank:
    """Many independent MLPs held in one flat parameter vector and trained on the same batches.

    Model m owns hidden columns `cols[m]` of W1 (d_in, H) (dense models first, then MoE
    models), rows of W2 (H, d_out), its output bias b2[m] and its experts' columns of the
    router Wr (d_in, E_total). No parameter is shared, so the gradient of the summed loss is
    each model's own gradient, and Adam (elementwise) moves each model exactly as if it were
    trained alone, while one numpy call serves all models. Backprop is written out because
    torch would add ~8 s of import per worker to a chapter that must run in 50 s.
    """

    def __init__(self, specs: list[MLPSpec], d_in: int, d_out: int, seed: int, dtype=np.float32):
        self.specs, self.d_out = list(specs), d_out
        dense = [m for m, s in enumerate(specs) if s.dense]
        self.moe = [m for m, s in enumerate(specs) if not s.dense]
        self.cols, self.experts, col, first = {}, {}, 0, 0
        for m in dense + self.moe:  # hidden units: dense models first, then MoE models
            self.cols[m], col = slice(col, col + specs[m].units), col + specs[m].units
        for m in self.moe:  # router columns of each MoE model
            n = specs[m].n_experts
            self.experts[m], first = slice(first, first + n), first + n
        self.h_dense = sum(specs[m].units for m in dense)
        # per-expert constants of the MoE block, experts in the order of self.moe
        n_experts = np.array([specs[m].n_experts for m in self.moe], dtype=int)
        top_k = np.array([specs[m].top_k for m in self.moe], dtype=int)
        self.group_n, self.group_start = n_experts, np.cumsum(n_experts) - n_experts
        self.expert_n, self.expert_k = np.repeat(n_experts, n_experts), np.repeat(top_k, n_experts)
        self.expert_width = np.repeat([specs[m].d_expert for m in self.moe], n_experts).astype(int)
        self.unit_start = np.cumsum(self.expert_width) - self.expert_width
        self.sort_key = np.repeat(np.arange(len(self.moe)), n_experts) * 1e6  # keeps models apart
        self.kth = np.cumsum(n_experts) - top_k  # sorted column of each model's k-th largest
        self._init_params(d_in, col, first, seed, dtype)

    def _init_params(self, d_in: int, H: int, E: int, seed: int, dtype) -> None:
        """Views into one flat vector. Each model draws its He-init W1 columns and N(0, 1/d_in)
        router from its own stream, so it starts as it would alone; W2 = 0 (f = 0)."""
        shapes = {"W1": (d_in, H), "b1": (H,), "W2": (H, self.d_out),
                  "b2": (len(self.specs), self.d_out), "Wr": (d_in, E)}  # fmt: skip
        self.theta = np.zeros(sum(math.prod(s) for s in shapes.values()), dtype)
        self.grad = np.zeros_like(self.theta)
        self.p, self.g, start = {}, {}, 0
        for name, shape in shapes.items():
            stop = start + math.prod(shape)
            self.p[name] = self.theta[start:stop].reshape(shape)
            self.g[name] = self.grad[start:stop].reshape(shape)
            start = stop
        w1_scale, wr_scale = math.sqrt(2 / d_in), 1 / math.sqrt(d_in)
        for m, stream in enumerate(np.random.SeedSequence(seed).spawn(len(self.specs))):
            rng, s = np.random.default_rng(stream), self.specs[m]
            self.p["W1"][:, self.cols[m]] = w1_scale * rng.standard_normal((d_in, s.units))
            if not s.dense:
                self.p["Wr"][:, self.experts[m]] = wr_scale * rng.standard_normal(
                    (d_in, s.n_experts)
                )

    def _group(self, x: np.ndarray) -> np.ndarray:
        """Sum of x (B, E_total) over each MoE model's experts, repeated back to (B, E_total)."""
        return np.repeat(np.add.reduceat(x, self.group_start, axis=1), self.group_n, axis=1)

    def _route(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Top-k routing of every MoE model: softmax probabilities p, chosen mask and gates
        w = p / (sum of chosen p) on the chosen experts (renormalised, as in Mixtral); (B, E)."""
        logits = X @ self.p["Wr"]
        peak = np.maximum.reduceat(logits, self.group_start, axis=1)
        z = np.exp(logits - np.repeat(peak, self.group_n, axis=1))
        probs = z / self._group(z)
        key = logits + self.sort_key  # float64: each model's experts sort as one block
        kth = np.sort(key, axis=1)[:, self.kth]  # (B, n_models)
        chosen = key >= np.repeat(kth, self.group_n, axis=1)  # the top_k logits of each model
        gates = np.where(chosen, probs, 0.0)
        return probs, chosen, gates / self._group(gates)

    def forward(self, X: np.ndarray) -> dict:
        """Pre-activations Z and gated activations S (B, H), outputs (M, B, d_out), routes and
        the ungated activations of the MoE block."""
        Z = X @ self.p["W1"]
        Z += self.p["b1"]
        S = np.maximum(Z, 0.0)
        f = {"Z": Z, "S": S}
        if self.moe:
            f["routes"] = self._route(X)
            f["ungated"] = S[:, self.h_dense :].copy()
            S[:, self.h_dense :] *= np.repeat(f["routes"][2], self.expert_width, axis=1)
        W2 = self.p["W2"]
        outs = [S[:, c] @ W2[c] for c in (self.cols[m] for m in range(len(self.specs)))]
        f["out"] = np.stack(outs) + self.p["b2"][:, None]
        return f

    def backward(self, X: np.ndarray, Y: np.ndarray, balance: float) -> np.ndarray:
        """Fill self.grad with the gradient of sum_m (L_m + balance loss_m); return L_m (M,)."""
        f = self.forward(X)
        B, W2, G = len(X), self.p["W2"], self.g
        resid = f["out"] - Y  # (M, B, d_out)
        d_out = resid * (2.0 / (B * self.d_out))
        G["b2"][:] = d_out.sum(axis=1)
        dZ = np.empty_like(f["S"])  # dS first, then dZ in place
        for m, c in self.cols.items():
            G["W2"][c] = f["S"][:, c].T @ d_out[m]
            np.matmul(d_out[m], W2[c].T, out=dZ[:, c])
        if self.moe:
            dS_moe = dZ[:, self.h_dense :]
            G["Wr"][:] = X.T @ self._router_grad(f, dS_moe, balance)
            dS_moe *= np.repeat(f["routes"][2], self.expert_width, axis=1)
        dZ *= f["Z"] > 0
        G["W1"][:] = X.T @ dZ
        G["b1"][:] = dZ.sum(axis=0)
        return (resid**2).mean(axis=(1, 2))

    def _router_grad(self, f: dict, dS: np.ndarray, balance: float) -> np.ndarray:
        """d(loss)/d(router logits) (B, E_total) from dS (B, H_moe): gates and balance loss."""
        probs, chosen, w = f["routes"]
        d_w = np.add.reduceat(dS * f["ungated"], self.unit_start, axis=1)  # (B, E_total)
        wd = w * d_w
        d_logits = wd - w * self._group(wd)  # softmax over the chosen experts
        # Switch balance loss coef * E * sum_i f_i P_i (Fedus et al. 2022, Eq. 4), f_i fixed
        d_p = balance * self.expert_n * chosen.mean(axis=0) / self.expert_k / len(probs)
        pd = probs * d_p
        return d_logits + pd - probs * self._group(pd)

    def exact_loss(self, task: MemoryTask) -> np.ndarray:
        """Exact loss of every model (M,) over all keys."""
        return task.loss_of(self.forward(task.keys.astype(self.theta.dtype))["out"])

    def load_entropy(self, task: MemoryTask) -> np.ndarray:
        """Entropy of the p-weighted expert load / log E of every model (NaN for dense)."""
        out = np.full(len(self.specs), np.nan)
        if self.moe:
            chosen = self._route(task.keys.astype(self.theta.dtype))[1]
            load = task.p @ chosen / self.expert_k  # (E_total,), sums to 1 per model
            plogp = np.where(load > 0, load * np.log(np.where(load > 0, load, 1.0)), 0.0)
            out[self.moe] = -np.add.reduceat(plogp, self.group_start) / np.log(self.group_n)
        return out


@dataclass(frozen=True)
class BankResult:
    """Exact loss (n_budgets, n_models) at the end of each budget, and the routing-load
    entropy / log E of every MoE (1 = perfectly balanced; NaN for dense models)."""

    budgets: tuple[int, ...]
    loss: np.ndarray
    load_entropy: np.ndarray


def wsd_lr(step: int, total: int, config: ToyConfig) -> float:
    """Learning rate at `step` (0-based) of a run of `total` steps (warmup-stable-decay)."""
    total = validate.integer("total", total, minimum=1)
    validate.integer("step", step, minimum=0, maximum=total - 1)
    _check_config(config)
    n_decay = max(1, round(config.decay_frac * total))
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    return config.lr * min(1.0, (total - step) / n_decay)


class _Adam:
    """Adam on a flat parameter vector (Kingma & Ba 2015), betas (0.9, 0.99), no decay."""

    def __init__(self, theta: np.ndarray):
        self.theta, self.m, self.v, self.t = theta, np.zeros_like(theta), np.zeros_like(theta), 0

    def step(self, grad: np.ndarray, lr: float, b1: float = 0.9, b2: float = 0.99) -> None:
        self.t += 1
        self.m *= b1
        self.m += (1 - b1) * grad
        self.v *= b2
        self.v += (1 - b2) * grad * grad
        m_hat = self.m / (1 - b1**self.t)
        self.theta -= lr * m_hat / (np.sqrt(self.v / (1 - b2**self.t)) + 1e-8)

    def state(self) -> tuple:
        return self.theta.copy(), self.m.copy(), self.v.copy(), self.t

    def restore(self, state: tuple) -> None:
        self.theta[:], self.m[:], self.v[:], self.t = state[0], state[1], state[2], state[3]


def _check_specs(specs) -> list[MLPSpec]:
    if isinstance(specs, MLPSpec) or not all(isinstance(s, MLPSpec) for s in specs) or not specs:
        raise TypeError("specs must be a non-empty list of MLPSpec (see dense_mlp, MLPSpec)")
    return list(specs)


def train_bank(task: MemoryTask, specs, budgets, config: ToyConfig, seed: int) -> BankResult:
    """Train every model of `specs` on the same batches, once for each step budget.

    One warmup-stable run serves all budgets: each budget branches off at its decay start and
    decays to 0 (WSD branches, Hagele et al. 2024), so budgets 250, 500, 1000 cost 1000 +
    0.2 (250 + 500) steps, and each branch equals a run trained alone to that budget.
    """
    specs = _check_specs(specs)
    budgets = sorted(validate.integer("budgets[i]", b, minimum=1) for b in budgets)
    _check_config(config)
    if not isinstance(task, MemoryTask) or task.keys.shape[1] != config.d_in:
        raise TypeError(f"task must be a MemoryTask of config's size (make_memory_task), "
                        f"got {type(task).__name__}")  # fmt: skip
    init, data = np.random.SeedSequence(validate.integer("seed", seed, minimum=0)).spawn(2)
    bank = _Bank(specs, config.d_in, config.d_out, int(init.generate_state(1)[0]))
    idx = np.random.default_rng(data).choice(len(task.p), (budgets[-1], config.batch), p=task.p)
    keys, values = task.keys.astype(bank.theta.dtype), task.values.astype(bank.theta.dtype)
    adam, done, loss, entropy = _Adam(bank.theta), 0, [], []
    for total in budgets:
        start = total - max(1, round(config.decay_frac * total))
        if start < config.warmup:
            raise ValueError(f"budget {total} would decay before warmup={config.warmup} ends")
        for step in range(done, total):  # the shared trunk up to `start`, then this branch
            bank.backward(keys[idx[step]], values[idx[step]], config.balance)
            adam.step(bank.grad, wsd_lr(step, total, config))
            if step + 1 == start:
                trunk = adam.state()
        loss.append(bank.exact_loss(task))
        entropy.append(bank.load_entropy(task))
        adam.restore(trunk)
        done = start
    return BankResult(tuple(budgets), np.array(loss), np.array(entropy))


def run_toy_replicate(config: ToyConfig, specs, budgets, seed: int) -> BankResult:
    """One replicate: draw the task, the initialisation and the batch order from `seed`, then
    train every model of `specs` to every budget (a job for `lib.runs.run_jobs`)."""
    task_seed, train_seed = np.random.SeedSequence(validate.integer("seed", seed, minimum=0)).spawn(
        2
    )
    task = make_memory_task(config, int(task_seed.generate_state(1)[0]))
    return train_bank(task, specs, budgets, config, int(train_seed.generate_state(1)[0]))


def toy_leverage(loss, specs, budgets, config: ToyConfig):
    """EL of every MoE model at every budget against the dense models of the same budget.

    loss: (n_budgets, n_models) exact losses of `specs` (BankResult.loss). C = M D with M the
    training FLOPs per key (3 x forward; router excluded as in the paper, and included) and D
    the keys seen. Returns a DataFrame with one row per (budget, MoE model).
    """
    import pandas as pd

    specs, config = _check_specs(specs), _check_config(config)
    budgets = [validate.integer("budgets[i]", b, minimum=1) for b in budgets]
    loss = validate.array("loss", loss, ndim=2, positive=True)
    if loss.shape != (len(budgets), len(specs)):
        raise ValueError(f"loss must be (budgets, models) = {(len(budgets), len(specs))}, "
                         f"got {loss.shape}")  # fmt: skip
    dense = np.array([s.dense for s in specs])
    M = np.array([3 * s.flops(config.d_in, config.d_out) for s in specs])
    M_router = np.array([3 * s.flops(config.d_in, config.d_out, router=True) for s in specs])
    rows = []
    for budget, L in zip(budgets, loss, strict=True):
        D = float(budget * config.batch)
        lev = efficiency_leverage(M[dense] * D, L[dense], M[~dense] * D, L[~dense])
        lev_r = efficiency_leverage(M[dense] * D, L[dense], M_router[~dense] * D, L[~dense])
        for j, m in enumerate(np.flatnonzero(~dense)):
            s = specs[m]
            rows.append({
                "budget": budget, "E": s.n_experts, "k": s.top_k, "d_expert": s.d_expert,
                "A": s.A, "G": s.granularity(config.d_in), "C": M[m] * D, "loss": L[m],
                "EL": lev.EL[j], "EL_router": lev_r.EL[j], "in_range": bool(lev.in_range[j]),
            })  # fmt: skip
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- Clark et al.
def load_clark_final(path: Path | None = None):
    """Last evaluation of every run in Clark et al. 2022's `curves.csv.gz` (one row per run).

    Adds `C` = flops_per_step * step (training FLOPs as the dataset counts them, router
    included) and `A` = k / num_experts, the activation ratio of the routed layers (1 for
    dense runs, whose `k` column records a FLOP multiplier instead).
    """
    import pandas as pd  # local import keeps `import lib.moe_leverage` light

    path = DATA_DIR / "curves.csv.gz" if path is None else Path(path)
    if not path.is_file():
        raise ValueError(f"path={str(path)!r} does not exist; pass the Clark et al. curves file")
    runs = pd.read_csv(path)
    last = runs.sort_values("step").groupby("hyper_id").tail(1).copy()
    last["C"] = last["flops_per_step"] * last["step"]
    last["A"] = np.where(last["router_type"] == "Dense", 1.0, last["k"] / last["num_experts"])
    return last.sort_values(["router_type", "dense_parameter_count", "num_experts"])


CLARK_ROUTERS = ("S-Base", "RL-R", "Hash")


def clark_leverage(runs, router: str = "S-Base"):
    """EL of one router's runs against the dense runs of Clark et al. 2022 (final val. loss).

    Base configuration only: top-1, every other layer routed, no FLOP multiplier. The dense
    curve averages the seeds of each size. Adds `EL` (NaN out of the dense range), `in_range`.
    """
    router = validate.choice("router", router, CLARK_ROUTERS)
    missing = {"router_type", "k", "routing_frequency", "flop_increase", "C"} - set(runs.columns)
    if missing:
        raise ValueError(f"runs lacks columns {sorted(missing)}; pass load_clark_final()")
    base = (runs.k == 1) & (runs.routing_frequency == 0.5) & (runs.flop_increase == 1)
    dense = runs[base & (runs.router_type == "Dense")].groupby("dense_parameter_count")
    dense = dense[["C", "loss_validation"]].mean()
    routed = runs[base & (runs.router_type == router)].copy()
    lev = efficiency_leverage(dense.C, dense.loss_validation, routed.C, routed.loss_validation)
    routed["EL"], routed["in_range"] = lev.EL, lev.in_range
    return routed
