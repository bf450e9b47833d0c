"""Projections of facts and streaming evaluation give exactly the verdicts of the whole documents (pure)."""

from __future__ import annotations

import copy
import json
import random
import threading
from pathlib import Path

import pytest
from fabricproof import facts as facts_mod
from fabricproof.judging.baseline import Baseline
from fabricproof.judging.baseline import load as load_baseline
from fabricproof.judging.evaluate import StreamingEvaluation, evaluate
from fabricproof.model import Scope
from fabricproof.judging.projection import KEEP, project, projector, trie_for
from catalogkit import shipped_checks

from .fixturelib import fixture_paths, load_fixture

REPO = Path(__file__).resolve().parents[2]
CHECKS = shipped_checks()
LAB_FACTS = facts_mod.load_dir(REPO / "inventories" / "lab" / "facts")
LAB_BASELINE = load_baseline(REPO / "inventories" / "lab" / "baseline.yaml")


def test_star_matches_named_keys_too_and_a_pointer_end_keeps_the_whole_subtree():
    trie = {"a": {"*": {"x": KEEP}, "k": {"y": KEEP}}, "b": KEEP}
    doc = {"a": {"k": {"x": 1, "y": 2, "z": 3}, "m": {"x": 4, "y": 5}}, "b": {"deep": [1, {"q": 2}]}, "c": 9}
    from fabricproof.judging.projection import _fold_stars

    assert project(doc, _fold_stars(trie)) == {"a": {"k": {"x": 1, "y": 2}, "m": {"x": 4}}, "b": {"deep": [1, {"q": 2}]}}


def test_lists_keep_every_position_and_key_order_is_kept():
    doc = {"l": [{"v": 1, "w": 0}, {"w": 0}, 7], "z": 1, "a": 2}
    trie = {"l": {"*": {"v": KEEP}}, "a": KEEP, "z": KEEP}
    out = project(doc, trie)
    assert out == {"l": [{"v": 1}, {}, 7], "z": 1, "a": 2} and list(out) == ["l", "z", "a"]
    assert project({"l": [1, 2]}, {"l": {"0": KEEP}}) == {"l": [1, 2]}  # read by index: kept as it is


def test_the_containers_a_projection_cuts_are_new_ones_not_the_sources():
    doc = {"gpu": {"gpus": [{"name": "H100", "fw": "1"}]}}
    out = project(doc, trie_for([c for c in CHECKS if c.fact.startswith("/gpu/")]))
    out["gpu"]["gpus"].append({})
    assert len(doc["gpu"]["gpus"]) == 1


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.id)
def test_every_fixture_gets_the_same_verdicts_from_the_projection(check):
    for kind, path in fixture_paths(check.id).items():
        data = load_fixture(path)
        baseline = Baseline(name="fixture", defaults=data.get("baseline") or {}, groups=data.get("baseline_groups") or {})
        args = dict(groups=data.get("groups") or {}, previous=data.get("previous"))
        whole = evaluate(data["facts"], baseline, [check], **args)
        for cut in (projector([check]), projector(CHECKS)):
            projected = {h: cut(f) for h, f in data["facts"].items()}
            assert evaluate(projected, baseline, [check], **args) == whole, (kind, path)


def test_lab_facts_shrink_to_a_fraction_and_judge_the_same():
    cut = projector(CHECKS)
    projected = {h: cut(f) for h, f in LAB_FACTS.items()}
    assert evaluate(projected, LAB_BASELINE, CHECKS) == evaluate(LAB_FACTS, LAB_BASELINE, CHECKS)
    whole = sum(len(json.dumps(f)) for f in LAB_FACTS.values())
    kept = sum(len(json.dumps(f)) for f in projected.values())
    assert kept < whole / 3, (kept, whole)


def _fleet(n: int, seed: int) -> dict[str, dict]:
    """n hosts cloned from the lab facts, a few with a drifted firmware or a downed link."""
    rng = random.Random(seed)
    names = sorted(LAB_FACTS)
    out = {}
    for i in range(n):
        src = LAB_FACTS[names[i % len(names)]]
        doc = copy.deepcopy(src)
        host = f"{src['host']}-{i:03d}"
        doc["host"] = host
        if rng.random() < 0.3 and doc.get("ib", {}).get("firmware", {}).get("devices"):
            doc["ib"]["firmware"]["devices"][0]["firmware"] = "20.99.9999"
        if rng.random() < 0.3 and doc.get("nvlink", {}).get("status", {}).get("links"):
            doc["nvlink"]["status"]["links"][0]["state"] = "inactive"
        out[host] = doc
    return out


def test_streaming_in_any_order_from_many_threads_gives_the_batch_report():
    fleet = _fleet(24, seed=4)
    groups = {h: ("lab", h.split("-")[0]) for h in fleet}
    errors = {"h100-9999": "connection refused by 127.10.0.9:22"}
    batch = evaluate(fleet, LAB_BASELINE, CHECKS, groups=groups, collection_errors=errors, run_id="r")
    assert any(r.outcome.value == "fail" for r in batch.results)  # the drift is seen, so the comparison means something

    stream = StreamingEvaluation(LAB_BASELINE, CHECKS, groups=groups)
    order = list(fleet)
    random.Random(7).shuffle(order)
    threads = [threading.Thread(target=lambda part: [stream.add(h, fleet[h]) for h in part], args=(order[k::4],))
               for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stream.finish(errors, run_id="r") == batch


def test_streaming_keeps_of_each_host_only_what_fleet_checks_compare():
    """Of a host's facts a streaming evaluation keeps, for each fleet-scope check, its own verdict or the values it is
    compared by, its partitions and its evidence: never the facts."""
    stream = StreamingEvaluation(LAB_BASELINE, CHECKS)
    for host, doc in LAB_FACTS.items():
        stream.add(host, doc)
    for k, check in enumerate(CHECKS):
        entries = [e for chunk in stream._entries.segment(k) for e in chunk]
        assert len(entries) == (len(LAB_FACTS) if check.scope is Scope.FLEET else 0), check.id
        for host, early, *compared in entries:
            assert early is not None or len(json.dumps(compared)) < 8_000, (check.id, host)
    with pytest.raises(ValueError, match="given twice"):
        stream.add("h100-0001", LAB_FACTS["h100-0001"])


def test_what_streaming_holds_per_host_is_shared():
    """A fleet's evaluation keeps one result per check and host: what each costs is what grows with the fleet
    (issue 13, 10,000 replayed hosts). A host's results share one evidence tuple per collector; a reason repeated on
    every host is one string."""
    fleet = _fleet(6, seed=2)
    stream = StreamingEvaluation(LAB_BASELINE, CHECKS)
    for host, doc in fleet.items():
        stream.add(host, doc)
    assert stream.finish() == evaluate(fleet, LAB_BASELINE, CHECKS)

    report = stream.finish()
    for host in fleet:
        shared: dict[str, tuple[str, ...]] = {}
        for r in report.results:
            if r.host == host and r.evidence and r.check_id not in FLEET_IDS:
                assert shared.setdefault(r.evidence[0], r.evidence) is r.evidence, r.check_id
        assert len(shared) >= 5
    reasons: dict[tuple[str, str], list[str]] = {}
    for r in report.results:
        if r.reason:
            reasons.setdefault((r.check_id, r.reason), []).append(r.reason)
    repeated = [texts for texts in reasons.values() if len(texts) > 1]
    assert repeated, "no reason repeats across hosts: the fixture proves nothing"
    assert all(t is texts[0] for texts in repeated for t in texts)


FLEET_IDS = {c.id for c in CHECKS if c.scope is Scope.FLEET}


def _collected_by(doc: dict, ids: list[str]) -> dict:
    """The facts a collection running only these collectors would have given: their fragments and records."""
    from fabricproof.collectors import COLLECTORS
    from fabricproof.judging.pointer import split_pointer

    out = {k: doc[k] for k in ("apiVersion", "kind", "host", "via", "groups", "collected_at") if k in doc}
    out["collectors"] = {cid: run for cid, run in doc["collectors"].items() if cid in ids}
    for cid in ids:
        *parents, last = split_pointer(COLLECTORS[cid].provides)
        src, dst = doc, out
        for seg in parents:
            src, dst = src.get(seg, {}), dst.setdefault(seg, {})
        if last in src:
            dst[last] = copy.deepcopy(src[last])
    return out


@pytest.mark.parametrize("check", [c for c in CHECKS if not c.probe], ids=lambda c: c.id)
def test_a_gate_selecting_one_check_collects_every_fact_it_reads(check):
    """A gate or runbook step with `checks: [ID]` runs collectors_read([ID]): on the healthy lab hosts the check
    is never judged unknown for a fact no collector was asked for (fm.version_matches_driver compares with the
    driver version nvidia_smi_q reports and applies where nvswitch_pci counts NVSwitches)."""
    from fabricproof.collectors import COLLECTORS
    from fabricproof.model import Outcome
    from fabricproof.judging.projection import collectors_read

    ids = collectors_read([check], COLLECTORS)
    assert check.collector in ids
    facts = {h: _collected_by(doc, ids) for h, doc in LAB_FACTS.items()}
    groups = {h: doc["groups"] for h, doc in LAB_FACTS.items()}
    whole = evaluate(LAB_FACTS, LAB_BASELINE, [check], groups=groups)
    gate = evaluate(facts, LAB_BASELINE, [check], groups=groups)
    assert [(r.host, r.outcome) for r in gate.results] == [(r.host, r.outcome) for r in whole.results]
    assert not any(r.outcome is Outcome.UNKNOWN for r in gate.results)
    assert gate.not_proven == whole.not_proven == {}


def test_a_collector_serving_some_platforms_brings_the_one_the_platform_is_read_from():
    """Fabric Manager's collectors fail on a GB200 tray by design; facts.mark_not_applicable turns that into a skip
    only when the host's platform (/gpu/gpus) is in its facts. A narrowed collection (validate --checks, a gate's
    checks) of fm.config_fabric_mode reads nothing under /gpu itself, yet must collect it."""
    from fabricproof.collectors import COLLECTORS
    from fabricproof.judging.projection import collected_for, collectors_read

    by_id = {c.id: c for c in CHECKS}
    assert "nvidia_smi_q" in collectors_read([by_id["fm.config_fabric_mode"]], COLLECTORS)
    assert collectors_read([by_id["ib.rate"]], COLLECTORS) == ["ibstat"]  # a collector every platform has
    assert [c.id for c in collected_for([by_id["ib.rate"], *(c for c in CHECKS if c.probe)])] == ["ibstat"]
