"""The scorecard cannot go stale: every listed chapter has a valid summary, the README agrees.

These tests run after the notebooks (tests/harness.py orders them last), so in `make test` they
read the summaries this very run wrote: a README verdict made stale by a chapter fails the run
that made it stale.
"""

import re
from pathlib import Path

import yaml

from lib.claims import CLAIM_VERDICTS, VERDICTS, load_summaries

ROOT = Path(__file__).resolve().parent.parent


def toc_chapters() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [entry["file"] for part in toc["parts"] for entry in part["chapters"]]
    return [f.split("/")[-1] for f in files if f.startswith("notebooks/")]


def readme_verdicts() -> dict[int, str]:
    """Chapter number -> verdict, from the README's chapter table."""
    rows = re.findall(
        r"^\| (\d+) \|[^|]*\|[^|]*\| ([^|]+?) \|", (ROOT / "README.md").read_text(), re.M
    )
    return {int(n): verdict for n, verdict in rows}


def test_every_listed_chapter_exists_and_has_a_valid_summary():
    summaries = {s["chapter"]: s for s in load_summaries()}
    for chapter in toc_chapters():
        assert (ROOT / "notebooks" / f"{chapter}.md").exists(), chapter
        assert chapter in summaries, f"{chapter} has no book/results/{chapter}.json: run it"
        summary = summaries[chapter]
        assert summary["scale"] == "quick" and summary["base_seed"] == 0, chapter
        assert summary["verdict"] in VERDICTS and summary["audits_passed"], chapter
        assert any(c["central"] for c in summary["claims"]), chapter
        assert {c["verdict"] for c in summary["claims"]} <= set(CLAIM_VERDICTS), chapter


def test_readme_table_matches_the_summaries():
    listed = toc_chapters()
    verdicts = {
        int(s["chapter"][:2]): s["verdict"] for s in load_summaries() if s["chapter"] in listed
    }
    assert readme_verdicts() == verdicts
