"""The course pack (tools/course_pack.py, `make course`): built, installed, and one chapter run.

The install-and-run test builds the pack with the CLI, unzips it in a temporary folder, installs
the library's wheel into a fresh virtual environment there, and executes one short chapter
(chapter 5, no torch, REPRO_SCALE=quick) with nbclient from the unpacked notebooks/ folder, with
no path into the clone: the kernel starts there, and the test checks that `lib` came from the
new environment and the data folder from the pack.

Trade-off, to stay fast (about 40 s, most of it the chapter) and offline: the new environment
does not download the pinned packages. It is created without pip, and a .pth file puts the
project venv's site-packages after its own (so numpy, scipy, ipykernel... are the project's;
`--system-site-packages` would only reach the base interpreter's, which has none of them); that
path is added without running its .pth files, so the clone's editable install of `lib` stays
out. The wheel is installed with `--no-deps`. The pack's requirements.txt is therefore checked
for what it pins, not resolved. When the pack's requirements leave out myst-nb, the kernel is
also denied myst_nb (a module that raises ModuleNotFoundError first on its path), as in Colab.
"""

import json
import os
import site
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import course_downloads  # noqa: E402  (book/_ext is not a package: the book's extensions)

sys.path.insert(0, str(ROOT / "tools"))
import course_pack  # noqa: E402

CHAPTER = "05_sgd_momentum"  # a fast chapter without torch (README's table: its run time)
KERNEL = "course-pack-test"


@pytest.fixture(scope="module")
def pack(tmp_path_factory) -> Path:
    """The pack built by the CLI, unzipped from its archive: the unpacked folder."""
    out = tmp_path_factory.mktemp("course")
    subprocess.run([sys.executable, str(ROOT / "tools" / "course_pack.py"), str(out / "build")],
                   check=True, capture_output=True, text=True)  # fmt: skip
    with zipfile.ZipFile(out / "build" / "scaling-reproduced-course.zip") as archive:
        archive.extractall(out / "unpacked")
    return out / "unpacked" / "scaling-reproduced-course"


def test_the_pack_holds_every_chapter_the_wheel_data_and_readme(pack):
    names = {p.stem for p in pack.glob("notebooks/*.ipynb")}
    assert names == {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.md")}
    assert len(list(pack.glob("scaling_reproduced_lib-*.whl"))) == 1
    assert (pack / "data" / "README.md").is_file()
    assert (pack / "data" / "jailbreakbench" / "LICENSE").is_file()
    requirements = (pack / "requirements.txt").read_text()
    assert "torch==" in requirements and "jupyter-book" not in requirements
    seconds = course_pack.run_times()[int(CHAPTER[:2])]  # the README's chapter table
    assert f"| {seconds} s |" in (pack / "README.md").read_text()


def test_pack_notebooks_are_plain_and_start_with_the_install_cells(pack):
    wheel = next(pack.glob("*.whl")).name
    for path in pack.glob("notebooks/*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        assert f"%pip install -r ../requirements.txt ../{wheel}" in notebook.cells[0].source
        code = [c for c in notebook.cells if c.cell_type == "code"]
        assert all(not c.outputs for c in code), f"{path.name} has stored outputs"
        assert not any("myst_nb" in c.source for c in code), f"{path.name} imports myst_nb"


def test_the_book_offers_each_chapter_the_packs_notebook(pack, tmp_path, monkeypatch):
    monkeypatch.setattr(course_downloads, "PACK", pack)
    app, context, other = SimpleNamespace(outdir=str(tmp_path)), {}, {}
    course_downloads._offer_notebook(app, f"notebooks/{CHAPTER}", "page.html", context, None)
    course_downloads._offer_notebook(app, "book/intro", "page.html", other, None)
    assert context == {"ipynb_source": f"notebooks/{CHAPTER}.ipynb"} and other == {}
    copied = tmp_path / "_sources" / "notebooks" / f"{CHAPTER}.ipynb"
    assert copied.read_bytes() == (pack / "notebooks" / f"{CHAPTER}.ipynb").read_bytes()


def _environment(pack: Path) -> Path:
    """A fresh venv beside the pack with the wheel installed (see the module docstring)."""
    env = pack.parent / "venv"
    venv.create(env, with_pip=False)
    own = Path(subprocess.run([env / "bin" / "python", "-c", "import sysconfig; print("
                               "sysconfig.get_path('purelib'))"], check=True, text=True,
                              capture_output=True).stdout.strip())  # fmt: skip
    (own / "project-venv.pth").write_text(site.getsitepackages()[0] + "\n")
    if "myst-nb" not in (pack / "requirements.txt").read_text():
        (own / "myst_nb.py").write_text("raise ModuleNotFoundError('no myst_nb', name='myst_nb')\n")
    wheel = next(pack.glob("*.whl"))
    subprocess.run([env / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True)  # fmt: skip
    spec = pack.parent / "kernels" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [str(env / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": KERNEL,
                                                  "language": "python"}))  # fmt: skip
    return env


def test_a_chapter_runs_from_the_unpacked_pack_in_a_fresh_venv(pack, tmp_path):
    env = _environment(pack)
    notebook = pack / "notebooks" / f"{CHAPTER}.ipynb"
    where = textwrap.dedent("""
        import lib, lib.data, json
        print(json.dumps({"lib": lib.__file__, "data": str(lib.data.data_dir())}))
    """)
    runner = textwrap.dedent(f"""
        import nbclient, nbformat
        nb = nbformat.read({str(notebook)!r}, as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell({where!r}))
        where = {{"metadata": {{"path": {str(notebook.parent)!r}}}}}  # the kernel's cwd
        nbclient.NotebookClient(nb, kernel_name={KERNEL!r}, timeout=600, resources=where).execute()
        print(nb.cells[-1].outputs[0]["text"])
    """)
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith(("REPRO_", "PYTHON"))}
    clean |= {"REPRO_SCALE": "quick", "REPRO_RESULTS_DIR": str(tmp_path),
              "JUPYTER_PATH": str(pack.parent / "kernels")}  # fmt: skip
    run = subprocess.run([sys.executable, "-c", runner], cwd=notebook.parent, env=clean,
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert Path(found["lib"]).is_relative_to(env), found["lib"]  # the wheel, not the clone
    assert Path(found["data"]) == pack / "data"
    assert (tmp_path / f"{CHAPTER}.json").is_file()  # the summary went to REPRO_RESULTS_DIR
