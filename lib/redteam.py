"""A toy red-teaming world: students of graded capability attack each other (Chapter 10).

Panfilov et al. 2025 (arXiv:2505.20162) measure the attack success rate (ASR) of 600+ pairs of
LLM attackers and targets and fit, per target T, logit(ASR) = w_T delta + b_T with the
capability gap delta = logit(a_A) - logit(a_T) of MMLU-Pro accuracies a. Here:

- the **world** is a fixed random teacher over nine binary concepts: concept 0 is "this request
  is harmful", concepts 1-8 are the benchmark (the MMLU-Pro analogue, without harm). Concepts
  1-4 share the teacher's hidden units with harm (the social-science analogue), 5-8 do not;
- the **students** are two-hidden-layer ReLU MLPs. A *ladder* grows width and training data
  together; *decoupled* students share one compute level (mid-ladder width) but see labels for
  each benchmark split on a random share of their requests, so split skill varies apart from
  compute. Harm labels are scarce for everyone (safety data is). Every student is both
  attacker and target;
- the **attack** is a black-box boundary search in the spirit of PAIR: along random rays from
  a clearly harmful behaviour the attacker bisects its *own* belief to the most
  innocuous-looking request it still believes harmful, and sends it. The judge is the teacher:
  a behaviour is broken when the target complies with a truly harmful request among the first
  N_dir sent (or the behaviour itself, the direct query).

Nothing here contains a sigmoid: the curve is fitted afterwards (`fit_curve`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy import special, stats

from lib import validate

N_INPUT = 16  # dimension of a "request" x
N_HIDDEN = 32  # teacher hidden units: 0-15 feed harm and concepts 1-4, 16-31 feed concepts 5-8
N_CONCEPTS = 9
HARM = 0  # concept 0 is "this request is harmful"; a target refuses when it believes it is
RELEVANT = (1, 2, 3, 4)  # benchmark concepts sharing hidden units with harm (by construction)
IRRELEVANT = (5, 6, 7, 8)
BENCHMARK = RELEVANT + IRRELEVANT  # the MMLU-Pro analogue: harm is not part of it
HARM_RATE = 0.25  # share of requests that are harmful: a minority, so the untrained comply
CHANCE = 0.5  # benchmark accuracy of guessing (binary concepts); the direct query's accuracy
EPS = 0.01  # Panfilov et al.'s code clips ASR to [0.01, 0.99] before the logit
BUDGETS = (1, 4, 32)  # attack budgets N_dir: rays tried per behaviour (best of N, oracle judge)
DEFAULT_BUDGET = 4  # the decoupled attackers' budget
KAPPA = 0.05  # the attacker sends the point where its own P(harm) = 0.5 + KAPPA
T_MAX = 6.0  # longest step an attack may take from a behaviour, in input units (|x| ~ 4)
N_BISECT = 14
N_EVAL = 10_000  # fresh requests on which benchmark accuracy is measured
# Student training: Adam on the summed masked BCE of all nine concepts.
STEPS, BATCH, LR = 400, 128, 1e-2
HARM_FRACTION = 0.3  # share of training requests with a harm label: safety data is scarce
LADDER = ((2, 100), (32, 8000))  # (width, training requests) of the smallest and largest student
DECOUPLED = (16, 8000)  # (width, requests) of every decoupled student: mid-ladder width
SPLIT_FRACTIONS = (0.02, 1.0)  # range of the log-uniform label share of a decoupled student's split
SAFETY_HARM_WEIGHT = 10.0  # the "Llama-2" targets: harm loss weighted 10x
# Paper's median per-target fit as quoted by a secondary note (unverified): w = 1.73, b = -0.79.
PANFILOV2025_MEDIAN = {"w": 1.73, "b": -0.79}
# The authors' code adds a "Direct Query" pseudo-attacker at MMLU-Pro 0.1109 (10-option chance).
PANFILOV2025_DIRECT_QUERY_MMLU_PRO = 0.1109
DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "obsscaling"


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


def decoupled_configs(n: int, seed: int) -> list[StudentConfig]:
    """n students of one compute level (DECOUPLED) whose label shares of the two benchmark
    splits are drawn independently, log-uniform on SPLIT_FRACTIONS."""
    n = validate.integer("n", n, minimum=2)
    low, high = np.log(SPLIT_FRACTIONS)
    share = np.exp(np.random.default_rng(_seed("seed", seed)).uniform(low, high, size=(n, 2)))
    width, n_train = DECOUPLED
    return [StudentConfig(width, n_train, relevant_fraction=float(r), irrelevant_fraction=float(i))
            for r, i in share]  # fmt: skip


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

    def take(self, index) -> Students:
        """The students at `index` (a slice or integer indices), in that order."""
        return Students(*(a[index] for a in (self.W1, self.b1, self.W2, self.b2, self.W3, self.b3)))


def _training_data(world: World, configs: list[StudentConfig], rng: np.random.Generator):
    """Each student's requests, labels and loss weights (0: unlabelled), zero-padded to the
    largest n_train: x (S, n_max, 16), y and weight (S, n_max, 9), float32."""
    shape = (len(configs), max(c.n_train for c in configs))
    x = np.zeros((*shape, N_INPUT), np.float32)
    y, weight = (
        np.zeros((*shape, N_CONCEPTS), np.float32),
        np.zeros((*shape, N_CONCEPTS), np.float32),
    )
    for s, config in enumerate(configs):
        n = config.n_train
        x[s, :n] = rng.normal(size=(n, N_INPUT))
        y[s, :n] = world.scores(x[s, :n]) > 0
        weight[s, :n] = config.loss_weights(rng)
    return x, y, weight


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


def train_students(world: World, configs: list[StudentConfig], seed: int) -> Students:
    """Train one 2-hidden-layer ReLU MLP per config: Adam, STEPS steps of BATCH requests each.

    All students train at once, stacked and zero-padded to the widest; padded units get no
    gradient, so each student follows exactly the path it would follow alone. Written in NumPy
    (`backprop`, tested against torch autograd): at 16 inputs and widths <= 32, torch's
    per-operation overhead and its import would cost several times the arithmetic.
    """
    if not configs:
        raise ValueError("configs is empty; pass at least one StudentConfig")
    rng = np.random.default_rng(_seed("seed", seed))
    x, y, weight = _training_data(world, configs, rng)
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
    start = (np.arange(S) * x.shape[1])[:, None]  # row offsets into the flattened arrays
    flat = [a.reshape(-1, a.shape[-1]) for a in (x, y, weight)]
    for step in range(1, STEPS + 1):  # Adam (Kingma and Ba 2015) with torch's defaults
        idx = start + (rng.random((S, BATCH)) * sizes[:, None]).astype(np.int64)
        backprop(params, *(np.take(a, idx, axis=0) for a in flat), grads)
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

    accuracy (S + 2, 9): the ladder's S students, then its two safety-trained copies;
    asr (1 + len(BUDGETS), S, S + 2): the ladder's students attacking every one of those
    targets, by the direct query alone (budget 0) and at each of BUDGETS; decoupled_accuracy
    (D, 9) and decoupled_asr (D, S + 2): the decoupled students attacking the same targets at
    DEFAULT_BUDGET. Self-pairs are included (a student attacking itself).
    """

    seed: int
    accuracy: np.ndarray
    asr: np.ndarray
    decoupled_accuracy: np.ndarray
    decoupled_asr: np.ndarray


def run_world(seed: int, n_ladder: int, n_decoupled: int, n_behaviours: int) -> WorldRun:
    """Build one world, train its students, and let them attack the ladder's students."""
    n_ladder = validate.integer("n_ladder", n_ladder, minimum=12)  # heldout_pairs: 3 folds of >= 4
    n_decoupled = validate.integer("n_decoupled", n_decoupled, minimum=3)
    n_behaviours = validate.integer("n_behaviours", n_behaviours, minimum=2)
    streams = np.random.SeedSequence(_seed("seed", seed)).generate_state(8)
    teacher, ladder_seed, shares, decoupled_seed, evaluation, behaviours, rays, rays_d = map(
        int, streams
    )
    world = make_world(teacher)
    ladder = ladder_configs(n_ladder)
    targets = train_students(world, ladder + safety_configs(ladder), ladder_seed)
    decoupled = train_students(world, decoupled_configs(n_decoupled, shares), decoupled_seed)
    x_eval, x0 = (
        sample_inputs(N_EVAL, evaluation),
        sample_behaviours(world, n_behaviours, behaviours),
    )
    proposals = propose_boundary(targets.take(slice(0, n_ladder)), x0, max(BUDGETS), rays)
    asr = asr_at_budgets(judge(world, targets, x0, proposals))
    proposals = propose_boundary(decoupled, x0, DEFAULT_BUDGET, rays_d)
    asr_d = asr_at_budgets(judge(world, targets, x0, proposals), [DEFAULT_BUDGET])[0]
    return WorldRun(seed, accuracy(world, targets, x_eval), asr,
                    accuracy(world, decoupled, x_eval), asr_d)  # fmt: skip


# ---------------------------------------------------------------------------- the analysis
def _pool(asr, c) -> tuple[np.ndarray, np.ndarray]:
    """Check a pool attacking itself: ASR (S, S) in [0, 1] (self-pairs ignored) and c (S,)."""
    asr = validate.array("asr", asr, ndim=2, low=0.0, high=1.0)
    c = validate.array("c", c, min_size=4)
    if asr.shape != (len(c), len(c)):
        raise ValueError(f"asr must be (S, S) for S = len(c) = {len(c)}, got {asr.shape}")
    return asr, c


def off_diagonal(asr, c) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every ordered pair of a pool attacking itself, without self-pairs: (c_A, c_T, asr),
    each of shape (S (S - 1),)."""
    asr, c = _pool(asr, c)
    i, j = np.nonzero(~np.eye(len(c), dtype=bool))
    return c[i], c[j], asr[i, j]


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


def sharp_drop(asr, c, threshold: float = 0.5) -> float:
    """Mean ASR over pairs with delta < -threshold divided by mean ASR over delta > +threshold."""
    c_A, c_T, y = off_diagonal(asr, c)
    threshold = validate.real("threshold", threshold, low=0.0)
    delta = c_A - c_T
    low, high = delta < -threshold, delta > threshold
    if not low.any() or not high.any() or y[high].mean() == 0:
        raise ValueError(f"no pairs, or no success, with |delta| > {threshold} on one side")
    return float(y[low].mean() / y[high].mean())


def free_fit(asr, c) -> tuple[float, float, float]:
    """Least squares logit(ASR) = alpha c_A + beta c_T + b over all pairs: (alpha, beta, b).
    The gap model is the special case alpha = -beta."""
    c_A, c_T, y = off_diagonal(asr, c)
    design = np.column_stack([c_A, c_T, np.ones_like(c_A)])
    alpha, beta, b = np.linalg.lstsq(design, _logit(y), rcond=None)[0]
    return float(alpha), float(beta), float(b)


def imbalance(asr, c) -> float:
    """(alpha + beta) / (alpha - beta) of the free fit: 0 when only the gap matters, +1 when
    only the attacker does, -1 when only the target does."""
    alpha, beta, _ = free_fit(asr, c)
    return (alpha + beta) / (alpha - beta)


def coefficient_sum_ci(asr, c, n_bootstrap: int, seed: int) -> tuple[float, float, float]:
    """alpha + beta of the free fit and its 95% bootstrap interval over resampled students
    (a student drawn twice never attacks its own copy). Returns (sum, lo, hi)."""
    asr, c = _pool(asr, c)
    n_bootstrap = validate.integer("n_bootstrap", n_bootstrap, minimum=10)
    rng, draws = np.random.default_rng(_seed("seed", seed)), []
    for _ in range(n_bootstrap):
        pick = rng.integers(0, len(c), len(c))
        i, j = np.nonzero(pick[:, None] != pick[None, :])
        design = np.column_stack([c[pick[i]], c[pick[j]], np.ones(len(i))])
        alpha, beta, _ = np.linalg.lstsq(design, _logit(asr[pick[i], pick[j]]), rcond=None)[0]
        draws.append(alpha + beta)
    alpha, beta, _ = free_fit(asr, c)
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return alpha + beta, float(lo), float(hi)


def _folds(n: int, n_folds: int, seed: int) -> list[np.ndarray]:
    return np.array_split(np.random.default_rng(_seed("seed", seed)).permutation(n), n_folds)


def target_curve(asr, c, t: int, attackers=None, direct: float | None = None):
    """Target t's curve logit(ASR) = w_t delta + b_t fitted on `attackers` (default: all but t),
    with the direct-query row (capability of chance, ASR `direct`) when given."""
    asr, c = _pool(asr, c)
    t = validate.integer("t", t, minimum=0, maximum=len(c) - 1)
    rows = np.setdiff1d(np.arange(len(c)) if attackers is None else attackers, [t])
    delta, y = c[rows] - c[t], asr[rows, t]
    if direct is not None:
        direct = validate.probability("direct", direct)
        delta, y = np.r_[delta, capability(CHANCE) - c[t]], np.r_[y, direct]
    return fit_curve(delta, y)


def heldout_attackers(asr, c, direct, seed: int, n_folds: int = 2) -> float:
    """Skill of the per-target curves on attackers they were not fitted on.

    Attackers are split at random into n_folds; each target's curve (with its direct-query row,
    direct[t]) is fitted on the other folds and predicts the held-out attackers' ASR. Skill =
    1 - SSE(curve) / SSE(mean), where the baseline is that target's mean ASR over the same
    fitting attackers (unbiased: the folds are random). Pooled over targets and folds.
    """
    asr, c = _pool(asr, c)
    direct = validate.array("direct", direct, low=0.0, high=1.0)
    validate.same_length(c=c, direct=direct)
    n_folds = validate.integer("n_folds", n_folds, minimum=2, maximum=len(c) // 2)
    sse = np.zeros(2)
    for test in _folds(len(c), n_folds, seed):
        fit = np.setdiff1d(np.arange(len(c)), test)
        for t in range(len(c)):
            curve = target_curve(asr, c, t, fit, direct[t])
            rows, mean = test[test != t], asr[fit[fit != t], t].mean()
            y = asr[rows, t]
            sse += [np.sum((y - curve.predict(c[rows] - c[t])) ** 2), np.sum((y - mean) ** 2)]
    return float(1 - sse[0] / sse[1])


PAIR_MODELS = ("gap", "attacker", "target")  # features: c_A - c_T, c_A, c_T


def heldout_pairs(asr, c, seed: int, n_folds: int = 3) -> dict[str, float]:
    """Held-out R^2 of three one-feature models logit(ASR) = w x + b on new pairs.

    Students are split at random into n_folds; each model is fitted on pairs among the other
    folds and predicts pairs among the held-out fold (a new attacker against a new target).
    R^2 = 1 - SSE(model) / SSE(mean ASR of the fitting pairs), pooled over folds.
    """
    asr, c = _pool(asr, c)
    n_folds = validate.integer("n_folds", n_folds, minimum=2, maximum=len(c) // 2)
    sse = dict.fromkeys((*PAIR_MODELS, "mean"), 0.0)
    for test in _folds(len(c), n_folds, seed):
        fit = np.setdiff1d(np.arange(len(c)), test)
        c_A, c_T, y = off_diagonal(asr[np.ix_(fit, fit)], c[fit])
        a_new, t_new, y_new = off_diagonal(asr[np.ix_(test, test)], c[test])
        for name, x, x_new in zip(PAIR_MODELS, (c_A - c_T, c_A, c_T),
                                  (a_new - t_new, a_new, t_new), strict=True):  # fmt: skip
            sse[name] += np.sum((y_new - fit_curve(x, y).predict(x_new)) ** 2)
        sse["mean"] += np.sum((y_new - y.mean()) ** 2)
    return {name: float(1 - sse[name] / sse["mean"]) for name in PAIR_MODELS}


def attacker_strength(asr) -> np.ndarray:
    """Each attacker's mean ASR over the other students of its pool, shape (S,)."""
    asr = validate.array("asr", asr, ndim=2, low=0.0, high=1.0)
    if asr.shape[0] != asr.shape[1] or len(asr) < 2:
        raise ValueError(f"asr must be square (S, S) with S >= 2, got {asr.shape}")
    return (asr.sum(axis=1) - np.diag(asr)) / (len(asr) - 1)


def split_advantage(asr, accuracy) -> float:
    """Spearman rho of attacker strength (mean ASR over the targets, asr: (n_A, n_T)) with the
    attackers' capability on the split that shares structure with harm (concepts 1-4), minus
    rho with the split that does not (concepts 5-8); accuracy: (n_A, 9)."""
    asr = validate.array("asr", asr, ndim=2, low=0.0, high=1.0)
    c_rel, c_irr = (split_capability(accuracy, split) for split in (RELEVANT, IRRELEVANT))
    if len(c_rel) != len(asr):
        raise ValueError(f"accuracy needs one row per attacker ({len(asr)}), got {len(c_rel)}")
    strength = asr.mean(axis=1)
    rho = [stats.spearmanr(c_split, strength).statistic for c_split in (c_rel, c_irr)]
    return float(rho[0] - rho[1])


def median_attacker_trend(asr, c) -> float:
    """Spearman rho between target capability and the ASR of the median attacker (the fixed-
    capability attacker: humans in the paper's forecast)."""
    asr, c = _pool(asr, c)
    a = int(np.argsort(c)[(len(c) - 1) // 2])
    targets = np.arange(len(c)) != a
    return float(stats.spearmanr(c[targets], asr[a, targets]).statistic)


def curve_residuals(asr, c, asr_new, c_new) -> np.ndarray:
    """Mean ASR residual (observed - predicted) of new targets under the pool's pooled curve.

    asr (S, S) and c (S,): the pool, whose pairs fit logit(ASR) = w delta + b; asr_new (S, k):
    the pool's attackers against k new targets of capability c_new (k,). Negative: more robust
    than their capability predicts.
    """
    asr, c = _pool(asr, c)
    asr_new = validate.array("asr_new", asr_new, ndim=2, low=0.0, high=1.0)
    c_new = validate.array("c_new", c_new)
    if asr_new.shape != (len(c), len(c_new)):
        raise ValueError(f"asr_new must be ({len(c)}, {len(c_new)}), got {asr_new.shape}")
    c_A, c_T, y = off_diagonal(asr, c)
    curve = fit_curve(c_A - c_T, y)
    return (asr_new - curve.predict(gap(c, c_new).ravel()).reshape(asr_new.shape)).mean(axis=0)


def pooled_slope(asr, c) -> float:
    """Slope w of one curve logit(ASR) = w delta + b through every ordered pair of a pool."""
    c_A, c_T, y = off_diagonal(asr, c)
    return fit_curve(c_A - c_T, y).w


# ---------------------------------------------------------------------------- one replicate
@dataclass(frozen=True)
class WorldStats:
    """Every statistic the chapter judges, for one world; arrays are indexed by BUDGETS.

    drop: sharp_drop; skill: heldout_attackers; coef_sum, sum_lo, sum_hi: alpha + beta of the
    free fit and its bootstrap interval; imbalance: (alpha + beta) / (alpha - beta); r2_gap,
    r2_attacker, r2_target: heldout_pairs; slope: pooled_slope; rho_attacker: Spearman of
    attacker capability with attacker strength; rho_fixed: median_attacker_trend. Scalars:
    split_advantage of the decoupled students and the safety targets' mean residual.
    """

    run: WorldRun
    c: np.ndarray  # capability of the ladder's students, then its two safety-trained copies
    drop: np.ndarray
    skill: np.ndarray
    coef_sum: np.ndarray
    sum_lo: np.ndarray
    sum_hi: np.ndarray
    imbalance: np.ndarray
    r2_gap: np.ndarray
    r2_attacker: np.ndarray
    r2_target: np.ndarray
    slope: np.ndarray
    rho_attacker: np.ndarray
    rho_fixed: np.ndarray
    split_advantage: float
    safety_residual: float


def _budget_stats(asr, c, direct, seed: int, n_bootstrap: int) -> dict[str, float]:
    """The per-budget statistics of one pool attacking itself (see WorldStats)."""
    folds, boot = map(int, np.random.SeedSequence(seed).generate_state(2))
    total, lo, hi = coefficient_sum_ci(asr, c, n_bootstrap, boot)
    r2 = heldout_pairs(asr, c, folds)
    return {
        "drop": sharp_drop(asr, c), "skill": heldout_attackers(asr, c, direct, folds),
        "coef_sum": total, "sum_lo": lo, "sum_hi": hi, "imbalance": imbalance(asr, c),
        **{f"r2_{name}": value for name, value in r2.items()}, "slope": pooled_slope(asr, c),
        "rho_attacker": float(stats.spearmanr(c, attacker_strength(asr)).statistic),
        "rho_fixed": median_attacker_trend(asr, c),
    }  # fmt: skip


def world_stats(seed: int, n_ladder: int, n_decoupled: int, n_behaviours: int,
                n_bootstrap: int) -> WorldStats:  # fmt: skip
    """Run one world (`run_world`) and compute every statistic of WorldStats from it."""
    n_bootstrap = validate.integer("n_bootstrap", n_bootstrap, minimum=10)
    run = run_world(seed, n_ladder, n_decoupled, n_behaviours)
    c = split_capability(run.accuracy)
    pool, S = c[:n_ladder], n_ladder
    direct = run.asr[0, :, :S].mean(axis=0)  # the direct query does not depend on the attacker
    analysis = int(np.random.SeedSequence(_seed("seed", seed)).generate_state(9)[8])
    rows = [_budget_stats(run.asr[k, :, :S], pool, direct, analysis + k, n_bootstrap)
            for k in range(1, 1 + len(BUDGETS))]  # fmt: skip
    per_budget = {key: np.array([row[key] for row in rows]) for key in rows[0]}
    k = 1 + BUDGETS.index(DEFAULT_BUDGET)
    residual = curve_residuals(run.asr[k, :, :S], pool, run.asr[k, :, S:], c[S:])
    return WorldStats(run, c, **per_budget,
                      split_advantage=split_advantage(run.decoupled_asr, run.decoupled_accuracy),
                      safety_residual=float(residual.mean()))  # fmt: skip


# ---------------------------------------------------------------------------- real models
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
        raise ValueError(f"path {path} does not exist; pass the ObsScaling leaderboard-v2 CSV")
    raw = pd.read_csv(path)
    df = pd.DataFrame({"model": raw["Model"], "mmlu_pro": raw["leaderboard_mmlu_pro"]})
    df["c"] = capability(df["mmlu_pro"].to_numpy())
    df["family"] = None
    for family, pattern in PANFILOV2025_FAMILIES.items():
        df.loc[df["model"].str.contains(pattern, regex=True), "family"] = family
    return df
