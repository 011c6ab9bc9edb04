"""The sandbox with well-behaved programs, the tripwire's refusals, its isolation report and its
checks of bad input (lib/sandbox.py). Hostile programs are in tests/test_sandbox_hostile.py."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from lib import sandbox as S
from lib.sandbox import STATUSES, SandboxLimits, run_sandboxed, truncate

# Generous wall clocks: a loaded machine may slow a run down, never fail it.
EASY = SandboxLimits(timeout_s=30, memory_mb=256, cpu_s=5)


def test_runs_a_program_and_returns_its_output():
    result = run_sandboxed("print(6 * 7)", limits=EASY)
    assert result.ok and result.stdout == "42\n" and result.returncode == 0
    assert result.status in STATUSES and result.message == ""


def test_gives_the_program_its_files_and_a_private_folder(tmp_path):
    src = tmp_path / "data.csv"
    src.write_text("a,b\n1,2\n")
    code = "import os\nopen('out.txt', 'w').write('x')\nprint(sorted(os.listdir('.')))\n"
    code += "print(open('table.dat').read().splitlines()[1])"
    result = run_sandboxed(code, {"table.dat": src}, EASY)
    assert result.ok, result.message
    assert result.stdout.splitlines() == ["['main.py', 'out.txt', 'table.dat']", "1,2"]
    assert not (tmp_path / "out.txt").exists()


def test_an_exception_is_returned_as_an_error_message():
    result = run_sandboxed("x = 1 / 0", limits=EASY)
    assert result.status == "error" and result.returncode == 1
    assert result.message == "ZeroDivisionError: division by zero"


def test_source_that_is_not_valid_unicode_is_a_syntax_error_not_a_crash():
    result = run_sandboxed("print('\udcff')", limits=EASY)
    assert result.status == "error" and "SyntaxError" in result.message


def test_infinite_loop_is_killed_at_the_wall_clock_timeout():
    start = time.monotonic()
    result = run_sandboxed("while True:\n    pass", limits=SandboxLimits(1.5, 256, 30))
    assert result.status == "timeout" and "1.5 s" in result.message
    assert result.returncode is None and time.monotonic() - start < 1.5 + S.KILL_GRACE_S


def test_cpu_limit_stops_a_busy_program():
    result = run_sandboxed("x = 0\nwhile True:\n    x += 1", limits=SandboxLimits(60, 256, 1))
    assert result.status == "cpu" and "1 s of CPU" in result.message


@pytest.mark.parametrize(
    "code", ["a = bytearray(2 ** 31)", "a = []\nwhile True:\n    a.append(' ' * 10 ** 6)"]
)
def test_memory_hogs_hit_the_address_space_limit(code):
    result = run_sandboxed(code, limits=EASY)
    assert result.status == "memory" and "256 MiB" in result.message


def test_writes_and_reads_outside_the_folder_are_refused(tmp_path):
    target = tmp_path / "evil.txt"
    result = run_sandboxed(f"open({str(target)!r}, 'w').write('x')", limits=EASY)
    assert result.status == "blocked" and "outside the sandbox folder" in result.message
    assert not target.exists()
    result = run_sandboxed("print(open('/etc/hostname').read())", limits=EASY)
    assert result.status == "blocked" and result.stdout == ""
    result = run_sandboxed(f"import sqlite3\nsqlite3.connect({str(target)!r})", limits=EASY)
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
def test_the_tripwire_explains_network_process_and_native_code_refusals(code, what):
    result = run_sandboxed(code, limits=EASY)
    assert result.status == "blocked" and what in result.message, result.message


def test_the_calling_process_is_unharmed_after_hostile_runs():
    pid, cwd, env = os.getpid(), Path.cwd(), dict(os.environ)
    run_sandboxed("import os\nos.chdir('/')", limits=EASY)
    assert os.getpid() == pid and Path.cwd() == cwd and dict(os.environ) == env
    assert run_sandboxed("print('still fine')", limits=EASY).stdout == "still fine\n"


def test_isolation_reports_the_layers_in_use():
    layers = S.isolation()
    assert layers.mode in ("namespaces", "user namespace", "unprivileged user", "none")
    assert layers.describe().startswith(f"Sandbox isolation ({layers.mode}):")
    assert layers.full == (bool(layers.namespaces) and layers.private_root)
    if shutil.which("unshare") and os.geteuid() == 0:  # this project's machines
        assert layers.mode == "namespaces" and layers.full and layers.process_limit


@pytest.fixture
def no_namespaces(monkeypatch):
    """A machine where the namespace modes fail and only "none" works (probed afresh)."""
    broken = S._Mode(
        "namespaces", (shutil.which("unshare") or "unshare", "--bogus"), True, True, None
    )
    weakest = S._Mode("none", (), False, False, None)
    monkeypatch.setattr(S, "_candidate_modes", lambda: [broken, weakest])
    for cache in ("_ACTIVE", "_WORKING"):
        monkeypatch.setattr(S, cache, None)
    monkeypatch.setattr(S, "_WARNED_NONE", False)
    monkeypatch.delenv("REPRO_SANDBOX_NONE", raising=False)
    return monkeypatch


def test_without_namespaces_the_sandbox_warns_once_and_claims_no_more(no_namespaces):
    with pytest.warns(RuntimeWarning, match="no namespaces") as record:
        layers = S.isolation()
        assert S.isolation() is layers
    assert len(record) == 1
    assert not layers.full and layers.mode == "none" and not layers.process_limit
    assert "the host's file system" in layers.describe() and "namespaces (" in layers.reason


def test_no_os_isolation_needs_an_explicit_opt_in_and_says_so(no_namespaces):
    with pytest.warns(RuntimeWarning, match="no namespaces"):
        S.isolation()
    with pytest.raises(S.SandboxUnavailable, match="REPRO_SANDBOX_NONE=allow") as refused:
        run_sandboxed("print(1)", limits=EASY)
    assert "no OS isolation" in str(refused.value) and "namespaces (" in str(refused.value)
    with pytest.warns(RuntimeWarning, match="NO OS isolation") as record:
        assert run_sandboxed("print(1)", limits=EASY, allow_none=True).stdout == "1\n"
        no_namespaces.setenv("REPRO_SANDBOX_NONE", "allow")
        assert run_sandboxed("print(2)", limits=EASY).stdout == "2\n"
    assert len(record) == 1  # said once, not at every run
    with pytest.raises(S.SandboxUnavailable):
        run_sandboxed("print(1)", limits=EASY, allow_none=False)  # the argument wins
    assert run_sandboxed("print(3)", limits=EASY, mode="none").stdout == "3\n"  # asked by name
    with pytest.raises(ValueError, match="mode 'namespaces' does not work on this machine"):
        run_sandboxed("pass", mode="namespaces")


def test_the_reason_says_why_each_stronger_mode_is_unavailable(monkeypatch):
    monkeypatch.setattr(S.shutil, "which", lambda tool: None if tool == "unshare" else "/x")
    monkeypatch.setattr(S.sys, "platform", "linux")
    monkeypatch.setattr(S.os, "geteuid", lambda: 0)
    assert S._unavailable() == dict.fromkeys(
        ("namespaces", "user namespace"), "unshare not found on PATH (util-linux)"
    )
    monkeypatch.setattr(S.shutil, "which", lambda tool: None)
    assert S._unavailable()["unprivileged user"] == "setpriv not found on PATH (util-linux)"
    monkeypatch.setattr(S.os, "geteuid", lambda: 1000)
    why = S._unavailable()
    assert why["unprivileged user"] == "switching to a fresh uid needs root; this is uid 1000"
    assert S._reason("none", {}) == "; ".join(f"{n} ({why[n]})" for n in S.MODES[:3])
    monkeypatch.setattr(S.sys, "platform", "darwin")
    assert set(S._unavailable().values()) == {"needs Linux; this is darwin"}


def test_every_working_mode_can_be_chosen_with_or_without_the_tripwire():
    working = S.modes()
    assert list(working) == [m for m in S.MODES if m in working] and "none" in working
    assert next(iter(working)) == S.isolation().mode
    for mode in working:
        on = run_sandboxed("import socket", limits=EASY, mode=mode)
        off = run_sandboxed("import socket", limits=EASY, mode=mode, tripwire=False)
        assert S.stopped_by(on) == "tripwire" and off.ok, (mode, off.message)
    with pytest.raises(ValueError, match="mode 'chroot' is not a sandbox mode; pass one of"):
        run_sandboxed("pass", mode="chroot")


def result(status: str, message: str = "") -> S.SandboxResult:
    return S.SandboxResult(status, "", "", 1, 0.1, message)


@pytest.mark.parametrize(
    ("status", "message", "layer"),
    [
        ("blocked", "PermissionError: sandbox: import of 'socket' is not allowed", "tripwire"),
        ("cpu", "CPUTimeError: the program used more than 1 s of CPU", "CPU limit"),
        ("memory", "MemoryError: the program exceeded its 256 MiB limit", "memory limit"),
        ("timeout", "TimeoutError: the program ran longer than 5 s", "wall clock"),
        ("ok", "", "not stopped"),
        ("error", "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/x'",
         "private root"),
        ("error", "OSError: [Errno 30] Read-only file system: '/usr/x'", "private root"),
        ("error", "PermissionError: [Errno 13] Permission denied: '/tmp/x'", "unprivileged user"),
        ("error", "PermissionError: [Errno 1] Operation not permitted", "unprivileged user"),
        ("error", "OSError: [Errno 101] Network is unreachable", "network namespace"),
        ("error", "ProcessLookupError: [Errno 3] No such process", "PID namespace"),
        ("error", "BlockingIOError: [Errno 11] Resource temporarily unavailable",
         "process limit"),
        ("error", "FileSizeError: the program wrote more than 1 MiB", "file-size limit"),
        ("error", "ConnectionRefusedError: [Errno 111] Connection refused",
         "error: ConnectionRefusedError: [Errno 111] Connection refused"),
    ],
)  # fmt: skip
def test_stopped_by_names_the_layer_from_the_status_or_the_error_number(status, message, layer):
    assert S.stopped_by(result(status, message)) == layer


def test_truncate_keeps_head_and_tail():
    text = "a" * 600 + "b" * 600
    out = truncate(text, 1024)
    assert out.startswith("a" * 512) and out.endswith("b" * 512) and "176 characters cut" in out
    assert truncate("short") == "short"


def test_output_files_are_read_by_head_and_tail_with_replacement(tmp_path):
    path = tmp_path / "out"
    path.write_bytes("é".encode() * 10 + b"\xff" + b"x" * 10**6 + "€".encode() * 10)
    text = S._read_capped(path, 100)
    assert text.startswith("éééé") and text.endswith("€€€€") and "bytes cut" in text
    assert len(text) < 200
    path.write_bytes(b"ok\xff\n")
    assert S._read_capped(path) == "ok\ufffd\n"


@pytest.mark.parametrize(
    "raw, expected",
    [
        (b'{"exit": 3, "cpu_s": 0.5}\n', {"exit": 3, "cpu_s": 0.5}),
        (b'{"signal": 9, "cpu_s": 1}\n', {"signal": 9, "cpu_s": 1}),
        (b"", None),
        (b"\xff\xfe", None),
        (b'{"exit": true}', None),
        (b'{"exit": "0"}', None),
        (b"[0]", None),
        (b'{"cpu_s": 1.0}', None),
        (b'{"exit": 0, "extra": 1}', None),
    ],
)
def test_a_garbled_launcher_status_is_rejected_not_trusted(tmp_path, raw, expected):
    (tmp_path / "status").write_bytes(raw)
    assert S._read_status(tmp_path / "status") == expected


@pytest.mark.parametrize(
    "state, stderr, expected",
    [
        ({"exit": 0, "cpu_s": 0.1}, "", ("ok", "")),
        ({"signal": 24, "cpu_s": 2.0}, "", ("cpu", "CPUTimeError")),
        ({"signal": 9, "cpu_s": 3.0}, "", ("cpu", "CPUTimeError")),  # the hard CPU limit
        ({"signal": 9, "cpu_s": 0.1}, "", ("error", "killed by SIGKILL")),
        ({"signal": 40, "cpu_s": 0.1}, "", ("error", "killed by signal 40")),
        ({"signal": 200, "cpu_s": 0.1}, "", ("error", "killed by signal 200")),
        ({"exit": 1, "cpu_s": 0.1}, "OSError: [Errno 27] File too large", ("error", "FileSize")),
        ({"exit": 1, "cpu_s": 0.1}, "x\nMemoryError\n", ("memory", "MemoryError")),
        ({"exit": 1, "cpu_s": 0.1}, "PermissionError: sandbox: no", ("blocked", "PermissionError")),
        ({"exit": 5, "cpu_s": 0.1}, "", ("error", "exited with status 5")),
    ],
)
def test_every_exit_is_classified_without_raising(state, stderr, expected):
    status, message = S._classify(state, stderr, SandboxLimits(cpu_s=2))
    assert status == expected[0] and expected[1] in message, message


def test_limits_store_plain_numbers():
    limits = SandboxLimits(timeout_s=np.float64(2), memory_mb=np.int64(256), cpu_s=4)
    assert type(limits.memory_mb) is int and type(limits.timeout_s) is float


HERE = Path(__file__)
BAD_CALLS = [
    (lambda: SandboxLimits(cpu_s=True), TypeError, "cpu_s must be a real number"),
    (lambda: SandboxLimits(cpu_s=-1), ValueError, "cpu_s must lie in"),
    (lambda: SandboxLimits(timeout_s=0), ValueError, "timeout_s must lie in"),
    (lambda: SandboxLimits(timeout_s=float("nan")), ValueError, "timeout_s must be finite"),
    (lambda: SandboxLimits(timeout_s=float("inf")), ValueError, "timeout_s must be finite"),
    (lambda: SandboxLimits(timeout_s="5"), TypeError, "timeout_s must be a real number"),
    (lambda: SandboxLimits(memory_mb=16), ValueError, "memory_mb must be >= 64"),
    (lambda: SandboxLimits(memory_mb=256.0), TypeError, "memory_mb must be an integer"),
    (lambda: SandboxLimits(file_mb=True), TypeError, "file_mb must be an integer"),
    (lambda: SandboxLimits(max_open_files=8), ValueError, "max_open_files must be >= 16"),
    (lambda: SandboxLimits(max_processes=0), ValueError, "max_processes must be >= 1"),
    (lambda: SandboxLimits(folder_mb="64"), TypeError, "folder_mb must be an integer"),
    (lambda: run_sandboxed(b"print(1)"), TypeError, "code must be a string"),
    (lambda: run_sandboxed(None), TypeError, "code must be a string"),
    (lambda: run_sandboxed("pass", limits={"timeout_s": 1}), TypeError, "limits must be a"),
    (lambda: run_sandboxed("pass", ["data.csv"]), TypeError, "files must be a mapping"),
    (lambda: run_sandboxed("pass", {"../x": HERE}), ValueError, "must be a plain name"),
    (lambda: run_sandboxed("pass", {".hidden": HERE}), ValueError, "must be a plain name"),
    (lambda: run_sandboxed("pass", {"main.py": HERE}), ValueError, "other than main.py"),
    (lambda: run_sandboxed("pass", {"": HERE}), ValueError, "file name must not be empty"),
    (lambda: run_sandboxed("pass", {1: HERE}), TypeError, "file name must be a string"),
    (lambda: run_sandboxed("pass", {"x": 3}), TypeError, r"files\['x'\] must be a path"),
    (lambda: run_sandboxed("pass", {"x": "/no/such/file"}), ValueError, "does not exist"),
    (lambda: run_sandboxed("pass", {"x": HERE.parent}), ValueError, "does not exist"),
    (lambda: truncate("abc", 1), ValueError, "limit must be >= 2"),
    (lambda: truncate("abc", True), TypeError, "limit must be an integer"),
    (lambda: truncate("abc", 2.5), TypeError, "limit must be an integer"),
    (lambda: truncate(b"abc"), TypeError, "text must be a string"),
    (lambda: run_sandboxed("pass", tripwire=0), TypeError, "tripwire must be True or False"),
    (lambda: run_sandboxed("pass", allow_none="yes"), TypeError, "allow_none must be True"),
    (lambda: run_sandboxed("pass", mode=3), TypeError, "mode must be a string"),
    (lambda: S.stopped_by("blocked"), TypeError, "result must be a SandboxResult"),
]


@pytest.mark.parametrize("call, error, message", BAD_CALLS)
def test_bad_calls_get_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
