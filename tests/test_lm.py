"""Tests of lib.lm: shapes, exact parameter and FLOP accounting, KV-cache decoding, MoE loss."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from lib.lm import (
    KVCache,
    LMConfig,
    MoEConfig,
    TransformerLM,
    count_params,
    d_ff_from_ratio,
    flops_per_token,
    generate,
)

torch.set_num_threads(1)  # tiny tensors: a second thread only adds contention on 2 cores

DENSE = LMConfig(
    vocab_size=11, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=24, max_seq_len=12
)
MOE = LMConfig(
    vocab_size=11,
    d_model=16,
    n_layers=2,
    n_heads=4,
    n_kv_heads=1,
    d_ff=24,
    max_seq_len=12,
    moe=MoEConfig(n_experts=6, top_k=2, d_expert=8, n_shared=1),
)
WIDE_HEADS = LMConfig(
    vocab_size=11, d_model=16, n_layers=1, n_heads=6, n_kv_heads=3, d_ff=8, max_seq_len=12, d_head=4
)
CONFIGS = [DENSE, MOE, WIDE_HEADS]


def _model(cfg: LMConfig, seed: int = 0) -> TransformerLM:
    torch.manual_seed(seed)
    return TransformerLM(cfg).eval()


@pytest.mark.parametrize("cfg", CONFIGS)
def test_forward_shapes(cfg):
    logits, aux = _model(cfg)(torch.randint(0, cfg.vocab_size, (3, 7)))
    assert logits.shape == (3, 7, cfg.vocab_size)
    assert aux.shape == ()
    assert (aux > 0) == (cfg.moe is not None)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_count_params_matches_numel(cfg):
    pc = count_params(cfg)
    assert pc.total == sum(p.numel() for p in _model(cfg).parameters())
    assert pc.non_embedding == pc.attention + pc.mlp + pc.router + pc.norm
    assert pc.total == pc.embedding + pc.non_embedding


def test_count_params_by_hand():
    pc = count_params(MOE)
    # per layer: Wq, Wo 16x16 each; Wk, Wv 16x4 each -> 640; 7 experts x 3*16*8 = 2688
    assert pc.attention == 2 * 640
    assert pc.mlp == 2 * 2688
    assert pc.active_mlp == 2 * 3 * 384  # top_k = 2 routed + 1 shared
    assert pc.router == 2 * 16 * 6
    assert pc.norm == 5 * 16
    assert pc.embedding == 11 * 16 + 12 * 16
    assert pc.active_non_embedding == pc.attention + pc.active_mlp + pc.norm
    assert MOE.granularity == 3.0
    assert MOE.moe.activation_ratio == pytest.approx(3 / 7)


def test_flops_per_token_hand_count():
    cfg = LMConfig(
        vocab_size=10, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=16, max_seq_len=4
    )
    # matmul weights: Wq 64 + Wk 32 + Wv 32 + Wo 64 + SwiGLU 3*8*16 = 384 + logits 8*10 = 656
    # attention: 4 * n_layers * seq * n_heads * d_head = 4 * 1 * 4 * 2 * 4 = 128
    assert flops_per_token(cfg, 4) == 2 * 656 + 128


@pytest.mark.parametrize("cfg", CONFIGS)
def test_flops_per_token_matches_torch_flop_counter(cfg):
    B, S = 3, 8
    with FlopCounterMode(display=False) as counter:
        _model(cfg)(torch.randint(0, cfg.vocab_size, (B, S)))
    # the counter sees every matmul (router included) but not the CPU attention kernel
    attention = 4 * cfg.n_layers * S * cfg.n_heads * cfg.head_dim
    measured = counter.get_total_flops() / (B * S) + attention
    assert measured == flops_per_token(cfg, S, include_router=True)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_kv_cache_matches_full_forward(cfg):
    model = _model(cfg, seed=1)
    x = torch.randint(0, cfg.vocab_size, (2, 10))
    full, _ = model(x)
    cache = KVCache(cfg, batch_size=2)
    parts = [
        model(x[:, :4], cache)[0],
        model(x[:, 4:5], cache)[0],
        model(x[:, 5:8], cache)[0],
        model(x[:, 8:9], cache)[0],
        model(x[:, 9:], cache)[0],
    ]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=1e-5, atol=1e-5)
    assert cache.pos == 10
    assert cache.nbytes() == 2 * cfg.n_layers * 2 * cfg.n_kv_heads * 10 * cfg.head_dim * 4


@pytest.mark.parametrize("cfg", CONFIGS)
def test_generate_with_and_without_cache_agree(cfg):
    model = _model(cfg, seed=2)
    prompt = torch.randint(0, cfg.vocab_size, (3, 3))
    a = generate(model, prompt, 6)
    assert a.shape == (3, 9)
    torch.testing.assert_close(a, generate(model, prompt, 6, use_cache=False))
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    torch.testing.assert_close(
        generate(model, prompt, 6, temperature=1.0, generator=g1),
        generate(model, prompt, 6, temperature=1.0, generator=g2),
    )


def test_gqa_equals_mha_with_repeated_kv_heads():
    gqa = _model(DENSE, seed=3)
    mha_cfg = LMConfig(**{**DENSE.__dict__, "n_kv_heads": DENSE.n_heads})
    mha = TransformerLM(mha_cfg).eval()
    state = gqa.state_dict()
    d, dh, g = DENSE.d_model, DENSE.head_dim, DENSE.n_heads // DENSE.n_kv_heads
    for i in range(DENSE.n_layers):
        w = state[f"blocks.{i}.attn.qkv.weight"]
        q, k, v = w.split([d, DENSE.n_kv_heads * dh, DENSE.n_kv_heads * dh])
        rep = [
            t.view(DENSE.n_kv_heads, dh, d).repeat_interleave(g, 0).reshape(-1, d) for t in (k, v)
        ]
        state[f"blocks.{i}.attn.qkv.weight"] = torch.cat([q, *rep])
    mha.load_state_dict(state)
    x = torch.randint(0, DENSE.vocab_size, (2, 9))
    torch.testing.assert_close(mha(x)[0], gqa(x)[0])


def test_balance_loss_is_coef_per_layer_for_a_uniform_router():
    model = _model(MOE)
    for block in model.blocks:
        torch.nn.init.zeros_(block.mlp.router.weight)  # p_i = 1/E, so E * sum f_i p_i = 1
    _, aux = model(torch.randint(0, 11, (4, 6)))
    assert aux.item() == pytest.approx(MOE.n_layers * MOE.moe.balance_coef, rel=1e-6)
    assert model.blocks[0].mlp.last_load.sum().item() == pytest.approx(1.0)


def test_d_ff_from_ratio():
    assert d_ff_from_ratio(48, 8 / 3) == 128
    assert d_ff_from_ratio(48, 8 / 3, multiple_of=32) == 128
    assert d_ff_from_ratio(10, 2.5, multiple_of=8) == 32


def test_bad_inputs_raise_value_error_naming_the_argument():
    base = dict(
        vocab_size=8, d_model=16, n_layers=1, n_heads=4, n_kv_heads=2, d_ff=8, max_seq_len=8
    )
    for name, bad in [("vocab_size", 0), ("d_model", -1), ("d_ff", 2.5), ("max_seq_len", None)]:
        with pytest.raises((TypeError, ValueError), match=name):
            LMConfig(**{**base, name: bad})
    with pytest.raises((TypeError, ValueError), match="n_kv_heads"):
        LMConfig(**{**base, "n_kv_heads": 3})
    with pytest.raises((TypeError, ValueError), match="n_heads"):
        LMConfig(**{**base, "n_heads": 3, "n_kv_heads": 3})
    with pytest.raises((TypeError, ValueError), match="top_k"):
        MoEConfig(n_experts=2, top_k=3, d_expert=4)
    with pytest.raises((TypeError, ValueError), match="balance_coef"):
        MoEConfig(n_experts=2, top_k=1, d_expert=4, balance_coef=float("nan"))
    with pytest.raises((TypeError, ValueError), match="cfg"):
        count_params(base)
    with pytest.raises((TypeError, ValueError), match="seq_len"):
        flops_per_token(LMConfig(**base), 0)
    with pytest.raises((TypeError, ValueError), match="seq_len"):
        flops_per_token(LMConfig(**base), 9)
    with pytest.raises((TypeError, ValueError), match="mlp_ratio"):
        d_ff_from_ratio(16, float("inf"))
    with pytest.raises((TypeError, ValueError), match="batch_size"):
        KVCache(LMConfig(**base), 0)
    model = _model(LMConfig(**base))
    with pytest.raises((TypeError, ValueError), match="max_seq_len"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises((TypeError, ValueError), match="n_new"):
        generate(model, torch.zeros(1, 2, dtype=torch.long), 7)
    with pytest.raises((TypeError, ValueError), match="prompt"):
        generate(model, torch.zeros(2, dtype=torch.long), 1)
    with pytest.raises((TypeError, ValueError), match="temperature"):
        generate(model, torch.zeros(1, 2, dtype=torch.long), 1, temperature=-1.0)
