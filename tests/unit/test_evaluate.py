"""Evaluation semantics: applicability, missing facts, collector errors, wildcards, fleet partitions, deltas, exit codes."""

from __future__ import annotations

from dataclasses import replace

from fabricproof.judging.baseline import Baseline
from fabricproof.judging.catalog import Applicability, Check, Condition
from fabricproof.judging.evaluate import evaluate, exit_code, sentence
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
    # A host without what the check judges (no GPU reports NVLinks): a plain skip, nothing left unproven.
    report = evaluate({"n1": facts(links=())}, Baseline("b", {"platform": "h100"}), [LINKS])
    r = one(report)
    assert r.outcome is Outcome.SKIP and r.reason == "baseline sets no nvlink.links_per_gpu"
    assert [u.check_id for u in report.unapplied] == ["nvlink.links_active"]
    assert report.not_proven == {}
    assert exit_code(report) == 0 and exit_code(report, require_all=True) == 1


def test_unset_baseline_key_on_a_host_with_that_hardware_is_not_proven():
    # The host reports NVLinks and the baseline gives no count: a partial proof, never a pass (exit 3, named).
    report = evaluate({"n1": facts()}, Baseline("b", {"platform": "h100"}), [LINKS])
    r = one(report)
    assert r.outcome is Outcome.SKIP and r.reason.startswith("not proven: baseline sets no nvlink.links_per_gpu")
    assert report.not_proven == {"n1": ("nvlink.links_active",)} and report.summary.hosts_not_proven == 1
    assert exit_code(report) == 3
    # Decisions are not gaps: another platform, or a key set to false.
    fm = replace(LINKS, platforms=("h100",), requires=("fm.required",))
    for values in ({"platform": "gb200"}, {"platform": "h100", "fm": {"required": False}}):
        report = evaluate({"n1": facts()}, Baseline("b", values), [fm])
        assert report.not_proven == {} and exit_code(report) == 0
    # A collector that was not run on purpose (prerequisite absent) proves no hardware either.
    report = evaluate({"n1": facts(status="skipped")}, Baseline("b", {"platform": "h100"}), [LINKS])
    assert report.not_proven == {} and exit_code(report) == 0


def test_a_check_out_of_scope_for_a_group_set_is_settled_once_yet_each_host_with_its_hardware_is_not_proven():
    """A check whose baseline values put it out of scope for a whole group set is settled once for the set (issue
    23.1), but not when the set leaves a key unset that a host with the hardware needs: each such host is still not
    proven, and one without it (collector not run) is a plain skip, over several hosts of the one set."""
    fm = replace(LINKS, requires=("fm.required",))
    base = Baseline("b", {"platform": "h100", "nvlink": {"links_per_gpu": 18}})
    report = evaluate({"n1": facts("n1"), "n2": facts("n2", status="skipped"), "n3": facts("n3")}, base, [fm])
    reasons = {r.host: r.reason for r in report.results}
    assert all(r.outcome is Outcome.SKIP for r in report.results)
    assert reasons["n1"] == reasons["n3"] and reasons["n1"].startswith("not proven: baseline sets no fm.required")
    assert reasons["n2"] == "baseline sets no fm.required"
    assert report.not_proven == {"n1": ("nvlink.links_active",), "n3": ("nvlink.links_active",)}
    # A set with nothing wanting: every host the same plain skip, none unproven.
    report = evaluate({"n1": facts("n1"), "n2": facts("n2")}, Baseline("b", {"platform": "h100", "fm": {"required": False},
                                                                           "nvlink": {"links_per_gpu": 18}}), [fm])
    assert {r.reason for r in report.results} == {"baseline sets fm.required: false"} and report.not_proven == {}


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
    # results say it for an operator: the subject names what is judged, the item filters stay in the check (24.1)
    assert sentence(check, 1) == "the number of ports should be 1"
    assert sentence(check, 1, technical=True) == "the number of ports where ca_type is MT4129 and state is Active should be 1"


def test_expected_from_another_fact_of_the_same_host():
    check = Check(id="fm.v", title="t", family="fm", severity=Severity.CRITICAL, scope=Scope.HOST, subject="FM version",
                  collector="fm_version", fact="/fm/version", op="eq", expected={"fact": "/gpu/driver_version"})
    f = {"host": "n", "collectors": {"fm_version": {"status": "ok"}}, "fm": {"version": "550.127.05"}, "gpu": {"driver_version": "550.120"}}
    r = one(evaluate({"n": f}, BASE, [check]))
    assert r.outcome is Outcome.FAIL and r.expected == "FM version should be 550.120 (this host's gpu driver version)"


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



def test_delta_against_a_snapshot_that_could_not_read_the_counter_is_unknown_not_a_pass():
    # A soak whose first read of the counters failed must not pass every sample: nothing was there to grow from.
    check = Check(id="ib.d", title="t", family="ib", severity=Severity.CRITICAL, scope=Scope.HOST, subject="link_downed",
                  collector="nvlink_status", fact="/c/*", op="delta_le", expected=0)
    now = {"collectors": {"nvlink_status": {"status": "ok"}}, "c": [5, 7]}
    failed = {"collectors": {"nvlink_status": {"status": "error", "error": "exit 1: cat: out: No such file"}}}
    r = one(evaluate({"n": now}, BASE, [check], previous={"n": failed}))
    assert r.outcome is Outcome.UNKNOWN
    assert r.reason == ("the earlier snapshot holds no /c/* to compare "
                        "(collector nvlink_status failed then: exit 1: cat: out: No such file)")
    r = one(evaluate({"n": now}, BASE, [check], previous={"n": {"collectors": {}, "c": ["n/a", None]}}))
    assert r.outcome is Outcome.UNKNOWN and r.reason == "the earlier snapshot holds no /c/* to compare"
    # an item that appeared since the snapshot is not growth; the items both snapshots hold are compared
    r = one(evaluate({"n": {**now, "c": [5, 7, 9]}}, BASE, [check], previous={"n": {"c": [5, 6]}}))
    assert r.outcome is Outcome.FAIL and r.reason == "grew: /c/1 +1"
    assert one(evaluate({"n": {**now, "c": [5, 7, 9]}}, BASE, [check],
                        previous={"n": {"c": [5, 7]}})).outcome is Outcome.PASS

def test_unreachable_host_gives_error_results_and_exit_3():
    report = evaluate({"n1": facts()}, BASE, [LINKS], collection_errors={"n2": "connection refused"})
    assert {r.host: r.outcome for r in report.results} == {"n1": Outcome.PASS, "n2": Outcome.ERROR}
    assert exit_code(report) == 3


def test_exit_code_fail_on_threshold():
    warn = replace(LINKS, severity=Severity.WARNING)
    report = evaluate({"n1": facts(links=(1,))}, BASE, [warn])
    assert exit_code(report, "critical") == 0
    assert exit_code(report, "warning") == 1


def test_a_check_left_unknown_is_a_partial_proof_at_or_above_fail_on():
    """A missing fact or a collector that never ran leaves the check unjudged: exit 3 (issue 19.1), never a pass;
    below --fail-on it counts no more than a failure there would."""
    f = facts()
    del f["nvlink"]
    report = evaluate({"n1": f}, BASE, [LINKS])
    assert one(report).outcome is Outcome.UNKNOWN and exit_code(report) == 3
    below = evaluate({"n1": f}, BASE, [replace(LINKS, severity=Severity.WARNING)])
    assert exit_code(below, "critical") == 0 and exit_code(below, "warning") == 3
    failed_too = evaluate({"n1": f, "n2": facts("n2", links=(1,))}, BASE, [LINKS])
    assert exit_code(failed_too) == 1  # a failure outranks the unjudged


# --- applies_when, unique, contains (issue 10.6, 10.7) ---------------------------------------------------------

from fabricproof.judging.catalog import Applicability  # noqa: E402

FABRIC = Check(
    id="fabric.state_completed", title="t", family="fabric", severity=Severity.CRITICAL, scope=Scope.HOST,
    subject="each GPU's fabric State", collector="nvidia_smi_q", fact="/gpu/gpus/*/fabric/state", op="eq",
    expected="Completed", remediation="fix it",
    applies_when=(Applicability("/gpu/gpus/*/fabric/state", "ne", None, "no GPU reports fabric registration"),),
)


def gpu_facts(states, host="n1"):
    return {"host": host, "collectors": {"nvidia_smi_q": {"status": "ok"}},
            "gpu": {"gpus": [{"index": i, "fabric": {"state": s}} for i, s in enumerate(states)]}}


def test_applies_when_skips_a_host_whose_own_facts_rule_the_check_out():
    pcie = one(evaluate({"n1": gpu_facts([None, None])}, BASE, [FABRIC]))
    assert pcie.outcome is Outcome.SKIP
    assert pcie.reason == "not applicable: no GPU reports fabric registration (fabric state is absent)"  # words (24.1)
    # one GPU reporting a state is enough for the check to apply, and a GPU stuck In Progress then fails it
    assert one(evaluate({"n1": gpu_facts(["In Progress", None])}, BASE, [FABRIC])).outcome is Outcome.FAIL
    assert one(evaluate({"n1": gpu_facts(["Completed"] * 2)}, BASE, [FABRIC])).outcome is Outcome.PASS


def test_applies_when_fact_that_is_not_reported_leaves_the_check_to_be_judged():
    no_gpus = {"host": "n1", "collectors": {"nvidia_smi_q": {"status": "ok"}}}
    assert one(evaluate({"n1": no_gpus}, BASE, [FABRIC])).outcome is Outcome.UNKNOWN  # not skipped: nothing proven
    fm = replace(LINKS, applies_when=(Applicability("/nvswitch/pci/count", "gt", 0, "no NVSwitch"),))
    assert one(evaluate({"n1": facts()}, BASE, [fm])).outcome is Outcome.PASS  # nvswitch_pci did not run
    r = one(evaluate({"n1": facts(nvswitch={"pci": {"count": 0}})}, BASE, [fm]))
    assert r.outcome is Outcome.SKIP and r.reason == "not applicable: no NVSwitch (pci count is 0)"
    # a collector that failed is an error of the check, not a reason to skip it
    assert one(evaluate({"n1": facts(status="error", nvswitch={"pci": {"count": 0}})}, BASE, [fm])).outcome is Outcome.ERROR


def test_applies_when_holds_on_fleet_checks_too():
    same = replace(FABRIC, id="fabric.x", scope=Scope.FLEET, op="same", expected=None)
    report = evaluate({"a": gpu_facts(["Completed"], "a"), "b": gpu_facts(["Completed"], "b"),
                       "pcie": gpu_facts([None], "pcie")}, BASE, [same])
    assert {r.host: r.outcome for r in report.results} == {"a": Outcome.PASS, "b": Outcome.PASS, "pcie": Outcome.SKIP}


GUIDS = Check(
    id="ib.port_guid_unique", title="t", family="ib", severity=Severity.CRITICAL, scope=Scope.FLEET,
    subject="port GUIDs", collector="ibstat", fact="/ib/ibstat/ports/*/port_guid", op="unique", remediation="fix it",
)


def ib_facts(host, guids):
    return {"host": host, "collectors": {"ibstat": {"status": "ok"}},
            "ib": {"ibstat": {"ports": [{"port_guid": g} for g in guids]}}}


def test_unique_fails_every_host_sharing_a_value_and_a_value_repeated_on_one_host():
    report = evaluate({"a": ib_facts("a", ["0x1", "0x2"]), "b": ib_facts("b", ["0x3", "0x1"]),
                       "c": ib_facts("c", ["0x4", "0x4"]), "d": ib_facts("d", ["0x5"])}, BASE, [GUIDS])
    got = {r.host: (r.outcome, r.reason) for r in report.results}
    assert got["a"] == (Outcome.FAIL, "1 duplicate value(s) in the fleet: 0x1 also on b")
    assert got["b"] == (Outcome.FAIL, "1 duplicate value(s) in the fleet: 0x1 also on a")
    assert got["c"] == (Outcome.FAIL, "1 duplicate value(s) in the fleet: 0x4 reported 2 times")
    assert got["d"][0] is Outcome.PASS
    assert sentence(GUIDS) == "port GUIDs should belong to one host only across the fleet, each value once"


def test_unique_compares_across_platforms_unless_partitioned():
    base = Baseline("b", {"platform": "h100"}, {"gb": {"platform": "gb200"}})
    report = evaluate({"a": ib_facts("a", ["0x1"]), "b": ib_facts("b", ["0x1"])}, base, [GUIDS], groups={"b": ["gb"]})
    assert {r.outcome for r in report.results} == {Outcome.FAIL}


def test_contains_and_count_of_a_list_the_host_did_not_report():
    pkey = Check(id="ib.pkey", title="t", family="ib", severity=Severity.WARNING, scope=Scope.HOST, subject="P_Keys",
                 collector="ib_counters", fact="/ib/counters/ports/*/pkeys", op="contains", expected="0x8001",
                 remediation="fix it")
    f = {"host": "n1", "collectors": {"ib_counters": {"status": "ok"}},
         "ib": {"counters": {"ports": [{"pkeys": ["0xffff", "0x8001"]}, {"pkeys": ["0xffff"]}]}}}
    r = one(evaluate({"n1": f}, BASE, [pkey]))
    assert r.outcome is Outcome.FAIL and r.reason == "1 of 2 differ: /ib/counters/ports/1/pkeys = [0xffff]"
    count = Check(id="pcie.acs", title="t", family="pcie", severity=Severity.CRITICAL, scope=Scope.HOST, subject="x",
                  collector="lspci_vvv", fact="/pcie/gpu_nic_path_acs_enabled/*", op="count", compare="eq",
                  expected=0, remediation="fix it")
    unknown = {"host": "n1", "collectors": {"lspci_vvv": {"status": "ok", "notes": ["ACS on somewhere"]}},
               "pcie": {"gpu_nic_path_acs_enabled": None}}
    r = one(evaluate({"n1": unknown}, BASE, [count]))
    assert r.outcome is Outcome.UNKNOWN  # a null list is not an empty list: no pass on nothing
    assert r.reason.endswith("lspci_vvv noted: ACS on somewhere")
    empty = {**unknown, "pcie": {"gpu_nic_path_acs_enabled": []}}
    assert one(evaluate({"n1": empty}, BASE, [count])).outcome is Outcome.PASS



def _counting(monkeypatch, owner, name):
    """Calls of owner.name, recorded with their arguments."""
    calls = []
    real = getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_a_hosts_facts_are_walked_once_per_pointer_and_an_expectation_made_once_per_group_set(monkeypatch):
    """Checks that apply only where the same fact holds share one walk of it per host; what a check expects is made
    once for all the hosts of a group set (the verdicts are those of the tests above)."""
    import fabricproof.judging.evaluate as ev_mod

    present = Applicability(fact="/nvlink/status/gpus/*/index", op="ge", expected=0, reason="GPUs present")
    checks = [replace(LINKS, id=f"nvlink.c{i}", applies_when=(present,)) for i in range(3)]
    walks = _counting(monkeypatch, ev_mod, "values_at")
    expectations = _counting(monkeypatch, ev_mod._Evaluator, "expected")
    report = evaluate({f"n{i}": facts(f"n{i}") for i in range(4)}, BASE, checks)
    assert {r.outcome for r in report.results} == {Outcome.PASS} and len(report.results) == 12
    walked = [(id(doc), segs) for doc, segs, *_ in walks]
    assert len(walked) == len(set(walked)) == 4 * 2  # per host: the condition's pointer and the checks' one
    baseline_reads = [args for args in expectations if args[1] == LINKS.expected]
    assert len(baseline_reads) == 3  # per check, not per check and host


def _finish_peak(hosts: int) -> int:
    """The most finish() held at once beyond what it started with (traced bytes), for `hosts` hosts added in two
    shards one after the other, as a sharded collection hands them over out of name order."""
    import tracemalloc

    from fabricproof.judging.evaluate import StreamingEvaluation

    driver = Check(id="driver.c", title="t", family="gpu", severity=Severity.CRITICAL, scope=Scope.FLEET,
                   subject="driver version", collector="ibstat", fact="/v", op="same")
    nowhere = replace(LINKS, platforms=("gb200",))  # applies to no host: finish() counts its skips' reasons
    stream = StreamingEvaluation(BASE, [driver, GUIDS, nowhere])
    names = [f"h{i:05d}" for i in range(hosts)]
    for i, name in enumerate(names[1::2] + names[0::2]):
        guid = f"0x{i:016x}"  # every GUID distinct: a unique check's count of each value is all it may hold
        stream.add(name, {"host": name, "collectors": {"ibstat": {"status": "ok"}, "nvlink_status": {"status": "ok"}},
                          "v": "535.1" if i % 9 else "550.2",
                          "ib": {"ibstat": {"ports": [{"port_guid": guid}, {"port_guid": guid + "1"}]}}})
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        stream.finish()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_finishing_a_fleet_holds_no_entry_or_result_of_every_host_at_once():
    """Issue 23.2: finish() judges a fleet-scope check in passes over its entries as they were added (a count per
    partition and value, then each host's verdict spilled as it is decided), and counts the reasons of a check that
    applied nowhere without putting its results in host order. Sorting a check's entries whole and holding a result
    per host held ~800 bytes a host more at 4,000 hosts than at 1,000; what grows now is the report's own rows (hosts,
    groups, failed hosts) and the unique check's count of each of the 2 GUIDs a host reports (~200 bytes)."""
    small, large = _finish_peak(1000), _finish_peak(4000)
    assert (large - small) / 3000 < 400, (small, large)
