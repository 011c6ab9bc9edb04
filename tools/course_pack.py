"""Build the course pack: every chapter as a plain `.ipynb` that runs without a clone.

    .venv/bin/python tools/course_pack.py [OUT]    # `make course`; OUT defaults to _build/course

OUT/scaling-reproduced-course/ (and OUT/scaling-reproduced-course.zip of it) holds:
- notebooks/NN_name.ipynb: each chapter converted by Jupytext, outputs cleared, with two cells
  put first (what to install if `lib` is missing; a check that says so);
- the library's wheel, built from pyproject.toml without dependencies;
- data/: the published datasets, with data/README.md (provenance) and their licence files;
- requirements.txt: the runtime subset of the project's pins, and README.md for teachers.

The chapters are not edited for the pack: they glue values with `lib.glue`, which needs no
myst_nb (a Colab or plain Jupyter kernel has none), and the build fails loudly if a chapter's
code mentions myst_nb.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parent.parent
NAME = "scaling-reproduced-course"
# Packages lib and the chapters import at run time: their lines are copied from requirements.txt
RUNTIME = ("numpy", "scipy", "matplotlib", "pandas", "scikit-learn", "threadpoolctl", "joblib",
           "tqdm", "torch")  # fmt: skip
UNPINNED = ("psutil",)  # imported by lib.claims but pinned by nothing: its installed version
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
# The book's builder: the pack needs it only while a lib module other than lib/glue.py imports it
BOOK_GLUE_PACKAGE = ("myst-nb", "myst_nb")


class PackError(RuntimeError):
    """The pack cannot be built as the chapters or the project files stand (says which)."""


# ----------------------------------------------------------------------------- what chapters need
def chapters(root: Path = ROOT) -> list[Path]:
    """The chapters' MyST sources, in order."""
    found = sorted((root / "notebooks").glob("[0-9][0-9]_*.md"))
    if not found:
        raise PackError(f"no chapters (notebooks/NN_name.md) under {root}")
    return [p for p in found if "_tmp_jupytext_" not in p.name]


def run_times(root: Path = ROOT) -> dict[int, int]:
    """Each chapter's wall time in seconds on 2 cores, from the README's chapter table (the
    harness's times, checked against budgets by benchmarks/budget.py)."""
    text = (root / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \|.*\| (\d+) s \|$", text, re.M)
    return {int(number): int(seconds) for number, seconds in rows}


def _imports(source: str) -> set[str]:
    """Every module a piece of Python imports, at any depth (`from a import b` gives a, a.b)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def torch_modules(root: Path = ROOT) -> set[str]:
    """The lib modules that import torch, directly or through other lib modules."""
    imports = {}
    for path in (root / "lib").rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        imports[name] = _imports(path.read_text(encoding="utf-8"))
    users = {name for name, found in imports.items() if any(m.split(".")[0] == "torch"
                                                            for m in found)}  # fmt: skip
    grown = True
    while grown:  # a module that imports a torch user is one too
        more = {name for name, found in imports.items() if found & users} - users
        users |= more
        grown = bool(more)
    return users


def data_users(root: Path = ROOT) -> dict[int, list[str]]:
    """{chapter number: the data folders it reads}, from data/README.md's "used by Chapter(s)"."""
    text = (root / "data" / "README.md").read_text(encoding="utf-8")
    users: dict[int, list[str]] = {}
    for folder, entry in re.findall(r"^- `([\w.-]+)/`:(.*?)(?=^- |^$)", text, re.S | re.M):
        used = re.search(r"used by Chapters? ([\d, and]+)", " ".join(entry.split()))
        for number in re.findall(r"\d+", used.group(1)) if used else []:
            if folder not in users.setdefault(int(number), []):
                users[int(number)].append(folder)
    return users


# ----------------------------------------------------------------------------- one notebook
def _setup_cells(wheel: str, folders: list[str]) -> list:
    """The pack's first two cells: what to install, and a check that says it again if needed."""
    install = f"%pip install -r ../requirements.txt ../{wheel}"
    text = (
        "**Course pack setup.** This notebook imports the book's library `lib`. If the next cell "
        "says it is missing, run this in a cell, then restart the kernel (the pack's README.md "
        f"says how to install once for a whole class):\n\n```\n{install}\n```\n\n"
        "Numbers the book's prose quotes (`{glue:text}` placeholders) are filled in only in the "
        "book; here the code cells print and plot the same results."
    )
    code = [
        "import os",
        "from pathlib import Path",
        "",
        "try:",
        "    import lib.data",
        "except ModuleNotFoundError as missing:",
        "    raise ModuleNotFoundError(",
        '        "the book\'s library lib is not installed in this kernel: run "',
        f'        "{install} in a cell, then restart the kernel"',
        "    ) from missing",
        "# A clone writes the chapter's summary to its book/results; without one it goes here",
        'os.environ.setdefault("REPRO_RESULTS_DIR", str(Path.cwd() / "results"))',
        'print("summaries go to", os.environ["REPRO_RESULTS_DIR"])',
    ]
    if folders:
        code += [f'print("data ({", ".join(folders)}) from", lib.data.data_dir())']
    return [nbformat.v4.new_markdown_cell(text), nbformat.v4.new_code_cell("\n".join(code))]


def pack_notebook(path: Path, wheel: str, folders: list[str]) -> nbformat.NotebookNode:
    """The chapter at `path` as the pack's notebook: setup cells first, outputs cleared;
    PackError if a code cell mentions myst_nb, which a kernel without it cannot run."""
    notebook = jupytext.read(path, fmt="md:myst")
    for k, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        if "myst_nb" in cell.source:
            raise PackError(f"{path.name}, code cell {k}: it uses myst_nb, which a kernel "
                            "without it cannot run; glue values with lib.glue instead")  # fmt: skip
        cell.outputs, cell.execution_count = [], None
    notebook.cells[:0] = _setup_cells(wheel, folders)
    notebook.metadata.pop("jupytext", None)  # a plain notebook now, not a paired text file
    notebook.metadata["language_info"] = {"name": "python"}
    nbformat.validate(notebook)
    return notebook


# ----------------------------------------------------------------------------- the other files
def build_wheel(dest: Path, root: Path = ROOT) -> Path:
    """The library's wheel in `dest`, built from a copy of pyproject.toml and lib/ (so the clone
    gains no build/ or egg-info), with the interpreter's setuptools: no network."""
    with tempfile.TemporaryDirectory(prefix="lib-wheel-") as tmp:
        shutil.copy2(root / "pyproject.toml", tmp)
        shutil.copytree(root / "lib", Path(tmp) / "lib",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))  # fmt: skip
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                                "--no-build-isolation", "--wheel-dir", str(dest), tmp],
                               capture_output=True, text=True)  # fmt: skip
    if built.returncode:
        raise PackError(f"pip wheel of lib failed (exit {built.returncode}):\n{built.stderr}")
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise PackError(f"expected one wheel in {dest}, found {[w.name for w in wheels]}")
    return wheels[0]


def lib_needs_myst_nb(root: Path = ROOT) -> list[str]:
    """The lib modules, lib/glue.py aside, that import myst_nb (a kernel then needs it)."""
    found = []
    for path in (root / "lib").rglob("*.py"):
        modules = {m.split(".")[0] for m in _imports(path.read_text(encoding="utf-8"))}
        if path.name != "glue.py" and BOOK_GLUE_PACKAGE[1] in modules:
            found.append(str(path.relative_to(root)))
    return sorted(found)


def requirements_text(root: Path = ROOT) -> str:
    """The pack's requirements: the project's own pin lines for RUNTIME (and for myst-nb while
    lib needs it), the installed version for UNPINNED; PackError naming a package the project
    does not pin."""
    pins = {}
    for line in (root / "requirements.txt").read_text(encoding="utf-8").splitlines():
        pin = line.split("#")[0].strip()
        if "==" in pin:
            pins[pin.split("==")[0].lower()] = pin
    needed = list(RUNTIME)
    book_only = lib_needs_myst_nb(root)
    if book_only:
        needed.append(BOOK_GLUE_PACKAGE[0])
    missing = [name for name in needed if name not in pins]
    if missing:
        raise PackError(f"requirements.txt pins none of {missing}; pin them or drop them from "
                        "RUNTIME in tools/course_pack.py")  # fmt: skip
    lines = [f"# Runtime packages of the Scaling, Reproduced course pack (the book's pins). torch "
             f"is the CPU build: where pip's index serves CUDA wheels, first run\n# pip install "
             f"{pins['torch']} --index-url {TORCH_INDEX}"]  # fmt: skip
    lines += [pins[name] for name in RUNTIME]
    if book_only:
        lines += [f"{pins[BOOK_GLUE_PACKAGE[0]]}  # only while {', '.join(book_only)} imports "
                  f"{BOOK_GLUE_PACKAGE[1]} (lib.glue needs none)"]  # fmt: skip
    lines += [f"{name}=={metadata.version(name)}" for name in UNPINNED]
    return "\n".join(lines) + "\n"


def chapter_rows(root: Path = ROOT) -> list[dict]:
    """Per chapter: file name, title, time on 2 cores, whether it needs torch, its data."""
    times, torch_users, users = run_times(root), torch_modules(root), data_users(root)
    rows = []
    for path in chapters(root):
        number = int(path.name[:2])
        if number not in times:
            raise PackError(f"README.md's chapter table has no run time for chapter {number}")
        notebook = jupytext.read(path, fmt="md:myst")
        code = "\n".join(c.source for c in notebook.cells if c.cell_type == "code")
        found = _imports("\n".join(line for line in code.split("\n") if not line.startswith("%")))
        title = re.search(r"^# (.+)$", path.read_text(encoding="utf-8"), re.M)
        rows.append({"path": path, "number": number, "title": title.group(1) if title else "",
                     "seconds": times[number], "data": users.get(number, []),
                     "torch": any(m.split(".")[0] == "torch" or m in torch_users
                                  for m in found)})  # fmt: skip
    return rows


def readme_text(rows: list[dict], wheel: str, requirements: str) -> str:
    """The pack's README.md for teachers."""
    torch_pin = next(line for line in requirements.splitlines() if line.startswith("torch=="))
    table = ["| notebook | chapter | time on 2 cores | torch | data/ folders |", "|---" * 5 + "|"]
    table += [f"| `notebooks/{r['path'].stem}.ipynb` | {r['title']} | {r['seconds']} s | "
              f"{'yes' if r['torch'] else 'no'} | {', '.join(r['data']) or '-'} |"
              for r in rows]  # fmt: skip
    return f"""# Scaling, Reproduced: course pack

Every chapter of the book *Scaling, Reproduced* as a Jupyter notebook that runs without a clone
of the book's repository: each reproduces one ICLR 2026 paper on how machine learning scales, at
toy scale, on a CPU, and computes its own verdict.

## What is here

- `notebooks/`: one `.ipynb` per chapter. Their outputs are cleared: executing all twelve would
  make building the pack take minutes, and stored outputs would go stale against the chapters'
  seeds and the library; students run the cells themselves, top to bottom.
- `{wheel}`:
  the book's shared library, imported by every notebook as `lib`.
- `requirements.txt`: the packages the notebooks and the library use at run time, pinned as
  the book tests them.
- `data/`: the small published datasets some chapters read, unchanged, with their sources and
  licences in `data/README.md` and the licence files beside them. Nothing is downloaded at run
  time.

## Install

On a laptop (Python 3.11 or newer), from this folder:

```bash
python -m venv .venv && . .venv/bin/activate
pip install {torch_pin} --index-url {TORCH_INDEX}   # torch's CPU build
pip install -r requirements.txt {wheel} jupyterlab
jupyter lab notebooks
```

On a JupyterHub, install once into the image or the shared environment (the same two `pip
install` lines), then hand out the folder unchanged (for example with nbgitpuller or the LMS's
upload), so that each notebook keeps `data/` and the wheel one folder up. A student whose kernel
lacks the library sees the exact command in the notebook's first cells (then restarts the
kernel):

```
%pip install -r ../requirements.txt ../{wheel}
```

In Colab, upload and unzip the pack, `%cd` into its `notebooks/` folder, and run that command
(after the torch line above, with `%pip`). On macOS and Windows, PyPI's torch wheels are the CPU
build already: the torch line can be skipped. The `data/` folder is found beside
`notebooks/` (a kernel starts in the notebook's folder); to keep it elsewhere, set
`REPRO_DATA_DIR` to its absolute path. Each chapter writes a short JSON summary of its verdicts
to `results/` in its working folder (`REPRO_RESULTS_DIR` moves it).

## The chapters

Times are each chapter's wall time at the default scale on 2 CPU cores (the book's test run);
chapters without torch start faster (importing torch takes several seconds).

{chr(10).join(table)}

Chapter 4 runs generated programs in a sandbox that needs Linux's `unshare`; where there is none
(macOS, some containers), set `REPRO_SANDBOX_NONE=allow` before starting Jupyter, knowing what
that allows (the book's README explains). The book itself, with every chapter's rendered results
and a page for teachers, is where the prose's quoted numbers (`{{glue:text}}` placeholders here)
are filled in.
"""


def build(out: Path, root: Path = ROOT) -> Path:
    """Build OUT/NAME/ and OUT/NAME.zip from the checkout at `root`; returns the zip."""
    pack = out / NAME
    if pack.exists():
        shutil.rmtree(pack)
    (pack / "notebooks").mkdir(parents=True)
    wheel = build_wheel(pack, root).name
    rows = chapter_rows(root)
    for row in rows:
        notebook = pack_notebook(row["path"], wheel, row["data"])
        nbformat.write(notebook, pack / "notebooks" / f"{row['path'].stem}.ipynb")
    shutil.copytree(root / "data", pack / "data",
                    ignore=shutil.ignore_patterns("__pycache__", ".*"))  # fmt: skip
    requirements = requirements_text(root)
    (pack / "requirements.txt").write_text(requirements, encoding="utf-8")
    (pack / "README.md").write_text(readme_text(rows, wheel, requirements), encoding="utf-8")
    return Path(shutil.make_archive(str(out / NAME), "zip", out, NAME))


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else ROOT / "_build" / "course"
    archive = build(out.resolve())
    size = sum(f.stat().st_size for f in (out / NAME).rglob("*") if f.is_file())
    print(f"course pack: {out / NAME} ({size / 1e6:.1f} MB), {archive} "
          f"({archive.stat().st_size / 1e6:.1f} MB)")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
