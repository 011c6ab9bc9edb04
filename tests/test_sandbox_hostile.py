"""Hostile programs against lib.sandbox, each watched from outside the sandbox.

Most attacks first switch the tripwire off (UNHOOK walks back the frames to the audit hook's
globals and empties its rules) and prove they did, so what holds is the operating system.
Observers live in this process: a world-writable canary folder with secrets, listening sockets,
victim processes, /proc as the host sees it, and the caller's own memory and clock.

The containment attacks run under every namespace mode this machine supports (as root, both
"namespaces" and "user namespace"); the caller-safety attacks run under the default mode and the
weakest fallback (no namespaces, the caller's own user). Programs that should finish get
generous wall clocks, so a loaded machine slows the suite down but cannot fail it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from textwrap import dedent

import pytest

from lib import sandbox as S

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the attacks use Linux /proc")

UNHOOK = """\
import sys
_f = sys._getframe()
while "_hook" not in _f.f_globals:
    _f = _f.f_back
for _name in ("BLOCKED_MODULES", "BLOCKED_EVENTS", "PATH_EVENTS", "LIST_EVENTS"):
    _f.f_globals[_name].clear()
_f.f_globals["_inside"] = lambda path, roots: True
import socket, subprocess, ctypes  # each refused by the tripwire unless it is off
print("UNHOOKED", flush=True)
"""
RELAXED = S.SandboxLimits(timeout_s=30.0, memory_mb=512, cpu_s=10)


def _working_modes() -> dict[str, S._Mode]:
    """Every isolation mode that runs a trivial program on this machine, strongest first."""
    working = {}
    for mode in S._candidate_modes():
        result = S._execute("print('ok')", {}, S.SandboxLimits(timeout_s=60, cpu_s=30), mode)
        if result.ok and result.stdout == "ok\n":
            working[mode.name] = mode
    return working


MODES = _working_modes()
NS_MODES = [name for name, mode in MODES.items() if S._describe(mode, "").full]
needs_namespaces = pytest.mark.skipif(
    not NS_MODES, reason="no namespaces here: lib.sandbox promises no containment without them"
)


@pytest.fixture(params=NS_MODES or ["none"])
def ns_mode(request) -> S._Mode:
    """An isolation mode with namespaces and a private root."""
    return MODES[request.param]


@pytest.fixture(params=sorted({next(iter(MODES)), "none"}, key=list(MODES).index))
def any_mode(request) -> S._Mode:
    """The strongest mode that works here (the default) and the weakest fallback."""
    return MODES[request.param]


def attack(body: str, unhook: bool = True, **constants) -> str:
    """A program: UNHOOK (optionally), NAME = value lines, then the dedented `body`."""
    lines = "".join(f"{name} = {value!r}\n" for name, value in constants.items())
    return (UNHOOK if unhook else "") + lines + dedent(body)


def run(code: str, mode: S._Mode, limits: S.SandboxLimits = RELAXED, files=None):
    """Run `code` under `mode` (bypassing the probe, which picks only the strongest)."""
    return S._execute(code, files or {}, limits, mode)


def skeleton_folders(mode: S._Mode) -> set[str]:
    """Folders the private root holds only as empty parents of a read-only bind (e.g. /tmp and
    /tmp/clone when the project's .venv, which the sandbox must show, lives in /tmp/clone)."""
    folders = set()
    for path in S._binds(mode):
        while (path := os.path.dirname(path)) != "/":
            folders.add(path)
    return folders


def assert_unhooked(result: S.SandboxResult) -> None:
    assert "UNHOOKED" in result.stdout, (result.message, result.stderr)


def processes_named(comm: str) -> list[int]:
    """Live host processes whose name (/proc/PID/comm) is `comm`; zombies are dead, skipped."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()  # PID (NAME) STATE ...
        except OSError:
            continue  # it has just exited
        name, rest = stat[stat.index(b"(") + 1 : stat.rindex(b")")], stat[stat.rindex(b")") :]
        if name.decode(errors="replace") == comm and rest.split()[1] != b"Z":
            found.append(int(entry))
    return found


def marker() -> str:
    """A unique process name (at most 15 characters, the kernel's limit)."""
    return f"sbx{secrets.token_hex(5)}"


NAME_ME = "open('/proc/self/comm', 'w').write(MARK)"  # a program line: rename this process


def snapshot(folder: Path) -> dict:
    """Names, modes, owners and contents of a folder's entries (symlinks not followed)."""
    out = {}
    for entry in sorted(folder.iterdir()):
        st = entry.lstat()
        body = entry.read_bytes() if entry.is_file() and not entry.is_symlink() else None
        out[entry.name] = (st.st_mode, st.st_uid, st.st_gid, body)
    return out


@pytest.fixture
def canary():
    """A world-writable folder in /tmp with a file anyone may read and one only root may;
    the test fails if the folder changed in any way."""
    folder = Path(tempfile.mkdtemp(prefix="sbx_canary_", dir="/tmp"))
    folder.chmod(0o777)
    token = secrets.token_hex(8)
    (folder / "public.txt").write_text(f"public {token}\n" + "x" * 12345)
    (folder / "public.txt").chmod(0o666)
    (folder / "root_only.txt").write_text(f"root only {token}\n")
    (folder / "root_only.txt").chmod(0o600)
    before = snapshot(folder)
    yield folder, token
    after = snapshot(folder)
    shutil.rmtree(folder, ignore_errors=True)
    assert after == before, "the canary folder changed"


@pytest.fixture
def victims():
    """Two unrelated processes the sandbox must not touch; one has a secret in argv and env."""
    token = secrets.token_hex(8)
    plain = subprocess.Popen(["sleep", "120"])
    secret = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", token], env={"SBX_SECRET": token}
    )
    yield plain, secret, token
    for proc in (plain, secret):
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def listeners():
    """A TCP and a UDP socket on every host address and an abstract Unix socket; the test
    fails if anything reached them."""
    tcp = socket.create_server(("0.0.0.0", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("0.0.0.0", 0))
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = f"\0sbx-{secrets.token_hex(8)}"
    unix.bind(name)
    unix.listen()
    for s in (tcp, udp, unix):
        s.setblocking(False)
    yield tcp.getsockname()[1], udp.getsockname()[1], name
    for s, receive in ((tcp, tcp.accept), (udp, lambda: udp.recv(100)), (unix, unix.accept)):
        with pytest.raises(BlockingIOError):  # nothing arrived
            receive()
        s.close()


def host_addresses() -> list[str]:
    """127.0.0.1 and this host's other IPv4 addresses."""
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10).stdout
    return ["127.0.0.1", *[a for a in out.split() if "." in a]]


# ------------------------------------------------------------------ files and the file system


@needs_namespaces
def test_tripwire_switched_off_then_root_only_files_stay_unread(ns_mode, canary):
    folder, token = canary
    readable = os.access("/etc/shadow", os.R_OK)  # only when this test runs as root
    shadow = Path("/etc/shadow").read_text().splitlines()[0] if readable else ""
    paths = ["/etc/shadow", str(folder / "root_only.txt"), str(folder / "public.txt")]
    paths += ["/proc/1/environ", "/proc/1/root/etc/shadow", "/proc/1/cwd/launch.json"]
    body = """
        for p in PATHS:
            try:
                print(open(p).read())
            except OSError as e:
                print(p, e)
    """
    result = run(attack(body, PATHS=paths), ns_mode)
    assert_unhooked(result)
    assert token not in result.stdout + result.stderr
    assert not shadow or shadow not in result.stdout + result.stderr


@needs_namespaces
def test_tripwire_switched_off_then_writes_outside_change_nothing(ns_mode, canary):
    folder, token = canary
    stray = Path("/tmp") / f"sbx_stray_{token}"
    writes = [str(folder / "evil.txt"), str(stray), "/evil.txt", "/usr/evil.txt"]
    writes += ["/dev/shm/evil.txt", "/dev/evil"]
    changes = [str(folder / "public.txt"), "/dev/null", "/usr"]
    body = """
        import os
        for p in WRITES:
            try:
                open(p, "w").write("x")
                print("WROTE", p)
            except OSError as e:
                print(p, e)
        for p in CHANGES:
            for change in (lambda: os.chmod(p, 0), lambda: os.unlink(p)):
                try:
                    change()
                    print("CHANGED", p)
                except OSError as e:
                    print(p, e)
    """
    result = run(attack(body, WRITES=writes, CHANGES=changes), ns_mode)
    assert_unhooked(result)
    assert "WROTE" not in result.stdout and "CHANGED" not in result.stdout, result.stdout
    assert not stray.exists() and os.stat("/dev/null").st_mode & 0o777 == 0o666


@needs_namespaces
def test_patched_realpath_gets_past_the_tripwire_but_not_the_file_system(ns_mode, canary):
    folder, _ = canary
    body = """
        import os.path
        os.path.realpath = lambda p: os.getcwd() + "/x"  # the tripwire now thinks all is inside
        open(TARGET, "w").write("x")
    """
    result = run(attack(body, unhook=False, TARGET=str(folder / "evil.txt")), ns_mode)
    assert "PermissionError: sandbox:" not in result.stderr  # the tripwire was fooled
    assert result.status == "error" and "No such file or directory" in result.message


@needs_namespaces
def test_dir_fd_through_the_python_install_and_a_symlinked_folder(ns_mode, canary):
    folder, _ = canary
    tripwire_on = """
        import os, sys
        fd = os.open(sys.prefix, os.O_RDONLY)  # reading the install is allowed
        try:  # the tripwire sees a relative name, not the folder dir_fd points at
            os.open("evil_dir_fd", os.O_CREAT | os.O_WRONLY, dir_fd=fd)
            print("WROTE prefix")
        except OSError as e:
            print(e)
    """
    tripwire_off = """
        os.symlink(CANARY, "link")
        fd = os.open("link", os.O_RDONLY)
        os.open("evil", os.O_CREAT | os.O_WRONLY, dir_fd=fd)
        print("WROTE canary")
    """
    code = attack(tripwire_on, unhook=False) + attack(tripwire_off, CANARY=str(folder))
    result = run(code, ns_mode)
    assert_unhooked(result)
    assert "WROTE" not in result.stdout and not (Path(sys.prefix) / "evil_dir_fd").exists()
    assert result.stdout.count("Read-only file system") == 1  # the install is mounted read-only
    assert "No such file or directory" in result.message  # the canary is nowhere to be found


@needs_namespaces
def test_mknod_and_mkfifo_outside_create_nothing(ns_mode, canary):
    folder, _ = canary
    body = """
        import os, stat
        for p in PATHS:  # the tripwire has no rule for these calls: it stays on
            for make in (lambda: os.mkfifo(p),
                         lambda: os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3))):
                try:
                    make()
                    print("MADE", p)
                except OSError as e:
                    print(p, e)
    """
    paths = [str(folder / "fifo"), str(folder / "null"), "/fifo", "/usr/fifo"]
    result = run(attack(body, unhook=False, PATHS=paths), ns_mode)
    assert result.ok and "MADE" not in result.stdout, result.stdout + result.stderr


@needs_namespaces
def test_os_stat_learns_nothing_about_host_files(ns_mode, canary):
    folder, _ = canary
    body = """
        import os
        for p in PATHS:  # os.stat raises no audit event: the tripwire cannot see it
            try:
                print("SIZE", p, os.stat(p).st_size)
            except OSError as e:
                print(p, e)
    """
    paths = [str(folder / "public.txt"), str(folder), __file__, "/etc/shadow", "/tmp", "/home"]
    result = run(attack(body, unhook=False, PATHS=paths), ns_mode)
    skeleton = skeleton_folders(ns_mode)  # these exist inside, empty but for the bind below them
    seen = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("SIZE")]
    assert result.ok and set(seen) <= skeleton, result.stdout


@needs_namespaces
def test_parents_of_a_bind_show_only_the_path_to_it(ns_mode, canary):
    folder, token = canary  # a host folder in /tmp, beside any clone of the project there
    skeleton = sorted(skeleton_folders(ns_mode))
    body = """
        import os
        for d in FOLDERS:
            print("LIST", d, sorted(os.listdir(d)))
    """
    result = run(attack(body, FOLDERS=skeleton), ns_mode)
    assert_unhooked(result)
    below = S._binds(ns_mode) + skeleton
    for d in skeleton:
        names = sorted({p[len(d) + 1 :].split("/")[0] for p in below if p.startswith(d + "/")})
        assert f"LIST {d} {names}" in result.stdout, result.stdout
    assert folder.name not in result.stdout and token not in result.stdout


@needs_namespaces
def test_the_folder_is_a_capped_tmpfs_and_the_given_files_are_copies(ns_mode, tmp_path):
    src = tmp_path / "table.csv"
    src.write_text("a,b\n1,2\n")
    body = """
        open("table.csv", "w").write("overwritten")
        n = 0
        try:
            while True:
                with open(f"fill{n}", "wb") as f:
                    f.write(b"x" * 2 ** 20)
                n += 1
        except OSError as e:
            print("FULL", n, e.errno)
    """
    limits = S.SandboxLimits(timeout_s=30, folder_mb=4)
    result = run(attack(body, unhook=False), ns_mode, limits, {"table.csv": src})
    assert result.ok and src.read_text() == "a,b\n1,2\n"
    full, written, err = result.stdout.split()
    assert full == "FULL" and int(written) < 4 and int(err) == 28  # ENOSPC within folder_mb


@needs_namespaces
def test_the_program_has_no_privileges_and_its_limits_hold(ns_mode):
    body = """
        import resource
        status = dict(line.split(":\\t") for line in open("/proc/self/status").read().splitlines())
        print("UID", status["Uid"].split()[0])
        for key in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs"):
            print(key, status[key])
        print("CORE", resource.getrlimit(resource.RLIMIT_CORE))
        files = []
        try:
            while True:
                files.append(open("main.py"))
        except OSError as e:
            print("OPENED", len(files), e.errno)
    """
    limits = S.SandboxLimits(timeout_s=30, max_open_files=32)
    result = run(attack(body), ns_mode, limits)  # the tripwire would refuse /proc
    assert_unhooked(result)
    out = dict(line.split(" ", 1) for line in result.stdout.splitlines()[1:])
    assert result.ok and out["NoNewPrivs"] == "1" and out["CORE"] == "(0, 0)"
    assert all(int(out[key], 16) == 0 for key in ("CapEff", "CapPrm", "CapBnd", "CapAmb"))
    opened, err = map(int, out["OPENED"].split())
    assert opened < limits.max_open_files and err == 24  # EMFILE
    if ns_mode.drop_uid:
        assert S.UID_BASE <= int(out["UID"]) < S.UID_BASE + S.UID_SPAN


# ---------------------------------------------------------------------------- the network


@needs_namespaces
def test_no_connection_reaches_a_local_listener(ns_mode, listeners):
    tcp_port, udp_port, unix_name = listeners
    body = """
        for host in HOSTS:
            try:
                socket.create_connection((host, TCP_PORT), timeout=2)
                print("CONNECTED", host)
            except OSError as e:
                print(host, e)
            try:
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", (host, UDP_PORT))
            except OSError as e:
                print(host, e)
        try:
            socket.socket(socket.AF_UNIX).connect(UNIX_NAME)
            print("CONNECTED unix")
        except OSError as e:
            print("unix", e)
        print(socket.if_nameindex())
    """
    constants = {"HOSTS": host_addresses(), "TCP_PORT": tcp_port, "UDP_PORT": udp_port}
    result = run(attack(body, UNIX_NAME=unix_name, **constants), ns_mode)
    assert_unhooked(result)
    assert "CONNECTED" not in result.stdout and "[(1, 'lo')]" in result.stdout, result.stdout


# ----------------------------------------------------------------------- other processes


@needs_namespaces
def test_pidfd_and_kill_cannot_reach_a_victim_process(ns_mode, victims):
    plain, secret, _ = victims
    body = """
        import os, signal
        for pid in PIDS:
            try:
                signal.pidfd_send_signal(os.pidfd_open(pid), signal.SIGKILL)
                print("SIGNALLED", pid)
            except OSError as e:
                print(pid, e)
            try:
                os.kill(pid, signal.SIGKILL)
                print("KILLED", pid)
            except OSError as e:
                print(pid, e)
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
        if os.getpid() == 2 and len(pids) <= 3:  # never fire at a whole host by mistake
            try:
                os.kill(-1, signal.SIGKILL)  # everyone it may signal, except itself
                print("KILLED everyone")
            except OSError as e:
                print(-1, e)
        else:
            print("NOT ISOLATED", pids)
    """
    result = run(attack(body, PIDS=[plain.pid, secret.pid, os.getpid()]), ns_mode)
    assert_unhooked(result)
    assert result.ok and "NOT ISOLATED" not in result.stdout  # and the launcher survived
    assert "SIGNALLED" not in result.stdout and "KILLED" not in result.stdout, result.stdout
    assert plain.poll() is None and secret.poll() is None


@needs_namespaces
def test_no_other_process_can_be_seen(ns_mode, victims):
    _, secret, token = victims
    body = """
        import os
        for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
            for what in ("cmdline", "environ"):
                try:
                    print(pid, what, open(f"/proc/{pid}/{what}", "rb").read())
                except OSError as e:
                    print(pid, what, e)
        print("VICTIM VISIBLE", os.path.exists(f"/proc/{VICTIM}"))
    """
    result = run(attack(body, VICTIM=secret.pid), ns_mode)
    assert_unhooked(result)
    assert token not in result.stdout and "VICTIM VISIBLE False" in result.stdout


@needs_namespaces
def test_the_launcher_and_its_status_are_out_of_reach(ns_mode):
    body = """
        import os
        for fd in range(8):  # forge a clean exit in the launcher's status file
            try:
                open(f"/proc/1/fd/{fd}", "w").write('{"exit": 0}\\n')
                print("FORGED", fd)
            except OSError as e:
                print(fd, e)
        raise SystemExit(3)
    """
    result = run(attack(body), ns_mode)
    assert_unhooked(result)
    assert "FORGED" not in result.stdout and result.returncode == 3 and result.status == "error"


@needs_namespaces
def test_a_new_user_namespace_reveals_nothing_of_the_host(ns_mode, canary):
    folder, token = canary
    hostname = socket.gethostname()
    body = """
        import os
        libc = ctypes.CDLL(None, use_errno=True)
        CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWUTS = 0x10000000, 0x00020000, 0x04000000
        print("unshare", libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWUTS))
        for target in (b"/", b"/sandbox", b"/proc", b"/usr"):  # uncover what lies beneath
            print("umount", target, libc.umount2(target, 2), ctypes.get_errno())
        print("sethostname", libc.sethostname(b"pwned", 5))
        print("ROOT", sorted(os.listdir("/")))
        for p in PATHS:
            try:
                print(open(p).read())
            except OSError as e:
                print(p, e)
    """
    result = run(attack(body, PATHS=[str(folder / "public.txt"), "/etc/shadow"]), ns_mode)
    assert_unhooked(result)
    assert token not in result.stdout and socket.gethostname() == hostname
    root = next(line for line in result.stdout.splitlines() if line.startswith("ROOT"))
    skeleton = {path.split("/")[1] for path in skeleton_folders(ns_mode)}
    assert all(f"'{name}'" not in root for name in {"tmp", "home"} - skeleton), root


@needs_namespaces
def test_a_bounded_fork_loop_is_capped_and_fully_killed(ns_mode):
    mark, seen, done = marker(), [0], threading.Event()
    body = f"""
        import os, time
        forked = 0
        for i in range(50):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                {NAME_ME}
                time.sleep(60)
                os._exit(0)
            forked += 1
        print("forked", forked, flush=True)
        time.sleep(1)
    """

    def watch() -> None:  # the host's view: how many of them exist at once
        while not done.is_set():
            seen[0] = max(seen[0], len(processes_named(mark)))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    limits = S.SandboxLimits(timeout_s=30, cpu_s=10, max_processes=8)
    try:
        result = run(attack(body, MARK=mark), ns_mode, limits)
    finally:
        done.set()
        watcher.join()
    assert_unhooked(result)
    assert result.ok and processes_named(mark) == []  # nothing outlives the run
    if S._describe(ns_mode, "").process_limit:
        forked = int(result.stdout.split("forked")[1].split()[0])
        assert forked < limits.max_processes and seen[0] < limits.max_processes


# --------------------------------------------------------------------------- the caller


def test_an_endless_print_loop_costs_the_caller_no_memory_and_little_time(any_mode):
    limits = S.SandboxLimits(timeout_s=20, cpu_s=10, file_mb=2)
    tracemalloc.start()
    try:
        start = time.monotonic()
        result = run("while True:\n    print('spam ' * 2000)", any_mode, limits)
        wall = time.monotonic() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.status == "error" and "FileSizeError" in result.message, result.message
    assert peak < 1024 * 1024 and wall < limits.timeout_s  # the 2 MiB stayed on disk
    assert len(result.stdout) < 2 * S.MAX_OUTPUT_CHARS and "bytes cut" in result.stdout


def test_invalid_utf8_output_never_raises(any_mode):
    body = """
        import sys
        sys.stdout.buffer.write(b"ok \\xff\\xfe \\xc3\\x28 end\\n")
        sys.stderr.buffer.write(b"\\x80" * 5000 + b"\\n")
    """
    result = run(attack(body, unhook=False), any_mode)
    assert result.ok and result.stdout.startswith("ok \ufffd") and "\ufffd" in result.stderr


def test_a_setsid_child_holding_the_output_neither_blocks_nor_outlives(any_mode):
    body = f"""
        import os, time
        if os.fork() == 0:
            os.setsid()  # leave the process group; keep stdout and stderr open
            if os.fork() == 0:
                {NAME_ME}
                time.sleep(60)
            os._exit(0)
        time.sleep(0.5)
        print("parent done")
    """
    mark, start = marker(), time.monotonic()
    result = run(attack(body, MARK=mark), any_mode)
    assert result.ok and "parent done" in result.stdout, result.stderr
    assert time.monotonic() - start < 20 and processes_named(mark) == []


def test_a_background_child_dies_with_a_normal_exit(any_mode, tmp_path):
    tmp_path.chmod(0o777)
    body = f"""
        import os, time
        if os.fork() == 0:
            {NAME_ME}
            time.sleep(0.3)
            open(LATE, "w").write("still here")
            os._exit(0)
    """
    mark, late = marker(), tmp_path / "late.txt"
    result = run(attack(body, MARK=mark, LATE=str(late)), any_mode)
    assert result.ok and processes_named(mark) == []
    time.sleep(0.6)
    assert not late.exists()


def test_a_printer_that_ignores_sigterm_and_errors_is_killed_at_the_timeout(any_mode):
    body = f"""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        {NAME_ME}
        while True:
            try:
                print("x" * 100)
            except OSError:  # past the file-size limit: carry on regardless
                time.sleep(0.01)
    """
    mark, limits = marker(), S.SandboxLimits(timeout_s=2, cpu_s=10, file_mb=1)
    start = time.monotonic()
    result = run(attack(body, MARK=mark), any_mode, limits)
    wall = time.monotonic() - start
    assert result.status == "timeout" and "2 s" in result.message
    assert wall < 2 + S.KILL_GRACE_S and processes_named(mark) == []


def test_the_public_entry_point_uses_the_strongest_mode():
    assert S.isolation().mode == next(iter(MODES))
    assert S.run_sandboxed("print(1)", limits=RELAXED).stdout == "1\n"
    if os.geteuid() == 0 and NS_MODES:
        assert S.isolation().full and S.isolation().user.startswith("a fresh unprivileged")
