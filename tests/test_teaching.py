"""The teachers' page (book/_ext/teaching.py): every chapter carries what the page needs.

A chapter fails here, by name and field, when its front matter lacks `teaching:` (paper, topic,
methods from the fixed vocabulary, unit) or `repro: budget_s`, its At a glance box lacks the
**Prerequisites:** bullet, or an exercise lacks its bold difficulty label.
"""

import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import teaching as tp  # noqa: E402  (book/_ext is not a package: the book's extensions)

CHAPTERS = tp.toc_chapters(ROOT)
BIB_KEYS = set(re.findall(r"^@\w+\{([^,\s]+),", (ROOT / "book/references.bib").read_text(), re.M))

CHAPTER_TEXT = """---
repro:
  budget_s: 60
teaching:
  paper: doe2025toy
  topic: a toy topic
  methods: [power-law fitting, paired tests]
  unit: Fitting
---

# 99. A toy chapter

:::{admonition} At a glance
:class: tip
- **You will learn:** things.
- **Prerequisites:** the Chinchilla law $L = E + A/N^\\alpha$; least
  squares.
- **Run time:** {glue:text}`run_time`.
:::

## Exercises

1. **Easy.** Fit the law, e.g. with `fit(x, y)`. Then plot it.

:::{dropdown} Solution
Done.
:::

2. **Hard.** Does $p = 0.5$ hold? Say why.
   It continues here.

## References
"""


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_has_every_field_the_teachers_page_needs(chapter):
    found = tp.read_chapter(ROOT / "notebooks" / f"{chapter}.md")
    assert found.paper in BIB_KEYS, f"{chapter}: teaching: paper {found.paper!r} not in the bib"
    assert found.exercises, f"{chapter}: no exercises"


def test_chapters_form_three_or_four_units():
    units = {}
    for chapter in CHAPTERS:
        meta = yaml.safe_load((ROOT / "notebooks" / f"{chapter}.md").read_text().split("---")[1])
        units.setdefault(meta["teaching"]["unit"], []).append(chapter)
    assert tp.UNITS[0] <= len(units) <= tp.UNITS[1], units


def test_a_chapter_is_read_into_its_fields(tmp_path):
    path = tmp_path / "99_toy.md"
    path.write_text(CHAPTER_TEXT)
    chapter = tp.read_chapter(path)
    assert chapter.title == "A toy chapter" and chapter.budget_s == 60.0
    assert chapter.prerequisites == "the Chinchilla law $L = E + A/N^\\alpha$; least squares."
    assert [(e.number, e.difficulty) for e in chapter.exercises] == [(1, "Easy"), (2, "Hard")]
    assert chapter.exercises[0].summary == "Fit the law, e.g. with `fit(x, y)`."
    assert chapter.exercises[1].summary == "Does $p = 0.5$ hold?"
    page = tp.chapter_markdown(chapter, None)
    assert "no committed run" in page and "1. *Easy.* Fit the law" in page


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda t: t.replace("  topic: a toy topic\n", ""), "teaching: topic"),
        (lambda t: t.replace("  unit: Fitting\n", ""), "teaching: unit"),
        (lambda t: t.replace("paired tests", "vibes"), "'vibes'"),
        (lambda t: t.replace("repro:\n  budget_s: 60\n", ""), "repro: budget_s"),
        (lambda t: t.replace("- **Prerequisites:**", "- **Needs:**"), "Prerequisites"),
        (lambda t: t.replace("**Hard.** ", ""), "exercise 2 lacks a difficulty label"),
        (lambda t: t.replace("## Exercises", "## Problems"), "Exercises"),
    ],
)
def test_a_missing_field_names_the_chapter_and_the_field(tmp_path, edit, field):
    path = tmp_path / "99_toy.md"
    path.write_text(edit(CHAPTER_TEXT))
    with pytest.raises(tp.TeachingError, match=re.escape(field)) as err:
        tp.read_chapter(path)
    assert str(err.value).startswith("99_toy: ")


def test_exercise_directives_are_read_too():
    body = "## Exercises\n\n```{exercise} A title\n:label: ex-1\n\n**Medium.** Do it. Now.\n```\n"
    assert tp.exercises("x", body) == (tp.Exercise(1, "Medium", "Do it."),)


def test_units_are_ordered_by_their_first_chapter(tmp_path):
    chapters = []
    for number, unit in [(3, "B"), (1, "A"), (2, "B"), (4, "C")]:
        path = tmp_path / f"{number:02d}_toy.md"
        path.write_text(CHAPTER_TEXT.replace("unit: Fitting", f"unit: {unit}"))
        chapters.append(tp.read_chapter(path))
    grouped = tp.units(chapters)
    assert list(grouped) == ["A", "B", "C"] and [c.number for c in grouped["B"]] == [2, 3]
    assert "**Unit 2: B** (2 chapters" in tp.units_markdown(chapters)
