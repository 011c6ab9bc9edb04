"""`glue` for chapters that also run outside the book: myst_nb's where it is installed.

    from lib.glue import glue
    glue("slope", float(fit.alpha), display=False)

The book build and its tests have myst_nb, and this is its `glue`: the value goes into the page
where the prose quotes it ({glue:text}`slope`). A plain Jupyter, VS Code or Colab kernel has no
myst_nb; there the prose that quotes glued values is not rendered anyway, so this shows the value
when `display` asks for it and otherwise does nothing.
"""

from __future__ import annotations


def glue(name: str, variable, display: bool = True) -> None:
    """myst_nb.glue(name, variable, display) when myst_nb is importable; else show `variable`
    if `display` (as myst_nb would) and keep nothing."""
    try:
        from myst_nb import glue as book_glue
    except ModuleNotFoundError as missing:
        if missing.name != "myst_nb":  # myst_nb is there but broken: say so, do not hide it
            raise
        if display:
            from IPython.display import display as show

            show(variable)
        return
    book_glue(name, variable, display=display)
