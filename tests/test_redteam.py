"""Tests of lib.redteam: the toy red-teaming world, the attack, and the gap analysis."""

import numpy as np
import pytest
import torch
from scipy import special

from lib import redteam as rt
from lib.scale import single_thread

single_thread()  # tiny models: extra threads only contend on a shared 2-core machine


class Oracle(torch.nn.Module):
    """A model whose harm logit is `scale * g*_0(x)` plus `shift` (other concepts: 0)."""

    def __init__(self, world: rt.World, scale: float = 20.0, shift: float = 0.0):
        super().__init__()
        self.world, self.scale, self.shift = world, scale, shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(len(x), rt.N_CONCEPTS, dtype=torch.float64)
        g = torch.tensor(self.world.scores(x.double().numpy())[:, rt.HARM])
        out[:, rt.HARM] = self.scale * g + self.shift
        return out


@pytest.fixture(scope="module")
def world():
    return rt.make_world(0)


def test_gap_is_logit_difference():
    c = rt.capability(np.array([0.6, 0.4]))
    assert rt.gap(c[:1], c[1:])[0, 0] == pytest.approx(2 * np.log(1.5), abs=1e-12)
    assert rt.gap([1.0, 2.0], [0.5, 1.0, 3.0]).shape == (2, 3)


def test_world_is_standardised_and_harm_shares_only_relevant_units(world):
    g = world.scores(rt.sample_inputs(20_000, 5))
    assert np.allclose(g.mean(axis=0), 0, atol=0.05) and np.allclose(g.std(axis=0), 1, atol=0.05)
    half = rt.N_HIDDEN // 2
    assert np.all(world.V[list(rt.IRRELEVANT), :half] == 0)
    assert np.all(world.V[[rt.HARM, *rt.RELEVANT], half:] == 0)


def test_behaviours_are_clearly_harmful(world):
    x0 = rt.sample_behaviours(world, 50, seed=1)
    assert x0.shape == (50, rt.N_INPUT) and np.all(world.scores(x0)[:, rt.HARM] > 1)


def test_judge_on_planted_targets(world):
    x0 = rt.sample_behaviours(world, 20, seed=2)
    attacker = Oracle(world)
    props = rt.propose_boundary(attacker, x0, n_dir=4, kappa=0.05, seed=3)
    # A target that complies with everything: every behaviour succeeds via the direct query.
    assert rt.attack_success(world, Oracle(world, shift=-50), x0, props).all()
    # One that refuses everything never fails safe; one as sharp as the attacker refuses its
    # proposals, which the attacker placed where P(harm) = 0.55 > 0.5.
    assert not rt.attack_success(world, Oracle(world, shift=50), x0, props).any()
    assert not rt.attack_success(world, Oracle(world), x0, props).any()


def test_boundary_proposals_sit_at_the_attackers_threshold(world):
    x0 = rt.sample_behaviours(world, 10, seed=4)
    attacker, kappa = Oracle(world, scale=5.0), 0.1
    props = rt.propose_boundary(attacker, x0, n_dir=3, kappa=kappa, seed=5)
    p = rt.predict_proba(attacker, props.reshape(-1, rt.N_INPUT))[:, rt.HARM]
    t = np.linalg.norm(props - x0[:, None, :], axis=-1).ravel()
    inside = t < rt.T_MAX - 1e-6  # rays that crossed the threshold before T_MAX
    assert np.all(p >= 0.5 + kappa - 1e-9)
    assert inside.any() and np.allclose(p[inside], 0.5 + kappa, atol=0.01)


def test_random_proposals_are_believed_harmful_or_replaced(world):
    x0 = rt.sample_behaviours(world, 10, seed=6)
    attacker = Oracle(world)
    props = rt.propose_random(attacker, x0, n_dir=8, seed=7)
    p = rt.predict_proba(attacker, props.reshape(-1, rt.N_INPUT))[:, rt.HARM]
    same = np.all(props == x0[:, None, :], axis=-1).ravel()
    assert np.all((p > 0.5) | same)


def test_students_learn_with_compute(world):
    x_eval = rt.sample_inputs(2_000, 8)
    configs = [rt.StudentConfig(2, 50, 5), rt.StudentConfig(16, 2_000, 300)]
    pool = rt.train_pool(world, configs, seed=0, x_eval=x_eval)
    assert pool.accuracy.shape == (2, rt.N_CONCEPTS)
    c = pool.capability()
    assert c[1] > c[0] and pool.accuracy[1, rt.HARM] > 0.85


def _planted(w=1.7, b=-0.8, n_A=12, n_T=10, seed=0, n_beh=0):
    rng = np.random.default_rng(seed)
    c_A, c_T = np.sort(rng.uniform(0, 3, n_A)), np.sort(rng.uniform(0, 3, n_T))
    p = special.expit(w * rt.gap(c_A, c_T) + b)
    asr = p if n_beh == 0 else rng.binomial(n_beh, p) / n_beh
    return asr, c_A, c_T


def test_exact_sigmoid_is_recovered_and_predicted():
    asr, c_A, c_T = _planted()
    delta = rt.gap(c_A, c_T)
    # away from the clip level the fit is exact
    w, lo, hi = rt.pooled_slope_ci(asr, delta, n_bootstrap=50, seed=0)
    z = special.logit(np.clip(asr, rt.EPS, 1 - rt.EPS)).ravel()
    assert w == pytest.approx(np.polyfit(delta.ravel(), z, 1)[0], abs=1e-8)
    assert lo <= w <= hi
    r2_curve, r2_mean = rt.heldout_top_attackers(asr, delta, c_A)
    assert r2_curve > 0.99 and r2_mean < r2_curve
    r2_gap, r2_att = rt.leave_one_target_out(asr, delta, c_A)
    assert r2_gap > 0.99 and r2_gap - r2_att > 0.1


def test_binomial_noise_recovers_slope():
    ws = [rt.pooled_slope_ci(*_gap_args(s), n_bootstrap=1, seed=0)[0] for s in range(20)]
    assert abs(np.median(ws) - 1.7) < 0.3


def _gap_args(seed):
    asr, c_A, c_T = _planted(seed=seed, n_beh=100)
    return asr, rt.gap(c_A, c_T)


def test_gap_quantities_and_bootstrap_on_planted_world():
    asr, c_A, c_T = _planted(n_beh=100)
    q = rt.gap_quantities(asr, c_A, c_T)
    assert q["rho_attacker"] > 0.9 and q["rho_median_attacker"] < -0.9
    assert q["asr_low"] < 0.5 * q["asr_high"]
    rng = np.random.default_rng(0)
    success = rng.random((12, 10, 40)) < asr[..., None]
    draws = rt.bootstrap_behaviours(success, c_A, c_T, n_bootstrap=3, seed=0)
    assert draws.shape == (3, len(q)) and set(draws.columns) == set(q)


def test_small_helpers():
    assert rt.median_index([3.0, 1.0, 2.0, 4.0]) == 2
    assert rt.sharp_drop([[0.1, 0.9]], [[-1.0, 1.0]]) == (0.1, 0.9)
    acc = np.tile(np.linspace(0.6, 0.9, 5)[:, None], (1, rt.N_CONCEPTS))
    asr = np.tile(np.linspace(0.1, 0.5, 5)[:, None], (1, 3))
    assert rt.split_spearman(asr, acc, rt.RELEVANT) == pytest.approx(1.0)
    delta = np.tile(np.linspace(-1, 1, 5)[:, None], (1, 3))
    asr = special.expit(delta)
    res = rt.curve_residuals(asr, delta, asr[:, :1] - 0.1, delta[:, :1])
    assert res == pytest.approx([-0.1], abs=1e-9)


def test_real_mmlu_pro_table():
    df = rt.load_mmlu_pro()
    row = df[df["model"] == "meta-llama/Llama-2-7b-hf"].iloc[0]
    assert row["mmlu_pro"] == pytest.approx(0.18609, abs=1e-5) and row["family"] == "Llama-2"
    assert row["c"] == pytest.approx(special.logit(row["mmlu_pro"]))
    assert set(rt.PANFILOV2025_FAMILIES) == set(df["family"].dropna())


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda w: rt.capability([1.0]), "strictly inside"),
        (lambda w: rt.gap([np.nan], [1.0]), "c_A"),
        (lambda w: rt.StudentConfig(0, 10, 10), "width"),
        (lambda w: rt.StudentConfig(4, 10, 10, harm_weight=-1.0), "harm_weight"),
        (lambda w: rt.graded_configs(1), "n must be"),
        (lambda w: rt.sample_inputs(0, 0), "n must be"),
        (lambda w: w.scores(np.zeros((2, 3))), "columns"),
        (lambda w: rt.propose_boundary(Oracle(w), np.zeros((1, 16)), 2, 0.7, 0), "kappa"),
        (lambda w: rt.propose_boundary(Oracle(w), np.zeros((1, 16)), 0, 0.1, 0), "n_dir"),
        (lambda w: rt.sharp_drop([[1.5]], [[1.0]]), "asr"),
        (lambda w: rt.sharp_drop([[0.5, 0.5]], [[1.0]]), "shape"),
        (lambda w: rt.sharp_drop([[0.5]], [[1.0]]), "no pairs"),
        (lambda w: rt.heldout_top_attackers(np.full((4, 2), 0.5), np.zeros((4, 2)),
                                            np.arange(4.0), n_heldout=3), "n_heldout"),
        (lambda w: rt.leave_one_target_out(np.full((4, 2), 0.5), np.zeros((4, 2)),
                                           np.arange(4.0)), "3 targets"),
        (lambda w: rt.bootstrap_behaviours(np.zeros((2, 2)), [1.0, 2.0], [1.0, 2.0], 2, 0),
         "bool"),
        (lambda w: rt.split_spearman(np.full((2, 2), 0.5), np.full((2, 9), 0.7), [0]), "subset"),
        (lambda w: rt.load_mmlu_pro("/nonexistent.csv"), "does not exist"),
    ],
)  # fmt: skip
def test_bad_input_raises(world, call, match):
    with pytest.raises(ValueError, match=match):
        call(world)
