"""Bad input to the shared library is a clear error: the right exception, naming the argument.

One row per bad call: (call, exception, words the message must contain). Chapter modules keep
their own tables in their test files; this one covers the modules every chapter shares. A bool
is never a number, NaN and inf never pass, strings are not arrays.
"""

from __future__ import annotations

import numpy as np
import pytest

from lib import fit, plotting, runs, settings, synth, validate, verifiers
from lib.claims import ClaimChecks, negative, rate_interval
from lib.lm import LMConfig, MoEConfig, count_params, d_ff_from_ratio, flops_per_token

X, Y = [1.0, 2.0, 4.0, 8.0, 16.0], [1.0, 0.6, 0.35, 0.2, 0.12]
NAN, INF = float("nan"), float("inf")
EVIDENCE = {
    "above": 0,
    "predicted": 1,
    "paper": "p",
    "control": negative("null", [0, 0, 0], alternative="a stand-in explanation"),
}
LM = LMConfig(vocab_size=16, d_model=8, n_layers=1, n_heads=2, n_kv_heads=2, d_ff=16, max_seq_len=8)


def train_config(**overrides):
    from lib.train import TrainConfig

    return TrainConfig(**({"steps": 2, "batch_size": 2, "seq_len": 4, "lr": 1e-3} | overrides))


def train_call(**overrides):
    from lib.train import train

    cfg = overrides.pop("cfg", LM)
    return train(cfg, train_config(), np.arange(64) % 16, **overrides)


def chapter():
    checks = ClaimChecks("99_bad_input", "bad input")
    checks.claim("a", "a claim", central=True)
    return checks


BAD_CALLS = [
    # lib.validate itself
    (lambda: validate.integer("n", True), TypeError, "n must be an integer"),
    (lambda: validate.integer("n", 2.0), TypeError, "n must be an integer"),
    (lambda: validate.integer("n", 0, minimum=1), ValueError, "n must be >= 1"),
    (lambda: validate.real("x", "0.1"), TypeError, "x must be a real number"),
    (lambda: validate.real("x", NAN), ValueError, "x must be finite"),
    (lambda: validate.real("x", 2.0, high=1.0), ValueError, r"x must lie in \[-inf, 1\]"),
    (lambda: validate.probability("p", 1.5), ValueError, "p must lie in"),
    (lambda: validate.choice("mode", "gpu", ("cpu",)), ValueError, "mode must be one of"),
    (lambda: validate.boolean("flag", 1), TypeError, "flag must be True or False"),
    (lambda: validate.text("name", 3), TypeError, "name must be a string"),
    (lambda: validate.array("x", "12"), TypeError, "x must be an array of numbers"),
    (lambda: validate.array("x", [[1.0]]), ValueError, "x must be a 1-D array"),
    (lambda: validate.array("x", []), ValueError, "x is empty"),
    (lambda: validate.array("x", [1.0, INF]), ValueError, "x contains NaN or inf"),
    (lambda: validate.array("x", [1.0, -1.0], positive=True), ValueError, "x must be > 0"),
    (lambda: validate.integer_array("n", [1, 2.5]), ValueError, "n must be whole numbers"),
    (lambda: validate.integer_array("n", [True]), TypeError, "not booleans"),
    (lambda: validate.same_length(x=[1], y=[1, 2]), ValueError, "equal lengths"),
    # lib.fit
    (lambda: fit.fit_power_law(X, Y, n_bootstrap=True), TypeError, "n_bootstrap"),
    (lambda: fit.fit_power_law(X, Y, n_bootstrap=-1), ValueError, "n_bootstrap"),
    (lambda: fit.fit_power_law(X, Y, seed=1.5), TypeError, "seed"),
    (lambda: fit.fit_power_law([2.0] * 5, Y), ValueError, "x has 1 distinct value"),
    (lambda: fit.fit_power_law("12345", Y), TypeError, "x must be an array"),
    (lambda: fit.fit_power_law(X, [1.0, NAN, 1.0, 1.0, 1.0]), ValueError, "y contains NaN"),
    (lambda: fit.fit_power_law(X, Y[:3]), ValueError, "equal lengths"),
    (lambda: fit.fit_power_law([-1.0, *X[1:]], Y), ValueError, "x must be > 0"),
    (lambda: fit.fit_saturating_power_law(X[:2], Y[:2]), ValueError, "at least 3 points"),
    (lambda: fit.fit_chinchilla(X, X, Y, huber_delta="x"), TypeError, "huber_delta"),
    (lambda: fit.fit_chinchilla(X, X, Y, huber_delta=0.0), ValueError, "huber_delta"),
    (lambda: fit.fit_chinchilla(X, X, Y, grid="fine"), ValueError, "grid must be one of"),
    (lambda: fit.fit_logistic(X, Y, lower=NAN), ValueError, "lower must be finite"),
    (lambda: fit.fit_logistic(X, Y, lower=1.0, upper=0.0), ValueError, "lower must be < upper"),
    (lambda: fit.fit_logit_linear(X, [0.1, 0.2, 1.5, 0.3, 0.4]), ValueError, "probabilities"),
    (lambda: fit.fit_logit_linear(X, [0.1] * 5, eps=0.7), ValueError, "eps must lie in"),
    (lambda: fit.r2_score([1.0, 1.0], [1.0, 2.0]), ValueError, "y is constant"),
    (lambda: fit.relative_error([0.0, 1.0], [1.0, 1.0]), ValueError, "y contains zeros"),
    # lib.lm
    (lambda: LMConfig(16, 8, 1, 2, 2, d_ff=True, max_seq_len=8), TypeError, "d_ff must be an"),
    (lambda: LMConfig(16, 8, 1, 2, 2, d_ff=2.5, max_seq_len=8), TypeError, "d_ff must be an"),
    (lambda: LMConfig(16, 8, 1, 2, 3, d_ff=16, max_seq_len=8), ValueError, "n_kv_heads"),
    (lambda: MoEConfig(4, 5, 8), ValueError, "top_k"),
    (lambda: MoEConfig(4, 2, 8, balance_coef=NAN), ValueError, "balance_coef must be finite"),
    (lambda: MoEConfig(4, 2, 8, n_shared=-1), ValueError, "n_shared must be >= 0"),
    (lambda: d_ff_from_ratio(8, "4"), TypeError, "mlp_ratio must be a real number"),
    (lambda: d_ff_from_ratio(8, 0.0), ValueError, "mlp_ratio must lie in"),
    (lambda: count_params("cfg"), ValueError, "must be an LMConfig"),
    (lambda: flops_per_token(LM, 0), ValueError, "seq_len must be >= 1"),
    # lib.train
    (lambda: train_config(steps=True), TypeError, "steps must be an integer"),
    (lambda: train_config(lr="0.1"), TypeError, "lr must be a real number"),
    (lambda: train_config(lr=-1.0), ValueError, "lr must lie in"),
    (lambda: train_config(lr=INF), ValueError, "lr must be finite"),
    (lambda: train_config(schedule="step"), ValueError, "schedule must be one of"),
    (lambda: train_config(betas=(0.9,)), TypeError, "betas must be a pair"),
    (lambda: train_config(betas=(0.9, 1.0)), ValueError, r"betas\[1\] must lie in"),
    (lambda: train_config(data_seed=-1), ValueError, "data_seed must be >= 0"),
    (lambda: train_call(device="gpu"), ValueError, "device must be one of"),
    (lambda: train_call(cfg="LM"), TypeError, "model_cfg must be an LMConfig"),
    # lib.synth
    (lambda: synth.random_chain(4, 1, seed=True), TypeError, "seed must be an integer"),
    (lambda: synth.random_chain(4, 0), ValueError, "order must be >= 1"),
    (lambda: synth.random_chain(4, 1, n_support=9), ValueError, "n_support"),
    (lambda: synth.random_chain(4, 1).nll(np.array([1.5, 2.0])), ValueError, "integer ids"),
    (lambda: synth.random_chain(4, 1).nll(np.array([], dtype=int)), ValueError, "last axis"),
    # lib.settings and lib.runs
    (lambda: settings.get("REPRO_SEEDS"), KeyError, "'REPRO_SEEDS' is not a setting"),
    (lambda: runs.seeds("", 3), ValueError, "stream must not be empty"),
    (lambda: runs.seeds("x", 0), ValueError, "n must be >= 1"),
    (lambda: runs.seeds("x", 2.0), TypeError, "n must be an integer"),
    (lambda: runs.run_jobs(print, [1], n_workers=0), ValueError, "n_workers must be >= 1"),
    # lib.plotting
    (lambda: plotting.plot_ours(None, [1, 2], [1], label="x"), ValueError, "same shape"),
    (lambda: plotting.plot_ours(None, [1, 2], [1, 2], lo=[0, 0], label="x"), ValueError, "both"),
    # lib.claims
    (lambda: rate_interval(5, 3), ValueError, "successes must be <= 3"),
    (lambda: rate_interval(1, True), TypeError, "trials must be an integer"),
    (
        lambda: chapter().audit("a", "q", 1.0, True, criterion="c", paper="p", digits=-1),
        ValueError,
        "digits must be >= 1",
    ),  # fmt: skip
    (
        lambda: chapter().evidence("a", "q", [1, 2, INF], **EVIDENCE),
        ValueError,
        "values contains NaN or inf",
    ),  # fmt: skip
    (
        lambda: negative("null", [0, NAN, 0], alternative="a stand-in explanation"),
        ValueError,
        "control values contains NaN or inf",
    ),  # fmt: skip
    (
        lambda: chapter().premise("a", "regime", 1.0, "yes", criterion="> 0", source="measured"),
        TypeError,
        "met must be True or False",
    ),  # fmt: skip
    # lib.verifiers
    (lambda: verifiers.bon_accuracy([0, 1], [0, 1], 0.3, True), TypeError, "not booleans"),
    (lambda: verifiers.bon_accuracy([0, 1], [0, 1], 0.3, 2.5), ValueError, "whole numbers"),
    (lambda: verifiers.bon_accuracy([0, 1], [0, 1], "0.3", 2), TypeError, "base_acc"),
    (lambda: verifiers.rs_accuracy([0, 1], [0, 1], 0.3, [NAN]), ValueError, "compute"),
    (lambda: verifiers.roc_from_scores([1.0], [0.0], pos_weight=[-1.0]), ValueError, "pos_weight"),
    (lambda: verifiers.judge_digits(0, 0), ValueError, "n_queries must be >= 1"),
    (lambda: verifiers.judge_digits(0, 5, noise=-0.1), ValueError, "noise must lie in"),
]


@pytest.mark.parametrize(("call", "error", "words"), BAD_CALLS)
def test_bad_call_is_a_clear_error(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_the_table_is_large_enough():
    assert len(BAD_CALLS) >= 60


def test_training_that_diverges_stops_with_a_clear_error():
    from lib.train import train

    cfg = train_config(steps=30, lr=1e6, grad_clip=0.0, weight_decay=0.0)
    with pytest.raises(FloatingPointError, match="training diverged"):
        train(LM, cfg, np.arange(256) % 16)
