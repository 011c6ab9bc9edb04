"""Sphinx extension: each chapter's page offers the course pack's `.ipynb` for download.

sphinx-book-theme lists a ".ipynb" entry in a page's download menu when the page context names
one (`ipynb_source`, a file under `_sources/`). For every chapter page this copies the pack's
notebook (tools/course_pack.py: outputs cleared, install cells first, runs without the book's
tools) there and names it, so the menu offers it next to the `.md` source. The pack must be
built first (`make course`; `make book` and `make test` do it): a missing pack or notebook stops
the build with what to run.
"""

import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

ROOT = Path(__file__).resolve().parent.parent.parent  # the checkout: book/_ext/ -> root
PACK = ROOT / "_build" / "course" / "scaling-reproduced-course"  # tools/course_pack.py's output
CHAPTER_PAGES = "notebooks/"


def _check_pack(app: Sphinx) -> None:
    if not (PACK / "notebooks").is_dir():
        raise ExtensionError(f"no course pack at {PACK}: run `make course` before building "
                             "the book (make book does); chapters offer its .ipynb")  # fmt: skip


def _offer_notebook(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    if not pagename.startswith(CHAPTER_PAGES):
        return
    notebook = PACK / f"{pagename}.ipynb"
    if not notebook.is_file():
        raise ExtensionError(f"the course pack lacks {notebook.name}: rebuild it with "
                             "`make course`")  # fmt: skip
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(notebook, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def setup(app: Sphinx) -> dict:
    """Check the pack when the builder starts; name each chapter's notebook before the theme
    (priority 501) builds the download menu."""
    app.connect("builder-inited", _check_pack)
    app.connect("html-page-context", _offer_notebook, priority=450)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
