"""ATLAS-style multilingual scaling laws, transfer scores, and toy decoders trained in lockstep.

Implements the pieces of Longpre et al. ("ATLAS", ICLR 2026, arXiv:2510.22037) that Chapter 12
needs: the saturating repetition term S_lambda (their Eq. 3, Muennighoff et al. 2023's effective
data with R* = 1 / lambda), the ATLAS law and its baselines as fittable `Law`s, R^2 within
groups of held-out points, the bilingual transfer score (their Sec. 4) with a censoring rule, the
curse-of-multilinguality law (their Sec. 5) with its iso-loss multipliers in closed form and by
numerical optimisation, and the finetune-versus-scratch crossover (their Sec. 6). Toy plumbing:
languages with designed family and script structure built from `lib.synth`, and `train_toys`,
which trains many small `lib.lm` decoders at once as stacked matrices. Every law's irreducible
loss E can be bounded below by the exact entropy floor of the synthetic target. torch is
imported only when training.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize
from sklearn.isotonic import IsotonicRegression

from lib import validate
from lib.synth import Language, mix_chains, random_chain

LONGPRE2025_PHI, LONGPRE2025_PSI = 0.11, -0.04  # curse law exponents (ATLAS Sec. 5)
# ATLAS Fig. 5: multipliers (N, D_tot) to keep loss when languages grow r-fold
LONGPRE2025_MULTIPLIERS = {2: (1.18, 1.66), 4: (1.40, 2.74), 8: (1.66, 4.54), 16: (1.96, 7.52)}
LONGPRE2025_EXPONENTS = (0.243, 0.728)  # N ~ r^0.243, D_tot ~ r^0.728 (ATLAS Sec. 5)


def _unique_tokens(name: str, U) -> np.ndarray:
    """Unique-token counts U > 0; +inf (no cap) is allowed and stored as the largest float."""
    arr = np.asarray(U, dtype=float) if not isinstance(U, str | bytes) else U
    if isinstance(arr, np.ndarray):
        arr = np.where(np.isposinf(arr), np.finfo(float).max, arr)
    return validate.array(name, arr, ndim=None, positive=True)


def effective_data(D, U, lam: float) -> np.ndarray:
    """S_lambda(D; U) in tokens (ATLAS Eq. 3): D if D <= U, else U [1 + (1 - e^{-lam R}) / lam].

    R = D / U - 1 is the number of repeated epochs; U = inf means no cap (S = D). As lam -> 0
    every repeat counts fully; the saturation value is U (1 + 1 / lam). Broadcasts D and U.
    """
    D = validate.array("D", D, ndim=None, nonnegative=True)
    return _saturate(D, _unique_tokens("U", U), validate.real("lam", lam, low=0, low_open=True))


def _saturate(D: np.ndarray, U: np.ndarray, lam: float) -> np.ndarray:
    """S_lambda(D; U) on validated arrays (the laws call it in their inner loop)."""
    R = np.maximum(D / U - 1.0, 0.0)
    return np.where(D <= U, D, U * (1.0 + (-np.expm1(-lam * R)) / lam))


def curse_multipliers(phi: float, psi: float, alpha: float, beta: float, r: float):
    """Iso-loss factors (N'/N, D_tot'/D_tot, C'/C) when K grows r-fold, compute-optimally.

    For L = L_inf + A K^phi / N^alpha + B K^psi / D_t^beta at fixed L, the C-optimal point keeps
    each term fixed (Lagrange), so N ~ r^(phi/alpha), D_t ~ r^(psi/beta), D_tot = K D_t
    ~ r^(1 + psi/beta), C = 6 N D_tot ~ r^(1 + phi/alpha + psi/beta) (ATLAS App. B.7).
    """
    phi, psi = validate.real("phi", phi), validate.real("psi", psi)
    alpha = validate.real("alpha", alpha, low=0, low_open=True)
    beta = validate.real("beta", beta, low=0, low_open=True)
    r = validate.real("r", r, low=0, low_open=True)
    n_mult, d_mult = r ** (phi / alpha), r ** (1 + psi / beta)
    return n_mult, d_mult, n_mult * d_mult


class IsoLossError(RuntimeError):
    """SLSQP found no iso-loss optimum from any start (a numerical failure, reported, never
    silently replaced by the closed form)."""


def iso_loss_multipliers(phi: float, psi: float, alpha: float, beta: float, r: float):
    """(N'/N, D_tot'/D_tot) found numerically: minimise log C = log N + log(K D_t) by SLSQP at
    the loss of the compute-optimal K = 1 point, with K = r (curse law of ATLAS Sec. 5).

    An independent check of `curse_multipliers`: no Lagrange algebra, only the law itself.
    The answer does not depend on A, B or the starting N (the law is scale-free), so both are 1.
    SLSQP works on the scaled logs u = alpha log N, v = beta log D_t (both error terms are then
    e^-u, e^-v) and restarts from points that split the loss differently between the two
    terms; raises IsoLossError with every start's message if none converges.
    """
    phi, psi = validate.real("phi", phi), validate.real("psi", psi)
    alpha = validate.real("alpha", alpha, low=0, low_open=True)
    beta = validate.real("beta", beta, low=0, low_open=True)
    r = validate.real("r", r, low=1e-3, high=1e3)
    log_d0 = math.log(beta / alpha) / beta  # alpha A / N^alpha = beta B / D^beta at N = 1
    target = 1.0 + math.exp(-beta * log_d0)  # A / N^alpha + B / D^beta at K = 1

    def excess(x):  # the loss at K = r over the loss to keep, minus 1
        return (r**phi * math.exp(-x[0]) + r**psi * math.exp(-x[1])) / target - 1.0

    starts = [(0.0, beta * log_d0)] + [  # the K = 1 optimum, then points on the constraint
        (math.log(r**phi / (f * target)), math.log(r**psi / ((1 - f) * target)))
        for f in (0.5, 0.2, 0.8)
    ]
    messages = []
    for x0 in starts:
        res = optimize.minimize(lambda x: x[0] / alpha + x[1] / beta, x0, method="SLSQP",
                                constraints=[{"type": "eq", "fun": excess}],
                                options={"ftol": 1e-12, "maxiter": 500})  # fmt: skip
        if res.success:
            return math.exp(res.x[0] / alpha), r * math.exp(res.x[1] / beta - log_d0)
        messages.append(res.message)
    raise IsoLossError(f"SLSQP did not converge from {len(starts)} starts: {messages}")


# --------------------------------------------------------------------------- laws and fitting


@dataclass(frozen=True)
class Law:
    """A loss law L = f(theta, X) with named parameters, the features it reads from X, bounds
    and a grid of start points."""

    name: str
    params: tuple[str, ...]
    features: tuple[str, ...]
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

    def predict(self, X: Mapping[str, np.ndarray]) -> np.ndarray:
        """Loss predicted at the features X (dict of arrays of equal length)."""
        return self.law.f(
            np.array([self.values[p] for p in self.law.params]), _features(self.law, X)
        )


def _chin(th, N, D) -> np.ndarray:
    """E + A / N^alpha + B / D^beta with th = (log E, log A, log B, alpha, beta, ...)."""
    D = np.maximum(D, 1.0)  # a law may make D_eff < 1 token (negative tau): read it as 1 token
    return np.exp(th[0]) + np.exp(th[1]) * N ** -th[3] + np.exp(th[2]) * D ** -th[4]


_BASE = ("logE", "logA", "logB", "alpha", "beta")
LOG_LAM_BOUNDS = (math.log(1e-3), math.log(1e2))  # lambda = 1 / R* between 1e-3 and 100
_LO, _HI = (-5.0, -10.0, -10.0, 0.0, 0.0), (3.0, 30.0, 30.0, 3.0, 3.0)
# Four starts: a pilot found the same optimum as the old eight (b in {2, 6} for each a).
_GRID = tuple((0.3, a, b, ex, ex) for a, b in ((1.0, 2.0), (4.0, 6.0)) for ex in (0.3, 1.0))


def chinchilla_law(D_key: str) -> Law:
    """Chinchilla E + A/N^alpha + B/D^beta with D = X[D_key] ('D_t' target, 'D_tot' total)."""
    D_key = validate.choice("D_key", D_key, ("D_t", "D_tot"))
    return Law(f"Chinchilla({D_key})", _BASE, ("N", D_key),
               lambda th, X: _chin(th, X["N"], X[D_key]), _LO, _HI, _GRID)  # fmt: skip


def msl_law() -> Law:
    """He et al. 2024 multilingual law: (E + A/N^alpha + B/D_tot^beta) p_fam^-gamma, with p_fam
    the sampling share of the target's language family."""
    return Law("MSL", _BASE + ("gamma",), ("N", "D_tot", "p_fam"),
               lambda th, X: _chin(th, X["N"], X["D_tot"]) * X["p_fam"] ** -th[5],
               _LO + (-2.0,), _HI + (2.0,), tuple(s + (0.1,) for s in _GRID))  # fmt: skip


def atlas_law(sources: Sequence[str], repetition: bool = True) -> Law:
    """ATLAS Eqs. 1-3: D_eff = S(D_t;U_t) + sum_i tau_i S(D_i;U_i) + tau_other S(D_o;U_o).

    X needs N, D_t, U_t and, per name in `sources` (the last is 'other'), D_<name>, U_<name>.
    With repetition=True the decay lambda of S is fitted (parameter log_lam, one lambda shared by
    every source, as in the paper's fits); with repetition=False every S is the identity.
    """
    if isinstance(sources, str) or not all(isinstance(s, str) and s for s in sources):
        raise TypeError(f"sources must be a list of language names, got {sources!r}")
    repetition = validate.boolean("repetition", repetition)
    taus, k = tuple(f"tau_{s}" for s in sources), len(sources)
    keys = ("N", "D_t", "U_t") + tuple(f"{p}_{s}" for s in sources for p in ("D", "U"))

    def f(th, X):
        lam = math.exp(th[5 + k]) if repetition else None
        S = (lambda D, U: _saturate(D, U, lam)) if repetition else (lambda D, U: D)
        D_eff = S(X["D_t"], X["U_t"])
        for tau, s in zip(th[5 : 5 + k], sources, strict=True):
            D_eff = D_eff + tau * S(X[f"D_{s}"], X[f"U_{s}"])
        return _chin(th, X["N"], D_eff)

    rep = (("log_lam",), (LOG_LAM_BOUNDS[0],), (LOG_LAM_BOUNDS[1],), (-1.0,)) if repetition else (
        (), (), (), ())  # fmt: skip
    starts = tuple(s + (0.3,) * k + rep[3] for s in _GRID)
    return Law("ATLAS" if k else "ATLAS(D_t)", _BASE + taus + rep[0], keys, f,
               _LO + (-0.9,) * k + rep[1], _HI + (3.0,) * k + rep[2], starts)  # fmt: skip


def curse_law() -> Law:
    """ATLAS Sec. 5: L = L_inf + A K^phi / N^alpha + B K^psi / D_t^beta."""

    def f(th, X):
        K, N, D = X["K"], X["N"], X["D_t"]
        return np.exp(th[0]) + np.exp(th[1]) * K ** th[5] / N ** th[3] + np.exp(th[2]) * (
            K ** th[6] / D ** th[4])  # fmt: skip

    return Law("curse", _BASE + ("phi", "psi"), ("K", "N", "D_t"), f, _LO + (-3.0, -3.0),
               _HI + (3.0, 3.0), tuple(s + (0.1, -0.1) for s in _GRID))  # fmt: skip


def fit_curse_law(X: Mapping[str, np.ndarray], L, E_min: float | None = None) -> LawFit:
    """The curse law (`curse_law`, ATLAS Sec. 5) fitted in two stages, on log L.

    At K = 1 the law is Chinchilla, so E, A, B, alpha, beta come from the K = 1 points
    (`fit_law`, E bounded below by E_min); phi and psi then from every point with those fixed.
    Fitted all at once on one small world, phi trades off against alpha and psi against beta.
    X: K, N, D_t arrays (n,); L: (n,) losses in nats/token.
    """
    law = curse_law()
    L = validate.array("L", L, positive=True)
    X = _features(law, X, len(L))
    one = X["K"] == 1
    if one.sum() < len(_BASE):
        raise ValueError(f"X needs >= {len(_BASE)} points with K = 1 (the Chinchilla stage), "
                         f"got {int(one.sum())}")  # fmt: skip
    base = fit_law(chinchilla_law("D_t"), {"N": X["N"][one], "D_t": X["D_t"][one]}, L[one],
                   E_min=E_min)  # fmt: skip
    theta = [base.values[p] for p in _BASE]

    def resid(exponents):
        with np.errstate(all="ignore"):
            r = np.log(law.f(np.array(theta + list(exponents)), X)) - np.log(L)
        return np.nan_to_num(r, nan=10.0, posinf=10.0, neginf=-10.0)

    res = optimize.least_squares(resid, [0.1, -0.1], bounds=(law.lower[5:], law.upper[5:]))
    rmse = float(np.sqrt(2 * res.cost / L.size))
    return LawFit(law, dict(zip(law.params, theta + [float(x) for x in res.x], strict=True)), rmse)


def _features(law: Law, X: Mapping, n: int | None = None) -> dict[str, np.ndarray]:
    """The features `law` reads, validated: present, finite (U may be +inf: no cap), > 0 for
    N, K, p_fam and U, >= 0 for token counts, and of length n when given."""
    if not isinstance(law, Law):
        raise TypeError(f"law must be a Law (e.g. atlas.chinchilla_law('D_t')), got {law!r:.60}")
    if not isinstance(X, Mapping):
        raise TypeError(f"X must be a dict of feature arrays, got {type(X).__name__}")
    missing = [k for k in law.features if k not in X]
    if missing:
        raise ValueError(f"X lacks {missing} for law {law.name}; it needs keys "
                         f"{list(law.features)}, got {sorted(X)}")  # fmt: skip
    out = {}
    for k in law.features:
        name = f"X[{k!r}]"
        out[k] = (_unique_tokens(name, X[k]) if k.startswith("U") else
                  validate.array(name, X[k], nonnegative=k.startswith("D"),
                                 positive=not k.startswith("D")))  # fmt: skip
        if n is not None and out[k].shape != (n,):
            raise ValueError(f"{name} has shape {out[k].shape}; it must match L ({n},)")
    return out


def fit_law(
    law: Law, X: Mapping[str, np.ndarray], L, starts=None, E_min: float | None = None
) -> LawFit:
    """Least squares on log L (Besiroglu et al. 2024 use log residuals) from every start.

    X: feature arrays (n,) named as `law.features`; L: (n,) losses in nats/token. E_min bounds
    the irreducible loss E = exp(logE) from below, e.g. by the exact entropy rate of a synthetic
    language: no model can beat it.
    """
    L = validate.array("L", L, positive=True)
    X = _features(law, X, len(L))
    lower, upper = np.array(law.lower, dtype=float), np.array(law.upper, dtype=float)
    if E_min is not None:
        lower[0] = math.log(validate.real("E_min", E_min, low=0, high=math.exp(upper[0]),
                                          low_open=True, high_open=True))  # fmt: skip
    starts = law.starts if starts is None else starts
    for i, s in enumerate(starts):
        validate.array(f"starts[{i}]", s, min_size=len(law.params))
        if len(s) != len(law.params):
            raise ValueError(f"starts[{i}] has {len(s)} values; {law.name} has {law.params}")

    def resid(th):
        with np.errstate(all="ignore"):
            r = np.log(np.maximum(law.f(th, X), 1e-12)) - np.log(L)
        # overflow at an extreme trial theta must steer the search away, not crash it
        return np.nan_to_num(r, nan=10.0, posinf=10.0, neginf=-10.0)

    best = None
    for s in starts:
        x0 = np.clip(s, lower + 1e-9, upper - 1e-9)
        res = optimize.least_squares(resid, x0, bounds=(lower, upper), method="trf")
        if best is None or res.cost < best.cost:
            best = res
    rmse = float(np.sqrt(2 * best.cost / L.size))
    return LawFit(law, dict(zip(law.params, map(float, best.x), strict=True)), rmse)


# --------------------------------------------------------------------------- transfer score


def monotone(D: np.ndarray, L: np.ndarray) -> np.ndarray:
    """A loss curve L(D) made non-increasing by isotonic regression in log D (removes the
    checkpoint-to-checkpoint noise that would make a curve cross another one by chance)."""
    return IsotonicRegression(increasing=False).fit_transform(np.log(D), L)


def bilingual_transfer_score(d_mono: float, D_mono, L_mono, D_bi, L_bi) -> tuple[float, str]:
    """BTS_{s->t} = -(sigma_bi(L_t(d_mono)) - 2 d_mono) / d_mono (ATLAS Sec. 4), with censoring.

    D_mono, L_mono: the monolingual curve on t (tokens of t, nats); D_bi, L_bi: the 50/50
    bilingual curve on t against *total* tokens. Both are made non-increasing by isotonic
    regression; sigma_bi is interpolated in log tokens. If the bilingual model never reaches
    the reference loss the score is censored: returns (bound, '<'); if it is already below it at
    its first checkpoint, (bound, '>'); otherwise (score, '').
    """
    curves = {"D_mono": D_mono, "L_mono": L_mono, "D_bi": D_bi, "L_bi": L_bi}
    D_m, L_m, D_b, L_b = (
        validate.array(n, v, positive=True, min_size=2) for n, v in curves.items()
    )
    validate.same_length(D_mono=D_m, L_mono=L_m)
    validate.same_length(D_bi=D_b, L_bi=L_b)
    d_mono = validate.real("d_mono", d_mono, low=float(D_m.min()), high=float(D_m.max()))
    L_ref = float(np.interp(np.log(d_mono), np.log(D_m), monotone(D_m, L_m)))
    L_b = monotone(D_b, L_b)
    if L_b[-1] > L_ref:
        return -(D_b[-1] - 2 * d_mono) / d_mono, "<"
    if L_b[0] <= L_ref:
        return -(D_b[0] - 2 * d_mono) / d_mono, ">"
    j = int(np.argmax(L_b <= L_ref))  # first checkpoint at or below the reference loss
    w = (L_b[j - 1] - L_ref) / (L_b[j - 1] - L_b[j])
    sigma = math.exp((1 - w) * math.log(D_b[j - 1]) + w * math.log(D_b[j]))
    return -(sigma - 2 * d_mono) / d_mono, ""


def bigram_overlap(tokens_s, tokens_t, vocab: int) -> float:
    """Shared bigram mass sum_{a,b} min(p_s(a, b), p_t(a, b)) of two corpora, in [0, 1].

    tokens_s, tokens_t: (rows, L) token ids; p_x are the empirical frequencies of adjacent
    pairs within rows. 1 for corpora with the same bigram statistics, 0 for corpora that share
    no surface bigram (e.g. disjoint scripts). Measured on data, it mixes what two languages
    share in script (same ids) and in grammar (same transitions).
    """
    vocab = validate.integer("vocab", vocab, minimum=1)
    freqs = []
    for name, x in (("tokens_s", tokens_s), ("tokens_t", tokens_t)):
        x = validate.array(name, x, ndim=2, nonnegative=True)
        if x.shape[1] < 2 or x.max() >= vocab or np.any(x != np.round(x)):
            raise ValueError(f"{name} must be integer ids in [0, {vocab}) in rows of >= 2 tokens")
        pairs = (x[:, :-1].astype(np.int64) * vocab + x[:, 1:].astype(np.int64)).ravel()
        freqs.append(np.bincount(pairs, minlength=vocab * vocab) / pairs.size)
    return float(np.minimum(*freqs).sum())


# --------------------------------------------------------------------------- toy languages

ROW_LEN = 128  # tokens per row of a training pool
VAL_STREAMS, VAL_LEN = 8, 136  # 8 x 8 = 64 validation windows of 17 tokens per language


@dataclass(frozen=True)
class LangSpec:
    """A toy language: its family (shares a family grammar; None: an unrelated language that
    shares no grammar at all) and script (its surface ids)."""

    name: str
    family: str | None
    script: int


def build_languages(
    specs: Sequence[LangSpec], n_concepts: int, mix: tuple[float, float, float], seed: int,
    n_support: int = 4,
) -> dict[str, Language]:  # fmt: skip
    """P_l = mix[0] P_0 + mix[1] F_family + mix[2] G_l over concepts; token = script * C + c.

    P_0 (universal), F (one per family) and G (one per language) are `lib.synth.random_chain`s;
    a language of family None is its private grammar G_l alone. Languages sharing a script
    write every concept with the same token.
    """
    if not isinstance(specs, Sequence) or not specs or not all(
            isinstance(s, LangSpec) for s in specs):  # fmt: skip
        raise TypeError(f"specs must be a non-empty list of LangSpec, got {specs!r:.60}")
    if len({s.name for s in specs}) != len(specs):
        raise ValueError(f"specs must have distinct names, got {[s.name for s in specs]}")
    for s in specs:
        validate.integer(f"script of {s.name}", s.script, minimum=0)
    n_concepts = validate.integer("n_concepts", n_concepts, minimum=2)
    n_support = validate.integer("n_support", n_support, minimum=1, maximum=n_concepts)
    weights = validate.array("mix", mix, nonnegative=True)
    if weights.shape != (3,) or not math.isclose(weights.sum(), 1.0):
        raise ValueError(f"mix must be three weights >= 0 summing to 1, got {mix!r}")
    families = sorted({s.family for s in specs if s.family is not None})
    seeds = np.random.SeedSequence(validate.integer("seed", seed, minimum=0)).generate_state(
        1 + len(families) + len(specs))  # fmt: skip
    chain = lambda i: random_chain(n_concepts, 1, n_support, 1.0, int(seeds[i]))  # noqa: E731
    base, fam = chain(0), {f: chain(1 + i) for i, f in enumerate(families)}
    vocab = n_concepts * (1 + max(s.script for s in specs))
    out = {}
    for i, s in enumerate(specs):
        own = chain(1 + len(families) + i)
        P = own if s.family is None else mix_chains([base, fam[s.family], own], list(weights))
        out[s.name] = Language(P, s.script * n_concepts + np.arange(n_concepts), vocab)
    return out


@dataclass(frozen=True)
class World:
    """Sampled data of named toy languages: training pools (rows, ROW_LEN) whose size is the
    language's unique tokens U, validation streams, exact entropy floors (nats) and vocabulary."""

    pools: dict[str, np.ndarray]
    val: dict[str, np.ndarray]
    floors: dict[str, float]
    vocab: int


def sample_world(langs: Mapping[str, Language], rows: Mapping[str, int], seed: int) -> World:
    """Draw a pool of rows[name] x ROW_LEN tokens (U = rows * 128) and 64 validation windows
    for every language, all streams independent and derived from `seed`."""
    if not isinstance(langs, Mapping) or not langs:
        raise TypeError("langs must be a non-empty dict of name -> lib.synth.Language")
    if not isinstance(rows, Mapping) or set(rows) != set(langs):
        raise ValueError(f"rows must give a row count for each of {sorted(langs)}")
    vocab = {lang.vocab_size for lang in langs.values()}
    if len(vocab) != 1:
        raise ValueError(f"languages must share one vocabulary, got sizes {sorted(vocab)}")
    draws = np.random.SeedSequence(validate.integer("seed", seed, minimum=0)).generate_state(
        2 * len(langs))  # fmt: skip
    pools, val = {}, {}
    for i, (name, lang) in enumerate(langs.items()):
        n = validate.integer(f"rows[{name!r}]", rows[name], minimum=1)
        pools[name] = lang.sample(ROW_LEN, seed=int(draws[2 * i]), n_streams=n)
        val[name] = lang.sample(VAL_LEN, seed=int(draws[2 * i + 1]), n_streams=VAL_STREAMS)
    floors = {name: lang.entropy_rate() for name, lang in langs.items()}
    return World(pools, val, floors, vocab.pop())


def stack_worlds(worlds: Mapping[str, World]) -> World:
    """One World holding several, each language renamed '<tag>/<name>' (tag: the key in
    `worlds`), so that `train_toys` trains the runs of many worlds in one call. The worlds
    must share a vocabulary."""
    if not isinstance(worlds, Mapping) or not worlds or not all(
            isinstance(w, World) for w in worlds.values()):  # fmt: skip
        raise TypeError(f"worlds must be a non-empty dict tag -> World, got {worlds!r:.60}")
    vocab = {w.vocab for w in worlds.values()}
    if len(vocab) != 1:
        raise ValueError(f"worlds must share one vocabulary, got sizes {sorted(vocab)}")
    fields = {"pools": {}, "val": {}, "floors": {}}
    for tag, world in worlds.items():
        for name, merged in fields.items():
            merged.update({f"{tag}/{k}": v for k, v in getattr(world, name).items()})
    return World(**fields, vocab=vocab.pop())


# --------------------------------------------------------------------------- toy runs, stacked

SEQ_LEN, BATCH, LR, WARMUP = 16, 16, 2e-2, 10  # default: 16 windows of 16 tokens a step
EVAL_WINDOWS = 64


@dataclass(frozen=True)
class ToyRun:
    """One toy training run: pool name -> sampling weight, the seed of its initialisation, the
    validation sets to log, and an optional state to start from (finetuning)."""

    weights: Mapping[str, float]
    seed: int
    evals: tuple[str, ...]
    init_state: Mapping | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.weights, Mapping) or not self.weights:
            raise TypeError(f"weights must be a dict pool -> share, got {self.weights!r:.60}")
        w = validate.array("weights", list(self.weights.values()), nonnegative=True)
        if not math.isclose(w.sum(), 1.0, abs_tol=1e-9):
            raise ValueError(f"weights must sum to 1, got {dict(self.weights)}")
        validate.integer("seed", self.seed, minimum=0)
        if isinstance(self.evals, str) or not self.evals:
            raise TypeError(f"evals must be a non-empty tuple of names, got {self.evals!r}")
        if self.init_state is not None and not isinstance(self.init_state, Mapping):
            raise TypeError("init_state must be a state_dict (a dict of tensors) or None")


@dataclass(frozen=True)
class Curves:
    """Validation loss (nats/token) per language at every checkpoint of one training run."""

    tokens: np.ndarray  # (n_eval,) total training tokens seen at each checkpoint
    loss: dict[str, np.ndarray]  # validation set -> (n_eval,)
    N: int  # non-embedding parameters
    state: dict = field(default_factory=dict, repr=False)  # final weights (CPU tensors)


def _check_runs(runs) -> None:
    if isinstance(runs, str) or not isinstance(runs, Sequence) or not runs or not all(
            isinstance(r, ToyRun) for r in runs):  # fmt: skip
        raise TypeError(f"runs must be a non-empty list of ToyRun, got {runs!r:.60}")


def toy_config(d_model: int, vocab: int):
    """The `lib.lm.LMConfig` of a toy run: 1 layer, 2 heads, d_ff = 2 d_model, context 16."""
    from lib.lm import LMConfig

    d_model = validate.integer("d_model", d_model, minimum=2)
    if d_model % 2:
        raise ValueError(f"d_model must be even (2 heads), got {d_model}")
    return LMConfig(vocab_size=validate.integer("vocab", vocab, minimum=2), d_model=d_model,
                    n_layers=1, n_heads=2, n_kv_heads=2, d_ff=2 * d_model,
                    max_seq_len=SEQ_LEN)  # fmt: skip


def _rms(x, g):
    """RMSNorm x / sqrt(mean(x^2) + eps) * g over the last axis (as `lib.lm`)."""
    import torch

    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g


def stacked_logits(P: Mapping, x):
    """Logits (M, B, S, V) of M toy models at once: P holds `TransformerLM` state tensors
    stacked on a leading model axis, x is (M, B, S) token ids. Same maths as `lib.lm`."""
    import torch
    import torch.nn.functional as F

    M, B, S = x.shape
    emb = P["tok_emb.weight"]  # (M, V, d)
    d = emb.shape[-1]
    h = torch.gather(emb, 1, x.reshape(M, -1, 1).expand(-1, -1, d)) + P["pos_emb.weight"][
        :, :S].repeat(1, B, 1)  # (M, B S, d)  # fmt: skip
    a = torch.bmm(_rms(h, P["blocks.0.attn_norm.weight"][:, None]),
                  P["blocks.0.attn.qkv.weight"].transpose(1, 2))  # fmt: skip
    q, k, v = a.view(M * B, S, 3, 2, d // 2).permute(2, 0, 3, 1, 4)  # (M B, 2 heads, S, d/2)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
    h = h + torch.bmm(y.reshape(M, B * S, d), P["blocks.0.attn.out.weight"].transpose(1, 2))
    gate, up = torch.bmm(_rms(h, P["blocks.0.mlp_norm.weight"][:, None]),
                         P["blocks.0.mlp.gate_up.weight"].transpose(1, 2)).chunk(2, -1)  # fmt: skip
    h = h + torch.bmm(F.silu(gate) * up, P["blocks.0.mlp.down.weight"].transpose(1, 2))
    return torch.bmm(_rms(h, P["norm.weight"][:, None]), emb.transpose(1, 2)).view(M, B, S, -1)


def mixture_sampler(runs: Sequence[ToyRun], pools: Mapping[str, np.ndarray], seed: int,
                    batch: int = BATCH):  # fmt: skip
    """draw() -> x, y (M, B, S), y = x shifted by one: each of the B = `batch` windows of run m
    comes from pool l with probability w_l (its `ToyRun.weights`), at a uniform row and offset."""
    import torch

    _check_runs(runs)
    seed = validate.integer("seed", seed, minimum=0)
    batch = validate.integer("batch", batch, minimum=1)
    if not isinstance(pools, Mapping):
        raise TypeError(f"pools must be a dict name -> (rows, L) token array, got {pools!r:.60}")
    names = sorted({k for run in runs for k in run.weights})
    missing = [k for k in names if k not in pools]
    if missing:
        raise ValueError(f"runs sample pools {missing} that are not in pools {sorted(pools)}")
    rows = [validate.array(f"pools[{k!r}]", pools[k], ndim=2, nonnegative=True) for k in names]
    if len({r.shape[1] for r in rows}) != 1 or rows[0].shape[1] <= SEQ_LEN:
        shapes = {k: r.shape for k, r in zip(names, rows, strict=True)}
        raise ValueError(f"every pool needs rows of one length > {SEQ_LEN}, got {shapes}")
    data = torch.as_tensor(np.concatenate(rows), dtype=torch.long)  # (all rows, L)
    n_rows = torch.tensor([len(r) for r in rows])
    first = torch.cumsum(n_rows, 0) - n_rows
    width = max(len(run.weights) for run in runs)
    pool = torch.zeros(len(runs), width, dtype=torch.long)
    prob = torch.zeros(len(runs), width, dtype=torch.float64)
    for m, run in enumerate(runs):
        pool[m, : len(run.weights)] = torch.tensor([names.index(k) for k in run.weights])
        prob[m, : len(run.weights)] = torch.tensor(list(run.weights.values()))
    gen = torch.Generator().manual_seed(seed)
    span = torch.arange(SEQ_LEN + 1)

    def draw():
        p = pool.gather(1, torch.multinomial(prob, batch, replacement=True, generator=gen))
        row = first[p] + (torch.rand(p.shape, generator=gen, dtype=torch.float64)
                          * n_rows[p]).long()  # fmt: skip
        start = torch.randint(data.shape[1] - SEQ_LEN, p.shape, generator=gen)
        w = data[row[..., None], start[..., None] + span]  # (M, B, S + 1)
        return w[..., :-1], w[..., 1:]

    return draw


def _validation(runs: Sequence[ToyRun], val: Mapping[str, np.ndarray]) -> list:
    """Per evaluation slot j, the (M, W, S + 1) windows of every run's j-th validation set."""
    import torch

    from lib.train import eval_windows

    windows = {}
    for k in sorted({k for run in runs for k in run.evals}):
        if k not in val:
            raise ValueError(f"a run evaluates {k!r}, which is not in val {sorted(val)}")
        tokens = torch.as_tensor(validate.array(f"val[{k!r}]", val[k], ndim=2), dtype=torch.long)
        windows[k] = eval_windows(tokens, SEQ_LEN, EVAL_WINDOWS)
        if len(windows[k]) != EVAL_WINDOWS:
            raise ValueError(f"val[{k!r}] gives {len(windows[k])} windows of {SEQ_LEN + 1} "
                             f"tokens; pass at least {EVAL_WINDOWS}")  # fmt: skip
    slots = max(len(run.evals) for run in runs)
    return [torch.stack([windows[run.evals[min(j, len(run.evals) - 1)]] for run in runs])
            for j in range(slots)]  # fmt: skip


def _stacked_nll(P: Mapping, windows) -> np.ndarray:
    """Mean next-token loss (M,) in nats of each model on its own windows (M, W, S + 1)."""
    import torch
    import torch.nn.functional as F

    with torch.no_grad():
        total = 0.0
        for w in windows.split(32, dim=1):  # bounds the (M, 32, S, V) logits in memory
            logits = stacked_logits(P, w[..., :-1])
            nll = F.cross_entropy(logits.flatten(0, 2), w[..., 1:].flatten(), reduction="none")
            total = total + nll.view(w.shape[0], -1).sum(1)
    return (total / (windows.shape[1] * SEQ_LEN)).numpy().astype(np.float64)


def _clip_per_model(grads: Sequence, max_norm: float = 1.0) -> None:
    """Scale each model's gradient to norm <= max_norm (torch's clip_grad_norm_, per model)."""
    import torch

    norm = torch.sqrt(sum(g.pow(2).flatten(1).sum(1) for g in grads))  # (M,)
    coef = (max_norm / (norm + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))


def _step(P: Mapping, opt, x, y) -> None:
    """One AdamW step of every stacked model on its own batch x, y (M, B, S)."""
    import torch.nn.functional as F

    logits = stacked_logits(P, x)
    loss = F.cross_entropy(logits.flatten(0, 2), y.flatten(), reduction="none")
    loss.view(x.shape[0], -1).mean(1).sum().backward()  # each model: its own mean loss
    _clip_per_model([p.grad for p in P.values()])
    opt.step()
    opt.zero_grad(set_to_none=True)


def _stacked_states(cfg, runs: Sequence[ToyRun]) -> dict:
    """Every run's starting weights (its init_state, or `build_model` from its seed), stacked
    on a leading model axis as leaf tensors that require gradients."""
    import torch

    from lib.train import build_model

    shape = {k: v.shape for k, v in build_model(cfg, 0).state_dict().items()}
    states = []
    for r in runs:
        state = build_model(cfg, r.seed).state_dict() if r.init_state is None else r.init_state
        if {k: getattr(v, "shape", None) for k, v in state.items()} != shape:
            raise ValueError(f"init_state of run {dict(r.weights)} does not fit {cfg}; pass the "
                             "Curves.state of a run of the same width and vocabulary")  # fmt: skip
        states.append(state)
    return {k: torch.stack([s[k].float() for s in states]).requires_grad_() for k in shape}


def train_toys(
    d_model: int, vocab: int, runs: Sequence[ToyRun], pools: Mapping[str, np.ndarray],
    val: Mapping[str, np.ndarray], steps: int, eval_every: int, seed: int, batch: int = BATCH,
) -> list[Curves]:  # fmt: skip
    """Train M toy decoders (`toy_config`) in lockstep, one independent model per `ToyRun`.

    Each step every model takes its own batch of `batch` windows of 16 tokens from its mixture;
    AdamW (lr 2e-2 after 10 warmup steps, then constant; betas 0.9, 0.95; decay 0.1 on matrices;
    gradients clipped to norm 1 per model), the optimiser `lib.train.train` would run on each
    alone. Stacking the models into batched matmuls measured about 2x cheaper on a CPU than M
    separate runs (`torch.func.vmap` falls back to a loop for CPU attention). `seed` fixes the
    batches; a `ToyRun.init_state` (e.g. `Curves.state` of a run of the same width and
    vocabulary) starts that model from a checkpoint with a fresh optimiser (finetuning).
    """
    import torch

    from lib.lm import count_params
    from lib.train import TrainConfig, lr_at

    cfg = toy_config(d_model, vocab)
    _check_runs(runs)
    steps = validate.integer("steps", steps, minimum=1)
    eval_every = validate.integer("eval_every", eval_every, minimum=1)
    batch = validate.integer("batch", batch, minimum=1)
    tcfg = TrainConfig(steps=steps, batch_size=batch, seq_len=SEQ_LEN, lr=LR,
                       warmup_steps=min(WARMUP, steps), schedule="constant")  # fmt: skip
    draw = mixture_sampler(runs, pools, seed, batch)
    slots = _validation(runs, val)
    P = _stacked_states(cfg, runs)
    opt = torch.optim.AdamW(
        [{"params": [p for p in P.values() if p.dim() >= 3], "weight_decay": tcfg.weight_decay},
         {"params": [p for p in P.values() if p.dim() < 3], "weight_decay": 0.0}],
        lr=LR, betas=tcfg.betas, fused=True)  # fmt: skip
    done, losses = [], []
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, tcfg)
        _step(P, opt, *draw())
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            done.append(step + 1)
            losses.append([_stacked_nll(P, w) for w in slots])
    return _curves(runs, P, np.array(done) * batch * SEQ_LEN, np.array(losses),
                   count_params(cfg).non_embedding)  # fmt: skip


def _curves(runs, P, tokens: np.ndarray, losses: np.ndarray, N: int) -> list[Curves]:
    """Unstack: losses (n_eval, slots, M) -> one `Curves` per run, with its final weights."""
    out = []
    for m, run in enumerate(runs):
        loss = {k: losses[:, j, m] for j, k in enumerate(run.evals)}
        state = {k: v[m].detach().clone() for k, v in P.items()}
        out.append(Curves(tokens, loss, N, state))
    return out


# --------------------------------------------------------------------------- crossover

# ATLAS Sec. 6 prints the crossover compute C* = k N^gamma three ways; the Fig. 7 legend's
# (k, gamma) is the only one that puts D* = C* / (6 N) at N = 2B inside the 144-283B tokens of
# its Fig. 6 (the text's 1113708 N^1.65 also does; the caption's 10283128 N^1.65 gives ~1.9T).
LONGPRE2025_CROSSOVER = (10283128.0, 1.54)  # (k, gamma), Fig. 7 legend; C in FLOPs, N params


def crossover_tokens(N, k: float, gamma: float) -> np.ndarray:
    """Tokens D* = C* / (6 N) at the crossover compute C* = k N^gamma (ATLAS Sec. 6), C = 6 N D."""
    N = validate.array("N", N, ndim=None, positive=True)
    k = validate.real("k", k, low=0, low_open=True)
    return k * N ** validate.real("gamma", gamma) / (6.0 * N)


def crossover_budget(D, L_ft, L_scratch) -> tuple[float, str]:
    """First budget D* (tokens) where scratch stops losing to finetuning, with censoring.

    D (n,) increasing target-stage tokens at the checkpoints; L_ft, L_scratch (n,) the target
    loss of the finetuned and the from-scratch model there. Both curves are first made
    non-increasing (`monotone`), so that checkpoint noise alone does not make them cross. The
    gap g = L_scratch - L_ft is interpolated linearly in log D between the last checkpoint with
    g > 0 and the first with g <= 0. Returns (D*, ''); (D[-1], '>') if finetuning stays ahead
    (D* beyond the run); (D[0], '<') if it is not ahead at the first checkpoint.
    """
    D, L_ft, L_s = (validate.array(n, v, positive=True, min_size=2) for n, v in
                    (("D", D), ("L_ft", L_ft), ("L_scratch", L_scratch)))  # fmt: skip
    validate.same_length(D=D, L_ft=L_ft, L_scratch=L_s)
    if np.any(np.diff(D) <= 0):
        raise ValueError("D must be strictly increasing; pass the checkpoints in order")
    g = monotone(D, L_s) - monotone(D, L_ft)
    if g[0] <= 0:
        return float(D[0]), "<"
    if np.all(g > 0):
        return float(D[-1]), ">"
    j = int(np.argmax(g <= 0))  # first checkpoint where scratch has caught up
    w = g[j - 1] / (g[j - 1] - g[j])
    return float(math.exp((1 - w) * math.log(D[j - 1]) + w * math.log(D[j]))), ""
