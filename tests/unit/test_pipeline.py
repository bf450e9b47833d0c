"""The one pipeline call (judging.pipeline.run): every source of facts (a live collection, saved facts, a caller's own
collection) is judged exactly as evaluate() judges the same facts, and its reports land beside the evidence. Live
collections replay recorded evidence (the replay transport): no host is touched, only tmp files."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import tempfile
from pathlib import Path

import pytest
from fabricproof import facts as facts_mod
from fabricproof.collect import collect
from fabricproof.collectors import COLLECTORS
from fabricproof.errors import InputError
from fabricproof.judging import catalog
from fabricproof.judging.baseline import Baseline
from fabricproof.judging.evaluate import evaluate
from fabricproof.judging.pipeline import Added, Delegated, Live, Request, Saved, gather, run
from fabricproof.model import ExitCode, Host, Outcome
from fabricproof.reporters import REPORTERS
from fabricproof.runstore import RunStore
from fabricproof.transport.replay import ReplayOptions
from catalogkit import shipped_checks

BASELINE = Baseline("t", {"rdma": {"peermem": True}})
CHECKS = catalog.select(shipped_checks(), ["rdma.peermem_loaded", "rdma.legacy_peer_mem_absent"])
PICK = [COLLECTORS["lsmod"]]
LOADED = "Module                  Size  Used by\nnvidia_peermem 16384 0\n"
MISSING = "Module                  Size  Used by\nmlx5_core 2097152 0\n"


def recorded(tmp_path: Path, outputs: dict[str, str]) -> Path:
    """Evidence to replay: each host's lsmod output (a host left out has none: it is not collected)."""
    src = tmp_path / "recorded"
    for host, text in outputs.items():
        (src / "raw" / host).mkdir(parents=True)
        (src / "raw" / host / "lsmod.txt").write_text(text)
    return src


def live(tmp_path: Path, run_dir: Path | None, **kw) -> Live:
    """h1 and h2 collected from their recorded evidence (h2 without nvidia_peermem), h3 not collected (none)."""
    source = tmp_path / "recorded"
    if not source.exists():
        recorded(tmp_path, {"h1": LOADED, "h2": MISSING})
    return Live([Host("h1"), Host("h2"), Host("h3")], run_dir, via="replay", options=ReplayOptions(source),
                collectors=PICK, **kw)


def same_report(judged, expected):
    """Equal but for the time it was made (evaluate() called alone sets none)."""
    assert judged.created_at
    assert dataclasses.replace(judged, created_at="") == dataclasses.replace(expected, created_at="")


def test_a_live_collection_is_judged_as_hosts_finish_and_its_report_sits_beside_the_evidence(tmp_path):
    run_dir = tmp_path / "run"
    judged = run(Request(live(tmp_path, run_dir), BASELINE, CHECKS, reports=("json", "markdown"), run_id="r1"))

    on_disk = facts_mod.load_dir(run_dir)
    assert sorted(on_disk) == ["h1", "h2"]
    assert judged.report.collection_errors.keys() == {"h3"}
    same_report(judged.report, evaluate(on_disk, BASELINE, CHECKS, collection_errors=judged.report.collection_errors,
                                        run_id="r1", tool_version=judged.report.tool_version))
    assert judged.facts == {}, "streamed: the facts stay in the run, not in memory"
    assert judged.evidence_dir == run_dir and RunStore(run_dir).manifest()["run_id"] == "r1"
    assert judged.written == {"json": RunStore(run_dir).report_path, "markdown": run_dir / "report.md"}
    assert judged.written["markdown"].read_text() == REPORTERS["markdown"].render(judged.report)
    assert json.loads(judged.written["json"].read_text())["metadata"]["run_id"] == "r1"
    verdicts = {(r.check_id, r.host): r.outcome for r in judged.report.results}
    assert verdicts[("rdma.peermem_loaded", "h1")] is Outcome.PASS
    assert verdicts[("rdma.peermem_loaded", "h2")] is Outcome.FAIL
    assert judged.exit_code() == ExitCode.CHECK_FAILED


def test_held_facts_give_the_report_streaming_gives(tmp_path):
    streamed = run(Request(live(tmp_path, tmp_path / "a"), BASELINE, CHECKS))
    held = run(Request(live(tmp_path, tmp_path / "b"), BASELINE, CHECKS, hold=True))
    assert sorted(held.facts) == ["h1", "h2"]
    assert [dataclasses.replace(r, evidence=()) for r in held.report.results] == \
        [dataclasses.replace(r, evidence=()) for r in streamed.report.results]
    assert held.written == {} and streamed.written == {}


def test_without_a_run_directory_the_collection_is_temporary_and_its_facts_cite_no_evidence(tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    for hold in (True, False):
        judged = run(Request(live(tmp_path / str(hold), None), BASELINE, CHECKS, reports=("json",), hold=hold))
        assert os.listdir(scratch) == [], "the temporary run is removed"
        assert judged.evidence_dir is None and judged.written == {}
        assert all(not r.evidence for r in judged.report.results)
        assert all("evidence" not in c for doc in judged.facts.values() for c in doc["collectors"].values())
        assert {r.outcome for r in judged.report.results if r.host == "h2"} >= {Outcome.FAIL}


def test_a_step_after_the_collection_adds_facts_and_errors_and_finishes_the_report(tmp_path):
    seen = []

    def then(result):
        seen.append(sorted(result.facts_by_host))
        facts = copy.deepcopy(result.facts_by_host)
        for doc in facts.values():
            doc["kernel"]["modules"]["nvidia_peermem"] = True
        return Added(facts, {"h2": "probes: busy", "h3": "probes: not run"},
                     lambda report: dataclasses.replace(report, figures=({"host": "h1"},)))

    run_dir = tmp_path / "run"
    judged = run(Request(live(tmp_path, run_dir, then=then), BASELINE, CHECKS, reports=("json",)))
    assert seen == [["h1", "h2"]]
    assert judged.report.collection_errors["h2"] == "probes: busy"
    assert "no raw evidence for h3" in judged.report.collection_errors["h3"], "the collection's reason stays"
    assert judged.report.figures == ({"host": "h1"},)
    judged_on = {(r.check_id, r.host): r.outcome for r in judged.report.results if not r.reason.startswith("host not")}
    assert judged_on[("rdma.peermem_loaded", "h2")] is Outcome.PASS, "judged on the facts the step gave"
    on_disk = facts_mod.load_dir(run_dir)
    assert on_disk["h2"]["kernel"]["modules"]["nvidia_peermem"] is True, "the run holds what was judged"
    assert json.loads(judged.written["json"].read_text())["figures"] == [{"host": "h1"}]


def test_progress_is_shown_while_the_hosts_are_collected_and_no_longer(tmp_path):
    """The progress display is up for the collection alone: what follows it (the probes) prints lines of its own."""
    events: list[str] = []

    class View:
        def __enter__(self):
            events.append("shown")
            return self

        def __exit__(self, *exc):
            events.append("gone")

        def __call__(self, ev):
            events.append(ev.host)

    def then(result):
        events.append("then")
        return Added(result.facts_by_host)

    run(Request(live(tmp_path, tmp_path / "run", progress=View(), then=then), BASELINE, CHECKS))
    assert events[0] == "shown" and events[-2:] == ["gone", "then"], events
    assert sorted(events[1:-2]) == ["h1", "h2", "h3"]


def test_saved_facts_are_judged_as_evaluate_judges_them_and_nothing_is_written(tmp_path):
    run_dir = tmp_path / "run"
    collect([Host("h1"), Host("h2"), Host("h3")], run_dir, via="replay",
            options=ReplayOptions(recorded(tmp_path, {"h1": LOADED, "h2": MISSING})), collectors=PICK)
    before = sorted(p.name for p in run_dir.rglob("*"))
    facts = facts_mod.load_dir(run_dir)
    for source in (Saved(facts=run_dir), Saved(raw=run_dir)):
        judged = run(Request(source, BASELINE, CHECKS, groups={"h1": ("lab",)}, hold=True))
        streamed = run(Request(source, BASELINE, CHECKS, groups={"h1": ("lab",)}))  # a host at a time, none held
        assert streamed.facts == {}
        same_report(streamed.report, dataclasses.replace(judged.report, created_at=""))
        assert judged.evidence_dir is None and judged.written == {} and judged.unfinished is None
        assert judged.report.collection_errors.keys() == {"h3"}, "run.json's hosts not collected"
        expected = evaluate(judged.facts, BASELINE, CHECKS, groups={"h1": ("lab",)},
                            collection_errors=judged.report.collection_errors,
                            tool_version=judged.report.tool_version)
        same_report(judged.report, expected)
        assert {h: d["kernel"] for h, d in judged.facts.items()} == {h: d["kernel"] for h, d in facts.items()}
    assert sorted(p.name for p in run_dir.rglob("*")) == before


def test_saved_facts_of_an_unfinished_run_say_so_and_hosts_without_facts_are_not_collected(tmp_path):
    run_dir = tmp_path / "run"
    collect([Host("h1"), Host("h2")], run_dir, via="replay",
            options=ReplayOptions(recorded(tmp_path, {"h1": LOADED, "h2": MISSING})), collectors=PICK)
    manifest = RunStore(run_dir).manifest_path
    doc = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**doc, "status": "running", "hosts": ["h1", "h2", "h4"]}))
    judged = run(Request(Saved(facts=run_dir), BASELINE, CHECKS))
    assert judged.unfinished is not None
    assert (judged.unfinished.status, judged.unfinished.with_facts, judged.unfinished.hosts) == ("running", 2, 3)
    assert judged.report.collection_errors == {
        "h4": f"the run did not finish (run.json: status running), and this host has no facts in {run_dir}"}
    assert judged.exit_code() == ExitCode.CHECK_FAILED


def test_bad_saved_sources_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="run directory not found"):
        run(Request(Saved(raw=tmp_path / "nowhere"), BASELINE, CHECKS))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no raw evidence"):
        run(Request(Saved(raw=tmp_path / "empty"), BASELINE, CHECKS))
    with pytest.raises(InputError, match="--limit needs --inventory"):
        run(Request(Saved(raw=recorded(tmp_path, {"h1": LOADED}), limit="h1"), BASELINE, CHECKS))


class Collected:
    def __init__(self, facts, errors):
        self.facts, self.errors = facts, errors


def fake_collect(calls: list):
    """A caller's own collection (the rollout's shape): facts for h1 and for a host nobody asked about, an error for
    h2, nothing at all for h3."""

    def collect_hosts(hosts, evidence_dir):
        calls.append((hosts, evidence_dir))
        doc = {"apiVersion": "fabricproof/v1", "kind": "Facts", "host": "h1",
               "collectors": {"lsmod": {"status": "ok", "evidence": "raw/h1/lsmod.txt"}},
               "kernel": {"modules": {"nvidia_peermem": True}}}
        return Collected({"h1": doc, "stranger": {**doc, "host": "stranger"}}, {"h2": "unreachable: refused"})

    return collect_hosts


def test_a_delegated_collection_is_judged_in_its_scope_and_reported_in_its_evidence_directory(tmp_path):
    calls: list = []
    evidence = tmp_path / "gate" / "attempt-1"
    judged = run(Request(Delegated(("h1", "h2", "h3"), evidence, fake_collect(calls)), BASELINE, CHECKS,
                         reports=("json", "junit"), run_id="rollout-1"))
    assert calls == [(["h1", "h2", "h3"], evidence)]
    assert sorted(judged.facts) == ["h1"]
    assert judged.report.collection_errors == {"h3": "no facts came back", "h2": "unreachable: refused"}
    assert judged.report.hosts == ("h1", "h2", "h3") and judged.report.run_id == "rollout-1"
    assert judged.written == {"json": evidence / "report.json", "junit": evidence / "report.xml"}
    assert judged.evidence_dir == evidence
    for fmt, path in judged.written.items():
        assert path.read_text() == REPORTERS[fmt].render(judged.report)
        assert path.stat().st_mode & 0o777 == 0o600
    assert judged.exit_code() == ExitCode.INCOMPLETE


def test_gather_alone_is_the_collection_step_a_soak_snapshots_with(tmp_path):
    calls: list = []
    snapshot = gather(Delegated(["h1", "h2", "h3"], tmp_path / "start", fake_collect(calls)))
    assert sorted(snapshot.facts) == ["h1"]
    assert snapshot.errors == {"h3": "no facts came back", "h2": "unreachable: refused"}
    assert not (tmp_path / "start").exists(), "gathering writes no report"


def test_judging_saved_facts_pauses_the_cyclic_collector_and_leaves_no_cycle_for_it():
    """Offline judging runs with the cyclic collector paused (judging.packing.no_cycles): what it makes must be freed
    by reference counting alone, or a fleet's judging would grow (a closure calling itself was one cycle per fact
    read). The collector is as it was afterwards."""
    import gc

    from fabricproof.judging import baseline as baseline_mod

    lab = Path(__file__).resolve().parents[2] / "inventories" / "lab"
    request = Request(Saved(lab / "facts"), baseline_mod.load(lab / "baseline.yaml"), catalog.load())
    gc.collect()
    frozen = gc.get_freeze_count()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        judged = run(request)
        assert gc.isenabled() and gc.get_freeze_count() == frozen
        gc.collect()
        left = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert judged.report.hosts and left == []
