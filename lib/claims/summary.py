"""Chapter summaries: the verdict rules, the file names, an atomic writer and a strict reader.

A summary is the JSON file a chapter writes when it finishes (`ClaimChecks.finish`); the
scorecard, the README test and the claims map read them back through `load_summaries`, which
checks every field and names the file and the field in every error, so a truncated file, a
typo in a verdict or a hand edit that contradicts the verdict rules never builds a wrong page.
"""

from __future__ import annotations

import json
import os
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


def read_summary(path: Path) -> dict:
    """Read and validate one summary file; every error names the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise SummaryError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    try:
        summary = json.loads(text)
    except json.JSONDecodeError as err:
        what = "empty" if not text.strip() else f"not valid JSON ({err.msg}, line {err.lineno})"
        raise SummaryError(f"{path}: {what}; rerun the chapter to rewrite it") from None
    return validate_summary(summary, str(path))


def load_summaries(results: Path | None = None, run_scale: str = "quick") -> list[dict]:
    """Every chapter summary of one scale at base seed 0, validated, sorted by chapter."""
    if run_scale not in SCALES:
        raise ValueError(f"run_scale must be one of {SCALES}, got {run_scale!r}")
    directory = Path(results) if results is not None else RESULTS_DIR
    summaries = []
    for path in sorted(directory.glob("[0-9][0-9]_*.json")):
        if path.name == summary_name(path.name.split(".")[0], run_scale, 0):
            summary = read_summary(path)
            if summary["scale"] != run_scale or summary["base_seed"] != 0:
                raise SummaryError(f"{path}: scale {summary['scale']!r}, base seed "
                                   f"{summary['base_seed']} do not match its name")  # fmt: skip
            summaries.append(summary)
    return summaries


def load_summary(chapter: str, run_scale: str, results: Path | None = None) -> dict | None:
    """The committed summary of `chapter` at `run_scale` (base seed 0), or None if not run."""
    directory = Path(results) if results is not None else RESULTS_DIR
    path = directory / summary_name(chapter, run_scale, 0)
    return read_summary(path) if path.exists() else None
