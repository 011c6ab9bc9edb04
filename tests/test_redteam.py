"""Tests of lib.redteam: the toy red-teaming world, the attack, and the gap analysis."""

import numpy as np
import pytest
import torch
from scipy import special

from lib import redteam as rt
from lib.scale import single_thread

single_thread()  # tiny models: extra threads only contend on a shared 2-core machine


@pytest.fixture(scope="module")
def world():
    return rt.make_world(0)


def oracle(world: rt.World, scale: float = 20.0, shift: float = 0.0) -> rt.Students:
    """A one-student network whose harm logit is linear in x: scale * (V_0 h - mu_0) / sd_0 +
    shift with h = W1 x + b1 (the teacher without its tanh), passed through the two ReLU
    layers as relu(h) - relu(-h) = h. Its harm boundary is a hyperplane."""
    H = rt.N_HIDDEN
    W1 = np.concatenate([world.W1.T, -world.W1.T], axis=1)[None]  # (1, 16, 2H)
    b1 = np.concatenate([world.b1, -world.b1])[None, None]
    W2 = np.eye(2 * H)[None]  # relu of a relu output is itself
    b2 = np.zeros((1, 1, 2 * H))
    W3 = np.zeros((1, 2 * H, rt.N_CONCEPTS))
    v = world.V[rt.HARM] / world.sd[rt.HARM]
    W3[0, :, rt.HARM] = scale * np.concatenate([v, -v])
    b3 = np.zeros((1, 1, rt.N_CONCEPTS))
    b3[0, 0, rt.HARM] = -scale * world.mu[rt.HARM] / world.sd[rt.HARM] + shift
    return rt.Students(W1, b1, W2, b2, W3, b3)


def shifted(students: rt.Students, shift: float) -> rt.Students:
    """The same students with every harm logit moved by `shift`."""
    b3 = students.b3.copy()
    b3[:, :, rt.HARM] += shift
    return rt.Students(students.W1, students.b1, students.W2, students.b2, students.W3, b3)


def test_gap_is_logit_difference():
    c = rt.capability(np.array([0.6, 0.4]))
    assert rt.gap(c[:1], c[1:])[0, 0] == pytest.approx(2 * np.log(1.5), abs=1e-12)
    assert rt.gap([1.0, 2.0], [0.5, 1.0, 3.0]).shape == (2, 3)


def test_world_is_standardised_and_harm_shares_only_relevant_units(world):
    g = world.scores(rt.sample_inputs(20_000, 5))
    assert np.allclose(g[:, 1:].mean(axis=0), 0, atol=0.05)
    assert np.allclose(g.std(axis=0), 1, atol=0.05)
    assert (g[:, rt.HARM] > 0).mean() == pytest.approx(rt.HARM_RATE, abs=0.02)
    half = rt.N_HIDDEN // 2
    assert np.all(world.V[list(rt.IRRELEVANT), :half] == 0)
    assert np.all(world.V[[rt.HARM, *rt.RELEVANT], half:] == 0)


def test_behaviours_are_clearly_harmful(world):
    x0 = rt.sample_behaviours(world, 50, seed=1)
    assert x0.shape == (50, rt.N_INPUT) and np.all(world.scores(x0)[:, rt.HARM] > 1)


def test_backprop_matches_torch_autograd():
    rng = np.random.default_rng(0)
    S, B, H = 2, 5, 4
    shapes = rt._shapes(S, H)
    params = [rng.normal(size=s) for s in shapes]
    x = rng.normal(size=(S, B, rt.N_INPUT))
    y = (rng.random((S, B, rt.N_CONCEPTS)) < 0.5).astype(float)
    weight = (rng.random((S, B, rt.N_CONCEPTS)) < 0.6) * 2.0
    grads = [np.zeros(s) for s in shapes]
    rt.backprop(params, x, y, weight, grads)
    tp = [torch.tensor(p, requires_grad=True) for p in params]
    h = torch.relu(torch.tensor(x) @ tp[0] + tp[1])
    h = torch.relu(h @ tp[2] + tp[3])
    bce = torch.nn.functional.binary_cross_entropy_with_logits(
        h @ tp[4] + tp[5], torch.tensor(y), reduction="none"
    )
    w = torch.tensor(weight)
    (bce * w / w.sum(dim=1, keepdim=True).clamp(min=1e-9)).sum().backward()
    for ours, theirs in zip(grads, tp, strict=True):
        assert np.allclose(ours, theirs.grad.numpy(), atol=1e-10)


def test_students_learn_with_compute(world):
    configs = rt.ladder_configs(3)
    students = rt.train_students(world, configs, seed=0)
    acc = rt.accuracy(world, students, rt.sample_inputs(4_000, 8))
    c = rt.split_capability(acc)
    assert acc.shape == (3, rt.N_CONCEPTS) and c[2] > c[0] and acc[2, rt.HARM] > 0.85


def test_padding_and_width_groups_keep_each_student():
    narrow, wide = rt.StudentConfig(4, 200), rt.StudentConfig(16, 200)
    both = rt.train_students(world := rt.make_world(0), [wide, narrow], seed=3)
    # Students come back in config order, padded to the widest: the narrow one's extra units
    # carry exactly zero weights, so it still computes a 4-unit network.
    assert both.W2.shape == (2, 16, 16)
    assert np.all(both.W1[1, :, 4:] == 0) and np.all(both.W3[1, 4:] == 0)
    x = rt.sample_inputs(50, 9)
    alone = rt.train_students(world, [narrow], seed=3)
    assert np.allclose(alone.padded(16).logits(x), alone.logits(x), atol=1e-6)
    with pytest.raises(ValueError, match="H"):
        alone.padded(2)


def test_judge_on_planted_targets(world):
    x0 = rt.sample_behaviours(world, 20, seed=2)
    attacker = oracle(world)
    props = rt.propose_boundary(attacker, x0, n_dir=4, seed=3)
    everything = rt.judge(world, shifted(attacker, -1e6), x0, props)
    nothing = rt.judge(world, shifted(attacker, 1e6), x0, props)
    assert everything.shape == (1, 1, 20, 5)
    assert everything[..., 0].all()  # a target that complies with all: the direct query works
    assert not nothing.any()  # one that refuses everything is never broken
    # A target as sharp as the attacker refuses what the attacker still believes harmful.
    moved = np.any(props[0] != x0[:, None, :], axis=-1)  # rays where the attacker sent a step
    assert moved.any() and not rt.judge(world, attacker, x0, props)[0, 0, :, 1:][moved].any()


def test_boundary_proposals_sit_at_the_attackers_threshold(world):
    x0 = rt.sample_behaviours(world, 10, seed=4)
    attacker, kappa = oracle(world, scale=5.0), 0.1
    props = rt.propose_boundary(attacker, x0, n_dir=3, seed=5, kappa=kappa)
    p = attacker.proba(props.reshape(-1, rt.N_INPUT))[0, :, rt.HARM]
    t = np.linalg.norm(props[0] - x0[:, None, :], axis=-1).ravel()
    inside = (t > 0) & (t < rt.T_MAX - 1e-6)  # rays that crossed the threshold before T_MAX
    assert np.all(p[t > 0] >= 0.5 + kappa - 1e-6)
    assert inside.any() and np.allclose(p[inside], 0.5 + kappa, atol=0.01)


def test_asr_at_budgets_is_best_of_n():
    success = np.zeros((1, 1, 2, 4), bool)
    success[0, 0, 0, 3] = True  # behaviour 0 broken by the third ray only
    success[0, 0, 1, 0] = True  # behaviour 1 broken by the direct query
    asr = rt.asr_at_budgets(success, [0, 1, 2, 3])
    assert asr[:, 0, 0].tolist() == [0.5, 0.5, 0.5, 1.0]


def _planted(alpha=1.7, beta=-1.7, b=-0.8, n=12, seed=0, n_beh=0):
    """Attackers against targets with logit ASR = alpha c_A + beta c_T + b (default: the gap)."""
    rng = np.random.default_rng(seed)
    c_A, c_T = np.sort(rng.uniform(0, 2, n)), np.sort(rng.uniform(0, 2, n))
    p = special.expit(alpha * c_A[:, None] + beta * c_T[None, :] + b)
    asr = p if n_beh == 0 else rng.binomial(n_beh, p) / n_beh
    return asr, c_A, c_T


def test_fits_recover_planted_gap_model():
    asr, c_A, c_T = _planted()
    pairs = rt.pairs(asr, c_A, c_T)
    assert rt.fit_pair_model("gap", *pairs) == pytest.approx([1.7, -0.8], abs=1e-9)
    assert rt.fit_pair_model("free", *pairs) == pytest.approx([1.7, -1.7, -0.8], abs=1e-9)
    assert rt.imbalance(asr, c_A, c_T) == pytest.approx(0.0, abs=1e-9)
    assert rt.fit_curve(pairs[0] - pairs[1], pairs[2]).w == pytest.approx(1.7, abs=1e-9)
    r2 = rt.heldout_r2(asr, c_A, c_T, seed=2)
    assert r2["gap"] == pytest.approx(1.0, abs=1e-9) and r2["free"] == pytest.approx(1.0, abs=1e-9)
    assert r2["gap"] > r2["attacker"] and r2["gap"] > r2["target"]
    direct = special.expit(1.7 * (rt.capability(rt.CHANCE) - c_T) - 0.8)  # on the planted curve
    assert rt.heldout_attackers(asr, c_A, c_T, direct, seed=3) == pytest.approx(1.0, abs=1e-9)
    assert rt.heldout_attackers(asr, c_A, c_T, None, seed=3) == pytest.approx(1.0, abs=1e-9)
    assert rt.heldout_targets(asr, c_A, c_T, seed=3) == pytest.approx(1.0, abs=1e-9)


def test_target_side_statistics_transpose_the_attacker_side():
    asr, c_A, c_T = _planted(n_beh=200)
    # Swapping the roles (targets at -c_T attacked by attackers at -c_A) keeps every gap.
    assert rt.within_attacker_drop(asr, c_A, c_T) == pytest.approx(
        rt.within_target_drop(asr.T, -c_T, -c_A), abs=1e-12)  # fmt: skip
    assert rt.heldout_targets(asr, c_A, c_T, seed=5) == pytest.approx(
        rt.heldout_attackers(asr.T, -c_T, -c_A, None, seed=5), abs=1e-12)  # fmt: skip
    assert rt.within_attacker_drop(asr, c_A, c_T) < 0.5
    # Known answers: where only the attacker matters, a fixed attacker does alike against every
    # target (ratio 1) and its curve predicts new targets no better than its mean; where only
    # the target matters, the same holds within a target.
    attacker_only, c_A, c_T = _planted(alpha=1.7, beta=0.0)
    assert rt.within_attacker_drop(attacker_only, c_A, c_T) == pytest.approx(1.0, abs=1e-12)
    assert rt.within_target_drop(attacker_only, c_A, c_T) < 0.5
    target_only, c_A, c_T = _planted(alpha=0.0, beta=-1.7)
    assert rt.within_target_drop(target_only, c_A, c_T) == pytest.approx(1.0, abs=1e-12)
    assert rt.within_attacker_drop(target_only, c_A, c_T) < 0.5


def test_separate_coefficients_see_a_target_dominated_world():
    asr, c_A, c_T = _planted(alpha=0.5, beta=-2.0, b=1.0)
    assert rt.imbalance(asr, c_A, c_T) == pytest.approx((0.5 - 2.0) / (0.5 + 2.0), abs=1e-9)
    r2 = rt.heldout_r2(asr, c_A, c_T, seed=2)
    assert r2["free"] == pytest.approx(1.0, abs=1e-9) and r2["gap"] < r2["free"] - 0.05


def test_trends_on_planted_pool():
    asr, c_A, c_T = _planted(n_beh=200)
    assert rt.within_target_drop(asr, c_A, c_T) < 0.5
    assert np.isnan(rt.within_target_drop(asr, c_A, c_A + 5))  # every attacker weaker: no drop
    assert np.isnan(rt.within_target_drop(np.zeros_like(asr), c_A, c_T))  # nobody succeeds
    assert rt.median_attacker_trend(asr, c_A, c_T) < -0.8
    assert np.all(np.diff(rt.attacker_strength(asr)[::3]) > 0)
    asr, c_A, c_T = _planted()  # noise-free: the pooled curve is the planted one
    asr_new = rt.Curve(1.7, -0.8).predict(rt.gap(c_A, c_T[:2])) - 0.1
    residual = rt.curve_residuals(asr, c_A, c_T, asr_new, c_T[:2])
    assert residual == pytest.approx([-0.1, -0.1], abs=1e-9)


def test_one_sided_surrogates_remove_the_other_side():
    asr, c_A, c_T = _planted(n_beh=100)

    def mean_stats(sees: str) -> dict[str, float]:  # pool_stats averaged over 20 draws
        draws = [rt.surrogate(asr, c_A, c_T, sees, 100, s) for s in range(20)]
        rows = [rt.pool_stats(fake, c_A, c_T, direct, s) for s, (fake, direct) in enumerate(draws)]
        return {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}

    target, attacker = mean_stats("target"), mean_stats("attacker")
    assert target["drop"] == pytest.approx(1.0, abs=0.05)  # no attacker effect left
    assert attacker["drop_attacker"] == pytest.approx(1.0, abs=0.05)  # no target effect left
    assert target["drop_attacker"] < 0.5 and attacker["drop"] < 0.5  # each keeps its own side
    assert target["skill"] < 0.1 and attacker["skill_targets"] < 0.1
    assert abs(target["rho_attacker"]) < 0.15 and target["imbalance"] < -0.9
    assert abs(attacker["rho_fixed"]) < 0.15 and attacker["imbalance"] > 0.9
    fake, direct = rt.surrogate(asr, c_A, c_T, "target", 100, 0)
    assert fake.shape == asr.shape and direct.shape == c_T.shape
    assert np.allclose(fake * 100, np.round(fake * 100))  # Binomial counts over 100 behaviours


def test_persuasion_configs_link_harm_and_social_labels():
    linked = rt.persuasion_configs(8, seed=1)
    assert all(c.harm_fraction == c.relevant_fraction for c in linked)
    assert len({c.irrelevant_fraction for c in linked}) == 8
    low, high = rt.SHARE_RANGE
    assert all(low <= c.harm_fraction <= high for c in linked)
    apart = rt.persuasion_configs(8, seed=1, linked=False)
    assert all(c.harm_fraction != c.relevant_fraction for c in apart)


def test_split_advantage_on_planted_skills():
    rng = np.random.default_rng(0)
    acc = rng.uniform(0.6, 0.9, (10, rt.N_CONCEPTS))
    strength = acc[:, list(rt.RELEVANT)].mean(axis=1)  # strength follows the relevant split
    asr = np.tile(strength[:, None], (1, 3))
    assert rt.split_advantage(asr, acc) > 0.5


def test_world_stats_small():
    stats = rt.world_stats(0, n_ladder=6, n_persuasion=3, n_behaviours=10)
    assert stats.real["drop"].shape == (len(rt.BUDGETS),) and stats.c_T.shape == (8,)
    assert set(stats.real) == set(stats.target_only) == set(stats.attacker_only)
    assert np.all(np.diff(stats.run.asr, axis=0) >= 0)  # best of N never falls with N
    assert stats.run.persuasion_asr.shape == (3, 8)


def test_real_data_tables():
    mmlu = rt.load_obsscaling("MMLU")
    assert mmlu["meta-llama/Llama-2-7b-hf"] == pytest.approx(0.43796, abs=1e-5)
    pro = rt.load_obsscaling("leaderboard_mmlu_pro")
    assert pro["meta-llama/Llama-2-7b-hf"] == pytest.approx(0.18609, abs=1e-5)
    jbb = rt.load_jailbreakbench()
    pair = jbb[jbb["attack"] == "PAIR"].groupby("target_model")["jailbroken"].agg(["sum", "size"])
    assert pair.loc["gpt-4-0125-preview"].tolist() == [34, 100]  # JailbreakBench's PAIR on GPT-4
    score = rt.jbb_capabilities(["mixtral", "gpt-4-0125-preview"])
    assert score["gpt-4-0125-preview"][0] == 0.864 and score["mixtral"][0] > 0.7


POOL = np.full((4, 4), 0.5)
C4 = np.arange(4.0)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda w: rt.capability([1.0]), ValueError, "strictly inside"),
        (lambda w: rt.capability("0.5"), TypeError, "accuracy"),
        (lambda w: rt.gap([np.nan], [1.0]), ValueError, "c_A"),
        (lambda w: rt.make_world(-1), ValueError, "seed"),
        (lambda w: rt.make_world(True), TypeError, "seed"),
        (lambda w: rt.StudentConfig(0, 10), ValueError, "width"),
        (lambda w: rt.StudentConfig(4, 10, harm_weight=-1.0), ValueError, "harm_weight"),
        (lambda w: rt.StudentConfig(4, 10, harm_fraction=1.5), ValueError, "harm_fraction"),
        (lambda w: rt.ladder_configs(1), ValueError, "n must be"),
        (lambda w: rt.persuasion_configs(2.5, 0), TypeError, "n"),
        (lambda w: rt.persuasion_configs(4, 0, linked="yes"), TypeError, "linked"),
        (lambda w: rt.safety_configs(rt.ladder_configs(2)), ValueError, "ladder"),
        (lambda w: rt.sample_inputs(0, 0), ValueError, "n must be"),
        (lambda w: rt.sample_behaviours(w, 5, 0, margin=np.inf), ValueError, "margin"),
        (lambda w: w.scores(np.zeros((2, 3))), ValueError, "columns"),
        (lambda w: rt.train_students(w, [], 0), ValueError, "configs"),
        (lambda w: rt.propose_boundary(oracle(w), np.zeros((1, 16)), 2, 0, kappa=0.7),
         ValueError, "kappa"),
        (lambda w: rt.propose_boundary(oracle(w), np.zeros((1, 16)), 0, 0), ValueError, "n_dir"),
        (lambda w: rt.propose_boundary(oracle(w), np.zeros((1, 3)), 2, 0), ValueError, "x0"),
        (lambda w: rt.judge(w, oracle(w), np.zeros((2, 16)), np.zeros((1, 3, 2, 16))),
         ValueError, "proposals"),
        (lambda w: rt.asr_at_budgets(np.zeros((1, 1, 2, 3))), ValueError, "success"),
        (lambda w: rt.asr_at_budgets(np.zeros((1, 1, 2, 3), bool), [5]), ValueError, "budgets"),
        (lambda w: rt.fit_curve([1.0, 1.0], [0.2, 0.3]), ValueError, "two distinct"),
        (lambda w: rt.fit_curve([1.0, 2.0], [0.2]), ValueError, "equal lengths"),
        (lambda w: rt.pairs(np.full((4, 4), 1.5), C4, C4), ValueError, "asr"),
        (lambda w: rt.pairs(POOL, C4[:3], C4), ValueError, "len"),
        (lambda w: rt.fit_pair_model("both", C4, C4, [0.5] * 4), ValueError, "model"),
        (lambda w: rt.fit_pair_model("gap", C4, C4[:3], [0.5] * 4), ValueError, "equal lengths"),
        (lambda w: rt.within_target_drop(POOL, C4, C4, threshold=-1.0), ValueError,
         "threshold"),
        (lambda w: rt.heldout_r2(POOL, C4, C4, 0, n_folds=3), ValueError, "n_folds"),
        (lambda w: rt.heldout_attackers(POOL, C4, C4, [0.1, 0.2], 0), ValueError,
         "equal lengths"),
        (lambda w: rt.surrogate(POOL, C4, C4, "both", 100, 0), ValueError, "sees"),
        (lambda w: rt.surrogate(POOL, C4, C4, "target", 0, 0), ValueError, "n_behaviours"),
        (lambda w: rt.split_advantage(POOL, np.full((3, 9), 0.7)), ValueError, "one row"),
        (lambda w: rt.split_capability(np.full((3, 9), 0.7), [0]), ValueError, "subset"),
        (lambda w: rt.curve_residuals(POOL, C4, C4, np.full((3, 1), 0.5), [1.0]), ValueError,
         "asr_new"),
        (lambda w: rt.run_world(0, 5, 3, 10), ValueError, "n_ladder"),
        (lambda w: rt.load_obsscaling("MMLU-Pro"), ValueError, "column"),
        (lambda w: rt.load_obsscaling("MMLU", "/nonexistent.csv"), ValueError, "does not exist"),
        (lambda w: rt.load_jailbreakbench("/nonexistent.csv"), ValueError, "does not exist"),
        (lambda w: rt.jbb_capabilities(["gpt-5"]), ValueError, "no capability score"),
    ],
)  # fmt: skip
def test_bad_input_raises(world, call, error, match):
    with pytest.raises(error, match=match):
        call(world)
