"""lib.claims: evidence outcomes, Inconclusive from replicates, verdict rules, audits, summaries."""

import json
import math
import stat

import numpy as np
import pytest

from lib.claims import AuditFailed, ClaimChecks, judge, load_summaries, rate_interval, t_interval


def chapter(*claims: tuple[str, bool]) -> ClaimChecks:
    checks = ClaimChecks("99_test_chapter", "A test chapter")
    for claim_id, central in claims:
        checks.claim(claim_id, f"claim {claim_id}", central=central)
    return checks


def planted(mean: float, sd: float, n: int, seed: int = 0) -> np.ndarray:
    return mean + sd * np.random.default_rng(seed).standard_normal(n)


# ------------------------------------------------------------------ one interval, three outcomes
@pytest.mark.parametrize(
    ("lo", "hi", "outcome"),
    [
        (0.1, 0.3, "pass"),  # inside (0, inf)
        (-0.3, -0.1, "fail"),  # outside
        (-0.1, 0.3, "inconclusive"),  # straddles 0 and holds the predicted 0.2
        (-0.1, 0.15, "fail"),  # straddles 0 but excludes 0.2: the data resolve it
    ],
)
def test_judge_one_sided(lo, hi, outcome):
    assert judge(lo, hi, 0.0, np.inf, 0.2) == outcome


def test_t_interval_matches_the_textbook():
    mean, se, q, q_power = t_interval(np.array([[1.0, 2.0, 3.0]]))
    assert mean[0] == 2.0 and math.isclose(se[0], 1 / math.sqrt(3))
    assert math.isclose(q, 4.302652729911275) and math.isclose(q_power, 1.0606601717798212)
    # Bonferroni over 10 settings: the 99.75% quantile with 2 degrees of freedom.
    assert math.isclose(t_interval(np.ones((10, 3)) + np.arange(3), 10)[2], 14.089, rel_tol=1e-4)


def test_rate_interval_is_clopper_pearson():
    rate, lo, hi = rate_interval(0, 10)
    assert rate == 0 and lo == 0 and math.isclose(hi, 0.30849710781876083)
    rate, lo, hi = rate_interval(5, 10)
    assert math.isclose(lo, 0.18708602844739193) and math.isclose(hi, 0.8129139715526081)


# ------------------------------------------------------------------ evidence from replicates
def test_clear_effect_passes_and_clear_absence_fails():
    checks = chapter(("a", True))
    assert checks.evidence("a", "big", planted(1.0, 0.1, 5), above=0, predicted=1,
                           paper="1").outcome == "pass"  # fmt: skip
    assert checks.evidence("a", "wrong sign", planted(-1.0, 0.1, 5), above=0, predicted=1,
                           paper="1").outcome == "fail"  # fmt: skip


def test_inconclusive_is_computed_from_the_replicates():
    """A true effect of 0.2 under noise sd 1 with 4 replicates cannot be told from 0."""
    checks = chapter(("a", True))
    values = planted(0.2, 1.0, 4, seed=3)
    check = checks.evidence("a", "small", values, above=0, predicted=0.2, paper="0.2",
                            resolve="REPRO_SCALE=full")  # fmt: skip
    assert check.outcome == "inconclusive"
    se = values.std(ddof=1) / 2
    mean, _, q, q_power = t_interval(values.reshape(1, -1))
    assert math.isclose(check.detectable, (q + q_power) * se)
    assert check.detectable > 0.2  # the detectable effect exceeds the predicted one
    assert check.needed == max(math.ceil(4 * (check.detectable / 0.2) ** 2), 8)
    assert "full" in check.outcome_text() and checks.verdict() == "Inconclusive"


def test_the_suggested_replicates_resolve_it():
    """With the replicates the inconclusive check asks for, a true 0.2 effect mostly passes."""
    checks = chapter(("a", True))
    needed = checks.evidence("a", "small", planted(0.2, 1.0, 4, seed=3), above=0, predicted=0.2,
                             paper="0.2").needed  # fmt: skip
    outcomes = [
        chapter(("a", True)).evidence("a", "q", planted(0.2, 1.0, needed, seed=s), above=0,
                                      predicted=0.2, paper="0.2").outcome
        for s in range(40)
    ]  # fmt: skip
    assert outcomes.count("pass") >= 24  # about 80% power by construction


def test_an_unlucky_inconclusive_asks_for_more_replicates_not_fewer():
    """Detectable effect already under the predicted one, yet the interval straddles the bound."""
    checks = chapter(("a", True))
    z = np.array([-1.5, -1.0, -0.6, -0.3, 0.0, 0.0, 0.3, 0.6, 1.0, 1.5])
    values = 0.05 + 0.079 * z / z.std(ddof=1)  # mean 0.05, SE 0.025 over 10 replicates
    check = checks.evidence("a", "q", values, within=(-0.1, 0.1), predicted=0.0, paper="0")
    assert check.outcome == "inconclusive" and check.detectable < 0.1
    assert check.needed == 20


def test_many_settings_use_a_bonferroni_interval_and_the_worst_decides():
    checks = chapter(("a", True))
    values = np.vstack([planted(0.0, 0.01, 6, seed=s) for s in range(20)])
    values[7] += 0.5  # one setting far outside the tolerance
    check = checks.evidence("a", "theory - sim", values, within=(-0.05, 0.05), predicted=0.0,
                            paper="exact")  # fmt: skip
    assert check.outcome == "fail" and check.settings == 20
    assert math.isclose(check.estimate, values[7].mean())
    assert "Bonferroni over 20" in check.interval


def test_a_per_setting_tolerance_is_allowed():
    checks = chapter(("a", True))
    values = np.array([planted(0.0, 0.001, 5, seed=s) for s in range(3)])
    tol = np.array([0.01, 0.02, 0.03])
    assert checks.evidence("a", "rel", values, within=(-tol, tol), predicted=0,
                           paper="exact").outcome == "pass"  # fmt: skip


def test_external_interval_for_real_data():
    checks = chapter(("a", True))
    check = checks.evidence_interval("a", "R^2 gain", 0.35, (0.31, 0.40), above=0.3,
                                     predicted=0.35, replicates=200, how="bootstrap",
                                     paper="> 0.3")  # fmt: skip
    assert check.outcome == "pass"
    check = checks.evidence_interval("a", "R^2 gain, noisy", 0.32, (0.1, 0.5), above=0.3,
                                     predicted=0.4, replicates=20, how="bootstrap",
                                     paper="> 0.3")  # fmt: skip
    assert check.outcome == "inconclusive" and check.detectable > 0.2 and check.needed is None


# ------------------------------------------------------------------ verdict rules
@pytest.mark.parametrize(
    ("outcomes", "verdict"),
    [
        (["pass", "pass"], "Reproduced"),
        (["pass", "fail"], "Not reproduced"),
        (["pass", "inconclusive"], "Inconclusive"),
        (["inconclusive", "fail"], "Not reproduced"),
    ],
)
def test_claim_verdict_rule(outcomes, verdict):
    checks = chapter(("a", True))
    planted_for = {"pass": (1.0, 0.01), "fail": (-1.0, 0.01), "inconclusive": (0.2, 1.0)}
    for i, outcome in enumerate(outcomes):
        mean, sd = planted_for[outcome]
        check = checks.evidence("a", f"q{i}", planted(mean, sd, 4, seed=3), above=0,
                                predicted=0.2, paper="0.2")  # fmt: skip
        assert check.outcome == outcome
    assert checks.claim_verdict("a") == verdict


@pytest.mark.parametrize(
    ("central", "verdict"),
    [
        (["Reproduced", "Reproduced"], "Reproduced"),
        (["Not reproduced", "Not reproduced"], "Not reproduced"),
        (["Inconclusive", "Inconclusive"], "Inconclusive"),
        (["Reproduced", "Not reproduced"], "Partly reproduced"),
        (["Reproduced", "Inconclusive"], "Partly reproduced"),
    ],
)
def test_chapter_verdict_comes_from_the_central_claims(central, verdict):
    checks = chapter(("c1", True), ("c2", True), ("side", False))
    planted_for = {"Reproduced": 1.0, "Not reproduced": -1.0}
    for claim, claim_verdict in zip(("c1", "c2"), central, strict=True):
        if claim_verdict == "Inconclusive":
            values = planted(0.2, 1.0, 4, seed=3)
        else:
            values = planted(planted_for[claim_verdict], 0.01, 4)
        checks.evidence(claim, f"{claim} q", values, above=0, predicted=0.2, paper="0.2")
    # A failing supporting claim never changes the chapter verdict.
    checks.evidence("side", "side q", planted(-1, 0.01, 4), above=0, predicted=0.2, paper="0.2")
    assert checks.verdict() == verdict


def test_an_audit_cannot_change_a_verdict(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_RESULTS_DIR", str(tmp_path))
    checks = chapter(("a", True))
    checks.evidence("a", "q", planted(1.0, 0.01, 4), above=0, predicted=1, paper="1")
    before = checks.verdict()
    checks.audit("a", "identity", 1.0, False, criterion="== 0", paper="0")
    assert checks.verdict() == before == "Reproduced"
    assert [a.quantity for a in checks.failed_audits()] == ["identity"]
    with pytest.raises(AuditFailed, match="identity"):
        checks.finish()
    assert json.loads(next(tmp_path.glob("*.json")).read_text())["audits_passed"] is False


def test_untested_claims_are_shown_but_never_central():
    checks = chapter(("a", True))
    checks.claim("headline", "71% on real benchmarks", central=False, untested="needs a 7B model")
    assert checks.claim_verdict("headline") == "Not tested"
    with pytest.raises(ValueError, match="untested"):
        checks.claim("b", "x", central=True, untested="too big")
    with pytest.raises(ValueError, match="takes no checks"):
        checks.audit("headline", "q", 1.0, True, criterion="c", paper="p")


# ------------------------------------------------------------------ summaries
def test_summary_round_trips_through_save(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_SCALE", "quick")
    monkeypatch.setenv("REPRO_SEED", "0")
    checks = chapter(("a", True), ("b", False))
    checks.evidence("a", "q", planted(1.0, 0.01, 4), above=0, predicted=1, paper="1")
    checks.evidence("b", "r", planted(-1.0, 0.01, 4), above=0, predicted=1, paper="1")
    path = checks.save(tmp_path)
    assert path.name == "99_test_chapter.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # readable by all
    saved = json.loads(path.read_text())
    assert saved["verdict"] == "Reproduced" and saved["base_seed"] == 0
    assert [c["verdict"] for c in saved["claims"]] == ["Reproduced", "Not reproduced"]
    assert (
        saved["claims"][1]["deciding"].startswith("r = ") and saved["claims"][1]["replicates"] == 4
    )
    assert [s["chapter"] for s in load_summaries(tmp_path)] == ["99_test_chapter"]
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file was renamed, not left behind


@pytest.mark.parametrize(
    ("scale", "seed", "name"),
    [("full", "0", "99_test_chapter.full.json"), ("quick", "3", "99_test_chapter.seed3.json")],
)
def test_other_scales_and_seeds_are_kept_apart(tmp_path, monkeypatch, scale, seed, name):
    monkeypatch.setenv("REPRO_SCALE", scale)
    monkeypatch.setenv("REPRO_SEED", seed)
    checks = chapter(("a", True))
    checks.evidence("a", "q", planted(1.0, 0.01, 4), above=0, predicted=1, paper="1")
    assert checks.save(tmp_path).name == name
    assert load_summaries(tmp_path) == []


def test_tables_show_every_check_and_claim():
    checks = chapter(("a", True))
    checks.evidence("a", "q", planted(1.0, 0.01, 4), above=0, predicted=1, paper="1")
    checks.audit("a", "identity", 0.0, True, criterion="== 0", paper="0")
    frame = checks.table().data
    assert list(frame["kind"]) == ["evidence", "audit"]
    assert list(frame["outcome"]) == ["pass", "pass"]
    assert list(checks.verdict_table().data["verdict"]) == ["Reproduced"]


def test_checks_display_as_one_line_in_jupyter():
    from IPython.lib.pretty import pretty

    checks = chapter(("a", True))
    audit = checks.audit("a", "R^2", 0.8512, False, criterion=">= 0.9", paper="0.9")
    assert pretty(audit) == "audit FAIL: R^2 = 0.851 (>= 0.9)"
    check = checks.evidence("a", "gap", [1.0, 1.1, 0.9], above=0, predicted=1, paper="1")
    assert pretty(check).startswith("pass: gap = 1 [")


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda c: c.evidence("a", "q", [1.0, 2.0], above=0, predicted=1, paper="p"),
         ValueError, ">= 3 replicates"),
        (lambda c: c.evidence("a", "q", [1.0, np.nan, 2.0], above=0, predicted=1, paper="p"),
         ValueError, "NaN"),
        (lambda c: c.evidence("a", "q", [1, 2, 3], above=0, below=1, predicted=0.5, paper="p"),
         ValueError, "exactly one criterion"),
        (lambda c: c.evidence("a", "q", [1, 2, 3], above=0, predicted=-1, paper="p"),
         ValueError, "predicted must meet"),
        (lambda c: c.evidence("zz", "q", [1, 2, 3], above=0, predicted=1, paper="p"),
         ValueError, "unknown claim"),
        (lambda c: c.evidence("a", "q", [1, 2, 3], within=(1, 0), predicted=0.5, paper="p"),
         ValueError, "a < b"),
        (lambda c: c.evidence("a", "q", "123", above=0, predicted=1, paper="p"),
         TypeError, "string"),
        (lambda c: c.audit("a", "q", 1.0, "yes", criterion="c", paper="p"),
         TypeError, "passed must be True or False"),
        (lambda c: c.audit("a", "q", None, True, criterion="c", paper="p"),
         TypeError, "ours must be a real number"),
        (lambda c: c.audit("a", "q", 1.0, True, criterion=3, paper="p"),
         TypeError, "criterion must be a string"),
        (lambda c: c.audit("a", "q", 1.0, True, criterion="c", paper="p", digits=0),
         ValueError, "digits must be >= 1"),
        (lambda c: c.audit("a", "q", 1.0, True, criterion="c", paper="p", uncertainty=-1.0),
         ValueError, "uncertainty must lie in"),
        (lambda c: (c.audit("a", "q", 1.0, True, criterion="c", paper="p"),
                    c.audit("a", "q", 1.0, True, criterion="c", paper="p")),
         ValueError, "already checked"),
        (lambda c: c.claim("a", "again", central=True), ValueError, "already declared"),
        (lambda c: c.claim("b", "x", central=1), TypeError, "central must be True or False"),
    ],
)  # fmt: skip
def test_bad_checks_are_clear_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(chapter(("a", True)))


def test_a_chapter_needs_a_numbered_name_and_a_central_claim():
    with pytest.raises(ValueError, match="chapter must look like"):
        ClaimChecks("attention", "t")
    with pytest.raises(ValueError, match="no central claim"):
        chapter(("a", False)).verdict()
    with pytest.raises(ValueError, match="has no evidence"):
        chapter(("a", True)).verdict()
