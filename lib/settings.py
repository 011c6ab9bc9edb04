"""The book's settings: every `REPRO_*` environment variable, read strictly in one place.

    from lib import settings
    seed = settings.get("REPRO_SEED")  # 0 when unset; an int in [0, SEED_MAX]

Rules, the same for every variable (the README's Settings section lists them):
- Names are exact and upper case. Any other variable whose name starts with `REPRO_` (in any
  case: `REPRO_SEEDS`, `repro_seed`, the retired `REPRO_DEVICE`) is an error, not ignored.
- Values are exact: no surrounding spaces, words in lower case, integers in ASCII digits only
  (`REPRO_SEED=²` or `٣` is an error, never read as 2 or 3) without leading zeros (`010` is an
  error, not 10 or octal 8), each within its range.
- Places are checked where they are used: REPRO_RESULTS_DIR by writing a file in it (or making
  it), REPRO_DASK_SCHEDULER's host as an IP address or DNS name; `tls://` is refused, since no
  setting supplies the certificates it needs.
- An empty value is an error; unset a variable to get its default.
- Every error names the variable, shows the value (cut to 80 characters) and says what to pass.

`get` checks the whole environment before it answers, so one bad setting stops a run at its
first read, whichever setting that read asks for; `check_environment()` does the same check up
front (the test suite runs it before collecting anything).
"""

from __future__ import annotations

import difflib
import errno
import ipaddress
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

PREFIX = "REPRO_"
SHOWN_CHARS = 80  # a value longer than this is cut in error messages
# SeedSequence reads its entropy as 32-bit words: a base seed below 2**32 is exactly one word, so
# lib.runs' entropy [base seed, crc32(experiment)] is always two words and no two pairs give the
# same entropy (a larger seed spills into a second word that can mimic another experiment's).
SEED_MAX = 2**32 - 1
WORKERS_MAX = 1024
# a scheme, a host (bracketed for IPv6) and a port; _host and _scheduler check each part
SCHEDULER = re.compile(r"(?P<protocol>[a-z]+)://(?P<host>\[[^\]]*\]|[^\]\[:/]+):(?P<port>[0-9]+)")
DNS_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")  # RFC 1123
HOST_MAX = 253  # characters in a DNS name
RETIRED = {
    "REPRO_DEVICE": "every chapter is sized for a CPU and its torch work runs on the CPU (there "
    "is no GPU setting); unset REPRO_DEVICE",
}


class SettingError(ValueError):
    """A REPRO_* environment variable that is unknown, malformed or out of range."""


class _Invalid(ValueError):
    """Raised by a parser: what is wrong with the value (the caller adds name and value)."""


@dataclass(frozen=True)
class Setting:
    """One environment variable: its default (a value, or None for absent) and its parser."""

    name: str
    default: object
    expects: str  # what to pass, e.g. "pass quick or full"
    parse: Callable[[str], object]


def _shown(value: str) -> str:
    """repr of `value`, cut to SHOWN_CHARS characters with the full length said."""
    if len(value) <= SHOWN_CHARS:
        return repr(value)
    return f"{value[:SHOWN_CHARS]!r}... ({len(value)} characters)"


def _integer(minimum: int, maximum: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        if not re.fullmatch(r"[0-9]+", value):
            raise _Invalid("is not a whole number written in ASCII digits")
        if value.startswith("0") and value != "0":  # 010 reads as octal 8 in some places
            raise _Invalid("has a leading zero (write the number without it)")
        if len(value) > len(str(maximum)):  # never handed to int(): it could be 10**5 digits
            raise _Invalid(f"is out of range [{minimum}, {maximum}]")
        if not minimum <= int(value) <= maximum:
            raise _Invalid(f"is out of range [{minimum}, {maximum}]")
        return int(value)

    return parse


def _word(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in choices:
            exact = " (values are exact: lower case, no spaces)"
            near = exact if value.strip().lower() in choices else ""
            raise _Invalid("is not one of " + ", ".join(choices) + near)
        return value

    return parse


def _host(host: str) -> None:
    """Check a scheduler host: [IPv6], dotted IPv4, or a DNS name (RFC 1123 labels)."""
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise _Invalid(f"has {host!r:.80}, which is not an IPv6 address in brackets") from None
    elif re.fullmatch(r"[0-9.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise _Invalid(f"has {host!r:.80}, which is not an IPv4 address (four numbers "
                           "0-255, no leading zeros)") from None  # fmt: skip
    elif len(host) > HOST_MAX:
        raise _Invalid(f"has a host name of {len(host)} characters (at most {HOST_MAX})")
    else:
        for label in host.split("."):
            if not DNS_LABEL.fullmatch(label):
                raise _Invalid(f"has a host name with the part {label!r:.80}, which is not a DNS "
                               "label (1 to 63 letters, digits or inner hyphens; no empty part "
                               "as in host..name)")  # fmt: skip


def _scheduler(value: str) -> str:
    match = SCHEDULER.fullmatch(value)
    if match is None or match["protocol"] not in ("tcp", "tls"):
        raise _Invalid("is not a Dask scheduler address tcp://host:port")
    if match["protocol"] == "tls":
        raise _Invalid("uses tls://, which needs TLS certificates and keys that no setting of "
                       "this book supplies; reach the cluster over tcp:// (a private network "
                       "or an SSH tunnel)")  # fmt: skip
    _host(match["host"])
    port = match["port"]
    if len(port) > 5 or port != str(int(port)) or not 1 <= int(port) <= 65535:
        raise _Invalid(f"has port {port!r}, not a number from 1 to 65535 without leading zeros")
    return value


def _absolute(value: str, why: str) -> Path:
    """`value` as a Path if it is an absolute path without NUL bytes, else _Invalid saying `why`
    a relative one would be wrong."""
    if "\0" in value or not Path(value).is_absolute():
        raise _Invalid(f"is not an absolute path ({why})")
    return Path(value)


def _folder(value: str) -> Path:
    path = _absolute(value, "chapters run in notebooks/, so a relative path would land there")
    try:
        _writable_folder(path)
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:
            raise _Invalid("is too long a path for this system (at most 255 bytes a name, "
                           "4095 in all)") from None  # fmt: skip
        raise _Invalid(f"cannot be used as a folder ({err.strerror or err})") from None
    return path


def _writable_folder(path: Path) -> None:
    """Check that `path` is a folder this user can write a file in, or can be created as one
    (its parent exists), by doing it once: os.access says yes to root even on /proc and /sys.
    Raises _Invalid, or the OSError that a chapter writing its summary there would meet."""
    if path.is_symlink() and not path.exists():
        raise _Invalid(f"is a symbolic link to {os.readlink(path)!r:.80}, which does not "
                       "resolve (a missing target or a loop)")  # fmt: skip
    if path.exists():
        if not path.is_dir():
            raise _Invalid("is a file, not a folder")
        try:
            fd, probe = tempfile.mkstemp(dir=path, prefix=".repro-probe-")
        except OSError as err:
            raise _Invalid(f"is a folder this user cannot write in ({err.strerror})") from None
        os.close(fd)
        os.unlink(probe)
        return
    if not path.parent.is_dir():
        raise _Invalid(f"does not exist and neither does its parent folder {str(path.parent)!r}")
    try:
        os.rmdir(tempfile.mkdtemp(dir=path.parent, prefix=".repro-probe-"))
    except OSError as err:
        raise _Invalid(f"cannot be created in {str(path.parent)!r} ({err.strerror})") from None


def _data_folder(value: str) -> Path:
    path = _absolute(value, "a relative one would depend on where the kernel starts")
    try:
        found = (path / "README.md").is_file()
    except OSError as err:  # an over-long name, a place that cannot be searched
        raise _Invalid(f"cannot be read as a folder ({err.strerror})") from None
    if not found:
        raise _Invalid("is not a data folder (it lacks README.md, the data's provenance file)")
    return path


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting("REPRO_SCALE", "quick", "pass quick or full", _word(("quick", "full"))),
        Setting(
            "REPRO_SEED",
            0,
            f"pass an integer from 0 to {SEED_MAX}, e.g. REPRO_SEED=1",
            _integer(0, SEED_MAX),
        ),  # fmt: skip
        Setting(
            "REPRO_WORKERS",
            None,
            f"pass an integer from 1 to {WORKERS_MAX}, e.g. 2",
            _integer(1, WORKERS_MAX),
        ),  # fmt: skip
        Setting("REPRO_BACKEND", "loky", "pass loky or dask", _word(("loky", "dask"))),
        Setting(
            "REPRO_DASK_SCHEDULER",
            None,
            "pass tcp://host:port, e.g. tcp://10.0.0.5:8786",
            _scheduler,
        ),  # fmt: skip
        Setting(
            "REPRO_RESULTS_DIR",
            None,
            "pass an absolute path to a writable folder (it is created if only its parent exists)",
            _folder,
        ),  # fmt: skip
        Setting("REPRO_SANDBOX_NONE", "refuse", "pass allow or refuse", _word(("refuse", "allow"))),
        Setting(
            "REPRO_DATA_DIR",
            None,
            "pass the absolute path of the book's data/ folder (a clone's or the course pack's)",
            _data_folder,
        ),  # fmt: skip
    )
}


def _unknown(name: str) -> str:
    """The error for a REPRO_* variable that is not a setting, with the likely intended one."""
    shown = name if len(name) <= SHOWN_CHARS else name[:SHOWN_CHARS] + "..."
    if name in RETIRED:
        return f"{name} is not a setting of this book: {RETIRED[name]}"
    near = difflib.get_close_matches(name.upper(), SETTINGS, n=1, cutoff=0.75)
    hint = f" (did you mean {near[0]}?)" if near else ""
    return (f"{shown} is not a setting of this book{hint}; unset it. The settings are "
            f"{', '.join(SETTINGS)}, with exact upper-case names")  # fmt: skip


def _problems(env: Mapping[str, str]) -> list[str]:
    """Every problem with the REPRO_* variables of `env`, one message each."""
    problems = []
    for name in sorted(n for n in env if n.upper().startswith(PREFIX)):
        if name not in SETTINGS:
            problems.append(_unknown(name))
            continue
        setting, value = SETTINGS[name], env[name]
        try:
            if value == "":
                raise _Invalid("is empty (unset it for the default)")
            setting.parse(value)
        except _Invalid as why:
            problems.append(f"{name}={_shown(value)} {why}; {setting.expects}")
    backend = env.get("REPRO_BACKEND", "loky")
    if backend == "dask" and "REPRO_DASK_SCHEDULER" not in env:
        problems.append("REPRO_BACKEND=dask needs REPRO_DASK_SCHEDULER=tcp://host:port, the "
                        "address of the cluster's scheduler")  # fmt: skip
    if backend == "loky" and "REPRO_DASK_SCHEDULER" in env:
        problems.append("REPRO_DASK_SCHEDULER is set but REPRO_BACKEND is not dask, so the "
                        "cluster would go unused; set REPRO_BACKEND=dask or unset "
                        "REPRO_DASK_SCHEDULER")  # fmt: skip
    return problems


def check_environment(env: Mapping[str, str] | None = None) -> None:
    """Raise SettingError listing every unknown, malformed or out-of-range REPRO_* variable."""
    problems = _problems(os.environ if env is None else env)
    if problems:
        raise SettingError("\n".join(problems))


def get(name: str):
    """The parsed value of the setting `name` (its default when unset), after checking every
    REPRO_* variable of the environment."""
    if name not in SETTINGS:
        raise KeyError(f"{name!r} is not a setting; the settings are {', '.join(SETTINGS)}")
    check_environment()
    value = os.environ.get(name)
    return SETTINGS[name].default if value is None else SETTINGS[name].parse(value)
