"""LipNeXt in miniature: 1-Lipschitz networks built from isometries, and two prior designs.

Hu, Hu & Fredrikson (2026), "LipNeXt: Scaling up Lipschitz-based Certified Robustness to
Billion-parameter Models" (ICLR 2026, arXiv:2601.18513). In dependency order:

1. the orthogonal-manifold optimiser: Adam in the Lie algebra of skew matrices, updates
   X <- X FastExp(A) (a truncated Taylor exponential) and a periodic polar retraction;
2. the layers: spatial shift (the only isometric depthwise convolution, Theorem 1), beta-Abs
   (MinMax in another orthogonal basis, Theorem 2), the Cayley map, L2 spatial pooling and
   2x2 patchify;
3. the LipNeXt block Z = beta-Abs(M R^T S(R(X + p)) + b) and network, with L2 spatial pooling
   (the paper's) or a flattened head;
4. two prior 1-Lipschitz designs with the same two heads: almost-orthogonal (AOL) convolutions
   (Prach & Lampert 2022, arXiv:2208.03160) and Cayley orthogonal convolutions (Trockman &
   Kolter 2021, arXiv:2104.07167), each followed by MaxMin;
5. members: one network of an ensemble as a plain model, and its parameter and FLOP counts.

Every network holds E independent *members* (replicates with their own initialisation) and
evaluates them in one pass: images (E, B, side, side) -> logits (E, B, K). At these sizes a
training step is mostly Python overhead, so E members in one pass cost little more than one.
Training and certification are in `lib.certify`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from lib import validate

# ||A||_F below which FastExp uses a Taylor polynomial of order 2, 3, 4 (above: exact expm).
# Thresholds as described for LipNeXt and used in the first author's `fast_exp`.
FASTEXP_THRESHOLDS_HU2026 = (0.05, 0.25, 1.0)
ORTHOGONAL_MAPS = ("manifold", "cayley")
POOLS = ("l2", "flatten")
CONV_LAYERS = ("aol", "cayley")


def _tensor(name: str, x, min_ndim: int = 1) -> torch.Tensor:
    """x if it is a floating torch.Tensor with >= min_ndim axes, all finite (via lib.validate)."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point torch.Tensor, got {type(x).__name__}; "
            f"pass e.g. torch.tensor(values, dtype=torch.float64)"
        )
    if x.ndim < min_ndim:
        raise ValueError(f"{name} must have >= {min_ndim} axes, got shape {tuple(x.shape)}")
    validate.array(name, x.detach().float().cpu().numpy(), ndim=None)  # finite, non-empty
    return x


def _square(name: str, x) -> torch.Tensor:
    x = _tensor(name, x, 2)
    if x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name} must be (..., n, n) square matrices, got {tuple(x.shape)}")
    return x


def _generators(seeds: Sequence[int]) -> list[torch.Generator]:
    """One torch.Generator per member seed (a non-empty sequence of integers >= 0)."""
    if isinstance(seeds, int | str) or not isinstance(seeds, Sequence) or not seeds:
        raise TypeError(f"seeds must be a non-empty sequence of integers (one per member), "
                        f"got {seeds!r:.60}")  # fmt: skip
    return [torch.Generator().manual_seed(validate.integer(f"seeds[{i}]", s, minimum=0))
            for i, s in enumerate(seeds)]  # fmt: skip


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


def cayley(A: torch.Tensor) -> torch.Tensor:
    """Cayley map (I + A)^{-1} (I - A): orthogonal (unitary) for skew (skew-Hermitian) A.

    A: (..., n, n), real or complex. The map Trockman & Kolter (2021) apply per frequency.
    """
    return _cayley(_square("A", A) if not A.is_complex() else A)


def _cayley(A: torch.Tensor) -> torch.Tensor:
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
    return torch.linalg.solve(eye + A, eye - A)


def l2_pool(x: torch.Tensor) -> torch.Tensor:
    """L2 spatial pooling [L2Pool(X)]_c = (sum_{h,w} X_{h,w,c}^2)^{1/2}. (B, H, W, C) -> (B, C).

    1-Lipschitz in l2 by the reverse triangle inequality, channel by channel.
    """
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


def _tokens(x: torch.Tensor, patch: int, width: int) -> torch.Tensor:
    """(E, B, S, S) images -> (E, B, n, n, width) patch tokens zero-padded to `width` channels
    (an isometric embedding)."""
    z = _patchify(x.flatten(0, 1), patch)
    z = nn.functional.pad(z, (0, width - z.shape[-1]))
    return z.reshape(*x.shape[:2], *z.shape[1:])


# ----------------------------------------------------------------------------------------------
# 3. The LipNeXt network
# ----------------------------------------------------------------------------------------------


class _TokenGrid:
    """What LipNeXtConfig and ConvConfig share: a side x side image cut into patch x patch
    tokens, width C and a `pool` head ('l2' or 'flatten')."""

    side: int
    patch: int
    C: int
    pool: str

    @property
    def n(self) -> int:
        """Tokens per side of the grid."""
        return self.side // self.patch

    @property
    def features(self) -> int:
        """Inputs of the head: C after L2 pooling, n^2 C flattened."""
        return self.C * (1 if self.pool == "l2" else self.n**2)


@dataclass(frozen=True)
class LipNeXtConfig(_TokenGrid):
    """Width C, depth L (blocks), shift ratio alpha per direction, beta of beta-Abs, how the
    orthogonal matrices stay orthogonal ('manifold': OrthogonalAdam; 'cayley': Q = Q_0
    Cayley(A) with a free A), and the head's input: 'l2' spatial pooling (the paper's) or
    'flatten' (every token's channels)."""

    C: int = 32
    L: int = 6
    alpha: float = 1 / 8
    beta: float = 0.5
    side: int = 8
    patch: int = 2
    n_classes: int = 10
    orthogonal_map: str = "manifold"
    pool: str = "l2"

    def __post_init__(self) -> None:
        for name in ("C", "L", "side", "patch", "n_classes"):
            validate.integer(name, getattr(self, name), minimum=1)
        validate.choice("orthogonal_map", self.orthogonal_map, ORTHOGONAL_MAPS)
        validate.choice("pool", self.pool, POOLS)
        validate.real("alpha", self.alpha, low=0, high=0.25, low_open=True)
        validate.probability("beta", self.beta)
        if self.C < self.patch**2:
            raise ValueError(f"C={self.C} must be >= patch^2={self.patch**2} (tokens are padded)")
        if int(self.alpha * self.C) < 1:
            raise ValueError(f"alpha={self.alpha!r} shifts no channel at C={self.C}; use >= 1/C")
        if self.side % self.patch:
            raise ValueError(f"side={self.side} must be divisible by patch={self.patch}")


class Head(nn.Module):
    """E free linear heads: (E, B, F) features -> (E, B, K) logits, z = W phi + c.

    `weight` (E, K, F) starts N(0, 1/F) from each member's generator; `bias` (E, K) at 0.
    """

    def __init__(self, features: int, classes: int, gens: list[torch.Generator]):
        super().__init__()
        W = torch.stack([torch.randn(classes, features, generator=g) for g in gens])
        self.weight = nn.Parameter(W / math.sqrt(features))
        self.bias = nn.Parameter(torch.zeros(len(gens), classes))

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias[:, None, :].to(feats.dtype), feats,
                             self.weight.mT.to(feats.dtype))  # fmt: skip


class LipNeXt(nn.Module):
    """E members of: patchify -> zero-pad + Q0 -> L blocks beta-Abs(M R^T S(R(X + p)) + b) ->
    L2 pool or flatten -> head W.

    Everything before the head (the backbone phi) is 1-Lipschitz in l2 for each member.
    Input (E, B, side, side) pixels; output (E, B, n_classes) logits.
    """

    def __init__(self, cfg: LipNeXtConfig, seeds: Sequence[int] = (0,)):
        super().__init__()
        if not isinstance(cfg, LipNeXtConfig):
            raise TypeError(f"cfg must be a LipNeXtConfig, got {type(cfg).__name__}")
        self.cfg, gens = cfg, _generators(seeds)
        C, L, T = cfg.C, cfg.L, cfg.n**2
        Q = torch.stack([torch.linalg.qr(torch.randn(1 + 2 * L, C, C, generator=g))[0]
                         for g in gens])  # fmt: skip  # (E, 1 + 2L, C, C): [Q0, R1, M1, ...]
        if cfg.orthogonal_map == "manifold":
            self.orth = nn.Parameter(Q)
        else:  # Q = Q_init Cayley(A - A^T), A free and 0 at the start
            self.register_buffer("orth_base", Q)
            self.orth_free = nn.Parameter(torch.zeros_like(Q))
        self.p = nn.Parameter(torch.zeros(len(gens), L, T, 1))  # positional encoding
        self.b = nn.Parameter(torch.zeros(len(gens), L, C))
        self.head = Head(cfg.features, cfg.n_classes, gens)
        # The spatial shift is a fixed permutation of the (T, C) entries: one gather is cheaper
        # than four rolls and a concatenation (and their backward passes).
        entries = torch.arange(T * C, dtype=torch.float64).reshape(1, cfg.n, cfg.n, C)
        self.register_buffer(
            "shift_index", spatial_shift(entries, cfg.alpha).flatten().long(), persistent=False
        )

    def orthogonal(self) -> torch.Tensor:
        """The (E, 1 + 2L, C, C) orthogonal matrices [Q0, R1, M1, ..., RL, ML] of each member."""
        if self.cfg.orthogonal_map == "manifold":
            return self.orth
        return self.orth_base @ _cayley(self.orth_free - self.orth_free.mT)

    def backbone(self, x: torch.Tensor) -> torch.Tensor:
        """phi: (E, B, side, side) -> (E, B, F) features, 1-Lipschitz in l2 for each member."""
        cfg, Q = self.cfg, self.orthogonal().to(x.dtype)
        E, B, T, C = x.shape[0], x.shape[1], cfg.n**2, cfg.C
        k = round(cfg.beta * C)
        z = _tokens(x, cfg.patch, C).reshape(E, B * T, C) @ Q[:, 0].mT  # isometric embedding
        for i in range(cfg.L):
            R, M = Q[:, 1 + 2 * i], Q[:, 2 + 2 * i]
            u = (z.view(E, B, T, C) + self.p[:, i, None]).view(E, B * T, C) @ R.mT
            u = u.view(E, B, T * C)[..., self.shift_index].view(E, B * T, C)  # S(R(X + p))
            z = _beta_abs(torch.baddbmm(self.b[:, i, None], u, R @ M.mT), k)  # M R^T S(.) + b
        z = z.view(E, B, T, C)
        return torch.linalg.vector_norm(z, dim=2) if cfg.pool == "l2" else z.flatten(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


# ----------------------------------------------------------------------------------------------
# 4. Two prior designs: AOL convolutions and Cayley orthogonal convolutions
# ----------------------------------------------------------------------------------------------


def aol_scale(K: torch.Tensor) -> torch.Tensor:
    """AOL rescaling d_i = (sum_j sum_xy |(K^T * K)_{ij,xy}|)^{-1/2} of a (C_out, C_in, k, k) K.

    The convolution with kernel K diag(d) is 1-Lipschitz in l2 (Prach & Lampert 2022, Thm. 2):
    K^T * K is the kernel of K^T K, and d is Theorem 1's bound on its absolute row sums.
    K may carry a leading member axis (E, C_out, C_in, k, k). Returns (C_in,) or (E, C_in).
    """
    K = _tensor("K", K, 4)
    if K.ndim > 5:
        raise ValueError(f"K must be (C_out, C_in, k, k) or (E, ...), got {tuple(K.shape)}")
    return _aol_scale(K) if K.ndim == 5 else _aol_scale(K[None])[0]


def _aol_scale(K: torch.Tensor) -> torch.Tensor:
    """aol_scale of (E, C_out, C_in, k, k) kernels, one grouped convolution for all members."""
    E, C_out, C_in, k, _ = K.shape
    Kt = K.transpose(1, 2)  # (E, C_in, C_out, k, k): each member's input channels as a batch
    gram = nn.functional.conv2d(
        Kt.transpose(0, 1).reshape(C_in, E * C_out, k, k),
        Kt.reshape(E * C_in, C_out, k, k),
        padding=k - 1,
        groups=E,
    )
    gram = gram.reshape(C_in, E, C_in, 2 * k - 1, 2 * k - 1)  # fmt: skip
    return (gram.abs().sum(dim=(2, 3, 4)).T + 1e-12).rsqrt()  # 1e-12: an all-zero channel


def _aol_conv(z: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """AOL convolution of (E, B, C, n, n) maps with (E, C, C, k, k) kernels, zero padding: one
    grouped convolution for all members.

    A zero-padded convolution is a crop of a circular one on a larger grid, so the AOL bound
    holds for it too.
    """
    E, B, C, n, _ = z.shape
    Kd = (K * _aol_scale(K)[:, None, :, None, None]).to(z.dtype)
    out = nn.functional.conv2d(z.transpose(0, 1).reshape(B, E * C, n, n),
                               Kd.reshape(E * C, *K.shape[2:]), padding=K.shape[-1] // 2,
                               groups=E)  # fmt: skip
    return out.reshape(B, E, C, n, n).transpose(0, 1)


def cayley_conv(z: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """Orthogonal circular convolution of Trockman & Kolter (2021): at every 2-D frequency w,
    multiply by Cayley(A(w)) with A(w) = K^(w) - K^(w)^H, K^ the DFT of the centred k x k kernel.

    z: (E, B, C, n, n) maps, K: (E, C, C, k, k) kernels with k <= n. An isometry of each
    member's maps, whose receptive field is the whole (circular) grid.
    """
    z, K = _tensor("z", z, 5), _tensor("K", K, 5)
    E, _, C, n, _ = z.shape
    if K.shape[:3] != (E, C, C):
        raise ValueError(f"K must be (E, C, C, k, k) = ({E}, {C}, {C}, k, k) for z of shape "
                         f"{tuple(z.shape)}, got {tuple(K.shape)}")  # fmt: skip
    if K.shape[-1] > n or K.shape[-1] != K.shape[-2]:
        raise ValueError(f"K must hold square k x k kernels with k <= {n}, got {tuple(K.shape)}")
    return _cayley_conv(z, K)


def _cayley_conv(z: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """cayley_conv as one dense (C n^2 x C n^2) orthogonal matrix per member: on a 4 x 4 grid a
    matrix product is cheaper than the many tiny FFTs of the frequency-domain form."""
    E, B, C, n, _ = z.shape
    return (z.reshape(E, B, C * n * n) @ _cayley_operator(K, n).mT.to(z.dtype)).view(z.shape)


def _cayley_operator(K: torch.Tensor, n: int) -> torch.Tensor:
    """The (E, C n^2, C n^2) matrix of the Cayley convolution with (E, C, C, k, k) kernels on
    an n x n grid; rows and columns ordered (channel, row, column)."""
    E, C, _, k, _ = K.shape
    work = torch.float64 if K.dtype == torch.float64 else torch.float32  # no bfloat16 FFTs
    K = nn.functional.pad(K.to(work), (0, n - k, 0, n - k))
    K = torch.roll(K, (-(k // 2), -(k // 2)), (-2, -1))  # centre tap at offset (0, 0)
    Kf = torch.fft.rfft2(K).permute(0, 3, 4, 1, 2)  # (E, n, n//2 + 1, C_out, C_in)
    Q = _cayley(Kf - Kf.conj().mT)  # unitary at every frequency
    q = torch.fft.irfft2(Q.permute(0, 3, 4, 1, 2), s=(n, n))  # spatial kernel (E, C, C, n, n)
    # Circular convolution: y[o, p] = sum_{i, p'} q[o, i, p - p'] x[i, p'] (offsets mod n),
    # spread over the (p, p') pairs by a product with a one-hot matrix (a gather's backward
    # pass is slower).
    full = q.flatten(3) @ _offsets(n, work)  # (E, C_out, C_in, n^2 n^2)
    return full.view(E, C, C, n * n, n * n).transpose(2, 3).reshape(E, C * n * n, C * n * n)


def _offsets(n: int, dtype: torch.dtype) -> torch.Tensor:
    """(n^2, n^4) one-hot: entry [d, (p, p')] is 1 when p - p' = d on the circular n x n grid."""
    r = torch.arange(n)
    d = (r[:, None] - r[None, :]) % n  # (n, n) offsets along one axis
    offset = (d[:, None, :, None] * n + d[None, :, None, :]).reshape(-1)  # (p, p') pairs
    return nn.functional.one_hot(offset, n * n).T.to(dtype)


@dataclass(frozen=True)
class ConvConfig(_TokenGrid):
    """A prior 1-Lipschitz convolutional network on the same 2x2-patch tokens as LipNeXt:
    `layer` 'aol' (k x k AOL convolutions, zero padding, identity start) or 'cayley' (Cayley
    orthogonal convolutions, circular), width C, depth L, MaxMin activations, then `pool`:
    'l2' (LipNeXt's) or 'flatten' (the AOL paper's concatenation pooling down to one pixel)."""

    layer: str = "aol"
    C: int = 16
    L: int = 6
    kernel: int = 3
    side: int = 8
    patch: int = 2
    n_classes: int = 10
    pool: str = "flatten"

    def __post_init__(self) -> None:
        validate.choice("layer", self.layer, CONV_LAYERS)
        validate.choice("pool", self.pool, POOLS)
        for name in ("C", "L", "kernel", "side", "patch", "n_classes"):
            validate.integer(name, getattr(self, name), minimum=1)
        if self.C % 2 or self.C < self.patch**2:
            raise ValueError(f"C={self.C} must be even (MaxMin) and >= patch^2={self.patch**2}")
        if self.kernel % 2 == 0:
            raise ValueError(f"kernel={self.kernel} must be odd ('same' padding)")
        if self.side % self.patch:
            raise ValueError(f"side={self.side} must be divisible by patch={self.patch}")
        if self.kernel > self.side // self.patch:
            raise ValueError(
                f"kernel={self.kernel} must fit the {self.side // self.patch}-token grid"
            )


class ConvNet(nn.Module):
    """E members of: patchify -> zero-pad to C -> L x MaxMin(conv(z) + b) -> L2 pool or flatten
    -> head W, with AOL or Cayley orthogonal convolutions.

    AOL kernels start at the identity (a one at the centre tap), as in the AOL paper's code,
    which makes every layer exactly orthogonal at the start. Cayley kernels start like torch's
    Conv2d (uniform, bound 1/sqrt(C k^2)), as in Trockman & Kolter's code. Input (E, B, side,
    side) pixels; output (E, B, n_classes) logits.
    """

    def __init__(self, cfg: ConvConfig, seeds: Sequence[int] = (0,)):
        super().__init__()
        if not isinstance(cfg, ConvConfig):
            raise TypeError(f"cfg must be a ConvConfig, got {type(cfg).__name__}")
        self.cfg, gens = cfg, _generators(seeds)
        shape = (cfg.L, cfg.C, cfg.C, cfg.kernel, cfg.kernel)
        if cfg.layer == "aol":
            K = torch.zeros(len(gens), *shape)
            K[..., cfg.kernel // 2, cfg.kernel // 2] = torch.eye(cfg.C)
        else:
            bound = 1 / math.sqrt(cfg.C * cfg.kernel**2)
            K = torch.stack([(2 * torch.rand(shape, generator=g) - 1) * bound for g in gens])
        self.kernel = nn.Parameter(K)  # (E, L, C, C, k, k)
        self.b = nn.Parameter(torch.zeros(len(gens), cfg.L, cfg.C))
        self.head = Head(cfg.features, cfg.n_classes, gens)

    def backbone(self, x: torch.Tensor) -> torch.Tensor:
        """phi: (E, B, side, side) -> (E, B, F) features, 1-Lipschitz in l2 for each member."""
        cfg = self.cfg
        z = _tokens(x, cfg.patch, cfg.C).permute(0, 1, 4, 2, 3)  # (E, B, C, n, n)
        conv = _aol_conv if cfg.layer == "aol" else _cayley_conv
        for i in range(cfg.L):
            z = _minmax(conv(z, self.kernel[:, i]) + self.b[:, i, None, :, None, None], 2)
        z = z.flatten(3)  # (E, B, C, n^2)
        return torch.linalg.vector_norm(z, dim=3) if cfg.pool == "l2" else z.flatten(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


# ----------------------------------------------------------------------------------------------
# 5. Members, sizes and costs
# ----------------------------------------------------------------------------------------------

ModelConfig = LipNeXtConfig | ConvConfig
Network = LipNeXt | ConvNet


def build_model(cfg: ModelConfig, seeds: Sequence[int] = (0,)) -> Network:
    """The E = len(seeds) member networks a config describes, member e initialised from
    seeds[e]."""
    if isinstance(cfg, LipNeXtConfig):
        return LipNeXt(cfg, seeds)
    if isinstance(cfg, ConvConfig):
        return ConvNet(cfg, seeds)
    raise TypeError(f"cfg must be a LipNeXtConfig or a ConvConfig, got {type(cfg).__name__}")


def members(model: nn.Module) -> int:
    """E, the number of member networks of an ensemble."""
    if not isinstance(model, LipNeXt | ConvNet):
        raise TypeError(f"model must be a LipNeXt or a ConvNet, got {type(model).__name__}")
    return model.head.weight.shape[0]


class Member(nn.Module):
    """Member e of an ensemble as a plain network: (N, side, side) -> (N, K) logits, with
    `backbone` (N, side, side) -> (N, F) and the head's (K, F) `head_weight`."""

    def __init__(self, model: Network, e: int):
        super().__init__()
        e = validate.integer("e", e, minimum=0, maximum=members(model) - 1)
        self.net = build_model(model.cfg).to(model.head.weight.dtype)
        self.net.load_state_dict({k: v[e : e + 1] for k, v in model.state_dict().items()})
        self.net.eval()

    @property
    def head_weight(self) -> torch.Tensor:
        return self.net.head.weight[0]

    def backbone(self, x: torch.Tensor) -> torch.Tensor:
        return self.net.backbone(x[None])[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x[None])[0]


def count_parameters(model: nn.Module) -> int:
    """Trainable numbers per member (an orthogonal C x C matrix counts C^2)."""
    n = members(model)
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad)) // n


def flops_per_image(model: nn.Module, batch: int = 64) -> float:
    """Forward FLOPs per image of one member, as torch's FlopCounterMode counts them (matrix
    products and convolutions; FFTs, norms and activations are not counted) at batch `batch`
    (products done once per batch, like R M^T, are shared out)."""
    from torch.utils.flop_counter import FlopCounterMode

    batch = validate.integer("batch", batch, minimum=1)
    x = torch.zeros(members(model), batch, model.cfg.side, model.cfg.side)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x)
    return counter.get_total_flops() / (members(model) * batch)
