"""Training and certifying ensembles of 1-Lipschitz networks (`lib.lipschitz`), and auditing
their certificates.

1. data: scikit-learn's 8x8 digits, one stratified train/test split per replicate;
2. training: every member of an ensemble on its own split and batch order, Adam (and
   `OrthogonalAdam` for LipNeXt's manifold matrices), a cosine learning rate, cross-entropy
   on GloRo worst-case logits; in float32, bfloat16 autocast or bfloat16 throughout;
3. certificates: the head-aware radius of a 1-Lipschitz backbone (GloRo, Leino et al. 2021)
   and the generic margin / (sqrt(2) L) radius (Tsuzuku et al. 2018);
4. audits: Jacobian spectral norms, a gradient-ascent Lipschitz estimate and an l2 PGD attack;
5. one experiment for `lib.runs.run_jobs`: train an ensemble, certify every member in float64.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from lib import validate
from lib.lipschitz import (
    LipNeXt,
    ModelConfig,
    Network,
    OrthogonalAdam,
    _generators,
    _tensor,
    build_model,
    members,
)

N_DIGITS = 1797  # images in scikit-learn's bundled digits
N_TRAIN_CERTIFIED = 500  # training digits certified per member (the training CRA)
PRECISIONS = ("float32", "bfloat16-autocast", "bfloat16-pure")


def _labels(name: str, y, shape: tuple[int, ...]) -> torch.Tensor:
    """y if it is an integer tensor of class labels of the given shape."""
    if not isinstance(y, torch.Tensor) or y.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"{name} must be an int64 torch.Tensor of labels, got {type(y).__name__}")
    if tuple(y.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(y.shape)}")
    return y


def _callable(name: str, f) -> None:
    if not callable(f):
        raise TypeError(f"{name} must be a function of a tensor, got {type(f).__name__}")


# ----------------------------------------------------------------------------------------------
# 1. Data
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Digits:
    """scikit-learn's digits in [0, 1]: X (N, 8, 8) float32 and y (N,) int64, train and test."""

    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor


@functools.cache
def _digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits, read once per process (each read parses a CSV file)."""
    from sklearn.datasets import load_digits

    return load_digits(return_X_y=True)


def load_digits_split(n_test: int = 500, seed: int = 0) -> Digits:
    """The 1797 bundled 8x8 digits, pixels / 16, split stratified into train and n_test test."""
    from sklearn.model_selection import train_test_split

    n_test = validate.integer("n_test", n_test, minimum=10, maximum=N_DIGITS - 10)
    seed = validate.integer("seed", seed, minimum=0)
    X, y = _digits()
    Xtr, Xte, ytr, yte = train_test_split(
        X / 16.0, y, test_size=n_test, stratify=y, random_state=seed % 2**32
    )

    def img(a):
        return torch.tensor(a, dtype=torch.float32).reshape(-1, 8, 8)

    return Digits(img(Xtr), torch.tensor(ytr), img(Xte), torch.tensor(yte))


# ----------------------------------------------------------------------------------------------
# 2. Training
# ----------------------------------------------------------------------------------------------


def gloro_logits(z: torch.Tensor, W: torch.Tensor, y: torch.Tensor, eps: float) -> torch.Tensor:
    """Worst-case logits in an eps-ball of a 1-Lipschitz backbone: z_i + eps ||W_y - W_i|| (i != y).

    z: (..., B, K) logits, W: (..., K, F) head weights, y: (..., B) labels (a leading member
    axis E is optional); the i = y entry is unchanged.
    """
    z, W = _tensor("z", z, 2), _tensor("W", W, 2)
    _labels("y", y, z.shape[:-1])
    if W.shape[-2] != z.shape[-1] or W.ndim != z.ndim:
        raise ValueError(f"W must be (..., K={z.shape[-1]}, F) like z {tuple(z.shape)}, "
                         f"got {tuple(W.shape)}")  # fmt: skip
    eps = validate.real("eps", eps, low=0)
    if z.ndim == 2:
        return _gloro_logits(z[None], W[None], y[None], eps)[0]
    return _gloro_logits(z, W, y, eps)


def _gloro_logits(z: torch.Tensor, W: torch.Tensor, y: torch.Tensor, eps: float) -> torch.Tensor:
    """gloro_logits of (E, B, K) logits: the (E, K, K) head distances once, then one gather."""
    dist = torch.linalg.vector_norm(W[:, :, None, :] - W[:, None, :, :], dim=-1)
    return z + eps * dist[torch.arange(len(y))[:, None], y]


@dataclass(frozen=True)
class Recipe:
    """One training recipe for every model: epochs of Adam (OrthogonalAdam for manifold
    matrices) with batch `batch`, a cosine learning rate from `lr` to 0, cross-entropy on
    GloRo logits at radius `eps_train`, and the precision: 'float32'; 'bfloat16-autocast'
    (matrix products in bfloat16, weights and optimiser in float32: mixed precision); or
    'bfloat16-pure' (weights, optimiser state and arithmetic all in bfloat16). Manifold
    LipNeXt matrices are polar-retracted at the end of every epoch if `retract`."""

    epochs: int = 30
    batch: int = 64
    lr: float = 1e-2
    eps_train: float = 0.5
    precision: str = "float32"
    retract: bool = True

    def __post_init__(self) -> None:
        validate.integer("epochs", self.epochs, minimum=1)
        validate.integer("batch", self.batch, minimum=1)
        validate.real("lr", self.lr, low=0, high=1, low_open=True)
        validate.real("eps_train", self.eps_train, low=0)
        validate.choice("precision", self.precision, PRECISIONS)
        validate.boolean("retract", self.retract)


@dataclass(frozen=True)
class TrainResult:
    """A trained ensemble, CPU seconds per optimiser step of the whole ensemble (process
    time), and the largest ||Q^T Q - I||_F seen just before an end-of-epoch retraction (NaN
    unless manifold)."""

    model: nn.Module
    step_time_s: float
    error_before_retraction: float


def _optimisers(model: nn.Module, lr: float) -> list[torch.optim.Optimizer]:
    """Adam for every parameter, except OrthogonalAdam for LipNeXt's manifold matrices.

    Adam acts entry by entry, so one Adam over stacked members is E independent ones.
    """
    manifold = isinstance(model, LipNeXt) and model.cfg.orthogonal_map == "manifold"
    orth = [model.orth] if manifold else []
    rest = [p for p in model.parameters() if all(p is not q for q in orth)]
    return [torch.optim.Adam(rest, lr=lr)] + ([OrthogonalAdam(orth, lr=lr)] if orth else [])


def _stack(data: Sequence[Digits], E: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The members' training sets as (E, N, 8, 8) images and (E, N) labels."""
    if isinstance(data, Digits) or not isinstance(data, Sequence) or len(data) != E:
        raise TypeError(f"data must be a sequence of {E} Digits splits, one per member")
    if not all(isinstance(d, Digits) for d in data):
        raise TypeError("data must hold Digits splits from load_digits_split")
    if len({len(d.y_train) for d in data}) > 1:
        raise ValueError("every member's split must have the same number of training digits")
    return torch.stack([d.X_train for d in data]), torch.stack([d.y_train for d in data])


def train_model(model: Network, data: Sequence[Digits], recipe: Recipe = Recipe(),
                seeds: Sequence[int] = (0,)) -> TrainResult:  # fmt: skip
    """Train every member e of `model` in place on data[e].X_train by `recipe`, batches drawn
    from seeds[e]. Returns the model (in bfloat16 after 'bfloat16-pure'), timing and drift."""
    E = members(model)
    X, Y = _stack(data, E)
    if not isinstance(recipe, Recipe):
        raise TypeError(f"recipe must be a Recipe, got {type(recipe).__name__}")
    gens, retract = _generators(seeds), recipe.retract
    if len(gens) != E:
        raise ValueError(f"seeds must give one seed per member ({E}), got {len(gens)}")
    if recipe.precision == "bfloat16-pure":
        model, X = model.to(torch.bfloat16), X.to(torch.bfloat16)
    opts = _optimisers(model, recipe.lr)
    n_steps = recipe.epochs * math.ceil(X.shape[1] / recipe.batch)
    scheds = [torch.optim.lr_scheduler.CosineAnnealingLR(o, n_steps) for o in opts]
    rows, worst, t0 = torch.arange(E)[:, None], 0.0, time.process_time()
    model.train()
    for _ in range(recipe.epochs):
        order = torch.stack([torch.randperm(X.shape[1], generator=g) for g in gens])
        for idx in order.split(recipe.batch, dim=1):
            x, y = X[rows, idx], Y[rows, idx]
            with torch.autocast("cpu", torch.bfloat16, enabled=recipe.precision.endswith("cast")):
                z = model(x)
            z = _gloro_logits(z.float(), model.head.weight, y, recipe.eps_train)
            # The sum over members of each member's mean loss: member e's gradient is its own.
            loss = nn.functional.cross_entropy(z.flatten(0, 1), y.flatten(), reduction="sum")
            for o in opts:
                o.zero_grad()
            (loss / y.shape[1]).backward()
            for o, s in zip(opts, scheds, strict=True):
                o.step()
                s.step()
        if isinstance(opts[-1], OrthogonalAdam) and retract:
            worst = max(worst, opts[-1].retract())
    step_time = (time.process_time() - t0) / n_steps  # CPU time: less noisy on a shared machine
    manifold = isinstance(opts[-1], OrthogonalAdam) and retract
    return TrainResult(model.eval(), step_time, worst if manifold else float("nan"))


# ----------------------------------------------------------------------------------------------
# 3. Certificates
# ----------------------------------------------------------------------------------------------


def head_aware_radius(z: torch.Tensor, W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Prediction j and radius min_{i != j} (z_j - z_i) / ||W_j - W_i|| (1-Lipschitz backbone).

    z: (N, K) logits, W: (K, F) head; returns (N,) predictions and (N,) radii in input l2 units.
    """
    z, W = _tensor("z", z, 2), _tensor("W", W, 2)
    if W.shape[0] != z.shape[1]:
        raise ValueError(f"W must have one row per logit ({z.shape[1]}), got {tuple(W.shape)}")
    j = z.argmax(1)
    gap = z.gather(1, j[:, None]) - z
    dist = torch.linalg.vector_norm(W[j][:, None, :] - W[None, :, :], dim=-1)
    ratio = torch.where(dist > 0, gap / dist.clamp_min(1e-30), torch.inf)
    ratio = ratio.masked_fill(nn.functional.one_hot(j, z.shape[1]).bool(), torch.inf)
    return j, ratio.min(1).values


def generic_radius(z: torch.Tensor, lipschitz: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Prediction and radius (top-1 - top-2 margin) / (sqrt(2) L) for an L-Lipschitz logit map
    (Tsuzuku et al. 2018). z: (N, K); returns (N,) predictions and (N,) radii."""
    z = _tensor("z", z, 2)
    lipschitz = validate.real("lipschitz", lipschitz, low=0, low_open=True)
    top = z.topk(2, dim=1)
    return top.indices[:, 0], (top.values[:, 0] - top.values[:, 1]) / (math.sqrt(2) * lipschitz)


def lipschitz_bound(model: Network) -> torch.Tensor:
    """(E,) upper bound on each member's backbone Lipschitz constant, in float64.

    LipNeXt: ||Q0||_2 prod_i ||R_i||_2 ||R_i M_i^T||_2, the matrices its forward pass applies
    (shifts, beta-Abs and pooling are 1-Lipschitz): 1 up to rounding when they are orthogonal.
    AOL and Cayley layers are 1-Lipschitz for any kernel (Prach & Lampert 2022, Thm. 2; a
    unitary matrix per frequency): 1.
    """
    if not isinstance(model, LipNeXt):
        return torch.ones(members(model), dtype=torch.float64)
    with torch.no_grad():
        Q = model.orthogonal().double()
        R, M = Q[:, 1::2], Q[:, 2::2]
        norms = torch.cat([Q[:, :1], R, R @ M.mT], dim=1)
        return torch.linalg.matrix_norm(norms, ord=2).prod(dim=1)


def certified_accuracy(
    pred: torch.Tensor, radius: torch.Tensor, y: torch.Tensor, eps: float
) -> float:
    """CRA: fraction of points both correctly classified and certified at radius > eps."""
    radius = _tensor("radius", radius)
    _labels("pred", pred, radius.shape)
    _labels("y", y, radius.shape)
    eps = validate.real("eps", eps, low=0)
    return float(((pred == y) & (radius > eps)).double().mean())


# ----------------------------------------------------------------------------------------------
# 4. Audits
# ----------------------------------------------------------------------------------------------


def pgd_l2(
    f: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    eps: torch.Tensor,
    steps: int = 100,
    restarts: int = 3,
    seed: int = 0,
) -> torch.Tensor:
    """l2 PGD on the margin loss max_{i != y} z_i - z_y inside per-point balls ||delta|| <= eps.

    Step size 2.5 eps / steps (Madry et al. 2018). x: (N, ...) inputs, not clipped to the pixel
    range (certificates cover the whole ball), y: (N,) labels, eps: (N,) radii.
    Returns (N,) bool: misclassified at any iterate.
    """
    _callable("f", f)
    x = _tensor("x", x, 2)
    _labels("y", y, (len(x),))
    eps = _tensor("eps", eps)
    if eps.shape != y.shape or (eps < 0).any():
        raise ValueError(f"eps must be (N,) = {tuple(y.shape)} and >= 0, got {tuple(eps.shape)}")
    steps, restarts = (validate.integer(k, v, minimum=1)
                       for k, v in (("steps", steps), ("restarts", restarts)))  # fmt: skip
    gen = torch.Generator().manual_seed(validate.integer("seed", seed, minimum=0))
    shape = (-1,) + (1,) * (x.ndim - 1)
    r, size = eps.reshape(shape), 2.5 * eps.reshape(shape) / steps
    flipped = torch.zeros_like(y, dtype=torch.bool)
    for k in range(restarts):  # the first run starts at x itself, the others at random points
        d = torch.randn(x.shape, generator=gen, dtype=x.dtype)
        u = torch.rand((len(y),) + shape[1:], generator=gen, dtype=x.dtype) * (k > 0)
        d = d / _norm(d) * r * u
        for _ in range(steps):
            d.requires_grad_(True)
            z = f(x + d)
            flipped |= z.argmax(1) != y
            margin = z.masked_fill(nn.functional.one_hot(y, z.shape[1]).bool(), -torch.inf)
            loss = (margin.max(1).values - z.gather(1, y[:, None])[:, 0]).sum()
            (g,) = torch.autograd.grad(loss, d)
            with torch.no_grad():
                d = d + size * g / _norm(g).clamp_min(1e-30)
                d = d * torch.clamp(r / _norm(d).clamp_min(1e-30), max=1.0)
        with torch.no_grad():
            flipped |= f(x + d).argmax(1) != y
    return flipped


def _norm(d: torch.Tensor) -> torch.Tensor:
    """Per-sample l2 norm of (N, ...) with singleton axes kept for broadcasting."""
    return torch.linalg.vector_norm(d.flatten(1), dim=1).reshape((-1,) + (1,) * (d.ndim - 1))


def jacobian_spectral_norms(
    f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor
) -> torch.Tensor:
    """||J_f(x_n)||_2 for each of the N inputs x: (N, ...); f must act on each sample alone.

    Forward mode, one pass per input direction (an 8 x 8 image has fewer entries than most
    feature vectors): vmap over the samples of the Jacobian of f on one sample.
    """
    from torch.func import jacfwd, vmap

    _callable("f", f)
    x = _tensor("x", x, 2)
    J = vmap(jacfwd(lambda xi: f(xi[None])[0]))(x)  # (N, out, *in)
    return torch.linalg.matrix_norm(J.flatten(2), ord=2).detach()


def lipschitz_ratio_ascent(
    f: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    steps: int = 100,
    lr: float = 1e-2,
    seed: int = 0,
) -> float:
    """Largest ||f(a) - f(b)|| / ||a - b|| seen while Adam pushes up the ratio of N pairs.

    Pairs start at (x, x + 0.1 N(0, I)); x: (N, ...). A lower bound on the Lipschitz constant.
    """
    _callable("f", f)
    x = _tensor("x", x, 2)
    steps = validate.integer("steps", steps, minimum=1)
    lr = validate.real("lr", lr, low=0, low_open=True)
    gen = torch.Generator().manual_seed(validate.integer("seed", seed, minimum=0))
    a = x.clone().requires_grad_(True)
    b = (x + 0.1 * torch.randn(x.shape, generator=gen, dtype=x.dtype)).requires_grad_(True)
    opt, best = torch.optim.Adam([a, b], lr=lr), 0.0
    for _ in range(steps):
        ratio = _norm(f(a) - f(b)).flatten() / _norm(a - b).flatten()
        best = max(best, float(ratio.detach().max()))
        opt.zero_grad()
        (-ratio.sum()).backward()
        opt.step()
    return best


# ----------------------------------------------------------------------------------------------
# 5. One experiment: an ensemble of replicates, trained and certified
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Runs:
    """A trained and certified ensemble, member e on the split drawn from split_seeds[e]:
    CRA on `eps_grid` for its test set (E, G) and for N_TRAIN_CERTIFIED training digits
    (E, G; in float32), test predictions and
    certified radii (E, N_test) in float64, each member's Lipschitz bound (E,), CPU seconds per
    ensemble step and the drift before retraction (NaN unless manifold). Weights travel as a
    float64 state dict.
    """

    cfg: ModelConfig
    recipe: Recipe
    split_seeds: tuple[int, ...]
    seeds: tuple[int, ...]
    state: dict
    eps_grid: np.ndarray
    cra: np.ndarray
    train_cra: np.ndarray
    pred: torch.Tensor
    radius: torch.Tensor
    lipschitz: np.ndarray
    step_time_s: float
    error_before_retraction: float


def certify(model: Network, X: torch.Tensor, y: torch.Tensor, eps_grid: np.ndarray,
            dtype: torch.dtype = torch.float64):  # fmt: skip
    """Each member's certificates on its own points, computed in `dtype` (the model is cast in
    place): the head-aware radius divided by the member's `lipschitz_bound`.
    X (E, N, 8, 8), y (E, N) -> predictions (E, N), radii (E, N) and CRA (E, G) on `eps_grid`."""
    model = model.to(dtype).eval()
    with torch.no_grad():
        z, W = model(X.to(dtype)), model.head.weight
        pred, radius = (torch.stack(t) for t in zip(*map(head_aware_radius, z, W), strict=True))
        radius = radius / lipschitz_bound(model)[:, None]
    correct = (pred == y).numpy()[:, :, None]
    return pred, radius, (correct & (radius.numpy()[:, :, None] > eps_grid)).mean(1)


def train_and_certify(cfg: ModelConfig, recipe: Recipe, split_seeds: Sequence[int],
                      seeds: Sequence[int], eps_grid) -> Runs:  # fmt: skip
    """Train an ensemble of the model `cfg` describes (member e: initialisation and batches
    from seeds[e], digits split from split_seeds[e]), then certify every member in float64."""
    eps_grid = validate.array("eps_grid", eps_grid, nonnegative=True)
    if isinstance(split_seeds, int) or len(split_seeds) != len(seeds):
        raise ValueError("split_seeds and seeds must be sequences of equal length, one per member")
    data = [load_digits_split(seed=s) for s in split_seeds]
    result = train_model(build_model(cfg, seeds), data, recipe, seeds)
    train = [torch.stack([getattr(d, a)[:N_TRAIN_CERTIFIED] for d in data])
             for a in ("X_train", "y_train")]  # fmt: skip
    train_cra = certify(result.model, *train, eps_grid, torch.float32)[2]
    test = [torch.stack([getattr(d, a) for d in data]) for a in ("X_test", "y_test")]
    pred, radius, cra = certify(result.model, *test, eps_grid)
    return Runs(cfg, recipe, tuple(split_seeds), tuple(seeds), result.model.state_dict(),
                eps_grid, cra, train_cra, pred, radius, lipschitz_bound(result.model).numpy(),
                result.step_time_s, result.error_before_retraction)  # fmt: skip


def trained_model(runs: Runs) -> Network:
    """The float64 ensemble of a Runs, rebuilt from its config and weights, in eval mode."""
    if not isinstance(runs, Runs):
        raise TypeError(f"runs must be a Runs from train_and_certify, got {type(runs).__name__}")
    model = build_model(runs.cfg, runs.seeds).double()
    model.load_state_dict(runs.state)
    return model.eval()
