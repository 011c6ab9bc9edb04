"""The scorecard cannot go stale: every listed chapter has a summary, and the README agrees."""

import re
from pathlib import Path

import yaml

from lib.claims import load_summaries

ROOT = Path(__file__).resolve().parent.parent


def toc_chapters() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [entry["file"] for part in toc["parts"] for entry in part["chapters"]]
    return [f.split("/")[-1] for f in files if f.startswith("notebooks/")]


def readme_verdicts() -> dict[str, str]:
    """Chapter number -> verdict, from the README's chapter table."""
    rows = re.findall(
        r"^\| (\d+) \|[^|]*\|[^|]*\| ([^|]+?) \|", (ROOT / "README.md").read_text(), re.M
    )
    return {int(n): verdict for n, verdict in rows}


def test_every_listed_chapter_exists_and_has_a_summary():
    summaries = {s["chapter"] for s in load_summaries()}
    for chapter in toc_chapters():
        assert (ROOT / "notebooks" / f"{chapter}.md").exists(), chapter
        assert chapter in summaries, f"{chapter} has no book/results/{chapter}.json: run it"


def test_readme_table_matches_the_summaries():
    listed = toc_chapters()
    verdicts = {
        int(s["chapter"][:2]): s["verdict"] for s in load_summaries() if s["chapter"] in listed
    }
    assert readme_verdicts() == verdicts
