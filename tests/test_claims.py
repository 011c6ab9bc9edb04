"""lib.claims computes verdicts from checks, validates them and saves summaries atomically."""

import json

import pytest

from lib.claims import ClaimChecks, load_summaries


def make(passes: list[bool]) -> ClaimChecks:
    checks = ClaimChecks("99_test_chapter", "A test chapter")
    for i, ok in enumerate(passes):
        checks.check(f"q{i}", "1.0", 1.0 + i, "|ours - 1| < 0.5", ok, uncertainty=0.1)
    return checks


@pytest.mark.parametrize(
    ("passes", "verdict"),
    [
        ([True, True], "Reproduced"),
        ([True, False], "Partly reproduced"),
        ([False], "Not reproduced"),
    ],
)
def test_verdict_follows_the_checks(passes, verdict):
    assert make(passes).verdict() == verdict


def test_summary_round_trips_through_save(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_SCALE", "quick")
    path = make([True, False]).save(tmp_path)
    assert path.name == "99_test_chapter.json"
    saved = json.loads(path.read_text())
    assert saved["verdict"] == "Partly reproduced"
    assert saved["claims"][1]["ours_text"] == "2 ± 0.1"
    assert [s["chapter"] for s in load_summaries(tmp_path)] == ["99_test_chapter"]
    assert not list(tmp_path.glob("*.tmp"))  # the temporary file was renamed, not left behind


def test_full_scale_summaries_are_kept_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_SCALE", "full")
    assert make([True]).save(tmp_path).name == "99_test_chapter.full.json"
    assert load_summaries(tmp_path) == []


def test_table_shows_every_claim():
    frame = make([True, False]).table().data
    assert list(frame.columns) == ["quantity", "paper", "ours", "criterion", "pass"]
    assert list(frame["pass"]) == ["pass", "FAIL"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.check("q", "1", 1.0, "c", "yes"), "passed must be a bool"),
        (lambda c: c.check("q", "1", float("nan"), "c", True), "ours must be finite"),
        (lambda c: c.check("q", "1", 1.0, "c", True, uncertainty=-1.0), "uncertainty must be >= 0"),
        (
            lambda c: (c.check("q", "1", 1.0, "c", True), c.check("q", "1", 1.0, "c", True)),
            "already",
        ),
        (lambda c: c.verdict(), "no claims"),
    ],
)
def test_bad_checks_are_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call(ClaimChecks("99_test_chapter", "t"))


def test_chapter_name_must_carry_its_number():
    with pytest.raises(ValueError, match="chapter must look like"):
        ClaimChecks("attention", "t")


def test_claim_displays_as_one_line_in_jupyter():
    from IPython.lib.pretty import pretty

    claim = ClaimChecks("99_demo", "demo").check("R^2", "0.9", 0.8512, ">= 0.9", False, 0.0213)
    assert pretty(claim) == "FAIL: R^2 = 0.851 ± 0.021 (>= 0.9)"
