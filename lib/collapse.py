"""Loss-curve collapse (Bergsma et al. 2025): AdamW timescale, a power-law teacher, collapse tools.

The AdamW timescale as a fraction of training is tau = 1 / (eta * lambda * T) = B / (eta *
lambda * D), with T = D / B steps (Bergsma et al. 2025, Sec. 2; Wang & Aitchison 2024). A
family of sizes trained at one tokens-per-parameter ratio (TPP) with tau set for it should have
normalised curves ell(t/T) = L(t) / L(T) that fall on one universal curve.

The toy (`Teacher`): inputs z with power-law variances E[z_k^2] = k^-a and a linear teacher
y = <w*, z> + sigma * noise whose signal per mode is lambda_k w*_k^2 = k^-b. A student of width
d sees the top d modes through a random rotation, x = Q z_{1:d}, and predicts <theta, x>; the
modes it cannot see act as extra label noise. Everything is exact: the population loss is
sigma^2 + sum_{k > d} k^-b + sum_{k <= d} k^-a (w_k - w*_k)^2 with w = Q^T theta, so curves carry
no evaluation noise and the floor E = sigma^2 is known. The exponents are set by a and b: the
capacity term falls as d^-(b - 1), and a and the noise set how fast data fills in the rest.

Training (`train_runs`): one pass of fresh samples, AdamW in torch's order with muP-style rate
eta * sqrt(d_base / d), linear warmup then decay to zero, decay lambda = 1 / (eta tau T), batch
B ~ D^0.38 (Power Lines). Faults the paper names can be injected (`FAULTS`). Runs of one width
are stacked into batched matrix products (numpy: 10^2-10^3 weights per model, where torch's
per-call overhead would dominate); the AdamW step is checked against torch in the tests.

Analysis: `collapse_ratio` (between-size variance of normalised curves over one run's seed
variance, Qiu et al. 2025's supercollapse when < 1), `align_final_loss` (L(T) from a prefix),
`fit_detector` and `raw_rise` (two fault detectors), `compute_optimal_width` (iso-compute
profiles), `extrapolate_power_law` (a prefix-only rival). Used by chapter 6.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lib import validate

# Power Lines (Bergsma et al. 2025b, arXiv:2505.13738) fit of the optimal timescale:
# tau_opt(TPP) = C * TPP^(-exponent).
BERGSMA2025_POWERLINES = {"C": 1.084, "exponent": 0.527}
BERGSMA2025_B_EXPONENT = 0.38  # Power Lines: the optimal batch grows as B_opt ~ D^0.38
ADAM_BETAS = (0.9, 0.95)  # AdamW moment decays (the usual LLM choice)
ADAM_EPS = 1e-8
WARMUP_FRAC = 0.02  # linear warmup over this fraction of steps, then linear decay to zero
FAULTS = ("spike", "shard", "lr_bug")  # a loss spike, a bad data shard, a learning-rate bug
SPIKE_FRAC, SPIKE_FACTOR = 0.01, 30.0  # spike: the rate x 30 over 1% of the steps
SHARD_FRAC = 0.05  # bad shard: 5% of the steps see labels of pure noise
CHUNK = 64  # steps of data drawn at once per run (memory against call overhead)


# ----------------------------------------------------------------------------- timescale
def tau_from_weight_decay(eta: float, lam: float, T: int) -> float:
    """AdamW timescale as a fraction of training: tau = 1 / (eta * lam * T) = B / (eta lam D)."""
    eta = validate.real("eta", eta, low=0, low_open=True)
    lam = validate.real("lam", lam, low=0, low_open=True)
    return 1.0 / (eta * lam * validate.integer("T", T, minimum=1))


def weight_decay_from_tau(eta: float, tau: float, T: int) -> float:
    """The decay lambda that gives timescale tau: lambda = 1 / (eta * tau * T) (T in steps)."""
    eta = validate.real("eta", eta, low=0, low_open=True)
    tau = validate.real("tau", tau, low=0, low_open=True)
    return 1.0 / (eta * tau * validate.integer("T", T, minimum=1))


def tau_opt_power_lines(TPP: float) -> float:
    """Power Lines' optimal timescale tau_opt = 1.084 * TPP^-0.527 (Bergsma et al. 2025b)."""
    c = BERGSMA2025_POWERLINES
    return c["C"] * validate.real("TPP", TPP, low=0, low_open=True) ** (-c["exponent"])


def tau_at_tpp(tau_ref: float, TPP_ref: float, TPP: float) -> float:
    """Carry a timescale calibrated at TPP_ref to TPP with Power Lines' slope: tau ~ TPP^-0.527."""
    tau_ref = validate.real("tau_ref", tau_ref, low=0, low_open=True)
    ratio = validate.real("TPP", TPP, low=0, low_open=True) / validate.real(
        "TPP_ref", TPP_ref, low=0, low_open=True
    )
    return tau_ref * ratio ** (-BERGSMA2025_POWERLINES["exponent"])


# ----------------------------------------------------------------------------- the teacher
@dataclass(frozen=True)
class Teacher:
    """A linear teacher on inputs with power-law variances: E[z_k^2] = k^-a, signal k^-b.

    y = sum_k w*_k z_k + sigma * eps with lambda_k w*_k^2 = k^-b (signs from `seed`); the loss
    floor is E = sigma^2. A width-d student sees modes 1..d; the rest, sum_{k>d} k^-b, is noise
    to it and sets its capacity limit.
    """

    a: float
    b: float
    sigma: float
    seed: int = 0

    def __post_init__(self) -> None:
        validate.real("a", self.a, low=0, low_open=True)
        validate.real("b", self.b, low=1, low_open=True)
        validate.real("sigma", self.sigma, low=0)
        validate.integer("seed", self.seed, minimum=0)

    @property
    def floor(self) -> float:
        """The irreducible loss E = sigma^2 (mean squared error)."""
        return self.sigma**2

    def modes(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Variances lambda_k = k^-a and teacher weights w*_k of the first d modes, (d,) each."""
        k = np.arange(1, validate.integer("d", d, minimum=1) + 1.0)
        signs = np.random.default_rng([self.seed, 7]).choice([-1.0, 1.0], size=d)
        return k**-self.a, signs * k ** ((self.a - self.b) / 2)

    def tail(self, d: int) -> float:
        """Signal the width-d student cannot see: sum_{k > d} k^-b (Hurwitz zeta)."""
        from scipy.special import zeta

        return float(zeta(self.b, validate.integer("d", d, minimum=0) + 1))

    def signal(self) -> float:
        """Total signal variance sum_k k^-b = zeta(b)."""
        return self.tail(0)


# ----------------------------------------------------------------------------- the recipe
def plan(width: int, TPP: float, B_ref: int, D_ref: float) -> tuple[int, int]:
    """(T, B) for D = TPP * N samples (N = width) with Power Lines' batch rule
    B = B_ref (D / D_ref)^0.38 (Bergsma et al. 2025b); T = round(D / B) steps."""
    D = validate.real("TPP", TPP, low=0, low_open=True) * validate.integer(
        "width", width, minimum=1
    )
    B_ref = validate.integer("B_ref", B_ref, minimum=1)
    ratio = D / validate.real("D_ref", D_ref, low=0, low_open=True)
    B = max(1, round(B_ref * ratio**BERGSMA2025_B_EXPONENT))
    return max(1, round(D / B)), B


@dataclass(frozen=True)
class Run:
    """One training run: width d, T steps of B samples, base rate eta, timescale tau.

    The run's rate is eta * sqrt(base_width / width) (`rate`), its decay 1 / (rate tau T)
    unless `lam` fixes it (0 switches decay off). `fault` (one of FAULTS) starts at t/T =
    fault_at. The seed sets the rotation, the initialisation and the data stream.
    """

    width: int
    T: int
    B: int
    eta: float
    tau: float
    seed: int = 0
    base_width: int = 32
    lam: float | None = None
    fault: str | None = None
    fault_at: float = 0.5
    n_eval: int = 40

    def __post_init__(self) -> None:
        for name in ("width", "T", "B", "base_width", "n_eval"):
            validate.integer(name, getattr(self, name), minimum=1)
        validate.integer("seed", self.seed, minimum=0)
        if self.T < self.n_eval:
            raise ValueError(f"T={self.T} must be >= n_eval={self.n_eval}; pass more steps")
        validate.real("eta", self.eta, low=0, low_open=True)
        validate.real("tau", self.tau, low=0, low_open=True)
        if self.lam is not None:
            validate.real("lam", self.lam, low=0)
        if self.fault is not None:
            validate.choice("fault", self.fault, FAULTS)
        validate.real("fault_at", self.fault_at, low=0, high=1, low_open=True, high_open=True)

    @property
    def rate(self) -> float:
        """Peak Adam rate: eta * sqrt(base_width / width) (a rotated readout's muP-style rule)."""
        return self.eta * math.sqrt(self.base_width / self.width)

    @property
    def decay(self) -> float:
        """Decoupled weight decay: the fixed `lam`, or 1 / (rate * tau * T)."""
        return (
            self.lam if self.lam is not None else weight_decay_from_tau(self.rate, self.tau, self.T)
        )

    def schedule(self) -> np.ndarray:
        """Multiplier of the peak rate at each step (T,): warmup, linear decay, and the fault."""
        T, w = self.T, max(1, round(WARMUP_FRAC * self.T))
        t = np.arange(T)
        s = np.minimum((t + 1) / w, (T - t) / max(T - w, 1))
        start = round(self.fault_at * T)
        if self.fault == "lr_bug":  # the schedule restarts at the peak and stays there
            s[start:] = 1.0
        elif self.fault == "spike":
            s[start : start + max(1, round(SPIKE_FRAC * T))] *= SPIKE_FACTOR
        return s

    def noisy_steps(self) -> np.ndarray:
        """Boolean (T,): steps whose labels are pure noise (the bad shard)."""
        bad = np.zeros(self.T, bool)
        if self.fault == "shard":
            start = round(self.fault_at * self.T)
            bad[start : start + max(1, round(SHARD_FRAC * self.T))] = True
        return bad


@dataclass(frozen=True)
class Recipe:
    """The family's fixed recipe: Power Lines batch rule, muP base width, evaluation points.

    `run` turns (width, TPP, eta, tau, seed) into a Run with D = TPP * width samples in T steps
    of B = B_ref (D / D_ref)^0.38 samples (see `plan`).
    """

    B_ref: int
    D_ref: float
    base_width: int
    n_eval: int = 40

    def run(self, width: int, TPP: float, eta: float, tau: float, seed: int, **kw) -> Run:
        T, B = plan(width, TPP, self.B_ref, self.D_ref)
        return Run(width, T, B, eta, tau, seed, base_width=self.base_width, n_eval=self.n_eval,
                   **kw)  # fmt: skip

    def family(self, widths, TPP: float, taus, eta: float, seeds, **kw) -> list[Run]:
        """Every width (with its own tau) times every replicate seed, width-major."""
        n = validate.same_length(widths=list(widths), taus=list(taus))
        if n < 1 or len(seeds) < 1:
            raise ValueError("pass at least one width and one seed")
        return [self.run(w, TPP, eta, tau, s, **kw)
                for w, tau in zip(widths, taus, strict=True) for s in seeds]  # fmt: skip


# ----------------------------------------------------------------------------- training
def _init(run: Run, teacher: Teacher, lam_k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The run's rotation Q (d, d), Haar-distributed, and initial weights theta (d,).

    theta ~ N(0, s^2) with s^2 = signal / sum_k lambda_k, so the initial output variance equals
    the teacher's signal variance at every width.
    """
    rng = np.random.default_rng([run.seed, 0])
    q, r = np.linalg.qr(rng.standard_normal((run.width, run.width)))
    q *= np.sign(np.diag(r))  # makes the QR rotation Haar-distributed
    theta = rng.standard_normal(run.width) * math.sqrt(teacher.signal() / lam_k.sum())
    return q, theta


def population_loss(theta: np.ndarray, Q: np.ndarray, teacher: Teacher) -> np.ndarray:
    """Exact loss of K stacked students, theta (K, d), Q (K, d, d): L = sigma^2 + tail(d) +
    sum_k lambda_k (w_k - w*_k)^2 with w = Q^T theta (K,)."""
    d = theta.shape[1]
    lam_k, w_star = teacher.modes(d)
    w = (theta[:, None, :] @ Q)[:, 0]
    return teacher.floor + teacher.tail(d) + ((w - w_star) ** 2 * lam_k).sum(axis=1)


def _gradient(theta, Q, z, y) -> np.ndarray:
    """Minibatch gradient of the mean squared error, (K, d): with w = Q^T theta and residual
    r = z w - y, it is Q (2 z^T r / B), for z (K, B, d) in mode coordinates and y (K, B)."""
    w = theta[:, None, :] @ Q  # (K, 1, d)
    r = (z @ w.transpose(0, 2, 1))[:, :, 0] - y  # (K, B)
    g_modes = 2.0 * (r[:, None, :] @ z) / z.shape[1]  # (K, 1, d)
    return (Q @ g_modes.transpose(0, 2, 1))[:, :, 0]


def _adamw_step(theta, g, m, v, lr, lam, step: int) -> None:
    """One in-place AdamW step in torch.optim.AdamW's order (decay first, then the Adam move):
    theta <- theta (1 - lr lam) - lr m_hat / (sqrt(v_hat) + eps); lr and lam broadcast."""
    b1, b2 = ADAM_BETAS
    m *= b1
    m += (1 - b1) * g
    v *= b2
    v += (1 - b2) * g * g
    theta *= 1 - lr * lam
    theta -= lr / (1 - b1**step) * m / (np.sqrt(v / (1 - b2**step)) + ADAM_EPS)


def _check_runs(runs, teacher) -> None:
    """A non-empty list of Run and a Teacher, else a clear error."""
    if not isinstance(runs, list | tuple) or not runs:
        raise TypeError(f"runs must be a non-empty list of Run, got {type(runs).__name__}")
    if not all(isinstance(r, Run) for r in runs):
        raise TypeError("runs must contain only Run objects (see Recipe.run)")
    if not isinstance(teacher, Teacher):
        raise TypeError(f"teacher must be a Teacher, got {type(teacher).__name__}")


def train_stack(runs: list[Run], teacher: Teacher) -> np.ndarray:
    """Train runs of one width, T and B side by side; exact losses L (K, n_eval) at
    t/T = j/n_eval. Each run keeps its own rotation, initialisation, data, rate, decay and
    fault, so its curve does not depend on the other runs of the stack."""
    _check_runs(runs, teacher)
    d, T, B, n_eval = runs[0].width, runs[0].T, runs[0].B, runs[0].n_eval
    if any((r.width, r.T, r.B, r.n_eval) != (d, T, B, n_eval) for r in runs):
        raise ValueError("a stack needs one width, T, B and n_eval; group the runs")
    lam_k, w_star = teacher.modes(d)
    noise = math.sqrt(teacher.floor + teacher.tail(d))  # what the student cannot explain
    junk = math.sqrt(teacher.floor + teacher.signal())  # a bad shard's labels: pure noise
    Q, theta = (np.stack(x) for x in zip(*(_init(r, teacher, lam_k) for r in runs), strict=True))
    lr = np.stack([r.rate * r.schedule() for r in runs], axis=1)[:, :, None]  # (T, K, 1)
    lam = np.array([r.decay for r in runs])[:, None]
    bad = np.stack([r.noisy_steps() for r in runs], axis=1)  # (T, K)
    rngs = [np.random.default_rng([r.seed, 1]) for r in runs]
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    checkpoints = {max(1, round(j * T / n_eval)): j - 1 for j in range(1, n_eval + 1)}
    L = np.empty((len(runs), n_eval))
    chunk = max(1, min(CHUNK, 2**22 // (len(runs) * B * (d + 1))))
    for t0 in range(0, T, chunk):
        draws = np.stack([g.standard_normal((min(chunk, T - t0), B, d + 1)) for g in rngs], 1)
        for i, draw in enumerate(draws):  # draw (K, B, d + 1): the modes and the noise
            t = t0 + i
            z = draw[:, :, :d] * np.sqrt(lam_k)
            y = np.where(bad[t][:, None], junk * draw[:, :, d], z @ w_star + noise * draw[:, :, d])
            _adamw_step(theta, _gradient(theta, Q, z, y), m, v, lr[t], lam, t + 1)
            if t + 1 in checkpoints:
                L[:, checkpoints[t + 1]] = population_loss(theta, Q, teacher)
    if not np.all(np.isfinite(L)):
        raise FloatingPointError(f"non-finite loss in a stack of width {d}: lower eta")
    return L


def train_runs(runs: list[Run], teacher: Teacher, desc: str | None = None, stack: int = 64):
    """Exact loss curves L (len(runs), n_eval) of every run, in order, via `lib.runs.run_jobs`.

    Runs sharing width, T and B are trained together in stacks of at most `stack` runs (one
    job each), so replicates cost one batched pass instead of many small ones.
    """
    from lib.runs import run_jobs

    _check_runs(runs, teacher)
    stack = validate.integer("stack", stack, minimum=1)
    if len({r.n_eval for r in runs}) > 1:
        raise ValueError("every run must have the same n_eval (one curve length)")
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(runs):
        groups.setdefault((r.width, r.T, r.B), []).append(i)
    chunks = [idx[j : j + stack] for idx in groups.values() for j in range(0, len(idx), stack)]
    chunks.sort(key=lambda c: -runs[c[0]].T * runs[c[0]].width ** 2 * len(c))  # longest first
    results = run_jobs(train_stack, [([runs[i] for i in c], teacher) for c in chunks], desc=desc)
    L = np.empty((len(runs), runs[0].n_eval))
    for c, res in zip(chunks, results, strict=True):
        L[c] = res
    return L


# ----------------------------------------------------------------------------- collapse
def normalise(L, L_hat: float = 0.0) -> np.ndarray:
    """ell(t_hat) = (L(t_hat T) - L_hat) / (L(T) - L_hat); L (..., m) with L[..., -1] = L(T).

    L_hat = 0 divides by the final loss (Bergsma et al. 2025); L_hat = the loss floor gives
    Qiu et al. (2025)'s reducible-loss form.
    """
    a = validate.array("L", L, ndim=None, min_size=2)
    L_hat = validate.real("L_hat", L_hat)
    if a.ndim < 1 or a.shape[-1] < 2:
        raise ValueError(f"L needs at least 2 points on its last axis, got shape {a.shape}")
    if np.any(a[..., -1] <= L_hat):
        raise ValueError(f"L_hat={L_hat!r} must lie below every final loss; pass e.g. 0")
    return (a - L_hat) / (a[..., -1:] - L_hat)


def _curves(ell, t_hat, t_min: float, min_curves: int) -> tuple[np.ndarray, np.ndarray]:
    """Validated curves (n, m) restricted to t_hat >= t_min."""
    e = validate.array("ell", ell, ndim=2)
    t = validate.array("t_hat", t_hat, ndim=1)
    t_min = validate.real("t_min", t_min)
    if e.shape[1] != t.shape[0] or e.shape[0] < min_curves:
        raise ValueError(f"ell must be (n >= {min_curves} curves, len(t_hat)={t.shape[0]}), "
                         f"got {e.shape}")  # fmt: skip
    keep = t >= t_min
    if not keep.any():
        raise ValueError(f"t_min={t_min} leaves no points; use t_min <= {t.max()}")
    return e[:, keep], t[keep]


def excess_area(ell, t_hat, t_min: float = 0.1) -> np.ndarray:
    """Shape summary of each curve: mean over t_hat >= t_min of ell - 1 (n,); 0 when flat."""
    e, _ = _curves(ell, t_hat, t_min, 1)
    return e.mean(axis=1) - 1.0


def area_contrast(ell, t_hat, hi: int, lo: int, t_min: float = 0.1) -> np.ndarray:
    """Per replicate: excess area of config hi minus config lo, in seed s.d. of one run (R,).

    ell (J configs, R replicates, m); the unit is the pooled seed standard deviation of one
    run's excess area across the J configs (J (R - 1) degrees of freedom).
    """
    e = validate.array("ell", ell, ndim=3)
    J, R, m = e.shape
    if R < 2:
        raise ValueError(f"ell needs R >= 2 replicates on axis 1, got shape {e.shape}")
    hi = validate.integer("hi", hi, minimum=0, maximum=J - 1)
    lo = validate.integer("lo", lo, minimum=0, maximum=J - 1)
    if hi == lo:
        raise ValueError(f"hi and lo must name two different configs, got {hi} twice")
    A = excess_area(e.reshape(J * R, m), t_hat, t_min).reshape(J, R)
    sd = math.sqrt(float(A.var(axis=1, ddof=1).mean()))
    if sd == 0:
        raise ValueError("every replicate has the same excess area; the seed s.d. is zero")
    return (A[hi] - A[lo]) / sd


def shape_variances(ell, t_hat, t_min: float = 0.1) -> tuple[float, float]:
    """Systematic and seed variance of normalised curves ell (J configs, R replicates, m).

    Replicate r of every config shares a seed, so a two-way ANOVA (config x replicate) at each
    t_hat separates the variance of the configs' true curves, V_sys = (MS_config -
    MS_residual) / R, from the single-run seed variance V_seed = mean_j var_r(ell_jr). Both
    are averaged over t_hat >= t_min.
    """
    e = validate.array("ell", ell, ndim=3)
    J, R, m = e.shape
    if J < 2 or R < 2:
        raise ValueError(f"ell must be (J >= 2 configs, R >= 2 replicates, m), got {e.shape}")
    e = _curves(e.reshape(J * R, m), t_hat, t_min, 1)[0].reshape(J, R, -1)
    m_config, m_rep, m_all = e.mean(axis=1), e.mean(axis=0), e.mean(axis=(0, 1))
    ms_config = R * ((m_config - m_all) ** 2).sum(axis=0) / (J - 1)
    resid = e - m_config[:, None] - m_rep[None] + m_all
    ms_resid = (resid**2).sum(axis=(0, 1)) / ((J - 1) * (R - 1))
    return float(np.mean((ms_config - ms_resid) / R)), float(np.mean(e.var(axis=1, ddof=1)))


def collapse_ratio(ell, t_hat, t_min: float = 0.1, n_avg: int = 1) -> float:
    """rho = V_sys / (V_seed / n_avg) of `shape_variances`: how far the configs' true curves
    differ, in units of the seed variance of an n_avg-run average. 0 is a perfect collapse;
    rho < 1 at n_avg = 1 is Qiu et al. (2025)'s supercollapse (below one run's seed noise)."""
    n_avg = validate.integer("n_avg", n_avg, minimum=1)
    v_sys, v_seed = shape_variances(ell, t_hat, t_min)
    return n_avg * v_sys / v_seed


def collapse_ratio_interval(ell, t_hat, t_min: float = 0.1) -> tuple[float, float, float]:
    """rho (n_avg = 1) with a 95% jackknife interval over replicates (configs share seeds, so
    replicate r is left out of every config at once): (bias-corrected rho, lo, hi).

    Pseudo-values R rho - (R - 1) rho_(-r) give the estimate and a t-interval with R - 1
    degrees of freedom (Efron & Tibshirani 1993, Ch. 11); a bootstrap over replicates would
    duplicate seeds and bias rho upwards.
    """
    from scipy import stats

    e = validate.array("ell", ell, ndim=3)
    R = e.shape[1]
    if R < 3:
        raise ValueError(f"ell needs >= 3 replicates on axis 1 for a jackknife, got {R}")
    full = collapse_ratio(e, t_hat, t_min)
    pseudo = np.array([R * full - (R - 1) * collapse_ratio(np.delete(e, r, axis=1), t_hat, t_min)
                       for r in range(R)])  # fmt: skip
    half = stats.t.ppf(0.975, R - 1) * pseudo.std(ddof=1) / math.sqrt(R)
    return float(pseudo.mean()), float(pseudo.mean() - half), float(pseudo.mean() + half)


def align_final_loss(L_prefix, ell_prefix) -> float:
    """Online estimate of L(T) from a curve prefix: the divisor c that best maps L onto ell.

    Least squares in log space: ln c = mean(ln L(t_hat) - ln ell(t_hat)) over the prefix.
    """
    L = validate.array("L_prefix", L_prefix, positive=True)
    e = validate.array("ell_prefix", ell_prefix, positive=True)
    validate.same_length(L_prefix=L, ell_prefix=e)
    return float(np.exp(np.mean(np.log(L) - np.log(e))))


# ----------------------------------------------------------------------------- applications
def drift(L, t_hat, ell_bar, t_start: float) -> np.ndarray:
    """Online deviation of a run from the universal curve ell_bar, knowing only the run so far.

    x_j = ln L_j - ln ell_bar_j - mean_{0.1 <= t_i < t_j} (ln L_i - ln ell_bar_i): the newest
    point against the scale that the earlier points give (L(T) is never needed). (m,), NaN
    for t_j <= t_start and at t_j = 1.
    """
    L = validate.array("L", L, positive=True)
    t = validate.array("t_hat", t_hat)
    e = validate.array("ell_bar", ell_bar, positive=True)
    validate.same_length(L=L, t_hat=t, ell_bar=e)
    t_start = validate.real("t_start", t_start, low=0.1, high=1, high_open=True)
    x = np.log(L) - np.log(e)
    used = np.cumsum(np.where(t >= 0.1, x, 0.0)), np.cumsum(t >= 0.1)
    scale = np.concatenate([[np.nan], used[0][:-1] / np.maximum(used[1][:-1], 1)])
    return np.where((t > t_start) & (t < 1), x - scale, np.nan)


@dataclass(frozen=True)
class Detector:
    """Deviation-from-collapse detector: `drift` in units of its seed s.d. among references.

    ell_bar (m,): the universal curve (mean normalised curve of the reference runs); sd (m,):
    the s.d. of `drift` over the reference runs (NaN where unmonitored).
    """

    ell_bar: np.ndarray
    sd: np.ndarray
    t_hat: np.ndarray
    t_start: float

    def scores(self, L) -> np.ndarray:
        """Standardised deviation of the run L (m,) from the universal curve (m,)."""
        return drift(L, self.t_hat, self.ell_bar, self.t_start) / self.sd


def fit_detector(reference, t_hat, t_start: float, noise=None) -> Detector:
    """A Detector from clean reference curves L (n, m) of a collapsed family (other sizes):
    ell_bar is their mean normalised curve; the s.d. of `drift` comes from the clean curves
    `noise` (k >= 3, m) of the monitored size if given, else from the references."""
    ref = validate.array("reference", reference, ndim=2, positive=True)
    noise = ref if noise is None else validate.array("noise", noise, ndim=2, positive=True)
    if noise.shape[0] < 3:
        raise ValueError(f"need >= 3 curves to estimate a s.d., got {noise.shape[0]}")
    ell_bar = normalise(ref).mean(axis=0)
    x = np.array([drift(r, t_hat, ell_bar, t_start) for r in noise])
    sd = np.full(x.shape[1], np.nan)
    seen = ~np.isnan(x[0])
    sd[seen] = x[:, seen].std(axis=0, ddof=1)
    return Detector(ell_bar, sd, np.asarray(t_hat, float), t_start)


def raw_rise(L, t_hat, t_start: float) -> np.ndarray:
    """The raw-loss monitor: rise of L above its running minimum, L(t) / min_{s<=t} L(s) - 1
    (m,), NaN up to t_start (a detector that sees the raw loss only)."""
    L = validate.array("L", L, positive=True)
    t = validate.array("t_hat", t_hat)
    validate.same_length(L=L, t_hat=t)
    t_start = validate.real("t_start", t_start)
    return np.where(t > t_start, L / np.minimum.accumulate(L) - 1.0, np.nan)


def first_alarm(residual, t_hat, threshold: float) -> float:
    """First t_hat where |residual| > threshold (NaN entries are not monitored); inf if never."""
    r = validate.array("residual", np.nan_to_num(np.asarray(residual, float), nan=0.0))
    t = validate.array("t_hat", t_hat)
    validate.same_length(residual=r, t_hat=t)
    threshold = validate.real("threshold", threshold, low=0, low_open=True)
    hits = np.flatnonzero(np.abs(r) > threshold)
    return float(t[hits[0]]) if hits.size else math.inf


def compute_optimal_width(N, L) -> float:
    """Width at the minimum of loss along one iso-compute line (Hoffmann et al. 2022's
    approach 2): the vertex of a parabola fitted to L against ln N (>= 3 points). NaN when
    the parabola opens downwards or its vertex lies outside the sampled widths."""
    N = validate.array("N", N, positive=True)
    L = validate.array("L", L, positive=True)
    if validate.same_length(N=N, L=L) < 3:
        raise ValueError(f"need >= 3 widths on an iso-compute line, got {len(N)}")
    c2, c1, _ = np.polyfit(np.log(N), L, 2)
    if c2 <= 0:
        return math.nan
    log_n = -c1 / (2 * c2)
    return math.exp(log_n) if np.log(N).min() <= log_n <= np.log(N).max() else math.nan


def extrapolate_power_law(t_hat, L, t_target: float = 1.0) -> float:
    """A prefix-only forecast: fit L(t) = c + A t^-p (c >= 0, A >= 0, 0 < p <= 3) to the
    points (t_hat, L) by least squares in log L, and return its value at t_target."""
    from scipy import optimize

    t = validate.array("t_hat", t_hat, positive=True)
    L = validate.array("L", L, positive=True)
    if validate.same_length(t_hat=t, L=L) < 4:
        raise ValueError(f"need at least 4 prefix points for 3 parameters, got {len(t)}")
    t_target = validate.real("t_target", t_target, low=0, low_open=True)

    def model(p, x):
        return p[0] + p[1] * x ** -p[2]

    start = (0.5 * L.min(), 0.5 * L.min() * t[0] ** 0.5, 0.5)
    fit = optimize.least_squares(lambda p: np.log(model(p, t)) - np.log(L), start,
                                 bounds=([0, 0, 1e-3], [np.inf, np.inf, 3.0]))  # fmt: skip
    return float(model(fit.x, t_target))


def bootstrap_argmin(losses, seed: int, n_boot: int = 1000) -> np.ndarray:
    """Where the minimum of a grid falls under resampled replicates: losses (G, R) give the
    argmin of the replicate mean for each of n_boot resamples of the R replicates (n_boot,)."""
    x = validate.array("losses", losses, ndim=2)
    if x.shape[1] < 2:
        raise ValueError(f"losses needs >= 2 replicates on axis 1, got shape {x.shape}")
    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    picks = rng.integers(0, x.shape[1], size=(validate.integer("n_boot", n_boot, minimum=1),
                                              x.shape[1]))  # fmt: skip
    return x[:, picks].mean(axis=2).argmin(axis=0)
