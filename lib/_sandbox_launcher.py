"""The sandbox's launcher: builds the program's world, starts the program, and cleans up after it.

`lib.sandbox` starts this file as `python -I -S _sandbox_launcher.py CONFIG`, usually under
`unshare --fork`, so that it is process 1 of a fresh PID namespace and root of a fresh mount
namespace. It is trusted code: standard library only, single-threaded, never imported by `lib`;
it imports little (the config comes as `marshal`, not JSON), as every run starts it afresh.

1. With `private_root`, it builds a new root file system on a small tmpfs: read-only bind mounts
   of the Python installation and the shared libraries, `/dev/null` and its kin, a fresh `/proc`
   of the new PID namespace, and `/sandbox`, a size-capped tmpfs holding `main.py` and the given
   files; then it pivots into that root and detaches the old one, so no other path exists.
2. It forks the program and tells the caller through a pipe, so that the program's wall clock
   starts then (a slow setup on a busy machine does not eat into it). The child sets its
   resource limits, points stdout/stderr at the files the caller opened, and execs `setpriv`
   (util-linux) to clear supplementary groups, switch to the unprivileged uid/gid (when one is
   given), drop every capability and set no_new_privs, before `setpriv` execs
   `python -I -S -B -u -c GUARD` (the package path, the audit-hook tripwire unless the caller
   left it out, then main.py).
3. It reaps until the program ends, then kills every process left: as process 1 of a PID
   namespace with `kill(-1, SIGKILL)`; otherwise, as a child subreaper, by killing its
   descendants until none remain.
4. It writes one JSON line to its stdout, the status file: {"exit": code} or {"signal": number},
   with the program's "cpu_s"; or {"setup_error": why} if a step of 1-2 failed, in which case
   the program never ran (the launcher fails closed: it never runs a program with fewer layers
   than it was asked for).
"""

import ctypes
import marshal
import os
import resource
import signal
import sys
import time

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 0x400, 0x800, 0x200000
MNT_DETACH = 2
PR_SET_CHILD_SUBREAPER = 36
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
# A remount must keep the per-mount flags the source mount has (a user namespace may not clear
# them), so they are read back with statvfs and carried over.
KEPT_FLAGS = (
    (os.ST_NOSUID, MS_NOSUID),
    (os.ST_NODEV, MS_NODEV),
    (os.ST_NOEXEC, MS_NOEXEC),
    (os.ST_NOATIME, MS_NOATIME),
    (os.ST_NODIRATIME, MS_NODIRATIME),
    (os.ST_RELATIME, MS_RELATIME),
)
DEVICES = ("null", "zero", "full", "random", "urandom")
REAP_DEADLINE_S = 5.0  # a SIGKILLed process dies at once unless stuck in the kernel

LIBC = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """A step of building the sandbox failed; the program must not run."""


def _libc(name: str, *args) -> None:
    """Call a libc function that returns 0 on success, raising SetupError with errno if not."""
    if getattr(LIBC, name)(*args) != 0:
        err = ctypes.get_errno()
        shown = ", ".join(str(a) for a in args if a is not None)
        raise SetupError(f"{name}({shown}) failed: {os.strerror(err)}")


def _c(path: str | None) -> bytes | None:
    return None if path is None else os.fsencode(path)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data=None) -> None:
    """mount(2) through libc (Python has no binding for it)."""
    _libc("mount", _c(source), _c(target), _c(fstype), ctypes.c_ulong(flags), _c(data))


def bind_readonly(source: str, target: str) -> None:
    """Bind `source` (a file or folder) onto `target` and make that mount read-only."""
    mount(source, target, None, MS_BIND)
    kept = os.statvfs(source).f_flag
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID
    flags |= sum(ms for st, ms in KEPT_FLAGS if kept & st)
    mount(None, target, None, flags)


def _mirror(root: str, path: str) -> str | None:
    """Create `path` under `root` as the host has it (a symlink, a folder or an empty file)."""
    inside = root + path
    os.makedirs(os.path.dirname(inside), exist_ok=True)
    if os.path.islink(path):
        os.symlink(os.readlink(path), inside)
        return None  # a symlink needs no mount; its target is mirrored on its own
    if os.path.isdir(path):
        os.makedirs(inside, exist_ok=True)
    else:
        open(inside, "w").close()
    return inside


def _copy(source: str, target: str) -> None:
    """Copy one file's bytes (shutil would cost more to import than the whole copy)."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)


def _fill_folder(staging: str, folder: str, uid: int | None, gid: int | None) -> None:
    """Copy main.py and the given files into the program's folder, owned by its user."""
    for name in os.listdir(staging):
        try:
            _copy(os.path.join(staging, name), os.path.join(folder, name))
        except OSError as err:
            raise SetupError(f"copying {name!r} into the sandbox folder failed: {err}") from None
        if uid is not None:
            os.chown(os.path.join(folder, name), uid, gid)


def build_private_root(cfg: dict) -> str:
    """Build the private root (see the module docstring), pivot into it; return the folder."""
    root, uid, gid = cfg["root"], cfg["uid"], cfg["gid"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount propagates back to the host
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755")
    for path in cfg["binds"]:
        inside = _mirror(root, path)
        if inside is not None:
            bind_readonly(path, inside)
    os.makedirs(root + "/dev")
    for name in DEVICES:  # bound read-only: usable, but their modes cannot be changed
        if os.path.exists("/dev/" + name):
            open(f"{root}/dev/{name}", "w").close()
            bind_readonly("/dev/" + name, f"{root}/dev/{name}")
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", f"{root}/dev/{name}")
    os.symlink("/proc/self/fd", f"{root}/dev/fd")
    os.makedirs(root + "/proc")
    try:  # the new PID namespace's own /proc; without it the program simply has no /proc
        mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except SetupError:
        pass
    folder = root + cfg["inside"]
    os.makedirs(folder)
    owner = f",uid={uid},gid={gid}" if uid is not None else ""
    size = f"size={cfg['folder_bytes']},nr_inodes=4096,mode=0700{owner}"
    mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, size)
    _fill_folder(cfg["staging"], folder, uid, gid)
    _pivot_into(root)
    return cfg["inside"]


def _pivot_into(root: str) -> None:
    """Make `root` the root of this mount namespace and detach the old root completely."""
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise SetupError(f"pivot_root: no syscall number known for {os.uname().machine}")
    os.makedirs(root + "/.old")
    _libc("syscall", ctypes.c_long(number), _c(root), _c(root + "/.old"))
    os.chdir("/")
    _libc("umount2", _c("/.old"), ctypes.c_int(MNT_DETACH))
    os.rmdir("/.old")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _set_limits(limits: dict) -> None:
    """Apply the kernel resource limits (inherited by setpriv and the program)."""
    resource.setrlimit(resource.RLIMIT_AS, (limits["as_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["fsize_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["nofile"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits["nproc"] is not None:  # counted per real uid: only meaningful for a fresh uid
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["nproc"],) * 2)


def program_argv(cfg: dict) -> list[str]:
    """setpriv (drop groups, uid, capabilities; no_new_privs) then python with the guard."""
    python = [cfg["python"], "-I", "-S", "-B", "-u", "-c", cfg["guard"]]
    if cfg["setpriv"] is None:
        return python
    drop = [cfg["setpriv"], "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]
    if cfg["uid"] is not None:
        drop += [f"--reuid={cfg['uid']}", f"--regid={cfg['gid']}", "--clear-groups"]
    return [*drop, "--", *python]


def start_program(cfg: dict, folder: str) -> int:
    """Fork the program's process; the child never returns (it execs or exits 127)."""
    pid = os.fork()
    if pid:
        os.close(cfg["stdout_fd"])
        os.close(cfg["stderr_fd"])
        os.write(cfg["ready_fd"], b"1")  # the caller starts the program's wall clock now
        os.close(cfg["ready_fd"])
        return pid
    try:
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):  # as the shell would leave them
            signal.signal(sig, signal.SIG_DFL)
        os.chdir(folder)
        os.dup2(cfg["stdout_fd"], 1)
        os.dup2(cfg["stderr_fd"], 2)
        os.close(cfg["stdout_fd"])
        os.close(cfg["stderr_fd"])
        _set_limits(cfg["limits"])
        argv = program_argv(cfg)
        os.execve(argv[0], argv, cfg["env"])
    except BaseException as err:  # noqa: BLE001 - whatever happened, the child must not return
        os.write(2, f"SandboxError: could not start the program: {err}\n".encode())
    os._exit(127)


def _children_of(pid: int) -> list[int]:
    """Processes whose parent is `pid`, from /proc (Linux)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue  # it exited meanwhile
            fields = stat[stat.rfind(b")") + 2 :].split()  # the name may contain spaces
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def kill_everything_left() -> None:
    """Kill every process the program left behind, and reap them (bounded by a deadline)."""
    deadline = time.monotonic() + REAP_DEADLINE_S
    while time.monotonic() < deadline:
        if os.getpid() == 1:  # process 1 of our PID namespace: -1 means everyone else in it
            targets = [-1]
        else:  # a child subreaper: orphaned descendants become our children
            targets = _children_of(os.getpid()) if sys.platform == "linux" else []
        for target in targets:
            try:
                os.kill(target, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                time.sleep(0.005)
        except ChildProcessError:
            return


def wait_for(pid: int) -> str:
    """Reap processes until `pid` ends; return its exit code or signal and CPU seconds as JSON."""
    while True:
        child, status, usage = os.wait4(-1, 0)
        if child == pid:
            cpu = round(usage.ru_utime + usage.ru_stime, 3)
            if os.WIFSIGNALED(status):
                return f'{{"signal": {os.WTERMSIG(status)}, "cpu_s": {cpu}}}'
            return f'{{"exit": {os.waitstatus_to_exitcode(status)}, "cpu_s": {cpu}}}'


def main(config_path: str) -> int:
    """Run the sandbox described by the marshal file `config_path`; write the status."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only SIGKILL from the caller ends us
    with open(config_path, "rb") as f:
        cfg = marshal.load(f)
    os.set_inheritable(cfg["ready_fd"], False)  # the program must not hold it
    try:
        if sys.platform == "linux" and os.getpid() != 1:
            _libc("prctl", ctypes.c_int(PR_SET_CHILD_SUBREAPER), ctypes.c_ulong(1))
        if cfg["private_root"]:
            folder = build_private_root(cfg)
        else:
            folder = cfg["staging"]
            if cfg["uid"] is not None:
                os.chown(folder, cfg["uid"], cfg["gid"])
                for name in os.listdir(folder):
                    os.chown(os.path.join(folder, name), cfg["uid"], cfg["gid"])
    except (SetupError, OSError) as err:
        import json  # only on this path: its imports cost more than the rest of the launcher

        os.write(1, json.dumps({"setup_error": str(err)}).encode() + b"\n")
        return 1
    status = wait_for(start_program(cfg, folder))
    kill_everything_left()
    os.write(1, status.encode() + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
