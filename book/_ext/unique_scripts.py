"""Sphinx extension: each page lists every script once.

With Sphinx 7.4, scripts that sphinx-thebe and sphinx-togglebutton register after the HTML
builder has started reach each page twice (once from the registry, once from the builder, their
file names None and ""). A repeated inline `const THEBE_JS_URL = ...` is a JavaScript SyntaxError in
every page's console; this drops the second copy of any script with the same source and attributes.
"""

from sphinx.application import Sphinx


def _unique(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Keep the first of the page's scripts with the same file name and attributes (inline body)."""
    seen, kept = set(), []
    for script in context.get("script_files", []):
        name = getattr(script, "filename", script) or ""  # inline scripts: None or ""
        key = (str(name), tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            kept.append(script)
    context["script_files"] = kept


def setup(app: Sphinx) -> dict:
    """Register the page hook late, after the themes have filled the script list."""
    app.connect("html-page-context", _unique, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
