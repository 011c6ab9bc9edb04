"""Architecture-conditioned scaling law and decode cost of Bian et al. (2025), chapter 11.

At fixed non-embedding parameters N = N_attn + N_mlp, the shape of a LLaMA-style decoder is
described by x = d / sqrt(N) (hidden size, normalised) and r = N_mlp / N_attn. Bian, Yu,
Venkataraman and Park (ICLR 2026, Eq. 3) calibrate the best loss at each size with two
separable U-shaped factors,

    L(x, r | N, D) = (a0 + a1 ln x + a2 / x) * (b0 + b1 ln r + b2 / r) * L_opt(N, D),

whose minima sit at x* = a2 / a1 and r* = b2 / b1. This module holds: the published
coefficients and Table 1; the shape solver that turns (N, d, r, GQA) into an `LMConfig` of
`lib.lm`; the toy task (a lagged-logit language with an exact loss floor); training runs for
`lib.runs.run_jobs`; the U-shape and conditional-law fits, fitted across sizes; how a
prediction scores against measured losses (Spearman and the regret of its choice, the noise
ceiling, the optimum of a sweep with a jackknife interval); the constrained search (their
Eq. 4); the released depth-width runs of Bian, Yan and Venkataraman (ICML 2025) with the
hidden-size factor on a Chinchilla reference; and a decode cost model next to a measured
KV-cache decode throughput.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize, special, stats

from lib import validate
from lib.data import data_file
from lib.fit import ChinchillaFit
from lib.lm import LMConfig, count_params, flops_per_token


# ----------------------------------------------------------------------------- the published law
@dataclass(frozen=True)
class UFactor:
    """One calibration factor c0 + c1 ln z + c2 / z; interior minimum at z* = c2 / c1."""

    c0: float
    c1: float
    c2: float

    @property
    def z_star(self) -> float:
        """argmin over z > 0: dF/dz = c1/z - c2/z^2 = 0 -> z* = c2/c1 (nan if no interior min)."""
        return self.c2 / self.c1 if self.c1 > 0 and self.c2 > 0 else math.nan

    def __call__(self, z: np.ndarray | float) -> np.ndarray:
        z = validate.array("z", z, ndim=None, positive=True)
        return self.c0 + self.c1 * np.log(z) + self.c2 / z


@dataclass(frozen=True)
class PublishedLaw:
    """The multiplicative law's coefficients a = (a0, a1, a2) for x and b = (b0, b1, b2) for r."""

    a: UFactor
    b: UFactor


# Bian et al. 2025, Sec. 5 (Task 3: fitted on the 80M, 145M and 297M variants).
BIAN2025 = PublishedLaw(UFactor(2.697, 0.0974, 0.0078), UFactor(0.3870, 0.0063, 0.0065))
# Bian et al. 2025, Sec. 5 (refit on the 1B variants only; the law behind Panda-3B°).
BIAN2025_1B = PublishedLaw(UFactor(2.319, 0.238, 0.0176), UFactor(0.5104, 0.0051, 0.0062))


@dataclass(frozen=True)
class Table1Row:
    """A configuration of Bian et al. 2025, Table 1, with the printed x = d/sqrt(N) and r."""

    name: str
    d: int
    f: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    x_printed: float
    r_printed: float


# Head counts are those of the public LLaMA-3.2 configs and of the paper's text (Panda/Surefire).
BIAN2025_TABLE1 = (
    Table1Row("LLaMA-3.2-1B", 2048, 8192, 16, 32, 8, 64, 0.066, 4.80),
    Table1Row("Panda-1B", 2560, 4096, 16, 72, 18, 64, 0.082, 1.07),
    Table1Row("Surefire-1B", 2560, 6144, 16, 36, 4, 64, 0.082, 3.6),
    Table1Row("LLaMA-3.2-3B", 3072, 8192, 28, 24, 8, 128, 0.058, 4.80),
    Table1Row("Panda-3B", 4096, 4096, 28, 36, 12, 128, 0.077, 1.00),
)


def table1_config(row: Table1Row) -> LMConfig:
    """An `LMConfig` with a Table 1 row's shape (vocabulary and length are irrelevant to N)."""
    if not isinstance(row, Table1Row):
        raise TypeError(f"row must be a Table1Row, e.g. BIAN2025_TABLE1[0], got {row!r}")
    return LMConfig(vocab_size=1, d_model=row.d, n_layers=row.n_layers, n_heads=row.n_heads,
                    n_kv_heads=row.n_kv_heads, d_ff=row.f, max_seq_len=1,
                    d_head=row.d_head)  # fmt: skip


# ----------------------------------------------------------------------------- shapes
def _config(cfg: LMConfig) -> LMConfig:
    if not isinstance(cfg, LMConfig):
        raise TypeError(f"cfg must be an LMConfig, got {type(cfg).__name__} {cfg!r:.60}")
    return cfg


def shape_ratios(cfg: LMConfig) -> tuple[float, float, int]:
    """(x, r, N): x = d / sqrt(N), r = N_mlp / N_attn, N = N_attn + N_mlp (norms left out)."""
    pc = count_params(_config(cfg))
    N = pc.attention + pc.mlp
    return cfg.d_model / math.sqrt(N), pc.mlp / pc.attention, N


def design(
    N: int,
    d: int,
    r: float,
    n_layers: int,
    d_head: int,
    gqa: int = 1,
    vocab_size: int = 8,
    max_seq_len: int = 16,
) -> LMConfig:
    """Dense decoder with about N = N_attn + N_mlp parameters, hidden size d and ratio r.

    Solves N_attn = N / (1 + r) = n_layers * 2 d d_head (n_h + n_h / gqa) for n_h (rounded to a
    multiple of gqa, at least gqa) and N_mlp = N r / (1 + r) = n_layers * 3 d f for f. The
    realised x and r differ from the requested ones by head granularity: read them back with
    `shape_ratios`.
    """
    N, d = validate.integer("N", N, minimum=1), validate.integer("d", d, minimum=1)
    r = validate.real("r", r, low=0, low_open=True)
    n_layers = validate.integer("n_layers", n_layers, minimum=1)
    d_head = validate.integer("d_head", d_head, minimum=1)
    gqa = validate.integer("gqa", gqa, minimum=1)
    per_head = n_layers * 2 * d * d_head * (1 + 1 / gqa)  # attention params per query head
    n_h = max(gqa, gqa * round(N / (1 + r) / per_head / gqa))
    f = max(1, round(N * r / (1 + r) / (n_layers * 3 * d)))
    return LMConfig(vocab_size=validate.integer("vocab_size", vocab_size, minimum=1),
                    d_model=d, n_layers=n_layers, n_heads=n_h, n_kv_heads=n_h // gqa, d_ff=f,
                    max_seq_len=validate.integer("max_seq_len", max_seq_len, minimum=1),
                    d_head=d_head)  # fmt: skip


def llama_like(d: int, n_layers: int, d_head: int, vocab_size: int, max_seq_len: int) -> LMConfig:
    """LLaMA-3.2's proportions with MHA: square attention (n_h d_h = d) and d_ff = 4 d.

    Then N_attn = 4 d^2 n_layers and N_mlp = 12 d^2 n_layers, so r = 3 and x = 1/sqrt(16 n_layers)
    at every size (LLaMA-3.2-1B's r = 4.8 comes from the same proportions with GQA 4).
    """
    d = validate.integer("d", d, minimum=1)
    d_head = validate.integer("d_head", d_head, minimum=1)
    if d % d_head:
        raise ValueError(f"d={d} must be a multiple of d_head={d_head} for square attention")
    n_h = d // d_head
    return LMConfig(vocab_size=validate.integer("vocab_size", vocab_size, minimum=1), d_model=d,
                    n_layers=validate.integer("n_layers", n_layers, minimum=1), n_heads=n_h,
                    n_kv_heads=n_h, d_ff=4 * d,
                    max_seq_len=validate.integer("max_seq_len", max_seq_len, minimum=1),
                    d_head=d_head)  # fmt: skip


def sweep_shapes(
    N: int,
    x_grid,
    r_at: float,
    r_grid,
    x_at: float,
    n_layers: int,
    d_head: int,
    vocab_size: int,
    max_seq_len: int,
) -> dict[str, list[LMConfig]]:
    """The loss grid at size N: {"x": shapes over x_grid at r = r_at, "r": over r_grid at x_at}.

    Each shape is `design(N, round(x sqrt(N)), r, ...)`; a shape in both sweeps (x_at, r_at) is
    the same `LMConfig` in both lists.
    """
    N = validate.integer("N", N, minimum=1)
    x_grid = validate.array("x_grid", x_grid, positive=True)
    r_grid = validate.array("r_grid", r_grid, positive=True)
    d_at = round(validate.real("x_at", x_at, low=0, low_open=True) * math.sqrt(N))
    args = (n_layers, d_head, 1, vocab_size, max_seq_len)
    return {"x": [design(N, max(1, round(x * math.sqrt(N))), r_at, *args) for x in x_grid],
            "r": [design(N, max(1, d_at), float(r), *args) for r in r_grid]}  # fmt: skip


# ----------------------------------------------------------------------------- toy task
@dataclass(frozen=True)
class LagTask:
    """A language whose next token needs many positions (attention) and pair tables (MLP).

    x_t ~ softmax(z_t) over V tokens, with logits summed over lagged terms that fit in the past:
        z_t = sum_{l=1..unary} v u^(l-1) U_l[x_{t-l}]
            + sum_{l=1..pairs} w p^(l-1) P_l[x_{t-l}, x_{t-l-1}],
    where U_l (V x V) and P_l (V x V x V) are standard-normal tables drawn from table_seed and
    (v, u, w, p) = (unary_weight, unary_decay, pair_weight, pair_decay). Every attended lag
    lowers the loss (attention capacity pays) and the pair tables must be memorised (MLP
    capacity pays), so neither side saturates at toy sizes. x_0 is uniform.
    """

    V: int = 8
    T: int = 16
    unary: int = 6
    unary_weight: float = 1.5
    unary_decay: float = 0.85
    pairs: int = 3
    pair_weight: float = 1.5
    pair_decay: float = 0.85
    table_seed: int = 0

    def __post_init__(self) -> None:
        validate.integer("V", self.V, minimum=2)
        validate.integer("unary", self.unary, minimum=0)
        validate.integer("pairs", self.pairs, minimum=0)
        validate.integer("T", self.T, minimum=max(self.unary, self.pairs + 1) + 1)
        for name in ("unary_weight", "unary_decay", "pair_weight", "pair_decay"):
            validate.real(name, getattr(self, name), low=0)
        validate.integer("table_seed", self.table_seed, minimum=0)

    def terms(self) -> list[tuple[tuple[int, ...], float, np.ndarray]]:
        """(lags, weight, table) per term; a table has shape (V,) * (len(lags) + 1)."""
        rng = np.random.default_rng(self.table_seed)
        out = [((lag,), self.unary_weight * self.unary_decay ** (lag - 1),
                rng.standard_normal((self.V,) * 2))
               for lag in range(1, self.unary + 1)]  # fmt: skip
        out += [((lag, lag + 1), self.pair_weight * self.pair_decay ** (lag - 1),
                 rng.standard_normal((self.V,) * 3))
                for lag in range(1, self.pairs + 1)]  # fmt: skip
        return out

    def _log_probs(self, x: np.ndarray, t: int, terms) -> np.ndarray:
        """log p(x_t = v | x_<t) for every sequence, (n, V)."""
        z = np.zeros((len(x), self.V))
        for lags, weight, table in terms:
            if t > max(lags) - 1:
                z += weight * table[tuple(x[:, t - lag] for lag in lags)]
        return z - np.logaddexp.reduce(z, axis=1, keepdims=True)

    def sample(self, n: int, seed: int) -> np.ndarray:
        """n independent sequences, int64 (n, T)."""
        n = validate.integer("n", n, minimum=1)
        rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
        terms = self.terms()
        x = np.zeros((n, self.T), dtype=np.int64)
        x[:, 0] = rng.integers(0, self.V, n)
        for t in range(1, self.T):
            cdf = np.exp(self._log_probs(x, t, terms)).cumsum(axis=1)
            x[:, t] = np.minimum((cdf < rng.random((n, 1))).sum(axis=1), self.V - 1)
        return x

    def floor(self, tokens) -> float:
        """Loss of the true process on `tokens` (n, T): mean -log p(x_t | x_<t), t = 1..T-1.

        A model evaluated on the same tokens cannot beat this in expectation (nats/token).
        """
        x = validate.array("tokens", tokens, ndim=2, low=0, high=self.V - 1).astype(np.int64)
        if x.shape[1] != self.T:
            raise ValueError(f"tokens must have T={self.T} columns, got shape {x.shape}")
        terms = self.terms()
        nll = [-self._log_probs(x, t, terms)[np.arange(len(x)), x[:, t]] for t in range(1, self.T)]
        return float(np.mean(nll))


# ----------------------------------------------------------------------------- training runs
def final_losses(runs: list, train_tokens: np.ndarray, val_tokens: np.ndarray) -> list[float]:
    """Final validation loss (nats/token) of `lib.train.train(cfg, tcfg, ...)` per (cfg, tcfg).

    Runs one after another in this process: a batch of runs is one job of `lib.runs.run_jobs`,
    so a worker pays its imports and receives the tokens once per batch. A run whose loss
    became non-finite returns nan (the chapter's divergence rule decides what that means).
    """
    from lib.train import TrainConfig, train

    if not isinstance(runs, list | tuple) or not runs:
        raise ValueError("runs must be a non-empty list of (LMConfig, TrainConfig) pairs")
    out = []
    for cfg, tcfg in runs:
        if not isinstance(tcfg, TrainConfig):
            raise TypeError(f"each run must be (LMConfig, TrainConfig), got {tcfg!r:.60}")
        loss = float(train(_config(cfg), tcfg, train_tokens, val_tokens).eval_loss[-1])
        out.append(loss if math.isfinite(loss) else math.nan)
    return out


def train_losses(
    pairs: list, train_kwargs: dict, train_tokens, val_tokens, chunk: int = 5, desc: str = ""
) -> dict:
    """{(cfg, seed): final loss} for (LMConfig, seed) pairs, trained through `run_jobs`.

    A job trains up to `chunk` seeds of one shape one after another (`final_losses`), so a
    worker receives the tokens once per job; TrainConfig(**train_kwargs, seed=seed) per run.
    """
    from lib.runs import run_jobs
    from lib.train import TrainConfig

    chunk = validate.integer("chunk", chunk, minimum=1)
    if not isinstance(train_kwargs, dict):
        raise TypeError(f"train_kwargs must be a dict of TrainConfig fields, got {train_kwargs!r}")
    by_shape: dict[LMConfig, list[int]] = {}
    for cfg, seed in pairs:
        by_shape.setdefault(_config(cfg), []).append(validate.integer("seed", seed, minimum=0))
    batches = [
        (c, ss[i : i + chunk]) for c, ss in by_shape.items() for i in range(0, len(ss), chunk)
    ]
    jobs = [([(c, TrainConfig(**train_kwargs, seed=s)) for s in ss], train_tokens, val_tokens)
            for c, ss in batches]  # fmt: skip
    out = run_jobs(final_losses, jobs, desc=desc or None)
    return {
        (c, s): L
        for (c, ss), Ls in zip(batches, out, strict=True)
        for s, L in zip(ss, Ls, strict=True)
    }


def is_diverged(L, V: int) -> np.ndarray:
    """Divergence rule: a final loss that is non-finite or no better than uniform (>= ln V).

    Such a run learned nothing of the task. L: losses in nats/token (any shape); returns a
    boolean array of the same shape.
    """
    V = validate.integer("V", V, minimum=2)
    if isinstance(L, str | bytes):
        raise TypeError(f"L must be an array of losses, got a string {L!r:.60}")
    L = np.asarray(L, dtype=float)
    return ~np.isfinite(L) | (L >= math.log(V))


# ----------------------------------------------------------------------------- fits
def fit_u_shape(z, L) -> UFactor:
    """Least-squares fit of L = c0 + c1 ln z + c2 / z along one sweep (linear in c; >= 3 points).

    z: (n,) shape knob (x = d/sqrt(N) or r); L: (n,) loss in nats/token. The law's factor
    (Bian et al. 2025, Eq. 3) at fixed N; an interior minimum needs c1 > 0 and c2 > 0.
    """
    z = validate.array("z", z, positive=True, min_size=3)
    L = validate.array("L", L, positive=True, min_size=3)
    validate.same_length(z=z, L=L)
    X = np.column_stack([np.ones_like(z), np.log(z), 1 / z])
    c, *_ = np.linalg.lstsq(X, L, rcond=None)
    return UFactor(*(float(v) for v in c))


def argmin_numeric(factor: UFactor, lo: float = 1e-4, hi: float = 1e3) -> float:
    """argmin of factor(z) on [lo, hi] by bounded scalar search in ln z (checks z* = c2/c1)."""
    if not isinstance(factor, UFactor):
        raise TypeError(f"factor must be a UFactor, e.g. BIAN2025.a, got {factor!r:.60}")
    lo = validate.real("lo", lo, low=0, low_open=True)
    hi = validate.real("hi", hi, low=0, low_open=True)
    if lo >= hi:
        raise ValueError(f"lo={lo} must be < hi={hi}")
    res = optimize.minimize_scalar(lambda u: float(factor(math.exp(u))),
                                   bounds=(math.log(lo), math.log(hi)), method="bounded",
                                   options={"xatol": 1e-10})  # fmt: skip
    return math.exp(res.x)


def predict_loss(law: PublishedLaw, x, r, L_opt) -> np.ndarray:
    """Eq. 3 of Bian et al. 2025: L = (a0 + a1 ln x + a2/x)(b0 + b1 ln r + b2/r) L_opt."""
    if not isinstance(law, PublishedLaw):
        raise TypeError(f"law must be a PublishedLaw, e.g. BIAN2025, got {law!r:.60}")
    x = validate.array("x", np.atleast_1d(x), positive=True)
    r = validate.array("r", np.atleast_1d(r), positive=True)
    L_opt = validate.array("L_opt", np.atleast_1d(L_opt), positive=True)
    return law.a(x) * law.b(r) * L_opt


def fit_conditional_law(x, r, L, L_opt) -> PublishedLaw:
    """Fit Eq. 3 (multiplicative) by Levenberg-Marquardt, with b0 fixed to 1.

    The two factors are identifiable only up to a common scale (a -> c a, b -> b / c), so
    b0 = 1 pins it; the optima a2/a1 and b2/b1 do not depend on that choice. Inputs: (n,)
    arrays (n >= 5) of x = d/sqrt(N), r = N_mlp/N_attn, the loss L and the reference L_opt.
    """
    x = validate.array("x", x, positive=True, min_size=5)
    r = validate.array("r", r, positive=True, min_size=5)
    L = validate.array("L", L, positive=True, min_size=5)
    L_opt = validate.array("L_opt", L_opt, positive=True, min_size=5)
    validate.same_length(x=x, r=r, L=L, L_opt=L_opt)

    def residual(theta: np.ndarray) -> np.ndarray:
        a0, a1, a2, b1, b2 = theta
        return (a0 + a1 * np.log(x) + a2 / x) * (1 + b1 * np.log(r) + b2 / r) - L / L_opt

    res = optimize.least_squares(residual, x0=[1.0, 0.0, 0.0, 0.0, 0.0], method="lm")
    a0, a1, a2, b1, b2 = (float(v) for v in res.x)
    return PublishedLaw(UFactor(a0, a1, a2), UFactor(1.0, b1, b2))


def fit_across_sizes(x, r, N, L) -> PublishedLaw:
    """Fit Eq. 3 on runs of several sizes, with L_opt(N) = the lowest loss seen at each size.

    The paper takes L_opt below 1B as the best variant of each size (Sec. 4). x, r, N, L: (n,)
    per run, N the nominal size (runs of one size share L_opt; realised sizes differ a little);
    runs with a non-finite L must be dropped by the caller (the divergence rule).
    """
    N = validate.array("N", N, positive=True, min_size=5)
    L = validate.array("L", L, positive=True, min_size=5)
    validate.same_length(N=N, L=L)
    L_opt = np.array([L[N == n].min() for n in N])
    return fit_conditional_law(x, r, L, L_opt)


def noise_ceiling(L) -> tuple[np.ndarray, np.ndarray]:
    """What one replicate's measured ranking scores against another's: the noise ceiling.

    L: (n_shapes >= 3, R >= 2) losses. Per replicate k, the mean over j != k of
    `rank_scores(L[:, j], L[:, k])`: (Spearman (R,), regret (R,) in nats). A law fitted on runs
    as noisy as these cannot be expected to score more against a single run.
    """
    L = validate.array("L", L, ndim=2)
    if L.shape[0] < 3 or L.shape[1] < 2:
        raise ValueError(f"L must be (n_shapes >= 3, replicates >= 2), got {L.shape}")
    R = L.shape[1]
    pairs = [rank_scores(L[:, j], L[:, [k]]) for k in range(R) for j in range(R) if j != k]
    rho = np.array([p[0][0] for p in pairs]).reshape(R, R - 1).mean(axis=1)
    regret = np.array([p[1][0] for p in pairs]).reshape(R, R - 1).mean(axis=1)
    return rho, regret


def rank_scores(predicted, L) -> tuple[np.ndarray, np.ndarray]:
    """(Spearman, regret) of a prediction against each replicate of measured losses.

    predicted: (n,) for every replicate, or (n, R) one column per replicate; L: (n, R) losses
    in nats. Per replicate k: Spearman(predicted[:, k], L[:, k]) and the regret of the shape the
    prediction chooses, L[argmin predicted[:, k], k] - min L[:, k] (nats). A constant prediction
    (a law without shape terms) ranks nothing: Spearman 0 and the regret of a random pick,
    mean L[:, k] - min L[:, k], the expectations of breaking its ties at random.
    """
    L = validate.array("L", L, ndim=2, min_size=3)
    p = validate.array("predicted", predicted, ndim=None)
    p = np.repeat(p[:, None], L.shape[1], axis=1) if p.ndim == 1 else p
    if p.shape != L.shape or L.shape[0] < 3:
        raise ValueError(f"predicted must be (n,) or (n, R) with L (n >= 3, R) = {L.shape}, "
                         f"got {np.shape(predicted)}")  # fmt: skip
    rho, regret = np.zeros(L.shape[1]), np.zeros(L.shape[1])
    for k in range(L.shape[1]):
        if np.ptp(p[:, k]) > 0:
            rho[k] = stats.spearmanr(p[:, k], L[:, k]).statistic
            regret[k] = L[np.argmin(p[:, k]), k] - L[:, k].min()
        else:
            regret[k] = L[:, k].mean() - L[:, k].min()
    return rho, regret


def bounded_optimum(factor: UFactor, lo: float, hi: float) -> float:
    """argmin of factor(z) on [lo, hi]: z* = c2/c1 clipped to it when the factor has an interior
    minimum (c1, c2 > 0), else the better end, so an optimum at an edge reads as that edge."""
    if not isinstance(factor, UFactor):
        raise TypeError(f"factor must be a UFactor, e.g. fit_u_shape(z, L), got {factor!r:.60}")
    lo = validate.real("lo", lo, low=0, low_open=True)
    hi = validate.real("hi", hi, low=lo, low_open=True)
    if math.isfinite(factor.z_star):
        return min(max(factor.z_star, lo), hi)
    return lo if float(factor(lo)) <= float(factor(hi)) else hi


# ----------------------------------------------------------------------------- search
def candidate_shapes(
    N: int,
    ds,
    rs,
    n_layers: int,
    d_head: int,
    x_range: tuple[float, float],
    r_range: tuple[float, float],
    n_tol: float = 0.05,
    vocab_size: int = 8,
    max_seq_len: int = 16,
) -> list[LMConfig]:
    """Distinct MHA shapes `design(N, d, r, ...)` over the grid ds x rs that stay in range.

    Keeps a shape only if its realised x = d/sqrt(N) lies in x_range, its realised r in r_range
    (both inclusive: the ranges the law was fitted on, so the search never extrapolates) and its
    realised N within a fraction n_tol of N. Returns the configs in grid order, duplicates
    (head rounding maps nearby requests to one shape) removed.
    """
    ds = validate.array("ds", ds, positive=True)
    rs = validate.array("rs", rs, positive=True)
    for name, pair in (("x_range", x_range), ("r_range", r_range)):
        lo_hi = validate.array(name, pair, positive=True)
        if lo_hi.shape != (2,) or lo_hi[0] > lo_hi[1]:
            raise ValueError(f"{name} must be (lo, hi) with 0 < lo <= hi, got {pair!r}")
    n_tol = validate.real("n_tol", n_tol, low=0, high=1, high_open=True)
    shapes: dict[LMConfig, None] = {}
    for d in ds:
        if d != int(d):
            raise ValueError(f"ds must hold whole hidden sizes, got {d}")
        for r in rs:
            cfg = design(N, int(d), float(r), n_layers, d_head, 1, vocab_size, max_seq_len)
            x, r_real, n = shape_ratios(cfg)
            if (x_range[0] <= x <= x_range[1] and r_range[0] <= r_real <= r_range[1]
                    and abs(n / N - 1) <= n_tol):  # fmt: skip
                shapes[cfg] = None
    return list(shapes)


def search_architecture(L_pred, throughput, L_target: float, rel_tol: float = 0.0) -> int:
    """Eq. 4 / Alg. 1 of Bian et al. 2025: argmax throughput subject to L_pred <= L_target.

    L_pred, throughput: (n,) per candidate. Feasible candidates whose throughput is within a
    fraction rel_tol of the fastest count as tied (measurement noise), and the tie goes to the
    lowest L_pred: the Pareto point. Returns the index of the pick, or -1 if none is feasible.
    Throughput is measured, not modelled, as in the paper.
    """
    L_pred = validate.array("L_pred", L_pred)
    speed = validate.array("throughput", throughput, positive=True)
    validate.same_length(L_pred=L_pred, throughput=speed)
    L_target = validate.real("L_target", L_target)
    rel_tol = validate.real("rel_tol", rel_tol, low=0, high=1, high_open=True)
    feasible = np.flatnonzero(L_pred <= L_target)
    if not len(feasible):
        return -1
    tied = feasible[speed[feasible] >= (1 - rel_tol) * speed[feasible].max()]
    return int(tied[np.argmin(L_pred[tied])])


# ----------------------------------------------------------------------------- released runs
MORPH_CSV = "openlm-morph/openlm_morph_runs.csv"  # in the data folder (lib.data)


def load_openlm_morph(path=None) -> pd.DataFrame:
    """The released depth-width runs (default: data/openlm-morph) with the paper's quantities.

    N: non-embedding parameters, params - 2 V d (untied input and output embeddings), as Bian
    et al. 2025 count them; D: training tokens; x = d / sqrt(N); size: the nominal size of the
    variant's group in parameters with embeddings, which that study held fixed.
    """
    path = data_file(MORPH_CSV) if path is None else Path(path)
    runs = pd.read_csv(path)
    missing = {"params", "vocab_size", "d_model", "tokens", "size_group", "loss"} - set(runs)
    if missing:
        raise ValueError(f"{path} lacks the columns {sorted(missing)}; pass openlm_morph_runs.csv")
    unit = {"M": 1e6, "B": 1e9}
    runs["N"] = (runs.params - 2 * runs.vocab_size * runs.d_model).astype(float)
    runs["D"] = runs.tokens.astype(float)
    runs["x"] = runs.d_model / np.sqrt(runs.N)
    runs["size"] = [float(g[:-1]) * unit[g[-1]] for g in runs.size_group]
    return runs


def _chinchilla_terms(theta: np.ndarray, log_N: np.ndarray, log_D: np.ndarray) -> np.ndarray:
    """(3, n) logs of the three terms: a - alpha ln N, b - beta ln D, e."""
    a, b, e, alpha, beta = theta
    return np.array([a - alpha * log_N, b - beta * log_D, np.full_like(log_N, e)])


def _chinchilla_log(theta: np.ndarray, log_N: np.ndarray, log_D: np.ndarray) -> np.ndarray:
    """log L = LSE(a - alpha ln N, b - beta ln D, e), (n,)."""
    return special.logsumexp(_chinchilla_terms(theta, log_N, log_D), axis=0)


def _chinchilla_jac(theta: np.ndarray, log_N: np.ndarray, log_D: np.ndarray) -> np.ndarray:
    """d log L / d (a, b, e, alpha, beta), (n, 5): the terms' softmax weights w times 1 or -ln."""
    w = special.softmax(_chinchilla_terms(theta, log_N, log_D), axis=0)
    return np.column_stack([w[0], w[1], w[2], -w[0] * log_N, -w[1] * log_D])


def fit_chinchilla_lsq(N, D, L, start: ChinchillaFit | None = None) -> ChinchillaFit:
    """L = E + A/N^alpha + B/D^beta by least squares on log L, from 8 starts or from `start`.

    The law and log-space form of `lib.fit.fit_chinchilla` (log L = LSE(a - alpha ln N,
    b - beta ln D, e)), fitted by scipy's trust-region least squares with the analytic
    Jacobian, within bounds (e in [-5, 3], alpha and beta in [0, 2]): milliseconds where that
    Huber grid takes minutes, which a bootstrap of hundreds of refits needs.
    N, D, L: (n >= 5,) positive.
    """
    N, D, L = (validate.array(k, v, positive=True, min_size=5)
               for k, v in (("N", N), ("D", D), ("L", L)))  # fmt: skip
    validate.same_length(N=N, D=D, L=L)
    logs = np.log(N), np.log(D)
    if start is None:
        starts = [np.array([a, b, e, 0.3, 0.3]) for a in (5.0, 15.0) for b in (5.0, 15.0)
                  for e in (0.0, 1.0)]  # fmt: skip
    elif isinstance(start, ChinchillaFit):
        starts = [np.array([math.log(start.A), math.log(start.B), max(math.log(start.E), -5.0)
                            if start.E > 0 else -5.0, start.alpha, start.beta])]  # fmt: skip
    else:
        raise TypeError(f"start must be a ChinchillaFit or None, got {start!r:.60}")
    bounds = ([-np.inf, -np.inf, -5.0, 0.0, 0.0], [np.inf, np.inf, 3.0, 2.0, 2.0])
    fits = [optimize.least_squares(lambda t: _chinchilla_log(t, *logs) - np.log(L),
                                   np.clip(s, *bounds), lambda t: _chinchilla_jac(t, *logs),
                                   bounds=bounds, x_scale="jac")
            for s in starts]  # fmt: skip
    a, b, e, alpha, beta = min(fits, key=lambda f: f.cost).x
    return ChinchillaFit(float(math.exp(e)), float(math.exp(a)), float(math.exp(b)), float(alpha),
                         float(beta), float(2 * min(f.cost for f in fits)))  # fmt: skip


@dataclass(frozen=True)
class ShapeLaw:
    """Eq. 3's hidden-size part on a Chinchilla reference: L = F(x) (E + A/N^alpha + B/D^beta).

    F(x) = a0 + a1 ln x + a2 / x with x = d / sqrt(N) (Bian et al. 2025, Eq. 3, first factor).
    """

    chinchilla: ChinchillaFit
    factor: UFactor

    def predict(self, N, D, x) -> np.ndarray:
        """Loss (nats/token) at non-embedding parameters N, tokens D and x = d / sqrt(N)."""
        return self.factor(x) * self.chinchilla.predict(N, D)


def fit_shape_law(N, D, x, L, reference: ChinchillaFit | None = None) -> ShapeLaw:
    """Fit `ShapeLaw` in two stages, as Bian et al. calibrate against L_opt(N, D) (Sec. 4).

    The reference first, `fit_chinchilla_lsq` on N, D and L (or `reference` as given: it does
    not depend on x), then F(x) = a0 + a1 ln x + a2 / x on L / reference (`fit_u_shape`).
    N, D, x, L: (n >= 5,) per run.
    """
    N, D, x, L = (validate.array(k, v, positive=True, min_size=5)
                  for k, v in (("N", N), ("D", D), ("x", x), ("L", L)))  # fmt: skip
    validate.same_length(N=N, D=D, x=x, L=L)
    if reference is None:
        reference = fit_chinchilla_lsq(N, D, L)
    elif not isinstance(reference, ChinchillaFit):
        raise TypeError(f"reference must be a ChinchillaFit or None, got {reference!r:.60}")
    return ShapeLaw(reference, fit_u_shape(x, L / reference.predict(N, D)))


def bootstrap_optimum(law: ShapeLaw, N, D, x, L, lo: float, hi: float, n_bootstrap: int,
                      seed: int) -> np.ndarray:  # fmt: skip
    """ln x* of `fit_shape_law` refitted on n_bootstrap resamples of the runs (with replacement).

    law: the fit to all runs (N, D, x, L: (n,) each); each resample refits the reference
    starting from law's, then the factor. x* is the `bounded_optimum` of a refitted factor on
    [lo, hi]. Returns (n_bootstrap,) values of ln x*, whose percentiles give an interval.
    """
    if not isinstance(law, ShapeLaw):
        raise TypeError(f"law must be a ShapeLaw from fit_shape_law, got {law!r:.60}")
    N, D, x, L = (validate.array(k, v, positive=True, min_size=5)
                  for k, v in (("N", N), ("D", D), ("x", x), ("L", L)))  # fmt: skip
    validate.same_length(N=N, D=D, x=x, L=L)
    n_bootstrap = validate.integer("n_bootstrap", n_bootstrap, minimum=1)
    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    out = np.empty(n_bootstrap)
    for i in range(n_bootstrap):
        idx = rng.integers(0, len(L), len(L))
        ref = fit_chinchilla_lsq(N[idx], D[idx], L[idx], start=law.chinchilla)
        refit = fit_shape_law(N[idx], D[idx], x[idx], L[idx], reference=ref)
        out[i] = math.log(bounded_optimum(refit.factor, lo, hi))
    return out


def carry_over(source_x, source_L, target_x) -> np.ndarray:
    """The ranking observed at a smaller size, carried to new shapes by their x = d / sqrt(N).

    Returns source_L / min(source_L) interpolated linearly in ln x at target_x (constant beyond
    the source's ends): the law-free rival that says "the shapes rank as they did before".
    """
    sx = validate.array("source_x", source_x, positive=True, min_size=2)
    sL = validate.array("source_L", source_L, positive=True, min_size=2)
    validate.same_length(source_x=sx, source_L=sL)
    tx = validate.array("target_x", target_x, positive=True)
    order = np.argsort(sx)
    return np.interp(np.log(tx), np.log(sx[order]), sL[order] / sL.min())


# ----------------------------------------------------------------------------- decoding
@dataclass(frozen=True)
class DecodeCost:
    """Cost model of decoding one token per sequence at context T (batch B, fp32 by default).

    flops = forward FLOPs/token of `lib.lm` (2 x matmul weights + 4 n_layers T n_h d_h);
    weight_bytes = all weights read once per step, shared by the batch (divided by B);
    kv_bytes = 2 n_layers n_kv d_h T bytes_per_value (keys and values read for this sequence).
    """

    flops: float
    weight_bytes: float
    kv_bytes: float

    @property
    def bytes(self) -> float:
        """Bytes moved per decoded token: weight_bytes + kv_bytes."""
        return self.weight_bytes + self.kv_bytes


def decode_cost(
    cfg: LMConfig, batch_size: int, context: int, bytes_per_value: int = 4
) -> DecodeCost:
    """The per-token `DecodeCost` of a KV-cache decode step of `cfg` (see DecodeCost)."""
    cfg = _config(cfg)
    batch_size = validate.integer("batch_size", batch_size, minimum=1)
    context = validate.integer("context", context, minimum=1, maximum=cfg.max_seq_len)
    bytes_per_value = validate.integer("bytes_per_value", bytes_per_value, minimum=1)
    pc = count_params(cfg)
    weights = (pc.non_embedding + cfg.vocab_size * cfg.d_model) * bytes_per_value
    kv = 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * context * bytes_per_value
    return DecodeCost(flops_per_token(cfg, context), weights / batch_size, float(kv))


@dataclass(frozen=True)
class DecodeTiming:
    """Measured decode throughput of several variants: arrays of shape (n_variants, n_rounds)."""

    tokens_per_cpu_s: np.ndarray  # decoded tokens (batch x steps) per CPU-second of this process
    tokens_per_wall_s: np.ndarray  # the same per wall-clock second
    kv_bytes_measured: np.ndarray  # (n_variants,) bytes of the real cache tensors, per sequence


def _decode_once(model, cache, context: int, n_steps: int, tok) -> tuple[float, float]:
    """Decode n_steps tokens after `context` cached positions; returns (cpu_s, wall_s)."""
    import torch

    cache.pos = context
    c0, w0 = time.process_time(), time.perf_counter()
    with torch.inference_mode():
        for _ in range(n_steps):
            logits, _ = model(tok, cache)
            tok = logits[:, -1].argmax(dim=-1, keepdim=True)
    return time.process_time() - c0, time.perf_counter() - w0


def measure_decode(
    cfgs: list[LMConfig], batch_size: int, context: int, n_steps: int, n_rounds: int, seed: int
) -> DecodeTiming:
    """Time KV-cache decoding of random-weight models in interleaved rounds, in this process.

    Every round visits each variant once, in an order shuffled from `seed`, and decodes n_steps
    tokens per visit: a slow spell of a shared machine hits all variants of a round alike, and
    no variant always runs first or last. Nothing else of ours runs meanwhile (no workers), and
    the CPU time counted is this process's only. The cache is filled with random keys and
    values instead of a prefill (its contents do not change the cost of a step). One warm-up
    step per variant is not timed.
    """
    import torch

    from lib.lm import KVCache
    from lib.train import build_model

    if not isinstance(cfgs, list | tuple) or not cfgs:
        raise ValueError("cfgs must be a non-empty list of LMConfig")
    batch_size = validate.integer("batch_size", batch_size, minimum=1)
    context = validate.integer("context", context, minimum=1)
    n_steps = validate.integer("n_steps", n_steps, minimum=1)
    n_rounds = validate.integer("n_rounds", n_rounds, minimum=1)
    seed = validate.integer("seed", seed, minimum=0)
    if any(_config(c).max_seq_len < context + n_steps for c in cfgs):
        raise ValueError(f"every cfg needs max_seq_len >= context + n_steps = {context + n_steps}")
    gen = torch.Generator().manual_seed(seed)
    models, caches, kv = [], [], []
    for cfg in cfgs:
        models.append(build_model(cfg, seed).eval())
        cache = KVCache(cfg, batch_size, context + n_steps)
        cache.k.normal_(generator=gen)
        cache.v.normal_(generator=gen)
        cache.pos = context
        kv.append(cache.nbytes() / batch_size)  # filled positions, per sequence
        caches.append(cache)
    tok = torch.randint(cfgs[0].vocab_size, (batch_size, 1), generator=gen)
    for model, cache in zip(models, caches, strict=True):
        _decode_once(model, cache, context, 1, tok % model.cfg.vocab_size)  # warm-up
    order = np.random.default_rng(seed)
    cpu = np.zeros((len(cfgs), n_rounds))
    wall = np.zeros_like(cpu)
    for k in range(n_rounds):
        for i in order.permutation(len(cfgs)):
            cpu[i, k], wall[i, k] = _decode_once(models[i], caches[i], context, n_steps,
                                                 tok % models[i].cfg.vocab_size)  # fmt: skip
    n_tok = batch_size * n_steps
    return DecodeTiming(n_tok / cpu, n_tok / wall, np.array(kv))


def spearman_by_round(knob, samples) -> np.ndarray:
    """Spearman(knob, samples[:, k]) for each round k: knob (n,), samples (n, rounds)."""
    k = validate.array("knob", knob, min_size=3)
    s = validate.array("samples", samples, ndim=2)
    if s.shape[0] != len(k):
        raise ValueError(f"samples must have one row per knob value ({len(k)}), got {s.shape}")
    return np.array([stats.spearmanr(k, column).statistic for column in s.T])
