"""The sandbox against well-behaved and hostile programs (lib/sandbox.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from lib.sandbox import SandboxLimits, run_sandboxed, truncate

FAST = SandboxLimits(timeout_s=1.5, memory_mb=256, cpu_s=3)


def test_runs_a_program_and_returns_its_output():
    result = run_sandboxed("print(6 * 7)", limits=FAST)
    assert result.ok and result.stdout == "42\n" and result.returncode == 0


def test_gives_the_program_its_files_and_a_private_folder(tmp_path):
    src = tmp_path / "data.csv"
    src.write_text("a,b\n1,2\n")
    code = "import os\nopen('out.txt', 'w').write('x')\nprint(sorted(os.listdir('.')))\n"
    code += "print(open('table.dat').read().splitlines()[1])"
    result = run_sandboxed(code, {"table.dat": src}, FAST)
    assert result.ok, result.message
    assert result.stdout.splitlines() == ["['main.py', 'out.txt', 'table.dat']", "1,2"]
    assert not (tmp_path / "out.txt").exists()


def test_an_exception_is_returned_as_an_error_message():
    result = run_sandboxed("x = 1 / 0", limits=FAST)
    assert result.status == "error"
    assert result.message == "ZeroDivisionError: division by zero"


def test_infinite_loop_is_killed_at_the_wall_clock_timeout():
    start = time.monotonic()
    result = run_sandboxed("while True:\n    pass", limits=FAST)
    assert result.status == "timeout" and "1.5 s" in result.message
    assert time.monotonic() - start < 10


def test_cpu_limit_stops_a_busy_program():
    result = run_sandboxed("x = 0\nwhile True:\n    x += 1", limits=SandboxLimits(10, 256, 1))
    assert result.status == "cpu" and "CPU" in result.message


@pytest.mark.parametrize(
    "code", ["a = bytearray(2 ** 31)", "a = []\nwhile True:\n    a.append(' ' * 10 ** 6)"]
)
def test_memory_hogs_hit_the_address_space_limit(code):
    result = run_sandboxed(code, limits=FAST)
    assert result.status == "memory" and "256 MiB" in result.message


def test_writes_and_reads_outside_the_folder_are_refused(tmp_path):
    target = tmp_path / "evil.txt"
    result = run_sandboxed(f"open({str(target)!r}, 'w').write('x')", limits=FAST)
    assert result.status == "blocked" and "outside the sandbox folder" in result.message
    assert not target.exists()
    result = run_sandboxed("print(open('/etc/hostname').read())", limits=FAST)
    assert result.status == "blocked" and result.stdout == ""
    result = run_sandboxed(f"import sqlite3\nsqlite3.connect({str(target)!r})", limits=FAST)
    assert result.status == "blocked" and not target.exists()


@pytest.mark.parametrize(
    "code, what",
    [
        ("import socket", "import of 'socket'"),
        ("import subprocess\nsubprocess.run(['true'])", "import of 'subprocess'"),
        ("import os\nos.system('true')", "os.system"),
        ("import os\nwhile True:\n    os.fork()", "os.fork"),
        ("import ctypes", "import of 'ctypes'"),
        ("import os\nos.listdir('/')", "listing '/'"),
    ],
)
def test_network_process_and_native_code_are_refused(code, what):
    result = run_sandboxed(code, limits=FAST)
    assert result.status == "blocked" and what in result.message, result.message


def test_the_calling_process_is_unharmed_after_hostile_runs():
    pid, cwd = os.getpid(), Path.cwd()
    run_sandboxed("import os\nos.chdir('/')", limits=FAST)
    assert os.getpid() == pid and Path.cwd() == cwd
    assert run_sandboxed("print('still fine')", limits=FAST).stdout == "still fine\n"


def test_truncate_keeps_head_and_tail():
    text = "a" * 600 + "b" * 600
    out = truncate(text, 1024)
    assert out.startswith("a" * 512) and out.endswith("b" * 512) and "176 characters cut" in out
    assert truncate("short") == "short"


@pytest.mark.parametrize(
    "kwargs", [{"timeout_s": 0}, {"memory_mb": 16}, {"cpu_s": -1}, {"timeout_s": float("nan")}]
)
def test_bad_limits_are_rejected(kwargs):
    with pytest.raises(ValueError):
        SandboxLimits(**kwargs)


def test_bad_arguments_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="code must be a str"):
        run_sandboxed(b"print(1)")
    with pytest.raises(ValueError, match="plain name"):
        run_sandboxed("pass", {"../x": tmp_path / "x"})
    with pytest.raises(ValueError, match="does not exist"):
        run_sandboxed("pass", {"x": tmp_path / "missing"})
    with pytest.raises(ValueError, match="limit must be"):
        truncate("abc", 1)
