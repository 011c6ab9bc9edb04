"""Tests of lib.verifiers: closed forms, brute-force enumeration, quadrature and Monte Carlo."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from lib.verifiers import (
    Instance,
    argmax_random_ties,
    bon_accuracy,
    bon_on_stream,
    concavity_gap,
    judge_digits,
    limit_accuracy,
    predict_from_calibration,
    roc_from_scores,
    rs_accuracy,
    rs_curve,
    rs_on_stream,
    rs_threshold,
    simulate_bon,
    simulate_rs,
)

ORACLE = ([0.0, 0.0, 1.0], [0.0, 1.0, 1.0])
DIAGONAL = ([0.0, 1.0], [0.0, 1.0])


@pytest.mark.parametrize("pi", [0.1, 0.37, 0.9])
def test_oracle_gives_pass_at_n_and_diagonal_gives_pi(pi):
    n = np.array([1, 2, 5, 64, 10**5])
    np.testing.assert_allclose(bon_accuracy(*ORACLE, pi, n), 1 - (1 - pi) ** n, atol=1e-14)
    np.testing.assert_allclose(bon_accuracy(*DIAGONAL, pi, n), pi, atol=1e-14)
    assert limit_accuracy(*ORACLE, pi) == 1.0
    assert limit_accuracy(*DIAGONAL, pi) == pytest.approx(pi)


def test_roc_from_scores_explicit_example_with_ties():
    F, T = roc_from_scores(pos=[3, 2, 2], neg=[2, 1])
    np.testing.assert_allclose(F, [0, 0, 0.5, 1])
    np.testing.assert_allclose(T, [0, 1 / 3, 1, 1])


def _bon_by_enumeration(levels, p_pos, p_neg, pi, n):
    """Exact BoN over every tuple of n (score level, label) draws, ties split uniformly."""
    cells = [(s, 1, pi * p) for s, p in zip(levels, p_pos, strict=True)]
    cells += [(s, 0, (1 - pi) * p) for s, p in zip(levels, p_neg, strict=True)]
    acc = 0.0
    for draw in itertools.product(cells, repeat=n):
        top = max(c[0] for c in draw)
        tied = [c[1] for c in draw if c[0] == top]
        acc += np.prod([c[2] for c in draw]) * np.mean(tied)
    return acc


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_bon_matches_enumeration_for_discrete_scores_with_ties(n):
    levels, pi = [0, 1, 2, 3], 0.3
    p_pos, p_neg = [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]
    pos = np.repeat(levels, [1, 2, 3, 4])  # a sample whose empirical law is exactly p_pos
    neg = np.repeat(levels, [4, 3, 2, 1])
    F, T = roc_from_scores(pos, neg)
    assert bon_accuracy(F, T, pi, n) == pytest.approx(
        _bon_by_enumeration(levels, p_pos, p_neg, pi, n), abs=1e-12
    )


@pytest.mark.parametrize("n", [2, 8, 64])
def test_bon_matches_quadrature_of_both_forms_on_a_smooth_roc(n):
    pi, mu = 0.25, 1.5
    T_of_F = lambda f: norm.sf(norm.isf(f) - mu)  # noqa: E731  binormal ROC
    psi = lambda f: (1 - pi) * (1 - f) + pi * (1 - T_of_F(f))  # noqa: E731
    form_F = 1 - n * (1 - pi) * quad(lambda f: psi(f) ** (n - 1), 0, 1, limit=200)[0]
    dT = lambda f: norm.pdf(norm.isf(f) - mu) / norm.pdf(norm.isf(f))  # noqa: E731
    form_T = n * pi * quad(lambda f: psi(f) ** (n - 1) * dT(f), 0, 1, limit=200)[0]
    F, T = Instance(pi, mu).roc(per_unit=1000)
    assert form_F == pytest.approx(form_T, abs=1e-6)
    assert bon_accuracy(F, T, pi, n) == pytest.approx(form_F, abs=1e-4)


def test_rs_curve_and_rs_accuracy_agree_and_reach_the_limit():
    inst = Instance(pi=0.3, mu=2.0, rho=0.05)
    F, T = inst.roc()
    C, A = rs_curve(F, T, inst.pi)
    assert C[-1] == pytest.approx(1.0) and A[-1] == pytest.approx(inst.pi)  # F = 1: accept all
    np.testing.assert_allclose(rs_accuracy(F, T, inst.pi, C[::50]), A[::50], rtol=1e-10)
    assert inst.limit() == pytest.approx(0.3 / (0.3 + 0.05 * 0.7))
    assert limit_accuracy(F, T, inst.pi) == pytest.approx(inst.limit(), abs=1e-9)
    assert rs_accuracy(F, T, inst.pi, 1e30) == pytest.approx(inst.limit(), abs=1e-9)


def test_saturating_judge_limit_is_its_chord():
    inst = Instance(pi=0.3, mu=2.0, ceiling=2.0)
    F0, T0 = norm.sf(2.0), norm.sf(0.0)
    assert inst.limit() == pytest.approx(0.3 * T0 / (0.3 * T0 + 0.7 * F0))
    F, T = inst.roc()
    assert bon_accuracy(F, T, inst.pi, 10**5) == pytest.approx(inst.limit(), abs=1e-12)


def test_argmax_random_ties_is_uniform_over_ties():
    rng = np.random.default_rng(0)
    picks = argmax_random_ties(np.tile([1.0, 3.0, 3.0, 0.0, 3.0], (30000, 1)), rng)
    assert set(np.unique(picks)) == {1, 2, 4}
    np.testing.assert_allclose(np.bincount(picks, minlength=5)[[1, 2, 4]] / 30000, 1 / 3, atol=0.01)


def test_simulations_match_theory_within_4_se():
    inst, rng = Instance(pi=0.4, mu=1.5, rho=0.1), np.random.default_rng(1)
    F, T = inst.roc()
    acc, se = simulate_bon(inst.sample, 8, 20000, rng)
    assert abs(acc - bon_accuracy(F, T, inst.pi, 8)) < 4 * se
    tau = inst.threshold_for_compute(5.0)
    rs = simulate_rs(inst.sample, tau, 20000, rng)
    assert abs(rs.accuracy - rs_accuracy(F, T, inst.pi, 5.0)) < 4 * rs.accuracy_se
    assert abs(rs.compute - 5.0) < 4 * rs.compute_se


def test_predict_from_calibration_plug_in_and_bootstrap():
    scores = np.array([3.0, 2.0, 2.0, 2.0, 1.0])
    correct = np.array([True, True, True, False, False])
    p = predict_from_calibration(scores, correct, [1, 2], [2.0], n_boot=20,
                                 rng=np.random.default_rng(0))  # fmt: skip
    assert p.bon[0] == pytest.approx(0.6)
    assert p.rs_accuracy[0] == pytest.approx(3 / 4) and p.rs_compute[0] == pytest.approx(5 / 4)
    assert np.all(p.bon_lo <= p.bon) and np.all(p.bon <= p.bon_hi) and np.all(p.bon_lo < p.bon_hi)
    # Clopper-Pearson for 3 correct of 4 accepted draws
    assert p.rs_lo[0] == pytest.approx(0.19412044) and p.rs_hi[0] == pytest.approx(0.99369116)


def test_rs_interval_stays_open_when_every_accepted_draw_is_correct():
    scores = np.r_[np.linspace(2, 3, 20), np.linspace(0, 1, 80)]
    correct = np.r_[np.ones(20, bool), np.zeros(80, bool)]
    p = predict_from_calibration(scores, correct, [1], [2.0], n_boot=20,
                                 rng=np.random.default_rng(0))  # fmt: skip
    assert p.rs_accuracy[0] == 1.0 and p.rs_hi[0] == 1.0
    assert p.rs_lo[0] == pytest.approx(0.025 ** (1 / 20))  # exact lower bound for 20 of 20


def test_weighted_roc_equals_the_repeated_sample():
    pos, neg = np.array([3.0, 1.0, 2.0]), np.array([2.0, 0.0])
    F, T = roc_from_scores(pos, neg, pos_weight=[2, 1, 1], neg_weight=[3, 1])
    F2, T2 = roc_from_scores([3, 3, 1, 2], [2, 2, 2, 0])
    np.testing.assert_allclose(F, F2) and np.testing.assert_allclose(T, T2)
    assert F[-1] == T[-1] == 1.0


def test_judged_query_sampler_matches_its_exact_roc():
    query = judge_digits(0, 1, pool=300)[0]
    F, T = query.roc()
    assert query.pi == pytest.approx(query.answer_probs[query.correct])
    rng = np.random.default_rng(2)
    for n in (1, 4):
        acc, se = simulate_bon(query.sample, n, 20000, rng)
        assert abs(acc - bon_accuracy(F, T, query.pi, n)) < 4 * se + 1e-12
    assert (
        judge_digits(0, 2, pool=50)[1].pool.tobytes()
        == judge_digits(0, 2, pool=50)[1].pool.tobytes()
    )


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: bon_accuracy([0, np.nan, 1], [0, 0.5, 1], 0.3, 2), "fpr"),
        (lambda: bon_accuracy([0, 0.6, 0.4, 1], [0, 0.5, 0.6, 1], 0.3, 2), "non-decreasing"),
        (lambda: bon_accuracy([0, 1], [0, 0.5, 1], 0.3, 2), "equal lengths"),
        (lambda: bon_accuracy([0.1, 1], [0, 1], 0.3, 2), r"\(0, 0\)"),
        (lambda: bon_accuracy(*DIAGONAL, 1.2, 2), "base_acc"),
        (lambda: bon_accuracy(*DIAGONAL, 0.3, 0), "n must"),
        (lambda: bon_accuracy(*DIAGONAL, 0.3, 2.5), "n must"),
        (lambda: rs_accuracy(*DIAGONAL, 0.3, 0.5), "compute"),
        (lambda: rs_curve(*DIAGONAL, np.nan), "base_acc"),
        (lambda: roc_from_scores([], [1.0]), "pos"),
        (lambda: roc_from_scores([1.0], [np.inf]), "neg"),
        (lambda: Instance(pi=0.3, mu=-1.0), "mu"),
        (lambda: Instance(pi=0.3, mu=1.0, rho=1.0), "rho"),
        (lambda: Instance(pi=0.3, mu=1.0).threshold_for_compute(1.0), "compute"),
        (lambda: Instance(pi=0.3, mu=1.0).roc(per_unit=0), "per_unit"),
        (lambda: argmax_random_ties(np.zeros(3), np.random.default_rng(0)), "scores"),
        (lambda: simulate_rs(Instance(0.3, 1.0).sample, np.nan, 10, None), "threshold"),
        (lambda: predict_from_calibration([1.0, 2.0], [True, True], [1], [1.0], 2, None), "both"),
    ],
)
def test_bad_input_raises_value_error_naming_it(call, match):
    with pytest.raises((TypeError, ValueError), match=match):
        call()


def test_ceilings_change_the_roc_only_near_the_origin():
    low, none = Instance(pi=0.3, mu=2.0, ceiling=1.5), Instance(pi=0.3, mu=2.0)
    F0, T0 = low.rates(1.5)
    C = np.geomspace(1, 1 / (0.3 * T0 + 0.7 * F0), 30)
    np.testing.assert_array_equal(rs_accuracy(*low.roc(), 0.3, C), rs_accuracy(*none.roc(), 0.3, C))
    assert low.limit() < none.limit() == 1.0


def test_concavity_gap_of_known_rocs():
    assert concavity_gap(*ORACLE) == 0.0 and concavity_gap(*DIAGONAL) == 0.0
    assert concavity_gap([0, 0.5, 1], [0, 0, 1]) == pytest.approx(0.5)  # flat, then vertical
    assert concavity_gap([0, 0.2, 0.4, 1], [0, 0.1, 0.9, 1]) == pytest.approx(0.35)
    assert concavity_gap(*Instance(0.3, 2.0, rho=0.05).roc()) < 1e-12  # concave by construction
    assert concavity_gap(*Instance(0.3, 2.0, rho=0.1, delta=1.0).roc()) > 0.05


def test_bon_on_stream_uses_disjoint_groups_and_random_ties():
    rng = np.random.default_rng(0)
    scores, correct = np.array([3.0, 1.0, 0.0, 2.0, 5.0]), np.array([1, 0, 0, 1, 0], bool)
    assert bon_on_stream(scores, correct, 2, rng) == 1.0  # groups (3, 1), (0, 2); 5 dropped
    tied = np.tile([1.0, 1.0], 10000), np.tile([True, False], 10000)
    assert bon_on_stream(*tied, 2, rng) == pytest.approx(0.5, abs=0.02)
    with pytest.raises(ValueError, match="no group"):
        bon_on_stream(scores, correct, 6, rng)


def test_rs_threshold_randomises_at_the_tied_level():
    scores = np.repeat([0.0, 1.0, 2.0], [50, 30, 20])
    level, gamma = rs_threshold(scores, 4.0)  # P[s > 1] = 0.2 < 1/4 <= P[s >= 1] = 0.5
    assert level == 1.0 and gamma == pytest.approx((0.25 - 0.2) / 0.3)
    assert rs_threshold(scores, 10.0) == (2.0, pytest.approx(0.5))  # within the top level
    assert rs_threshold(scores, 1.0) == (0.0, 1.0)  # accept everything


def test_rs_on_stream_counts_episodes_and_draws():
    rng = np.random.default_rng(0)
    scores = np.array([0.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    correct = np.array([0, 1, 0, 0, 0, 1], bool)
    rs = rs_on_stream(scores, correct, 1.0, 1.0, rng)
    assert (rs.accuracy, rs.compute, rs.episodes) == (0.5, 2.5, 2)  # the last draw is dropped
    big = Instance(pi=0.4, mu=1.5, rho=0.1)
    s, c = big.sample(200000, rng)
    level, gamma = rs_threshold(s, 5.0)
    measured = rs_on_stream(s, c, level, gamma, rng)
    F, T = big.roc()
    assert measured.compute == pytest.approx(5.0, rel=0.03)
    assert measured.accuracy == pytest.approx(rs_accuracy(F, T, big.pi, 5.0), abs=0.01)
