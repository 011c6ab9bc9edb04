"""Chapter summaries: the verdict rules, the file names, an atomic writer and a strict reader.

A summary is the JSON file a chapter writes when it finishes (`ClaimChecks.finish`); the
scorecard, the README test and the claims map read them back through `load_summaries`, which
checks every field and names the file and the field in every error, so a truncated file, a
typo in a verdict or a hand edit that contradicts the verdict rules never builds a wrong page.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import tempfile
import tomllib
import warnings
from pathlib import Path

from lib import settings

PROJECT = "scaling-reproduced-lib"  # the name in pyproject.toml that marks a checkout of the book
LIB_CHECKOUT = Path(__file__).resolve().parent.parent.parent  # the checkout lib is imported from


class CheckoutWarning(UserWarning):
    """This process runs in one checkout of the book while `lib` comes from another."""


def _is_checkout(folder: Path) -> bool:
    try:
        pyproject = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return pyproject.get("project", {}).get("name") == PROJECT


def checkout(start: Path | None = None) -> Path:
    """The checkout of the book that runs: the nearest folder at or above `start` (default: the
    working folder, notebooks/ for a chapter's kernel) whose pyproject.toml names this project,
    else the checkout `lib` is imported from. Warns if the two differ."""
    try:
        here = Path.cwd() if start is None else Path(start).resolve()
    except OSError:  # the working folder was deleted
        return LIB_CHECKOUT
    found = next((f for f in (here, *here.parents) if _is_checkout(f)), LIB_CHECKOUT)
    if found.resolve() != LIB_CHECKOUT:
        warnings.warn(f"this run is in the checkout {found}, but lib is imported from "
                      f"{LIB_CHECKOUT}: summaries go to {found / 'book' / 'results'}, and the "
                      f"code that runs is the other checkout's lib (pip install -e {found} to "
                      "run this one's)", CheckoutWarning, stacklevel=2)  # fmt: skip
    return found


# The results folder of the checkout this process started in (read once, when lib is imported)
RESULTS_DIR = checkout() / "book" / "results"
OUTCOMES = ("pass", "fail", "inconclusive")
CLAIM_VERDICTS = ("Reproduced", "Not reproduced", "Inconclusive", "Not tested")
VERDICTS = ("Reproduced", "Partly reproduced", "Not reproduced", "Inconclusive", "Not tested")
SCALES = ("quick", "full")


class SummaryError(ValueError):
    """A summary file that cannot be read or breaks the summary format (names file and field)."""


def claim_verdict(outcomes: list[str]) -> str:
    """A tested claim's verdict from its counting evidence: any fail, else any inconclusive."""
    if "fail" in outcomes:
        return "Not reproduced"
    return "Inconclusive" if "inconclusive" in outcomes else "Reproduced"


def chapter_verdict(central: list[str]) -> str:
    """The chapter verdict from its central claims' verdicts.

    Reproduced when all are; Partly reproduced when some are; otherwise Not reproduced if one
    is, else Inconclusive if one is, else (all Not tested) Not tested.
    """
    if not central:
        raise ValueError("no central claim is declared; mark one with central=True")
    if all(v == "Reproduced" for v in central):
        return "Reproduced"
    if "Reproduced" in central:
        return "Partly reproduced"
    for verdict in ("Not reproduced", "Inconclusive"):
        if verdict in central:
            return verdict
    return "Not tested"


def summary_name(chapter: str, run_scale: str, seed: int) -> str:
    """File name of a summary: '<chapter>[.full][.seed<k>].json'."""
    name = chapter + ("" if run_scale == "quick" else f".{run_scale}")
    return name + ("" if seed == 0 else f".seed{seed}") + ".json"


def results_dir(override: Path | None = None) -> Path:
    """Where summaries go: `override`, else REPRO_RESULTS_DIR (checked by lib.settings), else
    book/results of the checkout that runs (RESULTS_DIR)."""
    if override is not None:
        return Path(override)
    return settings.get("REPRO_RESULTS_DIR") or RESULTS_DIR


def write_atomically(path: Path, summary: dict) -> Path:
    """Write `summary` as JSON (mode 0644) through a temporary file and a rename: readers, and
    a run killed halfway, never leave half a file."""
    directory = path.parent
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"results folder {directory} is a file; point "
                                 "REPRO_RESULTS_DIR at a folder")  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    text = json.dumps(summary, indent=2, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


# ----------------------------------------------------------------------------- reading
def _need(where: str, record: dict, key: str, kind, choices=None):
    """record[key], checked to be of `kind` (and one of `choices`), else a SummaryError."""
    if not isinstance(record, dict):
        raise SummaryError(f"{where}: expected an object, got {type(record).__name__}")
    if key not in record:
        raise SummaryError(f"{where}: missing field {key!r}")
    value = record[key]
    bad_bool = kind is not bool and isinstance(value, bool)  # True is an int in Python
    if not isinstance(value, kind) or bad_bool:
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise SummaryError(f"{where}: field {key!r} must be {name}, got {value!r:.80}")
    if choices is not None and value not in choices:
        raise SummaryError(f"{where}: field {key!r} is {value!r:.80}; expected one of {choices}")
    return value


def _check_claim(where: str, claim: dict) -> None:
    _need(where, claim, "id", str)
    _need(where, claim, "text", str)
    central = _need(where, claim, "central", bool)
    _need(where, claim, "verdict", str, CLAIM_VERDICTS)
    premises = _need(where, claim, "premises", list)
    for j, premise in enumerate(premises):
        _need(f"{where}.premises[{j}]", premise, "premise", str)
        _need(f"{where}.premises[{j}]", premise, "measured", str)
        _need(f"{where}.premises[{j}]", premise, "met", bool)
    if central and not premises:
        raise SummaryError(f"{where}: a central claim must declare at least one premise")


def _check_check(where: str, check: dict) -> None:
    kind = _need(where, check, "kind", str, ("evidence", "audit"))
    _need(where, check, "claim", str)
    _need(where, check, "quantity", str)
    if kind == "audit":
        _need(where, check, "passed", bool)
        return
    _need(where, check, "outcome", str, OUTCOMES)
    _need(where, check, "counts", bool)
    control = _need(where, check, "control", dict)
    _need(f"{where}.control", control, "kind", str, ("negative", "positive"))
    _need(f"{where}.control", control, "what", str)
    _need(f"{where}.control", control, "outcome", str, ("pass", "fail"))


def validate_summary(summary, where: str) -> dict:
    """Check a summary's fields and its verdicts against the rules; `where` names the file."""
    if not isinstance(summary, dict):
        raise SummaryError(f"{where}: expected a JSON object, got {type(summary).__name__}")
    _need(where, summary, "chapter", str)
    _need(where, summary, "title", str)
    _need(where, summary, "scale", str, SCALES)
    _need(where, summary, "base_seed", int)
    verdict = _need(where, summary, "verdict", str, VERDICTS)
    _need(where, summary, "audits_passed", bool)
    claims = _need(where, summary, "claims", list)
    for i, claim in enumerate(claims):
        _check_claim(f"{where}: claims[{i}]", claim)
    for i, check in enumerate(_need(where, summary, "checks", list)):
        _check_check(f"{where}: checks[{i}]", check)
    for i, change in enumerate(_need(where, summary, "criteria_history", list)):
        for key in ("change", "before", "why"):
            _need(f"{where}: criteria_history[{i}]", change, key, str)
    try:
        expected = chapter_verdict([c["verdict"] for c in claims if c["central"]])
    except ValueError as err:
        raise SummaryError(f"{where}: {err}") from None
    if verdict != expected:
        raise SummaryError(f"{where}: field 'verdict' is {verdict!r} but its central claims "
                           f"give {expected!r}")  # fmt: skip
    return summary


# A summary is about 35 kB, 800 values and 5 levels deep; the limits leave room to grow and
# refuse, with the path, what no chapter writes (a 150 MB file, 100,000-deep nesting).
MAX_BYTES = 1 << 20
MAX_DEPTH = 16  # objects and lists nested in one another
MAX_VALUES = 50_000
MAX_DIGITS = 20  # the longest integer: seeds are below 2**64
NAME = re.compile(
    r"(?P<chapter>[0-9]{2}_[a-z0-9_]+)(?P<full>\.full)?(?:\.seed(?P<seed>[1-9][0-9]*))?\.json"
)
PATTERN = "[0-9][0-9]_*.json"  # what the loaders look at; every match must be a NAME
KINDS = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a named pipe (FIFO)",
         stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
         stat.S_IFSOCK: "a socket", stat.S_IFLNK: "a symbolic link"}  # fmt: skip


class _Refused(ValueError):
    """Raised while parsing: a JSON value no summary may hold (the caller adds the path)."""


def _why_not_opened(path: Path, err: OSError) -> str:
    """Why `path` could not be opened, in words (a dangling link and a loop said plainly)."""
    if err.errno == errno.ELOOP:
        return "a symbolic link loop"
    if path.is_symlink():
        return f"a symbolic link to {os.readlink(path)!r:.80}, which does not resolve"
    return err.strerror or str(err)


def _read_bytes(path: Path) -> bytes:
    """The bytes of `path` if it is a regular file of at most MAX_BYTES. It is opened without
    blocking and checked before reading, so a FIFO, device or folder is refused, not waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise SummaryError(f"{path}: cannot be opened ({_why_not_opened(path, err)})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = KINDS.get(stat.S_IFMT(mode), "not a file")
        raise SummaryError(f"{path}: is {kind}, not a regular file; remove it (a chapter "
                           "writes its summary as a file)")  # fmt: skip
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise SummaryError(f"{path}: is over {MAX_BYTES} bytes, far larger than any summary "
                           "(about 35 kB); rerun the chapter to rewrite it")  # fmt: skip
    return data


def _constant(name: str):
    """json hook for NaN, Infinity and -Infinity: refused (JSON has no such numbers)."""
    raise _Refused(f"holds {name}, which is not a JSON number (every number must be finite)")


def _integer(digits: str) -> int:
    """json hook for integers: at most MAX_DIGITS digits (int() of 5,000 digits fails bare)."""
    if len(digits.lstrip("-")) > MAX_DIGITS:
        raise _Refused(f"holds an integer of {len(digits)} characters (at most {MAX_DIGITS})")
    return int(digits)


def _finite(text: str) -> float:
    """json hook for decimals: finite only (1e999 would parse as infinity)."""
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"holds the number {text:.40}, which overflows to {value}")
    return value


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """json hook for objects: a key given twice is refused (json keeps the last silently)."""
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise _Refused(f"gives the key {key!r:.80} twice in one object")
        seen.add(key)
    return dict(pairs)


def _check_size(value) -> None:
    """Refuse JSON nested deeper than MAX_DEPTH, with more than MAX_VALUES values, or holding a
    string that is not valid Unicode (an escaped lone surrogate); walks without recursion."""
    stack, count = [(value, 0)], 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise _Refused(f"holds over {MAX_VALUES} values (about 800 make a summary)")
        if isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise _Refused(f"is nested over {MAX_DEPTH} levels deep (a summary needs 5)")
            children = list(item.keys()) + list(item.values()) if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise _Refused(f"holds a string with a lone surrogate: {item!r:.60}") from None


def _parse(path: Path, data: bytes):
    """The JSON value in `data`, refusing what json would accept but no summary holds."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SummaryError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    try:
        value = json.loads(text, parse_constant=_constant, parse_int=_integer,
                           parse_float=_finite, object_pairs_hook=_unique_keys)  # fmt: skip
        _check_size(value)
    except _Refused as why:
        raise SummaryError(f"{path}: {why}; rerun the chapter to rewrite it") from None
    except RecursionError:  # json's own guard, far below MAX_BYTES of brackets
        raise SummaryError(f"{path}: is nested over {MAX_DEPTH} levels deep (a summary "
                           "needs 5); rerun the chapter to rewrite it") from None  # fmt: skip
    except json.JSONDecodeError as err:
        what = "empty" if not text.strip() else f"not valid JSON ({err.msg}, line {err.lineno})"
        raise SummaryError(f"{path}: {what}; rerun the chapter to rewrite it") from None
    return value


def _check_name(path: Path, summary: dict) -> None:
    """A summary's chapter, scale and base seed must be the ones its file name says; else the
    file would take another chapter's row (both files are named)."""
    match = NAME.fullmatch(path.name)
    if match is None:
        return
    named, chapter = match["chapter"], summary["chapter"]
    if chapter != named:
        if NAME.fullmatch(chapter + ".json") is None:
            raise SummaryError(f"{path}: field 'chapter' is {chapter!r:.80}, not a chapter "
                               f"name; the file is named for {named}: rerun {named}")  # fmt: skip
        home = path.with_name(summary_name(chapter, summary["scale"], summary["base_seed"]))
        raise SummaryError(f"{path}: field 'chapter' is {chapter!r}, but the file is named for "
                           f"{named}; {chapter}'s summary is {home}, and this file would take "
                           f"its row. Rerun {named} to rewrite {path.name}")  # fmt: skip
    scale = "full" if match["full"] else "quick"
    if summary["scale"] != scale or summary["base_seed"] != int(match["seed"] or 0):
        raise SummaryError(f"{path}: scale {summary['scale']!r}, base seed "
                           f"{summary['base_seed']} do not match its name")  # fmt: skip


def read_summary(path: Path) -> dict:
    """Read and validate one summary file; every error names the file."""
    path = Path(path)
    summary = validate_summary(_parse(path, _read_bytes(path)), str(path))
    _check_name(path, summary)
    return summary


def _summary_files(directory: Path, number: str | None = None) -> dict[tuple, Path]:
    """The summary files in `directory` (of chapter `number` only, if given) by (chapter,
    scale, seed). Every file matching PATTERN must have a summary's name, and one chapter
    number one chapter: a stale `05_x_old.json` beside `05_x.json` is an error naming both."""
    files: dict[tuple, Path] = {}
    chapters: dict[str, Path] = {}  # chapter number -> the first file seen of it
    for path in sorted(directory.glob(PATTERN if number is None else f"{number}_*.json")):
        match = NAME.fullmatch(path.name)
        if match is None:
            raise SummaryError(f"{path}: is not named as a summary (NN_chapter[.full]"
                               "[.seed<k>].json, lower case); move it out of "
                               f"{directory} or delete it")  # fmt: skip
        first = chapters.setdefault(path.name[:2], path)
        other = NAME.fullmatch(first.name)["chapter"]
        if other != match["chapter"]:
            raise SummaryError(f"{path} and {first}: two chapters numbered {path.name[:2]} "
                               f"({match['chapter']} and {other}); one is a stale copy or a "
                               "renamed chapter: delete it")  # fmt: skip
        scale = "full" if match["full"] else "quick"
        files[(match["chapter"], scale, int(match["seed"] or 0))] = path
    return files


def load_summaries(results: Path | None = None, run_scale: str = "quick") -> list[dict]:
    """Every chapter summary of one scale at base seed 0, validated, sorted by chapter."""
    if run_scale not in SCALES:
        raise ValueError(f"run_scale must be one of {SCALES}, got {run_scale!r}")
    directory = Path(results) if results is not None else RESULTS_DIR
    files = _summary_files(directory)
    return [read_summary(path) for key, path in sorted(files.items()) if key[1:] == (run_scale, 0)]


def load_summary(chapter: str, run_scale: str, results: Path | None = None) -> dict | None:
    """The committed summary of `chapter` at `run_scale` (base seed 0), or None if not run."""
    if run_scale not in SCALES:
        raise ValueError(f"run_scale must be one of {SCALES}, got {run_scale!r}")
    if NAME.fullmatch(f"{chapter}.json") is None:
        raise ValueError(f"chapter must be a chapter's name such as '05_sgd_momentum', got "
                         f"{chapter!r:.80}")  # fmt: skip
    directory = Path(results) if results is not None else RESULTS_DIR
    path = _summary_files(directory, chapter[:2]).get((chapter, run_scale, 0))
    return None if path is None else read_summary(path)
