"""The records of the verdict protocol: claims, premises, controls, checks and criteria changes.

Each record is a frozen dataclass that knows how to show itself in a table cell. Building and
judging them is `lib.claims.checks`; the statistics are `lib.claims.stats`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from lib import validate


def sig(x: float | None, digits: int) -> str:
    """Format x with `digits` significant figures ('' for None, 'inf' for infinities)."""
    if x is None:
        return ""
    return f"{x:.{digits}g}" if math.isfinite(x) else str(x)


@dataclass(frozen=True)
class Claim:
    """One claim of the paper's abstract, in our words; `untested` says why it is out of reach."""

    id: str
    text: str
    central: bool
    untested: str | None = None


PREMISE_SOURCES = ("measured", "design")
PREMISE_ROLES = ("regime", "room", "mechanism")


@dataclass(frozen=True)
class Premise:
    """A condition under which the paper says a claim holds, as it stands in our run.

    value: the quantity (with its 95% interval `lo`, `hi` when it has one); criterion: the
    paper's range, in words; met: whether `value` meets it (computed by the chapter from the
    value, like an audit's `passed`). source: 'measured' (read off this run: it could fail) or
    'design' (a constant the chapter set: a setting, shown as such, never a met premise).
    role: 'regime' (the paper's conditions), 'room' (the outcome still moves with the quantity
    the claim varies: the task is not saturated) or 'mechanism' (removing the paper's mechanism
    changes the outcome in this toy).
    """

    claim: str
    premise: str
    value: float
    criterion: str
    met: bool
    lo: float | None = None
    hi: float | None = None
    digits: int = 3
    source: str = "measured"
    role: str = "regime"

    def measured(self) -> str:
        """The measurement in words, e.g. '1.02 [0.91, 1.1]; needs in [0.67, 1.5]'."""
        text = sig(self.value, self.digits)
        if self.lo is not None:
            text += f" [{sig(self.lo, 2)}, {sig(self.hi, 2)}]"
        return f"{text}; needs {self.criterion}"

    def text(self) -> str:
        """One line for a table: met, UNMET or setting (a design value), the premise, its role
        when not 'regime', and the value."""
        if self.source == "design":
            status = "setting" if self.met else "UNMET setting"
        else:
            status = "met" if self.met else "UNMET"
        role = "" if self.role == "regime" else f" [{self.role}]"
        return f"{status}{role}: {self.premise} ({self.measured()})"


def holds_phrase(outcome: str, bound: str, a: float | None, b: float | None, low: float,
                 high: float, fragile: bool) -> str:  # fmt: skip
    """An outcome and the thresholds that keep it, e.g. 'pass for lower threshold < 0.52'."""
    a, b = (None if x is None else sig(x, 2) for x in (a, b))
    two_sided = math.isfinite(low) and math.isfinite(high)
    what = f"{'lower' if bound == 'low' else 'upper'} threshold" if two_sided else "threshold"
    if a is None and b is None:
        span = "any threshold"
    elif a is None:
        span = f"{what} < {b}"
    elif b is None:
        span = f"{what} > {a}"
    else:
        span = f"{what} in [{a}, {b}]"
    return f"{outcome} for {span}" + (" (FRAGILE: within 10%)" if fragile else "")


CONTROL_KINDS = ("negative", "positive")


@dataclass(frozen=True)
class ControlRun:
    """The raw data of a control, before judging: the same measurement with the paper's
    mechanism removed (negative) or with an effect of known size planted (positive).

    Replicated evidence takes `values` ((R,) or (S, R), like the evidence); evidence with an
    external interval takes `estimate` and `interval`. `alternative` is the explanation of the
    result that the control rules out, in one sentence. Build one with `negative` or `positive`.
    """

    kind: str
    what: str
    alternative: str
    values: np.ndarray | None = None
    estimate: float | None = None
    interval: tuple[float, float] | None = None


def _control_run(kind: str, what: str, alternative, values, estimate, interval) -> ControlRun:
    validate.text("what", what)
    if alternative is None:
        raise TypeError(
            f"control {what!r} needs alternative='...': one sentence naming the explanation it "
            "rules out (e.g. 'the trend comes from the optimiser alone, not from the law')"
        )
    validate.text("alternative", alternative)
    if (values is None) == (estimate is None and interval is None):
        raise ValueError(
            "a control takes either replicate `values` or an `estimate` with its `interval`"
        )
    if values is not None:
        values = validate.array("control values", values, ndim=None)
        return ControlRun(kind, what, alternative, values=values)
    if estimate is None or interval is None:
        raise ValueError("a control with an external interval needs both estimate= and interval=")
    lo, hi = (validate.real(f"control interval[{i}]", v) for i, v in enumerate(interval))
    estimate = validate.real("control estimate", estimate)
    if not lo <= estimate <= hi:
        raise ValueError(f"control interval {interval!r} must contain its estimate {estimate}")
    return ControlRun(kind, what, alternative, estimate=estimate, interval=(lo, hi))


def negative(what: str, values=None, *, alternative: str | None = None, estimate=None,
             interval=None) -> ControlRun:  # fmt: skip
    """A negative control: the check's measurement with the paper's mechanism removed, or under
    the cheapest explanation a referee would try first (content-blind, one-sided, law-free, a
    trivial rule). `alternative` names that explanation in one sentence.

    The check must FAIL on it; one that passes does not discriminate and cannot count.
    """
    return _control_run("negative", what, alternative, values, estimate, interval)


def positive(what: str, values=None, *, alternative: str | None = None, estimate=None,
             interval=None) -> ControlRun:  # fmt: skip
    """A positive control: the check's measurement on an effect of known size; it must PASS.
    `alternative` names what it rules out (e.g. 'the check is too blunt to see the effect')."""
    return _control_run("positive", what, alternative, values, estimate, interval)


@dataclass(frozen=True)
class Control:
    """A judged control: the check's criterion applied to the control's data.

    judged: the check's raw outcome on the control ('pass', 'fail' or 'inconclusive');
    outcome: 'pass' or 'fail' as the summary records it (an inconclusive negative control did
    not fail, so it reads 'pass'; an inconclusive positive control did not pass: 'fail').
    """

    kind: str
    what: str
    estimate: float
    lo: float
    hi: float
    judged: str
    digits: int = 3
    alternative: str = ""

    @property
    def outcome(self) -> str:
        if self.kind == "negative":
            return "fail" if self.judged == "fail" else "pass"
        return "pass" if self.judged == "pass" else "fail"

    @property
    def discriminates(self) -> bool:
        """A negative control must fail and a positive one must pass."""
        return self.outcome == ("fail" if self.kind == "negative" else "pass")

    def text(self) -> str:
        """One line for a table, e.g. 'negative (fixed beta): 0.01 [-0.02, 0.04] fails, as it
        must'."""
        verb = "fails" if self.outcome == "fail" else "passes"
        verdict = "as it must" if self.discriminates else "SO THE CHECK DOES NOT COUNT"
        return (
            f"{self.kind} ({self.what}): {sig(self.estimate, self.digits)} "
            f"[{sig(self.lo, 2)}, {sig(self.hi, 2)}] {verb}, {verdict}"
        )

    def as_dict(self) -> dict:
        return {
            "kind": self.kind, "what": self.what, "alternative": self.alternative,
            "outcome": self.outcome, "judged": self.judged, "estimate": self.estimate,
            "lo": self.lo, "hi": self.hi,
        }  # fmt: skip


@dataclass(frozen=True)
class Evidence:
    """One evidence check: the estimate, its interval, the criterion, the outcome and controls.

    `low`, `high` are the criterion's bounds at the deciding setting (infinite when one-sided).
    It counts toward its claim's verdict only if every control discriminates.
    """

    claim: str
    quantity: str
    paper: str
    estimate: float  # mean over replicates (of the deciding setting)
    lo: float  # 95% interval, adjusted for the number of settings
    hi: float
    replicates: int
    settings: int
    criterion: str
    low: float
    high: float
    predicted: float
    outcome: str  # 'pass', 'fail' or 'inconclusive'
    interval: str  # how the interval was made
    controls: tuple[Control, ...] = field(default_factory=tuple)
    detectable: float | None = None  # minimum detectable effect, when inconclusive
    needed: int | None = None  # replicates that would resolve it, when computable
    resolve: str | None = None  # the chapter's note on the scale that would resolve it
    digits: int = 3
    holds_for: tuple[float | None, float | None] = (None, None)  # thresholds keeping the outcome
    holds_bound: str = "low"  # the criterion's bound that holds_for moves: 'low' or 'high'
    fragile: bool = False  # a move of the threshold by 10% of its size changes the outcome
    rival: dict | None = None  # a rival comparison: name, alternative, margin, test

    kind = "evidence"

    @property
    def counts(self) -> bool:
        """Whether the check counts toward a verdict: every control discriminates."""
        return all(c.discriminates for c in self.controls)

    def holds_text(self) -> str:
        """The thresholds over which the outcome holds, e.g. 'pass for threshold < 0.52'."""
        return holds_phrase(self.outcome, self.holds_bound, *self.holds_for, self.low,
                            self.high, self.fragile)  # fmt: skip

    def ours_text(self) -> str:
        """The estimate and its interval, e.g. '0.031 [0.012, 0.050]'."""
        return f"{sig(self.estimate, self.digits)} [{sig(self.lo, 2)}, {sig(self.hi, 2)}]"

    def outcome_text(self) -> str:
        """The outcome, with the detectable effect and what would resolve an inconclusive one."""
        if self.outcome != "inconclusive":
            return self.outcome
        text = f"inconclusive: detectable {sig(self.detectable, 2)}"
        if self.needed is not None:
            text += f"; ~{self.needed} replicates would resolve it"
        return text + (f" ({self.resolve})" if self.resolve else "")

    def control_text(self) -> str:
        return "; ".join(c.text() for c in self.controls)

    def alternatives(self) -> tuple[int, int]:
        """(ruled out, total): the negative controls that fail as they must, and the rival."""
        negatives = [c for c in self.controls if c.kind == "negative"]
        ruled_out = sum(c.discriminates for c in negatives)
        if self.rival is not None:
            return ruled_out + (self.outcome == "pass"), len(negatives) + 1
        return ruled_out, len(negatives)

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(
            f"{self.outcome_text()}: {self.quantity} = {self.ours_text()} "
            f"({self.criterion}; {self.replicates} replicates); control: {self.control_text()}"
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
        text = sig(self.ours, self.digits)
        return text + (f" ± {sig(self.uncertainty, 2)}" if self.uncertainty is not None else "")

    def outcome_text(self) -> str:
        return "pass" if self.passed else "FAIL"

    def control_text(self) -> str:
        return ""

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(f"audit {self.outcome_text()}: {self.quantity} = {self.ours_text()} "
                     f"({self.criterion})")  # fmt: skip


@dataclass(frozen=True)
class Change:
    """One entry of a chapter's criteria history: a design or criterion changed after a result.

    date: when (YYYY-MM-DD, from the git log); change: what changed; before: the earlier design
    and what it showed; why: the reason.
    """

    date: str
    change: str
    before: str
    why: str
