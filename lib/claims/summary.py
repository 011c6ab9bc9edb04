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
from lib.claims.records import PREMISE_ROLES, PREMISE_SOURCES, holds_phrase
from lib.claims.stats import fragile as stats_fragile
from lib.claims.stats import holds_for as stats_holds_for
from lib.claims.stats import judge as stats_judge

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
FORMAT = 2  # 2: controls name their alternative, premises their source, checks their holds_for


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


def _number(where: str, record: dict, key: str, *, optional: bool = False) -> float | None:
    """record[key] as a finite real number (None allowed when `optional`), else SummaryError."""
    value = _need(where, record, key, (int, float, type(None)) if optional else (int, float))
    if value is not None and not math.isfinite(value):
        raise SummaryError(f"{where}: field {key!r} must be a finite number, got {value!r}")
    return value


def _check_premise(where: str, premise: dict, fmt: int) -> None:
    _need(where, premise, "premise", str)
    _need(where, premise, "measured", str)
    _need(where, premise, "met", bool)
    if fmt >= 2:
        _number(where, premise, "value")
        _number(where, premise, "lo", optional=True)
        _number(where, premise, "hi", optional=True)
        _need(where, premise, "source", str, PREMISE_SOURCES)
        _need(where, premise, "role", str, PREMISE_ROLES)


def _check_claim(where: str, claim: dict, fmt: int) -> None:
    _need(where, claim, "id", str)
    _need(where, claim, "text", str)
    central = _need(where, claim, "central", bool)
    _need(where, claim, "verdict", str, CLAIM_VERDICTS)
    _need(where, claim, "untested", (str, type(None)))
    _need(where, claim, "deciding_check", (str, type(None)))
    premises = _need(where, claim, "premises", list)
    for j, premise in enumerate(premises):
        _check_premise(f"{where}.premises[{j}]", premise, fmt)
    if central and not premises:
        raise SummaryError(f"{where}: a central claim must declare at least one premise")
    if fmt >= 2 and central and not any(p["source"] == "measured" for p in premises):
        raise SummaryError(f"{where}: a central claim needs at least one measured premise "
                           "(design premises are settings)")  # fmt: skip
    if fmt >= 2:
        alternatives = _need(where, claim, "alternatives", dict)
        for key in ("ruled_out", "total"):
            _need(f"{where}.alternatives", alternatives, key, int)
        _need(where, claim, "fragile", bool)


def _bound(where: str, check: dict, key: str, infinity: float) -> float:
    """A criterion bound: a finite number, or null for an open side (+-infinity)."""
    value = _number(where, check, key, optional=True)
    return infinity if value is None else float(value)


def _check_control(where: str, control: dict, fmt: int) -> bool:
    """Check one judged control and return whether it discriminates (recomputed)."""
    kind = _need(where, control, "kind", str, ("negative", "positive"))
    _need(where, control, "what", str)
    outcome = _need(where, control, "outcome", str, ("pass", "fail"))
    if fmt >= 2 or "judged" in control:
        judged = _need(where, control, "judged", str, OUTCOMES)
        for key in ("estimate", "lo", "hi"):
            _number(where, control, key)
        expected = ("fail" if judged == "fail" else "pass") if kind == "negative" else (
            "pass" if judged == "pass" else "fail")  # fmt: skip
        if outcome != expected:
            raise SummaryError(f"{where}: field 'outcome' is {outcome!r} but a {kind} control "
                               f"judged {judged!r} reads {expected!r}")  # fmt: skip
    if fmt >= 2:
        alternative = _need(where, control, "alternative", str)
        if not alternative.strip():
            raise SummaryError(f"{where}: field 'alternative' is empty; name the explanation "
                               "the control rules out")  # fmt: skip
    return outcome == ("fail" if kind == "negative" else "pass")


def _check_evidence(where: str, check: dict, fmt: int) -> None:
    outcome = _need(where, check, "outcome", str, OUTCOMES)
    counts = _need(where, check, "counts", bool)
    lo, hi = _number(where, check, "lo"), _number(where, check, "hi")
    _number(where, check, "estimate")
    predicted = _number(where, check, "predicted")
    low, high = _bound(where, check, "low", -math.inf), _bound(where, check, "high", math.inf)
    expected = stats_judge(lo, hi, low, high, predicted)
    if outcome != expected:
        raise SummaryError(f"{where}: field 'outcome' is {outcome!r} but its interval "
                           f"[{lo}, {hi}] against the criterion gives {expected!r}")  # fmt: skip
    control = _need(where, check, "control", dict)
    _check_control(f"{where}.control", control, fmt)
    controls = check.get("controls", [control]) if fmt < 2 else _need(where, check, "controls",
                                                                       list)  # fmt: skip
    if not controls:
        raise SummaryError(f"{where}: an evidence check needs at least one control")
    discriminates = [_check_control(f"{where}.controls[{k}]", c, fmt)
                     for k, c in enumerate(controls)]  # fmt: skip
    if counts != all(discriminates):
        raise SummaryError(f"{where}: field 'counts' is {counts} but its controls give "
                           f"{all(discriminates)}")  # fmt: skip
    bound, a, b = stats_holds_for(lo, hi, low, high, predicted)
    if fmt < 2:  # written before thresholds were recorded: computed from the stored numbers
        estimate = float(check["estimate"])
        brittle = stats_fragile(bound, a, b, low, high, estimate)
        check.update(
            holds_for=[a, b],
            holds_bound=bound,
            fragile=brittle,
            holds_text=holds_phrase(outcome, bound, a, b, low, high, brittle),
        )
        return
    holds = _need(where, check, "holds_for", list)
    if len(holds) != 2 or any(x is not None and not isinstance(x, int | float) for x in holds):
        raise SummaryError(f"{where}: field 'holds_for' must be a pair of numbers or nulls")
    same = all((x is None and y is None) or (x is not None and y is not None and
                                             math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12))
               for x, y in zip(holds, (a, b), strict=True))  # fmt: skip
    if not same or check.get("holds_bound") != bound:
        raise SummaryError(f"{where}: field 'holds_for' is {holds} but its interval gives "
                           f"{[a, b]} on the {bound} bound")  # fmt: skip


def _check_check(where: str, check: dict, fmt: int = FORMAT) -> None:
    kind = _need(where, check, "kind", str, ("evidence", "audit"))
    _need(where, check, "claim", str)
    _need(where, check, "quantity", str)
    if kind == "audit":
        _need(where, check, "passed", bool)
        if fmt >= 2:
            _number(where, check, "ours")
        return
    _check_evidence(where, check, fmt)


def _recomputed_verdict(claim: dict, checks: list[dict]) -> str:
    """A claim's verdict from its premises and counting evidence, by the rules that wrote it."""
    evidence = [c for c in checks if c["kind"] == "evidence" and c["claim"] == claim["id"]]
    if any(not p["met"] for p in claim["premises"]) or not evidence:
        return "Not tested"
    counting = [c["outcome"] for c in evidence if c["counts"]]
    return claim_verdict(counting) if counting else "Not tested"


def validate_summary(summary, where: str) -> dict:
    """Check a summary's fields, then recompute every verdict from its checks and premises by
    the rules that wrote it: a hand edit that contradicts them is an error naming the file and
    the claim. `where` names the file. Summaries of format 1 (before alternatives, sources and
    thresholds were recorded) get `holds_for` computed from their stored intervals."""
    if not isinstance(summary, dict):
        raise SummaryError(f"{where}: expected a JSON object, got {type(summary).__name__}")
    fmt = summary.get("format", 1)
    if fmt not in (1, FORMAT) or isinstance(fmt, bool):
        raise SummaryError(f"{where}: field 'format' is {fmt!r}; expected 1 or {FORMAT}")
    _need(where, summary, "chapter", str)
    _need(where, summary, "title", str)
    _need(where, summary, "scale", str, SCALES)
    _need(where, summary, "base_seed", int)
    verdict = _need(where, summary, "verdict", str, VERDICTS)
    _need(where, summary, "audits_passed", bool)
    if "run_time_s" in summary:
        _number(where, summary, "run_time_s")
    context = summary.get("context", {})
    if not isinstance(context, dict):
        raise SummaryError(f"{where}: field 'context' must be an object")
    if "isolation" in context:
        isolation = context["isolation"]
        _need(f"{where}: context", context, "isolation", (dict, str))
        if isinstance(isolation, dict):
            _need(f"{where}: context.isolation", isolation, "mode", str)
            _need(f"{where}: context.isolation", isolation, "reason", (str, type(None)))
    claims = _need(where, summary, "claims", list)
    for i, claim in enumerate(claims):
        _check_claim(f"{where}: claims[{i}]", claim, fmt)
    ids = [c["id"] for c in claims]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise SummaryError(f"{where}: claim ids {duplicates} are declared more than once")
    checks = _need(where, summary, "checks", list)
    for i, check in enumerate(checks):
        _check_check(f"{where}: checks[{i}]", check, fmt)
        if check["claim"] not in ids:
            raise SummaryError(f"{where}: checks[{i}] belongs to claim {check['claim']!r}, "
                               f"which is not declared (claims: {ids})")  # fmt: skip
    quantities = [c["quantity"] for c in checks]
    repeated = sorted({q for q in quantities if quantities.count(q) > 1})
    if repeated:
        raise SummaryError(f"{where}: checks {repeated} appear more than once")
    for i, change in enumerate(_need(where, summary, "criteria_history", list)):
        for key in ("change", "before", "why"):
            _need(f"{where}: criteria_history[{i}]", change, key, str)
    for claim in claims:
        expected = _recomputed_verdict(claim, checks)
        if claim["verdict"] != expected:
            raise SummaryError(f"{where}: claim {claim['id']!r} reads {claim['verdict']!r} but "
                               f"its premises and checks give {expected!r}")  # fmt: skip
        decider = claim["deciding_check"]
        own = [c["quantity"] for c in checks if c["claim"] == claim["id"]]
        if decider is not None and decider not in own:
            raise SummaryError(f"{where}: claim {claim['id']!r} names deciding check "
                               f"{decider!r}, which is not one of its checks")  # fmt: skip
        if fmt >= 2:
            evidence = [c for c in checks if c["kind"] == "evidence" and c["claim"] == claim["id"]]
            total = sum(sum(k["kind"] == "negative" for k in c["controls"])
                        + (c.get("rival") is not None) for c in evidence)  # fmt: skip
            if claim["alternatives"]["total"] != total:
                raise SummaryError(f"{where}: claim {claim['id']!r} counts "
                                   f"{claim['alternatives']['total']} alternatives but its "
                                   f"checks hold {total}")  # fmt: skip
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
