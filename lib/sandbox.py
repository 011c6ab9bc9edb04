"""A subprocess sandbox for generated programs, after DataMind's code interpreter (Qiao et al.).

Each call runs one Python program in a fresh interpreter (`python -I`), in a private temporary
folder that holds only the files it is given, with a wall-clock timeout and kernel resource
limits (RLIMIT_AS memory, RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NOFILE, no core dumps). A small guard
installed before the program runs uses Python audit hooks (PEP 578) to refuse network sockets,
process creation (fork, exec, spawn, os.system, subprocess), native-code loading (ctypes) and
file access outside the private folder (reads of the Python installation stay allowed, so that
stdlib imports work). On a timeout the whole process group is killed, so stray children die too.

What this is not: audit hooks are a tripwire, not a security boundary (CPython's docs say so), and
the child runs as the same user. It is defence in depth for code written by a toy policy or a
test, on a machine with no network; do not run untrusted code from the internet with it.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

STATUSES = ("ok", "error", "blocked", "timeout", "memory", "cpu")
MAX_OUTPUT_CHARS = 1024  # DataMind truncates interpreter output to 1024 characters (half + half)

# Runs in the child before the program: install the audit hook, then run main.py as __main__.
GUARD = r"""
import os, sys
ROOT = os.path.realpath(os.getcwd())
READ_ROOTS = tuple({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                    sys.base_exec_prefix)}) + (ROOT,)
BLOCKED_MODULES = {"socket", "_socket", "subprocess", "_posixsubprocess", "ctypes", "_ctypes",
                   "multiprocessing", "_multiprocessing", "ssl", "pty", "asyncio"}
BLOCKED_EVENTS = {"os.system", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn",
                  "os.kill", "os.killpg", "os.chdir", "socket.__new__", "socket.connect",
                  "socket.getaddrinfo", "sqlite3.enable_load_extension", "ctypes.dlopen"}
PATH_EVENTS = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.symlink", "os.link",
               "os.chmod", "os.chown", "os.truncate", "os.utime", "shutil.rmtree",
               "shutil.copyfile", "shutil.move"}
LIST_EVENTS = {"os.listdir", "os.scandir", "glob.glob"}  # the import system lists stdlib folders
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

def _inside(path, roots):
    p = os.path.realpath(os.fsdecode(path))
    return any(p == r or p.startswith(r + os.sep) for r in roots)

def _refuse(what):
    raise PermissionError(f"sandbox: {what} is not allowed")

def _hook(event, args):
    if event == "import" and args[0].split(".")[0] in BLOCKED_MODULES:
        _refuse(f"import of {args[0]!r}")
    if event in BLOCKED_EVENTS:
        _refuse(event)
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        mode, flags = args[1] or "", args[2] or 0
        writing = any(c in str(mode) for c in "wax+") or bool(flags & WRITE_FLAGS)
        if not _inside(args[0], (ROOT,) if writing else READ_ROOTS):
            _refuse(f"{'writing' if writing else 'reading'} {os.fsdecode(args[0])!r} (outside "
                    "the sandbox folder)")
    if event == "sqlite3.connect":
        db = str(args[0]).removeprefix("file:").split("?")[0]
        if db != ":memory:" and not _inside(db, (ROOT,)):
            _refuse(f"opening database {db!r} (outside the sandbox folder)")
    if event in PATH_EVENTS:
        for a in args:
            if isinstance(a, (str, bytes, os.PathLike)) and not _inside(a, (ROOT,)):
                _refuse(f"{event} on {os.fsdecode(a)!r} (outside the sandbox folder)")
    if event in LIST_EVENTS and isinstance(args[0], (str, bytes, os.PathLike)):
        if not _inside(args[0], READ_ROOTS):
            _refuse(f"listing {os.fsdecode(args[0])!r} (outside the sandbox folder)")

sys.addaudithook(_hook)
import runpy
runpy.run_path("main.py", run_name="__main__")
"""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one sandboxed run: wall clock (s), address space (MiB), CPU (s), file (MiB)."""

    timeout_s: float = 5.0
    memory_mb: int = 512
    cpu_s: int = 5
    file_mb: int = 16
    max_open_files: int = 64

    def __post_init__(self) -> None:
        for name in ("timeout_s", "memory_mb", "cpu_s", "file_mb", "max_open_files"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and value > 0 and value < float("inf")):
                raise ValueError(f"SandboxLimits.{name} must be a positive number, got {value!r}")
        if self.memory_mb < 64:
            raise ValueError(f"memory_mb={self.memory_mb} is too small for Python; pass >= 64")


@dataclass(frozen=True)
class SandboxResult:
    """What a sandboxed run returned: a status from STATUSES, truncated output, a message."""

    status: str
    stdout: str
    stderr: str
    returncode: int | None
    wall_s: float
    message: str

    @property
    def ok(self) -> bool:
        """True when the program exited normally with status 0."""
        return self.status == "ok"


def truncate(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """Keep the first and last limit/2 characters of `text`, as DataMind's interpreter does."""
    if limit < 2:
        raise ValueError(f"limit must be >= 2 characters, got {limit}")
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + f"\n...[{len(text) - 2 * half} characters cut]...\n" + text[-half:]


def _set_limits(limits: SandboxLimits):
    """Return a preexec function that applies the kernel limits in the child before exec."""
    mib = 1024 * 1024

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mib,) * 2)
        cpu = int(max(1, round(limits.cpu_s)))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * mib,) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.max_open_files,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _classify(returncode: int, stderr: str, limits: SandboxLimits) -> tuple[str, str]:
    """Map an exit code and stderr to (status, message for the agent)."""
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    if returncode == 0:
        return "ok", ""
    if "MemoryError" in stderr:
        return "memory", f"MemoryError: the program exceeded its {limits.memory_mb} MiB limit"
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return "cpu", f"CPUTimeError: the program used more than {limits.cpu_s:g} s of CPU"
    if returncode == -signal.SIGXFSZ:
        return "error", f"FileSizeError: the program wrote more than {limits.file_mb} MiB"
    if "PermissionError: sandbox:" in stderr:
        return "blocked", last
    return "error", last or f"the program exited with status {returncode}"


def run_sandboxed(
    code: str, files: Mapping[str, str | Path] | None = None, limits: SandboxLimits | None = None
) -> SandboxResult:
    """Run `code` as main.py in a fresh, limited Python process; `files` maps name -> source path.

    The given files are copied into the private folder under their names (plain names only).
    """
    if not isinstance(code, str):
        raise ValueError(f"code must be a str of Python source, got {type(code).__name__}")
    limits = SandboxLimits() if limits is None else limits
    files = dict(files or {})
    for name, src in files.items():
        if not name or os.sep in name or name.startswith(".") or name == "main.py":
            raise ValueError(f"file name {name!r} must be a plain name other than main.py")
        if not Path(src).is_file():
            raise ValueError(f"file {src!s} for {name!r} does not exist; pass an existing file")
    with tempfile.TemporaryDirectory(prefix="sandbox_") as workdir:
        for name, src in files.items():
            shutil.copyfile(src, Path(workdir) / name)
        (Path(workdir) / "main.py").write_text(code, encoding="utf-8")
        return _run_in(workdir, limits)


def _run_in(workdir: str, limits: SandboxLimits) -> SandboxResult:
    """Start the guarded child in `workdir`, wait at most timeout_s, and kill its group if late."""
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-I", "-B", "-c", GUARD], cwd=workdir, env=env, text=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=_set_limits(limits), start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=limits.timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the child leads its own session: kill all of it
        out, err = proc.communicate()
        message = f"TimeoutError: the program ran longer than {limits.timeout_s:g} s and was killed"
        wall = time.monotonic() - start
        return SandboxResult("timeout", truncate(out), truncate(err), None, wall, message)
    wall = time.monotonic() - start
    status, message = _classify(proc.returncode, err, limits)
    return SandboxResult(status, truncate(out), truncate(err), proc.returncode, wall, message)
