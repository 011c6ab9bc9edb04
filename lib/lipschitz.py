"""LipNeXt in miniature: constraint-free 1-Lipschitz networks and their certificates.

Hu, Hu & Fredrikson (2026), "LipNeXt: Scaling up Lipschitz-based Certified Robustness to
Billion-parameter Models" (ICLR 2026, arXiv:2601.18513). In dependency order:

1. the orthogonal-manifold optimiser: Adam in the Lie algebra of skew matrices, updates
   X <- X FastExp(A) (a truncated Taylor exponential) and a periodic polar retraction;
2. the layers: spatial shift (the only isometric depthwise convolution, Theorem 1), beta-Abs
   (MinMax in another orthogonal basis, Theorem 2), L2 spatial pooling, 2x2 patchify;
3. the LipNeXt-style block Z = beta-Abs(M R^T S(R(X + p)) + b) and network;
4. training (manifold or torch's constrained `parametrizations.orthogonal`) and an MLP baseline;
5. certification (head-aware and generic rules) and the audits: Jacobian norms, a
   gradient-ascent Lipschitz estimate and an l2 PGD attack.

Tokens are laid out as (batch, H, W, C): channel mixing is `x @ Q.T` on the last axis.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

# ||A||_F below which FastExp uses a Taylor polynomial of order 2, 3, 4 (above: exact expm).
# Thresholds as described for LipNeXt and used in the first author's `fast_exp`.
FASTEXP_THRESHOLDS_HU2026 = (0.05, 0.25, 1.0)
ORTHOGONAL_MAPS = ("manifold", "cayley", "matrix_exp")


def _check_tensor(name: str, x, min_ndim: int = 1) -> torch.Tensor:
    """Raise ValueError unless x is a finite floating tensor with at least `min_ndim` axes."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point torch.Tensor, got {type(x).__name__}")
    if x.ndim < min_ndim:
        raise ValueError(f"{name} must have >= {min_ndim} axes, got shape {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or inf; pass finite values")
    return x


def _check_square(name: str, x) -> torch.Tensor:
    x = _check_tensor(name, x, 2)
    if x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name} must be (..., n, n) square matrices, got {tuple(x.shape)}")
    return x


def _check_positive(name: str, value, integer: bool = True) -> None:
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok or not value > 0 or not math.isfinite(value):
        kind = "a positive int" if integer else "a positive finite number"
        raise ValueError(f"{name} must be {kind}, got {value!r}")


# ----------------------------------------------------------------------------------------------
# 1. Orthogonal-manifold optimiser
# ----------------------------------------------------------------------------------------------


def fast_exp(A: torch.Tensor) -> torch.Tensor:
    """FastExp: sum_{i<=k} A^i / i! with k = 2, 3, 4 by ||A||_F (max over the batch), else expm.

    A: (..., n, n) skew-symmetric. The truncation error is at most ||A||^{k+1}/(k+1)! e^||A||.
    """
    A = _check_square("A", A)
    norm = float(torch.linalg.matrix_norm(A).max())
    orders = [k for k, t in zip((2, 3, 4), FASTEXP_THRESHOLDS_HU2026, strict=True) if norm < t]
    if not orders:
        return torch.linalg.matrix_exp(A)
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand_as(A)
    out = eye
    for i in range(orders[0], 0, -1):  # Horner: I + A/1 (I + A/2 (I + ... (I + A/k)))
        out = eye + (A @ out) / i
    return out


def polar(X: torch.Tensor) -> torch.Tensor:
    """Polar retraction onto O(n): X = U S V^T -> U V^T, the nearest orthogonal matrix.

    X: (..., n, n); returned in X's dtype.
    """
    X = _check_square("X", X)
    U, _, Vh = torch.linalg.svd(X.double())  # float64: a float32 SVD leaves ~1e-6 error
    return (U @ Vh).to(X.dtype)


def orthogonality_error(Q: torch.Tensor) -> float:
    """max over the batch of ||Q^T Q - I||_F, computed in float64. Q: (..., n, n)."""
    Q = _check_square("Q", Q).detach().double()
    eye = torch.eye(Q.shape[-1], dtype=Q.dtype)
    return float(torch.linalg.matrix_norm(Q.mT @ Q - eye).max())


class OrthogonalAdam(torch.optim.Optimizer):
    """Riemannian Adam on O(n): moments of Omega = skew(X^T G); X <- X FastExp(-lr m/(sqrt v + e)).

    Omega = (X^T G - G^T X)/2 is the left-trivialised Riemannian gradient; m is skew and v is
    symmetric, so the Adam direction m_hat/(sqrt(v_hat)+eps) stays skew and the update stays
    on the manifold up to FastExp's truncation error, which `retract` removes.
    """

    def __init__(self, params, lr: float = 1e-2, betas=(0.9, 0.999), eps: float = 1e-8):
        _check_positive("lr", lr, integer=False)
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas must lie in [0, 1), got {betas!r}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps})

    @torch.no_grad()
    def step(self, closure=None):
        """One update of every orthogonal parameter that has a gradient."""
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for X in group["params"]:
                if X.grad is None:
                    continue
                XtG = X.mT @ X.grad
                omega = 0.5 * (XtG - XtG.mT)
                state = self.state[X]
                if not state:
                    state["t"], state["m"], state["v"] = 0, torch.zeros_like(X), torch.zeros_like(X)
                state["t"] += 1
                state["m"].mul_(b1).add_(omega, alpha=1 - b1)
                state["v"].mul_(b2).addcmul_(omega, omega, value=1 - b2)
                m_hat = state["m"] / (1 - b1 ** state["t"])
                v_hat = state["v"] / (1 - b2 ** state["t"])
                A = -group["lr"] * m_hat / (v_hat.sqrt() + group["eps"])
                X.copy_(X @ fast_exp(A))
        return None

    @torch.no_grad()
    def retract(self) -> float:
        """Polar-retract every parameter; return the largest ||X^T X - I||_F just before."""
        before = 0.0
        for group in self.param_groups:
            for X in group["params"]:
                before = max(before, orthogonality_error(X))
                X.copy_(polar(X))
        return before


# ----------------------------------------------------------------------------------------------
# 2. Layers: each an isometry or 1-Lipschitz in l2
# ----------------------------------------------------------------------------------------------


def spatial_shift(x: torch.Tensor, alpha: float = 1 / 8) -> torch.Tensor:
    """Circularly shift 4 channel groups of size floor(alpha C) down/up/right/left by one pixel.

    x: (B, H, W, C) -> same shape. A permutation of entries, hence an isometry (Theorem 1:
    one-hot +-1 kernels are the only norm-preserving circular depthwise convolutions).
    """
    x = _check_tensor("x", x, 4)
    g = int(alpha * x.shape[-1])
    if not 0 < alpha <= 0.25 or g < 1:
        raise ValueError(f"alpha={alpha!r} gives {g} channels per direction; use 1/C..1/4")
    return _shift(x, g)


def _shift(x: torch.Tensor, g: int) -> torch.Tensor:
    """spatial_shift without input checks (the model's inner loop); g channels per direction."""
    parts = [
        torch.roll(x[..., 0:g], 1, dims=1),
        torch.roll(x[..., g : 2 * g], -1, dims=1),
        torch.roll(x[..., 2 * g : 3 * g], 1, dims=2),
        torch.roll(x[..., 3 * g : 4 * g], -1, dims=2),
        x[..., 4 * g :],
    ]
    return torch.cat(parts, dim=-1)


def beta_abs(x: torch.Tensor, beta: float = 0.5) -> torch.Tensor:
    """beta-Abs: |x_i| for the first round(beta C) channels, x_i for the rest. x: (..., C)."""
    x = _check_tensor("x", x)
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must lie in [0, 1], got {beta!r}")
    return _beta_abs(x, round(beta * x.shape[-1]))


def _beta_abs(x: torch.Tensor, k: int) -> torch.Tensor:
    """beta_abs without input checks: abs on the first k channels."""
    return torch.cat([x[..., :k].abs(), x[..., k:]], dim=-1)


def minmax(x: torch.Tensor) -> torch.Tensor:
    """MinMax (GroupSort 2): pairs (x_i, x_{i+C/2}) -> (max, min). x: (..., C), C even."""
    x = _check_tensor("x", x)
    if x.shape[-1] % 2:
        raise ValueError(f"minmax needs an even number of channels, got {x.shape[-1]}")
    a, b = x.chunk(2, dim=-1)
    return torch.cat([torch.maximum(a, b), torch.minimum(a, b)], dim=-1)


def theorem2_basis(d: int, dtype=torch.float64) -> torch.Tensor:
    """R = [[I, -I], [I, I]] / sqrt(2) in O(2d), so that R^T beta-Abs(R x) = MinMax(x) (Thm 2)."""
    _check_positive("d", d)
    eye = torch.eye(d, dtype=dtype)
    return torch.cat([torch.cat([eye, -eye], 1), torch.cat([eye, eye], 1)], 0) / math.sqrt(2)


def kernel_gain(K: np.ndarray, n: int) -> np.ndarray:
    """|K_hat(omega)| on the n x n DFT grid: a circular convolution is an isometry iff all are 1."""
    K = np.asarray(K, dtype=float)
    if K.ndim != 2 or not np.isfinite(K).all() or max(K.shape) > n:
        raise ValueError(f"K must be a finite 2-D kernel no larger than n={n}, got {K.shape}")
    return np.abs(np.fft.fft2(K, s=(n, n)))


def l2_pool(x: torch.Tensor) -> torch.Tensor:
    """L2 spatial pooling [L2Pool(X)]_c = (sum_{h,w} X_{h,w,c}^2)^{1/2}. (B, H, W, C) -> (B, C)."""
    x = _check_tensor("x", x, 4)
    return torch.linalg.vector_norm(x, dim=(1, 2))


def patchify(x: torch.Tensor, patch: int = 2) -> torch.Tensor:
    """Cut (B, S, S) images into (B, S/p, S/p, p*p) tokens of p x p patches (a permutation)."""
    x = _check_tensor("x", x, 3)
    B, S, S2 = x.shape
    if S != S2 or S % patch:
        raise ValueError(f"images must be square, side divisible by patch={patch}; got {x.shape}")
    return _patchify(x, patch)


def _patchify(x: torch.Tensor, patch: int) -> torch.Tensor:
    """patchify without input checks (the model's inner loop)."""
    B, S, _ = x.shape
    n = S // patch
    return x.reshape(B, n, patch, n, patch).permute(0, 1, 3, 2, 4).reshape(B, n, n, patch * patch)


# ----------------------------------------------------------------------------------------------
# 3. The LipNeXt-style network
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LipNeXtConfig:
    """Width C, depth L (blocks), shift ratio alpha per direction, beta of beta-Abs, and how the
    orthogonal matrices are kept orthogonal: 'manifold' (OrthogonalAdam), or torch's
    `parametrizations.orthogonal` with 'cayley' or 'matrix_exp'."""

    C: int = 32
    L: int = 6
    alpha: float = 1 / 8
    beta: float = 0.5
    side: int = 8
    patch: int = 2
    n_classes: int = 10
    orthogonal_map: str = "manifold"

    def __post_init__(self) -> None:
        for name in ("C", "L", "side", "patch", "n_classes"):
            _check_positive(name, getattr(self, name))
        if self.orthogonal_map not in ORTHOGONAL_MAPS:
            raise ValueError(f"orthogonal_map={self.orthogonal_map!r}; use {ORTHOGONAL_MAPS}")
        if not 0 < self.alpha <= 0.25 or int(self.alpha * self.C) < 1:
            raise ValueError(f"alpha={self.alpha!r} must shift 1 to C/4 channels per direction")
        if not 0.0 <= self.beta <= 1.0:
            raise ValueError(f"beta must lie in [0, 1], got {self.beta!r}")
        if self.C < self.patch**2:
            raise ValueError(f"C={self.C} must be >= patch^2={self.patch**2} (tokens are padded)")


class _Orthogonal(nn.Module):
    """Holds the (1 + 2L, C, C) stack [Q0, R1, M1, ..., RL, ML] as `weight`."""

    def __init__(self, Q: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(Q)


class LipNeXt(nn.Module):
    """patchify -> zero-pad + Q0 -> L blocks beta-Abs(M R^T S(R(X + p)) + b) -> L2 pool -> head W.

    Everything before the head (the backbone phi) is 1-Lipschitz in l2; the head is free.
    Input (B, side, side) pixels; output (B, n_classes) logits.
    """

    def __init__(self, cfg: LipNeXtConfig, seed: int = 0):
        super().__init__()
        self.cfg = cfg
        gen = torch.Generator().manual_seed(seed)
        Q, _ = torch.linalg.qr(torch.randn(1 + 2 * cfg.L, cfg.C, cfg.C, generator=gen))
        self.orth = _Orthogonal(Q)
        if cfg.orthogonal_map != "manifold":
            from torch.nn.utils.parametrizations import orthogonal

            orthogonal(self.orth, "weight", orthogonal_map=cfg.orthogonal_map)
        n = cfg.side // cfg.patch
        self.p = nn.Parameter(torch.zeros(cfg.L, n, n, 1))  # positional encoding (all channels)
        self.b = nn.Parameter(torch.zeros(cfg.L, cfg.C))
        self.head = nn.Linear(cfg.C, cfg.n_classes)
        # The spatial shift is a fixed permutation of the (H, W, C) entries: one gather is cheaper
        # than four rolls and a concatenation (and their backward passes).
        entries = torch.arange(n * n * cfg.C, dtype=torch.float64).reshape(1, n, n, cfg.C)
        self.register_buffer(
            "shift_index", spatial_shift(entries, cfg.alpha).flatten().long(), persistent=False
        )
        nn.init.normal_(self.head.weight, std=1.0 / math.sqrt(cfg.C), generator=gen)

    def backbone(self, x: torch.Tensor) -> torch.Tensor:
        """phi: (B, side, side) -> (B, C) features, 1-Lipschitz in l2."""
        cfg, Q = self.cfg, self.orth.weight
        k = round(cfg.beta * cfg.C)
        z = _patchify(x, cfg.patch)
        z = nn.functional.pad(z, (0, cfg.C - z.shape[-1])) @ Q[0].mT  # isometric embedding
        shape = z.shape
        for i in range(cfg.L):
            R, M = Q[1 + 2 * i], Q[2 + 2 * i]
            u = ((z + self.p[i]) @ R.mT).flatten(1)[:, self.shift_index].view(shape)  # S(R(X + p))
            z = _beta_abs(u @ (R @ M.mT) + self.b[i], k)  # M R^T S(.) as one token-wise matmul
        return torch.linalg.vector_norm(z, dim=(1, 2))  # L2 spatial pooling

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


# ----------------------------------------------------------------------------------------------
# 4. Data and training
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Digits:
    """scikit-learn's digits in [0, 1]: X (N, 8, 8) float32 and y (N,) int64, train and test."""

    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor


def load_digits_split(n_test: int = 500, seed: int = 0) -> Digits:
    """The 1797 bundled 8x8 digits, pixels / 16, split stratified into train and n_test test."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    _check_positive("n_test", n_test)
    X, y = load_digits(return_X_y=True)
    if n_test >= len(y):
        raise ValueError(f"n_test={n_test} must be below the {len(y)} digits")
    Xtr, Xte, ytr, yte = train_test_split(
        X / 16.0, y, test_size=n_test, stratify=y, random_state=seed
    )

    def img(a):
        return torch.tensor(a, dtype=torch.float32).reshape(-1, 8, 8)

    return Digits(img(Xtr), torch.tensor(ytr), img(Xte), torch.tensor(yte))


def gloro_logits(z: torch.Tensor, W: torch.Tensor, y: torch.Tensor, eps: float) -> torch.Tensor:
    """Worst-case logits in an eps-ball of a 1-Lipschitz backbone: z_i + eps ||W_y - W_i|| (i != y).

    z: (B, K) logits, W: (K, C) head weights, y: (B,) labels; the i = y entry is unchanged.
    """
    _check_tensor("z", z, 2)
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps!r}")
    return z + eps * torch.linalg.vector_norm(W[y][:, None, :] - W[None, :, :], dim=-1)


@dataclass(frozen=True)
class TrainResult:
    """A trained model, CPU seconds per optimiser step (process time), and the largest
    ||Q^T Q - I||_F seen just before an end-of-epoch retraction (NaN for the constrained
    parametrisations)."""

    model: nn.Module
    step_time_s: float
    error_before_retraction: float


def train_lipnext(
    cfg: LipNeXtConfig,
    data: Digits,
    epochs: int = 30,
    batch: int = 64,
    lr: float = 1e-2,
    eps_train: float = 0.5,
    seed: int = 0,
    retract: bool = True,
) -> TrainResult:
    """Adam (orthogonal matrices: OrthogonalAdam, or Adam on torch's parametrisation), cosine lr
    from `lr` to 0, cross-entropy on GloRo logits at eps_train, polar retraction every epoch."""
    for name, v in (("epochs", epochs), ("batch", batch)):
        _check_positive(name, v)
    torch.manual_seed(seed)
    model = LipNeXt(cfg, seed)
    Q = [p for n, p in model.named_parameters() if n.startswith("orth.")]
    rest = [p for n, p in model.named_parameters() if not n.startswith("orth.")]
    manifold = cfg.orthogonal_map == "manifold"
    opts = [torch.optim.Adam(rest, lr=lr)]
    opts.append(OrthogonalAdam(Q, lr=lr) if manifold else torch.optim.Adam(Q, lr=lr))
    n_steps = epochs * math.ceil(len(data.y_train) / batch)
    scheds = [torch.optim.lr_scheduler.CosineAnnealingLR(o, n_steps) for o in opts]
    gen, worst, t0 = torch.Generator().manual_seed(seed), 0.0, time.process_time()
    for _ in range(epochs):
        for idx in torch.randperm(len(data.y_train), generator=gen).split(batch):
            x, y = data.X_train[idx], data.y_train[idx]
            z = gloro_logits(model(x), model.head.weight, y, eps_train)
            loss = nn.functional.cross_entropy(z, y)
            for o in opts:
                o.zero_grad()
            loss.backward()
            for o, s in zip(opts, scheds, strict=True):
                o.step()
                s.step()
        if manifold and retract:
            worst = max(worst, opts[1].retract())
    step_time = (time.process_time() - t0) / n_steps  # CPU time: less noisy on a shared machine
    model.eval()
    return TrainResult(model, step_time, worst if manifold and retract else float("nan"))


def train_mlp(
    data: Digits,
    hidden: tuple[int, ...] = (256, 256),
    epochs: int = 30,
    batch: int = 64,
    lr: float = 1e-3,
    seed: int = 0,
) -> nn.Sequential:
    """An unconstrained ReLU MLP 64-hidden-10 trained with Adam on plain cross-entropy."""
    sizes = {"epochs": epochs, "batch": batch} | {f"hidden[{i}]": h for i, h in enumerate(hidden)}
    for name, v in sizes.items():
        _check_positive(name, v)
    torch.manual_seed(seed)
    sizes = (64, *hidden, 10)
    layers: list[nn.Module] = [nn.Flatten()]
    for a, b in zip(sizes[:-1], sizes[1:], strict=True):
        layers += [nn.Linear(a, b), nn.ReLU()]
    mlp = nn.Sequential(*layers[:-1])
    opt = torch.optim.Adam(mlp.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(data.y_train), generator=gen).split(batch):
            loss = nn.functional.cross_entropy(mlp(data.X_train[idx]), data.y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return mlp.eval()


def mlp_lipschitz_bound(mlp: nn.Sequential) -> float:
    """Bound on the l2 Lipschitz constant of the logits: prod_l ||W_l||_2 (ReLU is 1-Lipschitz)."""
    norms = [
        torch.linalg.matrix_norm(m.weight.detach().double(), ord=2)
        for m in mlp
        if isinstance(m, nn.Linear)
    ]
    if not norms:
        raise ValueError("mlp has no nn.Linear layers to bound")
    return float(torch.stack(norms).prod())


# ----------------------------------------------------------------------------------------------
# 5. Certification and audits
# ----------------------------------------------------------------------------------------------


def head_aware_radius(z: torch.Tensor, W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Prediction j and radius min_{i != j} (z_j - z_i) / ||W_j - W_i|| (1-Lipschitz backbone).

    z: (N, K) logits, W: (K, C) head; returns (N,) predictions and (N,) radii in input l2 units.
    """
    _check_tensor("z", z, 2)
    _check_tensor("W", W, 2)
    j = z.argmax(1)
    gap = z.gather(1, j[:, None]) - z
    dist = torch.linalg.vector_norm(W[j][:, None, :] - W[None, :, :], dim=-1)
    ratio = torch.where(dist > 0, gap / dist.clamp_min(1e-30), torch.inf)
    ratio = ratio.masked_fill(nn.functional.one_hot(j, z.shape[1]).bool(), torch.inf)
    return j, ratio.min(1).values


def generic_radius(z: torch.Tensor, lipschitz: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Prediction and radius (top-1 - top-2 margin) / (sqrt(2) L) for an L-Lipschitz logit map
    (Tsuzuku et al. 2018). z: (N, K); returns (N,) predictions and (N,) radii."""
    _check_tensor("z", z, 2)
    _check_positive("lipschitz", lipschitz, integer=False)
    top = z.topk(2, dim=1)
    return top.indices[:, 0], (top.values[:, 0] - top.values[:, 1]) / (math.sqrt(2) * lipschitz)


def certified_accuracy(
    pred: torch.Tensor, radius: torch.Tensor, y: torch.Tensor, eps: float
) -> float:
    """CRA: fraction of points both correctly classified and certified at radius > eps."""
    if eps < 0 or pred.shape != y.shape or radius.shape != y.shape:
        raise ValueError(
            f"need eps >= 0 and equal shapes; got eps={eps}, "
            f"{pred.shape}, {radius.shape}, {y.shape}"
        )
    return float(((pred == y) & (radius > eps)).double().mean())


def pgd_l2(
    f,
    x: torch.Tensor,
    y: torch.Tensor,
    eps: torch.Tensor,
    steps: int = 100,
    restarts: int = 3,
    seed: int = 0,
) -> torch.Tensor:
    """l2 PGD on the margin loss max_{i != y} z_i - z_y inside per-point balls ||delta|| <= eps.

    Step size 2.5 eps / steps (Madry et al. 2018). x: (N, ...) inputs, not clipped to the pixel
    range (certificates cover the whole ball),
    y: (N,) labels, eps: (N,) radii. Returns (N,) bool: misclassified at any iterate.
    """
    _check_tensor("x", x, 2)
    for name, v in (("steps", steps), ("restarts", restarts)):
        _check_positive(name, v)
    if eps.shape != y.shape or (eps < 0).any():
        raise ValueError(f"eps must be (N,) = {tuple(y.shape)} and >= 0, got {tuple(eps.shape)}")
    gen = torch.Generator().manual_seed(seed)
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


def jacobian_spectral_norms(f, x: torch.Tensor) -> torch.Tensor:
    """||J_f(x_n)||_2 for each of the N inputs x: (N, ...); f must act on each sample alone.

    Reverse mode on sum_n f(x_n): its Jacobian is (out, N, *in), and block n is J_f(x_n).
    """
    from torch.func import jacrev

    _check_tensor("x", x, 2)
    J = jacrev(lambda xs: f(xs).sum(0))(x)  # (out, N, *in)
    return torch.linalg.matrix_norm(J.transpose(0, 1).flatten(2), ord=2)


def lipschitz_ratio_ascent(
    f, x: torch.Tensor, steps: int = 100, lr: float = 1e-2, seed: int = 0
) -> float:
    """Largest ||f(a) - f(b)|| / ||a - b|| seen while Adam pushes up the ratio of N pairs.

    Pairs start at (x, x + 0.1 N(0, I)); x: (N, ...). A lower bound on the Lipschitz constant.
    """
    _check_tensor("x", x, 2)
    _check_positive("steps", steps)
    gen = torch.Generator().manual_seed(seed)
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
