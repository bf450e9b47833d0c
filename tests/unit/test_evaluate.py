"""Evaluation semantics: applicability, missing facts, collector errors, wildcards, fleet partitions, deltas, exit codes."""

from __future__ import annotations

from dataclasses import replace

from fabricproof.baseline import Baseline
from fabricproof.catalog import Check, Condition
from fabricproof.evaluate import evaluate, exit_code, sentence
from fabricproof.model import Outcome, Scope, Severity

LINKS = Check(
    id="nvlink.links_active", title="t", family="nvlink", severity=Severity.CRITICAL, scope=Scope.HOST,
    subject="each GPU's active NVLink count", collector="nvlink_status", fact="/nvlink/status/gpus/*/links_active",
    op="eq", expected={"baseline": "nvlink.links_per_gpu"}, remediation="fix it",
)
BASE = Baseline("b", {"platform": "h100", "nvlink": {"links_per_gpu": 18}})


def facts(host="n1", links=(18, 18), status="ok", **extra):
    return {"host": host, "collectors": {"nvlink_status": {"status": status, "error": "boom", "evidence": f"raw/{host}/nvlink_status.txt"}},
            "nvlink": {"status": {"gpus": [{"index": i, "links_active": v} for i, v in enumerate(links)]}}, **extra}


def one(report):
    (r,) = report.results
    return r


def test_pass_and_fail_carry_sentence_actual_reason_evidence_remediation():
    ok = one(evaluate({"n1": facts()}, BASE, [LINKS]))
    assert ok.outcome is Outcome.PASS and ok.actual == 18
    assert ok.expected == "each GPU's active NVLink count should be 18 (baseline nvlink.links_per_gpu)"
    bad = one(evaluate({"n1": facts(links=(18, 16))}, BASE, [LINKS]))
    assert bad.outcome is Outcome.FAIL
    assert bad.reason == "1 of 2 differ: /nvlink/status/gpus/1/links_active = 16"
    assert bad.actual == [18, 16] and bad.remediation == "fix it"
    assert bad.evidence == ("raw/n1/nvlink_status.txt",)


def test_collector_error_is_error_and_missing_collector_is_unknown():
    assert one(evaluate({"n1": facts(status="error")}, BASE, [LINKS])).outcome is Outcome.ERROR
    f = facts()
    f["collectors"] = {}
    r = one(evaluate({"n1": f}, BASE, [LINKS]))
    assert r.outcome is Outcome.UNKNOWN and "did not run" in r.reason


def test_missing_fact_is_unknown():
    f = facts()
    del f["nvlink"]
    r = one(evaluate({"n1": f}, BASE, [LINKS]))
    assert r.outcome is Outcome.UNKNOWN and "missing" in r.reason


def test_unset_baseline_key_skips_and_is_reported_unapplied():
    report = evaluate({"n1": facts()}, Baseline("b", {"platform": "h100"}), [LINKS])
    r = one(report)
    assert r.outcome is Outcome.SKIP and r.reason == "baseline sets no nvlink.links_per_gpu"
    assert [u.check_id for u in report.unapplied] == ["nvlink.links_active"]
    assert exit_code(report) == 0 and exit_code(report, require_all=True) == 1


def test_platform_and_requires_gate_applicability():
    fm = replace(LINKS, platforms=("h100",), requires=("fm.required",))
    r = one(evaluate({"n1": facts()}, Baseline("b", {"platform": "gb200", "nvlink": {"links_per_gpu": 18}}), [fm]))
    assert r.outcome is Outcome.SKIP and "platform gb200" in r.reason
    r = one(evaluate({"n1": facts()}, Baseline("b", {"platform": "h100", "fm": {"required": False}, "nvlink": {"links_per_gpu": 18}}), [fm]))
    assert r.outcome is Outcome.SKIP and r.reason == "baseline sets fm.required: false"


def test_group_overrides_select_values_per_host():
    base = Baseline("b", {"nvlink": {"links_per_gpu": 18}}, {"dgx_a100": {"nvlink": {"links_per_gpu": 12}}})
    report = evaluate({"a": facts("a", links=(12,)), "h": facts("h", links=(18,))}, base, [LINKS],
                      groups={"a": ["dgx_a100"], "h": ["dgx_h100"]})
    assert {r.host: r.outcome for r in report.results} == {"a": Outcome.PASS, "h": Outcome.PASS}


def test_where_filters_items_and_count():
    ports = {"host": "n1", "collectors": {"ibstat": {"status": "ok"}}, "ib": {"ibstat": {"ports": [
        {"ca_type": "MT4129", "state": "Active"}, {"ca_type": "MT4129", "state": "Down"}, {"ca_type": "MT41692", "state": "Down"}]}}}
    check = Check(id="ib.x", title="t", family="ib", severity=Severity.CRITICAL, scope=Scope.HOST, subject="ports",
                  collector="ibstat", fact="/ib/ibstat/ports/*/state", op="count", compare="eq", expected=1,
                  where=(Condition(("ca_type",), "eq", "MT4129"), Condition(("state",), "eq", "Active")))
    r = one(evaluate({"n1": ports}, BASE, [check]))
    assert r.outcome is Outcome.PASS and r.actual == 1
    assert sentence(check, 1) == "the number of ports where ca_type is MT4129 and state is Active should be 1"


def test_expected_from_another_fact_of_the_same_host():
    check = Check(id="fm.v", title="t", family="fm", severity=Severity.CRITICAL, scope=Scope.HOST, subject="FM version",
                  collector="fm_version", fact="/fm/version", op="eq", expected={"fact": "/gpu/driver_version"})
    f = {"host": "n", "collectors": {"fm_version": {"status": "ok"}}, "fm": {"version": "550.127.05"}, "gpu": {"driver_version": "550.120"}}
    r = one(evaluate({"n": f}, BASE, [check]))
    assert r.outcome is Outcome.FAIL and r.expected == "FM version should be 550.120 (this host's /gpu/driver_version)"


def test_fleet_same_majority_and_no_majority():
    check = Check(id="driver.c", title="t", family="gpu", severity=Severity.CRITICAL, scope=Scope.FLEET,
                  subject="driver version", collector="nvlink_status", fact="/v", op="same")
    def f(v):
        return {"collectors": {"nvlink_status": {"status": "ok"}}, "v": v}
    report = evaluate({"a": f("1"), "b": f("1"), "c": f("2")}, BASE, [check])
    assert {r.host: r.outcome.value for r in report.results} == {"a": "pass", "b": "pass", "c": "fail"}
    assert "2 of 3 hosts in platform h100 have 1" in [r for r in report.results if r.host == "c"][0].reason
    tie = evaluate({"a": f("1"), "c": f("2")}, BASE, [check])
    assert {r.outcome for r in tie.results} == {Outcome.FAIL}


def test_fleet_partitions_by_group_glob():
    check = Check(id="fabric.u", title="t", family="fabric", severity=Severity.CRITICAL, scope=Scope.FLEET,
                  subject="uuid", collector="nvlink_status", fact="/v", op="same", partition="rack_*")
    def f(v):
        return {"collectors": {"nvlink_status": {"status": "ok"}}, "v": v}
    report = evaluate({"a": f("x"), "b": f("x"), "c": f("y"), "d": f("y")}, BASE, [check],
                      groups={"a": ["rack_01"], "b": ["rack_01"], "c": ["rack_02"], "d": ["rack_02"]})
    assert {r.outcome for r in report.results} == {Outcome.PASS}


def test_delta_needs_two_snapshots_and_handles_counter_reset():
    check = Check(id="ib.d", title="t", family="ib", severity=Severity.CRITICAL, scope=Scope.HOST, subject="link_downed",
                  collector="nvlink_status", fact="/c", op="delta_le", expected=0)
    now = {"collectors": {"nvlink_status": {"status": "ok"}}, "c": 5}
    assert one(evaluate({"n": now}, BASE, [check])).outcome is Outcome.SKIP
    assert one(evaluate({"n": now}, BASE, [check], previous={"n": {"c": 5}})).outcome is Outcome.PASS
    r = one(evaluate({"n": now}, BASE, [check], previous={"n": {"c": 3}}))
    assert r.outcome is Outcome.FAIL and r.reason == "grew: /c +2"
    r = one(evaluate({"n": now}, BASE, [check], previous={"n": {"c": 9}}))  # reset after reboot: all 5 are new
    assert r.outcome is Outcome.FAIL and r.actual == 5


def test_unreachable_host_gives_error_results_and_exit_3():
    report = evaluate({"n1": facts()}, BASE, [LINKS], collection_errors={"n2": "connection refused"})
    assert {r.host: r.outcome for r in report.results} == {"n1": Outcome.PASS, "n2": Outcome.ERROR}
    assert exit_code(report) == 3


def test_exit_code_fail_on_threshold():
    warn = replace(LINKS, severity=Severity.WARNING)
    report = evaluate({"n1": facts(links=(1,))}, BASE, [warn])
    assert exit_code(report, "critical") == 0
    assert exit_code(report, "warning") == 1
