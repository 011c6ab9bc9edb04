"""Loss-curve collapse (Bergsma et al. 2025): AdamW timescale, a toy LM family, collapse tools.

The AdamW timescale as a fraction of training is tau = 1 / (eta * lambda * T) = B / (eta *
lambda * D), with T = D / B steps (Bergsma et al. 2025, Sec. 2; Wang & Aitchison 2024). A
family of sizes trained at a fixed tokens-per-parameter ratio (TPP) with tau fixed should
have normalised curves ell(t/T) = L(t) / L(T) that fall on one universal curve. This module
trains such a family exactly and cheaply (`Recipe`, `train_runs`), fits its scaling law with
the exact floor to find the compute-optimal TPP (`fit_reducible_law`), measures how far curves
fall apart against seed noise (`area_contrast`, `shape_variances`, `spread`), predicts L(T)
from a prefix by aligning it with the universal curve (`align_final_loss`), and flags runs
that leave it (`detect`).

The toy: contexts c = (c1, c2) of two tokens drawn from a Zipf law, next token y from a
sparse random table P(y | c) (`make_source`). Every (c, y) pair is enumerated with its
probability, so the population loss of a model is one forward pass over all V**2 contexts,
with no evaluation noise, and the floor H is exact. The model is a two-hidden-layer ReLU MLP
of width n on the one-hot pair (`count_params`), trained by AdamW with muP-style rates
(`layer_rates`) on fresh samples, one pass, linear warmup then linear decay to zero.

Why numpy and not torch: the models have 10^3-10^4 parameters, so torch's per-operation
overhead and its seconds-long import in every worker would dominate. Stacking K runs of one
width into batched matrix products (`train_stack`) trains every replicate of a configuration
at once; the gradients and the AdamW step are checked against torch in the tests.
Used by chapter 6.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from lib import validate

# Power Lines (Bergsma et al. 2025b, arXiv:2505.13738) fit of the optimal timescale:
# tau_opt(TPP) = C * TPP^(-exponent).
BERGSMA2025_POWERLINES = {"C": 1.084, "exponent": 0.527}
BERGSMA2025_B_EXPONENT = 0.38  # Power Lines: the optimal batch grows as B_opt ~ D^0.38
LAYERS = ("input", "hidden", "readout")  # the decayed weight matrices, in forward order
ADAM_BETAS = (0.9, 0.95)  # AdamW moment decays (the usual LLM choice)
ADAM_EPS = 1e-8
WARMUP_FRAC = 0.02  # linear warmup over this fraction of steps, then linear decay to zero


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


# ----------------------------------------------------------------------------- the source
@dataclass(frozen=True, eq=False)
class Source:
    """A Zipf-context source over V tokens: every (context, next token) pair and its law.

    context (M,) int in [0, V**2) with c = c1 * V + c2; token (M,) int in [0, V); prob (M,)
    the joint probability P(c) P(y | c), summing to 1.
    """

    V: int
    context: np.ndarray
    token: np.ndarray
    prob: np.ndarray

    @property
    def entropy(self) -> float:
        """The exact loss floor H = -sum_{c,y} P(c, y) ln P(y | c) (nats/token)."""
        p_c = np.bincount(self.context, weights=self.prob, minlength=self.V**2)
        return float(-(self.prob * np.log(self.prob / p_c[self.context])).sum())


def make_source(V: int, s: float, n_support: int, alpha: float, seed: int) -> Source:
    """Contexts from a Zipf law P(c) ~ rank(c)^-s (ranks shuffled); y from a sparse table.

    Each context allows n_support next tokens with Dir(alpha) probabilities. Rare contexts are
    seen late and need capacity, so the loss falls as a power law in both N and D.
    """
    V = validate.integer("V", V, minimum=2)
    s = validate.real("s", s, low=0, low_open=True)
    n_support = validate.integer("n_support", n_support, minimum=1, maximum=V)
    alpha = validate.real("alpha", alpha, low=0, low_open=True)
    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    p_c = (rng.permutation(V * V) + 1.0) ** (-s)
    support = np.argsort(rng.random((V * V, V)), axis=1)[:, :n_support]  # (V^2, n_support)
    p_y = rng.dirichlet(np.full(n_support, alpha), size=V * V)
    keep = p_y > 0  # a Dirichlet draw can underflow to an exact zero
    context = np.broadcast_to(np.arange(V * V)[:, None], support.shape)[keep]
    prob = (p_c[:, None] * p_y)[keep]
    return Source(V, context, support[keep], prob / prob.sum())


# ----------------------------------------------------------------------------- the model
def count_params(width: int, V: int) -> int:
    """N of the MLP: input 2V x n, hidden n x n, readout n x V, readout bias V."""
    n = validate.integer("width", width, minimum=1)
    V = validate.integer("V", V, minimum=2)
    return 2 * V * n + n * n + n * V + V


def layer_rates(eta: float, width: int, base_width: int) -> dict[str, float]:
    """muP-style Adam rates: eta for the input layer (fixed fan-in), eta * n0 / n for the
    hidden and readout matrices (fan-in n), with n0 the base width where all rates are eta."""
    eta = validate.real("eta", eta, low=0, low_open=True)
    ratio = validate.integer("base_width", base_width, minimum=1) / validate.integer(
        "width", width, minimum=1
    )
    return {"input": eta, "hidden": eta * ratio, "readout": eta * ratio}


@dataclass(frozen=True)
class Run:
    """One training run: width n, T steps of B samples, peak rate eta, timescale tau.

    Every layer's decay is lambda_l = 1 / (lr_l * tau * T), so all share timescale tau, unless
    `lam` freezes the decays ((input, hidden, readout) values). From t/T = fault_at on, a
    fraction fault_frac of the labels is replaced by uniform tokens (a data bug). The seed
    sets the initialisation, the data stream and the fault, each from its own stream.
    """

    width: int
    T: int
    B: int
    eta: float
    tau: float
    seed: int = 0
    lam: tuple[float, float, float] | None = None
    fault_at: float | None = None
    fault_frac: float = 0.0
    n_eval: int = 20
    base_width: int = 8

    def __post_init__(self) -> None:
        for name in ("width", "T", "B", "n_eval", "base_width"):
            validate.integer(name, getattr(self, name), minimum=1)
        validate.integer("seed", self.seed, minimum=0)
        if self.T < self.n_eval:
            raise ValueError(f"T={self.T} must be >= n_eval={self.n_eval}; pass more steps")
        validate.real("eta", self.eta, low=0, low_open=True)
        validate.real("tau", self.tau, low=0, low_open=True)
        if self.lam is not None:
            if not isinstance(self.lam, tuple) or len(self.lam) != len(LAYERS):
                raise TypeError(f"lam must be None or a tuple of 3 decays, got {self.lam!r}")
            for layer, value in zip(LAYERS, self.lam, strict=True):
                validate.real(f"lam[{layer}]", value, low=0)
        if self.fault_at is not None:
            validate.real("fault_at", self.fault_at, low=0, high=1, low_open=True, high_open=True)
        validate.probability("fault_frac", self.fault_frac)

    def rates(self) -> dict[str, float]:
        """Peak Adam rate of each layer (see `layer_rates`)."""
        return layer_rates(self.eta, self.width, self.base_width)

    def decays(self) -> dict[str, float]:
        """Decoupled weight decay of each layer: frozen values, or 1 / (lr_l * tau * T)."""
        if self.lam is not None:
            return dict(zip(LAYERS, map(float, self.lam), strict=True))
        return {k: weight_decay_from_tau(lr, self.tau, self.T) for k, lr in self.rates().items()}

    def timescales(self) -> dict[str, float]:
        """Each layer's timescale 1 / (lr_l * lambda_l * T) (inf where lambda_l = 0)."""
        lam, lr = self.decays(), self.rates()
        return {k: 1 / (lr[k] * lam[k] * self.T) if lam[k] > 0 else math.inf for k in LAYERS}


# ----------------------------------------------------------------------------- training
def _one_hot(x: np.ndarray, V: int) -> np.ndarray:
    """Inputs (K, M, 2V) for contexts x (K, M): one-hot c1 in the first V, c2 in the last V."""
    K, M = x.shape
    out = np.zeros((K, M, 2 * V))
    k, m = np.arange(K)[:, None], np.arange(M)[None, :]
    out[k, m, x // V] = 1.0
    out[k, m, V + x % V] = 1.0
    return out


def _forward(params: list[np.ndarray], x: np.ndarray, V: int):
    """Hidden activations and logits of the stacked MLP for contexts x (K, M): z (K, M, V).

    The one-hot input layer is a sum of two rows of W1 (c1's and V + c2's), gathered directly.
    """
    W1, W2, W3, b = params
    k = np.arange(len(x))[:, None]
    h1 = np.maximum(W1[k, x // V] + W1[k, V + x % V], 0.0)  # (K, M, n)
    h2 = np.maximum(h1 @ W2, 0.0)
    return h1, h2, h2 @ W3 + b[:, None, :]


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def _gradients(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """Gradients of the mean cross-entropy of each stacked model (backpropagation by hand).

    params: [W1 (K, 2V, n), W2 (K, n, n), W3 (K, n, V), b (K, V)]; contexts x and labels y
    (K, B).
    """
    W1, W2, W3, _ = params
    K, B = y.shape
    h1, h2, z = _forward(params, x, len(W1[0]) // 2)
    dz = np.exp(z - z.max(axis=-1, keepdims=True))
    dz /= dz.sum(axis=-1, keepdims=True)  # softmax - onehot(y) is d(-ln q_y)/dz
    dz[np.arange(K)[:, None], np.arange(B)[None, :], y] -= 1.0
    dz /= B
    dh2 = (dz @ W3.transpose(0, 2, 1)) * (h2 > 0)
    dh1 = (dh2 @ W2.transpose(0, 2, 1)) * (h1 > 0)
    X = _one_hot(x, len(W1[0]) // 2)  # (K, B, 2V): the input layer's gradient is X^T dh1
    T = (0, 2, 1)
    return [X.transpose(T) @ dh1, h1.transpose(T) @ dh2, h2.transpose(T) @ dz, dz.sum(axis=1)]


def _population_loss(params: list[np.ndarray], source: Source) -> np.ndarray:
    """Exact expected loss of each stacked model, L_k = -sum_{c,y} P(c, y) ln q_k(y | c) (K,)."""
    x = np.broadcast_to(np.arange(source.V**2), (len(params[0]), source.V**2))
    logq = _log_softmax(_forward(params, x, source.V)[2])  # (K, V^2, V)
    return -(logq[:, source.context, source.token] * source.prob).sum(axis=1)


def _init_params(width: int, V: int, seed: int) -> list[np.ndarray]:
    """muP-style initialisation: input N(0, 1), hidden N(0, 1/n), readout and bias zero."""
    rng = np.random.default_rng([seed, 0])
    n = width
    return [rng.standard_normal((2 * V, n)), rng.standard_normal((n, n)) / math.sqrt(n),
            np.zeros((n, V)), np.zeros(V)]  # fmt: skip


def _sample_data(run: Run, source: Source) -> tuple[np.ndarray, np.ndarray]:
    """The run's fresh samples: contexts and labels (T, B), labels corrupted after the fault."""
    cdf = np.cumsum(source.prob)
    u = np.random.default_rng([run.seed, 1]).random(run.T * run.B)
    i = np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), len(cdf) - 1)
    x, y = source.context[i].reshape(run.T, run.B), source.token[i].reshape(run.T, run.B)
    if run.fault_at is not None and run.fault_frac > 0:
        rng = np.random.default_rng([run.seed, 2])
        start = round(run.fault_at * run.T)
        bad = rng.random((run.T - start, run.B)) < run.fault_frac
        y[start:][bad] = rng.integers(0, source.V, int(bad.sum()))
    return x, y


def _lr_factor(t: int, T: int) -> float:
    """Schedule at step t (0-based): linear warmup over WARMUP_FRAC * T, linear decay to zero."""
    w = max(1, round(WARMUP_FRAC * T))
    return min((t + 1) / w, (T - t) / (T - w))


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


def _views(theta: np.ndarray, width: int, V: int) -> list[np.ndarray]:
    """[W1 (K, 2V, n), W2 (K, n, n), W3 (K, n, V), b (K, V)] as views of flat theta (K, P)."""
    shapes = [(2 * V, width), (width, width), (width, V), (V,)]
    ends = np.cumsum([math.prod(s) for s in shapes])
    return [
        theta[:, e - math.prod(s) : e].reshape(-1, *s) for s, e in zip(shapes, ends, strict=True)
    ]


def _per_weight(runs: list[Run], V: int, values) -> np.ndarray:
    """A (K, P) array holding values(run)[layer] on every weight of that layer (bias: index 3)."""
    n = runs[0].width
    counts = [2 * V * n, n * n, n * V, V]
    return np.stack([np.repeat(values(r), counts) for r in runs])


def _check_runs(runs, source) -> None:
    """A non-empty list of Run and a Source, else a clear error."""
    if not isinstance(runs, list | tuple) or not runs:
        raise TypeError(f"runs must be a non-empty list of Run, got {type(runs).__name__}")
    if not all(isinstance(r, Run) for r in runs):
        raise TypeError("runs must contain only Run objects (see Recipe.run)")
    if not isinstance(source, Source):
        raise TypeError(f"source must be a Source (see make_source), got {type(source).__name__}")


def train_stack(runs: list[Run], source: Source) -> np.ndarray:
    """Train runs of one width, T and B side by side; exact losses L (K, n_eval) at t/T = j/n_eval.

    Each run keeps its own initialisation, data, rates and decays, so its curve does not
    depend on the other runs of the stack. All weights live in one flat array per run, so
    the AdamW step is a handful of array operations whatever the number of layers.
    """
    _check_runs(runs, source)
    first = runs[0]
    key = (first.width, first.T, first.B, first.n_eval, first.base_width)
    if any((r.width, r.T, r.B, r.n_eval, r.base_width) != key for r in runs):
        raise ValueError("a stack needs one width, T, B, n_eval and base_width; group the runs")
    K, V, T = len(runs), source.V, first.T
    theta = np.stack([np.concatenate([p.ravel() for p in _init_params(r.width, V, r.seed)])
                      for r in runs])  # fmt: skip
    params = _views(theta, first.width, V)
    data = [_sample_data(r, source) for r in runs]
    x, y = np.stack([d[0] for d in data], 1), np.stack([d[1] for d in data], 1)  # (T, K, B)
    lr = _per_weight(runs, V, lambda r: [*r.rates().values(), r.eta])
    lam = _per_weight(runs, V, lambda r: [*r.decays().values(), 0.0])
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    checkpoints = {max(1, round(j * T / first.n_eval)): j for j in range(first.n_eval)}
    L = np.empty((K, first.n_eval))
    for t in range(T):
        g = np.concatenate([g.reshape(K, -1) for g in _gradients(params, x[t], y[t])], axis=1)
        _adamw_step(theta, g, m, v, _lr_factor(t, T) * lr, lam, t + 1)
        if t + 1 in checkpoints:
            L[:, checkpoints[t + 1]] = _population_loss(params, source)
    if not np.all(np.isfinite(L)):
        raise FloatingPointError(f"non-finite loss in a stack of width {first.width}: lower eta")
    return L


def train_runs(runs: list[Run], source: Source, desc: str | None = None, stack: int = 8):
    """Exact loss curves L (len(runs), n_eval) of every run, in order, via `lib.runs.run_jobs`.

    Runs sharing width, T and B are trained together in stacks of at most `stack` runs (one
    job each), so replicates cost one batched pass instead of many small ones.
    """
    from lib.runs import run_jobs

    _check_runs(runs, source)
    stack = validate.integer("stack", stack, minimum=1)
    if len({r.n_eval for r in runs}) > 1:
        raise ValueError("every run must have the same n_eval (one curve length)")
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(runs):
        groups.setdefault((r.width, r.T, r.B, r.n_eval, r.base_width), []).append(i)
    chunks = [idx[j : j + stack] for idx in groups.values() for j in range(0, len(idx), stack)]
    chunks.sort(key=lambda c: -runs[c[0]].T * runs[c[0]].width * len(c))  # longest first
    results = run_jobs(train_stack, [([runs[i] for i in c], source) for c in chunks], desc=desc)
    L = np.empty((len(runs), runs[0].n_eval))
    for c, res in zip(chunks, results, strict=True):
        L[c] = res
    return L


def plan(width: int, V: int, TPP: float, B_ref: int, D_ref: float) -> tuple[int, int]:
    """(T, B) for D = TPP * N samples with Power Lines' batch rule B = B_ref (D / D_ref)^0.38.

    Bergsma et al. (2025b) find the optimal batch grows as D^0.38; T = round(D / B) steps.
    """
    D = validate.real("TPP", TPP, low=0, low_open=True) * count_params(width, V)
    B_ref = validate.integer("B_ref", B_ref, minimum=1)
    ratio = D / validate.real("D_ref", D_ref, low=0, low_open=True)
    B = max(1, round(B_ref * ratio**BERGSMA2025_B_EXPONENT))
    return max(1, round(D / B)), B


@dataclass(frozen=True)
class Recipe:
    """The family's fixed training recipe: vocabulary, Power Lines batch rule, muP base width.

    `run` turns (width, TPP, eta, tau, seed) into a Run with D = TPP * N samples in T steps of
    B = B_ref (D / D_ref)^0.38 samples (see `plan`).
    """

    V: int
    B_ref: int
    D_ref: float
    base_width: int
    n_eval: int = 20

    def run(self, width: int, TPP: float, eta: float, tau: float, seed: int, **kw) -> Run:
        T, B = plan(width, self.V, TPP, self.B_ref, self.D_ref)
        return Run(width, T, B, eta, tau, seed, n_eval=self.n_eval, base_width=self.base_width,
                   **kw)  # fmt: skip

    def family(self, widths, tpps, taus, eta: float, seeds, **kw) -> list[Run]:
        """Every width (with its own TPP and tau) times every replicate seed, width-major."""
        n = validate.same_length(widths=list(widths), tpps=list(tpps), taus=list(taus))
        if n < 1 or len(seeds) < 1:
            raise ValueError("pass at least one width and one seed")
        return [self.run(w, tpp, eta, tau, s, **kw)
                for w, tpp, tau in zip(widths, tpps, taus, strict=True) for s in seeds]  # fmt: skip


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


def spread(ell, t_hat, t_min: float = 0.1) -> float:
    """Mean over t_hat >= t_min of (max - min across curves) of normalised curves ell (n, m)."""
    e, _ = _curves(ell, t_hat, t_min, 2)
    return float(np.mean(e.max(axis=0) - e.min(axis=0)))


def excess_area(ell, t_hat, t_min: float = 0.1) -> np.ndarray:
    """Shape summary of each curve: mean over t_hat >= t_min of ell - 1 (n,); 0 when flat."""
    e, _ = _curves(ell, t_hat, t_min, 1)
    return e.mean(axis=1) - 1.0


def align_final_loss(L_prefix, ell_prefix) -> float:
    """Online estimate of L(T) from a curve prefix: the divisor c that best maps L onto ell.

    Least squares in log space: ln c = mean(ln L(t_hat) - ln ell(t_hat)) over the prefix.
    """
    L = validate.array("L_prefix", L_prefix, positive=True)
    e = validate.array("ell_prefix", ell_prefix, positive=True)
    validate.same_length(L_prefix=L, ell_prefix=e)
    return float(np.exp(np.mean(np.log(L) - np.log(e))))


@dataclass(frozen=True)
class Detection:
    """Detector output: L(T) estimated from the prefix, residual per point, first alarm."""

    L_T_hat: float
    residual: np.ndarray = field(repr=False)  # (m,) L / L_T_hat - ell_bar; NaN where unmonitored
    t_alarm: float  # first t_hat with |residual| > threshold; inf when never


def detect(L, t_hat, ell_bar, t_fit: float, threshold: float) -> Detection:
    """Flag a run that leaves the universal curve ell_bar after the alignment window.

    L(T) is estimated from the points with 0.1 <= t_hat <= t_fit only, then every later point
    is monitored: alarm when |L / L_T_hat - ell_bar| > threshold.
    """
    L = validate.array("L", L, positive=True)
    t = validate.array("t_hat", t_hat)
    e = validate.array("ell_bar", ell_bar, positive=True)
    validate.same_length(L=L, t_hat=t, ell_bar=e)
    t_fit = validate.real("t_fit", t_fit)
    threshold = validate.real("threshold", threshold, low=0, low_open=True)
    fit = (t >= 0.1) & (t <= t_fit)
    if not fit.any() or not (t > t_fit).any():
        raise ValueError(f"t_fit={t_fit} must leave points on both sides within [0.1, 1]")
    c = align_final_loss(L[fit], e[fit])
    r = np.where(t > t_fit, L / c - e, np.nan)
    hits = np.flatnonzero(np.abs(np.nan_to_num(r)) > threshold)
    return Detection(c, r, float(t[hits[0]]) if hits.size else math.inf)


@dataclass(frozen=True)
class ReducibleLaw:
    """L(N, D) = E + A / N^alpha + B / D^beta with the floor E known (Hoffmann et al. 2022)."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float
    rms: float  # root-mean-square residual of ln(L - E)

    def predict(self, N, D) -> np.ndarray:
        N = validate.array("N", N, ndim=None, positive=True)
        D = validate.array("D", D, ndim=None, positive=True)
        return self.E + self.A / N**self.alpha + self.B / D**self.beta

    def optimal_tpp(self, N: float) -> float:
        """Compute-optimal tokens per parameter at size N under C = 6 N D.

        Minimising L at fixed C gives alpha A N^-alpha = beta B D^-beta (Hoffmann et al.
        2022, Eq. 4), so D_opt(N) = (beta B N^alpha / (alpha A))^(1 / beta) and TPP = D / N.
        """
        N = validate.real("N", N, low=0, low_open=True)
        D = (self.beta * self.B * N**self.alpha / (self.alpha * self.A)) ** (1 / self.beta)
        return float(D / N)


def fit_reducible_law(N, D, L, E: float) -> ReducibleLaw:
    """Fit ln(L - E) = ln(A N^-alpha + B D^-beta) by least squares, the floor E held fixed.

    Our source's floor is exact (`Source.entropy`), so only the four reducible-loss parameters
    are fitted (scipy least_squares from a few starts, in log-parameters).
    """
    from scipy import optimize

    N, D, L = (validate.array(k, v, positive=True) for k, v in (("N", N), ("D", D), ("L", L)))
    if validate.same_length(N=N, D=D, L=L) < 5:
        raise ValueError(f"need at least 5 (N, D, L) points for 4 parameters, got {len(N)}")
    E = validate.real("E", E, low=0)
    if np.any(L <= E):
        raise ValueError(f"every loss must exceed the floor E={E:g}; got min L = {L.min():g}")

    def residuals(p: np.ndarray) -> np.ndarray:
        log_a, log_b, alpha, beta = p
        return np.logaddexp(log_a - alpha * np.log(N), log_b - beta * np.log(D)) - np.log(L - E)

    starts = [(a, b, al, be) for a in (0.0, 5.0) for b in (0.0, 5.0) for al in (0.3, 1.0)
              for be in (0.3, 1.0)]  # fmt: skip
    bounds = ([-20, -20, 0.01, 0.01], [40, 40, 3.0, 3.0])
    best = min((optimize.least_squares(residuals, s, bounds=bounds) for s in starts),
               key=lambda r: r.cost)  # fmt: skip
    log_a, log_b, alpha, beta = best.x
    rms = float(np.sqrt(np.mean(best.fun**2)))
    return ReducibleLaw(
        E, float(np.exp(log_a)), float(np.exp(log_b)), float(alpha), float(beta), rms
    )


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


def area_contrast(ell, t_hat, hi: int, lo: int, t_min: float = 0.1) -> np.ndarray:
    """Per replicate: excess area of config hi minus config lo, in seed s.d. of one run (R,).

    ell (J configs, R replicates, m); the excess area of a curve is mean(ell - 1) over
    t_hat >= t_min (large when a run converges late). The unit is the pooled seed standard
    deviation of one run's excess area across the J configs (J (R - 1) degrees of freedom).
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
