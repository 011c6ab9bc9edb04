"""Chapter 2's toy: a Zipf-weighted associative memory that dense and MoE MLPs must store.

K random keys map to random values, so parameters, not FLOPs, limit the loss, as in a
knowledge-heavy language model. Every model of a replicate sees the same batches in the same
order and starts from an initialisation drawn for it alone (keyed by its spec), so models can
be trained in any grouping ("banks") and still train exactly as if alone. One bank holds many
ReLU MLPs side by side in one flat parameter vector and trains them in lockstep with
warmup-stable-decay (WSD) branches, which give several step budgets from one run. The results
become one long table (one row per model and budget) from which the chapter reads efficiency
leverage at a fixed token budget (`toy_leverage`) or along the compute-optimal frontier
(`lib.moe_leverage.isoflop_frontier`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lib import validate
from lib.moe_leverage import efficiency_leverage, isoflop_frontier


# ----------------------------------------------------------------------------- the task
@dataclass(frozen=True)
class ToyConfig:
    """Settings of the toy: the memory task, and the optimiser every model shares.

    Task: n_keys keys in R^d_in, values in R^d_out, key k queried with probability
    proportional to (k + zipf_shift)^-zipf (a shift flattens the head, so no single key
    dominates the loss). Adam (betas 0.9, 0.99) without weight decay on batches of keys drawn
    from p; warmup-stable-decay learning rate: linear warmup, constant lr, then linear decay
    to 0 over the last decay_frac of a budget. balance is the Switch load-balancing
    coefficient (0.01, as in Tian et al. 2025).
    """

    n_keys: int = 1024
    d_in: int = 16
    d_out: int = 8
    zipf: float = 1.2
    zipf_shift: float = 0.0
    batch: int = 128
    lr: float = 3e-3
    warmup: int = 25
    decay_frac: float = 0.2
    balance: float = 0.01

    def __post_init__(self) -> None:
        validate.integer("n_keys", self.n_keys, minimum=2)
        for name in ("d_in", "d_out", "batch", "warmup"):
            validate.integer(name, getattr(self, name), minimum=1)
        validate.real("zipf", self.zipf, low=0)
        validate.real("zipf_shift", self.zipf_shift, low=0)
        validate.real("lr", self.lr, low=0, low_open=True, high=1)
        validate.real("decay_frac", self.decay_frac, low=0, low_open=True, high=1)
        validate.real("balance", self.balance, low=0)


@dataclass(frozen=True, eq=False)
class MemoryTask:
    """Associative memory: K random keys (K, d_in) map to random values (K, d_out).

    Key k is queried with probability p_k proportional to (k + shift)^-zipf. Values are
    independent of the keys, so a model can only store them: parameters, not FLOPs, limit the
    loss L(f) = sum_k p_k |f(x_k) - y_k|^2 / d_out (0 for perfect recall, about 1 for f = 0).
    """

    keys: np.ndarray  # (K, d_in), standard normal
    values: np.ndarray  # (K, d_out), standard normal
    p: np.ndarray  # (K,) query probabilities, decreasing

    def loss_of(self, predictions) -> np.ndarray:
        """Exact loss of predictions (..., K, d_out) at every key: (...,), no sampling noise."""
        predictions = validate.array("predictions", predictions, ndim=None)
        if predictions.shape[-2:] != self.values.shape:
            raise ValueError(f"predictions must end in (K, d_out) = {self.values.shape}, "
                             f"got shape {predictions.shape}")  # fmt: skip
        return ((predictions - self.values) ** 2).mean(axis=-1) @ self.p


def _check_config(config) -> ToyConfig:
    if not isinstance(config, ToyConfig):
        raise TypeError(f"config must be a ToyConfig, got {type(config).__name__}")
    return config


def make_memory_task(config: ToyConfig, seed: int) -> MemoryTask:
    """A MemoryTask of `config`'s size with Gaussian keys and values, drawn from `seed`."""
    _check_config(config)
    rng = np.random.default_rng(validate.integer("seed", seed, minimum=0))
    p = (np.arange(1, config.n_keys + 1) + config.zipf_shift) ** -config.zipf
    keys = rng.standard_normal((config.n_keys, config.d_in))
    return MemoryTask(keys, rng.standard_normal((config.n_keys, config.d_out)), p / p.sum())


# ----------------------------------------------------------------------------- the models
@dataclass(frozen=True)
class MLPSpec:
    """One toy model: a ReLU MLP whose hidden layer is n_experts experts of width d_expert,
    top_k of them used per key. A dense MLP of width h is MLPSpec(1, 1, h) (`dense_mlp`).

    tied=True makes every expert the same weights. With gates renormalised over the chosen
    experts (they sum to 1), such a model computes sum_e g_e h(x) = h(x): exactly one expert,
    whatever the router does. The bank trains it as that one expert (its router cannot change
    the output and is left out); its FLOPs are counted as the MoE it imitates.
    """

    n_experts: int
    top_k: int
    d_expert: int
    tied: bool = False

    def __post_init__(self) -> None:
        validate.integer("n_experts", self.n_experts, minimum=1)
        validate.integer("d_expert", self.d_expert, minimum=1)
        validate.integer("top_k", self.top_k, minimum=1, maximum=self.n_experts)
        validate.boolean("tied", self.tied)
        if self.tied and self.n_experts < 2:
            raise ValueError("tied=True needs n_experts >= 2 (one expert is a dense MLP)")

    @property
    def dense(self) -> bool:
        """A plain dense MLP (one expert, not tied): the reference every EL is read against."""
        return self.n_experts == 1

    @property
    def A(self) -> float:
        """Activation ratio A = top_k / n_experts (Tian et al. 2025, Sec. 2; no shared expert)."""
        return self.top_k / self.n_experts

    @property
    def units(self) -> int:
        """Hidden units stored: n_experts * d_expert (d_expert when the experts are tied)."""
        return self.d_expert if self.tied else self.n_experts * self.d_expert

    @property
    def active(self) -> int:
        """Hidden units used per key: top_k * d_expert."""
        return self.top_k * self.d_expert

    def granularity(self, d_in: int) -> float:
        """G = 2 d_in / d_expert: the paper's 2 d_model / d_expert, input width as d_model."""
        return 2.0 * validate.integer("d_in", d_in, minimum=1) / self.d_expert

    def flops(self, d_in: int, d_out: int, router: bool = False) -> float:
        """Forward FLOPs per key: 2 top_k d_expert (d_in + d_out), + 2 d_in E with the router."""
        d_in = validate.integer("d_in", d_in, minimum=1)
        d_out = validate.integer("d_out", d_out, minimum=1)
        active = 2.0 * self.active * (d_in + d_out)
        return active + (2.0 * d_in * self.n_experts if router and not self.dense else 0.0)


def dense_mlp(width: int) -> MLPSpec:
    """A dense ReLU MLP of hidden width `width`."""
    return MLPSpec(1, 1, validate.integer("width", width, minimum=1))


def _model_seed(seed: int, spec: MLPSpec) -> np.random.SeedSequence:
    """The initialisation stream of one model: fixed by the replicate seed and the spec alone."""
    return np.random.SeedSequence([seed, spec.n_experts, spec.top_k, spec.d_expert, int(spec.tied)])


class _Bank:
    """Many independent MLPs held in one flat parameter vector and trained on the same batches.

    Model m owns hidden columns `cols[m]` of W1 (d_in, H) (dense and tied models first, then
    routed models), rows of W2 (H, d_out), its output bias b2[m] and its experts' columns of
    the router Wr (d_in, E_total). No parameter is shared, so the gradient of the summed loss
    is each model's own gradient, and Adam (elementwise) moves each model exactly as if it were
    trained alone, while one numpy call serves all models. Backprop is written out because
    torch would add ~8 s of import per worker to a chapter that must run in under a minute.
    """

    def __init__(self, specs: list[MLPSpec], d_in: int, d_out: int, seed: int, dtype=np.float32):
        self.specs, self.d_out = list(specs), d_out
        plain = [m for m, s in enumerate(specs) if s.dense or s.tied]  # no routing
        self.moe = [m for m, s in enumerate(specs) if not (s.dense or s.tied)]
        self.cols, self.experts, col, first = {}, {}, 0, 0
        for m in plain + self.moe:  # hidden units: plain models first, then routed ones
            self.cols[m], col = slice(col, col + specs[m].units), col + specs[m].units
        for m in self.moe:  # router columns of each routed model
            n = specs[m].n_experts
            self.experts[m], first = slice(first, first + n), first + n
        self.h_dense = sum(specs[m].units for m in plain)
        # per-expert constants of the routed block, experts in the order of self.moe
        n_experts = np.array([specs[m].n_experts for m in self.moe], dtype=int)
        top_k = np.array([specs[m].top_k for m in self.moe], dtype=int)
        self.group_n, self.group_start = n_experts, np.cumsum(n_experts) - n_experts
        self.expert_n, self.expert_k = np.repeat(n_experts, n_experts), np.repeat(top_k, n_experts)
        self.expert_width = np.repeat([specs[m].d_expert for m in self.moe], n_experts).astype(int)
        self.unit_start = np.cumsum(self.expert_width) - self.expert_width
        self.sort_key = np.repeat(np.arange(len(self.moe)), n_experts) * 1e6  # keeps models apart
        self.kth = np.cumsum(n_experts) - top_k  # sorted column of each model's k-th largest
        self._init_params(d_in, col, first, seed, dtype)

    def _init_params(self, d_in: int, H: int, E: int, seed: int, dtype) -> None:
        """Views into one flat vector. Each model draws its He-init W1 columns and N(0, 1/d_in)
        router from its own stream (`_model_seed`), so it starts as it would alone; W2 = 0."""
        shapes = {"W1": (d_in, H), "b1": (H,), "W2": (H, self.d_out),
                  "b2": (len(self.specs), self.d_out), "Wr": (d_in, E)}  # fmt: skip
        self.theta = np.zeros(sum(math.prod(s) for s in shapes.values()), dtype)
        self.grad = np.zeros_like(self.theta)
        self.p, self.g, start = {}, {}, 0
        for name, shape in shapes.items():
            stop = start + math.prod(shape)
            self.p[name] = self.theta[start:stop].reshape(shape)
            self.g[name] = self.grad[start:stop].reshape(shape)
            start = stop
        w1_scale, wr_scale = math.sqrt(2 / d_in), 1 / math.sqrt(d_in)
        for m, s in enumerate(self.specs):
            rng = np.random.default_rng(_model_seed(seed, s))
            self.p["W1"][:, self.cols[m]] = w1_scale * rng.standard_normal((d_in, s.units))
            if m in self.experts:
                self.p["Wr"][:, self.experts[m]] = wr_scale * rng.standard_normal(
                    (d_in, s.n_experts)
                )

    def _group(self, x: np.ndarray) -> np.ndarray:
        """Sum of x (B, E_total) over each routed model's experts, repeated back to (B, E_total)."""
        return np.repeat(np.add.reduceat(x, self.group_start, axis=1), self.group_n, axis=1)

    def _route(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Top-k routing of every routed model: softmax probabilities p, chosen mask and gates
        w = p / (sum of chosen p) on the chosen experts (renormalised, as in Mixtral); (B, E)."""
        logits = X @ self.p["Wr"]
        peak = np.maximum.reduceat(logits, self.group_start, axis=1)
        z = np.exp(logits - np.repeat(peak, self.group_n, axis=1))
        probs = z / self._group(z)
        key = logits + self.sort_key  # float64: each model's experts sort as one block
        kth = np.sort(key, axis=1)[:, self.kth]  # (B, n_models)
        chosen = key >= np.repeat(kth, self.group_n, axis=1)  # the top_k logits of each model
        gates = np.where(chosen, probs, 0.0)
        return probs, chosen, gates / self._group(gates)

    def forward(self, X: np.ndarray) -> dict:
        """Pre-activations Z and gated activations S (B, H), outputs (M, B, d_out), routes and
        the ungated activations of the routed block."""
        Z = X @ self.p["W1"]
        Z += self.p["b1"]
        S = np.maximum(Z, 0.0)
        f = {"Z": Z, "S": S}
        if self.moe:
            f["routes"] = self._route(X)
            f["ungated"] = S[:, self.h_dense :].copy()
            S[:, self.h_dense :] *= np.repeat(f["routes"][2], self.expert_width, axis=1)
        W2 = self.p["W2"]
        outs = [S[:, c] @ W2[c] for c in (self.cols[m] for m in range(len(self.specs)))]
        f["out"] = np.stack(outs) + self.p["b2"][:, None]
        return f

    def backward(self, X: np.ndarray, Y: np.ndarray, balance: float) -> np.ndarray:
        """Fill self.grad with the gradient of sum_m (L_m + balance loss_m); return L_m (M,)."""
        f = self.forward(X)
        B, W2, G = len(X), self.p["W2"], self.g
        resid = f["out"] - Y  # (M, B, d_out)
        d_out = resid * (2.0 / (B * self.d_out))
        G["b2"][:] = d_out.sum(axis=1)
        dZ = np.empty_like(f["S"])  # dS first, then dZ in place
        for m, c in self.cols.items():
            G["W2"][c] = f["S"][:, c].T @ d_out[m]
            np.matmul(d_out[m], W2[c].T, out=dZ[:, c])
        if self.moe:
            dS_moe = dZ[:, self.h_dense :]
            G["Wr"][:] = X.T @ self._router_grad(f, dS_moe, balance)
            dS_moe *= np.repeat(f["routes"][2], self.expert_width, axis=1)
        dZ *= f["Z"] > 0
        G["W1"][:] = X.T @ dZ
        G["b1"][:] = dZ.sum(axis=0)
        return (resid**2).mean(axis=(1, 2))

    def _router_grad(self, f: dict, dS: np.ndarray, balance: float) -> np.ndarray:
        """d(loss)/d(router logits) (B, E_total) from dS (B, H_moe): gates and balance loss."""
        probs, chosen, w = f["routes"]
        d_w = np.add.reduceat(dS * f["ungated"], self.unit_start, axis=1)  # (B, E_total)
        wd = w * d_w
        d_logits = wd - w * self._group(wd)  # softmax over the chosen experts
        # Switch balance loss coef * E * sum_i f_i P_i (Fedus et al. 2022, Eq. 4), f_i fixed
        d_p = balance * self.expert_n * chosen.mean(axis=0) / self.expert_k / len(probs)
        pd = probs * d_p
        return d_logits + pd - probs * self._group(pd)

    def exact_loss(self, task: MemoryTask) -> np.ndarray:
        """Exact loss of every model (M,) over all keys."""
        return task.loss_of(self.forward(task.keys.astype(self.theta.dtype))["out"])

    def load_entropy(self, task: MemoryTask) -> np.ndarray:
        """Entropy of the p-weighted expert load / log E of every model (NaN unless routed)."""
        out = np.full(len(self.specs), np.nan)
        if self.moe:
            chosen = self._route(task.keys.astype(self.theta.dtype))[1]
            load = task.p @ chosen / self.expert_k  # (E_total,), sums to 1 per model
            plogp = np.where(load > 0, load * np.log(np.where(load > 0, load, 1.0)), 0.0)
            out[self.moe] = -np.add.reduceat(plogp, self.group_start) / np.log(self.group_n)
        return out


# ----------------------------------------------------------------------------- training
@dataclass(frozen=True)
class BankResult:
    """Exact loss (n_budgets, n_models) at the end of each budget, and the routing-load
    entropy / log E of every routed model (1 = perfectly balanced; NaN for the others)."""

    specs: tuple[MLPSpec, ...]
    budgets: tuple[int, ...]
    loss: np.ndarray
    load_entropy: np.ndarray


def wsd_lr(step: int, total: int, config: ToyConfig) -> float:
    """Learning rate at `step` (0-based) of a run of `total` steps (warmup-stable-decay)."""
    total = validate.integer("total", total, minimum=1)
    validate.integer("step", step, minimum=0, maximum=total - 1)
    _check_config(config)
    n_decay = max(1, round(config.decay_frac * total))
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    return config.lr * min(1.0, (total - step) / n_decay)


class _Adam:
    """Adam on a flat parameter vector (Kingma & Ba 2015), betas (0.9, 0.99), no decay."""

    def __init__(self, theta: np.ndarray):
        self.theta, self.m, self.v, self.t = theta, np.zeros_like(theta), np.zeros_like(theta), 0

    def step(self, grad: np.ndarray, lr: float, b1: float = 0.9, b2: float = 0.99) -> None:
        self.t += 1
        self.m *= b1
        self.m += (1 - b1) * grad
        self.v *= b2
        self.v += (1 - b2) * grad * grad
        m_hat = self.m / (1 - b1**self.t)
        self.theta -= lr * m_hat / (np.sqrt(self.v / (1 - b2**self.t)) + 1e-8)

    def state(self) -> tuple:
        return self.theta.copy(), self.m.copy(), self.v.copy(), self.t

    def restore(self, state: tuple) -> None:
        self.theta[:], self.m[:], self.v[:], self.t = state[0], state[1], state[2], state[3]


def _check_specs(specs) -> list[MLPSpec]:
    if isinstance(specs, MLPSpec) or not all(isinstance(s, MLPSpec) for s in specs) or not specs:
        raise TypeError("specs must be a non-empty list of MLPSpec (see dense_mlp, MLPSpec)")
    return list(specs)


def train_bank(task: MemoryTask, specs, budgets, config: ToyConfig, seed: int) -> BankResult:
    """Train every model of `specs` on the same batches, once for each step budget.

    One warmup-stable run serves all budgets: each budget branches off at its decay start and
    decays to 0 (WSD branches, Hagele et al. 2024), so budgets 250, 500, 1000 cost 1000 +
    0.2 (250 + 500) steps, and each branch equals a run trained alone to that budget. The batch
    order depends on `seed` only (its first steps are the same for any longest budget), and
    each model's initialisation on `seed` and its spec, so any grouping of models gives the
    same losses.
    """
    specs = _check_specs(specs)
    budgets = sorted(validate.integer("budgets[i]", b, minimum=1) for b in budgets)
    _check_config(config)
    if not isinstance(task, MemoryTask) or task.keys.shape[1] != config.d_in:
        raise TypeError(f"task must be a MemoryTask of config's size (make_memory_task), "
                        f"got {type(task).__name__}")  # fmt: skip
    init, data = np.random.SeedSequence(validate.integer("seed", seed, minimum=0)).spawn(2)
    bank = _Bank(specs, config.d_in, config.d_out, int(init.generate_state(1)[0]))
    idx = np.random.default_rng(data).choice(len(task.p), (budgets[-1], config.batch), p=task.p)
    keys, values = task.keys.astype(bank.theta.dtype), task.values.astype(bank.theta.dtype)
    adam, done, loss, entropy = _Adam(bank.theta), 0, [], []
    for total in budgets:
        start = total - max(1, round(config.decay_frac * total))
        if start < config.warmup:
            raise ValueError(f"budget {total} would decay before warmup={config.warmup} ends")
        for step in range(done, total):  # the shared trunk up to `start`, then this branch
            bank.backward(keys[idx[step]], values[idx[step]], config.balance)
            adam.step(bank.grad, wsd_lr(step, total, config))
            if step + 1 == start:
                trunk = adam.state()
        loss.append(bank.exact_loss(task))
        entropy.append(bank.load_entropy(task))
        adam.restore(trunk)
        done = start
    return BankResult(tuple(specs), tuple(budgets), np.array(loss), np.array(entropy))


def run_toy_group(config: ToyConfig, specs, budgets, seed: int) -> BankResult:
    """Train one group of models of a replicate: draw the task, the initialisations and the
    batch order from `seed`, then train `specs` to every budget (a job for `run_jobs`).

    Every group of the same replicate (same seed) sees the same task and the same batches.
    """
    seq = np.random.SeedSequence(validate.integer("seed", seed, minimum=0))
    task_seed, train_seed = (int(s.generate_state(1)[0]) for s in seq.spawn(2))
    task = make_memory_task(config, task_seed)
    return train_bank(task, specs, budgets, config, train_seed)


# ----------------------------------------------------------------------------- the table
def toy_table(results: Sequence[BankResult], config: ToyConfig):
    """One replicate's results as a long table: one row per (model, budget).

    Columns: E, k, d_expert, tied, dense, A, G, active (units per key), M (training FLOPs per
    key: 3 x forward, router excluded as in the paper), M_router (router included), budget
    (steps), D (keys seen), C = M D, loss, entropy. A model trained in two groups to the same
    budget gives identical rows; one is kept.
    """
    import pandas as pd  # local import keeps `import lib.moe_toy` light

    _check_config(config)
    if not results or not all(isinstance(r, BankResult) for r in results):
        raise TypeError("results must be a non-empty list of BankResult (from run_toy_group)")
    rows = []
    for result in results:
        for m, s in enumerate(result.specs):
            M = 3 * s.flops(config.d_in, config.d_out)
            M_router = 3 * s.flops(config.d_in, config.d_out, router=True)
            for b, budget in enumerate(result.budgets):
                D = float(budget * config.batch)
                rows.append({
                    "E": s.n_experts, "k": s.top_k, "d_expert": s.d_expert, "tied": s.tied,
                    "dense": s.dense, "A": s.A, "G": s.granularity(config.d_in),
                    "active": s.active, "M": M, "M_router": M_router, "budget": budget,
                    "D": D, "C": M * D, "loss": float(result.loss[b, m]),
                    "entropy": float(result.load_entropy[b, m]),
                })  # fmt: skip
    keys = ["E", "k", "d_expert", "tied", "budget"]
    return pd.DataFrame(rows).drop_duplicates(keys).reset_index(drop=True)


def toy_leverage(table):
    """EL at a fixed token budget: every non-dense row against the dense rows of its budget.

    table: `toy_table` output. EL = C_dense(L) / C with C_dense(L) interpolated on the dense
    ladder of the same budget (`efficiency_leverage`); EL_router counts the router's FLOPs.
    Returns the non-dense rows with EL, EL_router and in_range added.
    """
    import pandas as pd

    missing = {"dense", "budget", "C", "M", "M_router", "D", "loss"} - set(table.columns)
    if missing:
        raise ValueError(f"table lacks columns {sorted(missing)}; pass toy_table(...)")
    out = []
    for _, g in table.groupby("budget"):
        dense, moe = g[g.dense], g[~g.dense].copy()
        if len(dense) < 2 or moe.empty:
            continue
        lev = efficiency_leverage(dense.C, dense.loss, moe.C, moe.loss)
        lev_r = efficiency_leverage(dense.C, dense.loss, moe.M_router * moe.D, moe.loss)
        moe["EL"], moe["EL_router"], moe["in_range"] = lev.EL, lev_r.EL, lev.in_range
        out.append(moe)
    if not out:
        raise ValueError("no budget has both a dense ladder (>= 2 models) and another model")
    return pd.concat(out, ignore_index=True)


def ladder(A: float, top_k: Sequence[int], d_expert: int = 4) -> list[MLPSpec]:
    """A size ladder at fixed activation ratio A and expert width: top_k experts of d_expert
    units active out of top_k / A (the toy's way to grow a model at fixed A and G)."""
    A = validate.real("A", A, low=0, low_open=True, high=1)
    specs = []
    for k in top_k:
        k = validate.integer("top_k[i]", k, minimum=1)
        E = k / A
        if abs(E - round(E)) > 1e-9:
            raise ValueError(f"top_k={k} / A={A} = {E} experts is not a whole number")
        specs.append(MLPSpec(round(E), k, d_expert))
    return specs


def frontier_leverage(table, A_values: Sequence[float], C_unit: float, d_expert: int = 4):
    """EL along the compute-optimal frontier, for the routed ladders at each A of A_values.

    table: one replicate's `toy_table`. The dense frontier comes from the dense rows, each
    ladder's from its routed rows (expert width d_expert, not tied), both by
    `isoflop_frontier` with the active units per key as the size. EL = C_dense(L*) / C at
    every frontier point of a ladder, read on the interior points of the dense frontier
    (NaN when the ladder's point is not interior or its loss is outside the dense frontier).
    Returns a DataFrame: A, level = log2(C / C_unit), C, L, N_opt, interior, EL, in_range.
    """
    import pandas as pd

    C_unit = validate.real("C_unit", C_unit, low=0, low_open=True)
    dense = table[table.dense]
    front = isoflop_frontier(dense.C, dense.active, dense.loss)
    front = front[front.interior]
    rows = []
    for A in A_values:
        runs = table[~table.dense & ~table.tied & (table.d_expert == d_expert)
                     & np.isclose(table.A, A)]  # fmt: skip
        if len(runs) < 3:
            raise ValueError(f"table has {len(runs)} routed runs at A={A}; need a ladder")
        moe = isoflop_frontier(runs.C, runs.active, runs.loss).assign(A=A)
        lev = efficiency_leverage(front.C, front.L, moe.C, moe.L)
        ok = lev.in_range & moe.interior.to_numpy()
        rows.append(moe.assign(EL=np.where(ok, lev.EL, np.nan), in_range=lev.in_range))
    out = pd.concat(rows, ignore_index=True)
    out["level"] = np.round(np.log2(out.C / C_unit), 6)
    return out[["A", "level", "C", "L", "N_opt", "interior", "EL", "in_range"]]
