"""Throughput of the toy LM (lib.lm) on CPU: training tokens/s and FLOP/s, decode tokens/s.

Training is compared side by side, in one run and interleaved, with a plain reference of the
same size built from torch.nn.TransformerEncoderLayer (pre-norm, GELU MLP, causal mask, tied
head). Our SwiGLU MLP has 3 matrices where the reference has 2, so at equal d_ff it does 1.5x
the MLP work; the "param-matched" row gives ours d_ff * 2/3 (about equal parameters).
Decode: greedy generation with and without the KV cache, for MHA and GQA.
Run: `.venv/bin/python benchmarks/bench_lm.py` (about a minute on 2 idle cores);
BENCH_THREADS=1 measures one thread instead of the default two.
"""

from __future__ import annotations

import os
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from lib.lm import LMConfig, TransformerLM, flops_per_token, generate

THREADS = int(os.environ.get("BENCH_THREADS", "2"))  # the brief's setting: 2 threads
V, D, LAYERS, HEADS, D_FF, SEQ, BATCH = 512, 128, 4, 4, 512, 128, 16
WARMUP_STEPS, TIMED_STEPS, REPEATS = 1, 3, 2
DECODE_BATCH, PROMPT, NEW = 8, 64, 32


class ReferenceLM(nn.Module):
    """Embeddings + nn.TransformerEncoder (causal) + LayerNorm + tied output layer."""

    def __init__(self):
        super().__init__()
        self.tok_emb = nn.Embedding(V, D)
        self.pos_emb = nn.Embedding(SEQ, D)
        layer = nn.TransformerEncoderLayer(
            D, HEADS, D_FF, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(D)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(SEQ))

    def forward(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        S = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(S))
        x = self.encoder(x, mask=self.mask[:S, :S], is_causal=True)
        return self.norm(x) @ self.tok_emb.weight.T, x.new_zeros(())


def reference_flops_per_token() -> float:
    """Forward FLOPs/token of ReferenceLM, same convention as lib.lm.flops_per_token."""
    matmul = LAYERS * (4 * D * D + 2 * D * D_FF) + D * V
    return 2.0 * matmul + 4 * LAYERS * SEQ * D


def time_steps(model: nn.Module, opt: torch.optim.Optimizer, x, y, n: int) -> float:
    """Seconds per training step (forward, backward, AdamW) averaged over n steps."""
    t0 = time.perf_counter()
    for _ in range(n):
        logits, aux = model(x)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1)) + aux
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return (time.perf_counter() - t0) / n


def bench_training() -> None:
    torch.manual_seed(0)
    x = torch.randint(0, V, (BATCH, SEQ))
    y = torch.randint(0, V, (BATCH, SEQ))
    ours = LMConfig(V, D, LAYERS, HEADS, HEADS, D_FF, SEQ)
    matched = LMConfig(V, D, LAYERS, HEADS, HEADS, round(D_FF * 2 / 3), SEQ)
    runs = {
        "reference (TransformerEncoderLayer)": (ReferenceLM(), reference_flops_per_token()),
        "ours, same d_ff": (TransformerLM(ours), flops_per_token(ours, SEQ)),
        "ours, param-matched d_ff": (TransformerLM(matched), flops_per_token(matched, SEQ)),
    }
    opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True) for k, (m, _) in runs.items()}
    for k, (m, _) in runs.items():
        time_steps(m, opts[k], x, y, WARMUP_STEPS)
    times = {k: [] for k in runs}
    for _ in range(REPEATS):  # interleaved, so load changes hit every model alike
        for k, (m, _) in runs.items():
            times[k].append(time_steps(m, opts[k], x, y, TIMED_STEPS))
    print(f"training: B={BATCH} S={SEQ} d={D} layers={LAYERS} heads={HEADS} d_ff={D_FF} V={V}")
    print(f"{'model':38s} {'params':>9s} {'tokens/s':>10s} {'GFLOP/s':>8s} {'vs ref':>7s}")
    ref_tps = None
    for k, (m, fpt) in runs.items():
        step = statistics.median(times[k])
        tps = BATCH * SEQ / step
        ref_tps = ref_tps or tps
        n_params = sum(p.numel() for p in m.parameters())
        print(f"{k:38s} {n_params:9d} {tps:10.0f} {3 * fpt * tps / 1e9:8.2f} {tps / ref_tps:7.2f}")


@torch.no_grad()
def bench_decode() -> None:
    cfg = LMConfig(V, D, LAYERS, HEADS, HEADS, D_FF, PROMPT + NEW)
    gqa = LMConfig(V, D, LAYERS, HEADS, 1, D_FF, PROMPT + NEW)
    prompt = torch.randint(0, V, (DECODE_BATCH, PROMPT))
    print(f"decode: batch={DECODE_BATCH}, prompt={PROMPT}, new tokens={NEW}, greedy")
    for name, c in (("MHA", cfg), ("GQA 4:1", gqa)):
        model = TransformerLM(c).eval()
        for use_cache in (True, False):
            generate(model, prompt, 4, use_cache=use_cache)
            t0 = time.perf_counter()
            generate(model, prompt, NEW, use_cache=use_cache)
            tps = DECODE_BATCH * NEW / (time.perf_counter() - t0)
            print(f"  {name:8s} KV cache {'on ' if use_cache else 'off'}: {tps:9.0f} tokens/s")


def main() -> None:
    torch.set_num_threads(THREADS)
    print(
        f"torch {torch.__version__}, {THREADS} threads, load average "
        f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )
    bench_training()
    bench_decode()
    print(f"load average after: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
