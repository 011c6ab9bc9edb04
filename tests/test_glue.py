"""lib.glue: in a kernel with the book's builder it writes exactly what myst_nb's glue writes;
elsewhere it keeps nothing and shows the value only when asked."""

import subprocess
import sys
import textwrap

import pytest

from lib.glue import GLUE_PREFIX, glue

# In an IPython shell (a kernel's, here a plain one), glue a few values with lib.glue and with
# myst_nb.glue, and print the display messages each wrote, as JSON.
COMPARE = textwrap.dedent("""
    import json, sys
    import pandas as pd
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    from myst_nb import glue as book_glue
    from lib.glue import glue

    InteractiveShell.instance()
    values = [("slope", 0.3071, False), ("label", "Partly reproduced", True),
              ("table", pd.DataFrame({"a": [1, 2]}), False)]
    written = {}
    for which, fn in (("lib", glue), ("myst_nb", book_glue)):
        with capture_output() as captured:
            for name, value, display in values:
                fn(name, value, display=display)
        written[which] = [[o.data, o.metadata] for o in captured.outputs]
    json.dump(written, sys.stdout)
""")


def test_in_a_kernel_it_writes_what_myst_nbs_glue_writes():
    pytest.importorskip("myst_nb")
    import json

    run = subprocess.run([sys.executable, "-c", COMPARE], capture_output=True, text=True,
                         check=True)  # fmt: skip
    written = json.loads(run.stdout)
    assert len(written["lib"]) == 3
    assert written["lib"] == written["myst_nb"]
    hidden = written["lib"][0]
    assert hidden[1]["scrapbook"] == {"name": "slope", "mime_prefix": GLUE_PREFIX}
    assert set(hidden[0]) == {"application/papermill.record/text/plain"}


def test_outside_a_kernel_it_shows_only_what_display_asks_for(capsys):
    glue("x", 1.5, display=False)
    glue("y", "shown value")
    assert capsys.readouterr().out.split() == ["shown", "value"]


def test_without_myst_nb_a_kernel_keeps_nothing(tmp_path):
    """A kernel whose environment lacks myst_nb (Colab, a plain Jupyter): nothing is written
    but the values display asks for. A find_spec that finds no myst_nb stands for it."""
    script = textwrap.dedent("""
        import importlib.util
        from IPython.core.interactiveshell import InteractiveShell
        from IPython.utils.capture import capture_output

        real = importlib.util.find_spec
        importlib.util.find_spec = lambda name, *a: None if name == "myst_nb" else real(name, *a)
        from lib.glue import glue

        InteractiveShell.instance()
        with capture_output() as captured:
            glue("hidden", "not shown", display=False)
            glue("shown", "shown value")
        print([o.data for o in captured.outputs])
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert run.stdout.strip() == "[{'text/plain': \"'shown value'\"}]"


def test_a_name_must_be_a_non_empty_string():
    with pytest.raises(TypeError, match="name must be a non-empty string"):
        glue("", 1.0)
