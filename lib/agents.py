"""DataMind in miniature (Qiao et al. 2026, "Scaling Generalist Data-Analytic Agents").

The four parts of the recipe, at toy scale:
1. Environment and taxonomy: small tables written as real CSV, JSON or SQLite files (format
   hidden), depth-1 queries and their recursive composition into depth 2 and 3.
2. Trajectory synthesis by a scripted, noisy "expert" (fewer random errors with knowledge
   hints, one systematic misconception in every mode), then a rule filter and a
   self-consistency filter that never look at gold answers.
3. A small MLP policy over single-token program actions, trained by SFT, by RL (group-normalised
   advantages, clipped PPO mini-batch steps, DAPO's dynamic sampling) and by the dynamically
   weighted objective (1 - mu_k) L_RL + mu_k L_SFT, whose SFT term reads the demonstrations of
   the very prompts in the RL batch, as DataMind's released `dp_actor.py` does.
4. Two execution paths: a fast in-process interpreter of the action language, and each action
   compiled to stdlib Python that runs in `lib.sandbox` (the multi-turn code rollout re-runs the
   accumulated successful code in a fresh process each turn, as DataMind's interpreter does).

`run_replicate` runs the chapter's whole experiment for one seed (a job for `lib.runs.run_jobs`).
"""

from __future__ import annotations

import ast
import csv
import functools
import json
import math
import operator
import sqlite3
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from lib import validate

COLUMNS = ("c0", "c1", "x0", "x1")
CATEGORIES = {"c0": ("a", "b", "c", "d"), "c1": ("p", "q", "r")}
NUMERIC = ("x0", "x1")
N_ROWS = 24
FORMATS = ("csv", "json", "sqlite")
LOADERS = ("LOAD_CSV", "LOAD_JSON", "LOAD_SQL")
LOADER_OF = dict(zip(FORMATS, LOADERS, strict=True))
FILE_NAME = "table.dat"  # the extension is hidden: the agent must find the loader that works
MAX_STEPS = 10  # DataMind caps rollouts at 10 turns
REL_TOL = 0.03  # QIAO2025 judge: numbers within 3 % relative error are correct
REWARD_CORRECT, REWARD_WRONG, REWARD_INVALID = 1.0, 0.0, -0.1  # QIAO2025 reward shaping
FAMILIES = ("aggwhere", "argmax", "compose2", "compose3")
DEPTH = {"aggwhere": 1, "argmax": 1, "compose2": 2, "compose3": 3}
OUTER_AGGS = ("COUNT", "SUM", "MEAN", "MAX")
INNER_AGGS = ("SUM", "COUNT")


def _build_actions() -> tuple[str, ...]:
    """The closed action language: 57 single-token actions (loaders, filters, aggregates)."""
    actions = [*LOADERS, "RESET", "ANSWER"]
    actions += [f"FILTER {c} {op} {v}" for c in COLUMNS for op in ("EQ", "GT", "LT")
                for v in ("Q0", "Q1", "M0")]  # fmt: skip
    actions += [f"AGG {a} {x}" for a in OUTER_AGGS for x in NUMERIC]
    actions += [f"ARGMAX {g} {a} {x}" for g in CATEGORIES for a in INNER_AGGS for x in NUMERIC]
    return tuple(actions)


ACTIONS = _build_actions()
ACTION_ID = {a: i for i, a in enumerate(ACTIONS)}
OBSERVATIONS = ("OK", "ERR", "EMPTY", "VAL", "DONE")
_OBS_ID = {o: i for i, o in enumerate(OBSERVATIONS)}
PROMPT_SLOTS = ("family", "agg", "x", "g", "inner_agg", "inner_x", "thr")


def _optional(name: str, value, options: Sequence[str]) -> None:
    """None, or one of `options` (a clear error otherwise)."""
    if value is not None:
        validate.choice(name, value, options)


def _instance(name: str, value, kind: type) -> None:
    """A TypeError naming the argument unless `value` is a `kind`."""
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind.__name__}, got {type(value).__name__}")


def _items(name: str, values, kind: type, *, empty: bool = False) -> list:
    """`values` as a list whose items are all `kind` (non-empty unless `empty`)."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a list of {kind.__name__}, got {type(values).__name__}")
    for i, v in enumerate(values):
        _instance(f"{name}[{i}]", v, kind)
    if not values and not empty:
        raise ValueError(f"{name} is empty; pass at least one {kind.__name__}")
    return list(values)


@dataclass(frozen=True)
class Query:
    """One analysis question: a family from FAMILIES, its columns, and constants Q0 / Q1."""

    family: str
    g: str
    agg: str | None = None
    x: str | None = None
    inner_agg: str | None = None
    inner_x: str | None = None
    thr: str | None = None
    Q0: str | None = None
    Q1: int | None = None

    def __post_init__(self) -> None:
        validate.choice("family", self.family, FAMILIES)
        validate.choice("g", self.g, tuple(CATEGORIES))
        _optional("agg", self.agg, OUTER_AGGS)
        _optional("inner_agg", self.inner_agg, INNER_AGGS)
        for name in ("x", "inner_x", "thr"):
            _optional(name, getattr(self, name), NUMERIC)
        if self.Q0 is not None:
            validate.text("Q0", self.Q0)
        if self.Q1 is not None:
            validate.integer("Q1", self.Q1)

    @property
    def depth(self) -> int:
        """Composition depth: 1 for the base families, 2 and 3 for the composed ones."""
        return DEPTH[self.family]

    def tokens(self) -> tuple[str, ...]:
        """The prompt as 7 slot tokens (a parsed question; '-' where a slot is unused)."""
        return tuple(f"{s}={getattr(self, s) or '-'}" for s in PROMPT_SLOTS)

    def text(self) -> str:
        """The question in English, for display."""
        inner = f"the {self.g} group with the largest {self.inner_agg} of {self.inner_x}"
        if self.thr:
            inner += f" among rows with {self.thr} > {self.Q1}"
        if self.family == "aggwhere":
            return f"{self.agg} of {self.x} over rows with {self.g} = {self.Q0!r}"
        if self.family == "argmax":
            return f"Which is {inner}?"
        return f"{self.agg} of {self.x} over all rows in {inner}"


def _vocabulary() -> tuple[str, ...]:
    """All input tokens: prompt slot values, then actions, then observations."""
    values = {"family": FAMILIES, "agg": OUTER_AGGS, "x": NUMERIC, "g": tuple(CATEGORIES),
              "inner_agg": INNER_AGGS, "inner_x": NUMERIC, "thr": NUMERIC}  # fmt: skip
    prompt = [f"{s}={v}" for s in PROMPT_SLOTS for v in (*values[s], "-")]
    return (*prompt, *ACTIONS, *OBSERVATIONS)


VOCAB = _vocabulary()
TOKEN_ID = {t: i for i, t in enumerate(VOCAB)}


def gold_program(query: Query, loader: str) -> tuple[str, ...]:
    """The reference program; composed families reuse the inner program (recursive composition)."""
    _instance("query", query, Query)
    validate.choice("loader", loader, LOADERS)
    if query.family == "aggwhere":
        return (loader, f"FILTER {query.g} EQ Q0", f"AGG {query.agg} {query.x}", "ANSWER")
    if query.family == "argmax":
        where = (f"FILTER {query.thr} GT Q1",) if query.thr else ()
        return (loader, *where, f"ARGMAX {query.g} {query.inner_agg} {query.inner_x}", "ANSWER")
    inner = Query("argmax", query.g, inner_agg=query.inner_agg, inner_x=query.inner_x,
                  thr=query.thr, Q1=query.Q1)  # fmt: skip
    steps = gold_program(inner, loader)[:-1] + (("RESET",) if inner.thr else ())
    return (*steps, f"FILTER {query.g} EQ M0", f"AGG {query.agg} {query.x}", "ANSWER")


def sample_query(rng: np.random.Generator, depth: int) -> Query:
    """Draw a query of the given depth (1, 2 or 3) with uniformly chosen columns."""
    _instance("rng", rng, np.random.Generator)
    depth = validate.integer("depth", depth, minimum=1, maximum=3)
    family = {2: "compose2", 3: "compose3"}.get(depth) or str(rng.choice(FAMILIES[:2]))
    g = str(rng.choice(tuple(CATEGORIES)))
    pick = lambda options: str(rng.choice(options))  # noqa: E731
    outer = family != "argmax"
    inner = family != "aggwhere"
    return Query(
        family, g, agg=pick(OUTER_AGGS) if outer else None, x=pick(NUMERIC) if outer else None,
        inner_agg=pick(INNER_AGGS) if inner else None, inner_x=pick(NUMERIC) if inner else None,
        thr=pick(NUMERIC) if depth == 3 else None,
        Q0=pick(CATEGORIES[g]) if family == "aggwhere" else None,
        Q1=int(rng.integers(20, 70)) if depth == 3 else None,
    )  # fmt: skip


# ----------------------------------------------------------------------------- files and loaders


def write_table(table: dict[str, list], path: Path, fmt: str) -> None:
    """Write a table (column name -> list of N_ROWS values) to `path` as CSV, JSON or SQLite."""
    validate.choice("fmt", fmt, FORMATS)
    _instance("table", table, dict)
    if sorted(table) != sorted(COLUMNS) or any(len(table[c]) != N_ROWS for c in COLUMNS):
        raise ValueError(f"table must map each of {COLUMNS} to {N_ROWS} values")
    rows = [
        dict(zip(COLUMNS, r, strict=True)) for r in zip(*(table[c] for c in COLUMNS), strict=True)
    ]
    Path(path).unlink(missing_ok=True)
    if fmt == "csv":
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
    elif fmt == "json":
        Path(path).write_text(json.dumps(rows), encoding="utf-8")
    else:
        with sqlite3.connect(path) as con:
            # Scratch files need no crash safety; without journal and fsync, writes are ~5x faster.
            con.execute("PRAGMA journal_mode = OFF")
            con.execute("PRAGMA synchronous = OFF")
            con.execute("CREATE TABLE t (c0 TEXT, c1 TEXT, x0 INTEGER, x1 INTEGER)")
            con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [tuple(r.values()) for r in rows])
        con.close()


def load_table(path: Path, loader: str) -> dict[str, tuple]:
    """Read a table file with one loader; raises (ValueError etc.) if the format is not that one."""
    validate.choice("loader", loader, LOADERS)
    if loader == "LOAD_CSV":
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    elif loader == "LOAD_JSON":
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
    else:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = [
                dict(zip(COLUMNS, r, strict=True))
                for r in con.execute("SELECT c0, c1, x0, x1 FROM t ORDER BY rowid")
            ]
        finally:
            con.close()
    if not isinstance(rows, list) or not rows or list(rows[0]) != list(COLUMNS):
        raise ValueError(f"{loader} did not find a table with columns {COLUMNS}")
    return {c: tuple(int(r[c]) if c in NUMERIC else str(r[c]) for r in rows) for c in COLUMNS}


# ------------------------------------------------------------------------------ the interpreter


class State(NamedTuple):
    """Interpreter state: loaded table, row indices in view, memory slot M0, last value V.

    A NamedTuple rather than a frozen dataclass: rollouts create ~10^5 states per run, and a
    tuple is built several times faster.
    """

    table: dict | None = None
    view: tuple[int, ...] = ()
    M0: str | None = None
    V: float | str | None = None
    n_steps: int = 0
    done: bool = False


@dataclass(frozen=True)
class Task:
    """A question over one table file; `loaded` caches what each loader read from the file."""

    task_id: int
    query: Query
    fmt: str
    path: Path
    loaded: dict = field(repr=False)
    gold: float | str = 0.0


_COMPARE = {"EQ": operator.eq, "GT": operator.gt, "LT": operator.lt}
_ALL_ROWS = tuple(range(N_ROWS))


def _filter(task: Task, s: State, col: str, op: str, slot: str) -> tuple[int, ...] | None:
    """The view after FILTER col op slot; None when the types do not fit (EQ needs a category,
    GT/LT a number)."""
    value = task.query.Q0 if slot == "Q0" else task.query.Q1 if slot == "Q1" else s.M0
    if op == "EQ" and (col not in CATEGORIES or not isinstance(value, str)):
        return None
    if op != "EQ" and (col not in NUMERIC or not isinstance(value, int)):
        return None
    data, keep = s.table[col], _COMPARE[op]
    return tuple(i for i in s.view if keep(data[i], value))


def _aggregate(s: State, agg: str, x: str) -> float | None:
    """AGG agg x over the view; None where undefined (mean or max of no rows)."""
    values = [s.table[x][i] for i in s.view]
    if agg == "COUNT":
        return len(values)
    if not values and agg != "SUM":
        return None
    return {"SUM": sum, "MEAN": lambda v: sum(v) / len(v), "MAX": max}[agg](values)


def _argmax(s: State, g: str, agg: str, x: str) -> str | None:
    """The category of g with the largest SUM of x (or COUNT) in the view; ties -> first sorted."""
    totals: dict[str, float] = {}
    groups, values = s.table[g], s.table[x]
    for i in s.view:
        totals[groups[i]] = totals.get(groups[i], 0) + (values[i] if agg == "SUM" else 1)
    return max(sorted(totals), key=totals.__getitem__) if totals else None


_PARSED = {a: (a.split()[0], tuple(a.split()[1:])) for a in ACTIONS}  # parsed once, used often


def _step(task: Task, s: State, action: str) -> tuple[State, str]:
    """Execute one (known) action; returns the new state and the observation."""
    n = s.n_steps + 1
    if action in LOADERS:
        table = task.loaded.get(action)
        if table is None:
            return State(s.table, s.view, s.M0, s.V, n), "ERR"
        return State(table, _ALL_ROWS, s.M0, s.V, n), "OK"
    if action == "ANSWER":
        return State(s.table, s.view, s.M0, s.V, n, True), "DONE"
    if s.table is None:
        return State(None, (), s.M0, s.V, n), "ERR"
    kind, args = _PARSED[action]
    if kind == "RESET":
        return State(s.table, _ALL_ROWS, s.M0, s.V, n), "OK"
    if kind == "FILTER":
        view = _filter(task, s, *args)
        if view is None:
            return State(s.table, s.view, s.M0, s.V, n), "ERR"
        return State(s.table, view, s.M0, s.V, n), "OK" if view else "EMPTY"
    value = _aggregate(s, *args) if kind == "AGG" else _argmax(s, *args)
    if value is None:
        return State(s.table, s.view, s.M0, s.V, n), "ERR"
    M0 = value if kind == "ARGMAX" else s.M0
    return State(s.table, s.view, M0, value, n), "VAL"


def step(task: Task, s: State, action: str) -> tuple[State, str]:
    """Execute one action; returns the new state and the observation (one of OBSERVATIONS)."""
    _instance("task", task, Task)
    _instance("s", s, State)
    if action not in ACTION_ID:
        raise ValueError(f"action={action!r} is not in ACTIONS; use lib.agents.ACTIONS")
    return _step(task, s, action)


def _actions(name: str, actions) -> tuple[str, ...]:
    """A sequence of known actions, or a clear error naming the unknown ones."""
    if isinstance(actions, str) or not isinstance(actions, Sequence):
        raise TypeError(f"{name} must be a tuple of action strings, got {type(actions).__name__}")
    unknown = [a for a in actions if a not in ACTION_ID]
    if unknown:
        raise ValueError(f"{name}: {unknown} are not in ACTIONS; use lib.agents.ACTIONS")
    return tuple(actions)


def run_program(task: Task, actions: tuple[str, ...]) -> tuple[tuple[str, ...], object]:
    """Replay a whole program from the file (stateless replay); returns (observations, answer)."""
    _instance("task", task, Task)
    s, obs = State(), []
    for action in _actions("actions", actions)[:MAX_STEPS]:
        s, o = _step(task, s, action)
        obs.append(o)
        if s.done:
            break
    return tuple(obs), (s.V if s.done else None)


# -------------------------------------------------------------------------- tasks and rewards


def _gold(gold) -> float | str:
    """A gold answer: a category string or a finite number."""
    if isinstance(gold, str):
        return gold
    return validate.real("gold", gold)


def _matches(answer: object, gold: float | str) -> bool:
    """is_correct without checking gold (the rollouts' inner call; tasks hold checked golds)."""
    if isinstance(gold, str) or isinstance(answer, str | bool) or answer is None:
        return answer == gold
    if not isinstance(answer, int | float) or not math.isfinite(answer):
        return False  # anything else (a list, NaN) is a wrong answer, never an error
    return abs(float(answer) - float(gold)) <= REL_TOL * abs(float(gold))


def is_correct(answer: object, gold: float | str) -> bool:
    """DataMind's judge rule: categories must match exactly, numbers within REL_TOL (3 %)."""
    return _matches(answer, _gold(gold))


def _reward(answer: object, gold: float | str) -> float:
    """reward without checking gold (the rollouts' inner call)."""
    if answer is None:
        return REWARD_INVALID
    return REWARD_CORRECT if _matches(answer, gold) else REWARD_WRONG


def reward(answer: object, gold: float | str) -> float:
    """Reward of QIAO2025: 1 if correct, 0 if a wrong answer was given, -0.1 if none was."""
    return _reward(answer, _gold(gold))


def _random_table(rng: np.random.Generator) -> dict[str, list]:
    """N_ROWS rows: two category columns and two integer columns in [0, 99]."""
    table = {c: [str(v) for v in rng.choice(CATEGORIES[c], N_ROWS)] for c in CATEGORIES}
    table.update({x: [int(v) for v in rng.integers(0, 100, N_ROWS)] for x in NUMERIC})
    return table


def _read_all(path: Path, fmt: str) -> dict:
    """What each loader reads from a file; exactly the right loader must succeed."""
    loaded = {}
    for loader in LOADERS:
        try:
            loaded[loader] = load_table(path, loader)
        except (ValueError, KeyError, csv.Error, sqlite3.Error):
            pass  # the wrong loader fails, as it would for the agent
    if list(loaded) != [LOADER_OF[fmt]]:
        raise RuntimeError(f"{fmt} file {path} was read by {list(loaded)}; loaders are broken")
    return loaded


def make_tasks(n: int, root: Path, seed: int, first_id: int = 0) -> list[Task]:
    """Write n tasks (depths 1, 2, 3 in turn) as real files under root; gold from the program.

    Tables on which the gold program meets an empty view or an error are drawn again.
    """
    n = validate.integer("n", n, minimum=1)
    seed = validate.integer("seed", seed, minimum=0)
    first_id = validate.integer("first_id", first_id, minimum=0)
    if not Path(root).is_dir():
        raise ValueError(f"root={root!s} is not a folder; create it first")
    rng, tasks = np.random.default_rng(seed), []
    while len(tasks) < n:
        task_id = first_id + len(tasks)
        query, fmt = sample_query(rng, 1 + len(tasks) % 3), str(rng.choice(FORMATS))
        folder = Path(root) / f"task{task_id:05d}"
        folder.mkdir(exist_ok=True)
        path = folder / FILE_NAME
        write_table(_random_table(rng), path, fmt)
        task = Task(task_id, query, fmt, path, _read_all(path, fmt))
        obs, answer = run_program(task, gold_program(query, LOADER_OF[fmt]))
        if answer is not None and not {"ERR", "EMPTY"} & set(obs):
            tasks.append(Task(task_id, query, fmt, path, task.loaded, gold=answer))
    return tasks


# -------------------------------------------------------- trajectory synthesis and filtering


@dataclass(frozen=True)
class Trajectory:
    """One episode: actions, observations, the submitted answer (None if none), reward."""

    task: Task = field(repr=False)
    actions: tuple[str, ...]
    observations: tuple[str, ...]
    answer: object
    reward: float

    @property
    def correct(self) -> bool:
        """Whether the answer is right (uses the gold answer: for measurement only)."""
        return self.reward == REWARD_CORRECT


@dataclass(frozen=True)
class Expert:
    """A scripted solver with error rates: knowledge hints lower them (DataMind).

    p_confuse: per trajectory, ARGMAX uses COUNT for SUM or the reverse; p_arg: per step, an
    argument error (another action of the same kind); p_skip: per trajectory, one step forgotten;
    blind_spot: always reads "the group with the largest total of x1" as "... of x0" (a
    consistent error, which every sample repeats; see `misread`).
    """

    p_confuse: float
    p_arg: float
    p_skip: float
    blind_spot: bool = False

    def __post_init__(self) -> None:
        for name in ("p_confuse", "p_arg", "p_skip"):
            validate.probability(f"Expert.{name}", getattr(self, name))
        validate.boolean("Expert.blind_spot", self.blind_spot)


# Hints lower the random error rates; no hint fixes the misconception, which every sample repeats.
EXPERT_RAW = Expert(p_confuse=0.30, p_arg=0.10, p_skip=0.10, blind_spot=True)  # no hints
EXPERT_HINTED = Expert(p_confuse=0.05, p_arg=0.02, p_skip=0.02, blind_spot=True)  # with hints
_KINDS = {k: [a for a in ACTIONS if a.split()[0] == k] for k in ("FILTER", "AGG", "ARGMAX")}


def misread(action: str) -> str:
    """The expert's blind spot: 'ARGMAX g SUM x1' becomes 'ARGMAX g SUM x0'; others unchanged.

    A column confusion changes the chosen group in most tasks it touches; confusing SUM with
    COUNT would rarely matter (on these tables the group with most rows usually has the
    largest total too).
    """
    words = validate.choice("action", action, ACTIONS).split()
    if words[0] == "ARGMAX" and words[2:] == ["SUM", "x1"]:
        return f"ARGMAX {words[1]} SUM x0"
    return action


def _expert_plan(task: Task, expert: Expert, rng: np.random.Generator) -> list[str]:
    """The expert's program after the loader, with its errors applied."""
    plan = list(gold_program(task.query, LOADERS[0])[1:])
    if expert.blind_spot:
        plan = [misread(a) for a in plan]
    for i, a in enumerate(plan):
        words = a.split()
        if words[0] == "ARGMAX" and rng.random() < expert.p_confuse:
            words[2] = {"SUM": "COUNT", "COUNT": "SUM"}[words[2]]
            plan[i] = " ".join(words)
        if words[0] in _KINDS and rng.random() < expert.p_arg:
            plan[i] = str(rng.choice(_KINDS[words[0]]))
    if len(plan) > 2 and rng.random() < expert.p_skip:
        del plan[int(rng.integers(0, len(plan) - 1))]
    return plan


def blind_spot_bites(task: Task) -> bool:
    """Whether the expert's misconception changes this task's answer (uses gold: measurement)."""
    _instance("task", task, Task)
    program = tuple(map(misread, gold_program(task.query, LOADER_OF[task.fmt])))
    return not is_correct(run_program(task, program)[1], task.gold)


def sample_trajectory(task: Task, expert: Expert, rng: np.random.Generator) -> Trajectory:
    """One expert episode: try loaders in random order until one works, then run the plan."""
    _instance("task", task, Task)
    _instance("expert", expert, Expert)
    _instance("rng", rng, np.random.Generator)
    s, actions, obs = State(), [], []
    plan = [str(a) for a in rng.permutation(LOADERS)]
    plan = plan[: plan.index(LOADER_OF[task.fmt]) + 1] + _expert_plan(task, expert, rng)
    for action in plan[:MAX_STEPS]:
        s, o = _step(task, s, action)
        actions.append(action)
        obs.append(o)
        if s.done:
            break
    answer = s.V if s.done else None
    return Trajectory(task, tuple(actions), tuple(obs), answer, reward(answer, task.gold))


def passes_rules(t: Trajectory) -> bool:
    """Rule filter: ends with a submitted answer, no error except from a wrong loader."""
    _instance("t", t, Trajectory)
    errors = [a for a, o in zip(t.actions, t.observations, strict=True)
              if o == "ERR" and a not in LOADERS]  # fmt: skip
    return bool(t.actions) and t.actions[-1] == "ANSWER" and t.answer is not None and not errors


def agreeing(samples: list[Trajectory], min_agree: int = 2) -> list[Trajectory]:
    """The largest group of rule-passing samples whose answers agree (is_correct(a, b), the
    same 3 % tolerance), or [] if it has fewer than min_agree members; no gold is used."""
    samples = _items("samples", samples, Trajectory, empty=True)
    min_agree = validate.integer("min_agree", min_agree, minimum=1)
    kept = [t for t in samples if passes_rules(t)]
    groups = [[t for t in kept if is_correct(t.answer, u.answer)] for u in kept]
    best = max(groups, key=len, default=[])
    return best if len(best) >= min_agree else []


def self_consistent(samples: list[Trajectory], min_agree: int = 2) -> Trajectory | None:
    """Self-consistency filter: the shortest (most concise) sample of `agreeing`, or None."""
    return min(agreeing(samples, min_agree), key=lambda t: len(t.actions), default=None)


FILTERS = ("unfiltered", "filtered", "random", "vote only")


def synthesize_demos(tasks: list[Task], expert: Expert, K: int,
                     seed: int) -> dict[str, list[Trajectory]]:  # fmt: skip
    """K expert samples per task, and the demonstration sets of FILTERS made from them.

    'unfiltered': the first sample of every task, as it comes. 'filtered': the rule filter, the
    self-consistency vote and the most concise of the agreeing samples (`self_consistent`).
    'random': a filter blind to the answers, the vote's negative control: as many tasks as
    the vote keeps, drawn at random, each with a random sample. 'vote only': the vote without
    the concise pick (a random member of the agreeing group).
    """
    tasks = _items("tasks", tasks, Task)
    _instance("expert", expert, Expert)
    K = validate.integer("K", K, minimum=1)
    seed = validate.integer("seed", seed, minimum=0)
    rng = np.random.default_rng(seed)
    samples = [[sample_trajectory(task, expert, rng) for _ in range(K)] for task in tasks]
    groups = [g for g in map(agreeing, samples) if g]
    blind = sorted(rng.choice(len(tasks), len(groups), replace=False))
    return {
        "unfiltered": [s[0] for s in samples],
        "filtered": [min(g, key=lambda t: len(t.actions)) for g in groups],
        "random": [samples[i][int(rng.integers(K))] for i in blind],
        "vote only": [g[int(rng.integers(len(g)))] for g in groups],
    }


def taxonomy_stats(tasks: list[Task]) -> dict[int, dict[str, float]]:
    """Per depth: tasks, distinct reference programs (loader left out), mean program steps."""
    tasks = _items("tasks", tasks, Task)
    stats = {}
    for depth in (1, 2, 3):
        programs = [gold_program(t.query, LOADERS[0]) for t in tasks if t.query.depth == depth]
        steps = float(np.mean([len(p) for p in programs])) if programs else 0.0
        stats[depth] = {"tasks": len(programs), "distinct programs": len(set(programs)),
                        "steps": steps}  # fmt: skip
    return stats


# ------------------------------------------------------- the same actions as sandboxed Python

_PRELUDE = """import csv, json, sqlite3
PATH = {path!r}
COLS = ('c0', 'c1', 'x0', 'x1')
Q0 = {Q0!r}
Q1 = {Q1!r}
rows = view = M0 = V = None
"""
_LOAD = {
    "LOAD_CSV": "with open(PATH, newline='', encoding='utf-8') as f:\n"
    "    _rows = list(csv.DictReader(f))\n"
    "if not _rows or tuple(_rows[0]) != COLS:\n"
    "    raise ValueError('not a CSV table with columns c0, c1, x0, x1')\n"
    "rows = [dict(r, x0=int(r['x0']), x1=int(r['x1'])) for r in _rows]\n",
    "LOAD_JSON": "with open(PATH, encoding='utf-8') as f:\n"
    "    _rows = json.load(f)\n"
    "if not isinstance(_rows, list) or not _rows or tuple(_rows[0]) != COLS:\n"
    "    raise ValueError('not a JSON table with columns c0, c1, x0, x1')\n"
    "rows = _rows\n",
    "LOAD_SQL": "_con = sqlite3.connect('file:' + PATH + '?mode=ro', uri=True)\n"
    "rows = [dict(zip(COLS, r)) for r in _con.execute('SELECT * FROM t ORDER BY rowid')]\n"
    "_con.close()\n",
}
_NEED_TABLE = "if view is None:\n    raise RuntimeError('no table is loaded')\n"


def compile_action(action: str) -> tuple[str, str]:
    """Python source for one action: (body that changes the state, lines that report the result)."""
    kind, *args = validate.choice("action", action, ACTIONS).split()
    if kind.startswith("LOAD"):
        return _LOAD[kind] + "view = rows\n", "print('__OBS__ OK')\n"
    if kind == "ANSWER":
        return "", "print('__OBS__ DONE')\nprint('__ANSWER__', repr(V))\n"
    if kind == "RESET":
        return _NEED_TABLE + "view = rows\n", "print('__OBS__ OK')\n"
    if kind == "FILTER":
        col, op, slot = args
        want_cat = op == "EQ"
        check = "isinstance(_v, str)" if want_cat else "type(_v) is int"
        body = _NEED_TABLE + f"_v = {slot}\n"
        if (col in CATEGORIES) != want_cat:
            body += f"raise TypeError('{op} cannot compare column {col}')\n"
        body += f"if not {check}:\n    raise TypeError('{slot} has the wrong type for {op}')\n"
        body += f"view = [r for r in view if r['{col}'] {dict(EQ='==', GT='>', LT='<')[op]} _v]\n"
        return body, "print('__OBS__', 'OK' if view else 'EMPTY')\n"
    if kind == "AGG":
        agg, x = args
        expr = {"COUNT": "len(view)", "SUM": f"sum(r['{x}'] for r in view)",
                "MEAN": f"sum(r['{x}'] for r in view) / len(view)",
                "MAX": f"max(r['{x}'] for r in view)"}[agg]  # fmt: skip
        return _NEED_TABLE + f"V = {expr}\n", "print('__OBS__ VAL')\n"
    g, agg, x = args
    add = f"r['{x}']" if agg == "SUM" else "1"
    body = _NEED_TABLE + "_tot = {}\nfor r in view:\n"
    body += f"    _tot[r['{g}']] = _tot.get(r['{g}'], 0) + {add}\n"
    body += "M0 = max(sorted(_tot), key=_tot.get)\nV = M0\n"
    return body, "print('__OBS__ VAL')\n"


def prelude(task: Task) -> str:
    """The first lines of every program for a task: imports, the file name, the constants."""
    _instance("task", task, Task)
    return _PRELUDE.format(path=FILE_NAME, Q0=task.query.Q0, Q1=task.query.Q1)


def compile_program(task: Task, actions: tuple[str, ...]) -> str:
    """One Python script for a whole program (used to cross-check the gold programs)."""
    return prelude(task) + "".join(
        b + r for b, r in map(compile_action, _actions("actions", actions))
    )


class OutputError(ValueError):
    """A program's output could not be read; the agent sees the message as an ERR observation."""


MAX_ANSWER_CHARS = 200  # an answer is a number or a category name, never more


def _read_answer(text: str, line: int) -> object:
    """The literal after '__ANSWER__': None, a number or a string; else an OutputError."""
    if len(text) > MAX_ANSWER_CHARS:
        raise OutputError(f"line {line}: the answer has {len(text)} characters; at most "
                          f"{MAX_ANSWER_CHARS} are read")  # fmt: skip
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as err:
        raise OutputError(f"line {line}: the answer {text!r} is not a Python literal "
                          f"({type(err).__name__})") from None  # fmt: skip
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float | str)):
        raise OutputError(f"line {line}: the answer must be a number or a string, "
                          f"got {type(value).__name__}")  # fmt: skip
    return value


def parse_output(stdout: str) -> tuple[str | None, object]:
    """Read the last observation and the answer (None if absent) from a program's stdout.

    Total: a garbled '__OBS__' or '__ANSWER__' line raises OutputError (a ValueError) that says
    what was wrong, never SyntaxError or IndexError.
    """
    validate.text("stdout", stdout, empty=True)
    obs, answer = None, None
    for n, line in enumerate(stdout.splitlines(), 1):
        if line.startswith("__OBS__"):
            obs = line.removeprefix("__OBS__").strip()
            if obs not in OBSERVATIONS:
                raise OutputError(f"line {n}: observation {obs[:40]!r} is not one of "
                                  f"{OBSERVATIONS}")  # fmt: skip
        elif line.startswith("__ANSWER__"):
            answer = _read_answer(line.removeprefix("__ANSWER__").strip(), n)
    return obs, answer


# ------------------------------------------------------------------------ policy and training

REGIMES = ("sft", "rl", "mix", "sft_then_rl")
MU_SCHEDULES = ("cosine", "linear", "constant")
LR_SCHEDULES = ("cosine", "constant")
QIAO2025_MU = {"mu_peak": 0.9, "mu_valley": 0.05, "k_w": 0}  # shipped CHORD-mu settings


def mu_schedule(k: int, k_d: int, kind: str = "cosine", mu_peak: float = 0.9,
                mu_valley: float = 0.05, k_w: int = 0) -> float:  # fmt: skip
    """SFT weight mu_k: linear warm-up over k_w steps, then a cosine (or linear) decay over k_d.

    mu_k = mu_valley + (mu_peak - mu_valley) (1 + cos(pi (k - k_w) / k_d)) / 2 for the cosine
    (CHORD-mu, as in DataMind's dp_actor.py); 'constant' returns (mu_peak + mu_valley) / 2.
    """
    k = validate.integer("k", k, minimum=0)
    k_d = validate.integer("k_d", k_d, minimum=1)
    kind = validate.choice("kind", kind, MU_SCHEDULES)
    mu_peak = validate.probability("mu_peak", mu_peak)
    mu_valley = validate.probability("mu_valley", mu_valley)
    k_w = validate.integer("k_w", k_w, minimum=0)
    if mu_valley > mu_peak:
        raise ValueError(f"mu_valley={mu_valley} must not exceed mu_peak={mu_peak}")
    if kind == "constant":
        return (mu_peak + mu_valley) / 2
    if k < k_w:
        return mu_peak * k / k_w
    frac = min((k - k_w) / k_d, 1.0)
    shape = 0.5 * (1 + math.cos(math.pi * frac)) if kind == "cosine" else 1 - frac
    return mu_valley + (mu_peak - mu_valley) * shape


N_PROMPT_TOKENS = VOCAB.index(ACTIONS[0])  # prompt tokens come first in VOCAB
# Feature layout: prompt tokens | actions that ran | actions that failed | last obs | turn index
_F_DONE = N_PROMPT_TOKENS
_F_FAIL = _F_DONE + len(ACTIONS)
_F_OBS = _F_FAIL + len(ACTIONS)
_F_TURN = _F_OBS + len(OBSERVATIONS) + 1  # one more for "no observation yet"
N_FEATURES = _F_TURN + MAX_STEPS


@functools.lru_cache(maxsize=4096)
def _prompt_ids(query: Query) -> tuple[int, ...]:
    """Token ids of a query's prompt (cached: queries repeat across rollouts)."""
    return tuple(TOKEN_ID[w] for w in query.tokens())


def _features(query: Query, actions: tuple[str, ...], observations: tuple[str, ...]) -> list:
    """history_features without the argument checks (the training loop's inner call)."""
    idx = list(_prompt_ids(query))
    for a, o in zip(actions, observations, strict=True):
        idx.append((_F_FAIL if o == "ERR" else _F_DONE) + ACTION_ID[a])
    last = _OBS_ID[observations[-1]] if observations else len(OBSERVATIONS)
    return [*idx, _F_OBS + last, _F_TURN + len(actions)]


def history_features(query: Query, actions: tuple[str, ...], observations: tuple[str, ...]) -> list:
    """Indices of the active binary features of a history (the policy's input, N_FEATURES wide).

    The history is summarised as: the prompt's slot tokens, the set of actions that ran (OK,
    EMPTY or VAL), the set that failed (ERR), the last observation and the turn number.
    """
    _instance("query", query, Query)
    actions = _actions("actions", actions)
    bad = [o for o in observations if o not in _OBS_ID]
    if bad:
        raise ValueError(f"observations {bad} are not in OBSERVATIONS {OBSERVATIONS}")
    if len(actions) != len(observations) or len(actions) >= MAX_STEPS:
        raise ValueError(f"need equal-length histories shorter than {MAX_STEPS}, got "
                         f"{len(actions)} actions, {len(observations)} observations")  # fmt: skip
    return _features(query, actions, tuple(observations))


def encode(trajectories: list[Trajectory]):
    """Training rows for every decision: features X (N, N_FEATURES), actions y (N,), owner (N,).

    owner[n] is the index of the trajectory that decision n belongs to (non-decreasing).
    """
    import torch

    cols, y, owner = [], [], []
    for i, t in enumerate(_items("trajectories", trajectories, Trajectory)):
        for k, a in enumerate(t.actions):
            cols.append(_features(t.task.query, t.actions[:k], t.observations[:k]))
            y.append(ACTION_ID[a])
            owner.append(i)
    X = np.zeros((len(cols), N_FEATURES), dtype=np.float32)
    X[np.repeat(np.arange(len(cols)), [len(c) for c in cols]), np.concatenate(cols or [[]])] = 1
    return torch.from_numpy(X), torch.tensor(y, dtype=torch.long), torch.tensor(owner)


def make_policy(d: int = 128, seed: int = 0):
    """A fresh policy: N_FEATURES -> d (ReLU) -> d (ReLU) -> logits over the 57 actions."""
    import torch
    from torch import nn

    d = validate.integer("d", d, minimum=1)
    torch.manual_seed(validate.integer("seed", seed, minimum=0))
    return nn.Sequential(nn.Linear(N_FEATURES, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(),
                         nn.Linear(d, len(ACTIONS)))  # fmt: skip


@dataclass(frozen=True)
class Decisions:
    """Every decision of a batch of episodes, in play order: features X (N, N_FEATURES), actions
    y (N,), log-probability at sampling time logp (N,), owner (N,) (the episode's index)."""

    X: object
    y: object
    logp: object
    owner: object


def _play(policy, episodes: list[Task], temperature: float, greedy: bool, generator):
    """Run episodes in the in-process interpreter, batched; returns (trajectories, Decisions)."""
    import torch

    states, acts, obs = [State() for _ in episodes], [[] for _ in episodes], [[] for _ in episodes]
    # Features are updated in place turn by turn; they equal history_features() (tested).
    X = np.zeros((len(episodes), N_FEATURES), dtype=np.float32)
    for i, t in enumerate(episodes):
        X[i, _features(t.query, (), ())] = 1
    rows, ys, logps, owners = [], [], [], []
    with torch.no_grad():
        for turn in range(MAX_STEPS):
            live = [i for i, s in enumerate(states) if not s.done]
            if not live:
                break
            feats = torch.from_numpy(X[live].copy())
            logp = torch.log_softmax(policy(feats) / temperature, -1)
            if greedy:
                choice = logp.argmax(-1)
            else:  # Gumbel-max: a draw from softmax(logp), cheaper than torch.multinomial
                u = torch.rand(logp.shape, generator=generator).clamp_(1e-12, 1.0)
                choice = (logp - torch.log(-torch.log(u))).argmax(-1)
            rows.append(feats)
            ys.append(choice)
            logps.append(logp.gather(-1, choice[:, None])[:, 0])
            owners.append(torch.tensor(live))
            for i, a in zip(live, choice.tolist(), strict=True):
                states[i], o = _step(episodes[i], states[i], ACTIONS[a])
                row = X[i]
                row[_F_OBS + (_OBS_ID[obs[i][-1]] if obs[i] else len(OBSERVATIONS))] = 0
                row[_F_TURN + turn] = 0
                row[(_F_FAIL if o == "ERR" else _F_DONE) + a] = 1
                if turn + 1 < MAX_STEPS:
                    row[_F_OBS + _OBS_ID[o]] = 1
                    row[_F_TURN + turn + 1] = 1
                acts[i].append(ACTIONS[a])
                obs[i].append(o)
    trajs = [Trajectory(t, tuple(a), tuple(o), s.V if s.done else None,
                        _reward(s.V if s.done else None, t.gold))
             for t, a, o, s in zip(episodes, acts, obs, states, strict=True)]  # fmt: skip
    return trajs, Decisions(*(torch.cat(v) for v in (rows, ys, logps, owners)))


def _check_policy(policy) -> None:
    if not callable(policy):
        raise TypeError(
            f"policy must be a callable network (make_policy), got {type(policy).__name__}"
        )


def rollout(policy, tasks: list[Task], group_size: int = 1, temperature: float = 1.0,
            greedy: bool = False, generator=None) -> list[Trajectory]:  # fmt: skip
    """group_size episodes per task, sampled from softmax(logits / temperature) (or greedy)."""
    _check_policy(policy)
    tasks = _items("tasks", tasks, Task)
    group_size = validate.integer("group_size", group_size, minimum=1)
    temperature = validate.real("temperature", temperature, low=0, low_open=True)
    greedy = validate.boolean("greedy", greedy)
    return _play(policy, [t for t in tasks for _ in range(group_size)], temperature, greedy,
                 generator)[0]  # fmt: skip


def grpo_advantages(rewards):
    """Group-normalised advantages A_ij = (r_ij - mean_j r_ij) / (std_j r_ij + 1e-6), as in GRPO
    (unbiased std); rewards (B, G). Returns (A (B, G), keep (B,)): keep is False for groups whose
    rewards are all equal, which DAPO's dynamic sampling drops."""
    import torch

    r = torch.as_tensor(validate.array("rewards", rewards, ndim=2), dtype=torch.float32)
    if r.shape[1] < 2:
        raise ValueError(f"rewards needs groups of at least 2 rollouts, got shape {tuple(r.shape)}")
    keep = r.max(1).values > r.min(1).values
    A = (r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-6)
    return torch.where(keep[:, None], A, torch.zeros_like(A)), keep


def ppo_loss(logp, old_logp, advantages, clip_low: float = 0.2, clip_high: float = 0.28,
             clip_dual: float = 3.0):  # fmt: skip
    """Token-mean clipped surrogate (PPO with DAPO's asymmetric clip and the dual clip).

    ratio = exp(logp - old_logp); per token max(-A ratio, -A clip(ratio, 1 - clip_low,
    1 + clip_high)), capped at -A clip_dual where A < 0; all tensors (N,).
    """
    import torch

    for name, value in (("logp", logp), ("old_logp", old_logp), ("advantages", advantages)):
        _instance(name, value, torch.Tensor)
    if not logp.shape == old_logp.shape == advantages.shape or logp.ndim != 1:
        raise ValueError("logp, old_logp and advantages must be 1-D tensors of one length")
    clip_low = validate.real("clip_low", clip_low, low=0, high=1, low_open=True, high_open=True)
    clip_high = validate.real("clip_high", clip_high, low=0, low_open=True)
    clip_dual = validate.real("clip_dual", clip_dual, low=1, low_open=True)
    return _surrogate(logp, old_logp, advantages, clip_low, clip_high, clip_dual)


def _surrogate(logp, old_logp, advantages, clip_low: float, clip_high: float, clip_dual: float):
    """ppo_loss without the argument checks (the training loop's inner call)."""
    import torch

    ratio = torch.exp(logp - old_logp)
    loss = torch.maximum(-advantages * ratio,
                         -advantages * ratio.clamp(1 - clip_low, 1 + clip_high))  # fmt: skip
    loss = torch.where(advantages < 0, torch.minimum(loss, -advantages * clip_dual), loss)
    return loss.mean()


@dataclass(frozen=True)
class TrainConfig:
    """One learning rate and one update budget for every regime (QIAO2025 batch shape and clip).

    An update k samples `prompts` demo tasks, plays `group_size` rollouts of each at
    `temperature`, and takes `minibatches` clipped optimizer steps over them; mu_k (the SFT
    weight) moves once per update, over `updates` updates.
    """

    updates: int = 250
    lr: float = 1e-2
    d: int = 128
    prompts: int = 16  # QIAO2025: 16 prompts per batch
    group_size: int = 4  # QIAO2025: rollout.n = 4
    minibatches: int = 2
    temperature: float = 0.7  # QIAO2025 rollout temperature
    clip_low: float = 0.2  # QIAO2025 (DAPO) clip range
    clip_high: float = 0.28
    clip_dual: float = 3.0  # verl's default dual clip for negative advantages
    clip_norm: float = 1.0
    schedule: str = "cosine"  # of mu_k
    lr_schedule: str = "cosine"  # of the learning rate, over all optimizer steps
    shuffle_rewards: bool = False  # negative control: rewards permuted across the batch

    def __post_init__(self) -> None:
        for name in ("updates", "d", "prompts", "minibatches"):
            validate.integer(f"TrainConfig.{name}", getattr(self, name), minimum=1)
        validate.integer("TrainConfig.group_size", self.group_size, minimum=2)
        if self.minibatches > self.prompts:
            raise ValueError(f"TrainConfig.minibatches={self.minibatches} exceeds "
                             f"prompts={self.prompts}; each step needs a prompt")  # fmt: skip
        for name in ("lr", "temperature", "clip_high", "clip_norm"):
            validate.real(f"TrainConfig.{name}", getattr(self, name), low=0, low_open=True)
        validate.real("TrainConfig.lr", self.lr, high=1.0)
        validate.real("TrainConfig.clip_low", self.clip_low, low=0, high=1, low_open=True,
                      high_open=True)  # fmt: skip
        validate.real("TrainConfig.clip_dual", self.clip_dual, low=1, low_open=True)
        validate.choice("TrainConfig.schedule", self.schedule, MU_SCHEDULES)
        validate.choice("TrainConfig.lr_schedule", self.lr_schedule, LR_SCHEDULES)
        validate.boolean("TrainConfig.shuffle_rewards", self.shuffle_rewards)


@dataclass(frozen=True)
class TrainResult:
    """A trained policy; per update its mu_k, mean rollout reward and share of informative
    groups (reward varies within the group); environment steps used."""

    policy: object = field(repr=False)
    mu: tuple[float, ...]
    mean_reward: tuple[float, ...]
    informative: tuple[float, ...]
    env_steps: int


def sft_weight(regime: str, k: int, cfg: TrainConfig) -> float:
    """mu_k of each regime: 1 (SFT), 0 (RL), the schedule (mix), 1 then 0 (SFT then RL)."""
    regime = validate.choice("regime", regime, REGIMES)
    k = validate.integer("k", k, minimum=0)
    _instance("cfg", cfg, TrainConfig)
    if regime == "mix":
        return mu_schedule(k, cfg.updates, cfg.schedule, **QIAO2025_MU)
    if regime == "sft_then_rl":
        return 1.0 if k < cfg.updates // 2 else 0.0
    return 1.0 if regime == "sft" else 0.0


@dataclass(frozen=True)
class _RLBatch:
    """The kept rollouts of one update: decisions of informative groups with their advantages."""

    X: object
    y: object
    old_logp: object
    advantage: object
    prompt: np.ndarray  # index of the decision's prompt within the batch
    rewards: np.ndarray  # (prompts, group_size), before dynamic sampling
    keep: np.ndarray  # (prompts,) informative groups
    env_steps: int


def _rl_batch(policy, tasks: list[Task], cfg: TrainConfig, generator) -> _RLBatch:
    """Play group_size rollouts per prompt; GRPO advantages; drop uninformative groups (DAPO)."""
    import torch

    episodes = [t for t in tasks for _ in range(cfg.group_size)]
    trajs, dec = _play(policy, episodes, cfg.temperature, False, generator)
    rewards = np.array([t.reward for t in trajs]).reshape(len(tasks), cfg.group_size)
    seen = rewards  # what the learner is told: the rewards, or a permutation of them
    if cfg.shuffle_rewards:
        order = torch.randperm(rewards.size, generator=generator).numpy()
        seen = rewards.reshape(-1)[order].reshape(rewards.shape)
    A, keep = grpo_advantages(seen)
    prompt = dec.owner // cfg.group_size
    rows = keep[prompt]
    return _RLBatch(dec.X[rows], dec.y[rows], dec.logp[rows], A.reshape(-1)[dec.owner][rows],
                    prompt[rows].numpy(), rewards, keep.numpy(),
                    sum(len(t.actions) for t in trajs))  # fmt: skip


def _minibatch_loss(policy, mu: float, sft: tuple | None, batch: _RLBatch | None,
                    part: np.ndarray, cfg: TrainConfig):  # fmt: skip
    """(1 - mu) L_RL + mu L_SFT on the prompts `part` of the batch (None if neither has rows).

    sft = (X, y, rows): the encoded demos and, per prompt of the batch, its demo's rows, so the
    SFT term reads the demonstrations of these same prompts (DataMind's dp_actor.py). One
    forward pass serves both terms; the RL term reads the logits at the rollout temperature.
    """
    import torch
    import torch.nn.functional as F

    inputs, r, sel = [], [], []
    if sft is not None and mu > 0:
        r = np.concatenate([sft[2][j] for j in part])
        inputs.append(sft[0][r])
    if batch is not None and mu < 1:
        sel = np.flatnonzero(np.isin(batch.prompt, part))
        inputs.append(batch.X[sel])
    if len(r) + len(sel) == 0:
        return None
    logits = policy(torch.cat(inputs))
    loss = mu * F.cross_entropy(logits[: len(r)], sft[1][r]) if len(r) else 0.0
    if len(sel):
        logp = (logits[len(r) :] / cfg.temperature).log_softmax(-1)
        logp = logp.gather(-1, batch.y[sel][:, None])[:, 0]
        pg = _surrogate(logp, batch.old_logp[sel], batch.advantage[sel], cfg.clip_low,
                        cfg.clip_high, cfg.clip_dual)  # fmt: skip
        loss = loss + (1 - mu) * pg
    return loss


def _demo_rows(demos: list[Trajectory]):
    """Encoded demonstrations and, per demo, the indices of its decision rows."""
    X, y, owner = encode(demos)
    ends = np.cumsum(np.bincount(owner.numpy(), minlength=len(demos)))
    starts = np.concatenate([[0], ends[:-1]])
    return X, y, [np.arange(s, e) for s, e in zip(starts, ends, strict=True)]


def _optimizer(policy, cfg: TrainConfig):
    """Adam at cfg.lr, decayed per optimizer step on a cosine to 0 (or held constant)."""
    import torch

    opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr, fused=True)  # fused: 3x faster on CPU
    n_steps = cfg.updates * cfg.minibatches
    if cfg.lr_schedule == "constant":
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    cosine = lambda i: 0.5 * (1 + math.cos(math.pi * i / n_steps))  # noqa: E731
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, cosine)


def train_policy(regime: str, demos: list[Trajectory], cfg: TrainConfig, seed: int,
                 rollout_seed: int | None = None) -> TrainResult:  # fmt: skip
    """Train a fresh policy for cfg.updates updates on (1 - mu_k) L_RL + mu_k L_SFT.

    Every regime draws its prompts from the demos' tasks; only mu_k > 0 reads the demos' actions.
    seed: the initialisation and the prompts; rollout_seed: the rollouts' draws (default: seed).
    """
    import torch

    regime = validate.choice("regime", regime, REGIMES)
    demos = _items("demos", demos, Trajectory)
    _instance("cfg", cfg, TrainConfig)
    seed = validate.integer("seed", seed, minimum=0)
    rollout_seed = seed if rollout_seed is None else rollout_seed
    rollout_seed = validate.integer("rollout_seed", rollout_seed, minimum=0)
    if len(demos) < cfg.prompts:
        raise ValueError(f"{len(demos)} demos cannot fill a batch of {cfg.prompts} prompts")
    policy = make_policy(cfg.d, seed)
    opt, sched = _optimizer(policy, cfg)
    rng, gen = np.random.default_rng(seed), torch.Generator().manual_seed(rollout_seed)
    X_demo, y_demo, demo_rows = _demo_rows(demos) if regime != "rl" else (None, None, None)
    mus, rewards, informative, env_steps = [], [], [], 0
    for k in range(cfg.updates):
        mu = sft_weight(regime, k, cfg)
        prompts = rng.choice(len(demos), cfg.prompts, replace=False)
        batch = _rl_batch(policy, [demos[i].task for i in prompts], cfg, gen) if mu < 1 else None
        if batch is not None:
            env_steps += batch.env_steps
            rewards.append(float(batch.rewards.mean()))
            informative.append(float(batch.keep.mean()))
        sft = None if demo_rows is None else (X_demo, y_demo, [demo_rows[i] for i in prompts])
        for part in np.array_split(np.arange(cfg.prompts), cfg.minibatches):
            loss = _minibatch_loss(policy, mu, sft, batch, part, cfg)
            if loss is not None:
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.clip_norm)
                opt.step()
                sched.step()
        mus.append(mu)
    return TrainResult(policy, tuple(mus), tuple(rewards), tuple(informative), env_steps)


def sample_correct(policy, tasks: list[Task], runs: int = 3, temperature: float = 0.7,
                   seed: int = 0) -> np.ndarray:  # fmt: skip
    """QIAO2025's evaluation: `runs` sampled episodes per task at `temperature`; returns the
    correctness (n_tasks, runs) as 0/1 floats (avg@runs = its mean, pass@runs = any per row)."""
    import torch

    _check_policy(policy)
    tasks = _items("tasks", tasks, Task)
    runs = validate.integer("runs", runs, minimum=1)
    temperature = validate.real("temperature", temperature, low=0, low_open=True)
    gen = torch.Generator().manual_seed(validate.integer("seed", seed, minimum=0))
    trajs, _ = _play(policy, [t for t in tasks for _ in range(runs)], temperature, False, gen)
    return np.array([t.correct for t in trajs], dtype=float).reshape(len(tasks), runs)


@dataclass(frozen=True)
class Turn:
    """One turn of a sandboxed rollout: the action, what the agent saw, the process's status."""

    action: str
    observation: str
    status: str
    message: str
    wall_s: float


def code_rollout(policy, task: Task, limits=None) -> tuple[Trajectory, list[Turn]]:
    """Greedy episode in which every action runs as real Python in a fresh sandboxed process.

    Each turn runs the prelude, the accumulated code of the turns that succeeded, and the new
    action's code; only the new action reports, so earlier output is not repeated (DataMind
    replaces old prints with `pass`). A failed run (exception, timeout, memory, a blocked call,
    or output that cannot be read) gives the observation ERR and its code is not kept.
    """
    import torch

    from lib.sandbox import run_sandboxed

    _check_policy(policy)
    _instance("task", task, Task)
    kept, acts, obs, turns, answer = [prelude(task)], [], [], [], None
    for _ in range(MAX_STEPS):
        X = torch.zeros(1, N_FEATURES)
        X[0, _features(task.query, tuple(acts), tuple(obs))] = 1
        with torch.no_grad():
            action = ACTIONS[int(policy(X).argmax())]
        body, report = compile_action(action)
        result = run_sandboxed("".join(kept) + body + report, {FILE_NAME: task.path}, limits)
        o, value, message = "ERR", None, result.message
        if result.ok:
            try:
                o, value = parse_output(result.stdout)
                o = o or "ERR"  # a program that reports nothing has failed
            except OutputError as err:
                message = str(err)
        if o != "ERR":
            kept.append(body)
        acts.append(action)
        obs.append(o)
        turns.append(Turn(action, o, result.status, message, result.wall_s))
        if o == "DONE":
            answer = value
            break
    return Trajectory(task, tuple(acts), tuple(obs), answer, reward(answer, task.gold)), turns


# --------------------------------------------------------------------- the chapter's experiment


@dataclass(frozen=True)
class Run:
    """One training run of a replicate: a regime on one demonstration set, with its options.

    hints: demos from EXPERT_HINTED (else EXPERT_RAW); filtering: one of FILTERS; schedule:
    of mu_k; shuffle_rewards: the RL term sees permuted rewards (a negative control); rerun:
    n > 0 repeats the run with the same initialisation and prompts but the n-th other rollout
    draws (a same-method null).
    """

    regime: str
    hints: bool = True
    filtering: str = "filtered"
    schedule: str = "cosine"
    shuffle_rewards: bool = False
    rerun: int = 0

    def __post_init__(self) -> None:
        validate.choice("Run.regime", self.regime, REGIMES)
        validate.boolean("Run.hints", self.hints)
        validate.choice("Run.filtering", self.filtering, FILTERS)
        validate.choice("Run.schedule", self.schedule, MU_SCHEDULES)
        validate.boolean("Run.shuffle_rewards", self.shuffle_rewards)
        validate.integer("Run.rerun", self.rerun, minimum=0)

    @property
    def demos(self) -> str:
        """The name of its demonstration set, e.g. 'hints, filtered'."""
        return f"{'hints' if self.hints else 'no hints'}, {self.filtering}"


@dataclass(frozen=True)
class Design:
    """The size of one replicate (tasks, expert samples, evaluation, training) and its runs."""

    n_train: int = 300  # tasks the expert writes demonstrations for (the RL prompts)
    n_heldout: int = 600  # evaluation tasks, never trained on
    K: int = 3  # expert samples per task for self-consistency
    eval_runs: int = 3  # QIAO2025: 3 sampled runs per task (avg@3)
    eval_temperature: float = 0.7  # QIAO2025
    train: TrainConfig = TrainConfig()
    runs: tuple[tuple[str, Run], ...] = (("SFT", Run("sft")),)  # (name, run) pairs

    def __post_init__(self) -> None:
        for name in ("n_train", "n_heldout", "K", "eval_runs"):
            validate.integer(f"Design.{name}", getattr(self, name), minimum=1)
        validate.real("Design.eval_temperature", self.eval_temperature, low=0, low_open=True)
        _instance("Design.train", self.train, TrainConfig)
        runs = _items("Design.runs", self.runs, tuple)
        for i, pair in enumerate(runs):
            if len(pair) != 2:
                raise ValueError(f"Design.runs[{i}] must be a (name, Run) pair, got {pair!r:.80}")
            validate.text(f"Design.runs[{i}][0]", pair[0])
            _instance(f"Design.runs[{i}][1]", pair[1], Run)
        names = [name for name, _ in runs]
        if len(set(names)) != len(names):
            raise ValueError(f"Design.runs names must be distinct, got {names}")


@dataclass(frozen=True)
class ReplicateResult:
    """One replicate. Per run: held-out correctness (n_heldout, eval_runs), training curves,
    environment steps, the trained policy. Per demonstration set ('hints, filtered', ...):
    precision (share correct, from gold), count, share whose first loader failed. Per held-out
    task: its depth and whether the expert's blind spot bites. The taxonomy of all tasks."""

    seed: int
    depth: np.ndarray
    blind: np.ndarray
    correct: dict[str, np.ndarray]
    precision: dict[str, float]
    kept: dict[str, int]
    recovery: dict[str, float]
    reward: dict[str, tuple[float, ...]]
    informative: dict[str, tuple[float, ...]]
    env_steps: dict[str, int]
    taxonomy: dict[int, dict[str, float]]
    policies: dict[str, object] = field(repr=False)


def _demo_sets(train: list[Task], design: Design, seed: int) -> dict[str, list[Trajectory]]:
    """The demonstration sets the design's runs read, by name (e.g. 'no hints, random')."""
    sets = {}
    for hints in sorted({run.hints for _, run in design.runs}):
        expert = EXPERT_HINTED if hints else EXPERT_RAW
        for filtering, demos in synthesize_demos(train, expert, design.K, seed).items():
            sets[Run("sft", hints, filtering).demos] = demos
    return sets


def _rollout_seed(seed: int, rerun: int) -> int:
    """The rollouts' seed of a run: the replicate's training seed, or one derived for a rerun."""
    return seed if rerun == 0 else int(np.random.SeedSequence([seed, rerun]).generate_state(1)[0])


def run_replicate(seed: int, design: Design) -> ReplicateResult:
    """One replicate of the whole experiment: fresh task files, expert demonstrations, every run
    of the design trained from the same seed, all evaluated on the same held-out tasks."""
    seed = validate.integer("seed", seed, minimum=0)
    _instance("design", design, Design)
    s_tasks, s_held, s_demo, s_train, s_eval = (
        int(x) for x in np.random.SeedSequence(seed).generate_state(5)
    )
    with tempfile.TemporaryDirectory(prefix="agents_") as root:
        train = make_tasks(design.n_train, Path(root), s_tasks)
        held = make_tasks(design.n_heldout, Path(root), s_held, first_id=design.n_train)
        demos = _demo_sets(train, design, s_demo)
        runs = {}
        for name, run in design.runs:
            cfg = replace(design.train, schedule=run.schedule, shuffle_rewards=run.shuffle_rewards)
            runs[name] = train_policy(run.regime, demos[run.demos], cfg, s_train,
                                      _rollout_seed(s_train, run.rerun))  # fmt: skip
        return ReplicateResult(
            seed, np.array([t.query.depth for t in held]),
            np.array([blind_spot_bites(t) for t in held]),
            {name: sample_correct(run.policy, held, design.eval_runs, design.eval_temperature,
                                  s_eval) for name, run in runs.items()},
            {name: float(np.mean([d.correct for d in d_])) for name, d_ in demos.items()},
            {name: len(d_) for name, d_ in demos.items()},
            {name: float(np.mean([d.observations[0] == "ERR" for d in d_]))
             for name, d_ in demos.items()},
            {name: run.mean_reward for name, run in runs.items()},
            {name: run.informative for name, run in runs.items()},
            {name: run.env_steps for name, run in runs.items()},
            taxonomy_stats(train + held), {name: run.policy for name, run in runs.items()},
        )  # fmt: skip
