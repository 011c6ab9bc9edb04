"""Tests of lib.arithmetic: encoding, exact answer distributions, training stops, the judge."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lib.arithmetic import (
    N_ANSWERS,
    AdderConfig,
    Judge,
    digit_logprobs,
    digits,
    fit_judge,
    problems_from_ids,
    prompts,
    sample_answers,
    train_adder,
)
from lib.train import build_model

TINY = AdderConfig(d_model=16, n_heads=2, d_ff=32, batch_size=16)


def _untrained(seed: int = 0):
    return build_model(TINY.lm_config(), seed).eval()


def test_encoding_of_a_problem():
    problems = problems_from_ids([123456, 999])
    np.testing.assert_array_equal(problems, [[123, 456], [0, 999]])
    np.testing.assert_array_equal(prompts(problems[:1]), [[1, 2, 3, 10, 4, 5, 6, 11]])
    np.testing.assert_array_equal(digits([579, 1998], 4), [[0, 5, 7, 9], [1, 9, 9, 8]])


def test_answer_distribution_is_exact_and_matches_sampling():
    from lib.arithmetic import answer_distribution

    model, problem = _untrained(), np.array([[417, 385]])
    probs = answer_distribution(model, problem[0])
    assert probs.shape == (N_ANSWERS,) and probs.sum() == pytest.approx(1.0, abs=1e-5)
    # each answer's probability is the product of its digits' conditionals
    answers = np.array([0, 802, 9999, 1234])
    joint = np.exp(digit_logprobs(model, np.repeat(problem, 4, axis=0), answers).sum(axis=1))
    np.testing.assert_allclose(probs[answers], joint, rtol=1e-4)
    # ancestral sampling at temperature 1 draws from the same law
    draws = sample_answers(model, np.repeat(problem, 8000, axis=0), seed=1)
    top = np.argsort(probs)[-3:]
    freq = np.array([(draws == a).mean() for a in top])
    assert np.all(np.abs(freq - probs[top]) < 4 * np.sqrt(probs[top] / 8000) + 1e-3)


def test_training_stops_at_the_target_or_at_max_steps():
    validation = problems_from_ids(np.arange(50))
    reached = train_adder(0, target=0.0, validation=validation, max_steps=30, config=TINY, every=5)
    assert reached.steps == 5 and reached.accuracy >= 0.0
    capped = train_adder(0, target=1.0, validation=validation, max_steps=3, config=TINY)
    assert capped.steps == 3 and capped.accuracy < 1.0
    assert not capped.model.training


def test_training_is_deterministic():
    validation = problems_from_ids(np.arange(20))
    a, b = (train_adder(3, 1.0, validation, 4, exclude=[1, 2], config=TINY) for _ in range(2))
    for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(p, q)


def test_judge_scores_average_sampled_verdicts():
    judge = Judge(_untrained(), np.zeros(4), 0.0, calls=10)  # p = 1/2 for every answer
    problems = problems_from_ids([5, 6])
    np.testing.assert_allclose(judge.prob(problems, [11, 12]), 0.5)
    scores = judge.scores(np.full(20000, 0.3), np.random.default_rng(0))
    assert set(np.unique(scores)) <= {k / 10 for k in range(11)}
    assert scores.mean() == pytest.approx(0.3, abs=0.01)


def test_fit_judge_learns_from_both_classes_and_refuses_one():
    model = _untrained()
    problems = problems_from_ids(np.arange(200))
    answers = problems.sum(axis=1) + np.where(np.arange(200) % 2 == 0, 0, 1)
    judge = fit_judge(model, problems, answers, np.arange(200) % 2 == 0, calls=5)
    assert judge.coef.shape == (4,) and judge.calls == 5
    with pytest.raises(ValueError, match="both right and wrong"):
        fit_judge(model, problems, answers, np.ones(200, bool), calls=5)
    with pytest.raises(TypeError, match="boolean"):
        fit_judge(model, problems, answers, np.ones(200), calls=5)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: problems_from_ids([10**6]), "ids must be <"),
        (lambda: problems_from_ids([-1]), "ids"),
        (lambda: train_adder(0, 1.5, problems_from_ids([1]), 3, config=TINY), "target"),
        (lambda: train_adder(0, 0.5, problems_from_ids([1]), 0, config=TINY), "max_steps"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises((TypeError, ValueError), match=match):
        call()
