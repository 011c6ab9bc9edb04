"""DataMind in miniature (Qiao et al. 2026, "Scaling Generalist Data-Analytic Agents").

The four parts of the recipe, at toy scale:
1. Environment and taxonomy: small tables written as real CSV, JSON or SQLite files (format
   hidden), depth-1 queries and their recursive composition into depth 2 and 3.
2. Trajectory synthesis by a scripted, noisy "expert" (fewer errors with knowledge hints), then
   a rule filter and a self-consistency filter that never look at gold answers.
3. A small MLP policy over single-token program actions, trained by SFT, by RL with a group
   baseline, and by the dynamically weighted objective (1 - mu_k) L_RL + mu_k L_SFT.
4. Two execution paths: a fast in-process interpreter of the action language, and each action
   compiled to stdlib Python that runs in `lib.sandbox` (the multi-turn code rollout re-runs the
   accumulated successful code in a fresh process each turn, as DataMind's interpreter does).
"""

from __future__ import annotations

import csv
import functools
import json
import math
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

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
        if self.family not in FAMILIES:
            raise ValueError(f"family={self.family!r} is unknown; use one of {FAMILIES}")
        if self.g not in CATEGORIES:
            raise ValueError(f"g={self.g!r} must be a category column, one of {tuple(CATEGORIES)}")

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
    if loader not in LOADERS:
        raise ValueError(f"loader={loader!r} is unknown; use one of {LOADERS}")
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
    if depth not in (1, 2, 3):
        raise ValueError(f"depth must be 1, 2 or 3, got {depth!r}")
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
    if fmt not in FORMATS:
        raise ValueError(f"fmt={fmt!r} is unknown; use one of {FORMATS}")
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
    if loader == "LOAD_CSV":
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    elif loader == "LOAD_JSON":
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
    elif loader == "LOAD_SQL":
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = [
                dict(zip(COLUMNS, r, strict=True))
                for r in con.execute("SELECT c0, c1, x0, x1 FROM t ORDER BY rowid")
            ]
        finally:
            con.close()
    else:
        raise ValueError(f"loader={loader!r} is unknown; use one of {LOADERS}")
    if not isinstance(rows, list) or not rows or list(rows[0]) != list(COLUMNS):
        raise ValueError(f"{loader} did not find a table with columns {COLUMNS}")
    return {c: tuple(int(r[c]) if c in NUMERIC else str(r[c]) for r in rows) for c in COLUMNS}


# ------------------------------------------------------------------------------ the interpreter


@dataclass(frozen=True)
class State:
    """Interpreter state: loaded table, row indices in view, memory slot M0, last value V."""

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


def _filter(task: Task, s: State, col: str, op: str, slot: str) -> State | None:
    """FILTER col op slot; None when the types do not fit (EQ needs a category, GT/LT a number)."""
    value = {"Q0": task.query.Q0, "Q1": task.query.Q1, "M0": s.M0}[slot]
    if op == "EQ" and (col not in CATEGORIES or not isinstance(value, str)):
        return None
    if op != "EQ" and (col not in NUMERIC or not isinstance(value, int)):
        return None
    data = s.table[col]
    keep = {"EQ": lambda v: v == value, "GT": lambda v: v > value, "LT": lambda v: v < value}[op]
    return State(s.table, tuple(i for i in s.view if keep(data[i])), s.M0, s.V, s.n_steps)


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
    for i in s.view:
        key = s.table[g][i]
        totals[key] = totals.get(key, 0) + (s.table[x][i] if agg == "SUM" else 1)
    return max(sorted(totals), key=totals.__getitem__) if totals else None


def step(task: Task, s: State, action: str) -> tuple[State, str]:
    """Execute one action; returns the new state and the observation (one of OBSERVATIONS)."""
    n = s.n_steps + 1
    if action in LOADERS:
        table = task.loaded.get(action)
        if table is None:
            return State(s.table, s.view, s.M0, s.V, n), "ERR"
        return State(table, tuple(range(N_ROWS)), s.M0, s.V, n), "OK"
    if action == "ANSWER":
        return State(s.table, s.view, s.M0, s.V, n, done=True), "DONE"
    if s.table is None:
        return State(None, (), s.M0, s.V, n), "ERR"
    kind, *args = action.split()
    if kind == "RESET":
        return State(s.table, tuple(range(N_ROWS)), s.M0, s.V, n), "OK"
    if kind == "FILTER":
        new = _filter(task, s, *args)
        if new is None:
            return State(s.table, s.view, s.M0, s.V, n), "ERR"
        return State(new.table, new.view, new.M0, new.V, n), "OK" if new.view else "EMPTY"
    value = _aggregate(s, *args) if kind == "AGG" else _argmax(s, *args)
    if value is None:
        return State(s.table, s.view, s.M0, s.V, n), "ERR"
    M0 = value if kind == "ARGMAX" else s.M0
    return State(s.table, s.view, M0, value, n), "VAL"


def run_program(task: Task, actions: tuple[str, ...]) -> tuple[tuple[str, ...], object]:
    """Replay a whole program from the file (stateless replay); returns (observations, answer)."""
    unknown = [a for a in actions if a not in ACTION_ID]
    if unknown:
        raise ValueError(f"actions {unknown} are not in ACTIONS; use lib.agents.ACTIONS")
    s, obs = State(), []
    for action in actions[:MAX_STEPS]:
        s, o = step(task, s, action)
        obs.append(o)
        if s.done:
            break
    return tuple(obs), (s.V if s.done else None)


# -------------------------------------------------------------------------- tasks and rewards


def is_correct(answer: object, gold: float | str) -> bool:
    """DataMind's judge rule: categories must match exactly, numbers within REL_TOL (3 %)."""
    if isinstance(gold, str) or isinstance(answer, str | bool) or answer is None:
        return answer == gold
    return abs(float(answer) - float(gold)) <= REL_TOL * abs(float(gold))


def reward(answer: object, gold: float | str) -> float:
    """Reward of QIAO2025: 1 if correct, 0 if a wrong answer was given, -0.1 if none was."""
    if answer is None:
        return REWARD_INVALID
    return REWARD_CORRECT if is_correct(answer, gold) else REWARD_WRONG


def _random_table(rng: np.random.Generator) -> dict[str, list]:
    """N_ROWS rows: two category columns and two integer columns in [0, 99]."""
    table = {c: [str(v) for v in rng.choice(CATEGORIES[c], N_ROWS)] for c in CATEGORIES}
    table.update({x: [int(v) for v in rng.integers(0, 100, N_ROWS)] for x in NUMERIC})
    return table


def make_tasks(n: int, root: Path, seed: int, first_id: int = 0) -> list[Task]:
    """Write n tasks (depths 1, 2, 3 in turn) as real files under root; gold from the program.

    Tables on which the gold program meets an empty view or an error are drawn again.
    """
    if not isinstance(n, int) or n <= 0:
        raise ValueError(f"n must be a positive int, got {n!r}")
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
        loaded = {}
        for loader in LOADERS:
            try:
                loaded[loader] = load_table(path, loader)
            except (ValueError, KeyError, csv.Error, sqlite3.Error):
                pass  # the wrong loader fails, as it would for the agent
        if list(loaded) != [LOADER_OF[fmt]]:
            raise RuntimeError(f"{fmt} file {path} was read by {list(loaded)}; loaders are broken")
        task = Task(task_id, query, fmt, path, loaded)
        obs, answer = run_program(task, gold_program(query, LOADER_OF[fmt]))
        if answer is not None and not {"ERR", "EMPTY"} & set(obs):
            tasks.append(Task(task_id, query, fmt, path, loaded, gold=answer))
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
    blind_spot: always reads "largest SUM by c1" as "most rows by c1" (a consistent error).
    """

    p_confuse: float
    p_arg: float
    p_skip: float
    blind_spot: bool = False

    def __post_init__(self) -> None:
        for name in ("p_confuse", "p_arg", "p_skip"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"Expert.{name} must be a probability in [0, 1], got {value!r}")


EXPERT_RAW = Expert(p_confuse=0.30, p_arg=0.10, p_skip=0.10)  # no knowledge hints
EXPERT_HINTED = Expert(p_confuse=0.05, p_arg=0.02, p_skip=0.02)  # with knowledge hints
EXPERT_BLIND = Expert(p_confuse=0.05, p_arg=0.02, p_skip=0.02, blind_spot=True)
_KINDS = {k: [a for a in ACTIONS if a.split()[0] == k] for k in ("FILTER", "AGG", "ARGMAX")}


def _expert_plan(task: Task, expert: Expert, rng: np.random.Generator) -> list[str]:
    """The expert's program after the loader, with its errors applied."""
    plan = list(gold_program(task.query, LOADERS[0])[1:])
    for i, a in enumerate(plan):
        words = a.split()
        swap = rng.random() < expert.p_confuse
        swap |= expert.blind_spot and words[:3] == ["ARGMAX", "c1", "SUM"]
        if words[0] == "ARGMAX" and swap:
            words[2] = {"SUM": "COUNT", "COUNT": "SUM"}[words[2]]
            plan[i] = " ".join(words)
        if words[0] in _KINDS and rng.random() < expert.p_arg:
            plan[i] = str(rng.choice(_KINDS[words[0]]))
    if len(plan) > 2 and rng.random() < expert.p_skip:
        del plan[int(rng.integers(0, len(plan) - 1))]
    return plan


def sample_trajectory(task: Task, expert: Expert, rng: np.random.Generator) -> Trajectory:
    """One expert episode: try loaders in random order until one works, then run the plan."""
    s, actions, obs = State(), [], []
    plan = [str(a) for a in rng.permutation(LOADERS)]
    plan = plan[: plan.index(LOADER_OF[task.fmt]) + 1] + _expert_plan(task, expert, rng)
    for action in plan[:MAX_STEPS]:
        s, o = step(task, s, action)
        actions.append(action)
        obs.append(o)
        if s.done:
            break
    answer = s.V if s.done else None
    return Trajectory(task, tuple(actions), tuple(obs), answer, reward(answer, task.gold))


def passes_rules(t: Trajectory) -> bool:
    """Rule filter: ends with a submitted answer, no error except from a wrong loader."""
    errors = [a for a, o in zip(t.actions, t.observations, strict=True)
              if o == "ERR" and a not in LOADERS]  # fmt: skip
    return bool(t.actions) and t.actions[-1] == "ANSWER" and t.answer is not None and not errors


def self_consistent(samples: list[Trajectory], min_agree: int = 2) -> Trajectory | None:
    """Self-consistency filter: the shortest sample of the largest agreeing group, if >= min_agree.

    Answers agree when is_correct(a, b) holds (same 3 % tolerance); no gold answer is used.
    """
    if min_agree < 1:
        raise ValueError(f"min_agree must be >= 1, got {min_agree}")
    kept = [t for t in samples if passes_rules(t)]
    groups = [[t for t in kept if is_correct(t.answer, u.answer)] for u in kept]
    best = max(groups, key=len, default=[])
    return min(best, key=lambda t: len(t.actions)) if len(best) >= min_agree else None


def synthesize_demos(
    tasks: list[Task], expert: Expert, K: int, seed: int, filtered: bool
) -> list[Trajectory]:
    """K samples per task; filtered: rule + self-consistency filter, else the first sample raw."""
    if K < 1:
        raise ValueError(f"K must be >= 1 samples per task, got {K}")
    rng, demos = np.random.default_rng(seed), []
    for task in tasks:
        samples = [sample_trajectory(task, expert, rng) for _ in range(K)]
        chosen = self_consistent(samples) if filtered else samples[0]
        if chosen is not None:
            demos.append(chosen)
    return demos


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
    if action not in ACTION_ID:
        raise ValueError(f"action={action!r} is not in ACTIONS")
    kind, *args = action.split()
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
    return _PRELUDE.format(path=FILE_NAME, Q0=task.query.Q0, Q1=task.query.Q1)


def compile_program(task: Task, actions: tuple[str, ...]) -> str:
    """One Python script for a whole program (used to cross-check the gold programs)."""
    return prelude(task) + "".join(b + r for b, r in map(compile_action, actions))


def parse_output(stdout: str) -> tuple[str | None, object]:
    """Read the last observation and the answer (None if absent) from a program's stdout."""
    import ast

    obs, answer = None, None
    for line in stdout.splitlines():
        if line.startswith("__OBS__ "):
            obs = line.split()[1]
        elif line.startswith("__ANSWER__ "):
            answer = ast.literal_eval(line.removeprefix("__ANSWER__ "))
    return obs, answer


# ------------------------------------------------------------------------ policy and training

REGIMES = ("sft", "rl", "mix", "sft_then_rl")
MU_SCHEDULES = ("cosine", "linear", "constant")
QIAO2025_MU = {"mu_peak": 0.9, "mu_valley": 0.05, "k_w": 0}  # shipped CHORD-mu settings


def mu_schedule(k: int, k_d: int, kind: str = "cosine", mu_peak: float = 0.9,
                mu_valley: float = 0.05, k_w: int = 0) -> float:  # fmt: skip
    """SFT weight mu_k: linear warm-up over k_w steps, then a cosine (or linear) decay over k_d.

    mu_k = mu_valley + (mu_peak - mu_valley) (1 + cos(pi (k - k_w) / k_d)) / 2 for the cosine
    (CHORD-mu, as in DataMind's dp_actor.py); 'constant' returns (mu_peak + mu_valley) / 2.
    """
    if kind not in MU_SCHEDULES:
        raise ValueError(f"kind={kind!r} is unknown; use one of {MU_SCHEDULES}")
    if k < 0 or k_d <= 0 or k_w < 0:
        raise ValueError(f"need k >= 0, k_d > 0, k_w >= 0; got k={k}, k_d={k_d}, k_w={k_w}")
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


def history_features(query: Query, actions: tuple[str, ...], observations: tuple[str, ...]) -> list:
    """Indices of the active binary features of a history (the policy's input, N_FEATURES wide).

    The history is summarised as: the prompt's slot tokens, the set of actions that ran (OK,
    EMPTY or VAL), the set that failed (ERR), the last observation and the turn number.
    """
    if len(actions) != len(observations) or len(actions) >= MAX_STEPS:
        raise ValueError(f"need equal-length histories shorter than {MAX_STEPS}, got "
                         f"{len(actions)} actions, {len(observations)} observations")  # fmt: skip
    idx = list(_prompt_ids(query))
    for a, o in zip(actions, observations, strict=True):
        idx.append((_F_FAIL if o == "ERR" else _F_DONE) + ACTION_ID[a])
    last = _OBS_ID[observations[-1]] if observations else len(OBSERVATIONS)
    return [*idx, _F_OBS + last, _F_TURN + len(actions)]


def encode(trajectories: list[Trajectory]):
    """Training rows for every decision: features X (N, N_FEATURES), actions y (N,), owner (N,).

    owner[n] is the index of the trajectory that decision n belongs to.
    """
    import torch

    cols, y, owner = [], [], []
    for i, t in enumerate(trajectories):
        for k, a in enumerate(t.actions):
            cols.append(history_features(t.task.query, t.actions[:k], t.observations[:k]))
            y.append(ACTION_ID[a])
            owner.append(i)
    X = np.zeros((len(cols), N_FEATURES), dtype=np.float32)
    X[np.repeat(np.arange(len(cols)), [len(c) for c in cols]), np.concatenate(cols or [[]])] = 1
    return torch.from_numpy(X), torch.tensor(y, dtype=torch.long), torch.tensor(owner)


def make_policy(d: int = 128, seed: int = 0):
    """A fresh policy: N_FEATURES -> d (ReLU) -> d (ReLU) -> logits over the 57 actions."""
    import torch
    from torch import nn

    if d <= 0:
        raise ValueError(f"d must be a positive width, got {d}")
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(N_FEATURES, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(),
                         nn.Linear(d, len(ACTIONS)))  # fmt: skip


def rollout(policy, tasks: list[Task], group_size: int = 1, greedy: bool = False,
            generator=None) -> list[Trajectory]:  # fmt: skip
    """Run group_size episodes per task in the in-process interpreter (batched, no gradients)."""
    import torch

    episodes = [t for t in tasks for _ in range(group_size)]
    states = [State() for _ in episodes]
    acts, obs = [[] for _ in episodes], [[] for _ in episodes]
    # Features are updated in place turn by turn; they equal history_features() (tested).
    X = np.zeros((len(episodes), N_FEATURES), dtype=np.float32)
    for i, t in enumerate(episodes):
        X[i, history_features(t.query, (), ())] = 1
    with torch.no_grad():
        for turn in range(MAX_STEPS):
            live = [i for i, s in enumerate(states) if not s.done]
            if not live:
                break
            logits = policy(torch.from_numpy(X[live]))
            if greedy:
                choice = logits.argmax(-1)
            else:
                choice = torch.multinomial(logits.softmax(-1), 1, generator=generator)[:, 0]
            for i, a in zip(live, choice.tolist(), strict=True):
                states[i], o = step(episodes[i], states[i], ACTIONS[a])
                row = X[i]
                row[_F_OBS + (_OBS_ID[obs[i][-1]] if obs[i] else len(OBSERVATIONS))] = 0
                row[_F_TURN + turn] = 0
                row[(_F_FAIL if o == "ERR" else _F_DONE) + a] = 1
                if turn + 1 < MAX_STEPS:
                    row[_F_OBS + _OBS_ID[o]] = 1
                    row[_F_TURN + turn + 1] = 1
                acts[i].append(ACTIONS[a])
                obs[i].append(o)
    answers = [s.V if s.done else None for s in states]
    return [Trajectory(t, tuple(a), tuple(o), ans, reward(ans, t.gold))
            for t, a, o, ans in zip(episodes, acts, obs, answers, strict=True)]  # fmt: skip


def sft_loss(policy, X, y):
    """L_SFT: token-mean cross-entropy of the demonstrated actions (nats per action)."""
    import torch.nn.functional as F

    return F.cross_entropy(policy(X), y)


def rl_loss(policy, trajectories: list[Trajectory], group_size: int):
    """L_RL: group-baseline policy gradient, token-mean; None if every group is uninformative.

    A_ij = r_ij - mean_j r_ij within each task's group (GRPO without the std); groups whose
    rewards are all equal are dropped (DAPO dynamic sampling). With one update per batch the
    PPO ratio is 1, so DataMind's clipped surrogate reduces to this gradient.
    """
    import torch

    if len(trajectories) % group_size:
        raise ValueError(f"{len(trajectories)} trajectories are not groups of {group_size}")
    r = torch.tensor([t.reward for t in trajectories]).reshape(-1, group_size)
    keep = (r.max(1).values > r.min(1).values).repeat_interleave(group_size)
    if not keep.any():
        return None
    A = (r - r.mean(1, keepdim=True)).reshape(-1)[keep]
    X, y, owner = encode([t for t, k in zip(trajectories, keep.tolist(), strict=True) if k])
    logp = policy(X).log_softmax(-1).gather(-1, y[:, None])[:, 0]
    return -(A[owner] * logp).mean()


@dataclass(frozen=True)
class TrainConfig:
    """One learning rate and one update budget for every regime (QIAO2025 mu settings)."""

    updates: int = 300
    lr: float = 3e-3
    d: int = 128
    sft_batch: int = 64  # decisions (action tokens) per SFT batch
    rl_tasks: int = 8
    group_size: int = 8
    clip_norm: float = 1.0
    schedule: str = "cosine"

    def __post_init__(self) -> None:
        for name in ("updates", "d", "sft_batch", "rl_tasks", "group_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) <= 0:
                raise ValueError(f"TrainConfig.{name} must be a positive int")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 for a group baseline, got {self.group_size}")
        if self.schedule not in MU_SCHEDULES:
            raise ValueError(f"schedule={self.schedule!r} is unknown; use one of {MU_SCHEDULES}")


@dataclass(frozen=True)
class TrainResult:
    """A trained policy, its mu_k and mean rollout reward per update, and env steps used."""

    policy: object = field(repr=False)
    mu: tuple[float, ...]
    mean_reward: tuple[float, ...]
    env_steps: int


def sft_weight(regime: str, k: int, cfg: TrainConfig) -> float:
    """mu_k of each regime: 1 (SFT), 0 (RL), the schedule (mix), 1 then 0 (SFT then RL)."""
    if regime not in REGIMES:
        raise ValueError(f"regime={regime!r} is unknown; use one of {REGIMES}")
    if regime == "mix":
        return mu_schedule(k, cfg.updates, cfg.schedule, **QIAO2025_MU)
    if regime == "sft_then_rl":
        return 1.0 if k < cfg.updates // 2 else 0.0
    return 1.0 if regime == "sft" else 0.0


def train_policy(regime: str, demos: list[Trajectory], tasks: list[Task], cfg: TrainConfig,
                 seed: int) -> TrainResult:  # fmt: skip
    """Train a fresh policy for cfg.updates steps on (1 - mu_k) L_RL + mu_k L_SFT."""
    import torch

    if regime != "rl" and not demos:
        raise ValueError(f"regime {regime!r} needs demonstrations; got none")
    policy = make_policy(cfg.d, seed)
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
    rng, gen = np.random.default_rng(seed), torch.Generator().manual_seed(seed)
    X_demo, y_demo, _ = encode(demos) if demos else (None, None, None)
    mus, rewards, env_steps = [], [], 0
    for k in range(cfg.updates):
        mu, loss = sft_weight(regime, k, cfg), torch.zeros(())
        if mu > 0:
            idx = torch.from_numpy(rng.integers(0, len(y_demo), cfg.sft_batch))
            loss = loss + mu * sft_loss(policy, X_demo[idx], y_demo[idx])
        if mu < 1:
            batch = [tasks[i] for i in rng.integers(0, len(tasks), cfg.rl_tasks)]
            trajs = rollout(policy, batch, cfg.group_size, generator=gen)
            env_steps += sum(len(t.actions) for t in trajs)
            rewards.append(float(np.mean([t.reward for t in trajs])))
            rl = rl_loss(policy, trajs, cfg.group_size)
            loss = loss + (1 - mu) * rl if rl is not None else loss
        mus.append(mu)
        if loss.requires_grad:
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.clip_norm)
            opt.step()
    return TrainResult(policy, tuple(mus), tuple(rewards), env_steps)


def correctness(policy, tasks: list[Task]) -> np.ndarray:
    """Greedy decoding on each task: 1.0 where the answer is correct, else 0.0 (shape (n,))."""
    if not tasks:
        raise ValueError("tasks is empty; pass at least one held-out task")
    return np.array([t.correct for t in rollout(policy, tasks, greedy=True)], dtype=float)


def evaluate(policy, tasks: list[Task]) -> dict[str, float]:
    """Greedy held-out accuracy: overall, per depth ('d1', 'd2', 'd3') and depth >= 2 ('d2+')."""
    ok = correctness(policy, tasks)
    depth = np.array([t.query.depth for t in tasks])
    out = {"all": float(ok.mean()), "d2+": float(ok[depth >= 2].mean())}
    out.update({f"d{d}": float(ok[depth == d].mean()) for d in (1, 2, 3)})
    return out


def code_rollout(policy, task: Task, limits=None) -> tuple[Trajectory, list]:
    """Greedy episode in which every action runs as real Python in a fresh sandboxed process.

    Each turn runs the prelude, the accumulated code of the turns that succeeded, and the new
    action's code; only the new action reports, so earlier output is not repeated (DataMind
    replaces old prints with `pass`). A failed run (exception, timeout, memory or a blocked
    call) gives the observation ERR and its code is not kept. Returns the trajectory and the
    SandboxResult of every turn.
    """
    import torch

    from lib.sandbox import run_sandboxed

    kept, acts, obs, results, answer = [prelude(task)], [], [], [], None
    for _ in range(MAX_STEPS):
        X = torch.zeros(1, N_FEATURES)
        X[0, history_features(task.query, tuple(acts), tuple(obs))] = 1
        with torch.no_grad():
            action = ACTIONS[int(policy(X).argmax())]
        body, report = compile_action(action)
        result = run_sandboxed("".join(kept) + body + report, {FILE_NAME: task.path}, limits)
        o, value = parse_output(result.stdout) if result.ok else ("ERR", None)
        if result.ok:
            kept.append(body)
        acts.append(action)
        obs.append(o)
        results.append(result)
        if o == "DONE":
            answer = value
            break
    return Trajectory(task, tuple(acts), tuple(obs), answer, reward(answer, task.gold)), results
