"""Claim checks, verdicts and the machine-readable chapter summaries behind the scorecard.

A chapter records each check as quantity | paper | ours (uncertainty) | criterion | pass,
shows the table, computes its verdict and saves a summary to `book/results/<chapter>.json`.
The scorecard page and the README's chapter table are built from, and tested against, those
summaries, so they cannot silently go stale.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from lib.scale import scale

RESULTS_DIR = Path(__file__).resolve().parent.parent / "book" / "results"
VERDICTS = ("Reproduced", "Partly reproduced", "Not reproduced")


@dataclass(frozen=True)
class Claim:
    """One checked quantity: the paper's value, ours with its uncertainty, and the criterion."""

    quantity: str
    paper: str
    ours: float
    uncertainty: float | None
    criterion: str
    passed: bool
    digits: int = 3

    def ours_text(self) -> str:
        """Our value with its uncertainty as text, e.g. '0.347 ± 0.012'."""
        text = _sig(self.ours, self.digits)
        if self.uncertainty is not None:
            text += f" ± {_sig(self.uncertainty, 2)}"
        return text

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        """Jupyter's display of a cell ending in `checks.check(...)`: one readable line."""
        mark = "pass" if self.passed else "FAIL"
        printer.text(f"{mark}: {self.quantity} = {self.ours_text()} ({self.criterion})")


def _sig(x: float, digits: int) -> str:
    """Format x with `digits` significant figures (plain notation for moderate magnitudes)."""
    if not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}"


def _finite_number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise ValueError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


@dataclass
class ClaimChecks:
    """The claims table of one chapter: add checks with `check`, then `verdict()` and `save()`."""

    chapter: str
    title: str
    claims: list[Claim] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.chapter or not self.chapter[:2].isdigit():
            raise ValueError(f"chapter must look like '03_attention_scaling', got {self.chapter!r}")

    def check(
        self,
        quantity: str,
        paper: str,
        ours: float,
        criterion: str,
        passed: bool,
        uncertainty: float | None = None,
        digits: int = 3,
    ) -> Claim:
        """Record one check; `passed` must be computed from `ours` by the chapter's criterion."""
        if not isinstance(passed, bool | np.bool_):
            raise ValueError(f"passed must be a bool computed from the criterion, got {passed!r}")
        if any(c.quantity == quantity for c in self.claims):
            raise ValueError(f"quantity {quantity!r} is already checked; give each check its name")
        ours = _finite_number("ours", ours)
        if uncertainty is not None:
            uncertainty = _finite_number("uncertainty", uncertainty)
            if uncertainty < 0:
                raise ValueError(f"uncertainty must be >= 0, got {uncertainty}")
        claim = Claim(quantity, str(paper), ours, uncertainty, criterion, bool(passed), digits)
        self.claims.append(claim)
        return claim

    def verdict(self) -> str:
        """'Reproduced' if every check passes, 'Not reproduced' if none does, else 'Partly ...'."""
        if not self.claims:
            raise ValueError("no claims were checked; call check() before verdict()")
        n_pass = sum(c.passed for c in self.claims)
        if n_pass == len(self.claims):
            return "Reproduced"
        return "Not reproduced" if n_pass == 0 else "Partly reproduced"

    def table(self):
        """The claims as a pandas DataFrame: quantity | paper | ours | criterion | pass."""
        import pandas as pd  # local import keeps `import lib.claims` light

        rows = [
            {
                "quantity": c.quantity,
                "paper": c.paper,
                "ours": c.ours_text(),
                "criterion": c.criterion,
                "pass": "pass" if c.passed else "FAIL",
            }
            for c in self.claims
        ]
        return pd.DataFrame(rows).style.hide(axis="index")

    def summary(self) -> dict:
        """The machine-readable summary: chapter, title, scale, verdict and every claim."""
        claims = [{k: v for k, v in asdict(c).items() if k != "digits"} for c in self.claims]
        for c, claim in zip(claims, self.claims, strict=True):
            c["ours"] = float(_sig(claim.ours, 4))
            c["ours_text"] = claim.ours_text()
            if c["uncertainty"] is not None:
                c["uncertainty"] = float(_sig(claim.uncertainty, 3))
        return {
            "chapter": self.chapter,
            "title": self.title,
            "scale": scale(),
            "verdict": self.verdict(),
            "n_pass": sum(c.passed for c in self.claims),
            "n_claims": len(self.claims),
            "claims": claims,
        }

    def save(self, results_dir: Path | None = None) -> Path:
        """Write the summary atomically to `<dir>/<chapter>[.full].json` and return its path."""
        directory = Path(results_dir) if results_dir is not None else RESULTS_DIR
        directory.mkdir(parents=True, exist_ok=True)
        suffix = "" if scale() == "quick" else f".{scale()}"
        path = directory / f"{self.chapter}{suffix}.json"
        text = json.dumps(self.summary(), indent=2, ensure_ascii=False) + "\n"
        # Write to a temporary file in the same folder, then rename: readers never see half a file.
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{self.chapter}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
        return path


def load_summaries(results_dir: Path | None = None) -> list[dict]:
    """Read every quick-scale chapter summary in `results_dir`, sorted by chapter."""
    directory = Path(results_dir) if results_dir is not None else RESULTS_DIR
    summaries = []
    for path in sorted(directory.glob("[0-9][0-9]_*.json")):
        if path.name.count(".") > 1:  # skip '<chapter>.full.json'
            continue
        summary = json.loads(path.read_text(encoding="utf-8"))
        if summary.get("verdict") not in VERDICTS:
            raise ValueError(f"{path} has verdict {summary.get('verdict')!r}; expected {VERDICTS}")
        summaries.append(summary)
    return summaries
