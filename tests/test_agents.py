"""Environment, taxonomy, filters, objectives and the two execution paths (lib/agents.py)."""

from __future__ import annotations

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


def test_action_language_has_57_distinct_actions():
    assert len(A.ACTIONS) == 57 == len(set(A.ACTIONS))
    assert len(A.VOCAB) == len(set(A.VOCAB))


def test_mu_schedule_matches_the_closed_form():
    assert A.mu_schedule(0, 350) == pytest.approx(0.9)
    assert A.mu_schedule(175, 350) == pytest.approx(0.475)
    assert A.mu_schedule(350, 350) == pytest.approx(0.05)
    assert A.mu_schedule(900, 350) == pytest.approx(0.05)
    assert A.mu_schedule(175, 350, "linear") == pytest.approx(0.475)
    assert A.mu_schedule(87, 350, "constant") == pytest.approx(0.475)
    assert A.mu_schedule(5, 350, k_w=10) == pytest.approx(0.45)


def test_reward_and_the_3_percent_tolerance():
    assert A.is_correct(103, 100) and not A.is_correct(103.1, 100)
    assert A.is_correct(97, 100) and not A.is_correct(96.9, 100)
    assert A.is_correct("b", "b") and not A.is_correct("b", "c") and not A.is_correct(0, "a")
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


def test_composition_reuses_the_inner_program():
    inner = A.Query("argmax", "c0", inner_agg="SUM", inner_x="x1", thr="x0", Q1=50)
    outer = A.Query("compose3", "c0", agg="SUM", x="x0", inner_agg="SUM", inner_x="x1",
                    thr="x0", Q1=50)  # fmt: skip
    inner_steps = A.gold_program(inner, "LOAD_JSON")[:-1]
    assert A.gold_program(outer, "LOAD_JSON")[: len(inner_steps)] == inner_steps
    assert A.gold_program(outer, "LOAD_JSON")[len(inner_steps):] == (
        "RESET", "FILTER c0 EQ M0", "AGG SUM x0", "ANSWER")  # fmt: skip
    assert [A.sample_query(np.random.default_rng(0), d).depth for d in (1, 2, 3)] == [1, 2, 3]


def test_gold_programs_agree_with_sandboxed_python(tasks):
    for task in tasks[:6]:  # two of each depth, mixed formats
        program = A.gold_program(task.query, A.LOADER_OF[task.fmt])
        result = run_sandboxed(A.compile_program(task, program), {A.FILE_NAME: task.path})
        assert result.ok, result.message
        obs, answer = A.parse_output(result.stdout)
        assert obs == "DONE" and answer == pytest.approx(task.gold) if not isinstance(
            task.gold, str) else answer == task.gold  # fmt: skip


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
    traj, results = A.code_rollout(ScriptedPolicy(script), task)
    obs, answer = A.run_program(task, script)
    assert traj.observations == obs and traj.answer == answer == task.gold
    assert results[0].status == "error" and results[1].status == "error"
    assert traj.reward == 1.0


def test_rollout_features_equal_history_features(tasks):
    seen = []
    policy = A.make_policy(seed=1)

    def recording(X):
        seen.append(X.clone())
        return policy(X)

    gen = torch.Generator().manual_seed(0)
    trajs = A.rollout(recording, tasks[:1], group_size=1, generator=gen)
    X, y, owner = A.encode(trajs)
    assert torch.equal(torch.cat(seen), X) and len(y) == len(trajs[0].actions)


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


def test_knowledge_and_filtering_raise_demo_precision(tasks):
    raw = A.synthesize_demos(tasks, A.EXPERT_RAW, 1, seed=0, filtered=False)
    hinted = A.synthesize_demos(tasks, A.EXPERT_HINTED, 3, seed=0, filtered=True)
    assert len(raw) == len(tasks) and len(hinted) <= len(tasks)
    assert np.mean([d.correct for d in hinted]) > np.mean([d.correct for d in raw])
    assert all(A.passes_rules(d) for d in hinted)


def test_rl_loss_raises_the_probability_of_better_than_average_actions(tasks):
    policy = A.make_policy(seed=0)
    t = tasks[0]
    win = _traj(t, ("ANSWER",), ("DONE",), t.gold)
    lose = A.Trajectory(t, ("RESET",), ("ERR",), None, -0.1)
    assert A.rl_loss(policy, [lose, lose], 2) is None  # no reward variance: group dropped
    X, _, _ = A.encode([win])
    before = policy(X).softmax(-1)[0, A.ACTION_ID["ANSWER"]]
    loss = A.rl_loss(policy, [win, lose], 2)
    policy.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in policy.parameters():
            p -= 0.5 * p.grad
    assert policy(X).softmax(-1)[0, A.ACTION_ID["ANSWER"]] > before


def test_sft_learns_its_demonstrations(tasks):
    demos = A.synthesize_demos(tasks, A.EXPERT_HINTED, 3, seed=1, filtered=True)
    cfg = A.TrainConfig(updates=150)
    result = A.train_policy("sft", demos, tasks, cfg, seed=0)
    assert result.mu == (1.0,) * 150 and result.env_steps == 0
    assert A.evaluate(result.policy, [d.task for d in demos])["all"] >= 0.8


def test_regime_weights():
    cfg = A.TrainConfig(updates=10)
    assert [A.sft_weight("sft_then_rl", k, cfg) for k in (0, 4, 5, 9)] == [1, 1, 0, 0]
    assert A.sft_weight("rl", 0, cfg) == 0 and A.sft_weight("sft", 3, cfg) == 1
    assert A.sft_weight("mix", 0, cfg) == pytest.approx(0.9)


@pytest.mark.parametrize(
    "call",
    [
        lambda: A.Query("pivot", "c0"),
        lambda: A.Query("argmax", "x0"),
        lambda: A.sample_query(np.random.default_rng(0), 4),
        lambda: A.gold_program(A.Query("argmax", "c0"), "LOAD_XML"),
        lambda: A.write_table(TABLE, "unused", "xlsx"),
        lambda: A.load_table("unused", "LOAD_XML"),
        lambda: A.make_tasks(0, ".", 0),
        lambda: A.Expert(1.5, 0.1, 0.1),
        lambda: A.TrainConfig(group_size=1),
        lambda: A.TrainConfig(schedule="step"),
        lambda: A.mu_schedule(1, 0),
        lambda: A.mu_schedule(1, 10, "exp"),
        lambda: A.sft_weight("dpo", 0, A.TrainConfig()),
        lambda: A.compile_action("DROP TABLE"),
        lambda: A.self_consistent([], min_agree=0),
        lambda: A.make_policy(d=0),
        lambda: A.history_features(A.Query("argmax", "c0"), ("RESET",), ()),
    ],
)
def test_bad_inputs_raise_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_bad_inputs_that_need_tasks_raise_value_error(tasks):
    with pytest.raises(ValueError, match="not in ACTIONS"):
        A.run_program(tasks[0], ("LOAD_XML",))
    with pytest.raises(ValueError, match="K must be"):
        A.synthesize_demos(tasks, A.EXPERT_RAW, 0, seed=0, filtered=True)
    with pytest.raises(ValueError, match="needs demonstrations"):
        A.train_policy("mix", [], tasks, A.TrainConfig(updates=1), seed=0)
