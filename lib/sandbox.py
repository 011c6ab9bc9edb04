"""A sandbox for generated programs, after DataMind's code interpreter (Qiao et al.).

`run_sandboxed(code, files, limits)` runs one Python program in a fresh interpreter and returns
a `SandboxResult` (status, capped output, a message for the agent); it never raises for anything
the program does. Isolation comes from the operating system, in layers; `isolation()` says which
ones this machine gives (`isolation().describe()` in words, `isolation().reason` why a stronger
mode was not available), and a warning says so, once, when Linux namespaces are not available.
Where no OS isolation is available at all (mode "none": the program would run as the caller's
own user), `run_sandboxed` refuses with `SandboxUnavailable` unless the caller opts in with
`allow_none=True` or the setting `REPRO_SANDBOX_NONE=allow`.

`modes()` lists every mode that works here; `run_sandboxed(..., mode=name, tripwire=False)` runs
a program under one of them, with or without the tripwire, and `stopped_by(result)` names the
layer that stopped it (chapter 4 shows this for each hostile program).

The layers, all on by default on Linux where `unshare` works (as root, or through a user
namespace for other users):
- **Namespaces** (network, PID, mount, IPC, UTS): no network interface but a loopback that is
  down; the program sees only its own processes, and all of them die with it.
- **A private root**: the program's whole file system is a read-only view of the Python
  installation and the shared libraries, `/dev/null` and its kin, its own `/proc`, and
  `/sandbox`, a size-capped tmpfs folder (its working folder, `HOME` and `TMPDIR`) holding
  `main.py` and copies of the given files. No other path of the host exists for it.
- **An unprivileged user**: started as root, the program runs as a fresh uid/gid (one per run,
  from a range no file belongs to), with no supplementary groups; otherwise as root inside a
  user namespace. Either way it has no capabilities and no_new_privs is set.
- **Kernel limits**: address space, CPU seconds, file size (which also caps stdout and stderr),
  open files, no core dumps, a wall clock, and the number of processes (counted per run for a
  fresh uid or a user namespace started by another user; `isolation().process_limit`).
- **A tripwire**: an audit hook (PEP 578) refuses imports of socket, subprocess and ctypes,
  process creation and file access outside the folder, so that the agent gets a clear
  `PermissionError: sandbox: ...` (status "blocked"). It is not a boundary: a program can switch
  it off (tests/test_sandbox_hostile.py does, by walking frames), and the layers above hold.

The caller cannot be hurt: stdout and stderr go to files capped by the file-size limit, of which
only the head and tail are read back (decoded with replacement, so invalid UTF-8 never raises);
every wait has a deadline; and on every exit, not only on a timeout, everything the program
started is killed (the PID namespace makes this exact; without it the launcher, a child
subreaper, kills its descendants and the caller kills the process group).

tests/test_sandbox_hostile.py proves each promise with an attack watched from outside. What this
is not: there is no seccomp filter, so the kernel's whole system-call surface is reachable and a
kernel exploit would escape; the CPU and memory of the machine are shared (each process is
limited, and so is their number, but there are no cgroups). Without namespaces only the limits,
the tripwire and (as root) the unprivileged uid remain, and `isolation()` says so.

Design: `unshare` and `setpriv` from util-linux create the namespaces and drop the privileges;
between them, a small stdlib launcher (lib/_sandbox_launcher.py) runs as process 1 of the new
PID namespace, builds the private root, starts the program, and kills what is left. Nothing runs
in the caller between fork and exec (no `preexec_fn`, which is unsafe in a threaded caller such
as a Jupyter kernel), and `os.unshare` would need Python 3.12 and still a fork to enter the new
PID namespace, which `unshare --fork` does for us.
"""

from __future__ import annotations

import errno
import json
import marshal
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lib import settings, validate

STATUSES = ("ok", "error", "blocked", "timeout", "memory", "cpu")
MAX_OUTPUT_CHARS = 1024  # DataMind truncates interpreter output to 1024 characters (half + half)
MIB = 1024 * 1024
LAUNCHER = Path(__file__).with_name("_sandbox_launcher.py")
FOLDER = "/sandbox"  # the program's folder inside the private root
UID_BASE, UID_SPAN = 1 << 30, 1 << 24  # a fresh uid/gid per run: no file on the host has one
KILL_GRACE_S = 5.0  # how long the caller waits for a killed sandbox to be reaped
SETUP_TIMEOUT_S = 30.0  # how long building the sandbox may take before the program starts
PROBE_TIMEOUT_S = 60.0  # the first run that finds the isolation layers; generous for busy hosts
NAMESPACES = ("network", "pid", "mount", "ipc", "uts")
MODES = ("namespaces", "user namespace", "unprivileged user", "none")  # strongest first
# What a hostile program's error number says stopped it (see stopped_by)
LAYER_OF_ERRNO = {
    errno.ENOENT: "private root",  # the host path does not exist in the program's world
    errno.EROFS: "private root",  # everything but its folder is mounted read-only
    errno.EACCES: "unprivileged user",
    errno.EPERM: "unprivileged user",
    errno.ENETUNREACH: "network namespace",  # no interface but a loopback that is down
    errno.ESRCH: "PID namespace",  # the host's processes do not exist for it
    errno.EAGAIN: "process limit",  # fork refused: too many processes for its user
}
LAYER_OF_STATUS = {"blocked": "tripwire", "cpu": "CPU limit", "memory": "memory limit",
                   "timeout": "wall clock", "ok": "not stopped"}  # fmt: skip
UNSHARE_FLAGS = ("--net", "--pid", "--mount", "--ipc", "--uts", "--fork", "--kill-child")
LAUNCH_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
THREADS_ENV = {f"{name}_NUM_THREADS": "1" for name in ("OPENBLAS", "OMP", "MKL")}

# Runs in the child (python -I -S) before the program: SITE puts the environment's packages on
# the path, TRIPWIRE installs the audit hook (unless a caller asks for tripwire=False), RUN_MAIN
# runs main.py as __main__.
SITE = r"""
import os, sys
_SITE = os.path.join(sys.prefix, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
if os.path.isdir(_SITE):  # python -S skips the .pth files (they cost more than the program)
    sys.path.append(_SITE)
"""
TRIPWIRE = r"""
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
"""
RUN_MAIN = """
import runpy
runpy.run_path("main.py", run_name="__main__")
"""


class SandboxUnavailable(RuntimeError):
    """No OS isolation on this machine, and the caller did not opt in to running without it."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one run: wall clock (s), address space per process (MiB), CPU (s, rounded up),
    size of any file written and of stdout/stderr (MiB), open files, processes and threads
    (where `isolation().process_limit`), size of the private folder with its files (MiB)."""

    timeout_s: float = 5.0
    memory_mb: int = 512
    cpu_s: float = 5
    file_mb: int = 16
    max_open_files: int = 64
    max_processes: int = 16
    folder_mb: int = 64

    def __post_init__(self) -> None:
        day = 86_400.0
        cleaned = {
            "timeout_s": validate.real("timeout_s", self.timeout_s, low=0, high=day, low_open=True),
            "memory_mb": validate.integer("memory_mb", self.memory_mb, minimum=64, maximum=MIB),
            "cpu_s": validate.real("cpu_s", self.cpu_s, low=0, high=day, low_open=True),
            "file_mb": validate.integer("file_mb", self.file_mb, minimum=1, maximum=MIB),
            "max_open_files": validate.integer(
                "max_open_files", self.max_open_files, minimum=16, maximum=MIB
            ),
            "max_processes": validate.integer(
                "max_processes", self.max_processes, minimum=1, maximum=4096
            ),
            "folder_mb": validate.integer("folder_mb", self.folder_mb, minimum=1, maximum=MIB),
        }
        for name, value in cleaned.items():  # store plain int/float (not e.g. numpy scalars)
            object.__setattr__(self, name, value)


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


@dataclass(frozen=True)
class Isolation:
    """The isolation layers run_sandboxed applies on this machine (from `isolation()`)."""

    mode: str  # "namespaces", "user namespace", "unprivileged user" or "none"
    namespaces: tuple[str, ...]
    private_root: bool
    user: str
    no_new_privs: bool
    process_limit: bool
    reason: str = ""  # why stronger modes were not available ("" if none was tried in vain)

    @property
    def full(self) -> bool:
        """True when the program runs in its own namespaces with a private root."""
        return bool(self.namespaces) and self.private_root

    def describe(self) -> str:
        """One paragraph for a reader: which layers hold, and which are missing."""
        ns = ", ".join(self.namespaces) + " namespaces" if self.namespaces else "no namespaces"
        root = "a private read-only root" if self.private_root else "the host's file system"
        text = (
            f"Sandbox isolation ({self.mode}): {ns}; {root}; {self.user}; "
            f"no_new_privs {'on' if self.no_new_privs else 'off'}; process count "
            f"{'limited' if self.process_limit else 'not limited'}; kernel limits on memory, "
            "CPU, file size and open files; wall-clock timeout; audit-hook tripwire."
        )
        return text + (f" Not available: {self.reason}" if self.reason else "")


@dataclass(frozen=True)
class _Mode:
    """How to start one run: a command prefix and what the launcher must set up."""

    name: str
    prefix: tuple[str, ...]
    private_root: bool
    drop_uid: bool
    setpriv: str | None


def truncate(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """Keep the first and last limit/2 characters of `text`, as DataMind's interpreter does."""
    text = validate.text("text", text, empty=True)
    limit = validate.integer("limit", limit, minimum=2)
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + f"\n...[{len(text) - 2 * half} characters cut]...\n" + text[-half:]


def run_sandboxed(
    code: str,
    files: Mapping[str, str | Path] | None = None,
    limits: SandboxLimits | None = None,
    *,
    mode: str | None = None,
    tripwire: bool = True,
    allow_none: bool | None = None,
) -> SandboxResult:
    """Run `code` as main.py in a fresh, isolated Python process; `files` maps name -> source path.

    The given files are copied into the private folder under their names (plain names only).
    `mode` picks one of `modes()` (default: the strongest); `tripwire=False` leaves the audit
    hook out, to show what the other layers hold. Mode "none" (no OS isolation) needs an opt-in:
    `allow_none=True`, the setting REPRO_SANDBOX_NONE=allow, or asking for mode="none" by name;
    otherwise it raises SandboxUnavailable.
    """
    code = validate.text("code", code, empty=True)
    if limits is None:
        limits = SandboxLimits()
    elif not isinstance(limits, SandboxLimits):
        raise TypeError(f"limits must be a SandboxLimits or None, got {type(limits).__name__}")
    if not isinstance(tripwire, bool):
        raise TypeError(f"tripwire must be True or False, got {tripwire!r:.80}")
    if allow_none is not None and not isinstance(allow_none, bool):
        raise TypeError(f"allow_none must be True, False or None, got {allow_none!r:.80}")
    files = _checked_files(files)
    if mode is None:
        chosen = _active_mode()
        if chosen.name == "none":
            _check_none_allowed(allow_none)
    else:
        chosen = _named_mode(mode)
    return _execute(code, files, limits, chosen, tripwire)


def _check_none_allowed(allow_none: bool | None) -> None:
    """Raise SandboxUnavailable unless running without OS isolation was asked for."""
    allowed = allow_none if allow_none is not None else (
        settings.get("REPRO_SANDBOX_NONE") == "allow")  # fmt: skip
    if not allowed:
        raise SandboxUnavailable(
            "no OS isolation is available for generated programs here ("
            + (_ACTIVE[1].reason or "no stronger mode works")
            + "): they would run as your own user, held only by kernel limits and an audit-hook "
            "tripwire that a program can switch off. To run them anyway, set "
            "REPRO_SANDBOX_NONE=allow (or pass allow_none=True)"
        )
    global _WARNED_NONE
    if not _WARNED_NONE:
        _WARNED_NONE = True
        warnings.warn("generated programs run with NO OS isolation (mode 'none'), as allowed by "
                      "REPRO_SANDBOX_NONE=allow or allow_none=True", RuntimeWarning,
                      stacklevel=3)  # fmt: skip


def _checked_files(files) -> dict[str, Path]:
    """Validate `files` (a mapping of plain names to existing files) and return it as a dict."""
    if files is None:
        return {}
    if not isinstance(files, Mapping):
        raise TypeError(f"files must be a mapping of name -> path, got {type(files).__name__}")
    checked = {}
    for name, src in files.items():
        name = validate.text("file name", name)
        plain = "/" not in name and "\0" not in name and len(name.encode()) <= 255
        if not plain or name.startswith(".") or name == "main.py":
            raise ValueError(f"file name {name!r} must be a plain name other than main.py")
        if not isinstance(src, str | os.PathLike):
            raise TypeError(f"files[{name!r}] must be a path, got {type(src).__name__}")
        if not Path(src).is_file():
            raise ValueError(f"file {src!s} for {name!r} does not exist; pass an existing file")
        checked[name] = Path(src)
    return checked


# ------------------------------------------------------------------------ which layers hold


_ACTIVE: tuple[_Mode, Isolation] | None = None
_WORKING: dict[str, tuple[_Mode, Isolation]] | None = None
_WARNED_NONE = False


def _unavailable() -> dict[str, str]:
    """Why this platform cannot even try some modes: mode name -> reason."""
    if sys.platform != "linux":
        return dict.fromkeys(MODES[:-1], f"needs Linux; this is {sys.platform}")
    missing = [tool for tool in ("unshare", "setpriv") if shutil.which(tool) is None]
    tools = f"{' and '.join(missing)} not found on PATH (util-linux)" if missing else ""
    why = dict.fromkeys(("namespaces", "user namespace"), tools) if tools else {}
    if os.geteuid() != 0:
        why.setdefault("namespaces", f"needs root; this is uid {os.geteuid()}")
        why["unprivileged user"] = (
            f"switching to a fresh uid needs root; this is uid {os.geteuid()}"
        )
    elif "setpriv" in missing:
        why["unprivileged user"] = "setpriv not found on PATH (util-linux)"
    return why


def _candidate_modes() -> list[_Mode]:
    """Isolation modes from strongest to weakest that this platform might support."""
    unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
    root = sys.platform == "linux" and os.geteuid() == 0
    modes = []
    if sys.platform == "linux" and unshare and setpriv:
        if root:
            modes.append(_Mode("namespaces", (unshare, *UNSHARE_FLAGS), True, True, setpriv))
        userns = (unshare, "--user", "--map-root-user", *UNSHARE_FLAGS)
        modes.append(_Mode("user namespace", userns, True, False, setpriv))
    if root and setpriv:
        modes.append(_Mode("unprivileged user", (), False, True, setpriv))
    return modes + [_Mode("none", (), False, False, setpriv if sys.platform == "linux" else None)]


def _describe(mode: _Mode, reason: str) -> Isolation:
    """The Isolation record of a mode that was found to work."""
    users = {
        "namespaces": "a fresh unprivileged uid/gid per run",
        "user namespace": "root inside a user namespace, without capabilities",
        "unprivileged user": "a fresh unprivileged uid/gid per run",
        "none": "the caller's own user",
    }
    return Isolation(
        mode=mode.name,
        namespaces=NAMESPACES if mode.prefix else (),
        private_root=mode.private_root,
        user=users[mode.name],
        no_new_privs=mode.setpriv is not None,
        process_limit=_limits_processes(mode),
        reason=reason,
    )


def _limits_processes(mode: _Mode) -> bool:
    """RLIMIT_NPROC counts per real uid and spares the host's root: it holds for a fresh uid,
    or in a user namespace started by another user."""
    return mode.drop_uid or (bool(mode.prefix) and os.geteuid() != 0)


def _works(mode: _Mode) -> str:
    """'' if `mode` runs a trivial program exactly, else what went wrong."""
    limits = SandboxLimits(timeout_s=PROBE_TIMEOUT_S, memory_mb=512, cpu_s=PROBE_TIMEOUT_S)
    result = _execute("print('ok')", {}, limits, mode)
    if result.ok and result.stdout == "ok\n":
        return ""
    return result.message or result.stderr.strip()[-200:] or f"status {result.status}"


def _reason(chosen: str, failures: dict[str, str]) -> str:
    """Why each mode stronger than `chosen` was not used, strongest first."""
    why = _unavailable() | {name: what for name, what in failures.items() if what}
    return "; ".join(f"{n} ({why[n]})" for n in MODES[: MODES.index(chosen)] if n in why)


def _probe() -> tuple[_Mode, Isolation]:
    """Try each mode with a trivial program; keep the first that runs it exactly."""
    failures = {}
    for mode in _candidate_modes():
        failures[mode.name] = _works(mode)
        if not failures[mode.name]:
            return mode, _describe(mode, _reason(mode.name, failures))
    raise RuntimeError("lib.sandbox cannot run Python at all: " + _reason("none", failures))


def _active_mode() -> _Mode:
    """The mode every run uses, probed once per process (with a warning if it is not full)."""
    global _ACTIVE
    if _ACTIVE is None:
        _ACTIVE = _probe()
        if not _ACTIVE[1].full:
            warnings.warn(_ACTIVE[1].describe(), RuntimeWarning, stacklevel=3)
    return _ACTIVE[0]


def isolation() -> Isolation:
    """The isolation layers sandboxed programs get on this machine (probed on first use)."""
    _active_mode()
    return _ACTIVE[1]


def modes() -> dict[str, Isolation]:
    """Every isolation mode that runs a program on this machine, strongest first, with its
    layers (each probed once per process); the first is the one `run_sandboxed` uses."""
    global _WORKING
    if _WORKING is None:
        failures, working = {}, {}
        for mode in _candidate_modes():
            failures[mode.name] = _works(mode)
            if not failures[mode.name]:
                working[mode.name] = (mode, _describe(mode, _reason(mode.name, failures)))
        _WORKING = working
    return {name: layers for name, (_, layers) in _WORKING.items()}


def _named_mode(name: str) -> _Mode:
    """The working mode called `name`, else a clear error listing those that work."""
    validate.text("mode", name)
    working = modes()
    if name not in MODES:
        raise ValueError(f"mode {name!r:.80} is not a sandbox mode; pass one of {tuple(working)}")
    if name not in working:
        why = _unavailable().get(name, "it failed to run a trivial program")
        raise ValueError(f"mode {name!r} does not work on this machine ({why}); pass one of "
                         f"{tuple(working)}")  # fmt: skip
    return _WORKING[name][0]


def stopped_by(result: SandboxResult) -> str:
    """The layer that stopped a hostile program, from its status (LAYER_OF_STATUS: 'tripwire',
    'CPU limit', ..., 'not stopped' for a normal exit) or its error number (LAYER_OF_ERRNO)."""
    if not isinstance(result, SandboxResult):
        raise TypeError(f"result must be a SandboxResult, got {type(result).__name__}")
    if result.status in LAYER_OF_STATUS:
        return LAYER_OF_STATUS[result.status]
    if result.message.startswith("FileSizeError"):
        return "file-size limit"
    number = re.search(r"\[Errno (\d+)\]", result.message)
    if number and int(number[1]) in LAYER_OF_ERRNO:
        return LAYER_OF_ERRNO[int(number[1])]
    return "error: " + truncate(result.message, 60)


# ------------------------------------------------------------------------------- one run


def _binds(mode: _Mode) -> list[str]:
    """Host paths the private root shows read-only: Python, shared libraries, setpriv."""
    paths = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache"]
    paths += ["/etc/localtime", sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    paths += [os.path.dirname(os.path.realpath(sys.executable))]
    paths += [mode.setpriv] if mode.setpriv else []
    kept: list[str] = []
    for path in sorted({os.path.abspath(p) for p in paths if os.path.lexists(p)}):
        if not any(path.startswith(k + "/") for k in kept):  # already inside a kept bind
            kept.append(path)
    return kept


def _execute(
    code: str, files: dict[str, Path], limits: SandboxLimits, mode: _Mode, tripwire: bool = True
) -> SandboxResult:
    """Stage `code` and `files` in a private temporary folder and run them under `mode`."""
    uid = UID_BASE + secrets.randbelow(UID_SPAN) if mode.drop_uid else None
    with tempfile.TemporaryDirectory(prefix="sandbox_", ignore_cleanup_errors=True) as tmp:
        ctl = Path(tmp)
        staging = ctl / "folder"
        staging.mkdir()
        os.mkdir(ctl / "root")
        for name, src in files.items():
            shutil.copyfile(src, staging / name)
        # surrogatepass: a str that is not valid Unicode still reaches Python, which reports it
        (staging / "main.py").write_bytes(code.encode("utf-8", "surrogatepass"))
        if uid is not None and not mode.private_root:
            os.chmod(ctl, 0o711)  # the program's user must reach its folder, not list ours
        inside = FOLDER if mode.private_root else str(staging)
        config = {
            "staging": str(staging),
            "root": str(ctl / "root"),
            "inside": inside,
            "private_root": mode.private_root,
            "binds": _binds(mode) if mode.private_root else [],
            "uid": uid,
            "gid": uid,
            "setpriv": mode.setpriv,
            "python": sys.executable,
            "guard": SITE + (TRIPWIRE if tripwire else "") + RUN_MAIN,
            "env": {**LAUNCH_ENV, **THREADS_ENV, "HOME": inside, "TMPDIR": inside},
            "folder_bytes": limits.folder_mb * MIB,
            "limits": {
                "as_bytes": limits.memory_mb * MIB,
                "cpu_s": max(1, int(-(-limits.cpu_s // 1))),  # the kernel counts whole seconds
                "fsize_bytes": limits.file_mb * MIB,
                "nofile": limits.max_open_files,
                "nproc": limits.max_processes if _limits_processes(mode) else None,
            },
        }
        return _launch(ctl, config, mode, limits)


def _launch(ctl: Path, config: dict, mode: _Mode, limits: SandboxLimits) -> SandboxResult:
    """Start the launcher, give the program timeout_s from the moment it starts, kill the
    launcher's whole group, and read what it left."""
    start = time.monotonic()
    try:
        proc, ready = _start_launcher(ctl, config, mode)
    except OSError as error:
        message = f"SandboxError: could not start the sandbox ({error})"
        return SandboxResult("error", "", "", None, 0.0, message)
    set_up = _wait_ready(ready, SETUP_TIMEOUT_S)
    timed_out = set_up and not _wait_exit(proc, limits.timeout_s)
    reaped = _kill_group(proc)
    wall = time.monotonic() - start
    stdout, stderr = _read_capped(ctl / "stdout"), _read_capped(ctl / "stderr")
    state = _read_status(ctl / "status")
    if not set_up:
        message = f"SandboxError: the sandbox took longer than {SETUP_TIMEOUT_S:g} s to start"
        return SandboxResult("error", stdout, stderr, None, wall, message)
    if timed_out:
        message = f"TimeoutError: the program ran longer than {limits.timeout_s:g} s and was killed"
        if not reaped:
            message += f" (its processes were still dying after {KILL_GRACE_S:g} s)"
        return SandboxResult("timeout", stdout, stderr, None, wall, message)
    if state is None or "setup_error" in state:
        why = state["setup_error"] if state else _read_capped(ctl / "log", 400).strip()
        message = f"SandboxError: the sandbox failed before the program ran ({why})"
        return SandboxResult("error", stdout, stderr, None, wall, message)
    returncode = state.get("exit", -state.get("signal", 0))
    status, message = _classify(state, stderr, limits)
    return SandboxResult(status, stdout, stderr, returncode, wall, message)


def _start_launcher(ctl: Path, config: dict, mode: _Mode) -> tuple[subprocess.Popen, int]:
    """Start the launcher in its own session, writing into files in `ctl`; return it and the
    pipe on which it reports that the program started."""
    ready, ready_w = os.pipe()
    launcher = [sys.executable, "-I", "-S", str(LAUNCHER), str(ctl / "launch.marshal")]
    try:
        with (
            open(ctl / "stdout", "wb") as out,
            open(ctl / "stderr", "wb") as err,
            open(ctl / "status", "wb") as status,
            open(ctl / "log", "wb") as log,
        ):
            fds = (out.fileno(), err.fileno(), ready_w)
            config |= {"stdout_fd": fds[0], "stderr_fd": fds[1], "ready_fd": ready_w}
            (ctl / "launch.marshal").write_bytes(marshal.dumps(config))
            proc = subprocess.Popen(
                [*mode.prefix, *launcher], stdin=subprocess.DEVNULL, stdout=status, stderr=log,
                cwd=ctl, env=LAUNCH_ENV, pass_fds=fds, start_new_session=True,
            )  # fmt: skip
    except OSError:
        os.close(ready)
        raise
    finally:
        os.close(ready_w)
    return proc, ready


def _wait_ready(ready: int, timeout: float) -> bool:
    """Wait up to `timeout` s for the launcher to start the program or to end (the pipe then
    reads "1" or nothing); close the pipe; False if neither happened in time."""
    try:
        poller = select.poll()
        poller.register(ready, select.POLLIN)
        return bool(poller.poll(timeout * 1000))
    finally:
        os.close(ready)


def _wait_exit(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait up to `timeout` s for `proc` to exit, without reaping it; True if it exited."""
    deadline = time.monotonic() + timeout
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3: poll instead
        pidfd = None
    if pidfd is not None:
        try:
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            return bool(poller.poll(max(0.0, deadline - time.monotonic()) * 1000))
        finally:
            os.close(pidfd)
    while time.monotonic() < deadline:
        if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        time.sleep(0.01)
    return False


def _kill_group(proc: subprocess.Popen) -> bool:
    """SIGKILL the launcher's process group (its unreaped leader keeps the group id ours),
    then reap the leader within KILL_GRACE_S; True if it was reaped."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=KILL_GRACE_S)
        return True
    except subprocess.TimeoutExpired:
        return False


def _read_capped(path: Path, limit: int = MAX_OUTPUT_CHARS) -> str:
    """Head and tail of a possibly huge output file, decoded with replacement (never raises)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size <= 4 * limit:  # a UTF-8 character has at most 4 bytes
            return truncate(f.read(size).decode("utf-8", "replace"), limit)
        head = f.read(2 * limit)
        f.seek(size - 2 * limit)
        tail = f.read(2 * limit)
    half = limit // 2
    head_text = head.decode("utf-8", "replace")[:half]
    tail_text = tail.decode("utf-8", "replace")[-half:]
    cut = size - len(head_text.encode()) - len(tail_text.encode())
    return f"{head_text}\n...[about {cut} bytes cut]...\n{tail_text}"


def _read_status(path: Path) -> dict | None:
    """The launcher's status line as a dict of str -> int/float/str, or None if garbled."""
    try:
        state = json.loads(path.read_bytes()[:4096].decode("utf-8", "replace"))
    except ValueError:
        return None
    if not isinstance(state, dict):
        return None
    ok_types = {"exit": int, "signal": int, "cpu_s": float | int, "setup_error": str}
    for key, value in state.items():
        if key not in ok_types or isinstance(value, bool) or not isinstance(value, ok_types[key]):
            return None
    return state if {"exit", "signal", "setup_error"} & state.keys() else None


def _classify(state: dict, stderr: str, limits: SandboxLimits) -> tuple[str, str]:
    """Map the program's exit (code or signal, CPU seconds) and stderr to (status, message)."""
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    sig, cpu = state.get("signal"), state.get("cpu_s", 0.0)
    if state.get("exit") == 0:
        return "ok", ""
    if "MemoryError" in stderr:
        return "memory", f"MemoryError: the program exceeded its {limits.memory_mb} MiB limit"
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= limits.cpu_s - 0.05):
        return "cpu", f"CPUTimeError: the program used more than {limits.cpu_s:g} s of CPU"
    if sig == signal.SIGXFSZ or f"[Errno {errno.EFBIG}]" in stderr:
        what = f"more than {limits.file_mb} MiB to a file or to its output"
        return "error", f"FileSizeError: the program wrote {what}"
    if "PermissionError: sandbox:" in stderr:
        return "blocked", last
    if sig is not None:
        names = {int(s): s.name for s in signal.Signals}  # real-time signals have no name
        return "error", f"the program was killed by {names.get(sig, f'signal {sig}')}"
    return "error", last or f"the program exited with status {state['exit']}"
