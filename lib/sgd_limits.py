"""High-dimensional limits of online SGD, SGD with momentum and normalized SGD.

Two models from Jagannath, Jones-McCormick & Sarangian (2025), both at the critical scaling
step `delta = c / N` with time `s = t / N` (t counts samples):

* spiked k-tensor PCA on the unit sphere: Y = W + lam v^{(x)k}, loss -<Y, x^{(x)k}>;
* the single-index model: y = f(<v, a>) + sigma eps with a ~ N(0, I_N), loss (f(<x, a>) - y)^2 / 2.

The simulators run many replicas (each with its own c and beta) as one (replicas, N) tensor,
O(N) work per step, never forming a tensor of order k. Momentum is heavy-ball (Polyak):
u <- beta u - delta grad, x <- x + u. Normalized SGD ("SGD-U") steps a fixed length c / sqrt(N)
along -grad / ||grad||. The limiting ODEs are written for plain SGD with an effective step
`c_eff`; the paper's claim tested in chapter 5 is that SGD-M(c, beta) follows the SGD ODE with
c_eff = c / (1 - beta) (derivation in the chapter).

By rotation invariance of the noise, the planted direction is v = e_1, so m = x[:, 0].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import brentq, root
from scipy.special import erf, exprel, roots_genlaguerre, roots_hermitenorm

LINKS = ("linear", "relu", "tanh")
N_QUAD = 48  # quadrature nodes per half-line / per axis; enough for 1e-6 accuracy (tests)


@dataclass(frozen=True)
class Trajectory:
    """Saved summary statistics of a simulation: times s (n_save,), m and R (n_save, replicas)."""

    s: np.ndarray
    m: np.ndarray
    R: np.ndarray


# ----------------------------------------------------------------------------- validation


def _positive_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _finite(name: str, value, lo: float = -math.inf, hi: float = math.inf) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if not (math.isfinite(value) and lo <= value <= hi):
        raise ValueError(f"{name} must be a finite number in [{lo}, {hi}], got {value}")
    return value


def _replica_params(c, beta) -> tuple[np.ndarray, np.ndarray]:
    """Broadcast per-replica step constants c > 0 and momenta beta in [0, 1) to 1-D arrays."""
    c, beta = np.broadcast_arrays(np.atleast_1d(np.asarray(c, float)), np.asarray(beta, float))
    if c.ndim != 1:
        raise ValueError(f"c and beta must be scalars or 1-D arrays, got shape {c.shape}")
    if not (np.all(np.isfinite(c)) and np.all(c > 0)):
        raise ValueError(f"c must be finite and > 0 (delta = c / N), got {c}")
    if not (np.all(np.isfinite(beta)) and np.all((beta >= 0) & (beta < 1))):
        raise ValueError(f"beta must lie in [0, 1) (0 is plain SGD), got {beta}")
    return c.copy(), beta.copy()


def _check_link(link: str) -> str:
    if link not in LINKS:
        raise ValueError(f"link {link!r} is unknown; use one of {LINKS}")
    return link


def c_effective(c, beta):
    """Effective SGD step of heavy-ball SGD-M: c_eff = c / (1 - beta) (the tested claim)."""
    c, beta = _replica_params(c, beta)
    out = c / (1.0 - beta)
    return float(out[0]) if out.size == 1 else out


# ----------------------------------------------------------------------------- simulators


def _save_steps(N: int, s_max: float, n_save: int) -> np.ndarray:
    n_steps = max(1, round(s_max * N))
    return np.unique(np.linspace(0, n_steps, n_save).round().astype(int))


def _initial_point(R: int, N: int, m0: float | None, gen, torch):
    """Unit vectors: uniform on the sphere if m0 is None, else overlap exactly m0 with e_1."""
    x = torch.randn(R, N, generator=gen, dtype=torch.float64)
    if m0 is not None:
        x[:, 0] = 0.0
        x *= math.sqrt(1.0 - m0**2) / x.norm(dim=1, keepdim=True)
        x[:, 0] = m0
    return (x / x.norm(dim=1, keepdim=True)).float()


def simulate_tensor_pca(
    N: int,
    k: int,
    lam: float,
    c,
    beta=0.0,
    m0: float | None = None,
    s_max: float = 5.0,
    n_save: int = 101,
    normalized: bool = False,
    seed: int = 0,
) -> Trajectory:
    """Spherical online SGD / SGD-M / SGD-U for spiked k-tensor PCA; one replica per c entry.

    -grad loss = k lam m^{k-1} v + Z with Cov Z = k I + k(k-1) x x^T, so the tangent noise is
    exactly sqrt(k) P_x xi with xi ~ N(0, I_N): each step costs O(N), no tensor is formed.
    Step: u <- beta u + delta P_x(-grad), x <- (x + u) / ||x + u||, delta = c / N (or
    c / sqrt(N) along the unit tangent direction if `normalized`). m0=None: uniform start.
    """
    import torch  # local import: torch costs seconds and the ODE helpers do not need it

    N, k = _positive_int("N", N, 2), _positive_int("k", k, 2)
    n_save = _positive_int("n_save", n_save, 2)
    lam, s_max = _finite("lam", lam, 0.0), _finite("s_max", s_max, 0.0)
    if m0 is not None:
        m0 = _finite("m0", m0, -1.0, 1.0)
    c, beta = _replica_params(c, beta)
    gen = torch.Generator().manual_seed(int(seed))
    # float32: half the memory traffic of float64; m only needs ~1e-5 accuracy (renormalised).
    x = _initial_point(len(c), N, m0, gen, torch)
    u, noise = torch.zeros_like(x), torch.empty_like(x)
    scale = math.sqrt(N) if normalized else N
    step = torch.tensor(c / scale, dtype=torch.float32)[:, None]
    b = torch.tensor(beta, dtype=torch.float32)[:, None]
    save = _save_steps(N, s_max, n_save)
    save_set, m_out = set(save.tolist()), []
    for t in range(save[-1] + 1):
        if t in save_set:
            m_out.append(x[:, 0].double().numpy().copy())
        if t == save[-1]:
            break
        g = torch.randn(x.shape, generator=gen, out=noise).mul_(math.sqrt(k))
        g[:, 0] += k * lam * x[:, 0] ** (k - 1)
        g.addcmul_(x, torch.linalg.vecdot(g, x)[:, None], value=-1)  # tangent part at x
        if normalized:
            g /= g.norm(dim=1, keepdim=True)
        u.mul_(b).addcmul_(step, g)
        x.add_(u)
        x /= x.norm(dim=1, keepdim=True)
    m = np.array(m_out)
    return Trajectory(s=save / N, m=m, R=np.ones_like(m))


def _torch_link(link: str, torch):
    """(f, f') of a link function as torch callables."""
    if link == "linear":
        return (lambda z: z), torch.ones_like
    if link == "relu":
        return torch.relu, lambda z: (z > 0).to(z.dtype)
    return torch.tanh, lambda z: 1.0 - torch.tanh(z) ** 2


def simulate_single_index(
    N: int,
    link: str,
    sigma: float,
    c,
    beta=0.0,
    normalized: bool = False,
    m0: float = 0.0,
    R0: float = 1.0,
    s_max: float = 10.0,
    n_save: int = 101,
    seed: int = 0,
) -> Trajectory:
    """Online SGD / SGD-M / SGD-U on the single-index model y = f(<v, a>) + sigma eps.

    grad = g a with g = (f(<x, a>) - y) f'(<x, a>); SGD-M: u <- beta u - (c / N) g a;
    SGD-U: u <- beta u - (c / sqrt(N)) sign(g) a / ||a||; then x <- x + u. Start: m = m0 and
    R = ||x||^2 = R0 exactly. Returns m = <x, v> and R per saved time s = t / N.
    """
    import torch

    N, n_save = _positive_int("N", N, 2), _positive_int("n_save", n_save, 2)
    link, sigma = _check_link(link), _finite("sigma", sigma, 0.0)
    R0 = _finite("R0", R0, 1e-12)
    m0, s_max = _finite("m0", m0, -math.sqrt(R0), math.sqrt(R0)), _finite("s_max", s_max, 0.0)
    c, beta = _replica_params(c, beta)
    f, fp = _torch_link(link, torch)
    gen = torch.Generator().manual_seed(int(seed))
    x = _initial_point(len(c), N, m0 / math.sqrt(R0), gen, torch) * math.sqrt(R0)
    u, a = torch.zeros_like(x), torch.empty_like(x)
    step = torch.tensor(c / (math.sqrt(N) if normalized else N), dtype=torch.float32)
    b = torch.tensor(beta, dtype=torch.float32)[:, None]
    save = _save_steps(N, s_max, n_save)
    save_set, m_out, R_out = set(save.tolist()), [], []
    for t in range(save[-1] + 1):
        if t in save_set:
            m_out.append(x[:, 0].double().numpy().copy())
            R_out.append((x.double() ** 2).sum(1).numpy())
        if t == save[-1]:
            break
        torch.randn(x.shape, generator=gen, out=a)
        lx, lv = (a * x).sum(1), a[:, 0]
        y = f(lv) + sigma * torch.randn(len(c), generator=gen)
        g = (f(lx) - y) * fp(lx)
        coef = torch.sign(g) / a.norm(dim=1) if normalized else g
        u.mul_(b).sub_((step * coef)[:, None] * a)
        x.add_(u)
    return Trajectory(s=save / N, m=np.array(m_out), R=np.array(R_out))


# ----------------------------------------------------------------------------- tensor PCA ODE


def tensor_pca_drift(m, k: int, lam: float, c_eff: float):
    """Limit drift dm/ds = c k lam m^{k-1} (1 - m^2) - (k / 2) c^2 m (population + correction)."""
    m = np.asarray(m, dtype=float)
    return c_eff * k * lam * m ** (k - 1) * (1.0 - m**2) - 0.5 * k * c_eff**2 * m


def solve_tensor_pca_ode(k: int, lam: float, c_eff: float, m0: float, s) -> np.ndarray:
    """m(s) of the tensor-PCA limit ODE from m(0) = m0 on the time grid s (increasing, >= 0)."""
    k, lam = _positive_int("k", k, 2), _finite("lam", lam, 0.0)
    c_eff, m0 = _finite("c_eff", c_eff, 1e-12), _finite("m0", m0, -1.0, 1.0)
    s = np.asarray(s, dtype=float)
    if s.ndim != 1 or s[0] < 0 or np.any(np.diff(s) <= 0):
        raise ValueError(f"s must be an increasing 1-D grid of times >= 0, got {s}")
    sol = solve_ivp(
        lambda _, m: tensor_pca_drift(m, k, lam, c_eff), (0.0, s[-1]), [m0],
        t_eval=s, rtol=1e-9, atol=1e-12,
    )  # fmt: skip
    return sol.y[0]


def overlap_k2(s, lam: float, c_eff: float, m0: float) -> np.ndarray:
    """Closed form for k = 2: u = m^2 obeys du/ds = a u - b u^2 (a = 4c lam - 2c^2, b = 4c lam).

    u(s) = u0 e^{a s} / (1 + b u0 s exprel(a s)), valid for a of either sign; returns |m(s)|.
    """
    lam, c_eff = _finite("lam", lam, 0.0), _finite("c_eff", c_eff, 1e-12)
    m0 = _finite("m0", m0, -1.0, 1.0)
    s = np.asarray(s, dtype=float)
    if np.any(s < 0) or not np.all(np.isfinite(s)):
        raise ValueError(f"s must be finite times >= 0, got {s}")
    a, b, u0 = 4 * c_eff * lam - 2 * c_eff**2, 4 * c_eff * lam, m0**2
    return np.sqrt(u0 * np.exp(a * s) / (1.0 + b * u0 * s * exprel(a * s)))


def tensor_pca_fixed_points(k: int, lam: float, c_eff: float) -> np.ndarray:
    """Positive fixed points m in (0, 1) of the limit ODE: lam m^{k-2} (1 - m^2) = c_eff / 2.

    Sorted; for k = 3 the smaller is the unstable recovery threshold m_-, the larger the stable
    m_+; empty when c_eff is too large (k = 2: c_eff >= 2 lam; k = 3: c_eff > 4 lam / 3^{3/2}).
    """
    k, lam = _positive_int("k", k, 2), _finite("lam", lam, 0.0)
    c_eff = _finite("c_eff", c_eff, 1e-12)
    coef = np.zeros(k + 1)
    coef[0], coef[2] = -lam, lam  # -lam m^k + lam m^{k-2}
    coef[k] -= c_eff / 2
    r = np.roots(coef)
    r = np.real(r[np.abs(r.imag) < 1e-9])
    return np.sort(r[(r > 0) & (r < 1)])


# ----------------------------------------------------------------------------- single-index ODE


def _quadrature(n: int = N_QUAD) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nodes w1 (2n,), w2 (n,) and weights p (2n, n) for E h(w1, w2), w1, w2 iid N(0, 1).

    w1 is split at 0 (generalised Gauss-Laguerre, alpha = -1/2, after w = sqrt(2 t)) so that
    the kinks of ReLU and of sign(f') at lambda_x = 0 fall on the split; w2 is Gauss-Hermite.
    """
    t, wt = roots_genlaguerre(n, -0.5)
    w1 = np.concatenate([np.sqrt(2 * t), -np.sqrt(2 * t)])
    p1 = np.concatenate([wt, wt]) / (2 * math.sqrt(math.pi))
    w2, p2 = roots_hermitenorm(n)
    return w1, w2, np.outer(p1, p2 / math.sqrt(2 * math.pi))


_W1, _W2, _P = _quadrature()


def _numpy_link(link: str):
    if link == "linear":
        return (lambda z: z), np.ones_like
    if link == "relu":
        return (lambda z: np.maximum(z, 0.0)), lambda z: (z > 0).astype(float)
    return np.tanh, lambda z: 1.0 - np.tanh(z) ** 2


def single_index_drift(
    m: float, R: float, link: str, sigma: float, c_eff: float, normalized: bool = False
) -> tuple[float, float]:
    """Limit drift (dm/ds, dR/ds) of the single-index model, by 2-D Gaussian quadrature.

    (lambda_x, lambda_v) ~ N(0, [[R, m], [m, 1]]), D = f(lambda_x) - f(lambda_v).
    SGD:   dm = -c E[D f' lv],  dR = -2c E[D f' lx] + c^2 E[(D^2 + sigma^2) f'^2].
    SGD-U: S = sign(f') erf(D / (sigma sqrt 2)),  dm = -c E[S lv],
           dR = -2c E[S lx] + c^2 P(f' != 0).
    """
    link, sigma = _check_link(link), _finite("sigma", sigma, 0.0)
    R, c = _finite("R", R, 1e-12), _finite("c_eff", c_eff, 0.0)
    m = float(np.clip(_finite("m", m), -math.sqrt(R), math.sqrt(R)))
    if normalized and sigma == 0:
        raise ValueError("sigma must be > 0 for normalized SGD (its drift averages over noise)")
    f, fp = _numpy_link(link)
    lx = math.sqrt(R) * _W1[:, None] + 0.0 * _W2[None, :]
    lv = (m / math.sqrt(R)) * _W1[:, None] + math.sqrt(max(0.0, 1 - m**2 / R)) * _W2[None, :]
    D, d = f(lx) - f(lv), fp(lx)
    if normalized:
        S = np.sign(d) * erf(D / (sigma * math.sqrt(2)))
        dm = -c * np.sum(_P * S * lv)
        dR = -2 * c * np.sum(_P * S * lx) + c**2 * np.sum(_P * (d != 0))
    else:
        dm = -c * np.sum(_P * D * d * lv)
        dR = -2 * c * np.sum(_P * D * d * lx) + c**2 * np.sum(_P * (D**2 + sigma**2) * d**2)
    return float(dm), float(dR)


def solve_single_index_ode(
    link: str, sigma: float, c_eff: float, normalized: bool, m0: float, R0: float, s
) -> tuple[np.ndarray, np.ndarray]:
    """(m(s), R(s)) of the single-index limit ODE from (m0, R0); stops (inf) once R > 1e12."""
    s = np.asarray(s, dtype=float)
    if s.ndim != 1 or s[0] < 0 or np.any(np.diff(s) <= 0):
        raise ValueError(f"s must be an increasing 1-D grid of times >= 0, got {s}")
    single_index_drift(m0, R0, link, sigma, c_eff, normalized)  # validates every argument

    def blow_up(_, y):
        return y[1] - 1e12

    blow_up.terminal = True
    sol = solve_ivp(
        lambda _, y: single_index_drift(y[0], y[1], link, sigma, c_eff, normalized),
        (0.0, s[-1]), [m0, R0], t_eval=s, events=blow_up, rtol=1e-8, atol=1e-10,
    )  # fmt: skip
    m, R = np.full(len(s), np.inf), np.full(len(s), np.inf)
    m[: sol.y.shape[1]], R[: sol.y.shape[1]] = sol.y
    return m, R


def single_index_fixed_point(
    link: str, sigma: float, c_eff: float, normalized: bool, m0: float = 0.0, R0: float = 1.0
) -> tuple[float, float]:
    """The fixed point (m*, R*) reached from (m0, R0): integrate to s = 200, then polish by
    root finding. Returns (nan, inf) if the ODE diverges (R passes 1e12)."""
    m, R = solve_single_index_ode(link, sigma, c_eff, normalized, m0, R0, [0.0, 200.0])
    if not np.isfinite(R[-1]):
        return math.nan, math.inf
    sol = root(lambda y: single_index_drift(y[0], y[1], link, sigma, c_eff, normalized),
               [m[-1], R[-1]], tol=1e-12)  # fmt: skip
    return float(sol.x[0]), float(sol.x[1])


# ----------------------------------------------------------------------------- linear link


def linear_error_fixed_point(c: float, sigma: float, normalized: bool = False) -> float:
    """Fixed point of the excess error e = R - 2m + 1 for the linear link (m* = 1).

    SGD:   de/ds = -(2c - c^2) e + c^2 sigma^2  ->  e* = c sigma^2 / (2 - c), inf for c >= 2.
    SGD-U: de/ds = -2c sqrt(2/pi) e / sqrt(e + sigma^2) + c^2  ->  e* = (k^2 + sqrt(k^4 +
    4 k^2 sigma^2)) / 2 with k = c sqrt(pi / 8), finite for every c.
    """
    c, sigma = _finite("c", c, 1e-12), _finite("sigma", sigma, 0.0)
    if not normalized:
        return c * sigma**2 / (2 - c) if c < 2 else math.inf
    kappa2 = c**2 * math.pi / 8
    return 0.5 * (kappa2 + math.sqrt(kappa2**2 + 4 * kappa2 * sigma**2))


def linear_crossover(sigma: float) -> float:
    """Step c at which SGD and SGD-U (same c) have equal linear-link fixed points e*."""
    sigma = _finite("sigma", sigma, 1e-12)

    def gap(c: float) -> float:
        return linear_error_fixed_point(c, sigma) - linear_error_fixed_point(c, sigma, True)

    return brentq(gap, 1e-6, 2 - 1e-9)
