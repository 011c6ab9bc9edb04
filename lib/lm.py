"""A small decoder-only transformer language model with exact parameter and FLOP accounting.

LLaMA-style blocks: RMSNorm, grouped-query attention through
`torch.nn.functional.scaled_dot_product_attention`, a SwiGLU MLP or a top-k routed
mixture-of-experts (MoE) MLP with a Switch-style load-balancing loss, learned absolute
positions, and a KV cache for incremental decoding. Token embeddings are TIED to the output
layer (as in GPT-2/nanoGPT): at toy scale an untied head would double the embedding share of N.

Used by chapters 2 (MoE efficiency leverage), 6 (loss-curve collapse), 7 (downstream
prediction), 11 (inference-efficient architectures) and 12 (multilingual transfer).

Accounting conventions (Kaplan et al. 2020; Hoffmann et al. 2022, App. F):
- `embedding` = token table V*d + position table T*d; everything else is `non_embedding`.
- forward FLOPs/token = 2 * (active matmul weights, incl. the tied logits matmul d*V)
  + 4 * n_layers * seq_len * n_heads * d_head (attention scores QK^T and weighted sum AV,
  full square as in Chinchilla, not halved for the causal mask). Norms, softmax, SwiGLU
  gating and the router are not counted unless `include_router=True` (router: 2*d*E).
- training FLOPs = 3 x forward (backward = 2 x forward).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib import validate

NORM_EPS = 1e-6  # RMSNorm epsilon


def _require_positive_int(name: str, value: object) -> None:
    validate.integer(name, value, minimum=1)


@dataclass(frozen=True)
class MoEConfig:
    """Fine-grained MoE MLP: `n_experts` SwiGLU experts of width `d_expert`, `top_k` active.

    Granularity G = d_ff / d_expert (d_ff of the dense model it replaces); activation ratio
    A = (top_k + n_shared) / (n_experts + n_shared). `n_shared` experts are always active.
    `balance_coef` multiplies the Switch load-balancing loss (Fedus et al. 2022, Eq. 4).
    """

    n_experts: int
    top_k: int
    d_expert: int
    balance_coef: float = 0.01
    n_shared: int = 0

    def __post_init__(self) -> None:
        _require_positive_int("n_experts", self.n_experts)
        _require_positive_int("top_k", self.top_k)
        _require_positive_int("d_expert", self.d_expert)
        if self.top_k > self.n_experts:
            raise ValueError(f"top_k={self.top_k} must be <= n_experts={self.n_experts}")
        validate.real("balance_coef", self.balance_coef, low=0.0)
        validate.integer("n_shared", self.n_shared, minimum=0)

    @property
    def activation_ratio(self) -> float:
        """A = active experts / total experts (shared experts count in both)."""
        return (self.top_k + self.n_shared) / (self.n_experts + self.n_shared)


@dataclass(frozen=True)
class LMConfig:
    """Shape of the LM. `d_head` defaults to d_model // n_heads; set it to decouple the two."""

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    max_seq_len: int
    moe: MoEConfig | None = None
    d_head: int | None = None

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "d_model",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "d_ff",
            "max_seq_len",
        ):
            _require_positive_int(name, getattr(self, name))
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads={self.n_kv_heads} must divide n_heads={self.n_heads}")
        if self.d_head is None and self.d_model % self.n_heads:
            raise ValueError(
                f"n_heads={self.n_heads} must divide d_model={self.d_model} "
                "(or pass d_head explicitly)"
            )
        if self.d_head is not None:
            _require_positive_int("d_head", self.d_head)
        if self.moe is not None and not isinstance(self.moe, MoEConfig):
            raise ValueError(f"moe={self.moe!r} must be a MoEConfig or None")

    @property
    def head_dim(self) -> int:
        """Per-head width d_h."""
        return self.d_head if self.d_head is not None else self.d_model // self.n_heads

    @property
    def granularity(self) -> float:
        """Expert granularity G = d_ff / d_expert (1.0 for a dense model)."""
        return 1.0 if self.moe is None else self.d_ff / self.moe.d_expert


def d_ff_from_ratio(d_model: int, mlp_ratio: float, multiple_of: int = 1) -> int:
    """Hidden width of the SwiGLU MLP: round(mlp_ratio * d_model) up to a multiple."""
    _require_positive_int("d_model", d_model)
    _require_positive_int("multiple_of", multiple_of)
    validate.real("mlp_ratio", mlp_ratio, low=0.0, low_open=True)
    d_ff = max(1, round(mlp_ratio * d_model))
    return multiple_of * math.ceil(d_ff / multiple_of)


# ----------------------------------------------------------------------------- accounting


@dataclass(frozen=True)
class ParamCounts:
    """Exact parameter counts. non_embedding = attention + mlp + router + norm.

    `mlp` counts every expert; `active_mlp` only the top_k routed + shared experts per token;
    `active_non_embedding` = attention + active_mlp + norm (router excluded, counted in `router`).
    """

    total: int
    embedding: int
    non_embedding: int
    attention: int
    mlp: int
    router: int
    norm: int
    active_mlp: int
    active_non_embedding: int


def count_params(cfg: LMConfig) -> ParamCounts:
    """Count the parameters of `TransformerLM(cfg)` analytically (no biases; tied embeddings)."""
    if not isinstance(cfg, LMConfig):
        raise ValueError(f"cfg={cfg!r} must be an LMConfig")
    d, L, dh = cfg.d_model, cfg.n_layers, cfg.head_dim
    embedding = cfg.vocab_size * d + cfg.max_seq_len * d
    # Wq, Wo: d x (n_h d_h); Wk, Wv: d x (n_kv d_h)
    attention = L * (2 * d * cfg.n_heads * dh + 2 * d * cfg.n_kv_heads * dh)
    norm = (2 * L + 1) * d
    if cfg.moe is None:
        mlp = active_mlp = L * 3 * d * cfg.d_ff  # SwiGLU: gate, up (d x d_ff), down (d_ff x d)
        router = 0
    else:
        m = cfg.moe
        per_expert = 3 * d * m.d_expert
        mlp = L * per_expert * (m.n_experts + m.n_shared)
        active_mlp = L * per_expert * (m.top_k + m.n_shared)
        router = L * d * m.n_experts
    non_embedding = attention + mlp + router + norm
    return ParamCounts(
        total=embedding + non_embedding,
        embedding=embedding,
        non_embedding=non_embedding,
        attention=attention,
        mlp=mlp,
        router=router,
        norm=norm,
        active_mlp=active_mlp,
        active_non_embedding=attention + active_mlp + norm,
    )


def flops_per_token(cfg: LMConfig, seq_len: int, include_router: bool = False) -> float:
    """Forward FLOPs per token: 2*(attn + active MLP weights + d*V) + 4*L*seq_len*n_h*d_h.

    Chinchilla convention (Hoffmann et al. 2022, App. F): a multiply-add is 2 FLOPs; the
    logits matmul (tied embedding) is counted, the embedding lookup, norms and softmax are not.
    The router (2*d*E per layer) is added only with include_router=True. Training = 3x this.
    """
    if not isinstance(cfg, LMConfig):
        raise ValueError(f"cfg={cfg!r} must be an LMConfig")
    _require_positive_int("seq_len", seq_len)
    if seq_len > cfg.max_seq_len:
        raise ValueError(f"seq_len={seq_len} exceeds max_seq_len={cfg.max_seq_len}")
    pc = count_params(cfg)
    matmul = pc.attention + pc.active_mlp + cfg.d_model * cfg.vocab_size
    if include_router:
        matmul += pc.router
    attn_scores = 4 * cfg.n_layers * seq_len * cfg.n_heads * cfg.head_dim
    return float(2 * matmul + attn_scores)


# ----------------------------------------------------------------------------- modules


class KVCache:
    """Preallocated keys/values for every layer: k, v of shape (n_layers, B, n_kv, T_max, d_h)."""

    def __init__(
        self,
        cfg: LMConfig,
        batch_size: int,
        max_len: int | None = None,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
    ):
        _require_positive_int("batch_size", batch_size)
        max_len = cfg.max_seq_len if max_len is None else max_len
        _require_positive_int("max_len", max_len)
        if max_len > cfg.max_seq_len:
            raise ValueError(f"max_len={max_len} exceeds max_seq_len={cfg.max_seq_len}")
        shape = (cfg.n_layers, batch_size, cfg.n_kv_heads, max_len, cfg.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.pos = 0  # number of positions already written

    def nbytes(self) -> int:
        """Bytes of the cache entries filled so far: 2 * n_layers * B * n_kv * pos * d_h * size."""
        per_pos = self.k[:, :, :, :1].numel() * self.k.element_size()
        return 2 * per_pos * self.pos


class Attention(nn.Module):
    """Causal grouped-query self-attention (Ainslie et al. 2023) with an optional KV cache."""

    def __init__(self, cfg: LMConfig):
        super().__init__()
        self.n_h, self.n_kv, self.d_h = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.qkv = nn.Linear(cfg.d_model, (self.n_h + 2 * self.n_kv) * self.d_h, bias=False)
        self.out = nn.Linear(self.n_h * self.d_h, cfg.d_model, bias=False)

    def forward(self, x: Tensor, cache: KVCache | None = None, layer: int = 0) -> Tensor:
        B, S, _ = x.shape
        q, k, v = self.qkv(x).split(
            [self.n_h * self.d_h, self.n_kv * self.d_h, self.n_kv * self.d_h], dim=-1
        )
        q = q.view(B, S, self.n_h, self.d_h).transpose(1, 2)  # (B, n_h, S, d_h)
        k = k.view(B, S, self.n_kv, self.d_h).transpose(1, 2)  # (B, n_kv, S, d_h)
        v = v.view(B, S, self.n_kv, self.d_h).transpose(1, 2)
        gqa = self.n_kv != self.n_h
        if cache is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        else:
            p = cache.pos
            cache.k[layer, :, :, p : p + S] = k
            cache.v[layer, :, :, p : p + S] = v
            k, v = cache.k[layer, :, :, : p + S], cache.v[layer, :, :, : p + S]  # (B,n_kv,T,d_h)
            y = self._cached_attention(q, k, v, p)
        y = y.transpose(1, 2).reshape(B, S, self.n_h * self.d_h)  # (B, S, n_h d_h)
        return self.out(y)

    def _cached_attention(self, q: Tensor, k: Tensor, v: Tensor, p: int) -> Tensor:
        """Attention of S new queries at positions p..p+S-1 over T = p+S cached keys."""
        B, _, S, _ = q.shape
        g = self.n_h // self.n_kv
        if S == 1:
            # One query sees every cached key: fold the g query heads of a group into the
            # query axis, so K/V are read once per group instead of being repeated g times.
            qf = q.view(B, self.n_kv, g, self.d_h)  # (B, n_kv, g, d_h)
            return F.scaled_dot_product_attention(qf, k, v).view(B, self.n_h, 1, self.d_h)
        if p == 0:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=g > 1)
        # query i (absolute position p+i) may see keys 0..p+i
        mask = torch.ones(S, p + S, dtype=torch.bool, device=q.device).tril(diagonal=p)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=g > 1)


class SwiGLU(nn.Module):
    """MLP(x) = W_down (silu(W_gate x) * W_up x)  (Shazeer 2020)."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.d_ff = d_ff
        self.gate_up = nn.Linear(d_model, 2 * d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        gate, up = self.gate_up(x).split(self.d_ff, dim=-1)
        return self.down(F.silu(gate) * up)


class MoE(nn.Module):
    """Top-k routed SwiGLU experts (+ optional shared experts) with a load-balancing loss.

    Router: p = softmax(W_r x) over E experts; the token goes to its top_k experts, each output
    weighted by its router probability (not renormalised, as in Switch/DeepSeek). Balance loss
    (Fedus et al. 2022, Eq. 4, with top-k assignments): coef * E * sum_i f_i P_i, where f_i is
    the fraction of token-assignments sent to expert i and P_i the mean router probability.
    Dispatch: assignments are sorted by expert and each expert runs one matmul on its slice
    (a loop over E; compute is exactly the active FLOPs, no capacity limit, no dropped tokens).
    """

    def __init__(self, d_model: int, moe: MoEConfig):
        super().__init__()
        self.cfg = moe
        E, de = moe.n_experts, moe.d_expert
        self.router = nn.Linear(d_model, E, bias=False)
        self.w_gate_up = nn.Parameter(torch.empty(E, d_model, 2 * de))  # (E, d, 2 d_e)
        self.w_down = nn.Parameter(torch.empty(E, de, d_model))  # (E, d_e, d)
        self.shared = SwiGLU(d_model, moe.n_shared * de) if moe.n_shared else None
        self.last_load: Tensor | None = None  # fraction of assignments per expert, (E,)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        B, S, d = x.shape
        E, k, de = self.cfg.n_experts, self.cfg.top_k, self.cfg.d_expert
        xf = x.reshape(-1, d)  # (N, d), N = B*S
        probs = F.softmax(self.router(xf), dim=-1)  # (N, E)
        weight, expert = probs.topk(k, dim=-1)  # (N, k)
        flat = expert.reshape(-1)  # (N k,)
        order = flat.argsort(stable=True)
        token = order // k  # source token of each expert-sorted assignment
        counts = torch.bincount(flat, minlength=E)  # (E,)
        chunks = xf[token].split(counts.tolist())  # E slices of (n_e, d)
        outs = []
        for e, xe in enumerate(chunks):
            gate, up = (xe @ self.w_gate_up[e]).split(de, dim=-1)  # (n_e, d_e) each
            outs.append((F.silu(gate) * up) @ self.w_down[e])  # (n_e, d)
        ys = torch.cat(outs) * weight.reshape(-1)[order, None]  # (N k, d)
        y = torch.zeros_like(xf).index_add_(0, token, ys)  # (N, d)
        load = counts.to(x.dtype) / flat.numel()  # f_i
        self.last_load = load.detach()
        aux = self.cfg.balance_coef * E * (load * probs.mean(dim=0)).sum()
        if self.shared is not None:
            y = y + self.shared(xf)
        return y.view(B, S, d), aux


class Block(nn.Module):
    """Pre-norm residual block: x + Attn(norm(x)), then x + MLP(norm(x)).

    norm = RMSNorm, y = x / sqrt(mean(x^2) + eps) * g (Zhang & Sennrich 2019).
    """

    def __init__(self, cfg: LMConfig):
        super().__init__()
        self.attn_norm = nn.RMSNorm(cfg.d_model, eps=NORM_EPS)
        self.attn = Attention(cfg)
        self.mlp_norm = nn.RMSNorm(cfg.d_model, eps=NORM_EPS)
        self.mlp = SwiGLU(cfg.d_model, cfg.d_ff) if cfg.moe is None else MoE(cfg.d_model, cfg.moe)

    def forward(self, x: Tensor, cache: KVCache | None, layer: int) -> tuple[Tensor, Tensor]:
        x = x + self.attn(self.attn_norm(x), cache, layer)
        h = self.mlp(self.mlp_norm(x))
        if isinstance(h, tuple):
            h, aux = h
        else:
            aux = x.new_zeros(())
        return x + h, aux


class TransformerLM(nn.Module):
    """Decoder-only LM. forward(idx (B, S) int64) -> (logits (B, S, V), aux loss scalar)."""

    def __init__(self, cfg: LMConfig):
        super().__init__()
        if not isinstance(cfg, LMConfig):
            raise ValueError(f"cfg={cfg!r} must be an LMConfig")
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.d_model, eps=NORM_EPS)
        self._init_weights()

    def _init_weights(self) -> None:
        """N(0, 0.02) everywhere; residual output projections scaled by 1/sqrt(2 n_layers)."""
        for name, p in self.named_parameters():
            if p.dim() < 2:
                continue  # RMSNorm gains stay at 1
            std = 0.02
            if name.endswith(("attn.out.weight", "down.weight", "w_down")):
                std /= math.sqrt(2 * self.cfg.n_layers)
            nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, idx: Tensor, cache: KVCache | None = None) -> tuple[Tensor, Tensor]:
        B, S = idx.shape
        start = 0 if cache is None else cache.pos
        if start + S > self.cfg.max_seq_len:
            raise ValueError(f"sequence end {start + S} exceeds max_seq_len={self.cfg.max_seq_len}")
        pos = torch.arange(start, start + S, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)  # (B, S, d)
        aux = x.new_zeros(())
        for i, block in enumerate(self.blocks):
            x, a = block(x, cache, i)
            aux = aux + a
        if cache is not None:
            cache.pos += S
        logits = self.norm(x) @ self.tok_emb.weight.T  # tied output layer, (B, S, V)
        return logits, aux


@torch.no_grad()
def generate(
    model: TransformerLM,
    prompt: Tensor,
    n_new: int,
    use_cache: bool = True,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Extend `prompt` (B, P) by n_new tokens -> (B, P + n_new); greedy when temperature == 0.

    With use_cache the prompt is prefilled once and each new token costs one decode step over
    the KV cache; without it every step re-runs the full forward on all tokens so far.
    """
    if not isinstance(prompt, Tensor) or prompt.dim() != 2 or prompt.shape[1] < 1:
        raise ValueError(f"prompt must be an int tensor of shape (B, P>=1), got {prompt!r:.60}")
    if not isinstance(n_new, int) or n_new < 0:
        raise ValueError(f"n_new={n_new!r} must be an integer >= 0")
    if prompt.shape[1] + n_new > model.cfg.max_seq_len:
        raise ValueError(
            f"prompt length + n_new = {prompt.shape[1] + n_new} exceeds "
            f"max_seq_len={model.cfg.max_seq_len}"
        )
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature={temperature!r} must be finite and >= 0")
    cache = (
        KVCache(model.cfg, prompt.shape[0], prompt.shape[1] + n_new, device=prompt.device)
        if use_cache
        else None
    )
    out, step_in = prompt, prompt
    for _ in range(n_new):
        logits, _ = model(step_in if use_cache else out, cache)
        last = logits[:, -1]  # (B, V)
        if temperature == 0:
            nxt = last.argmax(dim=-1, keepdim=True)
        else:
            probs = F.softmax(last / temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator)
        out = torch.cat([out, nxt], dim=1)
        step_in = nxt
    return out
