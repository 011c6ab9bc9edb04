"""The bibliography parses and holds every key the book cites (a seconds-long check that fails
before the book build would, e.g. on a brace lost in a merge)."""

import re
from pathlib import Path

from pybtex.database import parse_file

ROOT = Path(__file__).resolve().parents[1]
CITE = re.compile(r"\{cite:\w+\}`([^`]+)`")


def cited_keys() -> dict[str, set[str]]:
    """Citation key -> the pages (relative paths) that cite it."""
    chapters = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.md"))
    pages = chapters + sorted((ROOT / "book").glob("*.md"))
    keys: dict[str, set[str]] = {}
    for page in pages:
        for group in CITE.findall(page.read_text()):
            for key in group.split(","):
                keys.setdefault(key.strip(), set()).add(str(page.relative_to(ROOT)))
    return keys


def test_bibliography_parses_with_unique_keys():
    text = (ROOT / "book" / "references.bib").read_text()
    entries = parse_file(ROOT / "book" / "references.bib").entries  # raises on a syntax error
    declared = re.findall(r"^@\w+\{([^,\s]+),", text, flags=re.MULTILINE)
    assert len(declared) == len(set(declared)) == len(entries)


def test_every_cited_key_is_in_the_bibliography():
    entries = parse_file(ROOT / "book" / "references.bib").entries
    missing = {key: pages for key, pages in cited_keys().items() if key not in entries}
    assert not missing, f"cited but not in book/references.bib: {missing}"
