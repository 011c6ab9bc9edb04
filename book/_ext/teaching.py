"""The page for teachers (book/teaching.md), generated from the chapters, never typed.

Per chapter it reads the front matter's `teaching:` key (the paper's key in references.bib,
a topic, the methods it practises from METHODS, the lecture-sized unit it belongs to), the
`repro: budget_s` run-time budget, the **Prerequisites:** bullet of the "At a glance" box, and
the exercises of the `## Exercises` list with their bold difficulty labels. A chapter lacking
any of these raises TeachingError naming the chapter and the field (tests/test_teaching.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from claims_map import ROOT, front_matter, toc_chapters

# The methods a chapter can practise: a small fixed vocabulary, each with what it means here
METHODS = {
    "power-law fitting": "fitting a scaling law by least squares and reading its exponents",
    "held-out prediction": "fitting on small or seen runs, then predicting larger or unseen ones",
    "simulation vs theory": "checking a simulation against a closed-form prediction",
    "paired tests": "differences between two methods over paired replicate seeds, with a "
    "t-interval",
    "bootstrap intervals": "resampling to put an interval on a fitted quantity",
    "parameter sweeps": "grids and phase diagrams over a model's parameters",
    "training small networks": "training small torch models end to end on a CPU",
    "sandboxing": "running generated, untrusted code in an isolated process",
}
DIFFICULTIES = ("Easy", "Medium", "Hard")
UNITS = (3, 4)  # the chapters form three or four lecture-sized units
LABEL = re.compile(r"\*\*(Easy|Medium|Hard)\.\*\*\s*")
DIRECTIVE = r"^```\{exercise\}[^\n]*\n(?::[^\n]*\n)*\s*(.*?)\n```"  # an exercise's body


class TeachingError(ValueError):
    """A chapter lacks a field the teachers' page needs (the message names both)."""


@dataclass(frozen=True)
class Exercise:
    number: int
    difficulty: str
    summary: str  # the exercise's first sentence, as written (MyST)


@dataclass(frozen=True)
class Chapter:
    name: str  # e.g. '07_downstream_prediction'
    title: str  # the chapter's H1
    paper: str  # its key in book/references.bib
    topic: str
    unit: str
    methods: tuple[str, ...]
    prerequisites: str
    budget_s: float  # front matter `repro: budget_s`, seconds on 2 idle cores
    exercises: tuple[Exercise, ...]

    @property
    def number(self) -> int:
        return int(self.name[:2])


def _field(name: str, record: dict, key: str, kind: type, hint: str):
    value = record.get(key) if isinstance(record, dict) else None
    if not isinstance(value, kind) or not value:
        raise TeachingError(f"{name}: front matter lacks `{hint}`")
    return value


def at_a_glance(name: str, body: str) -> dict[str, str]:
    """The bullets of the chapter's "At a glance" admonition: {'Prerequisites': '...', ...}."""
    box = re.search(r"^:::\{admonition\} At a glance\n(.*?)^:::$", body, re.S | re.M)
    if not box:
        raise TeachingError(f"{name}: no ':::{{admonition}} At a glance' box")
    bullets = re.findall(r"^- \*\*([^*:]+):\*\*\s*(.*?)(?=^- \*\*|\Z)", box.group(1), re.S | re.M)
    return {key: " ".join(text.split()) for key, text in bullets}


def first_sentence(text: str) -> str:
    """`text` up to its first full stop, question mark or colon-free sentence end, ignoring
    those inside $math$ or `code`."""
    inside = None
    for i, char in enumerate(text):
        if char in "$`":
            inside = None if inside == char else (inside or char)
        elif inside is None and char in ".?" and (i + 1 == len(text) or text[i + 1] == " "):
            if not re.search(r"(e\.g|i\.e|vs|Fig|Eq|Prop|Sec|Thm)$", text[:i]):
                return text[: i + 1]
    return text


def exercises(name: str, body: str) -> tuple[Exercise, ...]:
    """The numbered items of the `## Exercises` section, each with its bold difficulty label."""
    section = re.search(r"^## Exercises\n(.*?)(?=^## |\Z)", body, re.S | re.M)
    if not section:
        raise TeachingError(f"{name}: no '## Exercises' section")
    items = re.findall(r"^(\d+)\. (.*?)(?=\n\s*\n|\n:::|\n```|\Z)", section.group(1), re.S | re.M)
    if not items:  # sphinx-exercise directives instead: the label opens each one's body
        bodies = re.findall(DIRECTIVE, section.group(1), re.S | re.M)
        items = [(str(k), body) for k, body in enumerate(bodies, start=1)]
    if not items:
        raise TeachingError(f"{name}: its '## Exercises' section has no numbered list")
    found = []
    for number, text in items:
        label = LABEL.match(text)
        if not label:
            labels = ", ".join(f"**{d}.**" for d in DIFFICULTIES)
            raise TeachingError(f"{name}: exercise {number} lacks a difficulty label: begin it "
                                f"with one of {labels}")  # fmt: skip
        plain = " ".join(text[label.end() :].split())
        found.append(Exercise(int(number), label.group(1), first_sentence(plain)))
    return tuple(found)


def read_chapter(path: Path) -> Chapter:
    """Everything the teachers' page shows of one chapter; TeachingError if a field is missing."""
    name, text = path.stem, path.read_text(encoding="utf-8")
    meta = front_matter(path)
    teaching = _field(name, meta, "teaching", dict, "teaching:")
    methods = _field(name, teaching, "methods", list, "teaching: methods: [...]")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise TeachingError(f"{name}: teaching: methods {unknown} are not in the vocabulary "
                            f"{list(METHODS)}")  # fmt: skip
    budget = _field(name, meta.get("repro", {}), "budget_s", int | float, "repro: budget_s")
    prerequisites = at_a_glance(name, text).get("Prerequisites")
    if not prerequisites:
        raise TeachingError(f"{name}: its At a glance box lacks a **Prerequisites:** bullet")
    title = re.search(r"^# (.+)$", text, re.M)
    return Chapter(
        name=name, title=re.sub(r"^\d+\.\s*", "", title.group(1)).strip() if title else name,
        paper=_field(name, teaching, "paper", str, "teaching: paper: <key in references.bib>"),
        topic=_field(name, teaching, "topic", str, "teaching: topic: ..."),
        unit=_field(name, teaching, "unit", str, "teaching: unit: <title of its unit>"),
        methods=tuple(methods), prerequisites=prerequisites, budget_s=float(budget),
        exercises=exercises(name, text),
    )  # fmt: skip


def read_chapters(root: Path = ROOT) -> list[Chapter]:
    """Every chapter of the table of contents, in order."""
    return [read_chapter(root / "notebooks" / f"{name}.md") for name in toc_chapters(root)]


def units(chapters: list[Chapter]) -> dict[str, list[Chapter]]:
    """Chapters grouped by unit, the units in the order of their first chapter."""
    grouped: dict[str, list[Chapter]] = {}
    for chapter in sorted(chapters, key=lambda c: c.number):
        grouped.setdefault(chapter.unit, []).append(chapter)
    if not UNITS[0] <= len(grouped) <= UNITS[1] and len(chapters) >= 6:
        raise TeachingError(f"the chapters form {len(grouped)} units ({list(grouped)}); "
                            f"group them into {UNITS[0]} to {UNITS[1]}")  # fmt: skip
    return grouped


# ----------------------------------------------------------------------------- the page
def _link(chapter: Chapter) -> str:
    return f"{{doc}}`Chapter {chapter.number} <../notebooks/{chapter.name}>`"


def _run_time(chapter: Chapter, run_time_s: float | None) -> str:
    budget = f"{chapter.budget_s:.0f} s budget (front matter, 2 idle cores)"
    if run_time_s is None:
        return budget + "; no committed run"
    return budget + f"; {run_time_s:.0f} s measured (the committed quick run's wall time)"


def difficulty_counts(chapter: Chapter) -> str:
    counts = [(d, sum(e.difficulty == d for e in chapter.exercises)) for d in DIFFICULTIES]
    return ", ".join(f"{n} {d.lower()}" for d, n in counts if n)


def units_markdown(chapters: list[Chapter]) -> str:
    """The suggested lecture-sized units, each with its chapters and the methods they share."""
    lines = []
    for k, (unit, members) in enumerate(units(chapters).items(), start=1):
        methods = sorted({m for c in members for m in c.methods}, key=list(METHODS).index)
        budget = sum(c.budget_s for c in members)
        lines += [f"**Unit {k}: {unit}** ({len(members)} chapters, about {budget / 60:.0f} "
                  f"min of runs at the default scale; practises {', '.join(methods)})"]  # fmt: skip
        lines += [""]
        lines += [f"- {_link(c)}, *{c.title}*: {c.topic}." for c in members] + [""]
    return "\n".join(lines)


def overview_markdown(chapters: list[Chapter], run_times: dict[str, float | None]) -> str:
    """One table row per chapter: unit, run time, methods, exercises by difficulty."""
    unit_of = {u: k for k, u in enumerate(units(chapters), start=1)}
    lines = ["| Chapter | Unit | Run time (s): budget / measured | Methods | Exercises |",
             "|---|---|---|---|---|"]  # fmt: skip
    for c in chapters:
        measured = run_times.get(c.name)
        shown = "not run" if measured is None else f"{measured:.0f}"
        lines.append(f"| {_link(c)} | {unit_of[c.unit]} | {c.budget_s:.0f} / {shown} | "
                     f"{', '.join(c.methods)} | {difficulty_counts(c)} |")  # fmt: skip
    return "\n".join(lines)


def chapter_markdown(chapter: Chapter, run_time_s: float | None) -> str:
    """A chapter's entry: title, topic, prerequisites, run time, methods, exercises."""
    lines = [
        f"**{_link(chapter)}: {chapter.title}** ({{cite:t}}`{chapter.paper}`)", "",
        f"- **Topic:** {chapter.topic}.",
        f"- **Prerequisites:** {chapter.prerequisites}",
        f"- **Run time:** {_run_time(chapter, run_time_s)}.",
        f"- **Methods:** {', '.join(chapter.methods)}.",
        "- **Exercises:**",
    ]  # fmt: skip
    lines += [f"  {e.number}. *{e.difficulty}.* {e.summary}" for e in chapter.exercises]
    return "\n".join(lines + [""])
