"""`glue`: keep a value for the book's prose, without importing the book's builder.

    from lib.glue import glue
    glue("slope", float(fit.alpha), display=False)

The book quotes a glued value where its prose says {glue:text}`slope`. myst-nb finds the value in
the cell's outputs: a display message whose metadata holds `scrapbook: {name, mime_prefix}` and
whose data are the value's usual representations (text/plain, text/html, ...), each key prefixed
by `mime_prefix`: "" when the value is also shown, GLUE_PREFIX when it is not. That message is
written here as myst-nb's own `glue` writes it (tests/test_glue.py compares the two), because
importing myst_nb costs a kernel over a second: it loads nbformat's JSON-schema validators.

Where no book can read the message (no IPython kernel, or no myst_nb installed: a Colab or
plain Jupyter kernel), nothing is kept and the value is shown only if `display` asks for it.
"""

from __future__ import annotations

import importlib.util

GLUE_PREFIX = "application/papermill.record/"  # myst-nb's prefix for values kept, not shown


def glue(name: str, variable, display: bool = True) -> None:
    """Keep `variable` under `name` for the book's {glue} roles; show it too if `display`."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty string, got {name!r}")
    from IPython.core.formatters import format_display_data
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display as show

    if not InteractiveShell.initialized() or importlib.util.find_spec("myst_nb") is None:
        if display:
            show(variable)
        return
    bundle, metadata = format_display_data(variable)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    show({prefix + mime: data for mime, data in bundle.items()}, raw=True, metadata=metadata)
