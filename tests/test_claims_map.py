"""The claims map (book/_ext/claims_map.py): the common scale, every claim in the figure and in
the CSV, built from summaries alone (synthetic ones here: written by lib.claims itself)."""

import csv
import io
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from lib.claims import ClaimChecks, load_summaries, negative, positive

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import claims_map as cm  # noqa: E402  (book/_ext is not a package: the book's extensions)

ALT = "a stand-in explanation"  # the alternative every control of these tests names

CHAPTER = "98_synthetic_map"


def planted(mean: float, n: int = 5, seed: int = 0) -> np.ndarray:
    return mean + 0.01 * np.random.default_rng(seed).standard_normal(n)


def synthetic_chapter(effect: float = 0.5) -> ClaimChecks:
    """A chapter with one claim of each kind the map draws (see the asserts below)."""
    checks = ClaimChecks(CHAPTER, "A synthetic chapter with $math$ in its title")
    checks.claim("above", "An effect above zero, with $\\beta$ in it", central=True)
    checks.premise("above", "the paper's regime", 1.0, True, criterion="> 0", source="measured")
    checks.evidence("above", "effect", planted(effect), above=0.0, predicted=0.5, paper="> 0",
                    control=negative("no mechanism", planted(-1.0, seed=1),
                                     alternative=ALT))  # fmt: skip
    checks.claim("within", "Two curves agree", central=False)
    checks.evidence_interval("within", "gap", 0.3, (0.1, 0.5), within=(-1.0, 0.4),
                             predicted=0.0, paper="agree", replicates=10, how="bootstrap",
                             control=positive("a planted gap of 0", estimate=0.0,
                                              interval=(-0.1, 0.1), alternative=ALT))  # fmt: skip
    checks.claim("premise", "Needs a regime we miss", central=False)
    checks.premise(
        "premise", "an optimum inside the grid", 3.0, False, criterion="< 2", source="measured"
    )
    checks.evidence("premise", "slope", planted(1.0), above=0.0, predicted=1.0, paper="> 0",
                    control=negative("flat", planted(-1.0, seed=2), alternative=ALT))  # fmt: skip
    checks.claim("declared", "A 70B model's headline number", central=False,
                 untested="needs a 70B model")  # fmt: skip
    return checks


@pytest.fixture
def results(tmp_path) -> Path:
    """A results folder with the synthetic chapter at both scales."""
    path = synthetic_chapter().save(tmp_path)
    full = json.loads(path.read_text())
    full["scale"] = "full"
    (tmp_path / f"{CHAPTER}.full.json").write_text(json.dumps(full))
    return tmp_path


def rows_of(results: Path) -> list[cm.ClaimRow]:
    quick = {s["chapter"]: s for s in load_summaries(results)}
    full = {s["chapter"]: s for s in load_summaries(results, run_scale="full")}
    return cm.claim_rows(quick, full)


@pytest.mark.parametrize(
    ("estimate", "lo", "hi", "low", "high", "expected"),
    [
        (3.0, 2.0, 4.0, 0.0, None, (3.0, 2.0, 4.0)),  # above 0: already on the scale
        (0.3, 0.1, 0.5, None, 0.4, (0.5, -0.5, 1.5)),  # below 0.4: flipped, bound at 0
        (0.3, 0.1, 0.5, -1.0, 0.4, (0.5, -0.5, 1.5)),  # a range: the nearer bound (0.4)
        (-2.0, -3.0, -1.0, -1.0, 0.4, (-1.0, -2.0, 0.0)),  # outside it, below -1
        (0.0, -1.0, 2.0, 0.5, None, (-1 / 3, -1.0, 1.0)),  # asymmetric: the bound still at 0
        (5.0, 5.0, 5.0, 0.0, None, (cm.EDGE,) * 3),  # a zero-width interval: the edge
    ],
)
def test_the_common_scale_puts_the_bound_at_0_and_half_widths_at_1(estimate, lo, hi, low, high,
                                                                   expected):  # fmt: skip
    mapped = cm.to_scale(estimate, lo, hi, low, high)
    assert all(map(math.isclose, (mapped.estimate, mapped.lo, mapped.hi), expected))


def test_a_pass_is_an_interval_right_of_0():
    for estimate, lo, hi in [(0.5, 0.2, 0.9), (0.05, -0.1, 0.3), (-0.2, -0.5, 0.0)]:
        mapped = cm.to_scale(estimate, lo, hi, 0.0, None)
        assert (mapped.lo > 0) == (lo > 0) and mapped.hi - mapped.lo == pytest.approx(2)
    assert cm.to_scale(1.0, 0.0, 2.0, None, None) is None  # no bound: nothing to draw


def test_every_claim_is_a_row_with_its_deciding_check_and_control(results):
    rows = {r.claim["id"]: r for r in rows_of(results)}
    assert list(rows) == ["above", "within", "premise", "declared"]
    assert rows["above"].quick["quantity"] == "effect" and rows["above"].full is not None
    assert cm.mapped_control(rows["above"].quick).estimate < 0  # the negative control fails
    assert cm.mapped_control(rows["within"].quick).estimate > 1  # the positive one passes
    for untested in ("premise", "declared"):
        assert rows[untested].quick is None and rows[untested].claim["verdict"] == "Not tested"


def test_the_svg_labels_every_claim_as_text_with_alt_text(results):
    rows = rows_of(results)
    svg = cm.svg(rows)
    assert svg.startswith("<svg") and 'role="img"' in svg and 'aria-label="Claims map: 4' in svg
    for row in rows:
        assert f'<g id="{cm.claim_gid(CHAPTER, row.claim["id"])}">' in svg
        assert f">{row.claim['id']}<" in svg or f"★ {row.claim['id']}<" in svg
    assert "$" not in svg  # labels are not typeset: no raw TeX for the page's math check
    assert "Not tested: premise unmet" in svg and "Not tested: needs a 70B model" in svg


def test_the_csv_has_a_row_per_claim_with_both_scales(results):
    rows = rows_of(results)
    table = list(csv.DictReader(io.StringIO(cm.csv_text(rows, {CHAPTER: "2501.00001"}))))
    assert [r["claim_id"] for r in table] == ["above", "within", "premise", "declared"]
    above = table[0]
    assert above["paper_id"] == "2501.00001" and above["central"] == "yes"
    assert above["verdict_quick"] == above["verdict_full"] == "Reproduced"
    assert float(above["lo"]) > 0 and above["criterion_high"] == "" and above["replicates"] == "5"
    assert above["premises_met"] == "1 of 1" and above["control_outcome"] == "fail"
    assert table[2]["premises_met"] == "0 of 1" and "premise unmet" in table[2]["untested"]
    assert set(table[0]) == set(cm.CSV_FIELDS)


def test_full_scale_not_run_reads_not_run(tmp_path):
    synthetic_chapter().save(tmp_path)
    table = list(csv.DictReader(io.StringIO(cm.csv_text(rows_of(tmp_path), {}))))
    assert {r["verdict_full"] for r in table} == {"not run"}


def test_load_rows_reads_a_book_and_its_papers(results, tmp_path):
    """The extension's path: _toc.yml -> summaries -> front matter's paper -> its arXiv id."""
    root = tmp_path / "book_root"
    (root / "notebooks").mkdir(parents=True)
    (root / "book" / "results").mkdir(parents=True)
    for path in results.glob(f"{CHAPTER}*.json"):
        path.rename(root / "book" / "results" / path.name)
    (root / "_toc.yml").write_text(
        "root: book/intro\nparts:\n  - caption: Chapters\n    chapters:\n"
        f"      - file: notebooks/{CHAPTER}\n"
    )
    (root / "notebooks" / f"{CHAPTER}.md").write_text(
        "---\nteaching:\n  paper: doe2025toy\n---\n# A chapter\n"
    )
    (root / "book" / "references.bib").write_text(
        "@article{doe2025toy,\n  title = {Toy},\n  note = {arXiv:2501.00001}\n}\n"
    )
    rows = cm.load_rows(root)
    assert len(rows) == 4 and cm.paper_ids([CHAPTER], root) == {CHAPTER: "2501.00001"}
