"""LipNeXt in miniature: constraint-free 1-Lipschitz networks, a prior design, and certificates.

Hu, Hu & Fredrikson (2026), "LipNeXt: Scaling up Lipschitz-based Certified Robustness to
Billion-parameter Models" (ICLR 2026, arXiv:2601.18513). In dependency order:

1. the orthogonal-manifold optimiser: Adam in the Lie algebra of skew matrices, updates
   X <- X FastExp(A) (a truncated Taylor exponential) and a periodic polar retraction;
2. the layers: spatial shift (the only isometric depthwise convolution, Theorem 1), beta-Abs
   (MinMax in another orthogonal basis, Theorem 2), L2 spatial pooling, 2x2 patchify;
3. the LipNeXt-style block Z = beta-Abs(M R^T S(R(X + p)) + b) and network;
4. a prior 1-Lipschitz design to compare with: almost-orthogonal (AOL) convolutions
   (Prach & Lampert 2022, arXiv:2208.03160) with MaxMin activations;
5. data and training (manifold, or torch's constrained `parametrizations.orthogonal`);
6. certification (head-aware and generic rules) and the audits: Jacobian norms, a
   gradient-ascent Lipschitz estimate and an l2 PGD attack;
7. one replicate of the chapter's experiment, for `lib.runs.run_jobs`.

LipNeXt tokens are laid out as (batch, H, W, C): channel mixing is `x @ Q.T` on the last axis.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from lib import validate

# ||A||_F below which FastExp uses a Taylor polynomial of order 2, 3, 4 (above: exact expm).
# Thresholds as described for LipNeXt and used in the first author's `fast_exp`.
FASTEXP_THRESHOLDS_HU2026 = (0.05, 0.25, 1.0)
ORTHOGONAL_MAPS = ("manifold", "cayley", "matrix_exp")
N_DIGITS = 1797  # images in scikit-learn's bundled digits


def _tensor(name: str, x, min_ndim: int = 1) -> torch.Tensor:
    """x if it is a floating torch.Tensor with >= min_ndim axes, all finite (via lib.validate)."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point torch.Tensor, got {type(x).__name__}; "
            f"pass e.g. torch.tensor(values, dtype=torch.float64)"
        )
    if x.ndim < min_ndim:
        raise ValueError(f"{name} must have >= {min_ndim} axes, got shape {tuple(x.shape)}")
    validate.array(name, x.detach().cpu().numpy(), ndim=None)  # finite, non-empty
    return x


def _square(name: str, x) -> torch.Tensor:
    x = _tensor(name, x, 2)
    if x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name} must be (..., n, n) square matrices, got {tuple(x.shape)}")
    return x


def _labels(name: str, y, n: int) -> torch.Tensor:
    """y if it is an (n,) integer tensor of class labels."""
    if not isinstance(y, torch.Tensor) or y.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"{name} must be an int64 torch.Tensor of labels, got {type(y).__name__}")
    if y.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {tuple(y.shape)}")
    return y


def _callable(name: str, f) -> None:
    if not callable(f):
        raise TypeError(f"{name} must be a function of a tensor, got {type(f).__name__}")


# ----------------------------------------------------------------------------------------------
# 1. Orthogonal-manifold optimiser
# ----------------------------------------------------------------------------------------------


def fast_exp(A: torch.Tensor) -> torch.Tensor:
    """FastExp: sum_{i<=k} A^i / i! with k = 2, 3, 4 by ||A||_F (max over the batch), else expm.

    A: (..., n, n) skew-symmetric. The truncation error is at most ||A||^{k+1}/(k+1)! e^||A||.
    """
    A = _square("A", A)
    return _fast_exp(A)


def _fast_exp(A: torch.Tensor) -> torch.Tensor:
    """fast_exp without input checks (the optimiser's inner loop)."""
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
    X = _square("X", X)
    U, _, Vh = torch.linalg.svd(X.double())  # float64: a float32 SVD leaves ~1e-6 error
    return (U @ Vh).to(X.dtype)


def orthogonality_error(Q: torch.Tensor) -> float:
    """max over the batch of ||Q^T Q - I||_F, computed in float64. Q: (..., n, n)."""
    Q = _square("Q", Q).detach().double()
    eye = torch.eye(Q.shape[-1], dtype=Q.dtype)
    return float(torch.linalg.matrix_norm(Q.mT @ Q - eye).max())


class OrthogonalAdam(torch.optim.Optimizer):
    """Riemannian Adam on O(n): moments of Omega = skew(X^T G); X <- X FastExp(-lr m/(sqrt v + e)).

    Omega = (X^T G - G^T X)/2 is the left-trivialised Riemannian gradient; m is skew and v is
    symmetric, so the Adam direction m_hat/(sqrt(v_hat)+eps) stays skew and the update stays
    on the manifold up to FastExp's truncation error, which `retract` removes.
    """

    def __init__(self, params, lr: float = 1e-2, betas=(0.9, 0.999), eps: float = 1e-8):
        lr = validate.real("lr", lr, low=0, low_open=True)
        if not isinstance(betas, tuple | list) or len(betas) != 2:
            raise TypeError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        betas = tuple(validate.real(f"betas[{i}]", b, low=0, high=1, high_open=True)
                      for i, b in enumerate(betas))  # fmt: skip
        eps = validate.real("eps", eps, low=0, low_open=True)
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps})

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
                X.copy_(X @ _fast_exp(A))
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
    x = _tensor("x", x, 4)
    alpha = validate.real("alpha", alpha, low=0, high=0.25, low_open=True)
    g = int(alpha * x.shape[-1])
    if g < 1:
        raise ValueError(f"alpha={alpha!r} shifts 0 of {x.shape[-1]} channels; use 1/C..1/4")
    return _shift(x, g)


def _shift(x: torch.Tensor, g: int) -> torch.Tensor:
    """spatial_shift without input checks; g channels per direction."""
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
    x = _tensor("x", x)
    beta = validate.probability("beta", beta)
    return _beta_abs(x, round(beta * x.shape[-1]))


def _beta_abs(x: torch.Tensor, k: int) -> torch.Tensor:
    """beta_abs without input checks: abs on the first k channels."""
    return torch.cat([x[..., :k].abs(), x[..., k:]], dim=-1)


def minmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """MinMax (GroupSort 2): pairs (x_i, x_{i+C/2}) along `dim` -> (max, min); C even."""
    x = _tensor("x", x)
    dim = validate.integer("dim", dim, minimum=-x.ndim, maximum=x.ndim - 1)
    if x.shape[dim] % 2:
        raise ValueError(f"minmax needs an even number of channels, got {x.shape[dim]}")
    return _minmax(x, dim)


def _minmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    a, b = x.chunk(2, dim=dim)
    return torch.cat([torch.maximum(a, b), torch.minimum(a, b)], dim=dim)


def theorem2_basis(d: int, dtype=torch.float64) -> torch.Tensor:
    """R = [[I, -I], [I, I]] / sqrt(2) in O(2d), so that R^T beta-Abs(R x) = MinMax(x) (Thm 2)."""
    d = validate.integer("d", d, minimum=1)
    eye = torch.eye(d, dtype=dtype)
    return torch.cat([torch.cat([eye, -eye], 1), torch.cat([eye, eye], 1)], 0) / math.sqrt(2)


def kernel_gain(K: np.ndarray, n: int) -> np.ndarray:
    """|K_hat(omega)| on the n x n DFT grid: a circular convolution is an isometry iff all are 1."""
    K = validate.array("K", K, ndim=2)
    n = validate.integer("n", n, minimum=1)
    if max(K.shape) > n:
        raise ValueError(
            f"K of shape {K.shape} does not fit on an n={n} grid; use n >= {max(K.shape)}"
        )
    return np.abs(np.fft.fft2(K, s=(n, n)))


def l2_pool(x: torch.Tensor) -> torch.Tensor:
    """L2 spatial pooling [L2Pool(X)]_c = (sum_{h,w} X_{h,w,c}^2)^{1/2}. (B, H, W, C) -> (B, C)."""
    x = _tensor("x", x, 4)
    return torch.linalg.vector_norm(x, dim=(1, 2))


def patchify(x: torch.Tensor, patch: int = 2) -> torch.Tensor:
    """Cut (B, S, S) images into (B, S/p, S/p, p*p) tokens of p x p patches (a permutation)."""
    x = _tensor("x", x, 3)
    patch = validate.integer("patch", patch, minimum=1)
    if x.ndim != 3 or x.shape[1] != x.shape[2] or x.shape[1] % patch:
        raise ValueError(
            f"x must be (B, S, S) with S divisible by patch={patch}; got {tuple(x.shape)}"
        )
    return _patchify(x, patch)


def _patchify(x: torch.Tensor, patch: int) -> torch.Tensor:
    """patchify without input checks (the models' inner loop)."""
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
            validate.integer(name, getattr(self, name), minimum=1)
        validate.choice("orthogonal_map", self.orthogonal_map, ORTHOGONAL_MAPS)
        validate.real("alpha", self.alpha, low=0, high=0.25, low_open=True)
        validate.probability("beta", self.beta)
        if self.C < self.patch**2:
            raise ValueError(f"C={self.C} must be >= patch^2={self.patch**2} (tokens are padded)")
        if int(self.alpha * self.C) < 1:
            raise ValueError(f"alpha={self.alpha!r} shifts no channel at C={self.C}; use >= 1/C")
        if self.side % self.patch:
            raise ValueError(f"side={self.side} must be divisible by patch={self.patch}")


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
        gen = torch.Generator().manual_seed(validate.integer("seed", seed, minimum=0))
        Q, _ = torch.linalg.qr(torch.randn(1 + 2 * cfg.L, cfg.C, cfg.C, generator=gen))
        self.orth = _Orthogonal(Q)
        if cfg.orthogonal_map != "manifold":
            from torch.nn.utils.parametrizations import orthogonal

            orthogonal(self.orth, "weight", orthogonal_map=cfg.orthogonal_map)
        n = cfg.side // cfg.patch
        self.p = nn.Parameter(torch.zeros(cfg.L, n, n, 1))  # positional encoding (all channels)
        self.b = nn.Parameter(torch.zeros(cfg.L, cfg.C))
        self.head = nn.Linear(cfg.C, cfg.n_classes)
        nn.init.zeros_(self.head.bias)  # no draw from torch's global generator
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
# 4. A prior design: almost-orthogonal (AOL) convolutions, Prach & Lampert (2022)
# ----------------------------------------------------------------------------------------------


def aol_scale(K: torch.Tensor) -> torch.Tensor:
    """AOL rescaling d_i = (sum_j sum_xy |(K^T * K)_{ij,xy}|)^{-1/2} of a (C_out, C_in, k, k) K.

    The convolution with kernel K diag(d) is 1-Lipschitz in l2 (Prach & Lampert 2022, Thm. 2):
    K^T * K is the kernel of K^T K, and d is Theorem 1's bound on its absolute row sums.
    Returns (C_in,) factors.
    """
    return _aol_scale(_tensor("K", K, 4))


def _aol_scale(K: torch.Tensor) -> torch.Tensor:
    """aol_scale without input checks. K: (C_out, C_in, k, k)."""
    k = K.shape[-1]
    Kt = K.transpose(0, 1)  # (C_in, C_out, k, k): input channels as a batch
    gram = nn.functional.conv2d(Kt, Kt, padding=k - 1)  # (C_in, C_in, 2k-1, 2k-1)
    return (gram.abs().sum(dim=(1, 2, 3)) + 1e-12).rsqrt()  # 1e-12: an all-zero channel


@dataclass(frozen=True)
class AOLConfig:
    """A plain AOL convolutional network on the same 2x2-patch tokens as LipNeXt: width C,
    depth L of k x k AOL convolutions with zero padding and MaxMin activations, then `pool`:
    'flatten' (the AOL paper's concatenation pooling down to one pixel) or 'l2' (LipNeXt's)."""

    C: int = 16
    L: int = 5
    kernel: int = 3
    side: int = 8
    patch: int = 2
    n_classes: int = 10
    pool: str = "flatten"

    def __post_init__(self) -> None:
        validate.choice("pool", self.pool, ("flatten", "l2"))
        for name in ("C", "L", "kernel", "side", "patch", "n_classes"):
            validate.integer(name, getattr(self, name), minimum=1)
        if self.C % 2 or self.C < self.patch**2:
            raise ValueError(f"C={self.C} must be even (MaxMin) and >= patch^2={self.patch**2}")
        if self.kernel % 2 == 0:
            raise ValueError(f"kernel={self.kernel} must be odd ('same' padding)")
        if self.side % self.patch:
            raise ValueError(f"side={self.side} must be divisible by patch={self.patch}")


class AOLNet(nn.Module):
    """patchify -> zero-pad to C -> L x MaxMin(AOL-conv(z) + b) -> flatten or L2 pool -> head W.

    Kernels start at the identity (a one at the centre tap), as in the AOL paper's code, which
    makes every layer exactly orthogonal at initialisation. Input (B, side, side) pixels.
    """

    def __init__(self, cfg: AOLConfig, seed: int = 0):
        super().__init__()
        self.cfg = cfg
        gen = torch.Generator().manual_seed(validate.integer("seed", seed, minimum=0))
        K = torch.zeros(cfg.L, cfg.C, cfg.C, cfg.kernel, cfg.kernel)
        K[:, :, :, cfg.kernel // 2, cfg.kernel // 2] = torch.eye(cfg.C)
        self.kernel = nn.Parameter(K)
        self.b = nn.Parameter(torch.zeros(cfg.L, cfg.C))
        n_feat = cfg.C * (cfg.side // cfg.patch) ** 2 if cfg.pool == "flatten" else cfg.C
        self.head = nn.Linear(n_feat, cfg.n_classes)
        nn.init.normal_(self.head.weight, std=1.0 / math.sqrt(n_feat), generator=gen)
        nn.init.zeros_(self.head.bias)

    def backbone(self, x: torch.Tensor) -> torch.Tensor:
        """phi: (B, side, side) -> (B, C n^2) or (B, C) features, 1-Lipschitz in l2."""
        cfg = self.cfg
        z = _patchify(x, cfg.patch).permute(0, 3, 1, 2)  # (B, p*p, n, n)
        z = nn.functional.pad(z, (0, 0, 0, 0, 0, cfg.C - z.shape[1]))  # isometric embedding
        for i in range(cfg.L):
            # A zero-padded convolution is a crop of a circular one on a larger grid, so the AOL
            # bound holds for it too.
            K = self.kernel[i] * _aol_scale(self.kernel[i])[None, :, None, None]
            z = nn.functional.conv2d(z, K, padding=cfg.kernel // 2) + self.b[i][:, None, None]
            z = _minmax(z, 1)
        if self.cfg.pool == "flatten":
            return z.flatten(1)
        return torch.linalg.vector_norm(z, dim=(2, 3))  # L2 spatial pooling

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


ModelConfig = LipNeXtConfig | AOLConfig


def build_model(cfg: ModelConfig, seed: int = 0) -> LipNeXt | AOLNet:
    """The network a config describes, initialised from `seed`."""
    if isinstance(cfg, LipNeXtConfig):
        return LipNeXt(cfg, seed)
    if isinstance(cfg, AOLConfig):
        return AOLNet(cfg, seed)
    raise TypeError(f"cfg must be a LipNeXtConfig or an AOLConfig, got {type(cfg).__name__}")


def count_parameters(model: nn.Module) -> int:
    """Trainable numbers stored by the model (an orthogonal C x C matrix counts C^2)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch nn.Module, got {type(model).__name__}")
    seen = {id(p): p for p in model.parameters() if p.requires_grad}
    return int(sum(p.numel() for p in seen.values()))


# ----------------------------------------------------------------------------------------------
# 5. Data and training
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

    n_test = validate.integer("n_test", n_test, minimum=10, maximum=N_DIGITS - 10)
    seed = validate.integer("seed", seed, minimum=0)
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(
        X / 16.0, y, test_size=n_test, stratify=y, random_state=seed % 2**32
    )

    def img(a):
        return torch.tensor(a, dtype=torch.float32).reshape(-1, 8, 8)

    return Digits(img(Xtr), torch.tensor(ytr), img(Xte), torch.tensor(yte))


def gloro_logits(z: torch.Tensor, W: torch.Tensor, y: torch.Tensor, eps: float) -> torch.Tensor:
    """Worst-case logits in an eps-ball of a 1-Lipschitz backbone: z_i + eps ||W_y - W_i|| (i != y).

    z: (B, K) logits, W: (K, C) head weights, y: (B,) labels; the i = y entry is unchanged.
    """
    z, W = _tensor("z", z, 2), _tensor("W", W, 2)
    _labels("y", y, z.shape[0])
    if W.shape[0] != z.shape[1]:
        raise ValueError(f"W must have one row per logit ({z.shape[1]}), got {tuple(W.shape)}")
    return _gloro_logits(z, W, y, validate.real("eps", eps, low=0))


def _gloro_logits(z: torch.Tensor, W: torch.Tensor, y: torch.Tensor, eps: float) -> torch.Tensor:
    return z + eps * torch.linalg.vector_norm(W[y][:, None, :] - W[None, :, :], dim=-1)


@dataclass(frozen=True)
class Recipe:
    """One training recipe for every model: epochs of Adam (OrthogonalAdam for manifold
    matrices) with batch `batch`, a cosine learning rate from `lr` to 0, and cross-entropy on
    GloRo logits at radius `eps_train`."""

    epochs: int = 30
    batch: int = 64
    lr: float = 1e-2
    eps_train: float = 0.5

    def __post_init__(self) -> None:
        validate.integer("epochs", self.epochs, minimum=1)
        validate.integer("batch", self.batch, minimum=1)
        validate.real("lr", self.lr, low=0, high=1, low_open=True)
        validate.real("eps_train", self.eps_train, low=0)


@dataclass(frozen=True)
class TrainResult:
    """A trained model, CPU seconds per optimiser step (process time), and the largest
    ||Q^T Q - I||_F seen just before an end-of-epoch retraction (NaN unless manifold)."""

    model: nn.Module
    step_time_s: float
    error_before_retraction: float


def _optimisers(model: nn.Module, lr: float) -> list[torch.optim.Optimizer]:
    """Adam for every parameter, except OrthogonalAdam for LipNeXt's manifold matrices."""
    manifold = isinstance(model, LipNeXt) and model.cfg.orthogonal_map == "manifold"
    orth = [model.orth.weight] if manifold else []
    rest = [p for p in model.parameters() if all(p is not q for q in orth)]
    return [torch.optim.Adam(rest, lr=lr)] + ([OrthogonalAdam(orth, lr=lr)] if orth else [])


def train_model(
    model: nn.Module, data: Digits, recipe: Recipe = Recipe(), seed: int = 0, retract: bool = True
) -> TrainResult:
    """Train `model` in place by `recipe` on data.X_train; batches drawn from `seed`.

    Manifold LipNeXt matrices are polar-retracted at the end of every epoch (if `retract`).
    """
    if not isinstance(model, LipNeXt | AOLNet):
        raise TypeError(f"model must be a LipNeXt or an AOLNet, got {type(model).__name__}")
    if not isinstance(data, Digits):
        raise TypeError(f"data must be a Digits split, got {type(data).__name__}")
    if not isinstance(recipe, Recipe):
        raise TypeError(f"recipe must be a Recipe, got {type(recipe).__name__}")
    seed, retract = validate.integer("seed", seed, minimum=0), validate.boolean("retract", retract)
    opts = _optimisers(model, recipe.lr)
    n_steps = recipe.epochs * math.ceil(len(data.y_train) / recipe.batch)
    scheds = [torch.optim.lr_scheduler.CosineAnnealingLR(o, n_steps) for o in opts]
    gen, worst, t0 = torch.Generator().manual_seed(seed), 0.0, time.process_time()
    model.train()
    for _ in range(recipe.epochs):
        for idx in torch.randperm(len(data.y_train), generator=gen).split(recipe.batch):
            x, y = data.X_train[idx], data.y_train[idx]
            z = _gloro_logits(model(x), model.head.weight, y, recipe.eps_train)
            loss = nn.functional.cross_entropy(z, y)
            for o in opts:
                o.zero_grad()
            loss.backward()
            for o, s in zip(opts, scheds, strict=True):
                o.step()
                s.step()
        if isinstance(opts[-1], OrthogonalAdam) and retract:
            worst = max(worst, opts[-1].retract())
    step_time = (time.process_time() - t0) / n_steps  # CPU time: less noisy on a shared machine
    manifold = isinstance(opts[-1], OrthogonalAdam) and retract
    return TrainResult(model.eval(), step_time, worst if manifold else float("nan"))


# ----------------------------------------------------------------------------------------------
# 6. Certification and audits
# ----------------------------------------------------------------------------------------------


def head_aware_radius(z: torch.Tensor, W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Prediction j and radius min_{i != j} (z_j - z_i) / ||W_j - W_i|| (1-Lipschitz backbone).

    z: (N, K) logits, W: (K, C) head; returns (N,) predictions and (N,) radii in input l2 units.
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


def certified_accuracy(
    pred: torch.Tensor, radius: torch.Tensor, y: torch.Tensor, eps: float
) -> float:
    """CRA: fraction of points both correctly classified and certified at radius > eps."""
    radius = _tensor("radius", radius)
    _labels("pred", pred, len(radius))
    _labels("y", y, len(radius))
    eps = validate.real("eps", eps, low=0)
    return float(((pred == y) & (radius > eps)).double().mean())


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
    _labels("y", y, len(x))
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

    Reverse mode on sum_n f(x_n): its Jacobian is (out, N, *in), and block n is J_f(x_n).
    """
    from torch.func import jacrev

    _callable("f", f)
    x = _tensor("x", x, 2)
    J = jacrev(lambda xs: f(xs).sum(0))(x)  # (out, N, *in)
    return torch.linalg.matrix_norm(J.transpose(0, 1).flatten(2), ord=2)


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
# 7. One replicate of the chapter's experiment
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """A trained and certified model: CRA on `eps_grid`, its test predictions and head-aware
    radii (float64), CPU seconds per step and the drift before retraction (NaN unless manifold).
    The trained weights travel as a float64 state dict (parametrised modules do not pickle).
    """

    cfg: ModelConfig
    state: dict
    eps_grid: np.ndarray
    cra: np.ndarray
    pred: torch.Tensor
    radius: torch.Tensor
    step_time_s: float
    error_before_retraction: float


def train_and_certify(
    cfg: ModelConfig, recipe: Recipe, split_seed: int, seed: int, eps_grid
) -> Run:
    """Train the model `cfg` describes (init and batches from `seed`) on the digits split drawn
    from `split_seed`, then certify its test set in float64 with the head-aware rule."""
    eps_grid = validate.array("eps_grid", eps_grid, nonnegative=True)
    data = load_digits_split(seed=split_seed)
    result = train_model(build_model(cfg, seed), data, recipe, seed)
    model = result.model.double()
    with torch.no_grad():
        pred, radius = head_aware_radius(model(data.X_test.double()), model.head.weight)
    correct = (pred == data.y_test).numpy()
    cra = np.array([(correct & (radius > e).numpy()).mean() for e in eps_grid])
    return Run(cfg, model.state_dict(), eps_grid, cra, pred, radius, result.step_time_s,
               result.error_before_retraction)  # fmt: skip


def trained_model(run: Run) -> LipNeXt | AOLNet:
    """The float64 model of a Run, rebuilt from its config and weights, in eval mode."""
    if not isinstance(run, Run):
        raise TypeError(f"run must be a Run from train_and_certify, got {type(run).__name__}")
    model = build_model(run.cfg).double()
    model.load_state_dict(run.state)
    return model.eval()
