"""Train the toy LM of `lib.lm`: batching, learning-rate schedules, AdamW, evaluation.

Used by chapters 2, 6, 7, 11 and 12. `train()` is bit-for-bit deterministic on CPU for a fixed
seed: the model is initialised under a forked, seeded torch RNG and batches are drawn from an
explicit `torch.Generator`, so the global RNG is neither read nor changed.

Weight decay (default grouping): every parameter with >= 2 dimensions (linear weights, expert
weights, router, token and position embeddings) is decayed; RMSNorm gains are not. AdamW's
decay is decoupled and multiplied by the scheduled lr (Loshchilov & Hutter 2019), so the EMA
timescale is 1 / (lr * weight_decay) steps. Pass `param_groups=` to override (per-layer lr or
decay, e.g. muP-style); every group's lr follows the same schedule shape.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib import validate
from lib.lm import LMConfig, ParamCounts, TransformerLM, count_params, flops_per_token

SCHEDULES = ("constant", "cosine", "linear", "wsd")
Tokens = np.ndarray | Tensor  # a token stream (L,) or a stack of streams (R, L)
BatchFn = Callable[[int, torch.Generator], tuple[Tensor, Tensor]]  # (step, gen) -> x, y (B, S)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings. lr is the peak rate; schedules decay to lr * min_lr_ratio.

    schedule: 'constant' | 'cosine' | 'linear' (decay over all post-warmup steps) | 'wsd'
    (warmup-stable-decay: constant, then a linear decay over the last decay_frac of steps).
    grad_clip = 0 disables clipping. eval_every = 0 evaluates only at the end. data_seed
    (default: seed) fixes the batch order independently of the initialisation seed.
    """

    steps: int
    batch_size: int
    seq_len: int
    lr: float
    weight_decay: float = 0.1
    warmup_steps: int = 0
    schedule: str = "cosine"
    decay_frac: float = 0.2
    min_lr_ratio: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0
    data_seed: int | None = None
    eval_every: int = 0
    eval_windows: int = 64
    betas: tuple[float, float] = (0.9, 0.95)

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "seq_len", "eval_windows"):
            validate.integer(name, getattr(self, name), minimum=1)
        for name in ("warmup_steps", "eval_every", "seed"):
            validate.integer(name, getattr(self, name), minimum=0)
        if self.data_seed is not None:
            validate.integer("data_seed", self.data_seed, minimum=0)
        if self.warmup_steps > self.steps:
            raise ValueError(f"warmup_steps={self.warmup_steps} must be <= steps={self.steps}")
        validate.real("lr", self.lr, low=0.0, low_open=True)
        for name in ("weight_decay", "grad_clip"):
            validate.real(name, getattr(self, name), low=0.0)
        validate.choice("schedule", self.schedule, SCHEDULES)
        validate.real("decay_frac", self.decay_frac, low=0.0, high=1.0, low_open=True)
        validate.probability("min_lr_ratio", self.min_lr_ratio)
        if not isinstance(self.betas, tuple | list) or len(self.betas) != 2:
            raise TypeError(f"betas must be a pair of numbers in [0, 1), got {self.betas!r}")
        for i, b in enumerate(self.betas):
            validate.real(f"betas[{i}]", b, low=0.0, high=1.0, high_open=True)

    @property
    def tokens(self) -> int:
        """Training tokens D = steps * batch_size * seq_len."""
        return self.steps * self.batch_size * self.seq_len


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate used at `step` (0-based): linear warmup to cfg.lr, then the schedule.

    Warmup: lr * (step + 1) / warmup_steps. After it, with progress t = (step - w + 1)/(T - w)
    (so the last step reaches the floor m = lr * min_lr_ratio): cosine m + (lr - m)(1 +
    cos(pi t))/2; linear lr - (lr - m) t; wsd lr until the last round(decay_frac T) steps, then
    linear to m over them; constant lr.
    """
    if not isinstance(cfg, TrainConfig):
        raise ValueError(f"cfg={cfg!r} must be a TrainConfig")
    if not isinstance(step, (int, np.integer)) or not 0 <= step < cfg.steps:
        raise ValueError(f"step={step!r} must be an integer in [0, {cfg.steps})")
    T, w, peak = cfg.steps, cfg.warmup_steps, cfg.lr
    floor = peak * cfg.min_lr_ratio
    if step < w:
        return peak * (step + 1) / w
    if cfg.schedule == "constant":
        return peak
    if cfg.schedule == "wsd":
        n_decay = max(1, round(cfg.decay_frac * T))
        start = max(w, T - n_decay)
        if step < start:
            return peak
        return peak - (peak - floor) * (step - start + 1) / (T - start)
    t = (step - w + 1) / (T - w)
    if cfg.schedule == "cosine":
        return floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * t))
    return peak - (peak - floor) * t  # linear


def as_token_tensor(
    tokens: np.ndarray | Tensor, vocab_size: int, min_len: int, name: str = "tokens"
) -> Tensor:
    """Validate a token stream (L,) or a stack of streams (R, L) and return it as int64."""
    if isinstance(tokens, np.ndarray) and not tokens.flags.writeable:
        tokens = tokens.copy()  # a read-only array (lib.runs hands large ones to workers as
        # read-only memory maps) cannot back a tensor: torch warned and shared it anyway
    t = torch.as_tensor(tokens)
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.dtype.is_complex:
        raise ValueError(f"{name} must hold integer token ids, got dtype {t.dtype}")
    if t.dim() not in (1, 2) or t.shape[-1] < min_len or t.numel() == 0:
        raise ValueError(
            f"{name} must have shape (L,) or (R, L) with L >= {min_len}, got {tuple(t.shape)}"
        )
    if int(t.min()) < 0 or int(t.max()) >= vocab_size:
        raise ValueError(
            f"{name} has ids outside [0, {vocab_size}): min {int(t.min())}, max {int(t.max())}"
        )
    return t.long().reshape(-1, t.shape[-1])  # (R, L)


def get_batch(
    tokens: Tensor, batch_size: int, seq_len: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Draw batch_size random windows: x, y of shape (B, S) with y = x shifted by one.

    tokens: (L,) or (R, L) int64; each window picks a row and an offset uniformly.
    """
    if batch_size <= 0 or seq_len <= 0:
        raise ValueError(f"batch_size={batch_size} and seq_len={seq_len} must be positive")
    t = tokens.reshape(-1, tokens.shape[-1])  # (R, L)
    R, L = t.shape
    if L < seq_len + 1:
        raise ValueError(f"tokens rows have length {L}; need >= seq_len + 1 = {seq_len + 1}")
    row = torch.randint(R, (batch_size, 1), generator=generator)
    start = torch.randint(L - seq_len, (batch_size, 1), generator=generator)
    w = t[row.to(t.device), (start + torch.arange(seq_len + 1)).to(t.device)]  # (B, S+1)
    return w[:, :-1], w[:, 1:]


def eval_windows(tokens: Tensor, seq_len: int, max_windows: int) -> Tensor:
    """Deterministic evaluation windows (n, S+1): non-overlapping, evenly subsampled to <= max."""
    t = tokens.reshape(-1, tokens.shape[-1])
    n_per_row = t.shape[1] // (seq_len + 1)
    if n_per_row == 0:
        raise ValueError(f"tokens rows have length {t.shape[1]}; need >= seq_len + 1")
    w = t[:, : n_per_row * (seq_len + 1)].reshape(-1, seq_len + 1)
    if len(w) > max_windows:
        w = w[torch.from_numpy(np.linspace(0, len(w) - 1, max_windows).round().astype(np.int64))]
    return w


@torch.no_grad()
def token_nll(model: TransformerLM, windows: Tensor, batch_size: int = 64) -> Tensor:
    """Per-token negative log-likelihood in nats, (n, S), of windows (n, S+1) of token ids."""
    if windows.dim() != 2 or windows.shape[1] < 2:
        raise ValueError(
            f"windows must have shape (n, S+1) with S >= 1, got {tuple(windows.shape)}"
        )
    if batch_size <= 0:
        raise ValueError(f"batch_size={batch_size} must be positive")
    was_training = model.training
    model.eval()
    out = []
    for w in windows.split(batch_size):
        logits, _ = model(w[:, :-1])  # (b, S, V)
        out.append(F.cross_entropy(logits.transpose(1, 2), w[:, 1:], reduction="none"))
    model.train(was_training)
    return torch.cat(out)


def evaluate(
    model: TransformerLM, tokens: np.ndarray | Tensor, seq_len: int, max_windows: int = 64
) -> float:
    """Mean next-token loss (nats/token) on deterministic windows of `tokens` (L,) or (R, L)."""
    if not isinstance(seq_len, int) or seq_len <= 0 or seq_len > model.cfg.max_seq_len:
        raise ValueError(f"seq_len={seq_len!r} must be in [1, {model.cfg.max_seq_len}]")
    if not isinstance(max_windows, int) or max_windows <= 0:
        raise ValueError(f"max_windows={max_windows!r} must be a positive integer")
    device = next(model.parameters()).device
    t = as_token_tensor(tokens, model.cfg.vocab_size, seq_len + 1).to(device)
    return float(token_nll(model, eval_windows(t, seq_len, max_windows)).mean())


def default_param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups: decay every tensor with >= 2 dims, none for 1-d tensors (norm gains)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


@dataclass(frozen=True)
class TrainResult:
    """What a run produced. Losses in nats/token; flops = 3 * forward FLOPs/token * tokens."""

    train_loss: np.ndarray  # (steps,) cross-entropy of each training batch
    aux_loss: np.ndarray  # (steps,) MoE balance loss (zeros for dense models)
    lr: np.ndarray  # (steps,) peak-group learning rate used at each step
    eval_steps: np.ndarray  # (n_eval,) completed steps at each evaluation
    eval_loss: np.ndarray  # (n_eval,) loss on the (first) validation set; empty without one
    eval_losses: dict[str, np.ndarray]  # name -> (n_eval,) losses, one entry per validation set
    tokens_seen: int
    params: ParamCounts
    flops: float
    wall_s: float  # whole run, evaluations included
    tokens_per_s: float  # training steps only
    model: TransformerLM  # trained, in eval mode, on the training device


def build_model(
    model_cfg: LMConfig, seed: int, device: str | torch.device = "cpu"
) -> TransformerLM:
    """TransformerLM(model_cfg) initialised from `seed` without touching the global torch RNG."""
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed={seed!r} must be an integer >= 0")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TransformerLM(model_cfg)
    return model.to(device)


def _make_optimizer(
    model: nn.Module,
    cfg: TrainConfig,
    param_groups: Callable[[nn.Module], list[dict]] | None,
    device: torch.device,
) -> torch.optim.AdamW:
    groups = (
        default_param_groups(model, cfg.weight_decay)
        if param_groups is None
        else param_groups(model)
    )
    if not isinstance(groups, list) or not all(
        isinstance(g, dict) and "params" in g for g in groups
    ):
        raise ValueError("param_groups must return a list of dicts with a 'params' entry")
    groups = [g for g in groups if len(list(g["params"])) > 0]
    # fused AdamW: one kernel for all tensors; same arithmetic, much less Python per step
    opt = torch.optim.AdamW(
        groups,
        lr=cfg.lr,
        betas=cfg.betas,
        weight_decay=cfg.weight_decay,
        fused=device.type in ("cpu", "cuda"),
    )
    for g in opt.param_groups:
        g["base_lr"] = g["lr"]  # the schedule scales every group's own peak rate
    return opt


def train(
    model_cfg: LMConfig,
    train_cfg: TrainConfig,
    train_tokens: np.ndarray | Tensor | None,
    val_tokens: Tokens | Mapping[str, Tokens] | None = None,
    device: str | torch.device = "cpu",
    param_groups: Callable[[nn.Module], list[dict]] | None = None,
    init_state: dict | None = None,
    batch_fn: BatchFn | None = None,
    callback: Callable[[int, TransformerLM], None] | None = None,
) -> TrainResult:
    """Train TransformerLM(model_cfg) with AdamW on random windows of train_tokens (L,)/(R, L).

    Loss = next-token cross-entropy + MoE balance loss. Evaluates on val_tokens (one stream, or
    a dict of named streams) every eval_every steps and at the end. init_state (a state_dict)
    starts from a checkpoint. batch_fn(step, generator) -> (x, y), both (B, S), replaces the
    random windows (pass train_tokens=None then); callback(steps_done, model) runs after every
    step, e.g. to record an exact population loss (its time counts as evaluation time).
    """
    if not isinstance(model_cfg, LMConfig):
        raise TypeError(f"model_cfg must be an LMConfig, got {type(model_cfg).__name__}")
    if not isinstance(train_cfg, TrainConfig):
        raise TypeError(f"train_cfg must be a TrainConfig, got {type(train_cfg).__name__}")
    if not isinstance(device, torch.device):
        validate.choice("device", device, ("cpu", "cuda"))
    if train_cfg.seq_len > model_cfg.max_seq_len:
        raise ValueError(f"seq_len={train_cfg.seq_len} exceeds max_seq_len={model_cfg.max_seq_len}")
    if (train_tokens is None) == (batch_fn is None):
        raise ValueError("pass exactly one of train_tokens and batch_fn (the other as None)")
    device = torch.device(device)
    S, V = train_cfg.seq_len, model_cfg.vocab_size
    if batch_fn is None:
        data = as_token_tensor(train_tokens, V, S + 1, "train_tokens").to(device)

        def batch_fn(step: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
            return get_batch(data, train_cfg.batch_size, S, gen)

    named = val_tokens if isinstance(val_tokens, Mapping) else {"val": val_tokens}
    val = {
        name: eval_windows(
            as_token_tensor(v, V, S + 1, f"val_tokens[{name!r}]"), S, train_cfg.eval_windows
        ).to(device)
        for name, v in named.items()
        if v is not None
    }
    model = build_model(model_cfg, train_cfg.seed, device)
    if init_state is not None:
        model.load_state_dict(init_state)
    opt = _make_optimizer(model, train_cfg, param_groups, device)
    seed = train_cfg.seed if train_cfg.data_seed is None else train_cfg.data_seed
    gen = torch.Generator().manual_seed(seed)
    lrs = np.array([lr_at(s, train_cfg) for s in range(train_cfg.steps)])
    losses, auxes, evals = _run(
        model, opt, train_cfg, batch_fn, val, gen, lrs / train_cfg.lr, callback
    )
    model.eval()
    n_tok = train_cfg.tokens
    eval_losses = {name: np.array([e[name] for _, e in evals[0]]) for name in val}
    return TrainResult(
        train_loss=losses,
        aux_loss=auxes,
        lr=lrs,
        eval_steps=np.array([s for s, _ in evals[0]], dtype=np.int64),
        eval_loss=next(iter(eval_losses.values()), np.empty(0)),
        eval_losses=eval_losses,
        tokens_seen=n_tok,
        params=count_params(model_cfg),
        flops=3 * flops_per_token(model_cfg, S) * n_tok,
        wall_s=evals[1],
        tokens_per_s=n_tok / evals[2],
        model=model,
    )


def _run(
    model: TransformerLM,
    opt: torch.optim.AdamW,
    cfg: TrainConfig,
    batch_fn: BatchFn,
    val: dict[str, Tensor],
    gen: torch.Generator,
    scale: np.ndarray,
    callback: Callable[[int, TransformerLM], None] | None,
) -> tuple[np.ndarray, np.ndarray, tuple[list, float, float]]:
    """The hot loop. Returns per-step losses, aux losses and (evals, wall_s, train_s)."""
    model.train()
    params = [p for g in opt.param_groups for p in g["params"]]
    losses = torch.empty(cfg.steps)
    auxes = torch.empty(cfg.steps)
    evals, eval_s, t0 = [], 0.0, time.perf_counter()
    for step in range(cfg.steps):
        x, y = batch_fn(step, gen)  # (B, S) each
        for g in opt.param_groups:
            g["lr"] = g["base_lr"] * scale[step]
        logits, aux = model(x)  # (B, S, V)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1))
        (loss + aux).backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses[step], auxes[step] = loss.detach(), aux.detach()
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"training diverged: the loss is {loss.item()} at step {step} (lr "
                f"{cfg.lr * scale[step]:.3g}); lower lr, raise warmup_steps or clip gradients"
            )
        done = step + 1
        due = done == cfg.steps or (cfg.eval_every > 0 and done % cfg.eval_every == 0)
        te = time.perf_counter()
        if val and due:
            evals.append((done, {k: float(token_nll(model, w).mean()) for k, w in val.items()}))
        if callback is not None:
            callback(done, model)
            model.train()  # a callback may have switched to eval mode
        eval_s += time.perf_counter() - te
    wall = time.perf_counter() - t0
    return (
        losses.numpy().astype(np.float64),
        auxes.numpy().astype(np.float64),
        (evals, wall, max(wall - eval_s, 1e-9)),
    )
