"""lib.data finds the published datasets in a clone, in the course pack, or at REPRO_DATA_DIR."""

import os

import pytest

from lib import data
from lib.settings import SettingError


@pytest.fixture
def env(monkeypatch):
    """No REPRO_* variable set; returns monkeypatch to set some."""
    for name in [n for n in os.environ if n.upper().startswith("REPRO_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def _pack(root):
    """A course-pack-like folder: notebooks/ beside data/ (with its README and one file)."""
    (root / "notebooks").mkdir(parents=True)
    (root / "data" / "clark2022").mkdir(parents=True)
    (root / "data" / "README.md").write_text("provenance\n")
    (root / "data" / "clark2022" / "curves.csv.gz").write_bytes(b"x")
    return root


def test_a_clone_uses_the_data_beside_lib(env):
    assert data.data_dir() == data.BESIDE_LIB
    assert data.data_file("clark2022/curves.csv.gz").is_file()


def test_the_pack_layout_is_found_from_its_notebooks_folder(env, tmp_path):
    root = _pack(tmp_path / "pack")
    env.setattr(data, "BESIDE_LIB", tmp_path / "site-packages" / "data")  # as a wheel installs it
    env.chdir(root / "notebooks")
    found = data.data_file("clark2022/curves.csv.gz")
    assert found == root / "data" / "clark2022" / "curves.csv.gz"


def test_repro_data_dir_is_the_only_place_looked_at_when_set(env, tmp_path):
    root = _pack(tmp_path / "pack")
    env.setenv("REPRO_DATA_DIR", str(root / "data"))
    assert data.data_dir() == root / "data"
    with pytest.raises(FileNotFoundError, match=r"lacks 'obsscaling/x.csv'"):
        data.data_file("obsscaling/x.csv")  # the clone's data/ has no say once the variable is set


def test_missing_data_says_what_to_do(env, tmp_path):
    env.setattr(data, "BESIDE_LIB", tmp_path / "site-packages" / "data")
    env.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="course pack.*REPRO_DATA_DIR"):
        data.data_dir()


@pytest.mark.parametrize(
    ("value", "problem"),
    [("data", "not an absolute path"), ("/nonexistent/data", "lacks README.md")],
)
def test_a_bad_repro_data_dir_is_an_error(env, value, problem):
    env.setenv("REPRO_DATA_DIR", value)
    with pytest.raises(SettingError, match=f"REPRO_DATA_DIR=.*{problem}"):
        data.data_dir()
