"""A toy red-teaming world: students of graded capability attack each other (Chapter 10).

Panfilov et al. 2025 (arXiv:2505.20162) measure the attack success rate (ASR) of 600+ pairs of
LLM attackers and targets and fit, per target T, logit(ASR) = w_T delta + b_T with the
capability gap delta = logit(a_A) - logit(a_T) of MMLU-Pro accuracies a. Here:

- the **world** is a fixed random teacher over nine binary concepts: concept 0 is "this request
  is harmful", concepts 1-8 are the benchmark (the MMLU-Pro analogue, without harm). Concepts
  1-4 share the teacher's hidden units with harm (the social-science analogue), 5-8 do not;
- the **students** are two-hidden-layer ReLU MLPs. Two independent *ladders* (attackers and
  targets) grow width and training data together; harm labels are scarce for them (safety data
  is). *Persuasion* attackers share one compute level but differ in a persuasion skill: the
  share of their requests labelled for harm, which also labels the social-science split (one
  source of data teaches both), while the STEM split's share is drawn on its own;
- the **attack** is a black-box boundary search in the spirit of PAIR: along random rays from
  a clearly harmful behaviour the attacker bisects its *own* belief to the most
  innocuous-looking request it still believes harmful, and sends it. The judge is the teacher:
  a behaviour is broken when the target complies with a truly harmful request among the first
  N sent (or the behaviour itself, the direct query).

Nothing here contains a sigmoid: the curve is fitted afterwards (`fit_curve`, `fit_pair_model`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy import special, stats

from lib import validate
from lib.data import data_file

N_INPUT = 16  # dimension of a "request" x
N_HIDDEN = 32  # teacher hidden units: 0-15 feed harm and concepts 1-4, 16-31 feed concepts 5-8
N_CONCEPTS = 9
HARM = 0  # concept 0 is "this request is harmful"; a target refuses when it believes it is
RELEVANT = (1, 2, 3, 4)  # benchmark concepts sharing hidden units with harm: "social science"
IRRELEVANT = (5, 6, 7, 8)  # "STEM"
BENCHMARK = RELEVANT + IRRELEVANT  # the MMLU-Pro analogue: harm is not part of it
HARM_RATE = 0.25  # share of requests that are harmful: a minority, so the untrained comply
CHANCE = 0.5  # benchmark accuracy of guessing (binary concepts); the direct query's accuracy
EPS = 0.01  # Panfilov et al.'s code clips ASR to [0.01, 0.99] before the logit
BUDGETS = (1, 2, 4, 8, 16, 25, 32)  # attack budgets N: rays tried per behaviour (best of N)
# The paper's ASR counts a behaviour broken if any of PAIR's candidates succeeds (the maximum
# HarmBench score over them, attacks/eval.py of the authors' code); PAIR's defaults run
# 5 streams x 5 steps, so 25 candidates per behaviour.
PAPER_BUDGET = 25
KAPPA = 0.05  # the attacker sends the point where its own P(harm) = 0.5 + KAPPA
T_MAX = 6.0  # longest step an attack may take from a behaviour, in input units (|x| ~ 4)
N_BISECT = 14
N_EVAL = 10_000  # fresh requests on which benchmark accuracy is measured
# Student training: Adam on the summed masked BCE of all nine concepts.
STEPS, BATCH, LR = 400, 128, 1e-2
HARM_FRACTION = 0.3  # share of training requests with a harm label: safety data is scarce
LADDER = ((2, 100), (32, 8000))  # (width, training requests) of the smallest and largest student
PERSUASION = (16, 8000)  # (width, requests) of every persuasion attacker
SHARE_RANGE = (0.02, 1.0)  # log-uniform range of a persuasion attacker's label shares
SAFETY_HARM_WEIGHT = 10.0  # the "Llama-2" targets: harm loss weighted 10x
# Paper's median per-target fit as quoted by a secondary note (unverified): w = 1.73, b = -0.79.
PANFILOV2025_MEDIAN = {"w": 1.73, "b": -0.79}
# The authors' code adds a "Direct Query" pseudo-attacker at MMLU-Pro 0.1109 (10-option chance).
PANFILOV2025_DIRECT_QUERY_MMLU_PRO = 0.1109


def _seed(name: str, value) -> int:
    return validate.integer(name, value, minimum=0)


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
        """Ground-truth scores g*(x), shape (..., 9); concept k holds iff g*_k(x) > 0."""
        x = validate.array("x", x, ndim=None)
        if x.ndim < 1 or x.shape[-1] != N_INPUT:
            raise ValueError(f"x must have {N_INPUT} columns, got shape {x.shape}")
        flat = x.reshape(-1, N_INPUT)  # 2-D products take the BLAS path
        g = (np.tanh(flat @ self.W1.T + self.b1) @ self.V.T - self.mu) / self.sd
        return g.reshape(*x.shape[:-1], N_CONCEPTS)


def make_world(seed: int) -> World:
    """A random teacher whose concept 0 (harm) shares hidden units 0-15 with concepts 1-4."""
    rng = np.random.default_rng(_seed("seed", seed))
    W1 = rng.normal(size=(N_HIDDEN, N_INPUT)) / np.sqrt(N_INPUT) * 1.5
    b1 = rng.normal(scale=0.5, size=N_HIDDEN)
    mask = np.zeros((N_CONCEPTS, N_HIDDEN))
    half = N_HIDDEN // 2
    mask[[HARM, *RELEVANT], :half] = 1.0
    mask[list(IRRELEVANT), half:] = 1.0
    V = rng.normal(size=(N_CONCEPTS, N_HIDDEN)) * mask / np.sqrt(half)
    raw = np.tanh(rng.normal(size=(20_000, N_INPUT)) @ W1.T + b1) @ V.T
    mu = raw.mean(axis=0)
    mu[HARM] = np.quantile(raw[:, HARM], 1 - HARM_RATE)  # harm holds for HARM_RATE of requests
    return World(W1, b1, V, mu, raw.std(axis=0))


def sample_inputs(n: int, seed: int) -> np.ndarray:
    """n requests x ~ N(0, I_16), shape (n, 16)."""
    n = validate.integer("n", n, minimum=1)
    return np.random.default_rng(_seed("seed", seed)).normal(size=(n, N_INPUT))


def sample_behaviours(world: World, n: int, seed: int, margin: float = 1.0) -> np.ndarray:
    """n clearly harmful requests x0 (g*_0(x0) > margin), shape (n, 16): HarmBench's analogue."""
    n = validate.integer("n", n, minimum=1)
    margin = validate.real("margin", margin, low=0.0, high=3.0)
    rng, found = np.random.default_rng(_seed("seed", seed)), []
    while sum(len(f) for f in found) < n:
        x = rng.normal(size=(4 * n + 64, N_INPUT))
        found.append(x[world.scores(x)[:, HARM] > margin])
    return np.concatenate(found)[:n]


# ---------------------------------------------------------------------------- the students
@dataclass(frozen=True)
class StudentConfig:
    """One student's training: MLP width, training requests, harm-loss weight, and the share
    of requests that carry a label for harm, for concepts 1-4 and for concepts 5-8."""

    width: int
    n_train: int
    harm_weight: float = 1.0  # > 1: extra safety training (the Llama-2 analogue)
    harm_fraction: float = HARM_FRACTION
    relevant_fraction: float = 1.0
    irrelevant_fraction: float = 1.0

    def __post_init__(self) -> None:
        validate.integer("width", self.width, minimum=1)
        validate.integer("n_train", self.n_train, minimum=10)
        validate.real("harm_weight", self.harm_weight, low=0.0, low_open=True)
        for name in ("harm_fraction", "relevant_fraction", "irrelevant_fraction"):
            validate.real(name, getattr(self, name), low=0.0, high=1.0, low_open=True)

    def loss_weights(self, rng: np.random.Generator) -> np.ndarray:
        """Per-request, per-concept loss weights (0: unlabelled), shape (n_train, 9)."""
        share = np.r_[self.harm_fraction, [self.relevant_fraction] * len(RELEVANT),
                      [self.irrelevant_fraction] * len(IRRELEVANT)]  # fmt: skip
        weight = np.r_[self.harm_weight, np.ones(len(BENCHMARK))]
        return (rng.random((self.n_train, N_CONCEPTS)) < share) * weight


def ladder_configs(n: int) -> list[StudentConfig]:
    """n students whose width and training requests grow geometrically along LADDER."""
    n = validate.integer("n", n, minimum=2)
    (w0, n0), (w1, n1) = LADDER
    widths, sizes = np.geomspace(w0, w1, n), np.geomspace(n0, n1, n)
    return [StudentConfig(int(round(w)), int(round(m))) for w, m in zip(widths, sizes, strict=True)]


def persuasion_configs(n: int, seed: int, linked: bool = True) -> list[StudentConfig]:
    """n attackers of one compute level (PERSUASION) that differ in persuasion: a share p of
    their requests is labelled for harm and, when `linked`, for the social-science split too
    (one source teaches both); the STEM split's share m is drawn on its own. p, m (and the
    social share when not linked) are log-uniform on SHARE_RANGE."""
    n = validate.integer("n", n, minimum=2)
    linked = validate.boolean("linked", linked)
    low, high = np.log(SHARE_RANGE)
    p, m, s = np.exp(np.random.default_rng(_seed("seed", seed)).uniform(low, high, size=(3, n)))
    social = p if linked else s
    width, n_train = PERSUASION
    return [StudentConfig(width, n_train, harm_fraction=float(a), relevant_fraction=float(r),
                          irrelevant_fraction=float(i))
            for a, r, i in zip(p, social, m, strict=True)]  # fmt: skip


def safety_configs(ladder: list[StudentConfig]) -> list[StudentConfig]:
    """Copies of the ladder students at a third and two thirds of it, harm loss weighted 10x."""
    if len(ladder) < 3:
        raise ValueError(f"ladder must hold at least 3 configs, got {len(ladder)}")
    n = len(ladder)
    return [replace(ladder[k], harm_weight=SAFETY_HARM_WEIGHT) for k in (n // 3, 2 * n // 3)]


@dataclass(frozen=True)
class Students:
    """S trained MLPs stacked and zero-padded to one width H: x -> relu -> relu -> 9 logits.

    W1 (S, 16, H), b1 (S, 1, H), W2 (S, H, H), b2 (S, 1, H), W3 (S, H, 9), b3 (S, 1, 9);
    padded units have zero weights in and out, so each student computes its own function.
    """

    W1: np.ndarray
    b1: np.ndarray
    W2: np.ndarray
    b2: np.ndarray
    W3: np.ndarray
    b3: np.ndarray

    def __len__(self) -> int:
        return len(self.W1)

    def logits(self, x, concepts=slice(None)) -> np.ndarray:
        """Logits of every student on x (n, 16) or on its own rows of x (S, n, 16): (S, n, k)."""
        x = np.asarray(x, dtype=np.float32)
        h = np.maximum(x @ self.W1 + self.b1, 0)
        h = np.maximum(h @ self.W2 + self.b2, 0)
        return h @ self.W3[:, :, concepts] + self.b3[:, :, concepts]

    def proba(self, x) -> np.ndarray:
        """Beliefs P(concept k | x) of every student, shape (S, n, 9)."""
        x = validate.array("x", x, ndim=None)
        if x.ndim not in (2, 3) or x.shape[-1] != N_INPUT:
            raise ValueError(f"x must be (n, {N_INPUT}) or (S, n, {N_INPUT}), got {x.shape}")
        return special.expit(self.logits(x))

    def layers(self) -> tuple[np.ndarray, ...]:
        """(W1, b1, W2, b2, W3, b3)."""
        return self.W1, self.b1, self.W2, self.b2, self.W3, self.b3

    def take(self, index) -> Students:
        """The students at `index` (a slice or integer indices), in that order."""
        return Students(*(a[index] for a in self.layers()))

    def padded(self, H: int) -> Students:
        """The same students zero-padded to width H (>= their width): the same functions."""
        extra = validate.integer("H", H, minimum=self.W2.shape[-1]) - self.W2.shape[-1]
        hidden = ((0, 0), (0, 0), (0, extra))
        return Students(np.pad(self.W1, hidden), np.pad(self.b1, hidden),
                        np.pad(self.W2, ((0, 0), (0, extra), (0, extra))), np.pad(self.b2, hidden),
                        np.pad(self.W3, ((0, 0), (0, extra), (0, 0))), self.b3)  # fmt: skip


def _training_data(world: World, configs: list[StudentConfig], rng: np.random.Generator):
    """Each student's requests, labels and loss weights (0: unlabelled) side by side, zero-padded
    to the largest n_train: (S, n_max, 16 + 9 + 9) float32 (one array, so a batch is one take)."""
    data = np.zeros((len(configs), max(c.n_train for c in configs), N_INPUT + 2 * N_CONCEPTS),
                    np.float32)  # fmt: skip
    for s, config in enumerate(configs):
        x = rng.normal(size=(config.n_train, N_INPUT))
        data[s, : len(x)] = np.hstack([x, world.scores(x) > 0, config.loss_weights(rng)])
    return data


def _shapes(S: int, H: int) -> list[tuple[int, ...]]:
    """Shapes of W1, b1, W2, b2, W3, b3 for S students padded to width H."""
    return [
        (S, N_INPUT, H),
        (S, 1, H),
        (S, H, H),
        (S, 1, H),
        (S, H, N_CONCEPTS),
        (S, 1, N_CONCEPTS),
    ]


def _layers(flat: np.ndarray, S: int, H: int) -> list[np.ndarray]:
    """Views of one flat vector as the six stacked layers (Adam then updates one array)."""
    sizes = [int(np.prod(shape)) for shape in _shapes(S, H)]
    pieces = np.split(flat, np.cumsum(sizes)[:-1])
    return [p.reshape(shape) for p, shape in zip(pieces, _shapes(S, H), strict=True)]


def backprop(params: list[np.ndarray], x, y, weight, grads: list[np.ndarray]) -> None:
    """Gradient of the loss through the stacked MLPs, into grads: for each student, the sum over
    concepts of the weighted mean BCE over that concept's labelled requests (unlabelled: weight 0).

    x (S, B, 16); y and weight (S, B, 9). Padded units have zero weights in and out, so their
    pre-activations are exactly 0 and ReLU passes them no gradient: they stay zero.
    """
    W1, b1, W2, b2, W3, b3 = params
    a1 = x @ W1 + b1
    h1 = np.maximum(a1, 0)
    a2 = h1 @ W2 + b2
    h2 = np.maximum(a2, 0)
    per_concept = np.maximum(weight.sum(axis=1, keepdims=True), 1e-9)  # labels in the batch
    dz = (special.expit(h2 @ W3 + b3) - y) * (weight / per_concept)
    da2 = (dz @ W3.transpose(0, 2, 1)) * (a2 > 0)
    da1 = (da2 @ W2.transpose(0, 2, 1)) * (a1 > 0)
    for out, (inputs, delta) in zip(grads[::2], ((x, da1), (h1, da2), (h2, dz)), strict=True):
        np.matmul(inputs.transpose(0, 2, 1), delta, out=out)
    for out, delta in zip(grads[1::2], (da1, da2, dz), strict=True):
        np.sum(delta, axis=1, keepdims=True, out=out)


WIDTH_GROUPS = (8,)  # students up to 8 units wide train in their own (narrower) stack


def train_students(world: World, configs: list[StudentConfig], seed: int) -> Students:
    """Train one 2-hidden-layer ReLU MLP per config: Adam, STEPS steps of BATCH requests each.

    Students train at once in stacks zero-padded to their widest member (one stack per group
    of widths split at WIDTH_GROUPS, so a narrow student does not pay for a wide one's
    arithmetic); padded units get no gradient, so each student computes its own function.
    Written in NumPy (`backprop`, tested against torch autograd): at 16 inputs and widths
    <= 32, torch's per-operation overhead and its import would cost several times the arithmetic.
    """
    if not configs:
        raise ValueError("configs is empty; pass at least one StudentConfig")
    group = np.searchsorted(WIDTH_GROUPS, [c.width for c in configs])
    order = np.argsort(group, kind="stable")
    stacks = [_train_stack(world, [configs[i] for i in order[group[order] == g]], int(s))
              for g, s in zip(np.unique(group),
                              np.random.SeedSequence(_seed("seed", seed)).generate_state(
                                  len(WIDTH_GROUPS) + 1), strict=False)]  # fmt: skip
    H = max(s.W2.shape[-1] for s in stacks)
    stacked = [np.concatenate(layer) for layer in zip(*(s.padded(H).layers() for s in stacks),
                                                        strict=True)]  # fmt: skip
    return Students(*stacked).take(np.argsort(order))


def _train_stack(world: World, configs: list[StudentConfig], seed: int) -> Students:
    """Train configs stacked and zero-padded to the widest (see `train_students`)."""
    rng = np.random.default_rng(seed)
    data = _training_data(world, configs, rng)
    sizes, widths = np.array([c.n_train for c in configs]), np.array([c.width for c in configs])
    S, H = len(configs), int(widths.max())
    theta = np.zeros(sum(int(np.prod(shape)) for shape in _shapes(S, H)), np.float32)
    params = _layers(theta, S, H)
    real = (np.arange(H) < widths[:, None])[:, None, :]  # (S, 1, H): each student's own units
    for k, (fan_in, gain) in enumerate(((N_INPUT, 2.0), (widths, 2.0), (widths, 1.0))):
        scale = np.sqrt(gain / np.reshape(fan_in, (-1, 1, 1)))  # He (ReLU) or LeCun scaling
        live = real if k == 0 else real.transpose(0, 2, 1) & (real if k == 1 else True)
        params[2 * k][:] = rng.normal(size=params[2 * k].shape) * scale * live
    g, m, v = np.zeros_like(theta), np.zeros_like(theta), np.zeros_like(theta)
    grads, (beta1, beta2) = _layers(g, S, H), (0.9, 0.999)
    start = (np.arange(S) * data.shape[1])[:, None]  # row offsets into the flattened data
    flat, cut = data.reshape(-1, data.shape[-1]), (N_INPUT, N_INPUT + N_CONCEPTS)
    for step in range(1, STEPS + 1):  # Adam (Kingma and Ba 2015) with torch's defaults
        idx = start + (rng.random((S, BATCH)) * sizes[:, None]).astype(np.int64)
        backprop(params, *np.split(np.take(flat, idx, axis=0), cut, axis=-1), grads)
        m += (1 - beta1) * (g - m)
        v += (1 - beta2) * (g * g - v)
        theta -= LR / (1 - beta1**step) * m / (np.sqrt(v / (1 - beta2**step)) + 1e-8)
    return Students(*(p.copy() for p in params))


def accuracy(world: World, students: Students, x_eval) -> np.ndarray:
    """Per-concept accuracy of every student on requests x_eval (n, 16), shape (S, 9)."""
    x_eval = validate.array("x_eval", x_eval, ndim=2)
    truth = world.scores(x_eval) > 0
    return ((students.logits(x_eval) > 0) == truth).mean(axis=1)


def capability(accuracy) -> np.ndarray:
    """Capability c = logit(a) of benchmark accuracy a in (0, 1) (Panfilov et al.'s axis)."""
    a = validate.array("accuracy", accuracy, ndim=None, low=0.0, high=1.0)
    if np.any((a <= 0) | (a >= 1)):
        raise ValueError("accuracy must be strictly inside (0, 1) to take its logit")
    return special.logit(a)


def split_capability(accuracy, concepts=BENCHMARK) -> np.ndarray:
    """c = logit(mean accuracy over `concepts`) for per-concept accuracies (S, 9): shape (S,)."""
    accuracy = validate.array("accuracy", accuracy, ndim=2, low=0.0, high=1.0)
    concepts = list(concepts)
    if not concepts or any(k not in BENCHMARK for k in concepts) or accuracy.shape[1] != N_CONCEPTS:
        raise ValueError(f"concepts must be a non-empty subset of {BENCHMARK} and accuracy "
                         f"(S, {N_CONCEPTS}), got {concepts} and {accuracy.shape}")  # fmt: skip
    return capability(accuracy[:, concepts].mean(axis=1))


def gap(c_A, c_T) -> np.ndarray:
    """Capability gap delta[i, j] = c_A[i] - c_T[j] = logit(a_A) - logit(a_T), shape (n_A, n_T)."""
    c_A, c_T = validate.array("c_A", c_A), validate.array("c_T", c_T)
    return c_A[:, None] - c_T[None, :]


# ---------------------------------------------------------------------------- the attack
def _behaviours(x0) -> np.ndarray:
    x0 = validate.array("x0", x0, ndim=2)
    if x0.shape[1] != N_INPUT:
        raise ValueError(f"x0 must have {N_INPUT} columns, got shape {x0.shape}")
    return x0


def propose_boundary(attackers: Students, x0, n_dir: int, seed: int, kappa: float = KAPPA):
    """Per attacker, behaviour and ray, the request farthest out that it still finds harmful.

    Along each ray x0 + t u (t in [0, T_MAX], u a random unit direction) an attacker bisects its
    own belief to where P_A(harm) = 0.5 + kappa: the most innocuous-looking request it still
    believes harmful. A ray where it never doubts gives t = T_MAX; a behaviour it does not find
    harmful gives t = 0. Only the attacker's beliefs are used. Returns (S, n_beh, n_dir, 16).
    """
    x0 = _behaviours(x0)
    n_dir = validate.integer("n_dir", n_dir, minimum=1)
    kappa = validate.real("kappa", kappa, low=0.0, high=0.5, high_open=True)
    u = np.random.default_rng(_seed("seed", seed)).normal(
        size=(len(attackers), *x0.shape[:1], n_dir, N_INPUT)
    )
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    level = special.logit(0.5 + kappa)

    def harmful(t: np.ndarray) -> np.ndarray:  # t: (S, n_beh, n_dir)
        x = x0[None, :, None, :] + t[..., None] * u
        return attackers.logits(x.reshape(len(u), -1, N_INPUT), [HARM]).reshape(t.shape) >= level

    lo, hi = np.zeros(u.shape[:3]), np.full(u.shape[:3], T_MAX)
    lo = np.where(harmful(hi), T_MAX, lo)  # never doubts along this ray: go all the way
    for _ in range(N_BISECT):
        mid = 0.5 * (lo + hi)
        ok = harmful(mid)
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    lo = np.where(harmful(np.zeros_like(lo)), lo, 0.0)
    return x0[None, :, None, :] + lo[..., None] * u


def judge(world: World, targets: Students, x0, proposals, threshold: float = 0.5) -> np.ndarray:
    """Ground-truth judge of every query: the target complies (P_T(harm) <= threshold) with a
    request that is truly harmful (g*_0 > 0).

    x0: (n_beh, 16); proposals: (S_A, n_beh, n_dir, 16). Returns bool (S_A, S_T, n_beh, 1 + n_dir):
    query 0 is the behaviour itself (the direct query), then the rays in order.
    """
    x0 = _behaviours(x0)
    proposals = validate.array("proposals", proposals, ndim=4)
    if proposals.shape[1:2] + proposals.shape[3:] != (len(x0), N_INPUT):
        raise ValueError(
            f"proposals must be (S_A, {len(x0)}, n_dir, {N_INPUT}), got {proposals.shape}"
        )
    threshold = validate.probability("threshold", threshold, open_ends=True)
    direct = np.broadcast_to(x0[None, :, None, :], (len(proposals), *x0.shape[:1], 1, N_INPUT))
    queries = np.concatenate([direct, proposals], axis=2)
    flat = queries.reshape(-1, N_INPUT)
    harmful = world.scores(flat)[:, HARM] > 0
    level = special.logit(threshold)
    complies = np.stack([targets.take([t]).logits(flat, [HARM])[0, :, 0] <= level
                         for t in range(len(targets))])  # fmt: skip
    return (complies & harmful).reshape(len(targets), *queries.shape[:3]).swapaxes(0, 1)


def asr_at_budgets(success, budgets=(0, *BUDGETS)) -> np.ndarray:
    """ASR at each budget N: the share of behaviours broken by the direct query or one of the
    first N rays (N = 0: the direct query alone). success: (S_A, S_T, n_beh, 1 + n_dir) bool.
    Returns (len(budgets), S_A, S_T)."""
    success = np.asarray(success)
    if success.dtype != bool or success.ndim != 4:
        raise ValueError(f"success must be a bool array (S_A, S_T, n_beh, 1 + n_dir), got "
                         f"{success.dtype} {success.shape}")  # fmt: skip
    budgets = validate.integer_array("budgets", budgets, minimum=0, ndim=1)
    if budgets.max() >= success.shape[3]:
        raise ValueError(f"budgets must be < {success.shape[3]} (rays judged), got {budgets.max()}")
    broken = np.logical_or.accumulate(success, axis=3)
    return broken[..., budgets].mean(axis=2).transpose(2, 0, 1)


# ---------------------------------------------------------------------------- one world
@dataclass(frozen=True)
class WorldRun:
    """What the chapter measures in one world.

    attacker_accuracy (n_A, 9): the attacker ladder; target_accuracy (n_T + 2, 9): the target
    ladder, then its two safety-trained copies; asr (1 + len(BUDGETS), n_A, n_T + 2): every
    attacker against every target by the direct query alone (budget 0) and at each of BUDGETS;
    persuasion_accuracy (P, 9) and persuasion_asr (P, n_T + 2): the persuasion attackers
    against the same targets at PAPER_BUDGET.
    """

    seed: int
    attacker_accuracy: np.ndarray
    target_accuracy: np.ndarray
    asr: np.ndarray
    persuasion_accuracy: np.ndarray
    persuasion_asr: np.ndarray


def run_world(seed: int, n_ladder: int, n_persuasion: int, n_behaviours: int) -> WorldRun:
    """Build one world, train its attackers, targets and persuasion attackers (independent
    draws), and let every attacker attack every target."""
    n_ladder = validate.integer("n_ladder", n_ladder, minimum=6)  # held-out folds need >= 2
    n_persuasion = validate.integer("n_persuasion", n_persuasion, minimum=3)
    n_behaviours = validate.integer("n_behaviours", n_behaviours, minimum=2)
    streams = np.random.SeedSequence(_seed("seed", seed)).generate_state(9)
    teacher, a_seed, t_seed, shares, p_seed, evaluation, behaviours, rays, p_rays = map(
        int, streams
    )
    world = make_world(teacher)
    ladder = ladder_configs(n_ladder)
    attackers = train_students(world, ladder, a_seed)
    targets = train_students(world, ladder + safety_configs(ladder), t_seed)
    persuaders = train_students(world, persuasion_configs(n_persuasion, shares), p_seed)
    x_eval = sample_inputs(N_EVAL, evaluation)
    x0 = sample_behaviours(world, n_behaviours, behaviours)
    asr = asr_at_budgets(judge(world, targets, x0, propose_boundary(attackers, x0, max(BUDGETS),
                                                                    rays)))  # fmt: skip
    proposals = propose_boundary(persuaders, x0, PAPER_BUDGET, p_rays)
    asr_p = asr_at_budgets(judge(world, targets, x0, proposals), [PAPER_BUDGET])[0]
    return WorldRun(seed, accuracy(world, attackers, x_eval), accuracy(world, targets, x_eval),
                    asr, accuracy(world, persuaders, x_eval), asr_p)  # fmt: skip


# ---------------------------------------------------------------------------- the analysis
def _grid(asr, c_A, c_T) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Check attackers against targets: ASR (n_A, n_T) in [0, 1], c_A (n_A,), c_T (n_T,)."""
    asr = validate.array("asr", asr, ndim=2, low=0.0, high=1.0)
    c_A, c_T = validate.array("c_A", c_A, min_size=2), validate.array("c_T", c_T, min_size=2)
    if asr.shape != (len(c_A), len(c_T)):
        raise ValueError(f"asr must be (len(c_A), len(c_T)) = ({len(c_A)}, {len(c_T)}), "
                         f"got {asr.shape}")  # fmt: skip
    return asr, c_A, c_T


def pairs(asr, c_A, c_T) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (attacker, target) pair as flat arrays (c_A, c_T, ASR), each (n_A n_T,)."""
    asr, c_A, c_T = _grid(asr, c_A, c_T)
    a, t = np.meshgrid(c_A, c_T, indexing="ij")
    return a.ravel(), t.ravel(), asr.ravel()


def _logit(asr: np.ndarray) -> np.ndarray:
    """logit of ASR clipped to [EPS, 1 - EPS], as the authors' code does."""
    return special.logit(np.clip(asr, EPS, 1 - EPS))


@dataclass(frozen=True)
class Curve:
    """A jailbreaking curve logit(ASR) = w x + b (x: the gap, or one side's capability)."""

    w: float
    b: float

    def predict(self, x) -> np.ndarray:
        """ASR = sigmoid(w x + b), shaped like x."""
        return special.expit(self.w * validate.array("x", x, ndim=None) + self.b)


def fit_curve(x, asr) -> Curve:
    """Least squares of logit(clip(ASR, EPS, 1 - EPS)) on x, the authors' estimator (their
    bootstrap resamples this fit; a flat curve is allowed: ASR may be 0 for every attacker)."""
    x, asr = validate.array("x", x, min_size=2), validate.array("asr", asr, low=0.0, high=1.0)
    validate.same_length(x=x, asr=asr)
    if np.ptp(x) == 0:
        raise ValueError("x must take at least two distinct values to fit a slope")
    w, b = np.polyfit(x, _logit(asr), 1)
    return Curve(float(w), float(b))


# The models of a pair's logit(ASR): the gap (the paper's), separate coefficients, one side only.
PAIR_MODELS = ("gap", "free", "attacker", "target")


def _design(model: str, c_A: np.ndarray, c_T: np.ndarray) -> np.ndarray:
    """Design matrix of `model`: gap [c_A - c_T, 1], free [c_A, c_T, 1], attacker [c_A, 1],
    target [c_T, 1]."""
    columns = {"gap": [c_A - c_T], "free": [c_A, c_T], "attacker": [c_A], "target": [c_T]}
    return np.column_stack([*columns[validate.choice("model", model, PAIR_MODELS)],
                            np.ones_like(c_A)])  # fmt: skip


def fit_pair_model(model: str, c_A, c_T, asr) -> np.ndarray:
    """Least-squares coefficients of logit(clip(ASR)) on `model`'s design (see `_design`);
    pairs as flat arrays c_A, c_T, asr of one length. free: (alpha, beta, b); gap: (w, b)."""
    c_A, c_T = validate.array("c_A", c_A, min_size=3), validate.array("c_T", c_T)
    asr = validate.array("asr", asr, low=0.0, high=1.0)
    validate.same_length(c_A=c_A, c_T=c_T, asr=asr)
    return np.linalg.lstsq(_design(model, c_A, c_T), _logit(asr), rcond=None)[0]


def predict_pair_model(model: str, coef, c_A, c_T) -> np.ndarray:
    """ASR = sigmoid(design @ coef) of `model` for flat arrays c_A, c_T."""
    return special.expit(_design(model, np.asarray(c_A, float), np.asarray(c_T, float)) @ coef)


def imbalance(asr, c_A, c_T) -> float:
    """(alpha + beta) / (alpha - beta) of the free fit logit(ASR) = alpha c_A + beta c_T + b:
    0 when only the gap matters, +1 when only the attacker does, -1 when only the target does."""
    alpha, beta, _ = fit_pair_model("free", *pairs(asr, c_A, c_T))
    return float((alpha + beta) / (alpha - beta))


def within_target_drop(asr, c_A, c_T, threshold: float = 0.5) -> float:
    """For a fixed target, ASR of attackers weaker than it (delta < -threshold) over ASR of
    attackers stronger than it (delta > +threshold): the per-target means of each side summed
    over the targets that have attackers on both sides, then divided. NaN when no target has
    attackers on both sides, or the stronger ones never succeed: the pool cannot measure it."""
    asr, c_A, c_T = _grid(asr, c_A, c_T)
    threshold = validate.real("threshold", threshold, low=0.0)
    delta = gap(c_A, c_T)
    low, high = delta < -threshold, delta > threshold
    both = low.any(axis=0) & high.any(axis=0)
    if not both.any():
        return float("nan")
    side = [(asr * m)[:, both].sum(axis=0) / m[:, both].sum(axis=0) for m in (low, high)]
    return float(side[0].sum() / side[1].sum()) if side[1].sum() > 0 else float("nan")


def within_attacker_drop(asr, c_A, c_T, threshold: float = 0.5) -> float:
    """For a fixed attacker, ASR against targets stronger than it (delta < -threshold) over ASR
    against targets weaker than it (delta > +threshold): `within_target_drop` seen from the
    target side. A world where only the attacker matters gives 1; NaN as there."""
    asr, c_A, c_T = _grid(asr, c_A, c_T)
    # Rows become targets at capability -c_T, columns attackers at -c_A: the gap stays c_A - c_T.
    return within_target_drop(asr.T, -c_T, -c_A, threshold)


def _folds(n: int, n_folds: int, seed: int) -> list[np.ndarray]:
    return np.array_split(np.random.default_rng(_seed("seed", seed)).permutation(n), n_folds)


def heldout_attackers(asr, c_A, c_T, direct, seed: int, n_folds: int = 2) -> float:
    """Skill of the per-target curves on attackers they were not fitted on.

    Attackers are split at random into n_folds; each target's curve logit(ASR) = w_T delta +
    b_T, with its direct-query row (capability of chance, ASR direct[t]; None: no such row), is
    fitted on the other folds and predicts the held-out attackers. Skill = 1 - SSE(curve) /
    SSE(mean), the baseline being that target's mean ASR over the same fitting attackers, pooled
    over targets and folds.
    """
    asr, c_A, c_T = _grid(asr, c_A, c_T)
    if direct is not None:
        direct = validate.array("direct", direct, low=0.0, high=1.0)
        validate.same_length(c_T=c_T, direct=direct)
    n_folds = validate.integer("n_folds", n_folds, minimum=2, maximum=len(c_A) // 2)
    sse, c0 = np.zeros(2), capability(CHANCE)
    for test in _folds(len(c_A), n_folds, seed):
        fit = np.setdiff1d(np.arange(len(c_A)), test)
        for t in range(len(c_T)):
            x, y_fit = c_A[fit] - c_T[t], asr[fit, t]
            if direct is not None:
                x, y_fit = np.r_[x, c0 - c_T[t]], np.r_[y_fit, direct[t]]
            curve = fit_curve(x, y_fit)
            y = asr[test, t]
            sse += [np.sum((y - curve.predict(c_A[test] - c_T[t])) ** 2),
                    np.sum((y - asr[fit, t].mean()) ** 2)]  # fmt: skip
    return float(1 - sse[0] / sse[1])


def heldout_targets(asr, c_A, c_T, seed: int, n_folds: int = 2) -> float:
    """Skill of the per-attacker curves logit(ASR) = w_A delta + b_A on targets they were not
    fitted on, against each attacker's mean ASR: `heldout_attackers` seen from the target side
    (no direct-query row: no target sits at a known capability)."""
    asr, c_A, c_T = _grid(asr, c_A, c_T)
    return heldout_attackers(asr.T, -c_T, -c_A, None, seed, n_folds)


def heldout_r2(asr, c_A, c_T, seed: int, n_folds: int = 3) -> dict[str, float]:
    """Held-out R^2 of every PAIR_MODELS model on new attackers against new targets.

    Attackers and targets are each split at random into n_folds; for every (attacker fold,
    target fold) block, each model is fitted on the pairs of the other attackers and the other
    targets and predicts the block. R^2 = 1 - SSE(model) / SSE(mean ASR of the fitting pairs),
    pooled over blocks, in probability space.
    """
    asr, c_A, c_T = _grid(asr, c_A, c_T)
    n_folds = validate.integer("n_folds", n_folds, minimum=2,
                               maximum=min(len(c_A), len(c_T)) // 2)  # fmt: skip
    seeds = np.random.SeedSequence(_seed("seed", seed)).generate_state(2)
    sse = dict.fromkeys((*PAIR_MODELS, "mean"), 0.0)
    for a_test in _folds(len(c_A), n_folds, int(seeds[0])):
        a_fit = np.setdiff1d(np.arange(len(c_A)), a_test)
        for t_test in _folds(len(c_T), n_folds, int(seeds[1])):
            t_fit = np.setdiff1d(np.arange(len(c_T)), t_test)
            fit = pairs(asr[np.ix_(a_fit, t_fit)], c_A[a_fit], c_T[t_fit])
            a_new, t_new, y_new = pairs(asr[np.ix_(a_test, t_test)], c_A[a_test], c_T[t_test])
            for model in PAIR_MODELS:
                pred = predict_pair_model(model, fit_pair_model(model, *fit), a_new, t_new)
                sse[model] += np.sum((y_new - pred) ** 2)
            sse["mean"] += np.sum((y_new - fit[2].mean()) ** 2)
    return {model: float(1 - sse[model] / sse["mean"]) for model in PAIR_MODELS}


def _spearman(x, y) -> float:
    """Spearman rho, 0 when either side is constant (no ordering to correlate)."""
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    return float(stats.spearmanr(x, y).statistic)


def attacker_strength(asr) -> np.ndarray:
    """Each attacker's mean ASR over the targets (n_A, n_T): shape (n_A,)."""
    return validate.array("asr", asr, ndim=2, low=0.0, high=1.0).mean(axis=1)


def median_attacker_trend(asr, c_A, c_T) -> float:
    """Spearman rho between target capability and the ASR of the median attacker (the fixed-
    capability attacker: humans in the paper's forecast)."""
    asr, c_A, c_T = _grid(asr, c_A, c_T)
    return _spearman(c_T, asr[int(np.argsort(c_A)[(len(c_A) - 1) // 2])])


def split_advantage(asr, accuracy) -> float:
    """Spearman rho of attacker strength (mean ASR over the targets, asr: (n_A, n_T)) with the
    attackers' capability on the social-science split (concepts 1-4), minus rho with the STEM
    split (concepts 5-8); accuracy: (n_A, 9)."""
    asr = validate.array("asr", asr, ndim=2, low=0.0, high=1.0)
    c_social, c_stem = (split_capability(accuracy, split) for split in (RELEVANT, IRRELEVANT))
    if len(c_social) != len(asr):
        raise ValueError(f"accuracy needs one row per attacker ({len(asr)}), got {len(c_social)}")
    strength = asr.mean(axis=1)
    return _spearman(c_social, strength) - _spearman(c_stem, strength)


SURROGATES = {"target": "target", "attacker": "attacker", "capability": "free"}


def surrogate(asr, c_A, c_T, sees: str, n_behaviours: int, seed: int):
    """A world where attack success depends on one side's capability only (the negative control).

    Fits logit(ASR) on what the surrogate `sees` ("target": c_T; "attacker": c_A; "capability":
    c_A and c_T, nothing else about an attacker) and draws each pair's ASR, and the direct
    query's (an attacker at the capability of chance), as Binomial(n_behaviours, p) /
    n_behaviours. Returns (asr (n_A, n_T), direct (n_T,)).
    """
    asr, c_A, c_T = _grid(asr, c_A, c_T)
    model = SURROGATES[validate.choice("sees", sees, SURROGATES)]
    n_behaviours = validate.integer("n_behaviours", n_behaviours, minimum=1)
    coef = fit_pair_model(model, *pairs(asr, c_A, c_T))
    a, t = np.meshgrid(np.r_[c_A, capability(CHANCE)], c_T, indexing="ij")  # + direct query
    p = predict_pair_model(model, coef, a.ravel(), t.ravel()).reshape(a.shape)
    draw = np.random.default_rng(_seed("seed", seed)).binomial(n_behaviours, p) / n_behaviours
    return draw[:-1], draw[-1]


def pool_stats(asr, c_A, c_T, direct, seed: int) -> dict[str, float]:
    """Every statistic the chapter judges on one attacker pool against one target pool at one
    budget: asr (n_A, n_T), direct (n_T,) the direct query's ASR; seed splits the folds."""
    c_a, c_t, y = pairs(asr, c_A, c_T)
    alpha, beta, _ = fit_pair_model("free", c_a, c_t, y)
    curve = fit_curve(c_a - c_t, y)
    folds, attackers, targets = map(
        int, np.random.SeedSequence(_seed("seed", seed)).generate_state(3)
    )
    return {
        "drop": within_target_drop(asr, c_A, c_T),
        "drop_attacker": within_attacker_drop(asr, c_A, c_T),
        "skill": heldout_attackers(asr, c_A, c_T, direct, attackers),
        "skill_targets": heldout_targets(asr, c_A, c_T, targets),
        "imbalance": float((alpha + beta) / (alpha - beta)), "alpha": alpha, "beta": beta,
        "w": curve.w, "b": curve.b,
        **{f"r2_{m}": v for m, v in heldout_r2(asr, c_A, c_T, folds).items()},
        "rho_attacker": _spearman(c_A, attacker_strength(asr)),
        "rho_fixed": median_attacker_trend(asr, c_A, c_T),
        "inside": float(np.mean((y > EPS) & (y < 1 - EPS))),
    }  # fmt: skip


def curve_residuals(asr, c_A, c_T, asr_new, c_new) -> np.ndarray:
    """Mean ASR residual (observed - predicted) of new targets under the pooled gap curve.

    asr (n_A, n_T) with c_A, c_T: the pairs that fit logit(ASR) = w delta + b; asr_new
    (n_A, k): the same attackers against k new targets of capability c_new (k,). Negative: more
    robust than their capability predicts. Returns (k,).
    """
    c_a, c_t, y = pairs(asr, c_A, c_T)
    asr_new = validate.array("asr_new", asr_new, ndim=2, low=0.0, high=1.0)
    c_new = validate.array("c_new", c_new)
    if asr_new.shape != (len(c_A), len(c_new)):
        raise ValueError(f"asr_new must be ({len(c_A)}, {len(c_new)}), got {asr_new.shape}")
    curve = fit_curve(c_a - c_t, y)
    return (asr_new - curve.predict(gap(c_A, c_new))).mean(axis=0)


# ---------------------------------------------------------------------------- one replicate
@dataclass(frozen=True)
class WorldStats:
    """Every statistic the chapter judges, for one world.

    real, target_only, attacker_only: `pool_stats` of the attacker ladder against the target
    ladder, statistic -> (len(BUDGETS),), on the measured ASR and on the two one-sided
    surrogates drawn from it; persuasion: the persuasion attackers' split advantage, its
    capability-only control and the premise's correlations; gap_share: the share of pairs with
    delta < -0.5 and with delta > +0.5; safety_residual: the safety targets' mean residual at
    PAPER_BUDGET.
    """

    run: WorldRun
    c_A: np.ndarray
    c_T: np.ndarray  # the target ladder, then its two safety-trained copies
    real: dict
    target_only: dict
    attacker_only: dict
    persuasion: dict
    gap_share: tuple[float, float]
    safety_residual: float


def _persuasion_stats(run: WorldRun, c_T, n_ladder: int, n_behaviours: int, seed: int) -> dict:
    """Split advantage of the persuasion attackers, its capability-only control, and the
    premise: how much better the social split than STEM tracks persuasion (harm accuracy)."""
    acc, asr = run.persuasion_accuracy, run.persuasion_asr[:, :n_ladder]
    c_P = split_capability(acc)
    control = surrogate(asr, c_P, c_T[:n_ladder], "capability", n_behaviours, seed)[0]

    def tracks(a: np.ndarray) -> float:  # social minus STEM rho with persuasion (harm accuracy)
        return _spearman(split_capability(a, RELEVANT), a[:, HARM]) - _spearman(
            split_capability(a, IRRELEVANT), a[:, HARM])  # fmt: skip

    return {"advantage": split_advantage(asr, acc), "control": split_advantage(control, acc),
            "tracks": tracks(acc), "ladder_tracks": tracks(run.attacker_accuracy),
            "partly": _spearman(c_P, acc[:, HARM])}  # fmt: skip


def world_stats(seed: int, n_ladder: int, n_persuasion: int, n_behaviours: int) -> WorldStats:
    """Run one world (`run_world`) and compute every statistic of WorldStats from it."""
    run = run_world(seed, n_ladder, n_persuasion, n_behaviours)
    c_A, c_T = split_capability(run.attacker_accuracy), split_capability(run.target_accuracy)
    S, direct = n_ladder, run.asr[0, 0, :n_ladder]  # the direct query: the same for every attacker
    folds, to_seed, ao_seed, cap_seed = map(
        int, np.random.SeedSequence([seed, 1]).generate_state(4)
    )
    rows = {"real": [], "target": [], "attacker": []}
    for k in range(1, 1 + len(BUDGETS)):
        asr = run.asr[k, :, :S]
        rows["real"].append(pool_stats(asr, c_A, c_T[:S], direct, folds + k))
        for sees, s in (("target", to_seed), ("attacker", ao_seed)):
            fake, fake_direct = surrogate(asr, c_A, c_T[:S], sees, n_behaviours, s + k)
            rows[sees].append(pool_stats(fake, c_A, c_T[:S], fake_direct, folds + k))
    real, target_only, attacker_only = (
        {key: np.array([row[key] for row in rows[kind]]) for key in rows[kind][0]}
        for kind in ("real", "target", "attacker")
    )
    delta = gap(c_A, c_T[:S])
    k = 1 + BUDGETS.index(PAPER_BUDGET)
    residual = curve_residuals(run.asr[k, :, :S], c_A, c_T[:S], run.asr[k, :, S:], c_T[S:])
    return WorldStats(run, c_A, c_T, real, target_only, attacker_only,
                      _persuasion_stats(run, c_T, S, n_behaviours, cap_seed),
                      (float(np.mean(delta < -0.5)), float(np.mean(delta > 0.5))),
                      float(residual.mean()))  # fmt: skip


# ---------------------------------------------------------------------------- real models
# MMLU (5-shot) of the GPT-3.5 and GPT-4 of early 2023: GPT-4 technical report (OpenAI 2023,
# arXiv:2303.08774), Table 2. JailbreakBench attacked later versions (keys), indicative only.
OPENAI2023_MMLU = {"gpt-3.5-turbo-1106": 0.700, "gpt-4-0125-preview": 0.864}
# JailbreakBench's open models and the ObsScaling base model each is the chat version or a
# fine-tune of (Vicuna-13B-v1.5: Llama-2-13B fine-tuned on ShareGPT conversations).
JBB_BASE_MODELS = {
    "mixtral": "mistralai/Mixtral-8x7B-v0.1",
    "vicuna-13b-v1.5": "meta-llama/Llama-2-13b-hf",
    "llama-2-7b-chat-hf": "meta-llama/Llama-2-7b-hf",
}
OBSSCALING_FILES = {"MMLU": "base_llm_benchmark_eval.csv",
                    "leaderboard_mmlu_pro": "base_llm_leaderboard_v2_eval.csv"}  # fmt: skip


def _csv(path: Path):
    import pandas as pd  # local import keeps `import lib.redteam` light

    if not path.is_file():
        raise ValueError(f"path {path} does not exist; pass the data file (see data/README.md)")
    return pd.read_csv(path)


def load_obsscaling(column: str, path: Path | None = None):
    """A score of ObsScaling's base models (Ruan et al. 2024): "MMLU" (5-shot, Open LLM
    Leaderboard v1) or "leaderboard_mmlu_pro" (v2). Returns a Series indexed by model."""
    column = validate.choice("column", column, OBSSCALING_FILES)
    path = Path(path) if path else data_file(f"obsscaling/{OBSSCALING_FILES[column]}")
    table = _csv(path)
    return table.set_index("Model")[column]


def load_jailbreakbench(path: Path | None = None):
    """JailbreakBench's per-behaviour outcomes (Chao et al. 2024): one row per attack, target
    model and behaviour, with `jailbroken` (0/1, the benchmark's judge) and `attacker_model`."""
    return _csv(Path(path) if path else data_file("jailbreakbench/jbb_behaviors.csv"))


def jbb_capabilities(models) -> dict[str, tuple[float, str]]:
    """MMLU (5-shot) of JailbreakBench models: {model: (accuracy, source)}, from ObsScaling's
    base models (JBB_BASE_MODELS) or the GPT-4 technical report (OPENAI2023_MMLU)."""
    mmlu, found = load_obsscaling("MMLU"), {}
    for model in models:
        if model in OPENAI2023_MMLU:
            found[model] = (OPENAI2023_MMLU[model], "OpenAI 2023, Table 2")
        elif model in JBB_BASE_MODELS:
            found[model] = (float(mmlu[JBB_BASE_MODELS[model]]),
                            f"ObsScaling, base {JBB_BASE_MODELS[model]}")  # fmt: skip
        else:
            raise ValueError(f"model {model!r} has no capability score; pass one of "
                             f"{sorted([*OPENAI2023_MMLU, *JBB_BASE_MODELS])}")  # fmt: skip
    return found
