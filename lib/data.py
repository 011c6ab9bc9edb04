"""Where the published datasets are: the `data/` folder of a clone, or of the course pack.

    from lib.data import data_file
    runs = pd.read_csv(data_file("clark2022/curves.csv.gz"))

The folder is, in this order: REPRO_DATA_DIR when it is set (and then only there); the `data/`
beside the `lib/` that is imported (a clone, or an editable install of one); the `data/` in or
above the working folder (the unpacked course pack, whose `notebooks/` sits beside `data/`,
where a kernel starts in `notebooks/`). A folder counts only if it holds data/README.md, the
provenance file every copy of the data carries. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

from lib import settings

BESIDE_LIB = Path(__file__).resolve().parent.parent / "data"
PROVENANCE = "README.md"  # data/README.md: sources, commits and licences


def _candidates() -> list[Path]:
    """The folders searched, in order (see the module docstring)."""
    chosen = settings.get("REPRO_DATA_DIR")
    if chosen is not None:
        return [chosen]
    here = Path.cwd()
    return [BESIDE_LIB, here / "data", here.parent / "data"]


def data_dir() -> Path:
    """The data folder: the first candidate that holds data/README.md, else FileNotFoundError
    naming every folder searched and what to do."""
    searched = _candidates()
    for folder in searched:
        if (folder / PROVENANCE).is_file():
            return folder
    tried = ", ".join(str(f) for f in searched)
    raise FileNotFoundError(
        f"no data folder (one holding {PROVENANCE}) in {tried}; run the chapter from a clone of "
        "the book, or from the unpacked course pack with its notebooks/ beside its data/ folder, "
        "or set REPRO_DATA_DIR to the absolute path of such a data/ folder"
    )


def data_file(relative: str) -> Path:
    """The file `relative` (e.g. 'clark2022/curves.csv.gz') of the data folder; FileNotFoundError
    naming the folder if it lacks it."""
    folder = data_dir()
    path = folder / relative
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: the data folder {folder} lacks "
                                f"{relative!r} (see its {PROVENANCE})")  # fmt: skip
    return path
