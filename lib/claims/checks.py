"""`ClaimChecks`: a chapter's claims, premises, checks, controls, criteria history, verdicts."""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from lib import validate
from lib.claims import stats
from lib.claims.records import (
    PREMISE_ROLES,
    PREMISE_SOURCES,
    Audit,
    Change,
    Claim,
    Control,
    ControlRun,
    Evidence,
    Premise,
    sig,
)
from lib.claims.summary import (
    FORMAT,
    chapter_verdict,
    claim_verdict,
    results_dir,
    summary_name,
    write_atomically,
)
from lib.runs import base_seed, workers
from lib.scale import scale


class AuditFailed(AssertionError):
    """An audit failed: a bug, a transcription or a broken identity, never a finding."""


@dataclass
class ClaimChecks:
    """The claims, checks and verdicts of one chapter; `finish()` saves and shows them.

    `context` holds facts about the run that the summary records beside the verdicts (e.g. the
    isolation mode that held); values must be JSON-serialisable.
    """

    chapter: str
    title: str
    claims: dict[str, Claim] = field(default_factory=dict)
    premises: list[Premise] = field(default_factory=list)
    checks: list[Evidence | Audit] = field(default_factory=list)
    history: list[Change] = field(default_factory=list)
    context: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate.text("chapter", self.chapter)
        if not self.chapter[:2].isdigit() or self.chapter[2:3] != "_":
            raise ValueError(f"chapter must look like '03_attention_scaling', got {self.chapter!r}")
        validate.text("title", self.title)

    # ------------------------------------------------------------------------- declaring
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
                raise ValueError(
                    f"central claim {id!r} cannot be declared untested: test it, demote it, or "
                    "declare the premise that fails with premise()"
                )
        self.claims[id] = Claim(id, text, central, untested)
        return self.claims[id]

    def premise(self, claim: str, premise: str, value: float, met: bool, *, criterion: str,
                source: str | None = None, role: str = "regime", interval: tuple | None = None,
                digits: int = 3) -> Premise:  # fmt: skip
        """Record a premise of `claim`: the paper's condition (`premise`, `criterion`), the
        `value` in this run (with a 95% `interval` if it has one) and whether it is `met`.

        source: 'measured' (read off this run, so it could fail) or 'design' (a constant the
        chapter set: shown as a setting). role: 'regime', 'room' (the outcome still moves with
        the quantity the claim varies) or 'mechanism' (removing the paper's mechanism changes
        the outcome here). A claim with an unmet premise is Not tested, never Not reproduced;
        a central claim needs at least one measured premise.
        """
        self._known(claim)
        validate.text("premise", premise)
        if source not in PREMISE_SOURCES:
            raise ValueError(
                f"premise {premise!r} needs source='measured' (read off this run) "
                f"or source='design' (a constant the chapter set), got {source!r}"
            )
        if role not in PREMISE_ROLES:
            raise ValueError(f"premise role must be one of {PREMISE_ROLES}, got {role!r}")
        if any(p.claim == claim and p.premise == premise for p in self.premises):
            raise ValueError(f"premise {premise!r} of {claim!r} is already recorded")
        lo = hi = None
        if interval is not None:
            lo, hi = (validate.real(f"interval[{i}]", v) for i, v in enumerate(interval))
        record = Premise(
            claim, premise, validate.real("value", value), validate.text("criterion", criterion),
            validate.boolean("met", met), lo, hi,
            validate.integer("digits", digits, minimum=1, maximum=12), source, role,
        )  # fmt: skip
        self.premises.append(record)
        return record

    def changed(self, change: str, *, before: str, why: str, date: str) -> Change:
        """Record a design or criterion change made after seeing a result (criteria history):
        what changed, the earlier design and what it showed, why, and when (YYYY-MM-DD)."""
        validate.text("date", date)
        if not (len(date) == 10 and date[4] == date[7] == "-" and date.replace("-", "").isdigit()):
            raise ValueError(f"date must be YYYY-MM-DD, got {date!r}")
        record = Change(date, validate.text("change", change), validate.text("before", before),
                        validate.text("why", why))  # fmt: skip
        self.history.append(record)
        return record

    def _known(self, claim: str) -> None:
        if claim not in self.claims:
            raise ValueError(f"unknown claim {claim!r}; declare it first with claim() "
                             f"(declared: {sorted(self.claims)})")  # fmt: skip

    def _attach(self, claim: str, quantity: str) -> None:
        self._known(claim)
        if self.claims[claim].untested:
            raise ValueError(f"claim {claim!r} was declared untested; it takes no checks")
        validate.text("quantity", quantity)
        if any(c.quantity == quantity for c in self.checks):
            raise ValueError(f"quantity {quantity!r} is already checked; name each check")

    # ------------------------------------------------------------------------- evidence
    def evidence(self, claim: str, quantity: str, values, *, paper: str, predicted, control,
                 above=None, below=None, within=None, resolve: str | None = None,
                 digits: int = 3) -> Evidence:  # fmt: skip
        """Judge replicated evidence for `claim`, and its control(s) by the same criterion.

        values: (R,) replicate values, or (S, R) for S settings judged together (an outcome per
        setting at a Bonferroni-adjusted level; the worst decides). Criterion: exactly one of
        `above`, `below`, `within` (scalars or one per setting), fixed before running.
        predicted: the effect the paper predicts at this scale (scalar or one per setting); it
        must meet the criterion. control: `negative(...)` or `positive(...)` (or a list) with
        replicate values of the same number of settings. resolve: the scale that would settle
        an inconclusive outcome.
        """
        self._attach(claim, quantity)
        validate.text("paper", paper)
        values = stats.replicate_matrix("values", values)
        settings, n_rep = values.shape
        low, high, criterion = stats.criterion_bounds(above, below, within, settings)
        predicted = _predicted(predicted, low, high)
        judged = stats.judge_replicates(values, low, high, predicted)
        controls = tuple(
            _judge_control(run, low, high, predicted, digits, replicated=True)
            for run in _control_runs(control)
        )
        how = f"95% t-interval over {n_rep} replicates"
        if settings > 1:
            criterion += f", each of {settings} settings"
            how += f", Bonferroni over {settings} settings"
        k = judged.setting
        return self._add(_with_holds(Evidence(
            claim, quantity, paper, judged.estimate, judged.lo, judged.hi, n_rep, settings,
            criterion, float(low[k]), float(high[k]), float(predicted[k]), judged.outcome, how,
            controls, judged.detectable, judged.needed, resolve, _digits(digits),
        )))  # fmt: skip

    def evidence_interval(self, claim: str, quantity: str, estimate: float,
                          interval: tuple[float, float], *, paper: str, predicted: float,
                          replicates: int, how: str, control, above=None, below=None,
                          within=None, resolve: str | None = None,
                          digits: int = 3) -> Evidence:  # fmt: skip
        """Judge evidence whose 95% interval comes from elsewhere: a bootstrap over real data,
        or `rate_interval` for a rate. `replicates` is the number of independent units behind it
        (data points, trials), `how` says how the interval was made. control: `negative(...)`
        or `positive(...)` (or a list) with an estimate and interval made the same way."""
        self._attach(claim, quantity)
        validate.text("paper", paper)
        validate.text("how", how)
        estimate = validate.real("estimate", estimate)
        lo, hi = (validate.real(f"interval[{i}]", v) for i, v in enumerate(interval))
        if not lo <= estimate <= hi:
            raise ValueError(f"interval {interval!r} must contain the estimate {estimate}")
        replicates = validate.integer("replicates", replicates, minimum=stats.MIN_REPLICATES)
        low, high, criterion = stats.criterion_bounds(above, below, within, 1)
        predicted = _predicted(predicted, low, high)
        outcome = stats.judge(lo, hi, low[0], high[0], predicted[0])
        controls = tuple(
            _judge_control(run, low, high, predicted, digits) for run in _control_runs(control)
        )
        detectable = stats.detectable_from_interval(lo, hi) if outcome == "inconclusive" else None
        return self._add(_with_holds(Evidence(
            claim, quantity, paper, estimate, lo, hi, replicates, 1, criterion, float(low[0]),
            float(high[0]), float(predicted[0]), outcome, how, controls, detectable, None,
            resolve, _digits(digits),
        )))  # fmt: skip

    def versus(self, claim: str, quantity: str, ours, rival, *, rival_name: str,
               alternative: str, margin: float, test: str, better: str, predicted: float,
               paper: str, control, ideal: float | None = None, resolve: str | None = None,
               digits: int = 3) -> Evidence:  # fmt: skip
        """Judge "ours beats a rival" by the paired difference of their scores per replicate.

        ours, rival: (R,) scores on the same replicates (higher or lower is `better`); the
        difference d = ours - rival (rival - ours when lower is better) is positive when ours
        wins. test='superiority' asks d > margin, 'non-inferiority' asks d > -margin, with
        `margin` >= 0 fixed before running, so that a method worse than a trivial rule fails.
        predicted: the paper's advantage, a number fixed in advance; one derived from the
        rival's own scores (its leftover room to `ideal`, the best score there is) would make
        losing to the rival unfalsifiable and is refused. control: the same difference with the
        paper's mechanism removed (e.g. a shuffled law against the same rival); it must fail.
        """
        validate.text("rival_name", rival_name)
        validate.text("alternative", alternative)
        margin = validate.real("margin", margin, low=0)
        if test not in ("superiority", "non-inferiority"):
            raise ValueError(f"test must be 'superiority' or 'non-inferiority', got {test!r}")
        if better not in ("higher", "lower"):
            raise ValueError(f"better must be 'higher' or 'lower', got {better!r}")
        ours = validate.array("ours", ours, ndim=1)
        rival = validate.array("rival", rival, ndim=1)
        if ours.shape != rival.shape:
            raise ValueError(f"ours and rival must be paired replicates of one shape, got "
                             f"{ours.shape} and {rival.shape}")  # fmt: skip
        if callable(predicted) or np.ndim(predicted) != 0 or isinstance(predicted, str):
            raise ValueError(
                "a rival comparison's predicted effect must be the paper's advantage, one number "
                "fixed before running; an effect computed from the rival's scores (its leftover "
                "room) makes losing to the rival unfalsifiable"
            )
        predicted = validate.real("predicted", predicted)
        if ideal is not None:
            ideal = validate.real("ideal", ideal)
            room = abs(ideal - float(rival.mean()))
            if math.isclose(abs(predicted), room, rel_tol=1e-6, abs_tol=1e-12):
                raise ValueError(
                    f"predicted = {predicted:.6g} is the rival's leftover room to the ideal "
                    f"({ideal:.6g} - its mean): a rival-derived predicted effect makes losing to "
                    "the rival unfalsifiable; give the paper's advantage, fixed in advance"
                )
        diff = ours - rival if better == "higher" else rival - ours
        bound = margin if test == "superiority" else -margin
        check = self.evidence(claim, quantity, diff, above=bound, predicted=predicted,
                              paper=paper, control=control, resolve=resolve,
                              digits=digits)  # fmt: skip
        record = replace(
            check,
            rival={
                "name": rival_name,
                "alternative": alternative,
                "margin": margin,
                "test": test,
                "better": better,
            },
        )
        self.checks[-1] = record
        return record

    def audit(self, claim: str, quantity: str, ours: float, passed: bool, *, criterion: str,
              paper: str, uncertainty: float | None = None, digits: int = 3) -> Audit:  # fmt: skip
        """Record an audit of `claim`: `passed` must be computed from `ours` by `criterion`."""
        self._attach(claim, quantity)
        return self._add(Audit(
            claim, quantity, validate.text("paper", paper), validate.real("ours", ours),
            validate.text("criterion", criterion), validate.boolean("passed", passed),
            None if uncertainty is None else validate.real("uncertainty", uncertainty, low=0),
            _digits(digits),
        ))  # fmt: skip

    def _add(self, record):
        self.checks.append(record)
        return record

    # ------------------------------------------------------------------------- verdicts
    def _evidence(self, claim: str) -> list[Evidence]:
        return [c for c in self.checks if c.kind == "evidence" and c.claim == claim]

    def untested_reason(self, claim: str) -> str | None:
        """Why `claim` is Not tested (declared out of reach, a premise unmet, or no evidence
        check that discriminates), or None when it is tested."""
        self._known(claim)
        if self.claims[claim].untested:
            return self.claims[claim].untested
        unmet = [p for p in self.premises if p.claim == claim and not p.met]
        if unmet:
            return "premise unmet: " + "; ".join(f"{p.premise} ({p.measured()})" for p in unmet)
        evidence = self._evidence(claim)
        if evidence and not any(e.counts for e in evidence):
            return "no evidence check discriminates: " + "; ".join(
                f"{e.quantity} ({e.control_text()})" for e in evidence
            )
        return None

    def claim_verdict(self, claim: str) -> str:
        """Not tested (see `untested_reason`), else from the counting evidence: Not reproduced
        if one fails, Inconclusive if one is inconclusive, else Reproduced."""
        if self.untested_reason(claim):
            return "Not tested"
        outcomes = [c.outcome for c in self._evidence(claim) if c.counts]
        if not outcomes:
            raise ValueError(f"claim {claim!r} has no evidence; add some or declare it untested")
        return claim_verdict(outcomes)

    def claim_verdicts(self) -> dict[str, str]:
        """Every claim's verdict, by claim id."""
        return {claim: self.claim_verdict(claim) for claim in self.claims}

    def verdict(self) -> str:
        """The chapter verdict from the central claims (`lib.claims.summary.chapter_verdict`)."""
        return chapter_verdict([self.claim_verdict(c.id) for c in self.claims.values()
                                if c.central])  # fmt: skip

    def failed_audits(self) -> list[Audit]:
        """The audits that failed (each one is a bug to fix, not a finding)."""
        return [c for c in self.checks if c.kind == "audit" and not c.passed]

    def deciding(self, claim: str) -> Evidence | None:
        """The evidence that settled `claim`: a failing, else an inconclusive, else the first
        counting check (None for a claim without counting evidence)."""
        counting = [c for c in self._evidence(claim) if c.counts]
        for outcome in ("fail", "inconclusive"):
            for check in counting:
                if check.outcome == outcome:
                    return check
        return counting[0] if counting else None

    # ------------------------------------------------------------------------- showing
    def table(self):
        """Every check: claim | check | kind | paper | ours | criterion | R | outcome | control."""
        import pandas as pd  # local import keeps `import lib.claims` light

        rows = [
            {
                "claim": c.claim,
                "check": c.quantity,
                "kind": c.kind if getattr(c, "counts", True) else "evidence (does not count)",
                "paper": c.paper,
                "ours": c.ours_text(),
                "criterion": c.criterion,
                "replicates": getattr(c, "replicates", ""),
                "outcome": c.outcome_text(),
                "control": c.control_text(),
            }
            for c in self.checks
        ]
        return pd.DataFrame(rows).style.hide(axis="index")

    def verdict_table(self):
        """One row per claim: claim | central | premises | alternatives ruled out | verdict |
        deciding evidence (with the thresholds over which its outcome holds)."""
        import pandas as pd

        rows = []
        for claim in self.claims.values():
            premises = [p.text() for p in self.premises if p.claim == claim.id]
            deciding = self.deciding(claim.id)
            reason = self.untested_reason(claim.id)
            ruled_out, total = self.alternatives(claim.id)
            rows.append({
                "claim": f"{claim.id}: {claim.text}",
                "central": "yes" if claim.central else "no",
                "premises": "; ".join(premises) or "none declared",
                "alternatives ruled out": f"{ruled_out} of {total}",
                "verdict": self.claim_verdict(claim.id),
                "deciding evidence": reason or (
                    f"{_phrase(deciding)}; {deciding.holds_text()}" if deciding else ""),
            })  # fmt: skip
        return pd.DataFrame(rows).style.hide(axis="index")

    def referee_table(self):
        """What a referee would try: one row per alternative explanation (every negative control
        and rival): claim | alternative | how it was tested | outcome | the check still counts."""
        import pandas as pd

        rows = []
        for check in self.checks:
            if check.kind != "evidence":
                continue
            for control in check.controls:
                if control.kind != "negative":
                    continue
                rows.append({
                    "claim": check.claim, "alternative": control.alternative,
                    "how it was tested": f"{check.quantity} on {control.what}: "
                    f"{sig(control.estimate, control.digits)} [{sig(control.lo, 2)}, "
                    f"{sig(control.hi, 2)}] ({check.criterion})",
                    "outcome": "ruled out (the control fails)" if control.discriminates
                    else "NOT ruled out (the control passes)",
                    "check counts": "yes" if check.counts else "no",
                })  # fmt: skip
            if check.rival is not None:
                rows.append({
                    "claim": check.claim, "alternative": check.rival["alternative"],
                    "how it was tested": f"{check.quantity}: {check.rival['test']} against "
                    f"{check.rival['name']} by a margin of {sig(check.rival['margin'], 3)}: "
                    f"{check.ours_text()} ({check.criterion})",
                    "outcome": {"pass": "ruled out (ours wins)",
                                "fail": "NOT ruled out (the rival is as good or better)",
                                "inconclusive": "undecided"}[check.outcome],
                    "check counts": "yes" if check.counts else "no",
                })  # fmt: skip
        if not rows:
            rows = [{"alternatives": "no evidence check: nothing to rule out"}]
        return pd.DataFrame(rows).style.hide(axis="index")

    def history_table(self):
        """The criteria history: date | what changed | the earlier design and what it showed |
        why (a one-row note when nothing changed after a result)."""
        import pandas as pd

        if not self.history:
            return pd.DataFrame([{"criteria history": "no design or criterion was changed "
                                  "after seeing a result"}]).style.hide(axis="index")  # fmt: skip
        rows = [{"date": h.date, "what changed": h.change, "before": h.before, "why": h.why}
                for h in self.history]  # fmt: skip
        return pd.DataFrame(rows).style.hide(axis="index")

    # ------------------------------------------------------------------------- saving
    def summary(self) -> dict:
        """The machine-readable summary behind the scorecard (see lib.claims.summary)."""
        bare = [c.id for c in self.claims.values()
                if c.central and not any(p.claim == c.id for p in self.premises)]  # fmt: skip
        if bare:
            raise ValueError(f"central claims {bare} declare no premise: record the paper's "
                             "conditions for them with premise() and measure them")  # fmt: skip
        unmeasured = [c.id for c in self.claims.values() if c.central and not any(
            p.claim == c.id and p.source == "measured" for p in self.premises)]  # fmt: skip
        if unmeasured:
            raise ValueError(f"central claims {unmeasured} have only design premises (settings): "
                             "each needs at least one premise measured in the run, such as "
                             "room (the outcome still moves) or mechanism (removing the paper's "
                             "mechanism changes it)")  # fmt: skip
        return {
            "format": FORMAT,
            "chapter": self.chapter,
            "title": self.title,
            "scale": scale(),
            "base_seed": base_seed(),
            "verdict": self.verdict(),
            "claims": [self._claim_summary(c) for c in self.claims.values()],
            "checks": [_check_summary(c) for c in self.checks],
            "audits_passed": not self.failed_audits(),
            "criteria_history": [asdict(h) for h in self.history],
            "context": dict(self.context),
        }

    def alternatives(self, claim: str) -> tuple[int, int]:
        """(ruled out, total) over the claim's evidence: negative controls that fail as they
        must, and rivals beaten."""
        counts = [e.alternatives() for e in self._evidence(claim)]
        return sum(k for k, _ in counts), sum(m for _, m in counts)

    def _claim_summary(self, claim: Claim) -> dict:
        deciding = self.deciding(claim.id)
        reason = self.untested_reason(claim.id)
        premises = [{"premise": p.premise, "measured": p.measured(), "met": p.met,
                     "value": p.value, "lo": p.lo, "hi": p.hi, "criterion": p.criterion,
                     "source": p.source, "role": p.role}
                    for p in self.premises if p.claim == claim.id]  # fmt: skip
        ruled_out, total = self.alternatives(claim.id)
        return {
            **asdict(claim),
            "untested": reason,
            "verdict": self.claim_verdict(claim.id),
            "deciding": reason or _phrase(deciding),
            "deciding_check": deciding.quantity if deciding and not reason else None,
            "replicates": deciding.replicates if deciding and not reason else 0,
            "fragile": bool(deciding and not reason and deciding.fragile),
            "alternatives": {"ruled_out": ruled_out, "total": total},
            "premises": premises,
        }

    def save(self, results: os.PathLike | None = None, run_time_s: float | None = None):
        """Write the summary atomically and return its path: book/results/<chapter>.json at
        the quick scale and base seed 0, '.full' and '.seed<k>' variants otherwise;
        REPRO_RESULTS_DIR (or `results`) redirects it."""
        summary = self.summary()
        if run_time_s is not None:
            summary["run_time_s"] = round(float(run_time_s), 1)
        path = results_dir(results) / summary_name(self.chapter, scale(), base_seed())
        return write_atomically(path, summary)

    def finish(self) -> str:
        """Save the summary, glue the verdicts into the page, show the tables and return the
        chapter verdict; raises AuditFailed (after saving) if an audit failed."""
        run_time = _process_seconds()
        self.save(run_time_s=run_time)
        _glue("verdict", self.verdict())
        n = workers()  # the page says how this run was made: `make test` runs one per chapter
        _glue("run_time", f"{run_time:.0f} s with {n} worker process{'es' if n > 1 else ''}")
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


# ----------------------------------------------------------------------------- helpers
def _digits(digits: int) -> int:
    return validate.integer("digits", digits, minimum=1, maximum=12)


def _predicted(predicted, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """The paper's effect per setting; it must meet the criterion."""
    predicted = np.broadcast_to(validate.array("predicted", predicted, ndim=None), low.shape)
    if np.any((predicted <= low) | (predicted >= high)):
        raise ValueError("predicted must meet the criterion: it is the paper's effect")
    return predicted


def _control_runs(control) -> list[ControlRun]:
    """The control argument as a non-empty list of ControlRun."""
    runs = list(control) if isinstance(control, list | tuple) else [control]
    if not runs or not all(isinstance(r, ControlRun) for r in runs):
        raise TypeError(
            "control must be negative(what, values) or positive(what, values) from lib.claims "
            f"(or a list of them), got {control!r:.80}: every evidence check needs a control"
        )
    return runs


def _judge_control(run: ControlRun, low, high, predicted, digits: int,
                   replicated: bool = False) -> Control:  # fmt: skip
    """Apply the check's criterion to a control's data (replicated evidence: replicates)."""
    if run.values is None:
        if replicated:
            raise ValueError("a control of replicated evidence needs replicate values, made "
                             "the same way as the check's")  # fmt: skip
        lo, hi = run.interval
        judged = stats.judge(lo, hi, low[0], high[0], predicted[0])
        return Control(run.kind, run.what, run.estimate, lo, hi, judged, digits, run.alternative)
    values = stats.replicate_matrix("control values", run.values)
    if values.shape[0] != low.size:
        raise ValueError(f"control values have {values.shape[0]} settings, the check "
                         f"{low.size}: give the control the same settings")  # fmt: skip
    j = stats.judge_replicates(values, low, high, predicted)
    return Control(run.kind, run.what, j.estimate, j.lo, j.hi, j.outcome, digits, run.alternative)


def _with_holds(check: Evidence) -> Evidence:
    """The check with its threshold sensitivity filled in (`stats.holds_for`)."""
    bound, a, b = stats.holds_for(check.lo, check.hi, check.low, check.high, check.predicted)
    brittle = stats.fragile(bound, a, b, check.low, check.high, check.estimate)
    return replace(check, holds_for=(a, b), holds_bound=bound, fragile=brittle)


def _check_summary(check: Evidence | Audit) -> dict:
    row = {"kind": check.kind, **asdict(check)}
    row.pop("digits")
    row["ours_text"], row["outcome_text"] = check.ours_text(), check.outcome_text()
    if check.kind == "evidence":
        controls = [c.as_dict() for c in check.controls]
        undone = [c for c, r in zip(controls, check.controls, strict=True) if not r.discriminates]
        row["controls"] = controls
        row["control"] = (undone or controls)[0]
        row["counts"] = check.counts
        row["holds_for"] = list(check.holds_for)
        row["holds_text"] = check.holds_text()
        for bound in ("low", "high"):  # JSON has no infinity: an open side is null
            row[bound] = row[bound] if np.isfinite(row[bound]) else None
    return row


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
        from lib.glue import glue

        glue(name, value, display=False)


def _show(*objects) -> None:
    if _in_kernel():
        from IPython.display import display

        display(*objects)
