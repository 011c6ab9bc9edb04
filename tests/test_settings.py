"""lib.settings reads every REPRO_* variable strictly; summaries go to the checkout that runs."""

import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from lib import settings
from lib.claims import summary
from lib.settings import SettingError, check_environment

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def env(monkeypatch):
    """A clean environment: no REPRO_* variable set; returns monkeypatch to set some."""
    for name in [n for n in os.environ if n.upper().startswith("REPRO_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def test_defaults_and_good_values(env, tmp_path):
    assert [settings.get(n) for n in settings.SETTINGS] == [
        "quick", 0, None, "loky", None, None, "refuse", None
    ]  # fmt: skip
    good = {"REPRO_SCALE": ("full", "full"), "REPRO_SEED": ("4294967295", 2**32 - 1),
            "REPRO_WORKERS": ("3", 3), "REPRO_RESULTS_DIR": (str(tmp_path / "new"),
            tmp_path / "new"), "REPRO_SANDBOX_NONE": ("allow", "allow")}  # fmt: skip
    for name, (value, parsed) in good.items():
        env.setenv(name, value)
        assert settings.get(name) == parsed
    env.setenv("REPRO_BACKEND", "dask")
    for good in ("tcp://[::1]:8786", "tcp://10.0.0.5:8786", "tcp://my-host.example.org:1",
                 f"tcp://{'a' * 63}.example:65535", "tcp://localhost:8786"):  # fmt: skip
        env.setenv("REPRO_DASK_SCHEDULER", good)
        assert settings.get("REPRO_DASK_SCHEDULER") == good


# Each case the reliability audit of issue 38 found, and its neighbours.
BAD = [
    ("REPRO_SEED", "²", "not a whole number written in ASCII digits"),
    ("REPRO_SEED", "٣", "not a whole number written in ASCII digits"),
    ("REPRO_SEED", "1" * 40, r"out of range \[0, 4294967295\]"),
    ("REPRO_SEED", str(2**32), r"out of range \[0, 4294967295\]"),
    ("REPRO_SEED", "1" * 5000, "out of range"),  # never handed to int()
    ("REPRO_SEED", "-1", "ASCII digits"),
    ("REPRO_SEED", "010", "has a leading zero"),  # issue 60: not 10, not octal 8
    ("REPRO_SEED", "0" * 5000 + "1", "has a leading zero"),
    ("REPRO_WORKERS", "0003", "has a leading zero"),
    ("REPRO_SEED", "", "is empty"),
    ("REPRO_WORKERS", "²", "ASCII digits"),
    ("REPRO_WORKERS", "0", r"out of range \[1, 1024\]"),
    ("REPRO_SCALE", " FULL ", r"not one of quick, full \(values are exact"),
    ("REPRO_SCALE", "Quick", "values are exact"),
    ("REPRO_BACKEND", "DASK ", r"not one of loky, dask \(values are exact"),
    ("REPRO_SANDBOX_NONE", "yes", "pass allow or refuse"),
]


@pytest.mark.parametrize(("name", "value", "problem"), BAD)
def test_a_bad_value_names_the_variable_the_value_and_what_to_pass(env, name, value, problem):
    env.setenv(name, value)
    with pytest.raises(SettingError, match=problem) as error:
        settings.get("REPRO_SCALE")  # any read checks every setting
    message = str(error.value)
    assert message.startswith(f"{name}=") and "pass " in message and len(message) < 400


def test_a_huge_value_is_cut_to_80_characters(env):
    env.setenv("REPRO_SCALE", "x" * 100_000)
    with pytest.raises(SettingError) as error:
        check_environment()
    assert f"{'x' * 80!r}... (100000 characters)" in str(error.value)
    assert "x" * 81 not in str(error.value)


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("REPRO_DEVICE", "cuda", "REPRO_DEVICE is not a setting.*torch work runs on the CPU"),
        ("REPRO_DEVICE", "CPU", "REPRO_DEVICE is not a setting"),
        ("REPRO_SEEDS", "3", r"REPRO_SEEDS is not a setting.*did you mean REPRO_SEED\?"),
        ("repro_seed", "3", r"repro_seed is not a setting.*did you mean REPRO_SEED\?"),
        ("REPRO_" + "Z" * 200, "1", r"REPRO_Z{74}\.\.\. is not a setting"),
    ],
)
def test_an_unknown_setting_is_an_error_not_ignored(env, name, value, problem):
    env.setenv(name, value)
    with pytest.raises(SettingError, match=problem):
        settings.get("REPRO_SEED")


@pytest.mark.parametrize(
    "value",
    [
        "inproc://nothing",
        "localhost:8786",
        "tcp://host",
        "tcp://host:0",
        "tcp://host:65536",
        "tcp://a b:1",
        " tcp://host:1",
        "udp://host:1",
    ],  # fmt: skip
)
def test_a_malformed_scheduler_address_is_a_clear_error(env, value):
    env.setenv("REPRO_BACKEND", "dask")
    env.setenv("REPRO_DASK_SCHEDULER", value)
    with pytest.raises(SettingError, match="REPRO_DASK_SCHEDULER=.*pass tcp://host:port"):
        check_environment()


# Issue 60: hosts that are no DNS name or IP address reached Dask (a bare UnicodeError or
# TypeError and a 20 s hang); tls:// had no setting for its certificates.
@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("tcp://host..name:8786", "part '', which is not a DNS label"),
        ("tcp://host.:8786", "part '', which is not a DNS label"),
        (f"tcp://{'a' * 64}.example:8786", "not a DNS label"),
        ("tcp://-host:1", "part '-host', which is not a DNS label"),
        ("tcp://host-:1", "part 'host-', which is not a DNS label"),
        ("tcp://h_st:1", "not a DNS label"),
        ("tcp://hést:1", "not a DNS label"),
        (f"tcp://{('a' * 63 + '.') * 4}com:1", "host name of 259 characters (at most 253)"),
        ("tcp://1.2.3:1", "not an IPv4 address"),
        ("tcp://256.1.1.1:1", "not an IPv4 address"),
        ("tcp://010.0.0.1:1", "not an IPv4 address"),
        ("tcp://[::g]:1", "not an IPv6 address"),
        ("tcp://[]:1", "not an IPv6 address"),
        ("tcp://host:08786", "port '08786', not a number from 1 to 65535"),
        ("tcp://host:" + "1" * 100, "port '1111"),
        ("tls://host:8786", "uses tls://, which needs TLS certificates"),
        ("tls://[::1]:8786", "no setting of this book supplies"),
    ],
)
def test_a_scheduler_host_must_be_a_dns_name_or_ip_address(env, value, problem):
    env.setenv("REPRO_BACKEND", "dask")
    env.setenv("REPRO_DASK_SCHEDULER", value)
    with pytest.raises(SettingError, match=re.escape(problem)) as error:
        settings.get("REPRO_SEED")  # the first read of any setting
    assert str(error.value).startswith("REPRO_DASK_SCHEDULER=")
    assert "pass tcp://host:port" in str(error.value)


def test_backend_and_scheduler_go_together(env):
    env.setenv("REPRO_BACKEND", "dask")
    with pytest.raises(SettingError, match="REPRO_BACKEND=dask needs REPRO_DASK_SCHEDULER"):
        check_environment()
    env.delenv("REPRO_BACKEND")
    env.setenv("REPRO_DASK_SCHEDULER", "tcp://10.0.0.5:8786")
    with pytest.raises(SettingError, match="cluster would go unused"):
        check_environment()


def test_every_problem_is_listed_at_once(env):
    env.setenv("REPRO_SEED", "x")
    env.setenv("REPRO_SCALE", "huge")
    env.setenv("REPRO_SEEDS", "1")
    with pytest.raises(SettingError) as error:
        check_environment()
    assert len(str(error.value).splitlines()) == 3


def _dangling(tmp_path: Path) -> str:
    (tmp_path / "dangling").symlink_to(tmp_path / "missing")
    return str(tmp_path / "dangling")


def _loop(tmp_path: Path) -> str:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    return str(tmp_path / "a")


# Issue 60: each of these passed the check (or crashed it with an OSError, an INTERNALERROR
# under pytest) and failed only when the chapter wrote its summary at the end.
FOLDERS = [
    (lambda tmp: "/tmp/" + "x" * 300, "too long a path"),
    (lambda tmp: str(tmp) + ("/" + "d" * 200) * 25, "too long a path"),
    (lambda tmp: str(tmp) + "/x" * 2100, "too long a path"),
    (_dangling, "is a symbolic link to"),
    (_loop, "which does not resolve"),
    (lambda tmp: "/proc/repro-results", "cannot be created in '/proc'"),
    (lambda tmp: "/proc", "cannot write in"),
    (lambda tmp: "/proc/self/status", "is a file, not a folder"),
    (lambda tmp: "/sys/repro-results", "cannot be created in '/sys'"),
    (lambda tmp: "/sys/kernel/repro-results", "cannot be created in '/sys/kernel'"),
]


@pytest.mark.parametrize(("make", "problem"), FOLDERS)
def test_a_results_folder_that_cannot_hold_summaries_fails_at_the_first_read(
    env, tmp_path, make, problem
):
    value = make(tmp_path)
    env.setenv("REPRO_RESULTS_DIR", value)
    with pytest.raises(SettingError, match=re.escape(problem)) as error:
        settings.get("REPRO_SEED")
    assert str(error.value).startswith("REPRO_RESULTS_DIR=") and "pass an absolute path" in str(
        error.value
    )
    assert len(str(error.value)) < 500


def test_a_bad_results_folder_is_a_clear_error(env, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    for value, problem in [(str(a_file), "is a file, not a folder"),
                           (str(tmp_path / "no" / "such"), "neither does its parent folder"),
                           ("results", "is not an absolute path")]:  # fmt: skip
        env.setenv("REPRO_RESULTS_DIR", value)
        with pytest.raises(SettingError, match=f"REPRO_RESULTS_DIR=.*{problem}"):
            summary.results_dir()


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("REPRO_SEED", "²", "REPRO_SEED='²' is not a whole number written in ASCII digits"),
        ("REPRO_RESULTS_DIR", "/" + "x" * 300, "is too long a path"),  # issue 60: was exit 3
    ],
)
def test_under_pytest_a_bad_setting_is_a_usage_error_not_an_internal_error(
    env, name, value, problem
):
    env.setenv(name, value)
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "tests/test_scale.py"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    output = run.stdout + run.stderr
    assert run.returncode == 4 and "INTERNALERROR" not in output and "Traceback" not in output
    assert problem in output


# ------------------------------------------------------------------ the checkout that runs
def fake_checkout(folder: Path) -> Path:
    """A second clone of the book, as far as finding its results folder goes."""
    (folder / "notebooks").mkdir(parents=True)
    (folder / "book" / "results").mkdir(parents=True)
    (folder / "pyproject.toml").write_text(f'[project]\nname = "{summary.PROJECT}"\n')
    return folder


def test_the_checkout_is_found_from_the_working_folder(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checkout lib comes from: no warning
        assert summary.checkout(ROOT / "notebooks") == summary.LIB_CHECKOUT == ROOT
        assert summary.checkout(Path("/")) == ROOT  # outside any checkout: lib's
    other = fake_checkout(tmp_path / "clone")
    with pytest.warns(summary.CheckoutWarning, match="lib is imported from"):
        assert summary.checkout(other / "notebooks") == other


def test_a_chapter_run_in_a_second_clone_saves_its_summary_there(env, tmp_path):
    other = fake_checkout(tmp_path / "clone")
    program = textwrap.dedent("""
        from lib.claims import ClaimChecks, negative
        checks = ClaimChecks("99_second_clone", "t")
        checks.claim("a", "a claim", central=True)
        checks.premise("a", "a premise", 1.0, True, criterion="> 0", source="measured")
        checks.evidence("a", "q", [1.0, 1.1, 0.9, 1.0], above=0, predicted=1, paper="p",
                        control=negative("none", [-5.0, -5.1, -4.9, -5.0],
                                         alternative="a stand-in explanation"))
        print(checks.save())
    """)
    run = subprocess.run([sys.executable, "-c", program], cwd=other / "notebooks",
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert Path(run.stdout.strip()) == other / "book" / "results" / "99_second_clone.json"
    assert not (ROOT / "book" / "results" / "99_second_clone.json").exists()
    assert "CheckoutWarning" in run.stderr and str(other) in run.stderr
