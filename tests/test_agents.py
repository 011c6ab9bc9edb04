"""Environment, taxonomy, filters, objectives and the two execution paths (lib/agents.py)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from lib import agents as A
from lib.sandbox import run_sandboxed
from lib.scale import single_thread

single_thread()  # tiny models: extra threads only add contention on a shared machine

TABLE = {
    "c0": ["a", "a", "b", "b", "c", "d"] * 4,
    "c1": ["p", "q", "r", "p", "q", "r"] * 4,
    "x0": [10, 20, 30, 40, 50, 60] * 4,
    "x1": [5, 5, 5, 5, 5, 99] * 4,
}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    return A.make_tasks(24, tmp_path_factory.mktemp("tasks"), seed=0)


def _task_on(table, query, tmp_path, fmt="csv"):
    """A Task over a hand-made table (gold from the reference program)."""
    path = tmp_path / A.FILE_NAME
    A.write_table(table, path, fmt)
    loaded = {A.LOADER_OF[fmt]: A.load_table(path, A.LOADER_OF[fmt])}
    task = A.Task(0, query, fmt, path, loaded)
    _, gold = A.run_program(task, A.gold_program(query, A.LOADER_OF[fmt]))
    return A.Task(0, query, fmt, path, loaded, gold=gold)


# ------------------------------------------------------------------ environment and taxonomy
def test_action_language_has_57_distinct_actions():
    assert len(A.ACTIONS) == 57 == len(set(A.ACTIONS))
    assert len(A.VOCAB) == len(set(A.VOCAB))


def test_reward_and_the_3_percent_tolerance():
    assert A.is_correct(103, 100) and not A.is_correct(103.1, 100)
    assert A.is_correct(97, 100) and not A.is_correct(96.9, 100)
    assert A.is_correct("b", "b") and not A.is_correct("b", "c") and not A.is_correct(0, "a")
    assert not A.is_correct([100], 100) and not A.is_correct(float("nan"), 100)
    assert A.reward(100.0, 100) == 1.0 and A.reward(50, 100) == 0.0
    assert A.reward(None, 100) == -0.1 and A.reward(None, "a") == -0.1


def test_loaders_read_identical_rows_and_wrong_loaders_fail(tmp_path):
    tables = []
    for fmt in A.FORMATS:
        path = tmp_path / f"t.{fmt}"
        A.write_table(TABLE, path, fmt)
        tables.append(A.load_table(path, A.LOADER_OF[fmt]))
        for other in set(A.LOADERS) - {A.LOADER_OF[fmt]}:
            with pytest.raises(Exception):  # noqa: B017 (each format fails in its own way)
                A.load_table(path, other)
    assert tables[0] == tables[1] == tables[2]
    assert tables[0]["x0"] == tuple(TABLE["x0"]) and tables[0]["c1"] == tuple(TABLE["c1"])


def test_interpreter_known_answers(tmp_path):
    # c0 = 'a' rows: x0 in {10, 20}, four copies each
    q = A.Query("aggwhere", "c0", agg="MEAN", x="x0", Q0="a")
    assert _task_on(TABLE, q, tmp_path).gold == pytest.approx(15.0)
    # largest SUM of x1 by c1 is 'r' (5 + 99 per block); most rows: a three-way tie -> 'p'
    q = A.Query("argmax", "c1", inner_agg="SUM", inner_x="x1")
    assert _task_on(TABLE, q, tmp_path).gold == "r"
    q = A.Query("argmax", "c1", inner_agg="COUNT", inner_x="x1")
    assert _task_on(TABLE, q, tmp_path).gold == "p"
    # depth 3: among x0 > 35, largest SUM x0 by c0 is 'd'; then MAX x0 over all c0 = 'd' rows
    q = A.Query("compose3", "c0", agg="MAX", x="x0", inner_agg="SUM", inner_x="x0",
                thr="x0", Q1=35)  # fmt: skip
    task = _task_on(TABLE, q, tmp_path, "sqlite")
    assert task.gold == 60
    obs, _ = A.run_program(task, ("LOAD_CSV", "LOAD_SQL", "FILTER x0 EQ Q0", "AGG MEAN x1"))
    assert obs == ("ERR", "OK", "ERR", "VAL")
    obs, answer = A.run_program(task, ("LOAD_SQL", "FILTER x0 GT Q1", "FILTER x0 LT Q1", "ANSWER"))
    assert obs == ("OK", "OK", "EMPTY", "DONE") and answer is None


def test_composition_reuses_the_inner_program_and_adds_programs():
    inner = A.Query("argmax", "c0", inner_agg="SUM", inner_x="x1", thr="x0", Q1=50)
    outer = A.Query("compose3", "c0", agg="SUM", x="x0", inner_agg="SUM", inner_x="x1",
                    thr="x0", Q1=50)  # fmt: skip
    inner_steps = A.gold_program(inner, "LOAD_JSON")[:-1]
    assert A.gold_program(outer, "LOAD_JSON")[: len(inner_steps)] == inner_steps
    assert A.gold_program(outer, "LOAD_JSON")[len(inner_steps):] == (
        "RESET", "FILTER c0 EQ M0", "AGG SUM x0", "ANSWER")  # fmt: skip
    assert [A.sample_query(np.random.default_rng(0), d).depth for d in (1, 2, 3)] == [1, 2, 3]


def test_taxonomy_stats_count_programs_per_depth(tasks):
    stats = A.taxonomy_stats(tasks)
    assert [stats[d]["tasks"] for d in (1, 2, 3)] == [8, 8, 8]
    # depth-1 programs have 3-4 steps, depth 2 has 5, depth 3 has 7 (with the RESET)
    assert stats[2]["steps"] == 5 and stats[3]["steps"] == 7 and stats[1]["steps"] < 5
    assert all(1 <= stats[d]["distinct programs"] <= 8 for d in (1, 2, 3))


def test_gold_programs_agree_with_sandboxed_python(tasks):
    for task in tasks[:6]:  # two of each depth, mixed formats
        program = A.gold_program(task.query, A.LOADER_OF[task.fmt])
        result = run_sandboxed(A.compile_program(task, program), {A.FILE_NAME: task.path})
        assert result.ok, result.message
        obs, answer = A.parse_output(result.stdout)
        assert obs == "DONE" and A.is_correct(answer, task.gold) and A.is_correct(task.gold, answer)


# ------------------------------------------------------------------ the output parser is total
def test_parse_output_reads_observations_and_answers():
    assert A.parse_output("") == (None, None)
    assert A.parse_output("__OBS__ VAL\n__OBS__ DONE\n__ANSWER__ 'q'\n") == ("DONE", "q")
    assert A.parse_output("noise\n__OBS__ DONE\n__ANSWER__ 12.5") == ("DONE", 12.5)
    assert A.parse_output("__OBS__ DONE\n__ANSWER__ None") == ("DONE", None)


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("__OBS__", "observation ''"),  # was IndexError
        ("__OBS__ MAYBE", "not one of"),
        ("__ANSWER__ 1 +", "not a Python literal"),  # was SyntaxError
        ("__ANSWER__ nan", "not a Python literal"),  # was ValueError from literal_eval
        ("__ANSWER__ [1, 2]", "number or a string"),
        ("__ANSWER__ True", "number or a string"),
        ("__ANSWER__ " + "[" * 300, "characters"),  # deep nesting: RecursionError otherwise
        ("__ANSWER__ '\\x", "not a Python literal"),
    ],
)
def test_garbled_output_is_a_typed_error(stdout, message):
    with pytest.raises(A.OutputError, match=message):
        A.parse_output(stdout)


class ScriptedPolicy:
    """Stands in for a network: picks script[turn], reading the turn from the features."""

    def __init__(self, script):
        self.script = script

    def __call__(self, X):
        turn = int(X[0, A._F_TURN :].argmax())
        logits = torch.zeros(1, len(A.ACTIONS))
        logits[0, A.ACTION_ID[self.script[turn]]] = 1.0
        return logits


def test_multi_turn_code_rollout_matches_the_interpreter_and_reports_errors(tasks):
    task = next(t for t in tasks if t.query.family == "argmax" and t.fmt != "json")
    q = task.query
    script = ("LOAD_JSON", "FILTER c0 GT Q0", *A.gold_program(q, A.LOADER_OF[task.fmt]))
    traj, turns = A.code_rollout(ScriptedPolicy(script), task)
    obs, answer = A.run_program(task, script)
    assert traj.observations == obs and traj.answer == answer == task.gold
    assert [t.status for t in turns[:2]] == ["error", "error"] and turns[0].message
    assert [t.action for t in turns] == list(script) and traj.reward == 1.0


# ------------------------------------------------------------------ synthesis and filtering
def _traj(task, actions, observations, answer):
    return A.Trajectory(task, actions, observations, answer, A.reward(answer, task.gold))


def test_rule_and_self_consistency_filters(tasks):
    t = tasks[0]
    good = ("LOAD_CSV", "AGG SUM x0", "ANSWER"), ("OK", "VAL", "DONE")
    a = _traj(t, *good, 100.0)
    b = _traj(t, ("LOAD_JSON", *good[0]), ("ERR", *good[1]), 102.0)  # loader error is fine
    c = _traj(t, *good, 50.0)
    bad = _traj(t, ("LOAD_CSV", "FILTER x0 EQ Q0", "ANSWER"), ("OK", "ERR", "DONE"), 100.0)
    assert A.passes_rules(a) and A.passes_rules(b) and not A.passes_rules(bad)
    assert A.self_consistent([b, c, a]) is a  # 100 and 102 agree within 3 %; a is shorter
    assert A.self_consistent([a, c, bad]) is None  # the rule filter drops bad: no majority
    assert A.self_consistent([a, c], min_agree=1) in (a, c)


def test_the_blind_spot_is_a_column_confusion_every_sample_repeats(tmp_path):
    assert A.misread("ARGMAX c1 SUM x1") == "ARGMAX c1 SUM x0"
    assert A.misread("ARGMAX c0 SUM x1") == "ARGMAX c0 SUM x0"
    assert A.misread("ARGMAX c1 COUNT x1") == "ARGMAX c1 COUNT x1"
    # by c1, the largest SUM of x1 is 'r' but of x0 it is 'r' too (60 per block): no bite
    q = A.Query("argmax", "c1", inner_agg="SUM", inner_x="x1")
    assert not A.blind_spot_bites(_task_on(TABLE, q, tmp_path))
    # by c0, x1 totals pick 'd' (99 per block) but x0 totals pick 'b' (70 per block): bites
    q = A.Query("argmax", "c0", inner_agg="SUM", inner_x="x1")
    task = _task_on(TABLE, q, tmp_path)
    assert task.gold == "d" and A.blind_spot_bites(task)
    never_wrong = A.Expert(0.0, 0.0, 0.0, blind_spot=True)
    samples = [A.sample_trajectory(task, never_wrong, np.random.default_rng(i)) for i in range(3)]
    assert {s.answer for s in samples} == {"b"} and A.self_consistent(samples).answer == "b"


def test_knowledge_and_filtering_raise_demo_precision(tasks):
    raw = A.synthesize_demos(tasks, A.EXPERT_RAW, 3, seed=0)
    hinted = A.synthesize_demos(tasks, A.EXPERT_HINTED, 3, seed=0)
    assert set(raw) == set(A.FILTERS) and len(raw["unfiltered"]) == len(tasks)
    precision = {k: np.mean([d.correct for d in v]) for k, v in raw.items()}
    assert precision["filtered"] > precision["unfiltered"]
    assert np.mean([d.correct for d in hinted["unfiltered"]]) > precision["unfiltered"]
    assert all(A.passes_rules(d) for d in hinted["filtered"] + hinted["vote only"])


def test_the_filters_share_samples_and_the_blind_filter_keeps_as_many(tasks):
    sets = A.synthesize_demos(tasks, A.EXPERT_RAW, 3, seed=4)
    kept = len(sets["filtered"])
    assert 0 < kept < len(tasks)  # the hint-free expert disagrees with itself on some tasks
    assert len(sets["random"]) == len(sets["vote only"]) == kept
    assert len({d.task.task_id for d in sets["random"]}) == kept  # one demo per task
    # the filtered demo is the most concise member of the agreeing group the vote-only one is from
    for concise, voted in zip(sets["filtered"], sets["vote only"], strict=True):
        assert concise.task is voted.task and A.is_correct(concise.answer, voted.answer)
        assert len(concise.actions) <= len(voted.actions)
    again = A.synthesize_demos(tasks, A.EXPERT_RAW, 3, seed=4)
    assert [d.actions for d in again["random"]] == [d.actions for d in sets["random"]]


def test_agreeing_returns_the_largest_agreeing_group(tasks):
    task = tasks[0]
    right = _traj(task, (A.LOADER_OF[task.fmt], "ANSWER"), ("OK", "DONE"), task.gold)
    wrong = _traj(task, (A.LOADER_OF[task.fmt], "ANSWER"), ("OK", "DONE"), "zz")
    assert A.agreeing([right, wrong, right]) == [right, right]
    assert A.agreeing([right, wrong]) == [] and A.agreeing([right, wrong], min_agree=1) == [right]
    assert A.self_consistent([right, wrong]) is None


# ------------------------------------------------------------------ objectives
def test_mu_schedule_matches_the_closed_form():
    assert A.mu_schedule(0, 350) == pytest.approx(0.9)
    assert A.mu_schedule(175, 350) == pytest.approx(0.475)
    assert A.mu_schedule(350, 350) == pytest.approx(0.05)
    assert A.mu_schedule(900, 350) == pytest.approx(0.05)
    assert A.mu_schedule(175, 350, "linear") == pytest.approx(0.475)
    assert A.mu_schedule(87, 350, "constant") == pytest.approx(0.475)
    assert A.mu_schedule(5, 350, k_w=10) == pytest.approx(0.45)


def test_grpo_advantages_are_group_normalised_and_flat_groups_dropped():
    r = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, -0.1, -0.1]])
    A_, keep = A.grpo_advantages(r)
    assert keep.tolist() == [True, False, True]
    sd = np.std([1, 0, 0, 0], ddof=1)  # unbiased, as torch.std
    assert A_[0].tolist() == pytest.approx([0.75 / sd, -0.25 / sd, -0.25 / sd, -0.25 / sd], 1e-5)
    assert A_[1].tolist() == [0, 0, 0, 0]
    assert A_[2].sum() == pytest.approx(0, abs=1e-6) and A_[2, 0] == pytest.approx(0.866, 1e-3)


def test_ppo_loss_clips_the_ratio_asymmetrically():
    old = torch.zeros(4)
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0])
    # at ratio 1 the surrogate is -mean(A)
    assert A.ppo_loss(old, old, adv).item() == pytest.approx(0.0)
    # ratio 2 for A > 0 is clipped at 1.28; ratio 0.5 for A < 0 at 0.8; ratio 10 for A < 0 at 3
    logp = torch.log(torch.tensor([2.0, 1.0, 0.5, 10.0]))
    expected = (-1.28 - 1.0 + 0.8 + 3.0) / 4
    assert A.ppo_loss(logp, old, adv).item() == pytest.approx(expected)


def test_rl_raises_the_probability_of_better_than_average_actions(tasks):
    policy = A.make_policy(seed=0)
    X, _, _ = A.encode([_traj(tasks[0], ("ANSWER",), ("DONE",), tasks[0].gold)])
    before = policy(X).log_softmax(-1)[0, A.ACTION_ID["ANSWER"]].detach()
    A_, _ = A.grpo_advantages(np.array([[1.0, -0.1]]))
    actions = torch.tensor([A.ACTION_ID["ANSWER"], A.ACTION_ID["RESET"]])
    logp = policy(torch.cat([X, X])).log_softmax(-1).gather(-1, actions[:, None])[:, 0]
    loss = A.ppo_loss(logp, logp.detach(), A_.reshape(-1))
    loss.backward()
    with torch.no_grad():
        for p in policy.parameters():
            p -= 0.1 * p.grad
    assert policy(X).log_softmax(-1)[0, A.ACTION_ID["ANSWER"]] > before


def test_rollout_decisions_equal_history_features(tasks):
    policy = A.make_policy(seed=1)
    gen = torch.Generator().manual_seed(0)
    trajs, dec = A._play(policy, tasks[:3], 1.0, False, gen)
    order = torch.argsort(dec.owner, stable=True)  # play order is turn-major
    X, y, owner = A.encode(trajs)
    assert torch.equal(dec.X[order], X) and torch.equal(dec.y[order], y)
    assert torch.equal(dec.owner[order], owner)
    logp = (policy(dec.X) / 1.0).log_softmax(-1).gather(-1, dec.y[:, None])[:, 0]
    assert torch.allclose(logp, dec.logp, atol=1e-6)


def test_sft_learns_its_demonstrations_and_runs_are_reproducible(tasks):
    demos = A.synthesize_demos(tasks, A.EXPERT_HINTED, 3, seed=1)["filtered"]
    cfg = A.TrainConfig(updates=150, prompts=8)
    result = A.train_policy("sft", demos, cfg, seed=0)
    assert result.mu == (1.0,) * 150 and result.env_steps == 0
    same = A.sample_correct(result.policy, [d.task for d in demos], runs=2, temperature=0.1)
    assert same.shape == (len(demos), 2)
    agree = np.mean([d.correct for d in demos])
    assert same.mean() >= agree - 0.15  # it learns what the demos do (they are ~95% right)
    again = A.train_policy("sft", demos, cfg, seed=0)
    pairs = zip(result.policy.parameters(), again.policy.parameters(), strict=True)
    assert all(torch.equal(p, q) for p, q in pairs)


def test_mix_records_its_schedule_rewards_and_informative_groups(tasks):
    demos = A.synthesize_demos(tasks, A.EXPERT_HINTED, 3, seed=1)["filtered"]
    cfg = A.TrainConfig(updates=4, prompts=8, minibatches=2)
    result = A.train_policy("mix", demos, cfg, seed=0)
    assert result.mu[0] == pytest.approx(0.9) and len(result.mean_reward) == 4
    assert all(0 <= f <= 1 for f in result.informative) and result.env_steps > 0


def test_regime_weights():
    cfg = A.TrainConfig(updates=10)
    assert [A.sft_weight("sft_then_rl", k, cfg) for k in (0, 4, 5, 9)] == [1, 1, 0, 0]
    assert A.sft_weight("rl", 0, cfg) == 0 and A.sft_weight("sft", 3, cfg) == 1
    assert A.sft_weight("mix", 0, cfg) == pytest.approx(0.9)


def test_rollout_seed_changes_only_the_rollouts(tasks):
    demos = A.synthesize_demos(tasks, A.EXPERT_HINTED, 3, seed=1)["filtered"]
    cfg = A.TrainConfig(updates=3, prompts=8)
    params = lambda r: [p.detach().clone() for p in r.policy.parameters()]  # noqa: E731
    sft = [params(A.train_policy("sft", demos, cfg, 0, rollout_seed=s)) for s in (0, 7)]
    assert all(torch.equal(p, q) for p, q in zip(*sft, strict=True))  # SFT plays no rollouts
    mix = [A.train_policy("mix", demos, cfg, 0, rollout_seed=s) for s in (0, 0, 7)]
    assert all(torch.equal(p, q) for p, q in zip(params(mix[0]), params(mix[1]), strict=True))
    assert not all(torch.equal(p, q) for p, q in zip(params(mix[0]), params(mix[2]), strict=True))


def test_shuffled_rewards_feed_the_learner_a_permutation(tasks):
    demos = A.synthesize_demos(tasks, A.EXPERT_HINTED, 3, seed=1)["unfiltered"]
    policy = A.train_policy("sft", demos, A.TrainConfig(updates=30, prompts=8), 0).policy
    plain, shuffled = (A._rl_batch(policy, tasks[:8], A.TrainConfig(shuffle_rewards=flag),
                                   torch.Generator().manual_seed(0))
                       for flag in (False, True))  # fmt: skip
    assert np.array_equal(plain.rewards, shuffled.rewards)  # recorded: the true rewards
    assert plain.keep.any()  # some groups carry signal, so a permutation can move it
    assert np.array_equal(plain.keep, A.grpo_advantages(plain.rewards)[1].numpy())
    assert not np.array_equal(shuffled.keep, plain.keep) or not torch.equal(
        shuffled.advantage, plain.advantage)  # fmt: skip


def test_run_replicate_trains_every_run_on_the_same_tasks():
    runs = (("sft", A.Run("sft", filtering="unfiltered")),
            ("blind", A.Run("sft", filtering="random")), ("mix", A.Run("mix")),
            ("constant", A.Run("mix", schedule="constant", rerun=1)),
            ("hint-free", A.Run("sft", hints=False)))  # fmt: skip
    design = A.Design(n_train=24, n_heldout=12, train=A.TrainConfig(updates=2, prompts=8),
                      runs=runs)  # fmt: skip
    result = A.run_replicate(3, design)
    assert set(result.correct) == set(result.policies) == {name for name, _ in runs}
    assert all(c.shape == (12, 3) for c in result.correct.values())
    assert result.depth.shape == result.blind.shape == (12,)
    assert set(result.precision) == {f"{h}, {f}" for h in ("hints", "no hints") for f in A.FILTERS}
    assert all(0 <= p <= 1 for p in result.precision.values())
    assert result.kept["hints, unfiltered"] == 24
    assert result.kept["hints, random"] == result.kept["hints, filtered"]
    assert result.env_steps["sft"] == 0 < result.env_steps["mix"]
    assert A.Run("sft", hints=False, filtering="vote only").demos == "no hints, vote only"


# ------------------------------------------------------------------ bad calls (issue 20)
@pytest.fixture(scope="module")
def one_task(tasks):
    return tasks[0]


BAD_CALLS = [
    # (call, error, message)
    (lambda t: A.Query("pivot", "c0"), ValueError, "family"),
    (lambda t: A.Query("argmax", "x0"), ValueError, "g must be"),
    (lambda t: A.Query("aggwhere", "c0", agg="MEDIAN"), ValueError, "agg"),
    (lambda t: A.Query("compose3", "c0", Q1=True), TypeError, "Q1"),
    (lambda t: A.sample_query(np.random.default_rng(0), 4), ValueError, "depth"),
    (lambda t: A.sample_query(0, 1), TypeError, "rng"),
    (lambda t: A.gold_program(A.Query("argmax", "c0"), "LOAD_XML"), ValueError, "loader"),
    (lambda t: A.gold_program("argmax", "LOAD_CSV"), TypeError, "query"),
    (lambda t: A.write_table(TABLE, "unused", "xlsx"), ValueError, "fmt"),
    (lambda t: A.write_table({"c0": []}, "unused", "csv"), ValueError, "table"),
    (lambda t: A.load_table("unused", "LOAD_XML"), ValueError, "loader"),
    (lambda t: A.make_tasks(0, ".", 0), ValueError, "n must be"),
    (lambda t: A.make_tasks(True, ".", 0), TypeError, "n must be"),
    (lambda t: A.make_tasks(2, ".", -1), ValueError, "seed"),
    (lambda t: A.step(t, A.State(), "DROP"), ValueError, "action"),
    (lambda t: A.run_program(t, ("LOAD_XML",)), ValueError, "not in ACTIONS"),
    (lambda t: A.run_program(t, "LOAD_CSV"), TypeError, "actions"),
    (lambda t: A.is_correct(1.0, float("nan")), ValueError, "gold"),
    (lambda t: A.reward(None, [1]), TypeError, "gold"),
    (lambda t: A.Expert(1.5, 0.1, 0.1), ValueError, "p_confuse"),
    (lambda t: A.Expert(0.1, float("nan"), 0.1), ValueError, "p_arg"),
    (lambda t: A.Expert(0.1, 0.1, 0.1, blind_spot=1), TypeError, "blind_spot"),
    (lambda t: A.misread("ARGMAX c2 SUM x1"), ValueError, "action"),
    (lambda t: A.blind_spot_bites("task"), TypeError, "task"),
    (lambda t: A.sample_trajectory(t, A.EXPERT_RAW, 0), TypeError, "rng"),
    (lambda t: A.passes_rules(None), TypeError, "t must be"),
    (lambda t: A.self_consistent([], min_agree=0), ValueError, "min_agree"),
    (lambda t: A.agreeing([t]), TypeError, "samples"),
    (lambda t: A.synthesize_demos([t], A.EXPERT_RAW, 0, 0), ValueError, "K"),
    (lambda t: A.synthesize_demos([t], "expert", 1, 0), TypeError, "expert"),
    (lambda t: A.taxonomy_stats([]), ValueError, "tasks is empty"),
    (lambda t: A.compile_action("DROP TABLE"), ValueError, "action"),
    (lambda t: A.compile_program(t, ("LOAD_XML",)), ValueError, "not in ACTIONS"),
    (lambda t: A.prelude(None), TypeError, "task"),
    (lambda t: A.parse_output(b"__OBS__ OK"), TypeError, "stdout"),
    (lambda t: A.mu_schedule(1, 0), ValueError, "k_d"),
    (lambda t: A.mu_schedule(1, 10, "exp"), ValueError, "kind"),
    (lambda t: A.mu_schedule(float("nan"), 10), TypeError, "k must be"),
    (lambda t: A.mu_schedule(True, 10), TypeError, "k must be"),
    (lambda t: A.mu_schedule(1.5, 10), TypeError, "k must be"),
    (lambda t: A.mu_schedule(1, 10, mu_peak=5), ValueError, "mu_peak"),
    (lambda t: A.mu_schedule(1, 10, mu_peak=float("inf")), ValueError, "mu_peak"),
    (lambda t: A.mu_schedule(1, 10, mu_valley=-0.1), ValueError, "mu_valley"),
    (lambda t: A.mu_schedule(1, 10, mu_peak=0.1, mu_valley=0.5), ValueError, "exceed"),
    (lambda t: A.mu_schedule(1, 10, k_w=-1), ValueError, "k_w"),
    (lambda t: A.history_features(t.query, ("RESET",), ()), ValueError, "equal-length"),
    (lambda t: A.history_features(t.query, ("RESET",), ("MAYBE",)), ValueError, "OBSERVATIONS"),
    (lambda t: A.encode([1]), TypeError, "trajectories"),
    (lambda t: A.make_policy(d=0), ValueError, "d must be"),
    (lambda t: A.make_policy(d=8.0), TypeError, "d must be"),
    (lambda t: A.rollout(None, [t]), TypeError, "policy"),
    (lambda t: A.rollout(A.make_policy(), [t], temperature=0), ValueError, "temperature"),
    (lambda t: A.rollout(A.make_policy(), [], 1), ValueError, "tasks is empty"),
    (lambda t: A.grpo_advantages([[1.0, float("nan")]]), ValueError, "rewards"),
    (lambda t: A.grpo_advantages([[1.0], [0.0]]), ValueError, "groups"),
    (lambda t: A.ppo_loss([0.0], [0.0], [1.0]), TypeError, "logp"),
    (lambda t: A.ppo_loss(*[torch.zeros(2)] * 3, clip_low=1.5), ValueError, "clip_low"),
    (lambda t: A.TrainConfig(group_size=1), ValueError, "group_size"),
    (lambda t: A.TrainConfig(updates=True), TypeError, "updates"),
    (lambda t: A.TrainConfig(lr=1e6), ValueError, "lr"),
    (lambda t: A.TrainConfig(lr=float("nan")), ValueError, "lr"),
    (lambda t: A.TrainConfig(schedule="step"), ValueError, "schedule"),
    (lambda t: A.TrainConfig(prompts=2, minibatches=4), ValueError, "minibatches"),
    (lambda t: A.TrainConfig(shuffle_rewards=1), TypeError, "shuffle_rewards"),
    (lambda t: A.sft_weight("dpo", 0, A.TrainConfig()), ValueError, "regime"),
    (lambda t: A.sft_weight("mix", -1, A.TrainConfig()), ValueError, "k must be"),
    (lambda t: A.train_policy("mix", [], A.TrainConfig(updates=1), 0), ValueError, "demos"),
    (lambda t: A.train_policy("mix", [1], A.TrainConfig(updates=1), 0), TypeError, "demos"),
    (
        lambda t: A.train_policy(
            "sft",
            [A.sample_trajectory(t, A.EXPERT_RAW, np.random.default_rng(0))],
            A.TrainConfig(),
            0,
            -1,
        ),
        ValueError,
        "rollout_seed",
    ),
    (lambda t: A.sample_correct(A.make_policy(), [t], runs=0), ValueError, "runs"),
    (lambda t: A.code_rollout(A.make_policy(), "task"), TypeError, "task"),
    (lambda t: A.Run("dpo"), ValueError, "regime"),
    (lambda t: A.Run("sft", filtering="sifted"), ValueError, "filtering"),
    (lambda t: A.Run("sft", hints="yes"), TypeError, "hints"),
    (lambda t: A.Run("mix", schedule="step"), ValueError, "schedule"),
    (lambda t: A.Run("mix", rerun=-1), ValueError, "rerun"),
    (lambda t: A.Design(K=0), ValueError, "K"),
    (lambda t: A.Design(runs=(("sft", "sft"),)), TypeError, "runs"),
    (lambda t: A.Design(runs=(("a", A.Run("sft"), 1),)), ValueError, "pair"),
    (lambda t: A.Design(runs=(("a", A.Run("sft")), ("a", A.Run("mix")))), ValueError, "distinct"),
    (lambda t: A.run_replicate(-1, A.Design()), ValueError, "seed"),
    (lambda t: A.run_replicate(0, None), TypeError, "design"),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD_CALLS)
def test_bad_calls_get_a_clear_error(one_task, call, error, message):
    with pytest.raises(error, match=message):
        call(one_task)


def test_the_bad_call_table_covers_every_public_function():
    public = {name for name, f in vars(A).items() if inspect.isfunction(f)
              and f.__module__ == "lib.agents" and not name.startswith("_")}  # fmt: skip
    sources = "".join(inspect.getsource(call) for call, _, _ in BAD_CALLS)
    assert {name for name in public if f"A.{name}(" not in sources} == set()
