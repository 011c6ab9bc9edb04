"""A toy red-teaming world: attacker and target students of graded capability (Chapter 10).

Panfilov et al. 2025 (arXiv:2505.20162) measure attack success rate (ASR) for 600+ pairs of
LLM attackers and targets and find, per target T, logit(ASR) = w_T delta + b_T with the
capability gap delta = logit(a_A) - logit(a_T) on MMLU-Pro. Here the world is a fixed random
teacher over binary concepts (concept 0 = "harmful request", concepts 1-8 = the benchmark),
the models are MLP students trained with graded compute, and the attack is a black-box
boundary search in the spirit of PAIR judged by the ground truth. Nothing here assumes the
sigmoid: it is fitted afterwards with `lib.fit.fit_logit_linear`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import special, stats

from lib.fit import as_array, fit_logit_linear, r2_score

N_INPUT = 16  # dimension of a "request" x
N_HIDDEN = 32  # teacher hidden units: 0-15 feed harm and concepts 1-4, 16-31 feed concepts 5-8
N_CONCEPTS = 9
HARM = 0  # concept 0 is "this request is harmful"; the target refuses when it believes it
RELEVANT = (1, 2, 3, 4)  # benchmark concepts sharing hidden units with harm (by construction)
IRRELEVANT = (5, 6, 7, 8)
BENCHMARK = RELEVANT + IRRELEVANT  # the MMLU-Pro analogue: harm is not part of it
EPS = 0.01  # Panfilov et al.'s code clips ASR to [0.01, 0.99] before the logit
T_MAX = 6.0  # longest step an attack may take from a behaviour, in input units (|x| ~ 4)
N_BISECT = 16
# Paper's median per-target fit as quoted by a secondary note (unverified): w = 1.73, b = -0.79.
PANFILOV2025_MEDIAN = {"w": 1.73, "b": -0.79}
# A pseudo-attacker in the authors' code: "Direct Query" placed at MMLU-Pro 0.1109.
PANFILOV2025_DIRECT_QUERY_MMLU_PRO = 0.1109
# Student compute (width, n_train, steps) at the ends of the capability grade; batch size 256.
SMALLEST = (4, 200, 200)
LARGEST = (128, 16_000, 1_200)
BATCH = 256
DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "obsscaling"


# ---------------------------------------------------------------------------- validation
def _check_int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _check_prob(name: str, p, ndim: int | None = None) -> np.ndarray:
    arr = as_array(name, p, ndim=ndim)
    if np.any((arr < 0) | (arr > 1)):
        raise ValueError(f"{name} must lie in [0, 1], got range [{arr.min()}, {arr.max()}]")
    return arr


# ---------------------------------------------------------------------------- the world
@dataclass(frozen=True)
class World:
    """Teacher g*(x) = (V tanh(W1 x + b1) - mu) / sd: 9 standardised concept scores."""

    W1: np.ndarray  # (N_HIDDEN, N_INPUT)
    b1: np.ndarray  # (N_HIDDEN,)
    V: np.ndarray  # (N_CONCEPTS, N_HIDDEN), block-masked: harm shares units with RELEVANT
    mu: np.ndarray  # (N_CONCEPTS,)
    sd: np.ndarray  # (N_CONCEPTS,)

    def scores(self, x) -> np.ndarray:
        """Ground-truth scores g*(x), shape (n, 9); concept k holds iff g*_k(x) > 0."""
        x = as_array("x", x, ndim=2)
        if x.shape[1] != N_INPUT:
            raise ValueError(f"x must have {N_INPUT} columns, got shape {x.shape}")
        return (np.tanh(x @ self.W1.T + self.b1) @ self.V.T - self.mu) / self.sd


def make_world(seed: int) -> World:
    """A random teacher whose concept 0 (harm) shares hidden units 0-15 with concepts 1-4."""
    rng = np.random.default_rng(seed)
    W1 = rng.normal(size=(N_HIDDEN, N_INPUT)) / np.sqrt(N_INPUT) * 1.5
    b1 = rng.normal(scale=0.5, size=N_HIDDEN)
    mask = np.zeros((N_CONCEPTS, N_HIDDEN))
    half = N_HIDDEN // 2
    mask[[HARM, *RELEVANT], :half] = 1.0
    mask[list(IRRELEVANT), half:] = 1.0
    V = rng.normal(size=(N_CONCEPTS, N_HIDDEN)) * mask / np.sqrt(half)
    raw = np.tanh(rng.normal(size=(20_000, N_INPUT)) @ W1.T + b1) @ V.T
    return World(W1, b1, V, raw.mean(axis=0), raw.std(axis=0))


def sample_inputs(n: int, seed: int) -> np.ndarray:
    """n requests x ~ N(0, I_16), shape (n, 16)."""
    _check_int("n", n, 1)
    return np.random.default_rng(seed).normal(size=(n, N_INPUT))


def sample_behaviours(world: World, n: int, seed: int, margin: float = 1.0) -> np.ndarray:
    """n clearly harmful requests x0 (g*_0(x0) > margin), shape (n, 16): HarmBench's analogue."""
    _check_int("n", n, 1)
    rng, found = np.random.default_rng(seed), []
    while sum(len(f) for f in found) < n:
        x = rng.normal(size=(4 * n + 64, N_INPUT))
        found.append(x[world.scores(x)[:, HARM] > margin])
    return np.concatenate(found)[:n]


# ---------------------------------------------------------------------------- the models
@dataclass(frozen=True)
class StudentConfig:
    """Compute of one student: MLP width, fresh training requests, Adam steps, harm weight."""

    width: int
    n_train: int
    steps: int
    harm_weight: float = 1.0  # > 1: extra safety training (the Llama-2 analogue)

    def __post_init__(self) -> None:
        for name in ("width", "n_train", "steps"):
            _check_int(name, getattr(self, name), 1)
        if not (np.isfinite(self.harm_weight) and self.harm_weight > 0):
            raise ValueError(f"harm_weight must be finite and > 0, got {self.harm_weight!r}")


def graded_configs(n: int, small=SMALLEST, large=LARGEST) -> list[StudentConfig]:
    """n configs with width, data and steps spaced geometrically from `small` to `large`."""
    _check_int("n", n, 2)
    grid = np.exp(np.linspace(np.log(small), np.log(large), n))
    return [StudentConfig(*(int(round(v)) for v in row)) for row in grid]


def train_student(world: World, config: StudentConfig, seed: int):
    """Train a 2-hidden-layer ReLU MLP on all 9 concepts (BCE, Adam, batch BATCH); eval mode."""
    import torch  # local import: torch costs seconds and the analysis half does not need it

    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    w = config.width
    net = torch.nn.Sequential(
        torch.nn.Linear(N_INPUT, w), torch.nn.ReLU(), torch.nn.Linear(w, w), torch.nn.ReLU(),
        torch.nn.Linear(w, N_CONCEPTS),
    )  # fmt: skip
    x_np = sample_inputs(config.n_train, seed)
    x = torch.tensor(x_np, dtype=torch.float32)
    y = torch.tensor(world.scores(x_np) > 0, dtype=torch.float32)
    weight = torch.ones(N_CONCEPTS)
    weight[HARM] = config.harm_weight
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(config.steps):
        idx = torch.randint(0, config.n_train, (min(BATCH, config.n_train),), generator=gen)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            net(x[idx]), y[idx], weight=weight
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net.eval()


def predict_proba(model, x) -> np.ndarray:
    """A student's beliefs P(concept k | x), shape (n, 9)."""
    import torch

    x = as_array("x", x, ndim=2)
    with torch.no_grad():
        return torch.sigmoid(model(torch.tensor(x, dtype=torch.float32))).double().numpy()


@dataclass(frozen=True)
class Pool:
    """Trained students with their per-concept accuracy on fresh requests, shape (n, 9)."""

    models: list
    configs: list[StudentConfig]
    accuracy: np.ndarray

    def capability(self, concepts=BENCHMARK) -> np.ndarray:
        """c = logit(mean accuracy over `concepts`), shape (n,): the MMLU-Pro analogue."""
        return capability(self.accuracy[:, list(concepts)].mean(axis=1))


def train_pool(
    world: World, configs: list[StudentConfig], seed: int, x_eval, desc: str | None = None
) -> Pool:
    """Train one student per config (seeds seed, seed+1, ...) and measure it on x_eval.

    desc: label of a tqdm progress bar (None: no bar).
    """
    from tqdm.auto import tqdm

    x_eval = as_array("x_eval", x_eval, ndim=2)
    if not configs:
        raise ValueError("configs is empty; pass at least one StudentConfig")
    truth = world.scores(x_eval) > 0
    bar = tqdm(configs, desc=desc, disable=desc is None, leave=False)
    models = [train_student(world, c, seed + i) for i, c in enumerate(bar)]
    acc = np.array([((predict_proba(m, x_eval) > 0.5) == truth).mean(axis=0) for m in models])
    return Pool(models, list(configs), acc)


def capability(accuracy) -> np.ndarray:
    """Capability c = logit(a) of benchmark accuracy a in (0, 1) (Panfilov et al.'s axis)."""
    a = _check_prob("accuracy", accuracy)
    if np.any((a <= 0) | (a >= 1)):
        raise ValueError("accuracy must be strictly inside (0, 1) to take its logit")
    return special.logit(a)


def gap(c_A, c_T) -> np.ndarray:
    """Capability gap delta[i, j] = c_A[i] - c_T[j] = logit(a_A) - logit(a_T), shape (n_A, n_T)."""
    c_A, c_T = as_array("c_A", c_A, ndim=1), as_array("c_T", c_T, ndim=1)
    return c_A[:, None] - c_T[None, :]


# ---------------------------------------------------------------------------- the attack
def _directions(n_beh: int, n_dir: int, seed: int) -> np.ndarray:
    """Random unit directions, shape (n_beh, n_dir, 16)."""
    u = np.random.default_rng(seed).normal(size=(n_beh, n_dir, N_INPUT))
    return u / np.linalg.norm(u, axis=-1, keepdims=True)


def propose_boundary(attacker, x0, n_dir: int, kappa: float, seed: int) -> np.ndarray:
    """Per behaviour and ray, the request farthest out that the attacker still finds harmful.

    Along each ray x0 + t u (t in [0, T_MAX]) the attacker bisects its own belief to where
    P_A(harm) = 0.5 + kappa: the most innocuous-looking request it still believes is harmful.
    Rays where it never doubts give t = T_MAX; a behaviour it does not find harmful gives t = 0.
    Only the attacker's beliefs are used. Returns proposals, shape (n_beh, n_dir, 16).
    """
    x0 = as_array("x0", x0, ndim=2)
    _check_int("n_dir", n_dir, 1)
    if not 0 <= kappa < 0.5:
        raise ValueError(f"kappa must be in [0, 0.5), got {kappa!r}")
    u = _directions(len(x0), n_dir, seed)

    def harmful(t: np.ndarray) -> np.ndarray:  # t: (n_beh, n_dir)
        x = (x0[:, None, :] + t[..., None] * u).reshape(-1, N_INPUT)
        return (predict_proba(attacker, x)[:, HARM] >= 0.5 + kappa).reshape(t.shape)

    lo, hi = np.zeros(u.shape[:2]), np.full(u.shape[:2], T_MAX)
    lo = np.where(harmful(hi), T_MAX, lo)  # never doubts along this ray: go all the way
    for _ in range(N_BISECT):
        mid = 0.5 * (lo + hi)
        ok = harmful(mid)
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    lo = np.where(harmful(np.zeros_like(lo)), lo, 0.0)
    return x0[:, None, :] + lo[..., None] * u


def propose_random(attacker, x0, n_dir: int, seed: int) -> np.ndarray:
    """The failed pilot: random steps t ~ U(0, T_MAX) the attacker still finds harmful (> 0.5).

    A proposal the attacker does not believe harmful is not sent (replaced by x0 itself).
    """
    x0 = as_array("x0", x0, ndim=2)
    _check_int("n_dir", n_dir, 1)
    u = _directions(len(x0), n_dir, seed)
    t = np.random.default_rng(seed + 1).uniform(0, T_MAX, size=u.shape[:2])
    x = x0[:, None, :] + t[..., None] * u
    keep = predict_proba(attacker, x.reshape(-1, N_INPUT))[:, HARM].reshape(t.shape) > 0.5
    return np.where(keep[..., None], x, x0[:, None, :])


def attack_success(world: World, target, x0, proposals) -> np.ndarray:
    """Ground-truth judge: behaviour b succeeds iff the target complies with a request
    (P_T(harm) <= 0.5) that is truly harmful (g*_0 > 0), over all proposals or x0 itself.

    x0: (n_beh, 16); proposals: (n_beh, n_dir, 16). Returns bool, shape (n_beh,).
    """
    x0 = as_array("x0", x0, ndim=2)
    proposals = as_array("proposals", proposals, ndim=3)
    if proposals.shape[0] != x0.shape[0]:
        raise ValueError(f"proposals hold {proposals.shape[0]} behaviours, x0 {x0.shape[0]}")
    x = np.concatenate([x0[:, None, :], proposals], axis=1)  # the direct query comes first
    flat = x.reshape(-1, N_INPUT)
    complies = predict_proba(target, flat)[:, HARM] <= 0.5
    harmful = world.scores(flat)[:, HARM] > 0
    return (complies & harmful).reshape(x.shape[:2]).any(axis=1)


def success_tensor(world, attackers: Pool, targets: Pool, x0, proposals: list) -> np.ndarray:
    """Success of every (attacker, target, behaviour), bool shape (n_A, n_T, n_beh)."""
    if len(proposals) != len(attackers.models):
        raise ValueError(f"need one proposal array per attacker, got {len(proposals)}")
    return np.array([[attack_success(world, t, x0, p) for t in targets.models] for p in proposals])


# ---------------------------------------------------------------------------- one arena
SAFETY_HARM_WEIGHT = 10.0  # the "Llama-2" targets: harm loss weighted 10x (extra safety training)


@dataclass(frozen=True)
class Arena:
    """One world with its attacker, target and extra-safety target pools and its behaviours."""

    world: World
    attackers: Pool
    targets: Pool
    safety: Pool  # two targets of a third and two thirds of the capability grade, harm x10
    x0: np.ndarray  # (n_behaviours, 16)
    seed: int


def build_arena(seed: int, n_models: int, n_behaviours: int, progress: bool = True) -> Arena:
    """Train the pools of one world; attackers and targets use disjoint training seeds."""
    _check_int("n_models", n_models, 3)
    world, base = make_world(seed), 10_000 * _check_int("seed", seed, 0)
    x_eval = sample_inputs(20_000, base + 1)
    configs = graded_configs(n_models)
    safe = [
        StudentConfig(c.width, c.n_train, c.steps, SAFETY_HARM_WEIGHT)
        for c in (configs[n_models // 3], configs[2 * n_models // 3])
    ]

    def label(name: str) -> str | None:
        return f"seed {seed}: {name}" if progress else None

    return Arena(
        world,
        train_pool(world, configs, base + 100, x_eval, label("attackers")),
        train_pool(world, configs, base + 200, x_eval, label("targets")),
        train_pool(world, safe, base + 300, x_eval, label("safety-trained targets")),
        sample_behaviours(world, n_behaviours, base + 3),
        seed,
    )


def run_attack(arena: Arena, n_dir: int, kappa: float, method: str = "boundary"):
    """Attack every target (ordinary, then safety-trained) with every attacker.

    method: 'boundary' (the chapter's attack) or 'random' (the failed pilot; kappa unused).
    Returns bool success tensors of shape (n_A, n_T, n_beh) and (n_A, 2, n_beh).
    """
    if method not in ("boundary", "random"):
        raise ValueError(f"method must be 'boundary' or 'random', got {method!r}")
    base = 10_000 * arena.seed + 400
    proposals = [
        propose_boundary(m, arena.x0, n_dir, kappa, base + i)
        if method == "boundary"
        else propose_random(m, arena.x0, n_dir, base + i)
        for i, m in enumerate(arena.attackers.models)
    ]
    return (
        success_tensor(arena.world, arena.attackers, arena.targets, arena.x0, proposals),
        success_tensor(arena.world, arena.attackers, arena.safety, arena.x0, proposals),
    )


# ---------------------------------------------------------------------------- the analysis
def _check_asr(asr, delta=None) -> np.ndarray:
    asr = _check_prob("asr", asr, ndim=2)
    if delta is not None and np.shape(delta) != asr.shape:
        raise ValueError(f"delta must have the shape of asr {asr.shape}, got {np.shape(delta)}")
    return asr


def sharp_drop(asr, delta, threshold: float = 0.5) -> tuple[float, float]:
    """Mean ASR over pairs with delta < -threshold and over pairs with delta > +threshold."""
    asr = _check_asr(asr, delta)
    delta = np.asarray(delta, dtype=float)
    low, high = delta < -threshold, delta > threshold
    if not low.any() or not high.any():
        raise ValueError(f"no pairs with |delta| > {threshold} on one side; widen the pools")
    return float(asr[low].mean()), float(asr[high].mean())


def pooled_slope_ci(asr, delta, n_bootstrap: int, seed: int) -> tuple[float, float, float]:
    """Pooled fit logit(ASR) = w delta + b over all pairs: w and its 95% interval when
    whole attackers (rows) are resampled, the clustered bootstrap. Returns (w, lo, hi)."""
    asr = _check_asr(asr, delta)
    delta = np.asarray(delta, dtype=float)
    _check_int("n_bootstrap", n_bootstrap, 1)
    w = fit_logit_linear(delta.ravel(), asr.ravel(), eps=EPS).w
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_bootstrap):
        rows = rng.integers(0, len(asr), size=len(asr))
        if np.ptp(delta[rows]) > 0:
            draws.append(fit_logit_linear(delta[rows].ravel(), asr[rows].ravel(), eps=EPS).w)
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(w), float(lo), float(hi)


def heldout_top_attackers(asr, delta, c_A, n_heldout: int = 3) -> tuple[float, float]:
    """Fit each target's curve without the n_heldout most capable attackers and predict them.

    Returns (R^2 of the curves, R^2 of each target's mean ASR over the fitting attackers),
    both in probability space over the n_heldout * n_T held-out pairs.
    """
    asr = _check_asr(asr, delta)
    c_A = as_array("c_A", c_A, ndim=1)
    n_heldout = _check_int("n_heldout", n_heldout, 1)
    if len(c_A) != asr.shape[0] or n_heldout > len(c_A) - 2:
        raise ValueError(f"need len(c_A) == {asr.shape[0]} and n_heldout <= n_A - 2")
    order = np.argsort(c_A)
    fit_rows, test_rows = order[:-n_heldout], order[-n_heldout:]
    y, curve, mean = [], [], []
    for t in range(asr.shape[1]):
        fit = fit_logit_linear(delta[fit_rows, t], asr[fit_rows, t], eps=EPS)
        y.append(asr[test_rows, t])
        curve.append(fit.predict(delta[test_rows, t]))
        mean.append(np.full(n_heldout, asr[fit_rows, t].mean()))
    y, curve, mean = (np.concatenate(v) for v in (y, curve, mean))
    return r2_score(y, curve), r2_score(y, mean)


def leave_one_target_out(asr, delta, c_A) -> tuple[float, float]:
    """Leave-one-target-out R^2 (probability space) of two pooled logit-linear models:
    the gap model logit(ASR) = w delta + b and the attacker-only model logit(ASR) = w c_A + b."""
    asr = _check_asr(asr, delta)
    c_A = as_array("c_A", c_A, ndim=1)
    n_T = asr.shape[1]
    if n_T < 3 or len(c_A) != asr.shape[0]:
        raise ValueError(f"need >= 3 targets and len(c_A) == {asr.shape[0]}")
    c_grid = np.repeat(c_A[:, None], n_T, axis=1)
    pred_gap, pred_att = np.empty_like(asr), np.empty_like(asr)
    for t in range(n_T):
        rest = np.arange(n_T) != t
        gap_fit = fit_logit_linear(delta[:, rest].ravel(), asr[:, rest].ravel(), eps=EPS)
        att_fit = fit_logit_linear(c_grid[:, rest].ravel(), asr[:, rest].ravel(), eps=EPS)
        pred_gap[:, t], pred_att[:, t] = gap_fit.predict(delta[:, t]), att_fit.predict(c_A)
    return r2_score(asr.ravel(), pred_gap.ravel()), r2_score(asr.ravel(), pred_att.ravel())


def median_index(c) -> int:
    """Index of the median model by capability (the lower middle one for an even count)."""
    c = as_array("c", c, ndim=1)
    return int(np.argsort(c)[(len(c) - 1) // 2])


def gap_quantities(asr, c_A, c_T) -> dict[str, float]:
    """Every number behind claim checks 1-4 for one ASR matrix (n_A, n_T)."""
    asr = _check_asr(asr)
    c_A, c_T = as_array("c_A", c_A, ndim=1), as_array("c_T", c_T, ndim=1)
    if asr.shape != (len(c_A), len(c_T)):
        raise ValueError(f"asr has shape {asr.shape}, expected ({len(c_A)}, {len(c_T)})")
    delta = gap(c_A, c_T)
    rho_A, p_A = stats.spearmanr(c_A, asr.mean(axis=1))
    low, high = sharp_drop(asr, delta)
    r2_curve, r2_mean = heldout_top_attackers(asr, delta, c_A)
    r2_gap, r2_att = leave_one_target_out(asr, delta, c_A)
    rho_T = stats.spearmanr(c_T, asr[median_index(c_A)]).statistic
    w = fit_logit_linear(delta.ravel(), asr.ravel(), eps=EPS).w
    return {
        "rho_attacker": float(rho_A), "p_attacker": float(p_A), "asr_low": low,
        "asr_high": high, "w_pooled": w, "r2_heldout": r2_curve, "r2_heldout_mean": r2_mean,
        "r2_gap": r2_gap, "r2_attacker_only": r2_att, "rho_median_attacker": float(rho_T),
    }  # fmt: skip


def bootstrap_behaviours(success, c_A, c_T, n_bootstrap: int, seed: int):
    """gap_quantities on ASR matrices rebuilt from resampled behaviours: a DataFrame of draws.

    success: bool (n_A, n_T, n_beh). Its spread is the binomial noise of 'only n_beh behaviours'.
    """
    import pandas as pd

    success = np.asarray(success)
    if success.ndim != 3 or success.dtype != bool:
        raise ValueError(f"success must be a bool array (n_A, n_T, n_beh), got {success.shape}")
    _check_int("n_bootstrap", n_bootstrap, 1)
    rng, n_beh = np.random.default_rng(seed), success.shape[2]
    draws = [
        gap_quantities(success[:, :, rng.integers(0, n_beh, n_beh)].mean(axis=2), c_A, c_T)
        for _ in range(n_bootstrap)
    ]
    return pd.DataFrame(draws)


def split_spearman(asr, accuracy, concepts) -> float:
    """Spearman rho between attackers' mean ASR and their capability on a benchmark split.

    The analysis of Panfilov et al. Sec. 6.1 (ASR against MMLU-Pro subject splits).
    asr: (n_A, n_T); accuracy: (n_A, 9) per-concept accuracy; concepts: the split.
    """
    asr = _check_asr(asr)
    accuracy = _check_prob("accuracy", accuracy, ndim=2)
    concepts = list(concepts)
    if not concepts or any(k not in BENCHMARK for k in concepts) or len(accuracy) != len(asr):
        raise ValueError(
            f"concepts must be a non-empty subset of {BENCHMARK}, one row per attacker"
        )
    c = capability(accuracy[:, concepts].mean(axis=1))
    return float(stats.spearmanr(c, asr.mean(axis=1)).statistic)


def curve_residuals(asr, delta, asr_new, delta_new) -> np.ndarray:
    """Mean ASR residual (observed - predicted) of new targets under the pooled gap curve.

    The curve logit(ASR) = w delta + b is fitted on asr/delta (n_A, n_T); asr_new/delta_new
    (n_A, n_new) are the new targets. Negative: more robust than their capability predicts.
    """
    asr, asr_new = _check_asr(asr, delta), _check_asr(asr_new, delta_new)
    fit = fit_logit_linear(np.ravel(delta), asr.ravel(), eps=EPS)
    return (asr_new - fit.predict(np.ravel(delta_new)).reshape(asr_new.shape)).mean(axis=0)


# ---------------------------------------------------------------------------- real models
# Families Panfilov et al. use as attackers and targets, as regular expressions on model names.
PANFILOV2025_FAMILIES = {
    "Llama-2": r"Llama-2-",
    "Llama-3/3.1": r"Meta-Llama-3",
    "Qwen2 (paper: Qwen2.5)": r"Qwen/Qwen2-",
    "Mistral/Mixtral": r"mistralai/(?:Mistral-7B|Mixtral)",
}


def load_mmlu_pro(path: Path | None = None):
    """ObsScaling's base-model MMLU-Pro accuracies (Open LLM Leaderboard v2) with c = logit(a).

    Returns a DataFrame with columns model, mmlu_pro, c and family (None outside the paper's).
    """
    import pandas as pd

    path = Path(path) if path is not None else DATA_DIR / "base_llm_leaderboard_v2_eval.csv"
    if not path.is_file():
        raise ValueError(f"{path} does not exist; pass the ObsScaling leaderboard-v2 CSV")
    raw = pd.read_csv(path)
    df = pd.DataFrame({"model": raw["Model"], "mmlu_pro": raw["leaderboard_mmlu_pro"]})
    df["c"] = capability(df["mmlu_pro"].to_numpy())
    df["family"] = None
    for family, pattern in PANFILOV2025_FAMILIES.items():
        df.loc[df["model"].str.contains(pattern, regex=True), "family"] = family
    return df


def pooled_curve_band(asr, delta, grid, n_bootstrap: int, seed: int) -> tuple[np.ndarray, ...]:
    """Pooled curve sigmoid(w delta + b) on `grid` with a 95% band from resampled attackers.

    Returns (curve, lo, hi), each shaped like grid.
    """
    asr = _check_asr(asr, delta)
    delta, grid = np.asarray(delta, dtype=float), as_array("grid", grid, ndim=1)
    _check_int("n_bootstrap", n_bootstrap, 1)
    rng, curves = np.random.default_rng(seed), []
    for _ in range(n_bootstrap):
        rows = rng.integers(0, len(asr), size=len(asr))
        if np.ptp(delta[rows]) > 0:
            curves.append(
                fit_logit_linear(delta[rows].ravel(), asr[rows].ravel(), EPS).predict(grid)
            )
    lo, hi = np.percentile(curves, [2.5, 97.5], axis=0)
    return fit_logit_linear(delta.ravel(), asr.ravel(), eps=EPS).predict(grid), lo, hi
