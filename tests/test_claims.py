"""lib.claims: evidence outcomes, Inconclusive from replicates, verdict rules, audits, summaries."""

import json
import math
import stat

import numpy as np
import pytest

from lib.claims import (
    AuditFailed,
    ClaimChecks,
    SummaryError,
    chapter_verdict,
    holds_for,
    judge,
    load_summaries,
    negative,
    positive,
    rate_interval,
    t_interval,
    validate_summary,
)

ALT = "a stand-in explanation"  # the alternative every control of these tests names


def chapter(*claims: tuple[str, bool], premises: bool = True) -> ClaimChecks:
    """A test chapter whose claims each have one met premise (unless premises=False)."""
    checks = ClaimChecks("99_test_chapter", "A test chapter")
    for claim_id, central in claims:
        checks.claim(claim_id, f"claim {claim_id}", central=central)
        if premises:
            checks.premise(
                claim_id, "the paper's regime", 1.0, True, criterion="> 0", source="measured"
            )
    return checks


def planted(mean: float, sd: float, n: int, seed: int = 0) -> np.ndarray:
    return mean + sd * np.random.default_rng(seed).standard_normal(n)


# A negative control far outside every criterion these tests use: it fails, so checks count.
NULL = negative("no effect", planted(-5.0, 0.01, 4, seed=99), alternative=ALT)
NULL_INTERVAL = negative("no effect", estimate=-5.0, interval=(-5.1, -4.9), alternative=ALT)


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
                           control=NULL, paper="1").outcome == "pass"  # fmt: skip
    assert checks.evidence("a", "wrong sign", planted(-1.0, 0.1, 5), above=0, predicted=1,
                           control=NULL, paper="1").outcome == "fail"  # fmt: skip


def test_inconclusive_is_computed_from_the_replicates():
    """A true effect of 0.2 under noise sd 1 with 4 replicates cannot be told from 0."""
    checks = chapter(("a", True))
    values = planted(0.2, 1.0, 4, seed=3)
    check = checks.evidence("a", "small", values, above=0, predicted=0.2, control=NULL, paper="0.2",
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
                             control=NULL, paper="0.2").needed  # fmt: skip
    outcomes = [
        chapter(("a", True)).evidence("a", "q", planted(0.2, 1.0, needed, seed=s), above=0,
                                      predicted=0.2, control=NULL, paper="0.2").outcome
        for s in range(40)
    ]  # fmt: skip
    assert outcomes.count("pass") >= 24  # about 80% power by construction


def test_an_unlucky_inconclusive_asks_for_more_replicates_not_fewer():
    """Detectable effect already under the predicted one, yet the interval straddles the bound."""
    checks = chapter(("a", True))
    z = np.array([-1.5, -1.0, -0.6, -0.3, 0.0, 0.0, 0.3, 0.6, 1.0, 1.5])
    values = 0.05 + 0.079 * z / z.std(ddof=1)  # mean 0.05, SE 0.025 over 10 replicates
    check = checks.evidence(
        "a", "q", values, within=(-0.1, 0.1), predicted=0.0, control=NULL, paper="0"
    )
    assert check.outcome == "inconclusive" and check.detectable < 0.1
    assert check.needed == 20


def test_many_settings_use_a_bonferroni_interval_and_the_worst_decides():
    checks = chapter(("a", True))
    values = np.vstack([planted(0.0, 0.01, 6, seed=s) for s in range(20)])
    values[7] += 0.5  # one setting far outside the tolerance
    null = negative("no effect", values + 1.0, alternative=ALT)
    check = checks.evidence("a", "theory - sim", values, within=(-0.05, 0.05), predicted=0.0,
                            control=null, paper="exact")  # fmt: skip
    assert check.outcome == "fail" and check.settings == 20
    assert math.isclose(check.estimate, values[7].mean())
    assert "Bonferroni over 20" in check.interval


def test_a_per_setting_tolerance_is_allowed():
    checks = chapter(("a", True))
    values = np.array([planted(0.0, 0.001, 5, seed=s) for s in range(3)])
    tol = np.array([0.01, 0.02, 0.03])
    off = negative("off", values + 1, alternative=ALT)
    assert checks.evidence("a", "rel", values, within=(-tol, tol), predicted=0, control=off,
                           paper="exact").outcome == "pass"  # fmt: skip


def test_external_interval_for_real_data():
    checks = chapter(("a", True))
    check = checks.evidence_interval("a", "R^2 gain", 0.35, (0.31, 0.40), above=0.3,
                                     predicted=0.35, replicates=200, how="bootstrap",
                                     control=NULL_INTERVAL, paper="> 0.3")  # fmt: skip
    assert check.outcome == "pass"
    check = checks.evidence_interval("a", "R^2 gain, noisy", 0.32, (0.1, 0.5), above=0.3,
                                     predicted=0.4, replicates=20, how="bootstrap",
                                     control=NULL_INTERVAL, paper="> 0.3")  # fmt: skip
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
                                predicted=0.2, control=NULL, paper="0.2")  # fmt: skip
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
        checks.evidence(
            claim, f"{claim} q", values, above=0, predicted=0.2, control=NULL, paper="0.2"
        )
    # A failing supporting claim never changes the chapter verdict.
    checks.evidence(
        "side", "side q", planted(-1, 0.01, 4), above=0, predicted=0.2, control=NULL, paper="0.2"
    )
    assert checks.verdict() == verdict


def test_an_audit_cannot_change_a_verdict(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_RESULTS_DIR", str(tmp_path))
    checks = chapter(("a", True))
    checks.evidence("a", "q", planted(1.0, 0.01, 4), above=0, predicted=1, control=NULL, paper="1")
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
    checks.evidence("a", "q", planted(1.0, 0.01, 4), above=0, predicted=1, control=NULL, paper="1")
    checks.evidence("b", "r", planted(-1.0, 0.01, 4), above=0, predicted=1, control=NULL, paper="1")
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
    checks.evidence("a", "q", planted(1.0, 0.01, 4), above=0, predicted=1, control=NULL, paper="1")
    assert checks.save(tmp_path).name == name
    assert load_summaries(tmp_path) == []


def test_tables_show_every_check_and_claim():
    checks = chapter(("a", True))
    checks.evidence("a", "q", planted(1.0, 0.01, 4), above=0, predicted=1, control=NULL, paper="1")
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
    check = checks.evidence(
        "a", "gap", [1.0, 1.1, 0.9], above=0, predicted=1, control=NULL, paper="1"
    )
    assert pretty(check).startswith("pass: gap = 1 [")


# ------------------------------------------------------------------ bad input
P = {"paper": "p", "control": NULL}  # what every evidence call below shares


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda c: c.evidence("a", "q", [1.0, 2.0], above=0, predicted=1, **P),
         ValueError, ">= 3 replicates"),
        (lambda c: c.evidence("a", "q", [1.0, np.nan, 2.0], above=0, predicted=1, **P),
         ValueError, "NaN"),
        (lambda c: c.evidence("a", "q", [1, 2, 3], above=0, below=1, predicted=0.5, **P),
         ValueError, "exactly one criterion"),
        (lambda c: c.evidence("a", "q", [1, 2, 3], above=0, predicted=-1, **P),
         ValueError, "predicted must meet"),
        (lambda c: c.evidence("zz", "q", [1, 2, 3], above=0, predicted=1, **P),
         ValueError, "unknown claim"),
        (lambda c: c.evidence("a", "q", [1, 2, 3], within=(1, 0), predicted=0.5, **P),
         ValueError, "a < b"),
        (lambda c: c.evidence("a", "q", "123", above=0, predicted=1, **P),
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


# ------------------------------------------------------------------ premises, controls, history
def test_a_check_that_passes_its_negative_control_cannot_count():
    """The same measurement with the mechanism removed passes too: it does not discriminate."""
    checks = chapter(("a", True))
    useless = negative("mechanism removed", planted(1.0, 0.01, 4, seed=1), alternative=ALT)
    check = checks.evidence("a", "q", planted(1.0, 0.01, 4), above=0, predicted=1, paper="1",
                            control=useless)  # fmt: skip
    assert check.outcome == "pass" and check.controls[0].outcome == "pass"
    assert not check.counts
    assert checks.claim_verdict("a") == "Not tested"  # not Reproduced: nothing discriminated
    assert "no evidence check discriminates" in checks.untested_reason("a")
    assert checks.verdict() == "Not tested"


def test_only_discriminating_checks_decide_a_claim():
    checks = chapter(("a", True))
    checks.evidence("a", "good", planted(1.0, 0.01, 4), above=0, predicted=1, paper="1",
                    control=NULL)  # fmt: skip
    # A failing check whose negative control passes cannot tell the mechanism from its absence.
    checks.evidence("a", "blind", planted(-1.0, 0.01, 4), above=0, predicted=1, paper="1",
                    control=negative("null", planted(1.0, 0.01, 4, seed=2),
                                     alternative=ALT))  # fmt: skip
    assert checks.claim_verdict("a") == "Reproduced"  # the failing check is not evidence
    assert checks.deciding("a").quantity == "good"
    assert list(checks.table().data["kind"]) == ["evidence", "evidence (does not count)"]


def test_an_inconclusive_negative_control_did_not_fail():
    checks = chapter(("a", True))
    vague = negative(
        "null", planted(0.2, 1.0, 4, seed=3), alternative=ALT
    )  # straddles 0, holds 0.2
    check = checks.evidence("a", "q", planted(1.0, 0.01, 4), above=0, predicted=0.2, paper="0.2",
                            control=vague)  # fmt: skip
    assert check.controls[0].judged == "inconclusive" and check.controls[0].outcome == "pass"
    assert not check.counts


def test_a_positive_control_must_pass_and_every_control_must_discriminate():
    checks = chapter(("a", True))
    planted_effect = positive("effect of 1 planted", planted(1.0, 0.01, 4, seed=5), alternative=ALT)
    check = checks.evidence("a", "q", planted(1.0, 0.01, 4), above=0, predicted=1, paper="1",
                            control=[NULL, planted_effect])  # fmt: skip
    assert check.counts and checks.claim_verdict("a") == "Reproduced"
    missed = positive(
        "effect of 1 planted, missed",
        planted(0.0, 1.0, 4, seed=5),
        alternative=ALT,
    )
    check = checks.evidence("a", "q2", planted(1.0, 0.01, 4), above=0, predicted=1, paper="1",
                            control=[NULL, missed])  # fmt: skip
    assert check.controls[1].outcome == "fail" and not check.counts


def test_an_unmet_premise_gives_not_tested_never_not_reproduced():
    checks = chapter(("a", True), premises=False)
    checks.premise("a", "exponents close (paper: ratio near 1)", 3.3, False,
                   criterion="in [0.67, 1.5]", interval=(3.0, 3.6), source="measured")  # fmt: skip
    checks.evidence("a", "q", planted(-1.0, 0.01, 4), above=0, predicted=1, paper="1",
                    control=NULL)  # fmt: skip
    assert checks.claim_verdict("a") == "Not tested"
    reason = checks.untested_reason("a")
    assert "exponents close" in reason and "3.3 [3, 3.6]" in reason and "0.67" in reason
    summary = checks.summary()
    assert summary["verdict"] == "Not tested"
    premise = summary["claims"][0]["premises"][0]
    assert premise["met"] is False and premise["measured"].startswith("3.3")
    assert summary["claims"][0]["untested"] == reason


def test_every_central_claim_declares_a_premise():
    checks = chapter(("a", True), premises=False)
    checks.evidence("a", "q", planted(1.0, 0.01, 4), above=0, predicted=1, paper="1",
                    control=NULL)  # fmt: skip
    with pytest.raises(ValueError, match="declare no premise"):
        checks.summary()


@pytest.mark.parametrize(
    ("central", "verdict"),
    [
        (["Not reproduced", "Inconclusive"], "Not reproduced"),
        (["Reproduced", "Not tested"], "Partly reproduced"),
        (["Not reproduced", "Not tested"], "Not reproduced"),
        (["Inconclusive", "Not tested"], "Inconclusive"),
        (["Not tested", "Not tested"], "Not tested"),
    ],
)
def test_chapter_verdict_with_untested_and_mixed_claims(central, verdict):
    assert chapter_verdict(central) == verdict


def test_every_evidence_check_needs_a_control():
    checks = chapter(("a", True))
    with pytest.raises(TypeError, match="every evidence check needs a control"):
        checks.evidence("a", "q", [1.0, 1.1, 0.9], above=0, predicted=1, paper="1", control=None)
    with pytest.raises(ValueError, match="same settings"):
        checks.evidence("a", "q", np.ones((2, 4)) + planted(0, 0.01, 4), above=0, predicted=1,
                        paper="1", control=NULL)  # fmt: skip
    with pytest.raises(ValueError, match="needs replicate values"):
        checks.evidence("a", "q", [1.0, 1.1, 0.9], above=0, predicted=1, paper="1",
                        control=NULL_INTERVAL)  # fmt: skip
    with pytest.raises(ValueError, match="either replicate"):
        negative("x", alternative=ALT)
    with pytest.raises(ValueError, match="contain its estimate"):
        negative("x", estimate=2.0, interval=(0.0, 1.0), alternative=ALT)


def test_the_criteria_history_and_context_reach_the_summary(tmp_path):
    checks = chapter(("a", True))
    checks.evidence("a", "q", planted(1.0, 0.01, 4), above=0, predicted=1, paper="1",
                    control=NULL)  # fmt: skip
    checks.changed("threshold 0.1 -> 0.05", before="0.1 failed at 1 of 7 seeds",
                   why="the paper's effect is 0.05", date="2026-11-02")  # fmt: skip
    checks.context["isolation"] = "namespaces"
    saved = json.loads(checks.save(tmp_path).read_text())
    assert saved["criteria_history"] == [{"date": "2026-11-02", "change": "threshold 0.1 -> 0.05",
                                          "before": "0.1 failed at 1 of 7 seeds",
                                          "why": "the paper's effect is 0.05"}]  # fmt: skip
    assert saved["context"] == {"isolation": "namespaces"}
    evidence = saved["checks"][0]
    assert evidence["control"]["kind"] == "negative" and evidence["control"]["outcome"] == "fail"
    assert evidence["low"] == 0 and evidence["high"] is None and evidence["counts"] is True
    assert list(checks.history_table().data.columns) == ["date", "what changed", "before", "why"]
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        checks.changed("x", before="y", why="z", date="last week")


# ------------------------------------------------------------------ reading summaries back
def saved_summary(tmp_path) -> dict:
    checks = chapter(("a", True))
    checks.evidence("a", "q", planted(1.0, 0.01, 4), above=0, predicted=1, paper="1",
                    control=NULL)  # fmt: skip
    return json.loads(checks.save(tmp_path).read_text())


def edited(summary: dict, path: str, value) -> dict:
    """A deep copy of summary with the field at 'claims.0.verdict'-style path set to value."""
    copy = json.loads(json.dumps(summary))
    *parents, last = path.split(".")
    target = copy
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return copy


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b'{"chapter": "99_test', "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[]", "expected a JSON object"),
    ],
)
def test_unreadable_summaries_name_the_file(tmp_path, content, message):
    (tmp_path / "99_test_chapter.json").write_bytes(content)
    with pytest.raises(SummaryError, match=f"99_test_chapter.json.*{message}"):
        load_summaries(tmp_path)


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("claims", KeyError, "missing field 'claims'"),
        ("verdict", "Reproducd", "field 'verdict' is 'Reproducd'"),
        ("claims.0.verdict", "Reproducd", r"claims\[0\]: field 'verdict'"),
        ("claims.0.central", "no", r"claims\[0\]: field 'central' must be bool"),
        ("claims.0.premises", [], "at least one premise"),
        ("claims.0.premises.0.met", 1, "field 'met' must be bool"),
        ("checks.0.control", KeyError, r"checks\[0\]: missing field 'control'"),
        ("checks.0.control.outcome", "fails", "expected one of"),
        ("criteria_history", None, "field 'criteria_history' must be list"),
        ("audits_passed", "yes", "field 'audits_passed' must be bool"),
        ("base_seed", True, "field 'base_seed' must be int"),
        ("verdict", "Not reproduced", "its central claims give 'Reproduced'"),
    ],
)
def test_broken_summaries_name_the_file_and_the_field(tmp_path, path, value, message):
    broken = edited(saved_summary(tmp_path), path, value)
    (tmp_path / "99_test_chapter.json").write_text(json.dumps(broken))
    with pytest.raises(SummaryError, match=message):
        load_summaries(tmp_path)


def test_a_summary_under_the_wrong_name_is_refused(tmp_path):
    summary = edited(saved_summary(tmp_path), "scale", "full")
    (tmp_path / "99_test_chapter.json").write_text(json.dumps(summary))
    with pytest.raises(SummaryError, match="do not match its name"):
        load_summaries(tmp_path)


# ------------------------------------------------------------------ referee-proof verdicts
def test_every_control_names_the_alternative_it_rules_out(tmp_path):
    with pytest.raises(TypeError, match="needs alternative="):
        negative("shuffled scores", [0.0, 0.1, 0.2])
    with pytest.raises(ValueError, match="alternative must not be empty"):
        negative("shuffled scores", [0.0, 0.1, 0.2], alternative="  ")
    saved = saved_summary(tmp_path)
    assert saved["format"] == 2
    assert saved["checks"][0]["controls"][0]["alternative"] == "a stand-in explanation"
    assert saved["claims"][0]["alternatives"] == {"ruled_out": 1, "total": 1}


def test_one_passing_negative_control_among_several_stops_the_check_counting():
    checks = chapter(("a", True))
    content_blind = negative("an unclustered simplex", planted(1.0, 0.01, 4, seed=7),
                             alternative="the slope needs no clusters")  # fmt: skip
    checks.evidence("a", "slope", planted(1.0, 0.01, 4), above=0.5, predicted=1.0, paper="p",
                    control=[NULL, content_blind])  # fmt: skip
    assert not checks.checks[0].counts and checks.claim_verdict("a") == "Not tested"
    assert checks.alternatives("a") == (1, 2)
    rows = checks.referee_table().data
    assert list(rows["outcome"]) == ["ruled out (the control fails)",
                                     "NOT ruled out (the control passes)"]  # fmt: skip
    assert set(rows["check counts"]) == {"no"}


def test_a_design_premise_is_a_setting_not_a_measured_premise(tmp_path):
    checks = ClaimChecks("99_test_chapter", "A test chapter")
    checks.claim("a", "claim a", central=True)
    checks.premise("a", "compared at kappa = 1", 1.0, True, criterion="= 1", source="design")
    checks.evidence("a", "q", planted(1.0, 0.01, 4), above=0, predicted=1, paper="p",
                    control=NULL)  # fmt: skip
    assert checks.premises[0].text().startswith("setting:")
    with pytest.raises(ValueError, match="only design premises"):
        checks.summary()
    with pytest.raises(ValueError, match="needs source='measured'"):
        checks.premise("a", "room", 1.0, True, criterion="> 0")
    with pytest.raises(ValueError, match="role must be one of"):
        checks.premise("a", "room", 1.0, True, criterion="> 0", source="measured", role="x")
    checks.premise("a", "room: the outcome moves", 0.3, True, criterion="> 0.1",
                   source="measured", role="room")  # fmt: skip
    saved = json.loads(checks.save(tmp_path).read_text())
    assert [p["source"] for p in saved["claims"][0]["premises"]] == ["design", "measured"]
    hand_edited = edited(saved, "claims.0.premises.1.source", "design")
    with pytest.raises(SummaryError, match="at least one measured premise"):
        validate_summary(hand_edited, "99_test_chapter.json")


@pytest.mark.parametrize(
    ("lo", "hi", "low", "high", "predicted", "expected"),
    [
        (0.52, 0.60, 0.5, math.inf, 0.55, ("low", None, 0.52)),  # pass: any t < lo
        (-0.3, -0.1, 0.0, math.inf, 0.2, ("low", -0.3, None)),  # fail, predicted outside: t > lo
        (-0.1, 0.3, 0.0, math.inf, 0.2, ("low", -0.1, 0.3)),  # inconclusive: t in [lo, hi]
        (0.1, 0.3, -math.inf, 0.5, 0.2, ("high", 0.3, None)),  # pass below: any t > hi
        (0.45, 0.47, 0.40, 0.5, 0.46, ("high", 0.47, None)),  # within: the nearer bound decides
        (0.9, 1.1, -math.inf, 0.5, 0.2, ("high", None, 1.1)),  # fail: t < hi (predicted outside)
    ],
)
def test_holds_for_is_the_range_of_thresholds_keeping_the_outcome(lo, hi, low, high, predicted,
                                                                  expected):  # fmt: skip
    bound, a, b = holds_for(lo, hi, low, high, predicted)
    assert (bound, a, b) == expected
    threshold_inside = {"low": low, "high": high}[bound]
    outcome = judge(lo, hi, low, high, predicted)
    for t in (a, b):  # just inside each finite edge the outcome is unchanged
        if t is None:
            continue
        nudged = t + (1e-9 if (t == a) else -1e-9)
        bounds = (nudged, high) if bound == "low" else (low, nudged)
        assert judge(lo, hi, *bounds, predicted) == outcome, (t, threshold_inside)


def test_a_verdict_within_ten_percent_of_its_threshold_is_fragile(tmp_path):
    checks = chapter(("a", True))
    check = checks.evidence("a", "overlap", planted(0.515, 0.002, 6), above=0.5,
                            predicted=0.6, paper="p", control=NULL)  # fmt: skip
    assert check.outcome == "pass" and check.fragile and check.holds_for[0] is None
    assert "FRAGILE" in check.holds_text()
    saved = json.loads(checks.save(tmp_path).read_text())
    assert saved["checks"][0]["holds_for"] == [None, pytest.approx(check.lo)]
    assert saved["claims"][0]["fragile"] is True
    robust = chapter(("a", True)).evidence("a", "q", planted(2.0, 0.01, 4), above=0.5,
                                           predicted=2.0, paper="p", control=NULL)  # fmt: skip
    assert not robust.fragile


RIVAL = {"rival_name": "always the deepest", "alternative": "depth alone picks the shape",
         "paper": "p", "control": NULL}  # fmt: skip


def test_a_method_worse_than_a_trivial_rule_fails():
    checks = chapter(("a", True))
    law, deepest = planted(0.49, 0.02, 8, seed=1), planted(0.99, 0.005, 8, seed=2)
    check = checks.versus("a", "law - deepest, Spearman", law, deepest, margin=0.05,
                          test="non-inferiority", better="higher", predicted=0.1,
                          **RIVAL)  # fmt: skip
    assert check.outcome == "fail" and checks.claim_verdict("a") == "Not reproduced"
    assert check.rival["name"] == "always the deepest" and checks.alternatives("a") == (1, 2)
    lower_is_better = chapter(("a", True)).versus(
        "a", "regret", planted(0.001, 0.0005, 8), planted(0.02, 0.001, 8), margin=0.0,
        test="superiority", better="lower", predicted=0.02, **RIVAL)  # fmt: skip
    assert lower_is_better.outcome == "pass" and lower_is_better.estimate > 0


def test_a_rival_derived_predicted_effect_is_refused():
    checks = chapter(("a", True))
    law, rival = planted(0.49, 0.02, 8, seed=1), planted(0.80, 0.01, 8, seed=2)
    room = 1.0 - float(rival.mean())
    with pytest.raises(ValueError, match="rival's leftover room"):
        checks.versus("a", "q", law, rival, margin=0.0, test="superiority", better="higher",
                      predicted=room, ideal=1.0, **RIVAL)  # fmt: skip
    for derived in (lambda r: 1 - r.mean(), 1.0 - rival, "room"):
        with pytest.raises(ValueError, match="unfalsifiable"):
            checks.versus("a", "q2", law, rival, margin=0.0, test="superiority",
                          better="higher", predicted=derived, **RIVAL)  # fmt: skip
    with pytest.raises(ValueError, match="margin must lie in"):
        checks.versus("a", "q3", law, rival, margin=-0.1, test="superiority", better="higher",
                      predicted=0.1, **RIVAL)  # fmt: skip


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("claims.0.verdict", "Not reproduced", "claim 'a' reads 'Not reproduced' but its"),
        ("checks.0.outcome", "fail", "against the criterion gives 'pass'"),
        ("checks.0.counts", False, "field 'counts' is False but its controls give True"),
        ("checks.0.controls.0.outcome", "pass", "judged 'fail' reads 'fail'"),
        ("checks.0.controls.0.alternative", "", "field 'alternative' is empty"),
        ("checks.0.holds_for", [None, 5.0], "field 'holds_for' is"),
        ("checks.0.estimate", "0.5", "must be int or float"),
        ("checks.0.claim", "zz", "which is not declared"),
        ("claims.0.deciding_check", "nothing", "not one of its checks"),
        ("claims.0.alternatives.total", 3, "counts 3 alternatives"),
        ("format", 7, "field 'format' is 7"),
    ],
)
def test_a_summary_that_contradicts_its_own_checks_is_refused(tmp_path, path, value, message):
    broken = edited(saved_summary(tmp_path), path, value)
    with pytest.raises(SummaryError, match=message):
        validate_summary(broken, "99_test_chapter.json")


def test_non_finite_numbers_and_duplicate_claims_are_refused(tmp_path):
    saved = saved_summary(tmp_path)
    with pytest.raises(SummaryError, match="finite number"):
        validate_summary(edited(saved, "checks.0.lo", math.inf), "f.json")
    doubled = edited(saved, "claims", saved["claims"] * 2)
    with pytest.raises(SummaryError, match="more than once"):
        validate_summary(doubled, "f.json")


def test_a_summary_written_before_format_2_gets_its_thresholds_computed(tmp_path):
    saved = saved_summary(tmp_path)
    legacy = json.loads(json.dumps(saved))
    del legacy["format"]
    for key in ("holds_for", "holds_bound", "holds_text"):
        del legacy["checks"][0][key]
    for claim in legacy["claims"]:
        del claim["alternatives"], claim["fragile"]
        for premise in claim["premises"]:
            del premise["source"], premise["role"]
    loaded = validate_summary(legacy, "old.json")
    assert loaded["checks"][0]["holds_for"] == saved["checks"][0]["holds_for"]
