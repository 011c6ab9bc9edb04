"""The verdict protocol: claims, premises, replicated evidence with controls, audits, summaries.

A chapter declares the abstract's claims, measures the paper's premises for each, attaches every
check to one claim, and lets this package turn the numbers into verdicts:

- **Premises** (`premise`) are the conditions under which the paper says a claim holds (a
  regime, a ratio of exponents, an optimum inside the grid), measured in our run. A claim with an
  unmet premise is *Not tested*, never *Not reproduced*. Every central claim declares one.
- **Evidence** could fail if the paper were wrong. It is computed over independent replicates
  (at least 3) and judged on their mean with a 95% t-interval (Bonferroni-adjusted when one
  check covers several settings) against a criterion fixed before running: `above=t`,
  `below=t` or `within=(a, b)`, plus the effect the paper `predicted`. The outcome is
  *pass* (interval inside the criterion), *fail* (interval outside it, or straddling it while
  excluding the predicted effect) or *inconclusive* (interval straddling the criterion and
  holding the predicted effect), with the detectable effect and the replicates that would
  resolve it.
- **Controls**: every evidence check also runs on a `negative` control (the same measurement
  with the paper's mechanism removed: a fixed parameter, a shuffled score, a one-sided
  surrogate, a law-free rival), judged by the same criterion; it must fail. A check that passes
  its negative control (or fails a `positive` control, an effect of known size) does not
  discriminate: it is shown but does not count. A claim none of whose evidence counts is
  *Not tested*.
- **Audits** can only fail on a bug, a transcription or an identity. They are shown and must
  pass (`finish()` raises if one fails) but never count.
- **Criteria history** (`changed`): every design or criterion changed after a result, with the
  earlier design and what it showed.

Per claim: *Not tested* (declared out of reach, a premise unmet, or no discriminating evidence),
else *Not reproduced* (a counting check fails), *Inconclusive* (one is inconclusive) or
*Reproduced*. Per chapter, from the central claims: *Reproduced* when all are, *Partly
reproduced* when some are, else *Not reproduced*, *Inconclusive* or *Not tested*.

    checks = ClaimChecks("08_verifier_roc", "A verifier's ROC decides test-time scaling")
    checks.claim("rs_beats_bon", "Rejection sampling beats best-of-N", central=True)
    checks.premise("rs_beats_bon", "the verifier's ROC is concave (Prop. 5)", worst_chord,
                   worst_chord <= 0.01, criterion="<= 0.01")
    checks.evidence("rs_beats_bon", "RS - BoN accuracy at C = 4", gaps, above=0.0,
                    predicted=0.03, paper="RS >= BoN (Prop. 5)",
                    control=negative("a verifier that scores at random", random_gaps))
    checks.audit("rs_beats_bon", "exact RS - BoN, min over N <= 256", gap, gap >= -1e-9,
                 criterion=">= -1e-9", paper="Prop. 5")
    checks.finish()  # tables, summary file, glued verdicts
    assert checks.verdict() == "Reproduced"

Summaries go to `book/results/<chapter>.json` (quick scale, base seed 0), `<chapter>.full.json`
at full scale, and `<chapter>[.full].seed<k>.json` under another base seed (ignored by git);
REPRO_RESULTS_DIR redirects them (the seed benchmark does). `load_summaries` reads them back,
validated field by field.
"""

from lib.claims.checks import AuditFailed, ClaimChecks
from lib.claims.records import (
    Audit,
    Change,
    Claim,
    Control,
    ControlRun,
    Evidence,
    Premise,
    negative,
    positive,
)
from lib.claims.stats import (
    LEVEL,
    MIN_REPLICATES,
    POWER,
    holds_for,
    judge,
    rate_interval,
    t_interval,
)
from lib.claims.summary import (
    CLAIM_VERDICTS,
    OUTCOMES,
    RESULTS_DIR,
    VERDICTS,
    SummaryError,
    chapter_verdict,
    load_summaries,
    load_summary,
    read_summary,
    summary_name,
    validate_summary,
)

__all__ = [
    "CLAIM_VERDICTS", "LEVEL", "MIN_REPLICATES", "OUTCOMES", "POWER", "RESULTS_DIR", "VERDICTS",
    "Audit", "AuditFailed", "Change", "Claim", "ClaimChecks", "Control", "ControlRun",
    "Evidence", "Premise", "SummaryError", "chapter_verdict", "holds_for", "judge",
    "load_summaries",
    "load_summary", "negative", "positive", "rate_interval", "read_summary", "summary_name",
    "t_interval", "validate_summary",
]  # fmt: skip
