"""Tests of lib.train: schedules, batching, determinism, learning a Markov chain to its floor."""

import math
import warnings

import numpy as np
import pytest
import torch

from lib.lm import LMConfig, MoEConfig, flops_per_token
from lib.synth import random_chain, split
from lib.train import (
    TrainConfig,
    as_token_tensor,
    build_model,
    eval_windows,
    evaluate,
    get_batch,
    lr_at,
    token_nll,
    train,
)

torch.set_num_threads(1)  # tiny models: a second thread only adds contention on 2 cores

TINY = LMConfig(
    vocab_size=8, d_model=32, n_layers=1, n_heads=4, n_kv_heads=2, d_ff=64, max_seq_len=16
)


def _cfg(**kw) -> TrainConfig:
    base = dict(steps=100, batch_size=4, seq_len=8, lr=1.0, warmup_steps=10, min_lr_ratio=0.1)
    return TrainConfig(**{**base, **kw})


def test_lr_schedules_at_known_points():
    for schedule in ("constant", "cosine", "linear", "wsd"):
        cfg = _cfg(schedule=schedule)
        assert lr_at(0, cfg) == pytest.approx(0.1)  # warmup: (0 + 1) / 10
        assert lr_at(9, cfg) == pytest.approx(1.0)
    assert lr_at(99, _cfg(schedule="constant")) == 1.0
    cos = _cfg(schedule="cosine")
    assert lr_at(54, cos) == pytest.approx(0.55)  # t = 45/90 = 1/2: midway between 1 and 0.1
    assert lr_at(99, cos) == pytest.approx(0.1)
    lin = _cfg(schedule="linear")
    assert lr_at(39, lin) == pytest.approx(1 - 0.9 / 3)  # t = 30/90
    assert lr_at(99, lin) == pytest.approx(0.1)
    wsd = _cfg(schedule="wsd", decay_frac=0.2)  # stable through step 79, decay over 80..99
    assert lr_at(79, wsd) == 1.0
    assert lr_at(89, wsd) == pytest.approx(1 - 0.9 * 10 / 20)
    assert lr_at(99, wsd) == pytest.approx(0.1)
    assert lr_at(0, _cfg(warmup_steps=0, schedule="constant")) == 1.0


def test_get_batch_draws_shifted_windows():
    tokens = torch.arange(300).reshape(3, 100)
    x, y = get_batch(tokens, 5, 7, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (5, 7)
    torch.testing.assert_close(y[:, :-1], x[:, 1:])
    assert torch.all(x[:, 1:] - x[:, :-1] == 1)  # contiguous within a row
    assert torch.all(x // 100 == y // 100)  # never crosses a row boundary
    x2, _ = get_batch(tokens, 5, 7, torch.Generator().manual_seed(0))
    torch.testing.assert_close(x, x2)


@pytest.mark.parametrize("moe", [None, MoEConfig(n_experts=4, top_k=2, d_expert=16)])
def test_training_is_bitwise_deterministic(moe):
    cfg = LMConfig(**{**TINY.__dict__, "moe": moe})
    tokens = np.random.default_rng(0).integers(0, 8, size=(4, 200))
    tc = TrainConfig(steps=15, batch_size=8, seq_len=16, lr=3e-3, warmup_steps=3)
    a, b = train(cfg, tc, tokens), train(cfg, tc, tokens)
    np.testing.assert_array_equal(a.train_loss, b.train_loss)
    np.testing.assert_array_equal(a.aux_loss, b.aux_loss)
    c = train(cfg, TrainConfig(**{**tc.__dict__, "seed": 1}), tokens)
    assert not np.array_equal(a.train_loss, c.train_loss)
    assert (a.aux_loss > 0).all() == (moe is not None)


def test_tiny_model_learns_markov_chain_to_its_entropy_floor():
    chain = random_chain(8, order=1, n_support=3, alpha=1.0, seed=0)
    tr, va = split(chain.sample(2000, seed=1, n_streams=32), 0.2)
    tc = TrainConfig(
        steps=300,
        batch_size=16,
        seq_len=16,
        lr=1e-2,
        warmup_steps=20,
        eval_every=100,
        eval_windows=128,
    )
    result = train(TINY, tc, tr, va)
    H = chain.entropy_rate()
    assert result.eval_loss[0] > result.eval_loss[-1]
    assert result.eval_loss[-1] < H + 0.05  # floor H ~ 0.7 nats; the uniform guess is ln 8
    assert result.eval_loss[-1] > H - 0.05  # nothing beats the entropy rate (up to noise)
    np.testing.assert_array_equal(result.eval_steps, [100, 200, 300])
    assert evaluate(result.model, va, 16, max_windows=128) == pytest.approx(result.eval_loss[-1])
    assert result.tokens_seen == 300 * 16 * 16
    assert result.flops == 3 * flops_per_token(TINY, 16) * result.tokens_seen
    assert result.tokens_per_s > 0 and result.wall_s > 0
    assert not result.model.training


def test_param_groups_hook_and_init_state():
    tokens = np.random.default_rng(0).integers(0, 8, size=500)
    tc = TrainConfig(steps=5, batch_size=4, seq_len=8, lr=1e-2, schedule="constant")
    first = train(TINY, tc, tokens)

    def freeze_embeddings(model):
        emb = [model.tok_emb.weight, model.pos_emb.weight]
        rest = [p for p in model.parameters() if all(p is not e for e in emb)]
        return [{"params": emb, "lr": 0.0, "weight_decay": 0.0}, {"params": rest}]

    state = {k: v.clone() for k, v in first.model.state_dict().items()}
    second = train(TINY, tc, tokens, param_groups=freeze_embeddings, init_state=state)
    torch.testing.assert_close(second.model.tok_emb.weight, state["tok_emb.weight"])
    assert not torch.equal(second.model.norm.weight, state["norm.weight"])
    assert second.train_loss[0] < first.train_loss[0]  # resumed from the trained weights


def test_named_validation_sets_batch_fn_and_callback():
    tokens = np.random.default_rng(1).integers(0, 8, size=(2, 200))
    tc = TrainConfig(steps=6, batch_size=4, seq_len=8, lr=1e-2, eval_every=3)
    plain = train(TINY, tc, tokens, val_tokens={"a": tokens[0], "b": tokens[1]})
    assert list(plain.eval_steps) == [3, 6]
    assert set(plain.eval_losses) == {"a", "b"}
    np.testing.assert_array_equal(plain.eval_loss, plain.eval_losses["a"])

    data = torch.as_tensor(tokens)
    seen: list[int] = []
    same = train(
        TINY, tc, None, val_tokens=tokens[0],
        batch_fn=lambda step, gen: get_batch(data, 4, 8, gen),
        callback=lambda done, model: seen.append(done),
    )  # fmt: skip
    np.testing.assert_array_equal(same.train_loss, plain.train_loss)  # same batches, same run
    np.testing.assert_array_equal(same.eval_loss, plain.eval_losses["a"])
    assert seen == [1, 2, 3, 4, 5, 6]
    with pytest.raises((TypeError, ValueError), match="exactly one of train_tokens and batch_fn"):
        train(TINY, tc, tokens, batch_fn=lambda step, gen: get_batch(data, 4, 8, gen))


def test_bad_inputs_raise_value_error_naming_the_argument():
    for name, bad in [
        ("steps", 0),
        ("batch_size", -1),
        ("lr", math.nan),
        ("lr", 0.0),
        ("schedule", "step"),
        ("decay_frac", 0.0),
        ("min_lr_ratio", 1.5),
        ("weight_decay", -0.1),
        ("warmup_steps", 200),
        ("betas", (0.9, 1.0)),
        ("eval_every", -1),
        ("data_seed", -2),
    ]:
        with pytest.raises((TypeError, ValueError), match=name):
            _cfg(**{name: bad})
    with pytest.raises((TypeError, ValueError), match="step"):
        lr_at(100, _cfg())
    tc = TrainConfig(steps=2, batch_size=2, seq_len=8, lr=1e-3)
    with pytest.raises((TypeError, ValueError), match="train_tokens"):
        train(TINY, tc, np.array([0, 1, 8] * 10))
    with pytest.raises((TypeError, ValueError), match="train_tokens"):
        train(TINY, tc, np.zeros(30, dtype=np.float32))
    with pytest.raises((TypeError, ValueError), match="train_tokens"):
        train(TINY, tc, np.zeros(5, dtype=np.int64))
    with pytest.raises((TypeError, ValueError), match="val_tokens"):
        train(TINY, tc, np.zeros(30, dtype=np.int64), np.zeros((2, 3, 4), dtype=np.int64))
    with pytest.raises((TypeError, ValueError), match="seq_len"):
        train(TINY, TrainConfig(steps=2, batch_size=2, seq_len=32, lr=1e-3), np.zeros(64))
    with pytest.raises((TypeError, ValueError), match="model_cfg"):
        train(None, tc, np.zeros(30, dtype=np.int64))
    with pytest.raises((TypeError, ValueError), match="param_groups"):
        train(TINY, tc, np.zeros(30, dtype=np.int64), param_groups=lambda m: m.parameters())
    with pytest.raises((TypeError, ValueError), match="seq_len"):
        get_batch(torch.arange(5), 2, 8, torch.Generator())
    result = train(TINY, tc, np.zeros(30, dtype=np.int64))
    with pytest.raises((TypeError, ValueError), match="seq_len"):
        evaluate(result.model, np.zeros(30, dtype=np.int64), 0)
    with pytest.raises((TypeError, ValueError), match="max_windows"):
        evaluate(result.model, np.zeros(30, dtype=np.int64), 8, max_windows=0)
    with pytest.raises((TypeError, ValueError), match="windows"):
        token_nll(result.model, torch.zeros(4, dtype=torch.long))
    with pytest.raises((TypeError, ValueError), match="seq_len"):
        eval_windows(torch.zeros(5, dtype=torch.long), 8, 4)
    with pytest.raises((TypeError, ValueError), match="seed"):
        build_model(TINY, seed=-1)


def test_a_read_only_token_array_is_copied_without_a_warning():
    tokens = np.arange(40) % 7
    tokens.flags.writeable = False  # as lib.runs hands large arrays to its workers
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = as_token_tensor(tokens, 7, 10)
    assert t.tolist() == [list(tokens)] and tokens.tolist() == list(np.arange(40) % 7)
