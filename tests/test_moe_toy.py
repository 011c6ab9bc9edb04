"""Unit tests of lib.moe_toy: the memory task, the bank of MLPs, training, the result tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lib.moe_toy import (
    BankResult,
    MLPSpec,
    ToyConfig,
    _Bank,
    dense_mlp,
    frontier_leverage,
    ladder,
    make_memory_task,
    run_toy_group,
    toy_leverage,
    toy_table,
    train_bank,
    wsd_lr,
)

SMALL = ToyConfig(n_keys=64, d_in=6, d_out=3, batch=32, warmup=5)


def test_memory_task_is_zipf_and_seeded():
    task = make_memory_task(SMALL, seed=4)
    assert task.keys.shape == (64, 6) and task.values.shape == (64, 3)
    assert task.p.sum() == pytest.approx(1.0) and np.all(np.diff(task.p) < 0)
    assert task.p[0] / task.p[1] == pytest.approx(2**SMALL.zipf)
    np.testing.assert_array_equal(task.keys, make_memory_task(SMALL, seed=4).keys)
    # the loss of f = 0 is the p-weighted mean square of the values
    expected = float(task.p @ (task.values**2).mean(axis=1))
    assert task.loss_of(np.zeros_like(task.values)) == pytest.approx(expected)


def test_mlp_spec_counts_the_papers_way():
    moe = MLPSpec(n_experts=16, top_k=2, d_expert=4)
    assert moe.A == 1 / 8 and moe.units == 64 and moe.active == 8 and moe.granularity(16) == 8
    assert moe.flops(16, 8) == 2 * 2 * 4 * (16 + 8)  # active experts only
    assert moe.flops(16, 8, router=True) == 2 * 2 * 4 * 24 + 2 * 16 * 16
    dense = dense_mlp(8)
    assert dense.dense and dense.A == 1.0 and dense.flops(16, 8) == moe.flops(16, 8)
    assert dense.flops(16, 8, router=True) == dense.flops(16, 8)
    tied = MLPSpec(16, 2, 4, tied=True)  # stores one expert, costs what the MoE costs
    assert tied.units == 4 and not tied.dense and tied.flops(16, 8) == moe.flops(16, 8)
    assert ladder(0.25, (2, 4)) == [MLPSpec(8, 2, 4), MLPSpec(16, 4, 4)]


def test_tied_experts_compute_exactly_one_expert():
    # renormalised gates sum to 1, so identical experts give sum_e g_e h(x) = h(x)
    bank = _Bank([MLPSpec(8, 3, 2), dense_mlp(2)], 5, 3, seed=0, dtype=np.float64)
    rng = np.random.default_rng(1)
    W1, b1, W2 = rng.standard_normal((5, 2)), rng.standard_normal(2), rng.standard_normal((2, 3))
    moe, dense = bank.cols[0], bank.cols[1]
    bank.p["W1"][:, moe], bank.p["b1"][moe] = np.tile(W1, 8), np.tile(b1, 8)
    bank.p["W2"][moe] = np.tile(W2, (8, 1))
    bank.p["W1"][:, dense], bank.p["b1"][dense], bank.p["W2"][dense] = W1, b1, W2
    X = rng.standard_normal((20, 5))
    out = bank.forward(X)["out"]
    np.testing.assert_allclose(out[0], out[1], atol=1e-12)


def test_bank_gradient_matches_finite_differences():
    specs = [dense_mlp(5), MLPSpec(4, 2, 3), MLPSpec(3, 1, 2), MLPSpec(2, 2, 2), dense_mlp(2),
             MLPSpec(4, 2, 2, tied=True)]  # fmt: skip
    bank = _Bank(specs, 4, 3, seed=0, dtype=np.float64)
    rng = np.random.default_rng(5)
    bank.p["W2"][:] = rng.standard_normal(bank.p["W2"].shape)
    bank.p["b1"][:] = 0.1 * rng.standard_normal(bank.p["b1"].shape)
    X, Y, balance = rng.standard_normal((7, 4)), rng.standard_normal((7, 3)), 0.3

    def objective() -> float:  # sum of every model's loss and balance loss
        f = bank.forward(X)
        probs, chosen, _ = f["routes"]
        aux = balance * bank.expert_n * chosen.mean(axis=0) / bank.expert_k * probs.mean(axis=0)
        return float(((f["out"] - Y) ** 2).mean(axis=(1, 2)).sum() + aux.sum())

    bank.backward(X, Y, balance)
    analytic, numeric = bank.grad.copy(), np.zeros_like(bank.grad)
    for i in range(len(bank.theta)):
        old = bank.theta[i]
        bank.theta[i] = old + 1e-6
        up = objective()
        bank.theta[i] = old - 1e-6
        numeric[i] = (up - objective()) / 2e-6
        bank.theta[i] = old
    np.testing.assert_allclose(analytic, numeric, atol=1e-7)


def test_routing_picks_top_k_and_renormalises():
    bank = _Bank([MLPSpec(8, 3, 2), MLPSpec(4, 1, 2)], 5, 2, seed=1, dtype=np.float64)
    X = np.random.default_rng(0).standard_normal((50, 5))
    probs, chosen, gates = bank._route(X)
    logits = X @ bank.p["Wr"]
    assert (chosen[:, :8].sum(1) == 3).all() and (chosen[:, 8:].sum(1) == 1).all()
    np.testing.assert_array_equal(chosen[:, :8], logits[:, :8] >= np.sort(logits[:, :8])[:, [5]])
    np.testing.assert_allclose(gates[:, :8].sum(1), 1.0)
    np.testing.assert_allclose(probs[:, 8:].sum(1), 1.0)


def test_models_train_as_if_alone_in_any_group():
    # a model's initialisation and batches depend on the seed and its spec only
    task = make_memory_task(SMALL, seed=0)
    for spec in (MLPSpec(4, 2, 2), dense_mlp(8), MLPSpec(4, 2, 2, tied=True)):
        alone = train_bank(task, [spec], (60,), SMALL, seed=1)
        crowd = train_bank(task, [dense_mlp(16), MLPSpec(8, 2, 2), spec], (60, 120), SMALL, 1)
        assert crowd.loss[0, 2] == pytest.approx(alone.loss[0, 0], rel=1e-4)
        assert crowd.loss[0, 2] != crowd.loss[0, 1]


def test_budget_branches_equal_runs_trained_alone():
    task = make_memory_task(SMALL, seed=0)
    specs = [dense_mlp(8), MLPSpec(4, 2, 2)]
    both = train_bank(task, specs, (50, 100), SMALL, seed=2)
    for i, budget in enumerate((50, 100)):
        alone = train_bank(task, specs, (budget,), SMALL, seed=2)
        np.testing.assert_array_equal(both.loss[i], alone.loss[0])
    assert both.loss[1, 0] < both.loss[0, 0]  # more steps, lower loss
    assert np.isnan(both.load_entropy[:, 0]).all() and (both.load_entropy[:, 1] <= 1).all()


def test_wsd_schedule():
    config = ToyConfig(lr=1e-2, warmup=10, decay_frac=0.2)
    lrs = np.array([wsd_lr(step, 100, config) for step in range(100)])
    assert lrs[0] == pytest.approx(1e-3) and lrs[9] == pytest.approx(1e-2)
    assert (lrs[10:80] == 1e-2).all() and lrs[99] == pytest.approx(1e-2 / 20)
    assert np.all(np.diff(lrs[80:]) < 0)


def test_groups_of_a_replicate_make_one_table_and_leverage():
    dense = [dense_mlp(w) for w in (2, 4, 8, 16, 32)]
    groups = [(dense + [MLPSpec(2, 2, 2)], (40, 80)), ([MLPSpec(8, 2, 2), dense_mlp(8)], (40,))]
    results = [run_toy_group(SMALL, specs, budgets, seed=5) for specs, budgets in groups]
    table = toy_table(results, SMALL)
    assert len(table) == 6 * 2 + 1  # dense_mlp(8) at 40 steps is trained twice, kept once
    assert (table.C == table.M * table.budget * SMALL.batch).all()
    el = toy_leverage(table)
    assert set(zip(el.E, el.budget, strict=True)) == {(2, 40), (2, 80), (8, 40)}
    ok = el[el.in_range]
    assert (ok.EL_router < ok.EL).all() and el.in_range.dtype == bool


def test_frontier_leverage_of_a_planted_multiplier():
    # losses planted on a lattice: dense L = (N)^-0.5 + D^-0.5, the A = 1/4 ladder is worth 4x
    rows = []
    for active in 2 ** np.arange(1, 10):
        for budget in 2 ** np.arange(3, 11):
            for A, c in ((1.0, 1.0), (0.25, 4.0)):
                rows.append({"dense": A == 1.0, "tied": False, "d_expert": 4 if A < 1 else 1,
                             "A": A, "active": active, "C": float(active * budget),
                             "loss": (c * active) ** -0.5 + budget**-0.5})  # fmt: skip
    front = frontier_leverage(pd.DataFrame(rows), (0.25,), C_unit=1.0)
    ok = front[front.EL.notna()]
    assert len(ok) >= 3 and ok.interior.all()
    np.testing.assert_allclose(ok.EL, 4.0, rtol=0.1)


BAD_CALLS = [
    (lambda: MLPSpec(4, 5, 2), ValueError, "top_k must be <= 4"),
    (lambda: MLPSpec(4, 2, 2.5), TypeError, "d_expert must be an integer"),
    (lambda: MLPSpec(1, 1, 4, tied=True), ValueError, "n_experts >= 2"),
    (lambda: MLPSpec(4, 2, 2, tied=1), TypeError, "tied must be"),
    (lambda: dense_mlp(True), TypeError, "width must be an integer"),
    (lambda: MLPSpec(4, 2, 2).flops(0, 3), ValueError, "d_in must be >= 1"),
    (lambda: ToyConfig(lr=float("nan")), ValueError, "lr must be finite"),
    (lambda: ToyConfig(batch=0), ValueError, "batch must be >= 1"),
    (lambda: ToyConfig(zipf=-1.0), ValueError, "zipf must lie in"),
    (lambda: make_memory_task(SMALL, seed=-1), ValueError, "seed must be >= 0"),
    (lambda: make_memory_task({"n_keys": 8}, seed=0), TypeError, "config must be a ToyConfig"),
    (
        lambda: train_bank(make_memory_task(SMALL, 0), [dense_mlp(2)], (4,), SMALL, 0),
        ValueError,
        "decay before warmup",
    ),
    (
        lambda: train_bank(make_memory_task(SMALL, 0), dense_mlp(2), (40,), SMALL, 0),
        TypeError,
        "specs must be a non-empty list",
    ),
    (
        lambda: run_toy_group(SMALL, [dense_mlp(2)], (40,), seed=1.5),
        TypeError,
        "seed must be an integer",
    ),
    (lambda: toy_table([], SMALL), TypeError, "results must be a non-empty list"),
    (
        lambda: toy_table(
            [BankResult((dense_mlp(2),), (40,), np.ones((1, 1)), np.ones((1, 1)))], None
        ),  # fmt: skip
        TypeError,
        "config must be a ToyConfig",
    ),
    (lambda: toy_leverage(pd.DataFrame({"loss": [1.0]})), ValueError, "table lacks columns"),
    (lambda: ladder(0.3, (2,)), ValueError, "not a whole number"),
    (lambda: ladder(0.0, (2,)), ValueError, "A must lie in"),
    (lambda: wsd_lr(100, 100, SMALL), ValueError, "step must be <= 99"),
    (lambda: wsd_lr(0, 100, None), TypeError, "config must be a ToyConfig"),
    (lambda: make_memory_task(SMALL, 0).loss_of(np.zeros((3, 3))), ValueError, "predictions must"),
    (lambda: train_bank(None, [dense_mlp(2)], (40,), SMALL, 0), TypeError, "task must be"),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD_CALLS)
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(")):
        call()
