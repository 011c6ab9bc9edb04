"""High-dimensional limits of online SGD, SGD with momentum and normalized SGD.

Two models from Jagannath, Jones-McCormick & Sarangian (2025), both at the critical scaling
`delta = c / N`, with time `s = t / N` (t counts samples, one per step):

* spiked k-tensor PCA on the unit sphere: Y = W + lam v^{(x)k}, loss -<Y, x^{(x)k}>;
* the single-index model: y = f(<v, a>) + sigma eps with a ~ N(0, I_N), loss (f(<x, a>) - y)^2 / 2.

Momentum is heavy-ball (Polyak): u <- beta u - delta grad, x <- x + u. Normalized SGD ("SGD-U")
steps a fixed length c / sqrt(N) along -grad / ||grad||, that is delta times the gradient
rescaled to norm sqrt(N). The limit ODEs are written for plain SGD with a step `c_eff`; chapter
5 tests that SGD-M(c, beta) follows the SGD limit with c_eff = c / (1 - beta).

**Exact simulation in a moving frame.** Both models are invariant under rotations that fix the
planted direction v = e_1, and the noise of every step is a fresh isotropic Gaussian vector. So
x and u always lie in a 3-dimensional space spanned by v and two frame axes, and one step only
needs the fresh noise's coordinates on those 3 axes (i.i.d. N(0, 1)) and the norm of the rest
(the square root of a chi-square with N - 3 degrees of freedom), which points along a fourth
axis orthogonal to the first three. After the step, the frame is rotated back to 3 axes. This
is the same random process as the N-dimensional one, in law, at O(1) cost per step and replica
(tests/test_sgd_limits.py compares it with a brute-force N-dimensional simulation).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import brentq, root
from scipy.special import erf, exprel, roots_genlaguerre, roots_hermitenorm

from lib import validate

LINKS = ("linear", "relu", "tanh")
N_QUAD = 48  # quadrature nodes per half-line / per axis; enough for 1e-6 accuracy (tests)
BLOCK = 512  # steps of noise drawn at once (bounds memory; the draws depend on it)
FRAME = 4  # frame axes during a step: v, two for x and u, one for the fresh noise


@dataclass(frozen=True)
class Trajectory:
    """Saved summary statistics: times s (n_save,), m = <x, v> and R = ||x||^2 (n_save, rows)."""

    s: np.ndarray
    m: np.ndarray
    R: np.ndarray

    @property
    def distance(self) -> np.ndarray:
        """Squared distance to the population minimum x = v: ||x - v||^2 = R - 2m + 1."""
        return self.R - 2 * self.m + 1


# ----------------------------------------------------------------------------- arguments


def _numbers(name: str, x, **limits) -> np.ndarray:
    """validate.array (any shape) that also refuses booleans, which it would read as 0 and 1."""
    if np.asarray(x).dtype == bool:
        raise TypeError(f"{name} must be numbers, not booleans, got {x!r}")
    return validate.array(name, x, ndim=None, **limits)


def _rows(c, beta, normalized) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Broadcast per-row step constants c > 0, momenta beta in [0, 1) and SGD-U flags to 1-D."""
    c, beta = _numbers("c", c, positive=True), _numbers("beta", beta, low=0.0)
    if np.any(beta >= 1):
        raise ValueError(f"beta must lie in [0, 1) (0 is plain SGD), got max {beta.max():g}")
    flags = np.asarray(normalized)
    if flags.dtype != bool:
        raise TypeError(f"normalized must be True/False or an array of them, got {normalized!r}")
    try:
        c, beta, flags = np.broadcast_arrays(np.atleast_1d(c), beta, flags)
    except ValueError:
        raise ValueError(
            f"c, beta and normalized must broadcast to one row each, got shapes "
            f"{np.shape(c)}, {np.shape(beta)}, {np.shape(normalized)}"
        ) from None
    if c.ndim != 1:
        raise ValueError(f"c, beta and normalized must be scalars or 1-D, got shape {c.shape}")
    return c.copy(), beta.copy(), flags.copy()


def _times(s) -> np.ndarray:
    """An increasing 1-D grid of times >= 0."""
    s = _numbers("s", s, nonnegative=True)
    if s.ndim != 1 or np.any(np.diff(s) <= 0):
        raise ValueError(f"s must be an increasing 1-D grid of times, got {s}")
    return s


def c_effective(c, beta):
    """Effective SGD step of heavy-ball SGD-M: c_eff = c / (1 - beta) (the tested claim)."""
    c, beta, _ = _rows(c, beta, False)
    out = c / (1.0 - beta)
    return float(out[0]) if out.size == 1 else out


def c_normalized_tensor(c, k: int):
    """SGD step that SGD-U with step c follows on spiked k-tensor PCA: c / sqrt(k).

    The tangent gradient is sqrt(k) P_x xi plus an O(1) signal, so its norm concentrates at
    sqrt(k N): SGD-U's step (c / sqrt(N)) g / ||g|| is SGD's (c / (sqrt(k) N)) g.
    """
    k = validate.integer("k", k, minimum=2)
    c, _, _ = _rows(c, 0.0, False)
    out = c / math.sqrt(k)
    return float(out[0]) if out.size == 1 else out


# ----------------------------------------------------------------------------- simulators


def _save_steps(N: int, s_max: float, n_save: int) -> np.ndarray:
    n_steps = max(1, round(s_max * N))
    return np.unique(np.linspace(0, n_steps, n_save).round().astype(int))


def _noise(gen: np.random.Generator, n_steps: int, rows: int, N: int) -> np.ndarray:
    """Fresh N(0, I_N) vectors in the frame, (n_steps, rows, 5): coordinates on axes 0-2, the
    norm of the rest (a chi with N - 3 degrees of freedom) on axis 3, and a spare N(0, 1)."""
    z = gen.standard_normal((n_steps, rows, FRAME + 1))
    z[:, :, 3] = np.sqrt(gen.chisquare(N - 3, (n_steps, rows)))
    return z


def _reframe(x: np.ndarray, u: np.ndarray) -> None:
    """Rotate the axes 1-3 (all orthogonal to v) in place so that x = (x_1, |x_perp|, 0, 0)
    and u = (u_1, u_2, u_3, 0): axis 3 is then free for the next step's noise."""
    xp, up = x[:, 1:], u[:, 1:]
    norm = np.sqrt((xp * xp).sum(1))
    f = xp / np.maximum(norm, 1e-300)[:, None]
    u2 = (up * f).sum(1)
    rest = up - u2[:, None] * f
    x[:, 1], x[:, 2:] = norm, 0.0
    u[:, 1], u[:, 2], u[:, 3] = u2, np.sqrt((rest * rest).sum(1)), 0.0


def _run(N: int, x: np.ndarray, step: Callable, s_max: float, n_save: int, seed: int):
    """Iterate `step(x, u, z)` from x (rows, 4) with u = 0; save m and R at n_save times."""
    gen = np.random.default_rng(seed)
    u = np.zeros_like(x)
    save = _save_steps(N, s_max, n_save)
    save_set, m_out, R_out = set(save.tolist()), [], []
    for t in range(save[-1] + 1):
        if t in save_set:
            m_out.append(x[:, 0].copy())
            R_out.append((x * x).sum(1))
        if t == save[-1]:
            break
        if t % BLOCK == 0:
            z = _noise(gen, min(BLOCK, save[-1] - t), len(x), N)
        step(x, u, z[t % BLOCK])
        _reframe(x, u)
    return Trajectory(s=save / N, m=np.array(m_out), R=np.array(R_out))


def _overlaps(m0, rows: int, bound: float) -> np.ndarray:
    """Starting overlaps: a number or one per row, each in [-bound, bound] (bound = sqrt(R0))."""
    m0 = np.atleast_1d(_numbers("m0", m0))
    if m0.ndim > 1 or m0.size not in (1, rows):
        raise ValueError(f"m0 must be a number or one per row ({rows}), got shape {m0.shape}")
    if np.any(np.abs(m0) > bound):
        raise ValueError(f"m0 must lie in [-{bound:g}, {bound:g}] (an overlap with v at norm "
                         f"sqrt(R0)), got {m0.flat[np.argmax(np.abs(m0))]:g}")  # fmt: skip
    return np.broadcast_to(m0, (rows,))


def uniform_overlaps(seed: int, N: int, rows: int) -> np.ndarray:
    """Overlaps <x, v> of `rows` points drawn uniformly on the unit sphere in dimension N,
    (rows,), about N(0, 1) / sqrt(N): the start the simulators draw for m0=None with this seed."""
    seed = validate.integer("seed", seed, minimum=0)
    N, rows = validate.integer("N", N, minimum=2), validate.integer("rows", rows, minimum=1)
    gen = np.random.default_rng([seed, 1])  # a stream apart from the steps' noise
    z1 = gen.standard_normal(rows)
    return z1 / np.sqrt(z1**2 + gen.chisquare(N - 1, rows))


def _start(gen_seed: int, N: int, rows: int, m0, R0: float = 1.0) -> np.ndarray:
    """Frame coordinates (rows, 4) of a start with overlaps m0 (rows,) and squared norm R0;
    m0=None draws x uniformly on the sphere of radius sqrt(R0) (overlap ~ N(0, 1) / sqrt(N))."""
    if m0 is None:
        m0 = math.sqrt(R0) * uniform_overlaps(gen_seed, N, rows)
    x = np.zeros((rows, FRAME))
    x[:, 0] = m0
    x[:, 1] = np.sqrt(np.maximum(R0 - x[:, 0] ** 2, 0.0))
    return x


def simulate_tensor_pca(
    N: int,
    k: int,
    lam: float,
    c,
    beta=0.0,
    normalized=False,
    m0=None,
    s_max: float = 5.0,
    n_save: int = 101,
    seed: int = 0,
) -> Trajectory:
    """Spherical online SGD / SGD-M / SGD-U on spiked k-tensor PCA, one row per entry of c.

    -grad loss = k lam m^{k-1} v + Z with Cov Z = k I + k(k-1) x x^T, so its tangent part is
    k lam m^{k-1} P_x v + sqrt(k) P_x xi with xi ~ N(0, I_N). Step: u <- beta u + delta P_x(-grad),
    x <- (x + u) / ||x + u||, delta = c / N (SGD-U: c / sqrt(N) along the unit tangent
    direction). c, beta, normalized and the starting overlap m0: per row (broadcast);
    m0=None: a uniform start.
    """
    N, k = validate.integer("N", N, minimum=4), validate.integer("k", k, minimum=2)
    lam = validate.real("lam", lam, low=0.0)
    c, beta, flags = _rows(c, beta, normalized)
    if m0 is not None:
        m0 = _overlaps(m0, len(c), 1.0)
    s_max = validate.real("s_max", s_max, low=0.0, low_open=True)
    n_save = validate.integer("n_save", n_save, minimum=2)
    seed = validate.integer("seed", seed, minimum=0)
    step = np.where(flags, c / math.sqrt(N), c / N)[:, None]
    b, root_k, any_flag = beta[:, None], math.sqrt(k), bool(flags.any())

    def one_step(x: np.ndarray, u: np.ndarray, z: np.ndarray) -> None:
        g = root_k * z[:, :FRAME]
        g[:, 0] += k * lam * x[:, 0] ** (k - 1)
        g -= (g * x).sum(1)[:, None] * x  # tangent part at x
        if any_flag:
            g /= np.where(flags, np.sqrt((g * g).sum(1)), 1.0)[:, None]
        u *= b
        u += step * g
        x += u
        x /= np.sqrt((x * x).sum(1))[:, None]

    return _run(N, _start(seed, N, len(c), m0), one_step, s_max, n_save, seed)


def _link(link: str) -> tuple[Callable, Callable]:
    """(f, f') of a link function, vectorised over NumPy arrays."""
    if link == "linear":
        return (lambda z: z), np.ones_like
    if link == "relu":
        return (lambda z: np.maximum(z, 0.0)), lambda z: (z > 0).astype(float)
    return np.tanh, lambda z: 1.0 - np.tanh(z) ** 2


def simulate_single_index(
    N: int,
    link: str,
    sigma: float,
    c,
    beta=0.0,
    normalized=False,
    m0=0.0,
    R0: float = 1.0,
    s_max: float = 10.0,
    n_save: int = 101,
    seed: int = 0,
) -> Trajectory:
    """Online SGD / SGD-M / SGD-U on the single-index model y = f(<v, a>) + sigma eps.

    grad = g a with g = (f(<x, a>) - y) f'(<x, a>); SGD-M: u <- beta u - (c / N) g a;
    SGD-U: u <- beta u - (c / sqrt(N)) sign(g) a / ||a||; then x <- x + u. Start: m = m0 and
    R = ||x||^2 = R0 exactly. c, beta, normalized and m0: per row (broadcast).
    """
    N = validate.integer("N", N, minimum=4)
    f, fp = _link(validate.choice("link", link, LINKS))
    sigma = validate.real("sigma", sigma, low=0.0)
    c, beta, flags = _rows(c, beta, normalized)
    R0 = validate.real("R0", R0, low=0.0, low_open=True)
    m0 = _overlaps(m0, len(c), math.sqrt(R0))
    s_max = validate.real("s_max", s_max, low=0.0, low_open=True)
    n_save = validate.integer("n_save", n_save, minimum=2)
    seed = validate.integer("seed", seed, minimum=0)
    step = np.where(flags, c / math.sqrt(N), c / N)
    b, any_flag = beta[:, None], bool(flags.any())

    def one_step(x: np.ndarray, u: np.ndarray, z: np.ndarray) -> None:
        a = z[:, :FRAME]
        lx = (a * x).sum(1)
        g = (f(lx) - f(a[:, 0]) - sigma * z[:, FRAME]) * fp(lx)
        if any_flag:
            g = np.where(flags, np.sign(g) / np.sqrt((a * a).sum(1)), g)
        u *= b
        u -= (step * g)[:, None] * a
        x += u

    return _run(N, _start(seed, N, len(c), m0, R0), one_step, s_max, n_save, seed)


# ----------------------------------------------------------------------------- tensor PCA ODE


def tensor_pca_drift(m, k: int, lam: float, c_eff: float):
    """Limit drift dm/ds = c k lam m^{k-1} (1 - m^2) - (k / 2) c^2 m (population + correction)."""
    k, lam = validate.integer("k", k, minimum=2), validate.real("lam", lam, low=0.0)
    c = validate.real("c_eff", c_eff, low=0.0, low_open=True)
    m = _numbers("m", m, low=-1.0, high=1.0)
    return c * k * lam * m ** (k - 1) * (1.0 - m**2) - 0.5 * k * c**2 * m


def solve_tensor_pca_ode(k: int, lam: float, c_eff: float, m0: float, s) -> np.ndarray:
    """m(s) of the tensor-PCA limit ODE from m(0) = m0 on the time grid s (increasing, >= 0)."""
    m0, s = validate.real("m0", m0, low=-1.0, high=1.0), _times(s)
    tensor_pca_drift(m0, k, lam, c_eff)  # validates k, lam and c_eff
    sol = solve_ivp(
        lambda _, m: tensor_pca_drift(np.clip(m, -1, 1), k, lam, c_eff), (0.0, s[-1]), [m0],
        t_eval=s, rtol=1e-9, atol=1e-12,
    )  # fmt: skip
    return sol.y[0]


def overlap_k2(s, lam: float, c_eff: float, m0: float) -> np.ndarray:
    """Closed form for k = 2: u = m^2 obeys du/ds = a u - b u^2 (a = 4c lam - 2c^2, b = 4c lam).

    u(s) = u0 e^{a s} / (1 + b u0 s exprel(a s)), valid for a of either sign; returns |m(s)|.
    """
    lam = validate.real("lam", lam, low=0.0)
    c = validate.real("c_eff", c_eff, low=0.0, low_open=True)
    m0 = validate.real("m0", m0, low=-1.0, high=1.0)
    s = _numbers("s", s, nonnegative=True)
    a, b, u0 = 4 * c * lam - 2 * c**2, 4 * c * lam, m0**2
    return np.sqrt(u0 * np.exp(a * s) / (1.0 + b * u0 * s * exprel(a * s)))


def tensor_pca_fixed_points(k: int, lam: float, c_eff: float) -> np.ndarray:
    """Positive fixed points m in (0, 1) of the limit ODE: lam m^{k-2} (1 - m^2) = c_eff / 2.

    Sorted; for k = 3 the smaller is the unstable recovery threshold m_-, the larger the stable
    m_+; empty when c_eff is too large (k = 2: c_eff >= 2 lam; k = 3: c_eff > 4 lam / 3^{3/2}).
    """
    k, lam = validate.integer("k", k, minimum=2), validate.real("lam", lam, low=0.0)
    c = validate.real("c_eff", c_eff, low=0.0, low_open=True)
    coef = np.zeros(k + 1)
    coef[0], coef[2] = -lam, lam  # -lam m^k + lam m^{k-2}
    coef[k] -= c / 2
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


def _pair(m: float, R: float) -> tuple[np.ndarray, np.ndarray]:
    """(lambda_x, lambda_v) ~ N(0, [[R, m], [m, 1]]) on the quadrature nodes, each (2n, n)."""
    lx = math.sqrt(R) * _W1[:, None] + 0.0 * _W2[None, :]
    lv = (m / math.sqrt(R)) * _W1[:, None] + math.sqrt(max(0.0, 1 - m**2 / R)) * _W2[None, :]
    return lx, lv


def single_index_drift(
    m: float, R: float, link: str, sigma: float, c_eff: float, normalized: bool = False
) -> tuple[float, float]:
    """Limit drift (dm/ds, dR/ds) of the single-index model, by 2-D Gaussian quadrature.

    (lambda_x, lambda_v) ~ N(0, [[R, m], [m, 1]]), D = f(lambda_x) - f(lambda_v).
    SGD:   dm = -c E[D f' lv],  dR = -2c E[D f' lx] + c^2 E[(D^2 + sigma^2) f'^2].
    SGD-U: S = sign(f') erf(D / (sigma sqrt 2)),  dm = -c E[S lv],
           dR = -2c E[S lx] + c^2 P(f' != 0).
    """
    f, fp = _link(validate.choice("link", link, LINKS))
    sigma, normalized = (
        validate.real("sigma", sigma, low=0.0),
        validate.boolean("normalized", normalized),
    )
    R, c = validate.real("R", R, low=0.0, low_open=True), validate.real("c_eff", c_eff, low=0.0)
    m = float(np.clip(validate.real("m", m), -math.sqrt(R), math.sqrt(R)))
    if normalized and sigma == 0:
        raise ValueError("sigma must be > 0 for normalized SGD (its drift averages over noise)")
    lx, lv = _pair(m, R)
    D, d = f(lx) - f(lv), fp(lx)
    if normalized:
        S = np.sign(d) * erf(D / (sigma * math.sqrt(2)))
        dm = -c * np.sum(_P * S * lv)
        dR = -2 * c * np.sum(_P * S * lx) + c**2 * np.sum(_P * (d != 0))
    else:
        dm = -c * np.sum(_P * D * d * lv)
        dR = -2 * c * np.sum(_P * D * d * lx) + c**2 * np.sum(_P * (D**2 + sigma**2) * d**2)
    return float(dm), float(dR)


def gradient_moments(link: str, sigma: float, m: float, R: float) -> tuple[float, float, float]:
    """(E|g|, E g^2, P(g != 0)) of the gradient factor g = (f(lambda_x) - y) f'(lambda_x) at (m, R).

    The single-index gradient is g a with ||a|| ~ sqrt(N), so SGD at step c / N moves about
    c |g| / sqrt(N) per step. With D = f(lambda_x) - f(lambda_v), the label noise is averaged in
    closed form: E_eps |D - sigma eps| = sigma sqrt(2/pi) exp(-D^2 / 2 sigma^2) + D erf(D / sigma
    sqrt 2) (a folded normal) and E_eps (D - sigma eps)^2 = D^2 + sigma^2; P(g != 0) = P(f' != 0).
    """
    f, fp = _link(validate.choice("link", link, LINKS))
    sigma = validate.real("sigma", sigma, low=0.0, low_open=True)
    R = validate.real("R", R, low=0.0, low_open=True)
    m = validate.real("m", m, low=-math.sqrt(R), high=math.sqrt(R))
    lx, lv = _pair(m, R)
    D, d = f(lx) - f(lv), np.abs(fp(lx))
    folded = sigma * math.sqrt(2 / math.pi) * np.exp(-(D**2) / (2 * sigma**2))
    folded += D * erf(D / (sigma * math.sqrt(2)))
    moments = (np.sum(_P * folded * d), np.sum(_P * (D**2 + sigma**2) * d**2), np.sum(_P * (d > 0)))
    return tuple(float(x) for x in moments)


def solve_single_index_ode(
    link: str, sigma: float, c_eff: float, normalized: bool, m0: float, R0: float, s
) -> tuple[np.ndarray, np.ndarray]:
    """(m(s), R(s)) of the single-index limit ODE from (m0, R0); inf once R passes 1e12."""
    s = _times(s)
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
    """Fixed point of the distance e = ||x - v||^2 = R - 2m + 1 for the linear link (m* = 1).

    SGD:   de/ds = -(2c - c^2) e + c^2 sigma^2  ->  e* = c sigma^2 / (2 - c), inf for c >= 2.
    SGD-U: de/ds = -2c sqrt(2/pi) e / sqrt(e + sigma^2) + c^2  ->  e* = (k^2 + sqrt(k^4 +
    4 k^2 sigma^2)) / 2 with k = c sqrt(pi / 8), finite for every c.
    """
    c = validate.real("c", c, low=0.0, low_open=True)
    sigma, normalized = (
        validate.real("sigma", sigma, low=0.0),
        validate.boolean("normalized", normalized),
    )
    if not normalized:
        return c * sigma**2 / (2 - c) if c < 2 else math.inf
    kappa2 = c**2 * math.pi / 8
    return 0.5 * (kappa2 + math.sqrt(kappa2**2 + 4 * kappa2 * sigma**2))


def linear_crossover(sigma: float) -> float:
    """Step c at which SGD and SGD-U (same c) have equal linear-link fixed points e*."""
    sigma = validate.real("sigma", sigma, low=0.0, low_open=True)

    def gap(c: float) -> float:
        return linear_error_fixed_point(c, sigma) - linear_error_fixed_point(c, sigma, True)

    return brentq(gap, 1e-6, 2 - 1e-9)


# ----------------------------------------------------------------------------- admissible range


def admissible_edge(c_grid, overlap, theta: float) -> tuple[float, int]:
    """Edge of the admissible steps: the largest c before the first run that misses theta.

    c_grid: increasing step constants (G,); overlap: the final overlap of a run at each (G,),
    or (rows, G) for several curves. A step is admissible when its run ends at overlap >= theta;
    the edge is the first step that is not, interpolated in log c between it and the step before
    (linear in the overlap). Returns (edge, censored) per curve: censored -1 when the first step
    already misses theta (edge = c_grid[0]), +1 when none does (edge = c_grid[-1]), else 0.
    """
    c = _numbers("c_grid", c_grid, positive=True)
    if c.ndim != 1 or c.size < 2 or np.any(np.diff(c) <= 0):
        raise ValueError(f"c_grid must be an increasing 1-D grid of 2 or more steps, got {c!r}")
    o = np.atleast_2d(np.asarray(overlap, dtype=float))
    if o.shape[-1] != c.size:
        raise ValueError(f"overlap must have {c.size} values per curve (one per step of "
                         f"c_grid), got shape {np.shape(overlap)}")  # fmt: skip
    theta = validate.real("theta", theta)
    miss = ~(o >= theta)  # a NaN overlap (a diverged run) misses
    first = np.where(miss.any(1), miss.argmax(1), c.size)
    censored = np.where(first == 0, -1, np.where(first == c.size, 1, 0))
    i = np.clip(first, 1, c.size - 1)
    before, after = o[np.arange(len(o)), i - 1], np.nan_to_num(o[np.arange(len(o)), i])
    share = np.clip((before - theta) / np.maximum(before - after, 1e-12), 0.0, 1.0)
    log_c = np.log(c[i - 1]) + share * (np.log(c[i]) - np.log(c[i - 1]))
    edge = np.where(censored == -1, c[0], np.where(censored == 1, c[-1], np.exp(log_c)))
    if np.ndim(overlap) == 1:
        return float(edge[0]), int(censored[0])
    return edge, censored
