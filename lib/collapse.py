"""Loss-curve collapse (Bergsma et al. 2025): AdamW timescale, normalised curves, detector.

The AdamW timescale as a fraction of training is tau = B / (eta * lambda * D) = 1 / (eta *
lambda * T) with T = D / B steps (Bergsma et al. 2025, Sec. 2; Wang & Aitchison 2024). A
family of sizes trained at a fixed tokens-per-parameter ratio with tau fixed should have
normalised curves ell(t/T) = L(t) / L(T) that fall on one universal curve; this module measures
how far they fall apart (`spread`), predicts L(T) from a prefix by aligning it with the
universal curve, and flags runs that leave it (`detect`).

The toy source is a Markov chain read through windows of S + 1 tokens. Its window
distribution is enumerated exactly (`window_distribution`), so the population loss of a model
is one forward pass (`population_loss`) with no evaluation noise, and the Bayes floor is exact.
Used by chapter 6.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lib.fit import as_array
from lib.synth import MarkovChain

# Learning-rate schedules a Run may use (the shapes of `lib.train.lr_at`, all to zero).
SCHEDULES = ("linear", "constant", "wsd")
# Power Lines (Bergsma et al. 2025b, arXiv:2505.13738) fit of the optimal timescale:
# tau_opt(TPP) = C * TPP^(-exponent).
BERGSMA2025_POWERLINES = {"C": 1.084, "exponent": 0.527}
# Power Lines' optimal batch size grows as B_opt ~ D^0.38 (Bergsma et al. 2025b).
BERGSMA2025_B_EXPONENT = 0.38


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name}={value!r} must be a positive number")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name}={value!r} must be finite and > 0")
    return float(value)


# ----------------------------------------------------------------------------- timescale


def tau_from_weight_decay(eta: float, lam: float, T: float) -> float:
    """AdamW timescale as a fraction of training: tau = 1 / (eta * lam * T) = B / (eta lam D)."""
    return 1.0 / (_positive("eta", eta) * _positive("lam", lam) * _positive("T", T))


def weight_decay_from_tau(eta: float, tau: float, T: float) -> float:
    """The decay lambda that gives timescale tau: lambda = 1 / (eta * tau * T) (T in steps)."""
    return 1.0 / (_positive("eta", eta) * _positive("tau", tau) * _positive("T", T))


def tau_opt_power_lines(TPP: float) -> float:
    """Power Lines' optimal timescale tau_opt = 1.084 * TPP^-0.527 (Bergsma et al. 2025b)."""
    c = BERGSMA2025_POWERLINES
    return c["C"] * _positive("TPP", TPP) ** (-c["exponent"])


def mup_groups(
    model, eta: float, d_base: int, tau: float, T: int, lam: tuple[float, float] | None = None
) -> list[dict]:
    """muP-style AdamW groups for `lib.lm.TransformerLM`, each with timescale tau.

    Embeddings (tied readout) get lr eta; hidden matrices lr eta * d_base / d_model (muP's
    1/width for Adam); norm gains lr eta and no decay. Every decayed group gets lambda = 1 /
    (lr * tau * T), unless lam = (lambda_embedding, lambda_hidden) freezes the decays.
    """
    _positive("eta", eta), _positive("tau", tau), _positive("T", T), _positive("d_base", d_base)
    if lam is not None and (len(lam) != 2 or not all(v >= 0 for v in lam)):
        raise ValueError(f"lam={lam!r} must be None or (lambda_embedding, lambda_hidden) >= 0")
    eta_h = eta * d_base / model.cfg.d_model
    emb, hidden, gains = [], [], []
    for name, p in model.named_parameters():
        (gains if p.dim() < 2 else emb if name.endswith("emb.weight") else hidden).append(p)
    lam_e, lam_h = (
        lam
        if lam is not None
        else (weight_decay_from_tau(eta, tau, T), weight_decay_from_tau(eta_h, tau, T))
    )
    return [
        {"params": emb, "lr": eta, "weight_decay": lam_e, "name": "embedding"},
        {"params": hidden, "lr": eta_h, "weight_decay": lam_h, "name": "hidden"},
        {"params": gains, "lr": eta, "weight_decay": 0.0, "name": "gains"},
    ]


def group_timescales(groups: list[dict], T: int) -> dict[str, float]:
    """Recover tau = 1 / (lr * lambda * T) of every decayed group (name -> tau)."""
    _positive("T", T)
    return {
        g["name"]: tau_from_weight_decay(g["lr"], g["weight_decay"], T)
        for g in groups
        if g["weight_decay"] > 0
    }


# ----------------------------------------------------------------------------- exact source


def window_distribution(chain: MarkovChain, S: int) -> tuple[np.ndarray, np.ndarray]:
    """Every window of S + 1 tokens with P > 0 under the stationary chain, and its probability.

    Returns windows (M, S + 1) int64 and probs (M,) summing to 1. Needs S + 1 >= order.
    P(x_0..x_S) = pi(x_0..x_{k-1}) * prod_t P(x_t | x_{t-k..t-1}).
    """
    if not isinstance(chain, MarkovChain):
        raise ValueError(f"chain={chain!r} must be a lib.synth.MarkovChain")
    k, V = chain.order, chain.vocab_size
    if not isinstance(S, int) or S + 1 < k:
        raise ValueError(f"S={S!r} must be an integer with S + 1 >= order={k}")
    states = np.flatnonzero(chain.stationary > 0)
    windows = np.stack([(states // V ** (k - 1 - i)) % V for i in range(k)], axis=1)
    probs = chain.stationary[states]
    for _ in range(S + 1 - k):
        state = (windows[:, -k:] * V ** np.arange(k - 1, -1, -1)).sum(axis=1)
        p_next = chain.next_probs[state]  # (M, V)
        rows, y = np.nonzero(p_next)
        windows = np.concatenate([windows[rows], y[:, None]], axis=1)
        probs = probs[rows] * p_next[rows, y]
    return windows.astype(np.int64), probs / probs.sum()


def zipf_context_windows(
    V: int, s: float, n_support: int, alpha: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """A "Zipf-context" source: windows (c1, c2, y) and their exact probabilities.

    The V**2 two-token contexts c = (c1, c2) are drawn from a Zipf law p_c ~ rank(c)^-s (ranks
    randomly assigned); y follows P(y | c) = next_probs of `lib.synth.random_chain(V, order=2,
    n_support, alpha)`. Rare contexts are learned late and need capacity, so the loss falls
    as a power law in both model size and data. Returns windows (M, 3) int64 and probs (M,).
    """
    from lib.synth import random_chain

    _positive("s", s)
    chain = random_chain(V, order=2, n_support=n_support, alpha=alpha, seed=seed)
    rank = np.random.default_rng(seed).permutation(V * V) + 1
    p_c = rank.astype(np.float64) ** (-s)
    c, y = np.nonzero(chain.next_probs)  # state c = c1 * V + c2
    windows = np.stack([c // V, c % V, y], axis=1).astype(np.int64)
    probs = p_c[c] * chain.next_probs[c, y]
    return windows, probs / probs.sum()


def bayes_loss(windows: np.ndarray, probs: np.ndarray) -> float:
    """Exact floor of the loss averaged over the S positions: mean_i H(x_{i+1} | x_0..x_i).

    Conditional entropy from the window law: H(x_{i+1} | prefix) = H(x_0..x_{i+1}) - H(x_0..x_i).
    """
    W = np.asarray(windows)
    p = as_array("probs", probs, ndim=1)
    if W.ndim != 2 or W.shape[0] != p.shape[0] or W.shape[1] < 2:
        raise ValueError(f"windows (M, S+1) and probs (M,) disagree: {W.shape}, {p.shape}")

    def joint_entropy(cols: int) -> float:
        _, inv = np.unique(W[:, :cols], axis=0, return_inverse=True)
        q = np.bincount(inv.ravel(), weights=p)
        return float(-(q[q > 0] * np.log(q[q > 0])).sum())

    H = [joint_entropy(c) for c in range(1, W.shape[1] + 1)]
    return float(np.mean(np.diff(H)))


def population_loss(model, windows, probs) -> float:
    """Exact expected next-token loss (nats/token) of `model` over the window law.

    L = sum_w P(w) * mean_i -ln q(w_{i+1} | w_0..w_i); windows (M, S+1) torch int64,
    probs (M,) torch float64. One forward pass, no sampling.
    """
    import torch
    import torch.nn.functional as F

    was_training = model.training
    model.eval()
    with torch.no_grad():
        logits, _ = model(windows[:, :-1])  # (M, S, V)
        nll = F.cross_entropy(logits.transpose(1, 2), windows[:, 1:], reduction="none")
    model.train(was_training)
    return float((nll.mean(dim=1).double() * probs).sum())


# ----------------------------------------------------------------------------- training runs


@dataclass(frozen=True)
class Run:
    """One training run of the toy family: width d, T steps of B windows, peak rate eta.

    tau sets every group's decay (see `mup_groups`) unless lam freezes it. schedule: 'linear'
    (warmup then linear decay to zero), 'constant', or 'wsd' (constant, then linear to zero
    over the last decay_frac of steps). From t/T = fault_at on, a fraction
    fault_frac of the training labels is replaced by uniform random tokens (a data bug).
    """

    d_model: int
    T: int
    B: int
    eta: float
    tau: float
    seed: int = 0
    lam: tuple[float, float] | None = None
    schedule: str = "linear"
    decay_frac: float = 0.2
    warmup_frac: float = 0.02
    fault_at: float | None = None
    fault_frac: float = 0.0
    n_eval: int = 20

    def __post_init__(self) -> None:
        for name in ("d_model", "T", "B", "n_eval"):
            v = getattr(self, name)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name}={v!r} must be a positive integer")
        if self.T < self.n_eval:
            raise ValueError(f"T={self.T} must be >= n_eval={self.n_eval}")
        if self.d_model % 2:
            raise ValueError(f"d_model={self.d_model} must be even (2 attention heads)")
        _positive("eta", self.eta), _positive("tau", self.tau)
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule={self.schedule!r} must be one of {SCHEDULES}")
        if not 0 < self.decay_frac <= 1:
            raise ValueError(f"decay_frac={self.decay_frac!r} must be in (0, 1]")
        if self.fault_at is not None and not 0 < self.fault_at < 1:
            raise ValueError(f"fault_at={self.fault_at!r} must be None or in (0, 1)")
        if not 0 <= self.fault_frac <= 1:
            raise ValueError(f"fault_frac={self.fault_frac!r} must be in [0, 1]")


@dataclass(frozen=True)
class Curve:
    """A run's exact population-loss curve L (n_eval,) at fractions t_hat = t / T (n_eval,)."""

    run: Run
    N: int
    t_hat: np.ndarray
    L: np.ndarray
    taus: dict
    S: int

    @property
    def D(self) -> int:
        """Training tokens D = T * B * S (S predicted tokens per window)."""
        return self.run.T * self.run.B * self.S


def toy_config(d_model: int, vocab_size: int, S: int):
    """One-layer, two-head `LMConfig` of width d_model with a SwiGLU MLP of width 2 d_model."""
    from lib.lm import LMConfig

    return LMConfig(
        vocab_size=vocab_size,
        d_model=d_model,
        n_layers=1,
        n_heads=2,
        n_kv_heads=2,
        d_ff=2 * d_model,
        max_seq_len=S,
    )


def plan_steps(N: int, TPP: float, S: int, B_ref: int, D_ref: float) -> tuple[int, int]:
    """(T, B) for D = TPP * N tokens with B = B_ref (D / D_ref)^0.38 windows (Power Lines B_opt).

    T = round(D / (B S)) steps of B windows of S predicted tokens.
    """
    D = _positive("TPP", TPP) * _positive("N", N)
    B = max(
        1,
        round(
            _positive("B_ref", B_ref) * (D / _positive("D_ref", D_ref)) ** BERGSMA2025_B_EXPONENT
        ),
    )
    return max(1, round(D / (B * _positive("S", S)))), B


def train_curve(
    run: Run, windows: np.ndarray, probs: np.ndarray, vocab_size: int, d_base: int
) -> Curve:
    """Train `toy_config(run.d_model)` with `lib.train.train` on fresh windows; muP AdamW groups.

    Each step draws B windows i.i.d. from the exact window law (single pass, fresh data); a
    callback records the exact population loss at t_hat = 1/n_eval, 2/n_eval, ..., 1. No
    gradient clipping, so AdamW's update and decay alone set the timescale tau.
    """
    import torch

    from lib.train import TrainConfig, train

    S = windows.shape[1] - 1
    W, P = torch.as_tensor(windows), torch.as_tensor(probs)
    fault_step = run.T + 1 if run.fault_at is None else round(run.fault_at * run.T)
    eval_at = {max(1, round(j * run.T / run.n_eval)): j - 1 for j in range(1, run.n_eval + 1)}
    L, groups = np.empty(run.n_eval), []

    def batch_fn(step: int, gen: torch.Generator):
        w = W[torch.multinomial(P, run.B, replacement=True, generator=gen)]  # (B, S+1)
        x, y = w[:, :-1], w[:, 1:].clone()
        if step >= fault_step:  # the data bug: some labels become uniform noise
            bad = torch.rand(y.shape, generator=gen) < run.fault_frac
            y[bad] = torch.randint(vocab_size, (int(bad.sum()),), generator=gen)
        return x, y

    def record(done: int, model) -> None:
        if done in eval_at:
            L[eval_at[done]] = population_loss(model, W, P)

    def param_groups(model) -> list[dict]:
        groups.extend(mup_groups(model, run.eta, d_base, run.tau, run.T, run.lam))
        return [dict(g) for g in groups]  # copies: the optimizer rewrites each group's lr

    cfg = TrainConfig(
        steps=run.T, batch_size=run.B, seq_len=S, lr=run.eta, weight_decay=0.0,
        warmup_steps=max(1, round(run.warmup_frac * run.T)), schedule=run.schedule,
        decay_frac=run.decay_frac, min_lr_ratio=0.0, grad_clip=0.0, seed=run.seed,
        data_seed=10_000 + run.seed,
    )  # fmt: skip
    res = train(toy_config(run.d_model, vocab_size, S), cfg, None, param_groups=param_groups,
                batch_fn=batch_fn, callback=record)  # fmt: skip
    t_hat = np.arange(1, run.n_eval + 1) / run.n_eval
    return Curve(run, res.params.total, t_hat, L, group_timescales(groups, run.T), S)


def train_curves(
    runs: list[Run],
    windows: np.ndarray,
    probs: np.ndarray,
    vocab_size: int,
    d_base: int,
    desc: str = "runs",
) -> list[Curve]:
    """`train_curve` for every run in order, with a tqdm progress bar."""
    from tqdm.auto import tqdm

    if not runs or not all(isinstance(r, Run) for r in runs):
        raise ValueError(f"runs must be a non-empty list of Run, got {runs!r}")
    return [
        train_curve(r, windows, probs, vocab_size, d_base)
        for r in tqdm(runs, desc=desc, leave=False)
    ]


# ----------------------------------------------------------------------------- collapse


def normalise(L, L_hat: float = 0.0) -> np.ndarray:
    """ell(t_hat) = (L(t_hat T) - L_hat) / (L(T) - L_hat); L (..., n) with L[..., -1] = L(T).

    L_hat = 0 divides by the final loss (Bergsma et al. 2025); L_hat = the loss floor gives
    Qiu et al. (2025)'s reducible-loss form.
    """
    a = np.asarray(L, dtype=np.float64)
    if a.ndim < 1 or a.shape[-1] < 2 or not np.all(np.isfinite(a)):
        raise ValueError(f"L must be finite with at least 2 points on its last axis, got {a.shape}")
    if not math.isfinite(L_hat) or np.any(a[..., -1] <= L_hat):
        raise ValueError(f"L_hat={L_hat!r} must be finite and below every final loss")
    return (a - L_hat) / (a[..., -1:] - L_hat)


def spread(ell, t_hat, t_min: float = 0.1) -> float:
    """Mean over t_hat >= t_min of (max - min across curves) of normalised curves ell (n, m)."""
    e = as_array("ell", ell, ndim=2)
    t = as_array("t_hat", t_hat, ndim=1)
    if e.shape[1] != t.shape[0] or e.shape[0] < 2:
        raise ValueError(f"ell must be (n >= 2 curves, len(t_hat)={t.shape[0]}), got {e.shape}")
    keep = t >= t_min
    if not keep.any():
        raise ValueError(f"t_min={t_min} leaves no points; use t_min <= {t.max()}")
    return float(np.mean(e[:, keep].max(axis=0) - e[:, keep].min(axis=0)))


def align_final_loss(L_prefix, ell_prefix) -> float:
    """Online estimate of L(T) from a curve prefix: the divisor c that best maps L onto ell.

    Least squares in log space: ln c = mean(ln L(t_hat) - ln ell(t_hat)) over the prefix.
    """
    L = as_array("L_prefix", L_prefix, ndim=1)
    e = as_array("ell_prefix", ell_prefix, ndim=1)
    if L.shape != e.shape or np.any(L <= 0) or np.any(e <= 0):
        raise ValueError(f"L_prefix {L.shape} and ell_prefix {e.shape} must match and be > 0")
    return float(np.exp(np.mean(np.log(L) - np.log(e))))


@dataclass(frozen=True)
class Detection:
    """Detector output: L(T) estimated from the prefix, residual per point, first alarm."""

    L_T_hat: float
    residual: np.ndarray  # (m,) L / L_T_hat - ell_bar; NaN where not monitored
    t_alarm: float  # first t_hat with |residual| > threshold; inf when never


def detect(L, t_hat, ell_bar, t_fit: float, threshold: float) -> Detection:
    """Flag a run that leaves the universal curve ell_bar after the alignment window.

    L(T) is estimated from the points with t_min_fit <= t_hat <= t_fit only (t_min_fit = 0.1),
    then every later point is monitored: alarm when |L / L_T_hat - ell_bar| > threshold.
    """
    L, t, e = (
        as_array(n, v, ndim=1) for n, v in (("L", L), ("t_hat", t_hat), ("ell_bar", ell_bar))
    )
    if not L.shape == t.shape == e.shape:
        raise ValueError(f"L {L.shape}, t_hat {t.shape}, ell_bar {e.shape} must match")
    _positive("threshold", threshold)
    fit = (t >= 0.1) & (t <= t_fit)
    if fit.sum() < 1 or not (t > t_fit).any():
        raise ValueError(f"t_fit={t_fit} must leave points on both sides within [0.1, 1]")
    c = align_final_loss(L[fit], e[fit])
    r = np.where(t > t_fit, L / c - e, np.nan)
    hits = np.flatnonzero(np.abs(np.nan_to_num(r)) > threshold)
    return Detection(c, r, float(t[hits[0]]) if hits.size else math.inf)


@dataclass(frozen=True)
class Bracket:
    """Where a grid's minimum sits: index of the lowest seed-mean loss, and what brackets it.

    ends_worse: the minimum is interior and both grid ends are worse by > z paired standard
    errors (a minimum lies strictly inside the grid). neighbours_worse: the same for the two
    adjacent grid values (the minimum is resolved at the grid's spacing).
    """

    index: int
    ends_worse: bool
    neighbours_worse: bool


def bracket_minimum(L, z: float = 2.0) -> Bracket:
    """Locate the seed-mean minimum of L (n_seeds >= 2, n_grid >= 3) and test its brackets.

    Row k holds seed k's final losses at every (sorted) grid value, so comparisons are paired:
    value j is worse than the minimum i when mean_k(L_kj - L_ki) > z * sd_k(L_kj - L_ki) /
    sqrt(n_seeds) (common random numbers remove the seed effect shared by all grid values).
    """
    a = as_array("L", L, ndim=2)
    if a.shape[0] < 2 or a.shape[1] < 3:
        raise ValueError(f"L must be (n_seeds >= 2, n_grid >= 3), got shape {a.shape}")
    _positive("z", z)
    i, last = int(np.argmin(a.mean(axis=0))), a.shape[1] - 1

    def worse(j: int) -> bool:
        d = a[:, j] - a[:, i]
        return bool(d.mean() > z * d.std(ddof=1) / math.sqrt(len(d)))

    if i in (0, last):
        return Bracket(i, False, False)
    return Bracket(i, worse(0) and worse(last), worse(i - 1) and worse(i + 1))
