"""Architecture-conditioned scaling law and decode cost of Bian et al. (2025), chapter 11.

At fixed non-embedding parameters N = N_attn + N_mlp, the shape of a LLaMA-style decoder is
described by x = d / sqrt(N) (hidden size, normalised) and r = N_mlp / N_attn. Bian, Yu,
Venkataraman and Park (ICLR 2026, Eq. 3) calibrate the Chinchilla-optimal loss with two
separable U-shaped factors,

    L(x, r | N, D) = (a0 + a1 ln x + a2 / x) * (b0 + b1 ln r + b2 / r) * L_opt(N, D),

whose minima sit at x* = a2 / a1 and r* = b2 / b1. This module holds: the published
coefficients; the toy task (a multi-lag table lookup with an exact entropy floor); the shape
solver that turns (N, d, r, GQA) into an `LMConfig` of `lib.lm`; the U-shape and conditional-law
fits; the constrained search (their Eq. 4); and a decode cost model next to a measured KV-cache
decode throughput (tokens per CPU-second and per wall-second).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from lib.lm import LMConfig, count_params, flops_per_token


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
        z = np.asarray(z, dtype=float)
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


def _check_positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{name}={value!r} must be a positive number")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name}={value!r} must be finite and > 0")


def table1_config(row: Table1Row) -> LMConfig:
    """An `LMConfig` with a Table 1 row's shape (vocabulary and length are irrelevant to N)."""
    if not isinstance(row, Table1Row):
        raise ValueError(f"row={row!r} must be a Table1Row, e.g. BIAN2025_TABLE1[0]")
    return LMConfig(
        vocab_size=1,
        d_model=row.d,
        n_layers=row.n_layers,
        n_heads=row.n_heads,
        n_kv_heads=row.n_kv_heads,
        d_ff=row.f,
        max_seq_len=1,
        d_head=row.d_head,
    )


def shape_ratios(cfg: LMConfig) -> tuple[float, float, int]:
    """(x, r, N): x = d / sqrt(N), r = N_mlp / N_attn, N = N_attn + N_mlp (norms left out)."""
    if not isinstance(cfg, LMConfig):
        raise ValueError(f"cfg={cfg!r} must be an LMConfig")
    pc = count_params(cfg)
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
    max_seq_len: int = 24,
) -> LMConfig:
    """Dense decoder with about N = N_attn + N_mlp parameters, hidden size d and ratio r.

    Solves N_attn = N / (1 + r) = n_layers * 2 d d_head (n_h + n_h / gqa) for n_h (rounded to a
    multiple of gqa, at least gqa) and N_mlp = N r / (1 + r) = n_layers * 3 d f for f. The
    realised x and r differ from the requested ones by head granularity: read them back with
    `shape_ratios`.
    """
    for name, v in (
        ("N", N),
        ("d", d),
        ("r", r),
        ("n_layers", n_layers),
        ("d_head", d_head),
        ("gqa", gqa),
    ):
        _check_positive(name, v)
    per_head = n_layers * 2 * d * d_head * (1 + 1 / gqa)  # attention params per query head
    n_h = max(gqa, gqa * round(N / (1 + r) / per_head / gqa))
    f = max(1, round(N * r / (1 + r) / (n_layers * 3 * d)))
    return LMConfig(
        vocab_size=vocab_size,
        d_model=d,
        n_layers=n_layers,
        n_heads=n_h,
        n_kv_heads=n_h // gqa,
        d_ff=f,
        max_seq_len=max_seq_len,
        d_head=d_head,
    )


# ----------------------------------------------------------------------------- toy task


@dataclass(frozen=True)
class LookupTask:
    """x_t = TABLE[x_{t-l1}, ..., x_{t-lk}] with probability p_rule, else uniform over V.

    Tokens before max(lags) are uniform. TABLE is a random V^k -> V map drawn from table_seed.
    Predicting it needs attention to several positions and an MLP that stores V^k entries.
    """

    V: int = 8
    T: int = 24
    lags: tuple[int, ...] = (1, 3, 5)
    p_rule: float = 0.9
    table_seed: int = 0

    def __post_init__(self) -> None:
        if self.V < 2 or self.T <= max(self.lags, default=0) or min(self.lags, default=0) < 1:
            raise ValueError(
                f"need V >= 2, lags >= 1 and T > max(lags); got V={self.V}, "
                f"T={self.T}, lags={self.lags}"
            )
        if not 0 <= self.p_rule <= 1:
            raise ValueError(f"p_rule={self.p_rule!r} must be in [0, 1]")

    def table(self) -> np.ndarray:
        """The lookup table, int64 of shape (V,) * len(lags)."""
        rng = np.random.default_rng(self.table_seed)
        return rng.integers(0, self.V, size=(self.V,) * len(self.lags))

    def sample(self, n: int, seed: int) -> np.ndarray:
        """n independent sequences, int64 (n, T)."""
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n={n!r} must be a positive integer")
        rng = np.random.default_rng(seed)
        table = self.table()
        x = rng.integers(0, self.V, size=(n, self.T))
        for t in range(max(self.lags), self.T):
            rule = table[tuple(x[:, t - lag] for lag in self.lags)]
            x[:, t] = np.where(rng.random(n) < self.p_rule, rule, x[:, t])
        return x

    def entropy_floor(self) -> float:
        """Exact mean next-token entropy (nats) over predicted positions 1..T-1.

        Positions t < max(lags) are uniform (ln V); later ones have
        H = -q ln q - (V-1) e ln e with e = (1 - p_rule)/V and q = p_rule + e.
        """
        e = (1 - self.p_rule) / self.V
        q = self.p_rule + e
        h_rule = -sum(p * math.log(p) for p in (q,) + (e,) * (self.V - 1) if p > 0)
        n_free = max(self.lags) - 1  # positions 1..max(lags)-1 are unpredictable
        return (n_free * math.log(self.V) + (self.T - 1 - n_free) * h_rule) / (self.T - 1)


# ----------------------------------------------------------------------------- fits


def _as_positive_array(name: str, values, n_min: int = 1) -> np.ndarray:
    a = np.asarray(values, dtype=float)
    if a.ndim != 1 or len(a) < n_min:
        raise ValueError(f"{name} must be a 1-d array with >= {n_min} values, got shape {a.shape}")
    if not np.all(np.isfinite(a)) or a.min() <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {a}")
    return a


def fit_u_shape(z, L) -> UFactor:
    """Least-squares fit of L = c0 + c1 ln z + c2 / z along one sweep (linear in c; >= 3 points).

    z: (n,) shape knob (x = d/sqrt(N) or r); L: (n,) loss in nats/token. The law's factor
    (Bian et al. 2025, Eq. 3) at fixed N; an interior minimum needs c1 > 0 and c2 > 0.
    """
    z = _as_positive_array("z", z, 3)
    L = _as_positive_array("L", L, 3)
    if len(z) != len(L):
        raise ValueError(f"z and L must have equal length, got {len(z)} and {len(L)}")
    X = np.column_stack([np.ones_like(z), np.log(z), 1 / z])
    c, *_ = np.linalg.lstsq(X, L, rcond=None)
    return UFactor(*(float(v) for v in c))


def argmin_numeric(factor: UFactor, lo: float = 1e-4, hi: float = 1e3) -> float:
    """argmin of factor(z) on [lo, hi] by bounded scalar search in ln z (checks z* = c2/c1)."""
    _check_positive("lo", lo)
    _check_positive("hi", hi)
    if lo >= hi:
        raise ValueError(f"lo={lo} must be < hi={hi}")
    res = optimize.minimize_scalar(
        lambda u: float(factor(math.exp(u))),
        bounds=(math.log(lo), math.log(hi)),
        method="bounded",
        options={"xatol": 1e-10},
    )
    return math.exp(res.x)


def predict_loss(law: PublishedLaw, x, r, L_opt) -> np.ndarray:
    """Eq. 3 of Bian et al. 2025: L = (a0 + a1 ln x + a2/x)(b0 + b1 ln r + b2/r) L_opt."""
    x = _as_positive_array("x", np.atleast_1d(x))
    r = _as_positive_array("r", np.atleast_1d(r))
    L_opt = _as_positive_array("L_opt", np.atleast_1d(L_opt))
    return law.a(x) * law.b(r) * L_opt


def fit_conditional_law(x, r, L, L_opt) -> PublishedLaw:
    """Fit Eq. 3 (multiplicative) by Levenberg-Marquardt, with b0 fixed to 1.

    The two factors are identifiable only up to a common scale (a -> c a, b -> b / c), so
    b0 = 1 pins it; the optima a2/a1 and b2/b1 do not depend on that choice. Inputs: (n,)
    arrays of x = d/sqrt(N), r = N_mlp/N_attn, the loss L and the reference L_opt(N, D).
    """
    x, r = _as_positive_array("x", x, 5), _as_positive_array("r", r, 5)
    L, L_opt = _as_positive_array("L", L, 5), _as_positive_array("L_opt", L_opt, 5)
    if not len(x) == len(r) == len(L) == len(L_opt):
        raise ValueError("x, r, L and L_opt must have equal length")

    def residual(theta: np.ndarray) -> np.ndarray:
        a0, a1, a2, b1, b2 = theta
        fa = a0 + a1 * np.log(x) + a2 / x
        return fa * (1 + b1 * np.log(r) + b2 / r) - L / L_opt

    res = optimize.least_squares(residual, x0=[1.0, 0.0, 0.0, 0.0, 0.0], method="lm")
    a0, a1, a2, b1, b2 = (float(v) for v in res.x)
    return PublishedLaw(UFactor(a0, a1, a2), UFactor(1.0, b1, b2))


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
    max_seq_len: int = 24,
) -> list[LMConfig]:
    """Distinct MHA shapes `design(N, d, r, ...)` over the grid ds x rs that stay in range.

    Keeps a shape only if its realised x = d/sqrt(N) lies in x_range, its realised r in r_range
    (both inclusive: the ranges the law was fitted on, so the search never extrapolates) and its
    realised N within a fraction n_tol of N. Returns the configs in grid order, duplicates
    (head rounding maps nearby requests to one shape) removed.
    """
    for name, rng in (("x_range", x_range), ("r_range", r_range)):
        if len(rng) != 2 or not 0 < rng[0] <= rng[1] < math.inf:
            raise ValueError(f"{name}={rng!r} must be (lo, hi) with 0 < lo <= hi < inf")
    if not 0 <= n_tol < 1:
        raise ValueError(f"n_tol={n_tol!r} must be in [0, 1), e.g. 0.05")
    shapes: dict[LMConfig, None] = {}
    for d in ds:
        for r in rs:
            cfg = design(N, d, r, n_layers, d_head, 1, vocab_size, max_seq_len)
            x, r_real, n = shape_ratios(cfg)
            if (
                x_range[0] <= x <= x_range[1]
                and r_range[0] <= r_real <= r_range[1]
                and abs(n / N - 1) <= n_tol
            ):
                shapes[cfg] = None
    return list(shapes)


def search_architecture(L_pred, throughput, L_target: float, rel_tol: float = 0.0) -> int:
    """Eq. 4 / Alg. 1 of Bian et al. 2025: argmax throughput subject to L_pred <= L_target.

    L_pred, throughput: (n,) per candidate. Feasible candidates whose throughput is within a
    fraction rel_tol of the fastest count as tied (measurement noise), and the tie goes to the
    lowest L_pred: the Pareto point. Returns the index of the pick, or -1 if none is feasible.
    Throughput is measured, not modelled, as in the paper.
    """
    L_pred = np.asarray(L_pred, dtype=float)
    speed = _as_positive_array("throughput", throughput)
    if L_pred.shape != speed.shape or not np.all(np.isfinite(L_pred)):
        raise ValueError(f"L_pred must be finite with shape {speed.shape}, got {L_pred.shape}")
    if not math.isfinite(L_target):
        raise ValueError(f"L_target={L_target!r} must be finite")
    if not 0 <= rel_tol < 1:
        raise ValueError(f"rel_tol={rel_tol!r} must be in [0, 1), e.g. 0.05")
    feasible = np.flatnonzero(L_pred <= L_target)
    if not len(feasible):
        return -1
    tied = feasible[speed[feasible] >= (1 - rel_tol) * speed[feasible].max()]
    return int(tied[np.argmin(L_pred[tied])])


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
    if not isinstance(cfg, LMConfig):
        raise ValueError(f"cfg={cfg!r} must be an LMConfig")
    for name, v in (
        ("batch_size", batch_size),
        ("context", context),
        ("bytes_per_value", bytes_per_value),
    ):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}={v!r} must be a positive integer")
    pc = count_params(cfg)
    weights = (pc.non_embedding + cfg.vocab_size * cfg.d_model) * bytes_per_value
    kv = 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * context * bytes_per_value
    return DecodeCost(flops_per_token(cfg, context), weights / batch_size, float(kv))


@dataclass(frozen=True)
class DecodeTiming:
    """Measured decode throughput of several variants: arrays of shape (n_variants, n_repeats)."""

    tokens_per_cpu_s: np.ndarray  # decoded tokens (batch x steps) per CPU-second of this process
    tokens_per_wall_s: np.ndarray  # the same per wall-clock second
    kv_bytes_measured: np.ndarray  # (n_variants,) bytes of the real cache tensors, per sequence


def _decode_once(
    model, cache, batch_size: int, context: int, n_steps: int, gen
) -> tuple[float, float]:
    """Decode n_steps tokens after a context of `context` positions; returns (cpu_s, wall_s)."""
    import torch

    cache.pos = context
    tok = torch.randint(model.cfg.vocab_size, (batch_size, 1), generator=gen)
    c0, w0 = time.process_time(), time.perf_counter()
    with torch.inference_mode():
        for _ in range(n_steps):
            logits, _ = model(tok, cache)
            tok = logits[:, -1].argmax(dim=-1, keepdim=True)
    return time.process_time() - c0, time.perf_counter() - w0


def measure_decode(
    cfgs: list[LMConfig], batch_size: int, context: int, n_steps: int, n_repeats: int, seed: int = 0
) -> DecodeTiming:
    """Time KV-cache decoding of random-weight models, round-robin over variants and repeats.

    The cache is filled with random keys/values for `context` positions instead of a prefill
    (its contents do not change the cost of a step); each repeat then decodes n_steps tokens.
    Interleaving the variants spreads the load of a shared machine evenly over them. One
    warm-up step per variant is not timed.
    """
    import torch

    from lib.lm import KVCache
    from lib.train import build_model

    for name, v in (
        ("batch_size", batch_size),
        ("context", context),
        ("n_steps", n_steps),
        ("n_repeats", n_repeats),
    ):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}={v!r} must be a positive integer")
    if not cfgs or any(c.max_seq_len < context + n_steps for c in cfgs):
        raise ValueError(
            f"cfgs must be non-empty with max_seq_len >= context + n_steps = {context + n_steps}"
        )
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
        _decode_once(models[-1], cache, batch_size, context, 1, gen)  # warm-up
    cpu = np.zeros((len(cfgs), n_repeats))
    wall = np.zeros_like(cpu)
    for rep in range(n_repeats):
        for i, (model, cache) in enumerate(zip(models, caches, strict=True)):
            cpu[i, rep], wall[i, rep] = _decode_once(
                model, cache, batch_size, context, n_steps, gen
            )
    n_tok = batch_size * n_steps
    return DecodeTiming(n_tok / cpu, n_tok / wall, np.array(kv))


def spearman_over_repeats(knob, samples, n_boot: int = 200, seed: int = 0) -> tuple[float, float]:
    """Spearman(knob, median over repeats of samples) and its spread over repeat resampling.

    knob: (n,) values; samples: (n, reps) measurements. The spread is the standard deviation of
    the Spearman coefficient when each variant's repeats are resampled with replacement.
    """
    from scipy.stats import spearmanr

    k = np.asarray(knob, dtype=float)
    s = np.asarray(samples, dtype=float)
    if k.ndim != 1 or s.ndim != 2 or s.shape[0] != len(k) or len(k) < 3:
        raise ValueError(f"knob must be (n>=3,) and samples (n, reps); got {k.shape}, {s.shape}")
    if not (np.all(np.isfinite(k)) and np.all(np.isfinite(s))):
        raise ValueError("knob and samples must be finite")
    if not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"n_boot={n_boot!r} must be a positive integer")
    rho = float(spearmanr(k, np.median(s, axis=1)).statistic)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, s.shape[1], size=(n_boot,) + s.shape)  # (n_boot, n, reps)
    boots = [
        spearmanr(k, np.median(np.take_along_axis(s, i, axis=1), axis=1)).statistic for i in idx
    ]
    return rho, float(np.std(boots))


# ----------------------------------------------------------------------------- training

_WORKER_DATA: dict = {}


def _init_worker(train_tokens: np.ndarray, val_tokens: np.ndarray) -> None:
    import torch

    torch.set_num_threads(1)  # one thread per process: the processes share the cores
    _WORKER_DATA.update(train=train_tokens, val=val_tokens)


def _final_loss(job: tuple) -> float:
    from lib.train import train

    res = train(job[0], job[1], _WORKER_DATA["train"], _WORKER_DATA["val"])
    return float(res.eval_loss[-1])


def train_final_losses(
    jobs: list[tuple], train_tokens: np.ndarray, val_tokens: np.ndarray, n_workers: int = 2
) -> list[float]:
    """Final validation loss (nats/token) of `lib.train.train(cfg, tcfg, ...)` per (cfg, tcfg).

    Runs in n_workers spawned processes of one thread each (2 cores: about twice as fast as a
    loop); `train` is seeded and deterministic, so the result does not depend on n_workers.
    """
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    if not isinstance(n_workers, int) or n_workers < 1:
        raise ValueError(f"n_workers={n_workers!r} must be a positive integer, e.g. 2")
    if not jobs:
        raise ValueError("jobs must be a non-empty list of (LMConfig, TrainConfig) pairs")
    with ProcessPoolExecutor(
        n_workers,
        mp_context=get_context("spawn"),
        initializer=_init_worker,
        initargs=(np.asarray(train_tokens), np.asarray(val_tokens)),
    ) as ex:
        return list(ex.map(_final_loss, jobs))
