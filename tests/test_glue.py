"""lib.glue: myst_nb's glue in the book, a no-op (or a plain display) in a kernel without it."""

import subprocess
import sys
import textwrap

import pytest

from lib.glue import glue


def test_with_myst_nb_it_is_myst_nbs_glue(capsys):
    pytest.importorskip("myst_nb")
    glue("x", 1.5, display=False)  # outside a kernel myst_nb displays nothing; it must not raise


def test_without_myst_nb_it_displays_only_when_asked(tmp_path):
    """A folder first on sys.path whose myst_nb raises ModuleNotFoundError stands for a Colab
    kernel, which has no myst_nb."""
    (tmp_path / "myst_nb.py").write_text(
        "raise ModuleNotFoundError('no myst_nb here', name='myst_nb')\n"
    )
    script = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        from lib.glue import glue
        glue("hidden", "not shown", display=False)
        glue("shown", "shown value")
    """)
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert run.stdout.split() == ["shown", "value"]
