"""Tests of lib.synth: exact entropy rates against closed forms and Monte-Carlo estimates."""

import numpy as np
import pytest
from scipy.stats import entropy

from lib.synth import Language, MarkovChain, language_family, mix_chains, random_chain, split


def test_deterministic_cycle_has_zero_entropy_and_uniform_stationary():
    P = np.roll(np.eye(5), 1, axis=1)  # 0 -> 1 -> ... -> 4 -> 0
    chain = MarkovChain(P)
    assert chain.entropy_rate() == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(chain.stationary, np.full(5, 0.2))
    x = chain.sample(12, seed=3, n_streams=2)
    assert np.all((x[:, 1:] - x[:, :-1]) % 5 == 1)


@pytest.mark.parametrize("order", [1, 2])
def test_iid_uniform_has_entropy_log_v(order):
    V = 6
    chain = MarkovChain(np.full((V**order, V), 1.0 / V), order)
    assert chain.entropy_rate() == pytest.approx(np.log(V), rel=1e-12)


def test_two_state_chain_matches_closed_form():
    a, b = 0.3, 0.1  # P(0 -> 1) = a, P(1 -> 0) = b; pi = (b, a) / (a + b)
    chain = MarkovChain(np.array([[1 - a, a], [b, 1 - b]]))
    h = (b * entropy([a, 1 - a]) + a * entropy([b, 1 - b])) / (a + b)
    np.testing.assert_allclose(chain.stationary, [b / (a + b), a / (a + b)])
    assert chain.entropy_rate() == pytest.approx(h, rel=1e-12)


@pytest.mark.parametrize("order", [1, 2])
def test_sampled_nll_matches_exact_entropy_rate(order):
    chain = random_chain(12, order=order, n_support=4, alpha=1.0, seed=5)
    x = chain.sample(1000, seed=9, n_streams=128)
    per_stream = chain.nll(x).mean(axis=1)  # independent streams -> honest standard error
    se = per_stream.std(ddof=1) / np.sqrt(len(per_stream))
    assert abs(per_stream.mean() - chain.entropy_rate()) < 4 * se
    assert chain.entropy_rate() > 0.1


def test_random_chain_is_sparse_irreducible_and_seeded():
    chain = random_chain(10, order=2, n_support=3, seed=1)
    assert np.all((chain.next_probs > 0).sum(axis=1) <= 3)
    assert chain.stationary.min() > 0  # irreducible: every state visited
    np.testing.assert_array_equal(chain.next_probs, random_chain(10, 2, 3, seed=1).next_probs)
    np.testing.assert_array_equal(chain.sample(50, 2, 3), chain.sample(50, 2, 3))


def test_de_bruijn_cycle_visits_every_state():
    chain = random_chain(3, order=3, n_support=1, seed=0)  # only the de Bruijn successor
    assert chain.entropy_rate() == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(chain.stationary, np.full(27, 1 / 27))


def test_reducible_chain_is_rejected():
    with pytest.raises(ValueError, match="reducible"):
        _ = MarkovChain(np.eye(3)).stationary


def test_mix_chains_is_convex_combination():
    c1, c2 = random_chain(8, seed=1), random_chain(8, seed=2)
    mixed = mix_chains([c1, c2], [3.0, 1.0])
    np.testing.assert_allclose(mixed.next_probs, 0.75 * c1.next_probs + 0.25 * c2.next_probs)


def test_language_family_knobs():
    fam = language_family(3, 20, relatedness=1.0, token_overlap=0.0, seed=4)
    np.testing.assert_allclose(fam[0].chain.next_probs, fam[1].chain.next_probs)
    assert fam[0].vocab_size == 60
    assert len(set(fam[0].token_map) & set(fam[1].token_map)) == 0
    same = language_family(2, 20, relatedness=0.3, token_overlap=1.0, seed=4)
    np.testing.assert_array_equal(same[0].token_map, same[1].token_map)
    assert same[0].vocab_size == 20
    half = language_family(2, 20, relatedness=0.5, token_overlap=0.5, seed=4)
    assert len(set(half[0].token_map) & set(half[1].token_map)) == 10
    assert half[0].vocab_size == 30


def test_language_entropy_rate_is_exact_on_surface_tokens():
    lang = language_family(2, 16, relatedness=0.5, token_overlap=0.25, seed=2)[1]
    x = lang.sample(1000, seed=1, n_streams=64)
    assert x.max() < lang.vocab_size
    per_stream = lang.nll(x).mean(axis=1)
    se = per_stream.std(ddof=1) / np.sqrt(len(per_stream))
    assert abs(per_stream.mean() - lang.entropy_rate()) < 4 * se


def test_split_along_time():
    x = np.arange(20).reshape(2, 10)
    tr, va = split(x, 0.2)
    assert tr.shape == (2, 8) and va.shape == (2, 2)
    np.testing.assert_array_equal(np.concatenate([tr, va], axis=1), x)


def test_bad_inputs_raise_value_error_naming_the_argument():
    with pytest.raises(ValueError, match="next_probs"):
        MarkovChain(np.full((3, 3), 0.5))
    with pytest.raises(ValueError, match="next_probs"):
        MarkovChain(np.full((3, 3), np.nan))
    with pytest.raises(ValueError, match="order"):
        MarkovChain(np.full((3, 3), 1 / 3), order=2)
    chain = random_chain(4, seed=0)
    with pytest.raises(ValueError, match="length"):
        chain.sample(0, seed=0)
    with pytest.raises(ValueError, match="n_streams"):
        chain.sample(10, seed=0, n_streams=0)
    with pytest.raises(ValueError, match="tokens"):
        chain.nll(np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match="n_support"):
        random_chain(4, n_support=5)
    with pytest.raises(ValueError, match="alpha"):
        random_chain(4, alpha=float("inf"))
    with pytest.raises(ValueError, match="vocab_size"):
        random_chain(0)
    with pytest.raises(ValueError, match="weights"):
        mix_chains([chain], [-1.0])
    with pytest.raises(ValueError, match="order and vocab_size"):
        mix_chains([chain, random_chain(5, seed=0)], [1.0, 1.0])
    with pytest.raises(ValueError, match="relatedness"):
        language_family(2, 8, relatedness=1.5)
    with pytest.raises(ValueError, match="token_overlap"):
        language_family(2, 8, relatedness=0.5, token_overlap=-0.1)
    with pytest.raises(ValueError, match="token_map"):
        Language(chain, np.array([0, 0, 1, 2]), 4)
    with pytest.raises(ValueError, match="val_fraction"):
        split(np.arange(10), 1.0)
