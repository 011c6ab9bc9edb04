"""Efficiency leverage of mixture-of-experts (MoE) models (Tian et al. 2025, arXiv:2507.17702).

Efficiency leverage EL = C_dense / C_moe at equal loss (Sec. 2): how much dense training compute
an MoE model is worth. This module holds
- the paper's joint law EL(A, G, C) (Eq. 13) with its Table 2 constants, `TIAN2025`;
- the EL estimator: log-log interpolation of a dense loss-vs-compute curve, flagging (never
  extrapolating) losses outside the dense range;
- the fit of the separable law log EL = a_A log A_hat (Eq. 10);
- the toy task of chapter 2: a Zipf-weighted pair-to-value associative memory whose expected
  loss is computed exactly, and the training sweep of dense and MoE models on it;
- a loader for Clark et al. (2022)'s dense and routed runs (`data/clark2022/`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.isotonic import IsotonicRegression

from lib.fit import as_array, bootstrap_ci, r2_score

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

    A: activation ratio(s) in (0, 1]. Eq. 10 of Tian et al. 2025 (form of Clark et al. 2022).
    """
    A = np.atleast_1d(as_array("A", np.ravel(A), positive=True))
    if np.any(A > 1):
        raise ValueError(f"A must lie in (0, 1] (active / total experts), got max {A.max():g}")
    shift = 1.0 / (1.0 / constants.A_start - 1.0 / constants.A_max)
    return 1.0 / (1.0 / (A + shift) + 1.0 / constants.A_max)


def el_joint(A, G, C, constants: JointLawConstants = TIAN2025) -> np.ndarray:
    """Eq. 13: EL(A, G, C) = A_hat^(a + d log10 C + gamma (log2 G)^2 + beta log2 G).

    A: activation ratio in (0, 1]; G: granularity 2 d_model / d_expert (> 0); C: training FLOPs
    (> 0). Arguments broadcast against each other.
    """
    A, G, C = np.broadcast_arrays(np.asarray(A, float), np.asarray(G, float), np.asarray(C, float))
    for name, x in (("G", G), ("C", C)):
        as_array(name, x.ravel(), positive=True)
    A_hat = activation_hat(A.ravel(), constants).reshape(A.shape)
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
    C, L = as_array("C_dense", C, positive=True), as_array("L_dense", L, positive=True)
    if len(C) != len(L) or len(C) < 2:
        raise ValueError(f"C_dense and L_dense need equal lengths >= 2, got {len(C)}, {len(L)}")
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
    C_moe = as_array("C_moe", C_moe, positive=True)
    L_moe = as_array("L_moe", L_moe, positive=True)
    if len(C_moe) != len(L_moe):
        raise ValueError(f"C_moe and L_moe must have equal lengths, got {len(C_moe)}, {len(L_moe)}")
    if len(logC) < 2:
        raise ValueError("the dense curve is flat after the isotonic fit; EL is undefined")
    x = np.log(L_moe)
    in_range = (x >= logL.min()) & (x <= logL.max())
    C_eq = np.exp(np.interp(x, logL[::-1], logC[::-1]))  # np.interp needs increasing abscissae
    C_eq = np.where(in_range, C_eq, np.nan)
    return Leverage(EL=C_eq / C_moe, C_equivalent=C_eq, in_range=in_range)


@dataclass(frozen=True)
class ActivationLawFit:
    """log EL = a_A log A_hat (Eq. 10), least squares through the origin; r2 on log EL."""

    a_A: float
    r2: float
    ci: dict[str, tuple[float, float]]

    def predict(self, A, constants: JointLawConstants = TIAN2025) -> np.ndarray:
        return activation_hat(A, constants) ** self.a_A


def fit_activation_law(
    A, EL, n_bootstrap: int = 2000, seed: int = 0, constants: JointLawConstants = TIAN2025
) -> ActivationLawFit:
    """Fit a_A in log EL = a_A log A_hat(A) with A_hat from `constants` (A_start, A_max fixed).

    Closed form a_A = sum(x y) / sum(x^2), x = log A_hat, y = log EL; 95% bootstrap CI over
    points.
    """
    A = as_array("A", A, positive=True)
    EL = as_array("EL", EL, positive=True)
    if len(A) != len(EL) or len(A) < 3:
        raise ValueError(f"A and EL need equal lengths >= 3, got {len(A)} and {len(EL)}")
    x, y = np.log(activation_hat(A, constants)), np.log(EL)

    def solve(idx: np.ndarray) -> dict[str, float]:
        sxx = float(np.sum(x[idx] ** 2))
        return {"a_A": float(np.sum(x[idx] * y[idx]) / sxx) if sxx > 0 else 0.0}

    a_A = solve(np.arange(len(x)))["a_A"]
    return ActivationLawFit(
        a_A=a_A, r2=r2_score(y, a_A * x), ci=bootstrap_ci(solve, len(x), n_bootstrap, seed)
    )


# ----------------------------------------------------------------------------- the toy task
@dataclass(frozen=True, eq=False)
class PairMemory:
    """Rows [BOS, a, b, v]: a pair (a, b) ~ Zipf(zipf) over n_a^2 pairs, v = value[pair].

    Token ids: a in [0, n_a), b in [n_a, 2 n_a), v in [2 n_a, 2 n_a + n_values), BOS last.
    The value is a random table of the pair, so a model must store one fact per pair: a task
    where parameters, not FLOPs, limit the loss. p: (n_a^2,) pair probabilities (Zipf ranks in
    random order); value: (n_a^2,) value index of each pair.
    """

    n_a: int
    n_values: int
    p: np.ndarray
    value: np.ndarray

    @property
    def vocab_size(self) -> int:
        return 2 * self.n_a + self.n_values + 1

    def rows(self, pairs: np.ndarray) -> np.ndarray:
        """Token rows (n, 4) = [BOS, a, n_a + b, 2 n_a + value] of pair indices (n,)."""
        a, b = np.divmod(pairs, self.n_a)
        bos = np.full_like(pairs, self.vocab_size - 1)
        return np.stack([bos, a, self.n_a + b, 2 * self.n_a + self.value[pairs]], axis=1)

    def sample(self, n: int, seed: int) -> np.ndarray:
        """n independent rows (n, 4), int64, pairs drawn from p."""
        if not isinstance(n, int) or n <= 0:
            raise ValueError(f"n={n!r} must be a positive integer")
        pairs = np.random.default_rng(seed).choice(len(self.p), size=n, p=self.p)
        return self.rows(pairs)

    def entropy(self) -> float:
        """Loss floor in nats/token: H(a, b) / 3 (a and b|a are random, v|(a, b) is fixed)."""
        return float(-np.sum(self.p * np.log(self.p)) / 3)


def make_pair_memory(n_a: int, n_values: int, zipf: float, seed: int) -> PairMemory:
    """A PairMemory with p_r proportional to r^-zipf (rank r = 1..n_a^2) and uniform values."""
    for name, v in (("n_a", n_a), ("n_values", n_values)):
        if not isinstance(v, int) or v < 2:
            raise ValueError(f"{name}={v!r} must be an integer >= 2")
    if not (math.isfinite(zipf) and zipf >= 0):
        raise ValueError(f"zipf={zipf!r} must be finite and >= 0 (0 = uniform pairs)")
    rng = np.random.default_rng(seed)
    n = n_a * n_a
    p = np.arange(1, n + 1, dtype=float) ** -zipf
    p = (p / p.sum())[rng.permutation(n)]
    return PairMemory(n_a, n_values, p, rng.integers(0, n_values, size=n))


def exact_excess_loss(model, task: PairMemory) -> float:
    """Expected loss minus the floor, nats/token: sum_pairs p * (mean NLL of a, b, v) - H.

    Exact: every pair is scored once and weighted by its probability (no sampling noise).
    """
    import torch
    import torch.nn.functional as F

    rows = torch.from_numpy(task.rows(np.arange(len(task.p))))  # (n_pairs, 4)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        logits, _ = model(rows[:, :3])  # (n_pairs, 3, V)
        nll = F.cross_entropy(logits.transpose(1, 2), rows[:, 1:], reduction="none")
    model.train(was_training)
    return float(np.dot(task.p, nll.double().mean(dim=1).numpy())) - task.entropy()


def training_flops(cfg, seq_len: int, include_router: bool = False) -> float:
    """M: non-embedding training FLOPs per token = 3 x (forward FLOPs - logits matmul 2 d V).

    The paper's M (Tian et al. 2025, App. C): attention and active experts, no embedding or
    output layer, router excluded unless include_router (2 d E per MoE layer, forward).
    """
    from lib.lm import flops_per_token

    forward = flops_per_token(cfg, seq_len, include_router=include_router)
    return 3.0 * (forward - 2.0 * cfg.d_model * cfg.vocab_size)


def train_and_measure(model_cfg, train_cfg, task: PairMemory, train_rows: np.ndarray) -> dict:
    """Train one model on task rows (R, 4) with lib.train and return its toy-scale record.

    Record: A, G (paper's 2 d_model / d_expert; 0 for dense), M and C = M D (router excluded
    and included), exact excess loss, routing-load entropy / log E (1 = perfectly balanced).
    """
    from lib.train import train

    result = train(model_cfg, train_cfg, train_rows)
    moe, S = model_cfg.moe, train_cfg.seq_len
    D = float(train_cfg.tokens)
    load_entropy = float("nan")
    excess = exact_excess_loss(result.model, task)  # also leaves the load of all pairs
    if moe is not None and moe.n_experts > 1:
        f = result.model.blocks[0].mlp.last_load.double().numpy()
        f = f[f > 0]
        load_entropy = float(-(f * np.log(f)).sum() / np.log(moe.n_experts))
    M, M_r = training_flops(model_cfg, S), training_flops(model_cfg, S, include_router=True)
    return {
        "kind": "dense" if moe is None else "moe",
        "E": 1 if moe is None else moe.n_experts,
        "width": model_cfg.d_ff if moe is None else moe.d_expert,
        "A": 1.0 if moe is None else moe.activation_ratio,
        "G": 0.0 if moe is None else 2 * model_cfg.d_model / moe.d_expert,
        "M": M,
        "M_router": M_r,
        "C": M * D,
        "C_router": M_r * D,
        "excess": excess,
        "load_entropy": load_entropy,
        "wall_s": result.wall_s,
    }


@dataclass(frozen=True)
class WithinSlopeFit:
    """y = b x + c_g with one intercept per group g; b is the pooled within-group slope."""

    b: float
    ci: dict[str, tuple[float, float]]


def fit_within_slope(x, y, groups, n_bootstrap: int = 2000, seed: int = 0) -> WithinSlopeFit:
    """Least-squares slope b of y = b x + c_g (fixed effects): demean x and y per group.

    Used for log EL = b log E + c_size on Clark et al.'s runs; 95% bootstrap CI over points.
    """
    x, y = as_array("x", x), as_array("y", y)
    g = np.asarray(groups)
    if not (len(x) == len(y) == len(g)) or len(x) < 3:
        raise ValueError(f"x, y, groups need equal lengths >= 3, got {len(x)}, {len(y)}, {len(g)}")

    def solve(idx: np.ndarray) -> dict[str, float]:
        xi, yi, gi = x[idx], y[idx], g[idx]
        dx, dy = xi.copy(), yi.copy()
        for level in np.unique(gi):
            m = gi == level
            dx[m] -= xi[m].mean()
            dy[m] -= yi[m].mean()
        sxx = float(np.sum(dx * dx))
        return {"b": float(np.sum(dx * dy) / sxx) if sxx > 0 else 0.0}

    return WithinSlopeFit(
        b=solve(np.arange(len(x)))["b"], ci=bootstrap_ci(solve, len(x), n_bootstrap, seed)
    )


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
