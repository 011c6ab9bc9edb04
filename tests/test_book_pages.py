"""The rendered book, checked page by page in a real headless browser (Chromium via Playwright).

`make test` builds the book, then runs `pytest -m browser tests/test_book_pages.py`. Every page
of the table of contents must load without console errors, with MathJax having typeset every
formula (no raw `$...$`, `\\(` or `\\[` left in the text, sidebar included), every figure image
loaded and described (alt text or a caption), every internal link and citation resolving, and
the input of cells tagged to hide it hidden. The scorecard's claims map must list every chapter,
its figure must label every claim of every summary, its CSV must download with a row per claim,
and the teachers' page must link every chapter.

Chromium comes from the system (`apt-get install chromium`) or BOOK_BROWSER=/path/to/chrome;
without one these tests skip with a line saying so.
"""

from __future__ import annotations

import csv
import functools
import http.server
import io
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

import jupytext
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
BROWSER = os.environ.get("BOOK_BROWSER") or next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]  # fmt: skip
HIDING_TAGS = {"remove-input", "remove-cell", "hide-input", "hide-cell"}
RAW_MATH = re.compile(r"\$[^$\s][^$]*\$|\\\(|\\\[")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(BROWSER is None, reason="no Chromium found: `apt-get install chromium` "
                       "(or set BOOK_BROWSER) to check the rendered book in a browser"),
]  # fmt: skip


def toc_pages() -> list[str]:
    """Source paths (without suffix) of every page in the table of contents."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [toc["root"]]
    for part in toc["parts"]:
        pages += [entry["file"] for entry in part["chapters"]]
    return pages


@pytest.fixture(scope="module")
def server():
    """Serve _build/html on a free localhost port for the duration of the module."""
    if not (HTML / "index.html").exists():
        pytest.fail("no _build/html: build the book first (`make book` or `make test`)")
    handler = functools.partial(QuietHandler, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep the test log readable
        pass


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=BROWSER, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


def open_page(browser, url: str):
    """Load a page, wait for MathJax to finish, return (page, console errors)."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: errors.append(f"failed to load {r.url}"))
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(url, wait_until="load")
    page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
    return page, errors


VISIBLE_TEXT = """() => {
  const skip = 'pre, code, script, style, mjx-container, .MathJax, textarea';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const out = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.parentElement.closest(skip)) out.push(n.textContent);
  }
  return out.join(' ');
}"""

IMAGES = """() => [...document.querySelectorAll('main img, article img')].map(img => ({
  src: img.getAttribute('src'), width: img.naturalWidth, alt: img.alt,
  caption: !!(img.closest('figure') && img.closest('figure').querySelector('figcaption'))
}))"""

LINKS = """() => [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))"""


def broken_internal_links(page_path: Path, hrefs: list[str]) -> list[str]:
    """Relative links whose target file, or #anchor in it, does not exist."""
    broken = []
    for href in hrefs:
        parts = urlsplit(href)
        if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
            continue
        target = (page_path.parent / unquote(parts.path)).resolve() if parts.path else page_path
        if target.is_dir():
            target = target / "index.html"
        if not target.exists():
            broken.append(href)
        elif parts.fragment and target.suffix == ".html":
            ids = set(re.findall(r'id="([^"]+)"', target.read_text(encoding="utf-8")))
            if unquote(parts.fragment) not in ids:
                broken.append(href)
    return broken


def hidden_sources(source: str) -> list[str]:
    """A distinctive line of every code cell whose input is tagged to be hidden or removed."""
    path = ROOT / f"{source}.md"
    nb = jupytext.reads(path.read_text(encoding="utf-8"), fmt="md:myst")
    lines = []
    for cell in nb.cells:
        if cell.cell_type == "code" and HIDING_TAGS & set(cell.metadata.get("tags", [])):
            candidates = [ln.strip() for ln in cell.source.splitlines() if len(ln.strip()) > 20]
            lines += candidates[:1]
    return lines


@pytest.fixture(scope="module")
def visit(server, browser):
    """Facts about a page, read in one visit per page and shared by the tests that need them:
    visit(source) loads it at 1280x900, waits for MathJax, reads everything, and only then
    opens every fold (which changes the page)."""
    seen: dict[str, dict] = {}

    def facts(source: str) -> dict:
        if source not in seen:
            seen[source] = _read_page(browser, f"{server}/{source}.html", source)
        return seen[source]

    return facts


def _read_page(browser, url: str, source: str) -> dict:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: errors.append(f"failed to load {r.url}"))
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    try:
        page.goto(url, wait_until="load")
        page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
        facts = {
            "errors": errors,
            "text": page.evaluate(VISIBLE_TEXT),
            "images": page.evaluate(IMAGES),
            "links": page.evaluate(LINKS),
            "reader_words": len(page.evaluate(READER_TEXT)),
            "reader_figures": page.evaluate(READER_FIGURES),
            "shown_hidden": [],
        }
        if (ROOT / f"{source}.md").exists():
            for line in hidden_sources(source):
                shown = page.locator("pre", has_text=line)
                if any(shown.nth(i).is_visible() for i in range(shown.count())):
                    facts["shown_hidden"].append(line)
        facts["folds"] = page.evaluate(FOLDS_OPEN)  # last: it opens the page's folds
        return facts
    finally:
        page.close()


@pytest.mark.parametrize("source", toc_pages())
def test_page_renders_cleanly(visit, source):
    page_path = HTML / f"{source}.html"
    assert page_path.exists(), f"{source} was not built"
    page = visit(source)
    assert not page["errors"], f"console errors: {page['errors']}"
    raw = RAW_MATH.findall(page["text"])
    assert not raw, f"untypeset math left in the text: {raw[:5]}"
    for img in page["images"]:
        assert img["width"] > 0, f"image did not load: {img['src']}"
        assert img["alt"] or img["caption"], f"image without alt text or caption: {img['src']}"
    broken = broken_internal_links(page_path, page["links"])
    assert not broken, f"broken internal links or citations: {broken}"
    assert not page["shown_hidden"], f"input meant to be hidden is visible: {page['shown_hidden']}"


def toc_chapters() -> list[str]:
    return [p.split("/")[-1] for p in toc_pages() if p.startswith("notebooks/")]


def summary_claims() -> set[tuple[str, str]]:
    """(chapter, claim id) of every claim in every committed summary, quick and full."""
    from lib.claims import load_summaries

    results = ROOT / "book" / "results"
    chapters = set(toc_chapters())
    return {
        (s["chapter"], c["id"])
        for scale in ("quick", "full")
        for s in load_summaries(results, run_scale=scale)
        if s["chapter"] in chapters
        for c in s["claims"]
    }


def test_scorecard_claims_map_lists_every_chapter(server, browser):
    page, _ = open_page(browser, f"{server}/book/scorecard.html")
    try:
        claims_map = page.locator("section#claims-map table").first.inner_text()
        chapters = [name[:2] for name in toc_chapters()]
        listed = set(re.findall(r"^(\d\d)\t", claims_map, re.M))
        assert listed == set(chapters), f"claims map lists {sorted(listed)}, book has {chapters}"
    finally:
        page.close()


def test_scorecard_claims_figure_shows_every_claim(server, browser):
    """The claims-map figure is inline SVG with alt text, and labels every claim of every
    summary (quick and full) as text in a <g id="claim-<chapter>-<claim id>">."""
    page, _ = open_page(browser, f"{server}/book/scorecard.html")
    try:
        figure = page.locator("figure.claims-map svg")
        assert figure.count() == 1, "the claims-map figure is missing from the scorecard"
        assert figure.get_attribute("role") == "img"
        assert figure.get_attribute("aria-label").startswith("Claims map:"), "no alt text"
        assert figure.bounding_box()["width"] > 400, "the figure is drawn too small to read"
        labels = dict(page.evaluate(
            "() => [...document.querySelectorAll('figure.claims-map svg g[id^=\"claim-\"]')]"
            ".map(g => [g.id, g.textContent])"
        ))  # fmt: skip
        missing = []
        for chapter, claim in sorted(summary_claims()):
            label = labels.get(f"claim-{chapter}-{claim}", "")
            if claim not in label:
                missing.append(f"{chapter}: {claim}")
        assert not missing, f"claims not on the figure: {missing}"
    finally:
        page.close()


def test_scorecard_links_the_claims_map_csv(server, browser):
    """The scorecard links claims_map.csv; it downloads and has one row per claim."""
    page, _ = open_page(browser, f"{server}/book/scorecard.html")
    try:
        link = page.locator('a[href$="claims_map.csv"]')
        assert link.count() >= 1, "no link to claims_map.csv on the scorecard"
        url = f"{server}/book/{link.first.get_attribute('href')}"
        response = page.request.get(url)
        assert response.ok, f"{url}: HTTP {response.status}"
        rows = list(csv.DictReader(io.StringIO(response.text())))
    finally:
        page.close()
    listed = [(r["chapter"], r["claim_id"]) for r in rows]
    assert len(listed) == len(set(listed)), "a claim is listed twice in the CSV"
    assert set(listed) == summary_claims()
    assert all(r["paper_id"] for r in rows), "a row without its paper's arXiv id"


def test_teaching_page_lists_every_chapter(server, browser):
    """The teachers' page links every chapter and groups them into three or four units."""
    page, _ = open_page(browser, f"{server}/book/teaching.html")
    try:
        hrefs = page.evaluate(LINKS)
        text = page.evaluate(VISIBLE_TEXT)
    finally:
        page.close()
    for chapter in toc_chapters():
        assert any(f"notebooks/{chapter}.html" in h for h in hrefs), f"{chapter} not linked"
    units = set(re.findall(r"Unit (\d): ", text))
    assert 3 <= len(units) <= 4, f"units on the page: {sorted(units)}"
    assert "Prerequisites:" in text and "Easy." in text


CLIPPED_TABLES = """() => {
  const main = document.querySelector('main') || document.body;
  const column = main.getBoundingClientRect();
  return [...main.querySelectorAll('table')].filter(t => t.offsetParent !== null).map(t => {
    const box = t.getBoundingClientRect();
    let scroller = t.parentElement;
    while (scroller && scroller !== main && getComputedStyle(scroller).overflowX === 'visible') {
      scroller = scroller.parentElement;
    }
    const scrolls = scroller && scroller !== main &&
      ['auto', 'scroll'].includes(getComputedStyle(scroller).overflowX);
    return {head: t.innerText.slice(0, 60), right: box.right, column: column.right,
            scrolls: !!scrolls};
  }).filter(t => t.right > t.column + 2 && !t.scrolls);
}"""


@pytest.mark.parametrize("width", [1280, 390])  # a laptop, a phone
def test_scorecard_tables_fit_the_content_column(server, browser, width):
    """At 1280 px and on a phone every visible table of the scorecard fits the content column,
    or sits in a box that scrolls sideways: no column is cut off."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    try:
        page.goto(f"{server}/book/scorecard.html", wait_until="load")
        clipped = page.evaluate(CLIPPED_TABLES)
        assert not clipped, f"tables wider than the content column, cut off: {clipped}"
    finally:
        page.close()


def test_chapters_offer_their_notebook_and_the_teachers_page_the_pack(server, browser, visit):
    """Each chapter's download menu lists the course pack's .ipynb (book/_ext/course_downloads.py)
    and it downloads as a notebook; the teachers' page links the pack's zip, which downloads."""
    from urllib.request import urlopen

    for chapter in toc_chapters():
        links = visit(f"notebooks/{chapter}")["links"]
        offered = [h for h in links if h.endswith(f"_sources/notebooks/{chapter}.ipynb")]
        assert offered, f"{chapter}: no .ipynb in the download menu"
        with urlopen(f"{server}/notebooks/{offered[0]}") as response:
            assert '"nbformat": 4' in response.read().decode(), f"{chapter}: bad .ipynb"
    page, _ = open_page(browser, f"{server}/book/teaching.html")
    try:
        link = page.locator('a[href$="scaling-reproduced-course.zip"]')
        assert link.count() >= 1, "the teachers' page does not link the course pack"
        response = page.request.get(f"{server}/book/{link.first.get_attribute('href')}")
        assert response.ok and response.body()[:2] == b"PK", "the course pack does not download"
    finally:
        page.close()


# ------------------------------------------------------------------ the reader's path (issue 59)
READER_WORDS = 2500  # a chapter's reader's path, every fold closed (book/how_to_read.md)

# Words a reader sees in the page's article with every fold closed: text nodes that are rendered
# (checkVisibility: no closed <details>, no display:none or visibility:hidden above them), code
# and outputs included; typeset formulas and the headings' link marks are not words.
READER_TEXT = """() => {
  const article = document.querySelector('article.bd-article') || document.querySelector('main');
  const skip = 'script, style, mjx-container, .MathJax, .headerlink';
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  const words = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (el.closest(skip)) continue;
    if (!el.checkVisibility({visibilityProperty: true, opacityProperty: true})) continue;
    words.push(...(n.textContent.match(/[\\p{L}\\p{N}][\\p{L}\\p{N}'’._-]*/gu) || []));
  }
  return words;
}"""

# Figures a reader sees with every fold closed: loaded images in the article, rendered.
READER_FIGURES = """() => [...(document.querySelector('article.bd-article') ||
                              document.querySelector('main')).querySelectorAll('img')]
  .filter(img => img.naturalWidth > 0 && img.checkVisibility()).length"""

# Open every fold in document order (a fold inside a fold after its parent): click its bar and
# report the folds whose content is still not rendered afterwards.
FOLDS_OPEN = """() => {
  const article = document.querySelector('article.bd-article') || document.querySelector('main');
  const stuck = [];
  for (const details of article.querySelectorAll('details')) {
    const summary = details.querySelector(':scope > summary');
    if (!summary) { stuck.push('a fold without a bar to click'); continue; }
    if (!details.open) summary.click();
    const content = [...details.children].find(c => c.tagName !== 'SUMMARY');
    if (!details.open || (content && !content.checkVisibility())) {
      stuck.push(summary.innerText.trim().slice(0, 60) || '(untitled fold)');
    }
  }
  return {count: article.querySelectorAll('details').length, stuck};
}"""


def central_claims(chapter: str) -> int:
    """How many central claims the chapter's committed quick summary has."""
    import json

    summary = json.loads((ROOT / "book" / "results" / f"{chapter}.json").read_text())
    return sum(bool(c["central"]) for c in summary["claims"])


@pytest.mark.parametrize("chapter", toc_chapters())
def test_a_chapters_reader_path_is_short_and_shows_its_figures(visit, chapter):
    """With every fold closed a chapter shows at most READER_WORDS words and at least one
    figure per central claim (book/how_to_read.md, issue 59)."""
    page = visit(f"notebooks/{chapter}")
    words, figures = page["reader_words"], page["reader_figures"]
    assert words <= READER_WORDS, (
        f"{chapter}: {words} visible words with every fold closed, more than {READER_WORDS}: "
        "fold the referee's file and plumbing code (book/how_to_read.md)"
    )
    assert figures >= central_claims(chapter), (
        f"{chapter}: {figures} visible figures for {central_claims(chapter)} central claims"
    )


@pytest.mark.parametrize("chapter", toc_chapters())
def test_every_fold_of_a_chapter_opens_on_click(visit, chapter):
    folds = visit(f"notebooks/{chapter}")["folds"]
    assert folds["count"] > 0, f"{chapter}: no folded section (the referee's file is folded)"
    assert not folds["stuck"], f"{chapter}: folds that did not open on click: {folds['stuck']}"
