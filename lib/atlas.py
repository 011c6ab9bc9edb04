"""ATLAS-style multilingual scaling laws, repetition-aware effective data and transfer scores.

Implements the pieces of Longpre et al. ("ATLAS", ICLR 2026, arXiv:2510.22037) that Chapter 12
needs: the saturating repetition term S_lambda (their Eq. 3, equal to Muennighoff et al. 2023's
effective data with R* = 1 / lambda), the ATLAS law and its baselines as fittable `Law`s, the
bilingual transfer score (their Sec. 4) with a censoring rule, the curse-of-multilinguality law
(their Sec. 5) and its iso-loss multipliers, the finetune-versus-scratch crossover budget (their
Sec. 6), plus toy plumbing: languages with designed family/script structure built from
`lib.synth`, a batch sampler for language mixtures with a capped number of unique tokens per
language, and a toy run through `lib.train.train` that can start from a checkpoint. Every law's
irreducible loss E can be bounded below by the exact entropy floor of the synthetic target.
torch is imported only when training.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize
from sklearn.isotonic import IsotonicRegression

from lib.synth import Language, mix_chains, random_chain


@dataclass(frozen=True)
class DataConstrainedConstants:
    """Muennighoff et al. 2023 law: L = e^e + e^a / N'^alpha + e^b / D'^beta (their Eq. 5)."""

    a: float
    b: float
    e: float
    alpha: float
    beta: float
    R_D_star: float
    R_N_star: float


# Published fit (their Sec. 5 / released code); check values are in the chapter's test.
MUENNIGHOFF2023 = DataConstrainedConstants(
    a=6.255414, b=7.3049974, e=0.6254804, alpha=0.3526596, beta=0.3526596,
    R_D_star=15.387756, R_N_star=5.309743,
)  # fmt: skip
LONGPRE2025_PHI, LONGPRE2025_PSI = 0.11, -0.04  # curse law exponents (ATLAS Sec. 5)
# ATLAS Fig. 5: multipliers (N, D_tot) to keep loss when languages grow r-fold
LONGPRE2025_MULTIPLIERS = {2: (1.18, 1.66), 4: (1.40, 2.74), 8: (1.66, 4.54), 16: (1.96, 7.52)}
LONGPRE2025_EXPONENTS = (0.243, 0.728)  # N ~ r^0.243, D_tot ~ r^0.728 (ATLAS Sec. 5)


def _finite(name: str, x, positive: bool = False) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.size == 0 or np.any(np.isnan(arr)):
        raise ValueError(f"{name} must be a non-empty array without NaN, got {x!r}")
    if positive and np.any(arr <= 0):
        raise ValueError(f"{name} must be > 0, got min {arr.min()}; pass positive values")
    return arr


def effective_data(D, U, lam: float) -> np.ndarray:
    """S_lambda(D; U) in tokens (ATLAS Eq. 3): D if D <= U, else U [1 + (1 - e^{-lam R}) / lam].

    R = D / U - 1 is the number of repeated epochs; U = inf means no cap (S = D). As lam -> 0
    every repeat counts fully; the saturation value is U (1 + 1 / lam). Broadcasts D and U.
    """
    D, U = _finite("D", D), _finite("U", U, positive=True)
    if np.any(D < 0):
        raise ValueError(f"D must be >= 0 tokens, got min {D.min()}")
    if not (math.isfinite(lam) and lam > 0):
        raise ValueError(f"lam={lam!r} must be finite and > 0 (lam = 1 / R*)")
    with np.errstate(invalid="ignore", over="ignore"):
        R = np.where(np.isfinite(U), D / U - 1.0, 0.0)
        repeated = U * (1.0 + (-np.expm1(-lam * np.maximum(R, 0.0))) / lam)
    return np.where(D <= U, D, repeated)


def muennighoff_loss(N, D, U, c: DataConstrainedConstants = MUENNIGHOFF2023) -> np.ndarray:
    """Data-constrained loss of Muennighoff et al. 2023 (their Eq. 5) in nats/token.

    D' = S_{1/R_D*}(D; U); the parameter repetition uses U_N = min(N, N_opt(U)), the
    compute-optimal size for U tokens (alpha A / N^alpha = beta B / D^beta), and
    N' = S_{1/R_N*}(N; U_N).
    """
    N, D, U = (_finite(n, v, positive=True) for n, v in (("N", N), ("D", D), ("U", U)))
    A, B, E = math.exp(c.a), math.exp(c.b), math.exp(c.e)
    N_opt = ((c.alpha * A) / (c.beta * B) * U**c.beta) ** (1.0 / c.alpha)
    U_N = np.minimum(N, N_opt)
    N_eff = effective_data(N, U_N, 1.0 / c.R_N_star)
    D_eff = effective_data(D, U, 1.0 / c.R_D_star)
    return E + A / N_eff**c.alpha + B / D_eff**c.beta


def curse_multipliers(phi: float, psi: float, alpha: float, beta: float, r: float):
    """Iso-loss factors (N'/N, D_tot'/D_tot, C'/C) when K grows r-fold, compute-optimally.

    For L = L_inf + A K^phi / N^alpha + B K^psi / D_t^beta at fixed L, the C-optimal point keeps
    each term fixed (Lagrange), so N ~ r^(phi/alpha), D_t ~ r^(psi/beta), D_tot = K D_t
    ~ r^(1 + psi/beta), C = 6 N D_tot ~ r^(1 + phi/alpha + psi/beta) (ATLAS App. B.7).
    """
    for name, v in (("phi", phi), ("psi", psi), ("alpha", alpha), ("beta", beta), ("r", r)):
        if not math.isfinite(v):
            raise ValueError(f"{name}={v!r} must be finite")
    if alpha <= 0 or beta <= 0 or r <= 0:
        raise ValueError(f"alpha={alpha}, beta={beta}, r={r} must all be > 0")
    n_mult, d_mult = r ** (phi / alpha), r ** (1 + psi / beta)
    return n_mult, d_mult, n_mult * d_mult


# --------------------------------------------------------------------------- laws and fitting


@dataclass(frozen=True)
class Law:
    """A loss law L = f(theta, X) with named parameters, bounds and a grid of start points."""

    name: str
    params: tuple[str, ...]
    f: Callable[[np.ndarray, Mapping[str, np.ndarray]], np.ndarray]
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    starts: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class LawFit:
    """A fitted `Law`: parameter values by name; `predict(X)` gives the loss in nats/token."""

    law: Law
    values: dict[str, float]
    rmse_log: float
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)

    def predict(self, X: Mapping[str, np.ndarray]) -> np.ndarray:
        """Loss predicted at the features X (dict of arrays of equal length)."""
        return self.law.f(np.array([self.values[p] for p in self.law.params]), X)


def _chin(th, N, D) -> np.ndarray:
    """E + A / N^alpha + B / D^beta with th = (log E, log A, log B, alpha, beta, ...)."""
    D = np.maximum(D, 1.0)
    return np.exp(th[0]) + np.exp(th[1]) * N ** -th[3] + np.exp(th[2]) * D ** -th[4]


_BASE = ("logE", "logA", "logB", "alpha", "beta")
LOG_LAM_BOUNDS = (math.log(1e-3), math.log(1e2))  # lambda = 1 / R* between 1e-3 and 100
_LO, _HI = (-5.0, -10.0, -10.0, 0.0, 0.0), (3.0, 30.0, 30.0, 3.0, 3.0)
_GRID = tuple(
    (0.3, a, b, ex, ex) for a in (1.0, 4.0) for b in (2.0, 6.0) for ex in (0.3, 1.0)
)  # fmt: skip


def chinchilla_law(D_key: str) -> Law:
    """Chinchilla E + A/N^alpha + B/D^beta with D = X[D_key] ('D_t' target, 'D_tot' total)."""
    return Law(f"Chinchilla({D_key})", _BASE, lambda th, X: _chin(th, X["N"], X[D_key]),
               _LO, _HI, _GRID)  # fmt: skip


def msl_law() -> Law:
    """He et al. 2024 multilingual law: (E + A/N^alpha + B/D_tot^beta) p_fam^-gamma."""
    return Law("MSL", _BASE + ("gamma",),
               lambda th, X: _chin(th, X["N"], X["D_tot"]) * X["p_fam"] ** -th[5],
               _LO + (-2.0,), _HI + (2.0,), tuple(s + (0.1,) for s in _GRID))  # fmt: skip


def atlas_law(sources: Sequence[str], repetition: bool = True) -> Law:
    """ATLAS Eqs. 1-3: D_eff = S(D_t;U_t) + sum_i tau_i S(D_i;U_i) + tau_other S(D_o;U_o).

    X needs N, D_t, U_t and, per name in `sources` (the last is 'other'), D_<name>, U_<name>.
    With repetition=True the decay lambda of S is fitted (parameter log_lam, one lambda shared by
    every source, as in the paper's fits); with repetition=False every S is the identity.
    """
    taus = tuple(f"tau_{s}" for s in sources)
    k = len(sources)

    def f(th, X):
        lam = math.exp(th[5 + k]) if repetition else None
        S = (lambda D, U: effective_data(D, U, lam)) if repetition else (lambda D, U: D)
        D_eff = S(X["D_t"], X["U_t"])
        for tau, s in zip(th[5 : 5 + k], sources, strict=True):
            D_eff = D_eff + tau * S(X[f"D_{s}"], X[f"U_{s}"])
        return _chin(th, X["N"], D_eff)

    rep = (("log_lam",), (LOG_LAM_BOUNDS[0],), (LOG_LAM_BOUNDS[1],), (-1.0,)) if repetition else (
        (), (), (), ())  # fmt: skip
    name = "ATLAS" if k else "ATLAS(D_t)"
    starts = tuple(s + (0.3,) * k + rep[3] for s in _GRID)
    return Law(name, _BASE + taus + rep[0], f, _LO + (-0.9,) * k + rep[1],
               _HI + (3.0,) * k + rep[2], starts)  # fmt: skip


def curse_law() -> Law:
    """ATLAS Sec. 5: L = L_inf + A K^phi / N^alpha + B K^psi / D_t^beta."""

    def f(th, X):
        K, N, D = X["K"], X["N"], X["D_t"]
        return (
            np.exp(th[0])
            + np.exp(th[1]) * K ** th[5] / N ** th[3]
            + np.exp(th[2]) * (K ** th[6] / D ** th[4])
        )

    return Law("curse", _BASE + ("phi", "psi"), f, _LO + (-3.0, -3.0), _HI + (3.0, 3.0),
               tuple(s + (0.1, -0.1) for s in _GRID))  # fmt: skip


def fit_law(
    law: Law, X: Mapping[str, np.ndarray], L, starts=None, E_min: float | None = None
) -> LawFit:
    """Least squares on log L (Besiroglu et al. 2024 use log residuals) from every start.

    E_min (nats/token) bounds the irreducible loss E = exp(logE) from below, e.g. by the exact
    entropy rate of a synthetic language: no model can beat it.
    """
    L = _finite("L", L, positive=True)
    lower = np.array(law.lower, dtype=float)
    if E_min is not None:
        if not (math.isfinite(E_min) and 0 < E_min < math.exp(law.upper[0])):
            raise ValueError(f"E_min={E_min!r} must be in (0, {math.exp(law.upper[0]):.3g})")
        lower[0] = math.log(E_min)
    for k, v in X.items():
        if np.shape(v) != L.shape:
            raise ValueError(f"X[{k!r}] has shape {np.shape(v)}; it must match L {L.shape}")

    def resid(th):
        with np.errstate(all="ignore"):
            r = np.log(np.maximum(law.f(th, X), 1e-12)) - np.log(L)
        return np.nan_to_num(r, nan=10.0, posinf=10.0, neginf=-10.0)

    best = None
    for s in starts if starts is not None else law.starts:
        x0 = np.clip(s, lower + 1e-9, np.array(law.upper) - 1e-9)
        res = optimize.least_squares(resid, x0, bounds=(lower, law.upper), method="trf")
        if best is None or res.cost < best.cost:
            best = res
    rmse = float(np.sqrt(2 * best.cost / L.size))
    return LawFit(law, dict(zip(law.params, map(float, best.x), strict=True)), rmse)


def bootstrap_law(
    fit: LawFit, X, L, groups, n_boot: int, seed: int, E_min: float | None = None
) -> LawFit:
    """Cluster bootstrap over `groups` (e.g. run ids): 95% percentile intervals of every param."""
    L, groups = np.asarray(L, float), np.asarray(groups)
    if not isinstance(n_boot, int) or n_boot < 2:
        raise ValueError(f"n_boot={n_boot!r} must be an integer >= 2")
    ids = np.unique(groups)
    rng = np.random.default_rng(seed)
    start = (tuple(fit.values[p] for p in fit.law.params),)
    draws = []
    for _ in range(n_boot):
        pick = np.concatenate([np.flatnonzero(groups == g) for g in rng.choice(ids, len(ids))])
        sub = {k: np.asarray(v)[pick] for k, v in X.items()}
        refit = fit_law(fit.law, sub, L[pick], starts=start, E_min=E_min)
        draws.append(list(refit.values.values()))
    lo, hi = np.percentile(np.array(draws), [2.5, 97.5], axis=0)
    ci = {p: (float(a), float(b)) for p, a, b in zip(fit.law.params, lo, hi, strict=True)}
    return LawFit(fit.law, fit.values, fit.rmse_log, ci)


# --------------------------------------------------------------------------- transfer score


def bilingual_transfer_score(d_mono: float, D_mono, L_mono, D_bi, L_bi) -> tuple[float, str]:
    """BTS_{s->t} = -(sigma_bi(L_t(d_mono)) - 2 d_mono) / d_mono (ATLAS Sec. 4), with censoring.

    D_mono, L_mono: the monolingual curve on t (tokens of t, nats); D_bi, L_bi: the 50/50
    bilingual curve on t against *total* tokens. Both are made non-increasing by isotonic
    regression; sigma_bi is interpolated in log tokens. If the bilingual model never reaches
    the reference loss the score is censored: returns (bound, '<'); if it is already below it at
    its first checkpoint, (bound, '>'); otherwise (score, '').
    """
    curves = [_finite(n, v, positive=True) for n, v in
              (("D_mono", D_mono), ("L_mono", L_mono), ("D_bi", D_bi), ("L_bi", L_bi))]  # fmt: skip
    D_m, L_m, D_b, L_b = curves
    if D_m.shape != L_m.shape or D_b.shape != L_b.shape or D_b.size < 2:
        raise ValueError("each curve needs matching D and L arrays with >= 2 checkpoints")
    if not (D_m.min() <= d_mono <= D_m.max()):
        raise ValueError(
            f"d_mono={d_mono} must lie within the mono curve [{D_m.min()}, {D_m.max()}]"
        )
    iso = IsotonicRegression(increasing=False)
    L_ref = float(np.interp(np.log(d_mono), np.log(D_m), iso.fit_transform(np.log(D_m), L_m)))
    L_b = iso.fit_transform(np.log(D_b), L_b)
    if L_b[-1] > L_ref:
        return -(D_b[-1] - 2 * d_mono) / d_mono, "<"
    if L_b[0] <= L_ref:
        return -(D_b[0] - 2 * d_mono) / d_mono, ">"
    j = int(np.argmax(L_b <= L_ref))  # first checkpoint at or below the reference loss
    w = (L_b[j - 1] - L_ref) / (L_b[j - 1] - L_b[j])
    sigma = math.exp((1 - w) * math.log(D_b[j - 1]) + w * math.log(D_b[j]))
    return -(sigma - 2 * d_mono) / d_mono, ""


# --------------------------------------------------------------------------- toy languages


@dataclass(frozen=True)
class LangSpec:
    """A toy language: its family (shares a family grammar) and script (its surface ids)."""

    name: str
    family: str
    script: int


def build_languages(
    specs: Sequence[LangSpec], n_concepts: int, mix: tuple[float, float, float], seed: int,
    n_support: int = 4,
) -> dict[str, Language]:  # fmt: skip
    """P_l = mix[0] P_0 + mix[1] F_family + mix[2] G_l over concepts; token = script * C + c.

    P_0 (universal), F (one per family) and G (one per language) are `lib.synth.random_chain`s;
    languages sharing a script write every concept with the same token.
    """
    if len(mix) != 3 or min(mix) < 0 or not math.isclose(sum(mix), 1.0):
        raise ValueError(f"mix={mix!r} must be three weights >= 0 summing to 1")
    if not specs or len({s.name for s in specs}) != len(specs):
        raise ValueError("specs must be a non-empty list with distinct names")
    families = sorted({s.family for s in specs})
    seeds = np.random.SeedSequence(seed).generate_state(1 + len(families) + len(specs))
    chain = lambda i: random_chain(n_concepts, 1, n_support, 1.0, int(seeds[i]))  # noqa: E731
    base, fam = chain(0), {f: chain(1 + i) for i, f in enumerate(families)}
    vocab = n_concepts * (1 + max(s.script for s in specs))
    out = {}
    for i, s in enumerate(specs):
        P = mix_chains([base, fam[s.family], chain(1 + len(families) + i)], list(mix))
        out[s.name] = Language(P, s.script * n_concepts + np.arange(n_concepts), vocab)
    return out


def mixture_batch_fn(
    pools: Mapping[str, np.ndarray], weights: Mapping[str, float], batch_size: int, seq_len: int
):
    """A `lib.train` batch_fn: each window comes from language l with probability w_l.

    pools: language -> (R, L) int64 array of its U = R * L unique tokens, so a language with
    sampling weight w_l sees w_l D of the D training tokens in expectation, D w_l / U epochs.
    """
    import torch

    from lib.train import get_batch

    w = np.array([weights[k] for k in weights], dtype=float)
    if np.any(w < 0) or not math.isclose(w.sum(), 1.0):
        raise ValueError(f"weights={dict(weights)} must be >= 0 and sum to 1")
    if any(k not in pools for k in weights):
        raise ValueError(f"weights name languages {sorted(weights)} not all in pools")
    data = [torch.as_tensor(pools[k]).long() for k in weights]
    probs = torch.as_tensor(w)

    def batch_fn(step: int, gen: torch.Generator):
        lang = torch.multinomial(probs, batch_size, replacement=True, generator=gen)
        counts = torch.bincount(lang, minlength=len(data)).tolist()
        xy = [get_batch(d, n, seq_len, gen) for d, n in zip(data, counts, strict=True) if n]
        return torch.cat([x for x, _ in xy]), torch.cat([y for _, y in xy])

    return batch_fn


@dataclass(frozen=True)
class Curves:
    """Validation loss (nats/token) per language at every checkpoint of one training run."""

    tokens: np.ndarray  # (n_eval,) total training tokens seen at each checkpoint
    loss: dict[str, np.ndarray]  # language -> (n_eval,)
    N: int  # non-embedding parameters
    state: dict = field(default_factory=dict, repr=False)  # final state_dict (CPU tensors)


def toy_config(d_model: int, vocab: int):
    """The `lib.lm.LMConfig` of `run_toy`: 1 layer, 2 heads, d_ff = 2 d_model, context 16."""
    from lib.lm import LMConfig

    return LMConfig(vocab_size=vocab, d_model=d_model, n_layers=1, n_heads=2, n_kv_heads=2,
                    d_ff=2 * d_model, max_seq_len=16)  # fmt: skip


def run_toy(
    d_model: int, vocab: int, weights: Mapping[str, float], pools: Mapping[str, np.ndarray],
    val: Mapping[str, np.ndarray], steps: int, eval_every: int, seed: int,
    init_state: Mapping | None = None,
) -> Curves:  # fmt: skip
    """Train one 1-layer, 2-head toy decoder (d_ff = 2 d) on a language mixture.

    Batches of 32 windows of 16 tokens; AdamW, lr 1e-2, constant after 10 warmup steps; the
    validation loss of every language in `val` is logged every eval_every steps. init_state
    (e.g. `Curves.state` of an earlier run of the same shape) starts from that checkpoint with a
    fresh optimiser (finetuning); the returned `Curves.state` holds the final weights.
    """
    from lib.train import TrainConfig, train

    tcfg = TrainConfig(steps=steps, batch_size=32, seq_len=16, lr=1e-2, warmup_steps=10,
                       schedule="constant", seed=seed, eval_every=eval_every,
                       eval_windows=128)  # fmt: skip
    batch_fn = mixture_batch_fn(pools, weights, 32, 16)
    init = None if init_state is None else dict(init_state)
    res = train(toy_config(d_model, vocab), tcfg, None, dict(val), init_state=init,
                batch_fn=batch_fn)  # fmt: skip
    tokens = res.eval_steps * tcfg.batch_size * tcfg.seq_len
    state = {k: v.detach().cpu().clone() for k, v in res.model.state_dict().items()}
    return Curves(tokens, dict(res.eval_losses), res.params.non_embedding, state)


# --------------------------------------------------------------------------- crossover

# ATLAS Sec. 6 prints the crossover compute C* = k N^gamma three ways; the Fig. 7 legend's
# (k, gamma) is the only one that puts D* = C* / (6 N) at N = 2B inside the 144-283B tokens of
# its Fig. 6 (the text's 1113708 N^1.65 also does; the caption's 10283128 N^1.65 gives ~1.9T).
LONGPRE2025_CROSSOVER = (10283128.0, 1.54)  # (k, gamma), Fig. 7 legend; C in FLOPs, N params


def crossover_tokens(N, k: float, gamma: float) -> np.ndarray:
    """Tokens D* = C* / (6 N) at the crossover compute C* = k N^gamma (ATLAS Sec. 6), C = 6 N D."""
    N = _finite("N", N, positive=True)
    if not (math.isfinite(k) and k > 0 and math.isfinite(gamma)):
        raise ValueError(f"k={k!r} must be finite and > 0 and gamma={gamma!r} finite")
    return k * N**gamma / (6.0 * N)


def crossover_budget(D, L_ft, L_scratch) -> tuple[float, str]:
    """First budget D* (tokens) where scratch stops losing to finetuning, with censoring.

    D (n,) increasing target-stage tokens at the checkpoints; L_ft, L_scratch (n,) the target
    loss of the finetuned and the from-scratch model there. The gap g = L_scratch - L_ft is
    interpolated linearly in log D between the last checkpoint with g > 0 and the first with
    g <= 0. Returns (D*, ''); (D[-1], '>') if finetuning stays ahead (D* beyond the run);
    (D[0], '<') if it is not ahead at the first checkpoint.
    """
    D, L_ft, L_s = (_finite(n, v, positive=True) for n, v in
                    (("D", D), ("L_ft", L_ft), ("L_scratch", L_scratch)))  # fmt: skip
    if D.ndim != 1 or D.shape != L_ft.shape or D.shape != L_s.shape or D.size < 2:
        raise ValueError(f"D, L_ft, L_scratch must be 1-D of one length >= 2, got {D.shape}, "
                         f"{L_ft.shape}, {L_s.shape}")  # fmt: skip
    if np.any(np.diff(D) <= 0):
        raise ValueError("D must be strictly increasing; pass the checkpoints in order")
    g = L_s - L_ft
    if g[0] <= 0:
        return float(D[0]), "<"
    if np.all(g > 0):
        return float(D[-1]), ">"
    j = int(np.argmax(g <= 0))  # first checkpoint where scratch has caught up
    w = g[j - 1] / (g[j - 1] - g[j])
    return float(math.exp((1 - w) * math.log(D[j - 1]) + w * math.log(D[j]))), ""
