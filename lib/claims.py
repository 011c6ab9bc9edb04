"""The verdict protocol: claims, replicated evidence, audits, and the chapter summaries.

A chapter declares the abstract's claims, attaches every check to one claim, and lets this
module turn the numbers into verdicts:

- **Evidence** could fail if the paper were wrong. It is computed over independent replicates
  (at least 3) and judged on their mean with a 95% t-interval (Bonferroni-adjusted when one
  check covers several settings) against a criterion fixed before running: `above=t`,
  `below=t` or `within=(a, b)`, plus the effect the paper `predicted`. The outcome is
  *pass* (interval inside the criterion), *fail* (interval outside it, or straddling it while
  excluding the predicted effect: the data resolve that the effect is not what the paper
  predicts) or *inconclusive* (interval straddling the criterion and holding the predicted
  effect: the detectable effect, (q + t_0.8) * SE, exceeds the predicted one). An
  inconclusive check reports that detectable effect and the replicates that would resolve it.
- **Audits** can only fail on a bug, a transcription or an identity. They are shown and must
  pass (`finish()` raises if one fails) but never count toward a verdict.

Per claim: *Reproduced* (every evidence check passes), *Not reproduced* (one fails),
*Inconclusive* (none fails, one is inconclusive), *Not tested* (declared out of reach; never
central). Per chapter, from the central claims: *Reproduced*, *Not reproduced* or
*Inconclusive* when they all agree, else *Partly reproduced*.

    checks = ClaimChecks("08_verifier_roc", "A verifier's ROC decides test-time scaling")
    checks.claim("rs_beats_bon", "Rejection sampling beats best-of-N", central=True)
    checks.evidence("rs_beats_bon", "RS - BoN accuracy at C = 4", gaps, above=0.0,
                    predicted=0.03, paper="RS >= BoN (Prop. 5)")
    checks.audit("rs_beats_bon", "exact RS - BoN, min over N <= 256", gap, gap >= -1e-9,
                 criterion=">= -1e-9", paper="Prop. 5")
    checks.finish()  # table, summary file, glued verdicts
    assert checks.verdict() == "Reproduced"

Summaries go to `book/results/<chapter>.json` (quick scale, base seed 0),
`<chapter>.full.json` at full scale, and `<chapter>[.full].seed<k>.json` under another base
seed (ignored by git); REPRO_RESULTS_DIR redirects them (the seed benchmark does).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats

from lib import validate
from lib.runs import base_seed
from lib.scale import scale

RESULTS_DIR = Path(__file__).resolve().parent.parent / "book" / "results"
OUTCOMES = ("pass", "fail", "inconclusive")
CLAIM_VERDICTS = ("Reproduced", "Not reproduced", "Inconclusive", "Not tested")
VERDICTS = ("Reproduced", "Partly reproduced", "Not reproduced", "Inconclusive")
LEVEL = 0.95  # two-sided confidence of every evidence interval
POWER = 0.80  # power behind the detectable effect
MIN_REPLICATES = 3


class AuditFailed(AssertionError):
    """An audit failed: a bug, a transcription or a broken identity, never a finding."""


# ----------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Claim:
    """One claim of the paper's abstract, in our words; `untested` says why it is out of reach."""

    id: str
    text: str
    central: bool
    untested: str | None = None


@dataclass(frozen=True)
class Evidence:
    """One evidence check: the replicate estimate, its interval, the criterion and the outcome."""

    claim: str
    quantity: str
    paper: str
    estimate: float  # mean over replicates (of the deciding setting)
    lo: float  # 95% interval, adjusted for the number of settings
    hi: float
    replicates: int
    settings: int
    criterion: str
    predicted: float
    outcome: str  # 'pass', 'fail' or 'inconclusive'
    interval: str  # how the interval was made
    detectable: float | None = None  # minimum detectable effect, when inconclusive
    needed: int | None = None  # replicates that would resolve it, when computable
    resolve: str | None = None  # the chapter's note on the scale that would resolve it
    digits: int = 3

    kind = "evidence"

    def ours_text(self) -> str:
        """The estimate and its interval, e.g. '0.031 [0.012, 0.050]'."""
        return f"{_sig(self.estimate, self.digits)} [{_sig(self.lo, 2)}, {_sig(self.hi, 2)}]"

    def outcome_text(self) -> str:
        """The outcome, with the detectable effect and what would resolve an inconclusive one."""
        if self.outcome != "inconclusive":
            return self.outcome
        text = f"inconclusive: detectable {_sig(self.detectable, 2)}"
        if self.needed is not None:
            text += f"; ~{self.needed} replicates would resolve it"
        return text + (f" ({self.resolve})" if self.resolve else "")

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(
            f"{self.outcome_text()}: {self.quantity} = {self.ours_text()} "
            f"({self.criterion}; {self.replicates} replicates)"
        )


@dataclass(frozen=True)
class Audit:
    """One audit: an implementation or consistency check that must pass and never counts."""

    claim: str
    quantity: str
    paper: str
    ours: float
    criterion: str
    passed: bool
    uncertainty: float | None = None
    digits: int = 3

    kind = "audit"

    def ours_text(self) -> str:
        text = _sig(self.ours, self.digits)
        return text + (f" ± {_sig(self.uncertainty, 2)}" if self.uncertainty is not None else "")

    def outcome_text(self) -> str:
        return "pass" if self.passed else "FAIL"

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(f"audit {self.outcome_text()}: {self.quantity} = {self.ours_text()} "
                     f"({self.criterion})")  # fmt: skip


def _sig(x: float, digits: int) -> str:
    """Format x with `digits` significant figures."""
    return f"{x:.{digits}g}" if math.isfinite(x) else str(x)


# ----------------------------------------------------------------------------- statistics
def _bounds(above, below, within, settings: int) -> tuple[np.ndarray, np.ndarray, str]:
    """Lower and upper bounds of the criterion per setting, and its text."""
    given = [x is not None for x in (above, below, within)]
    if sum(given) != 1:
        raise ValueError("give exactly one criterion: above=t, below=t or within=(a, b)")
    if within is not None:
        if not isinstance(within, tuple | list) or len(within) != 2:
            raise TypeError(f"within must be a pair (a, b), got {within!r}")
        low = validate.array("within[0]", within[0], ndim=None)
        high = validate.array("within[1]", within[1], ndim=None)
        if np.any(low >= high):
            raise ValueError(f"within=(a, b) needs a < b, got {within!r}")
        text = f"in [{_sig(float(np.min(low)), 3)}, {_sig(float(np.max(high)), 3)}]"
        if low.size > 1 or high.size > 1:
            text = "within each setting's tolerance"
    elif above is not None:
        low, high = validate.array("above", above, ndim=None), np.array(np.inf)
        text = f"> {_sig(float(low.flat[0]), 3)}" if low.size == 1 else "> each setting's bound"
    else:
        low, high = np.array(-np.inf), validate.array("below", below, ndim=None)
        text = f"< {_sig(float(high.flat[0]), 3)}" if high.size == 1 else "< each setting's bound"
    try:
        low, high = (np.broadcast_to(b, (settings,)).astype(float) for b in (low, high))
    except ValueError:
        raise ValueError(
            f"criterion bounds must be scalars or one per setting ({settings})"
        ) from None
    return low, high, text


def judge(lo: float, hi: float, low: float, high: float, predicted: float) -> str:
    """Outcome of an interval [lo, hi] against the criterion [low, high] and predicted effect."""
    if lo > low and hi < high:
        return "pass"
    if hi < low or lo > high:
        return "fail"
    return "inconclusive" if lo <= predicted <= hi else "fail"


def t_interval(values, settings: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Mean, SE and the t quantile of a 95% interval, Bonferroni-adjusted over `settings`.

    values: (settings, replicates) array. Returns (mean, se, q, q_power) with the quantile
    q = t_{1 - 0.025/settings, R-1} and q_power = t_{0.8, R-1} (for the detectable effect).
    """
    n_rep = values.shape[1]
    mean = values.mean(axis=1)
    se = values.std(axis=1, ddof=1) / math.sqrt(n_rep)
    q = float(stats.t.ppf(1 - (1 - LEVEL) / 2 / settings, n_rep - 1))
    return mean, se, q, float(stats.t.ppf(POWER, n_rep - 1))


def rate_interval(successes: int, trials: int, settings: int = 1) -> tuple[float, float, float]:
    """Rate and its exact (Clopper-Pearson) 95% interval, Bonferroni-adjusted over `settings`."""
    trials = validate.integer("trials", trials, minimum=1)
    k = validate.integer("successes", successes, minimum=0, maximum=trials)
    ci = stats.binomtest(k, trials).proportion_ci(1 - (1 - LEVEL) / settings, "exact")
    return k / trials, float(ci.low), float(ci.high)


# ----------------------------------------------------------------------------- the table
@dataclass
class ClaimChecks:
    """The claims, checks and verdicts of one chapter; `finish()` saves and shows them."""

    chapter: str
    title: str
    claims: dict[str, Claim] = field(default_factory=dict)
    checks: list[Evidence | Audit] = field(default_factory=list)

    def __post_init__(self) -> None:
        validate.text("chapter", self.chapter)
        if not self.chapter[:2].isdigit() or self.chapter[2:3] != "_":
            raise ValueError(f"chapter must look like '03_attention_scaling', got {self.chapter!r}")
        validate.text("title", self.title)

    # -- declaring
    def claim(self, id: str, text: str, *, central: bool, untested: str | None = None) -> Claim:
        """Declare a claim of the abstract; `untested` (a reason) marks one out of reach."""
        validate.text("id", id)
        validate.text("text", text)
        validate.boolean("central", central)
        if id in self.claims:
            raise ValueError(f"claim {id!r} is already declared")
        if untested is not None:
            validate.text("untested", untested)
            if central:
                raise ValueError(f"central claim {id!r} cannot be untested: test it or demote it")
        self.claims[id] = Claim(id, text, central, untested)
        return self.claims[id]

    def _attach(self, claim: str, quantity: str) -> None:
        if claim not in self.claims:
            raise ValueError(f"unknown claim {claim!r}; declare it first with claim() "
                             f"(declared: {sorted(self.claims)})")  # fmt: skip
        if self.claims[claim].untested:
            raise ValueError(f"claim {claim!r} was declared untested; it takes no checks")
        validate.text("quantity", quantity)
        if any(c.quantity == quantity for c in self.checks):
            raise ValueError(f"quantity {quantity!r} is already checked; name each check")

    def evidence(
        self,
        claim: str,
        quantity: str,
        values,
        *,
        paper: str,
        predicted,
        above=None,
        below=None,
        within=None,
        resolve: str | None = None,
        digits: int = 3,
    ) -> Evidence:
        """Judge replicated evidence for `claim`.

        values: (R,) replicate values, or (S, R) for S settings judged together (an outcome per
        setting at a Bonferroni-adjusted level; the worst decides). Criterion: exactly one of
        `above`, `below`, `within` (scalars or one per setting), fixed before running.
        predicted: the effect the paper predicts at this scale (scalar or one per setting); it
        must meet the criterion. resolve: the scale that would settle an inconclusive outcome.
        """
        self._attach(claim, quantity)
        validate.text("paper", paper)
        values = validate.array("values", values, ndim=None)
        if values.ndim not in (1, 2):
            raise ValueError(f"values must be (replicates,) or (settings, replicates), "
                             f"got shape {values.shape}")  # fmt: skip
        values = values.reshape(1, -1) if values.ndim == 1 else values
        settings, n_rep = values.shape
        if n_rep < MIN_REPLICATES:
            raise ValueError(f"evidence needs >= {MIN_REPLICATES} replicates, got {n_rep}")
        low, high, criterion = _bounds(above, below, within, settings)
        predicted = np.broadcast_to(validate.array("predicted", predicted, ndim=None), (settings,))
        if np.any((predicted <= low) | (predicted >= high)):
            raise ValueError("predicted must meet the criterion: it is the paper's effect")
        mean, se, q, q_power = t_interval(values, settings)
        rows = zip(mean - q * se, mean + q * se, low, high, predicted, strict=True)
        outcomes = [judge(*row) for row in rows]
        # The deciding setting: the worst outcome, then the smallest margin inside the bounds.
        rank = {"fail": 0, "inconclusive": 1, "pass": 2}
        margin = np.minimum(mean - q * se - low, high - mean - q * se)
        k = min(range(settings), key=lambda i: (rank[outcomes[i]], margin[i]))
        detectable = needed = None
        if outcomes[k] == "inconclusive":
            detectable = (q + q_power) * float(se[k])
            effect = min(abs(predicted[k] - low[k]), abs(predicted[k] - high[k]))
            # Replicates that bring the detectable effect under the predicted one; when it is
            # already under (an unlucky draw), at least twice as many as were run.
            needed = max(math.ceil(n_rep * (detectable / effect) ** 2), 2 * n_rep)
        how = f"95% t-interval over {n_rep} replicates"
        if settings > 1:
            criterion += f", each of {settings} settings"
            how += f", Bonferroni over {settings} settings"
        record = Evidence(
            claim, quantity, paper, float(mean[k]), float(mean[k] - q * se[k]),
            float(mean[k] + q * se[k]), n_rep, settings, criterion, float(predicted[k]),
            outcomes[k], how, detectable, needed, resolve,
            validate.integer("digits", digits, minimum=1, maximum=12),
        )  # fmt: skip
        self.checks.append(record)
        return record

    def evidence_interval(
        self,
        claim: str,
        quantity: str,
        estimate: float,
        interval: tuple[float, float],
        *,
        paper: str,
        predicted: float,
        replicates: int,
        how: str,
        above=None,
        below=None,
        within=None,
        resolve: str | None = None,
        digits: int = 3,
    ) -> Evidence:
        """Judge evidence whose 95% interval comes from elsewhere: a bootstrap over real data,
        or `rate_interval` for a rate. `replicates` is the number of independent units behind it
        (data points, trials), `how` says how the interval was made."""
        self._attach(claim, quantity)
        validate.text("paper", paper)
        validate.text("how", how)
        estimate = validate.real("estimate", estimate)
        lo, hi = (validate.real(f"interval[{i}]", v) for i, v in enumerate(interval))
        if not lo <= estimate <= hi:
            raise ValueError(f"interval {interval!r} must contain the estimate {estimate}")
        replicates = validate.integer("replicates", replicates, minimum=MIN_REPLICATES)
        low, high, criterion = _bounds(above, below, within, 1)
        predicted = validate.real("predicted", predicted)
        if not low[0] < predicted < high[0]:
            raise ValueError("predicted must meet the criterion: it is the paper's effect")
        outcome = judge(lo, hi, low[0], high[0], predicted)
        detectable = None
        if outcome == "inconclusive":  # half-width scaled from 95% confidence to 80% power
            z = stats.norm.ppf(1 - (1 - LEVEL) / 2)
            detectable = (hi - lo) / 2 * (z + stats.norm.ppf(POWER)) / z
        record = Evidence(claim, quantity, paper, estimate, lo, hi, replicates, 1, criterion,
                          predicted, outcome, how, detectable, None, resolve,
                          validate.integer("digits", digits, minimum=1, maximum=12))  # fmt: skip
        self.checks.append(record)
        return record

    def audit(
        self,
        claim: str,
        quantity: str,
        ours: float,
        passed: bool,
        *,
        criterion: str,
        paper: str,
        uncertainty: float | None = None,
        digits: int = 3,
    ) -> Audit:
        """Record an audit of `claim`: `passed` must be computed from `ours` by `criterion`."""
        self._attach(claim, quantity)
        record = Audit(
            claim, quantity, validate.text("paper", paper), validate.real("ours", ours),
            validate.text("criterion", criterion), validate.boolean("passed", passed),
            None if uncertainty is None else validate.real("uncertainty", uncertainty, low=0),
            validate.integer("digits", digits, minimum=1, maximum=12),
        )  # fmt: skip
        self.checks.append(record)
        return record

    # -- verdicts
    def _evidence(self, claim: str) -> list[Evidence]:
        return [c for c in self.checks if c.kind == "evidence" and c.claim == claim]

    def claim_verdict(self, claim: str) -> str:
        """Reproduced (all evidence passes), Not reproduced (one fails), else Inconclusive."""
        if self.claims[claim].untested:
            return "Not tested"
        outcomes = [c.outcome for c in self._evidence(claim)]
        if not outcomes:
            raise ValueError(f"claim {claim!r} has no evidence; add some or declare it untested")
        if "fail" in outcomes:
            return "Not reproduced"
        return "Inconclusive" if "inconclusive" in outcomes else "Reproduced"

    def claim_verdicts(self) -> dict[str, str]:
        """Every claim's verdict, by claim id."""
        return {claim: self.claim_verdict(claim) for claim in self.claims}

    def verdict(self) -> str:
        """The chapter verdict: all central claims agree on it, else 'Partly reproduced'."""
        central = [self.claim_verdict(c.id) for c in self.claims.values() if c.central]
        if not central:
            raise ValueError("no central claim is declared; mark one with central=True")
        return central[0] if len(set(central)) == 1 else "Partly reproduced"

    def failed_audits(self) -> list[Audit]:
        """The audits that failed (each one is a bug to fix, not a finding)."""
        return [c for c in self.checks if c.kind == "audit" and not c.passed]

    def _deciding(self, claim: str) -> Evidence | None:
        evidence = self._evidence(claim)
        for outcome in ("fail", "inconclusive"):
            for check in evidence:
                if check.outcome == outcome:
                    return check
        return evidence[0] if evidence else None

    # -- showing and saving
    def table(self):
        """Every check as a table: claim | check | kind | paper | ours | criterion | R | outcome."""
        import pandas as pd  # local import keeps `import lib.claims` light

        rows = [
            {
                "claim": c.claim,
                "check": c.quantity,
                "kind": c.kind,
                "paper": c.paper,
                "ours": c.ours_text(),
                "criterion": c.criterion,
                "replicates": getattr(c, "replicates", ""),
                "outcome": c.outcome_text(),
            }
            for c in self.checks
        ]
        return pd.DataFrame(rows).style.hide(axis="index")

    def verdict_table(self):
        """One row per claim: claim | central | verdict | deciding evidence."""
        import pandas as pd

        rows = []
        for claim in self.claims.values():
            deciding = None if claim.untested else self._deciding(claim.id)
            rows.append({
                "claim": f"{claim.id}: {claim.text}",
                "central": "yes" if claim.central else "no",
                "verdict": self.claim_verdict(claim.id),
                "deciding evidence": claim.untested or _phrase(deciding),
            })  # fmt: skip
        return pd.DataFrame(rows).style.hide(axis="index")

    def summary(self) -> dict:
        """The machine-readable summary behind the scorecard."""
        claims = []
        for claim in self.claims.values():
            deciding = None if claim.untested else self._deciding(claim.id)
            claims.append({
                **asdict(claim),
                "verdict": self.claim_verdict(claim.id),
                "deciding": claim.untested or _phrase(deciding),
                "replicates": deciding.replicates if deciding else 0,
            })  # fmt: skip
        checks = []
        for check in self.checks:
            row = {"kind": check.kind, **asdict(check)}
            row.pop("digits")
            row["ours_text"], row["outcome_text"] = check.ours_text(), check.outcome_text()
            checks.append(row)
        return {
            "chapter": self.chapter,
            "title": self.title,
            "scale": scale(),
            "base_seed": base_seed(),
            "verdict": self.verdict(),
            "claims": claims,
            "checks": checks,
            "audits_passed": not self.failed_audits(),
        }

    def save(self, results_dir: Path | None = None, run_time_s: float | None = None) -> Path:
        """Write the summary atomically (mode 0644) and return its path (see the module doc)."""
        directory = Path(results_dir or os.environ.get("REPRO_RESULTS_DIR") or RESULTS_DIR)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / summary_name(self.chapter, scale(), base_seed())
        summary = self.summary()
        if run_time_s is not None:
            summary["run_time_s"] = round(float(run_time_s), 1)
        text = json.dumps(summary, indent=2, ensure_ascii=False) + "\n"
        # Write a temporary file in the same folder, then rename: readers never see half a file.
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{self.chapter}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    def finish(self) -> str:
        """Save the summary, glue the verdicts into the page, show the tables and return the
        chapter verdict; raises AuditFailed (after saving) if an audit failed."""
        run_time = _process_seconds()
        self.save(run_time_s=run_time)
        _glue("verdict", self.verdict())
        _glue("run_time", f"{run_time:.0f} s")
        for claim, verdict in self.claim_verdicts().items():
            _glue(f"verdict_{claim}", verdict)
        _show(self.verdict_table(), self.table())
        failed = self.failed_audits()
        if failed:
            raise AuditFailed(
                "audits failed (bugs, not findings): "
                + "; ".join(f"{a.quantity} = {a.ours_text()}" for a in failed)
            )
        return self.verdict()


def _phrase(check: Evidence | None) -> str:
    """The deciding evidence in a phrase: quantity = estimate [interval] (criterion): outcome."""
    if check is None:
        return ""
    return f"{check.quantity} = {check.ours_text()} ({check.criterion}): {check.outcome}"


def _process_seconds() -> float:
    """Wall seconds since this process (the notebook's kernel) started."""
    import psutil

    return time.time() - psutil.Process(os.getpid()).create_time()


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in shell.config


def _glue(name: str, value: str) -> None:
    """Glue a value for the book's prose ({glue:text}`name`) when running in a kernel."""
    if _in_kernel():
        from myst_nb import glue

        glue(name, value, display=False)


def _show(*objects) -> None:
    if _in_kernel():
        from IPython.display import display

        display(*objects)


def summary_name(chapter: str, run_scale: str, seed: int) -> str:
    """File name of a summary: '<chapter>[.full][.seed<k>].json'."""
    name = chapter + ("" if run_scale == "quick" else f".{run_scale}")
    return name + ("" if seed == 0 else f".seed{seed}") + ".json"


def load_summaries(results_dir: Path | None = None, run_scale: str = "quick") -> list[dict]:
    """Read every chapter summary of one scale at base seed 0, sorted by chapter."""
    directory = Path(results_dir) if results_dir is not None else RESULTS_DIR
    summaries = []
    for path in sorted(directory.glob("[0-9][0-9]_*.json")):
        if path.name != summary_name(path.name.split(".")[0], run_scale, 0):
            continue
        summary = json.loads(path.read_text(encoding="utf-8"))
        if summary.get("verdict") not in VERDICTS:
            raise ValueError(f"{path} has verdict {summary.get('verdict')!r}; expected {VERDICTS}")
        summaries.append(summary)
    return summaries
