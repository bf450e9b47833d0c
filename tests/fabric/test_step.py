"""The fabric step on a real dump served back by the replay transport (a real transport: a run directory's evidence
answers the vantage's commands): the NDR DGX H100 SuperPOD topology of the corpus (40 switches, 582 CAs, 1,114 cables)
and a master SM. A plan captured from it diffs clean and every judged host gets its /subnet facts and the `subnet`
record citing the topology; one cable moved in the plan is one finding on its host; an unreadable topology leaves
the subnet.* checks in error, with why, and nothing drawn."""

from __future__ import annotations

from pathlib import Path

import yaml

from fabricproof.collectors.subnet import FABRIC_COLLECTORS, collect_views
from fabricproof.model import CommandResult, Host
from fabricproof.runstore import RunStore
from fabricproof.subnet import step
from fabricproof.subnet.capture import plan_from
from fabricproof.subnet.checks import COLLECTOR
from fabricproof.subnet.plan import load_plan
from fabricproof.transport.replay import ReplayOptions

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
TOPOLOGY = CORPUS / "ib-fabric" / "ibnetdiscover-ndr-dgx-h100-superpod-mqm9701-40sw-582ca-topograph.txt"
SMINFO = CORPUS / "ib-diag" / "sminfo-master-lid37-prio14-mellanox-guid.txt"
HOSTS = ["a08-p1-dgx-04-c14", "a08-p1-dgx-04-c15", "a08-p1-dgx-04-c16"]
REGISTRY = ({c: FABRIC_COLLECTORS[c] for c in ("ibnetdiscover", "sminfo_fabric")}, collect_views)
VANTAGE = Host("vantage", {"fabricproof_fabric_vantage": True})


def recorded(tmp_path: Path, topology: str) -> ReplayOptions:
    """A run directory holding what the vantage printed: the source the replay transport answers from."""
    store = RunStore.create(tmp_path / "recorded")
    store.begin()
    store.write_evidence("vantage", {"ibnetdiscover": CommandResult(("ibnetdiscover",), topology),
                                     "sminfo_fabric": CommandResult(("sminfo",), SMINFO.read_text())})
    return ReplayOptions(store.root)


def facts() -> dict[str, dict]:
    return {h: {"host": h, "collectors": {}} for h in HOSTS}


def prove(tmp_path: Path, plan_doc: dict, topology: str, name: str) -> tuple[step.FabricProof, dict]:
    plan_file = tmp_path / f"{name}.yaml"
    plan_file.write_text(yaml.safe_dump(plan_doc, sort_keys=False))
    got = facts()
    proof = step.prove(load_plan(plan_file), [VANTAGE, *map(Host, HOSTS)], got, tmp_path / name,
                       via="replay", options=recorded(tmp_path / name, topology), window_s=0, registry=REGISTRY)
    return proof, step.merged(got, proof)


def captured() -> dict:
    return plan_from(collect_views({"ibnetdiscover": TOPOLOGY.read_text()}), HOSTS, name="superpod")


def test_a_plan_captured_from_the_fabric_diffs_clean_and_every_host_is_judged(tmp_path):
    proof, merged = prove(tmp_path, captured(), TOPOLOGY.read_text(), "clean")
    assert proof.vantage.host == VANTAGE and proof.error == ""
    # The real dump's only findings are shared descriptions (69 HCAs left at "MT4129 ConnectX7   Mellanox
    # Technologies", and the switches' SHARP aggregation nodes): every cable is where the captured plan puts it.
    assert {f.check for f in proof.findings} == {"subnet.names_unique"}
    s = proof.run.subnet
    assert (sum(1 for _ in s.switches()), sum(1 for _ in s.cas()), len(s.links)) == (40, 582, 1114)
    for h in HOSTS:
        assert merged[h]["subnet"]["cable_placement"] == merged[h]["subnet"]["cable_present"] == []
        assert merged[h]["subnet"]["cables"] > 0
        assert merged[h]["collectors"][COLLECTOR] == {"status": "ok", "exit_code": 0, "command": "ibnetdiscover",
                                                      "duration_s": 0.0,
                                                      "evidence": "fabric/raw/vantage/ibnetdiscover.txt"}
    assert (tmp_path / "clean" / "fabric" / "raw" / "vantage" / "ibnetdiscover.txt").is_file()
    drawn = step.view(proof)
    assert drawn is not None and drawn["subnet"] is s and drawn["findings"] == proof.findings


def test_a_cable_the_plan_puts_elsewhere_is_one_finding_on_its_host(tmp_path):
    doc = captured()
    link = next(lk for lk in doc["links"] if lk["a"] == "a08-p1-dgx-04-c15 mlx5_5")
    link["b_port"] = 64 if link["b_port"] != 64 else 63
    proof, merged = prove(tmp_path, doc, TOPOLOGY.read_text(), "moved")
    placed = [f for f in proof.findings if f.check == "subnet.cable_placement"]
    assert len(placed) == 1 and placed[0].hosts == ("a08-p1-dgx-04-c15",)
    assert "a08-p1-dgx-04-c15 mlx5_5 port 1" in placed[0].sentence
    assert merged["a08-p1-dgx-04-c15"]["subnet"]["cable_placement"] == [placed[0].sentence]
    assert merged["a08-p1-dgx-04-c14"]["subnet"]["cable_placement"] == []
    doc_on_disk = RunStore(RunStore(tmp_path / "moved").fabric_root).fabric()
    assert any(f["check"] == "subnet.cable_placement" for f in doc_on_disk["findings"])


def test_an_unreadable_topology_leaves_the_checks_in_error_and_draws_nothing(tmp_path):
    cut = TOPOLOGY.read_text()
    cut = cut[: len(cut) // 2]  # cut mid-block, as a capture interrupted
    proof, merged = prove(tmp_path, captured(), cut, "cut")
    assert proof.diff is None and step.view(proof) is None
    for h in HOSTS:
        record = merged[h]["collectors"][COLLECTOR]
        assert record["status"] == "error" and "ibnetdiscover on vantage: unreadable output" in record["error"]
        assert "subnet" not in merged[h]


def test_the_html_report_draws_the_fabric_the_step_judged_and_nothing_without_one(tmp_path):
    from fabricproof.model import Report
    from fabricproof.reporters import fabric_html, html_report

    doc = captured()
    link = next(lk for lk in doc["links"] if lk["a"] == "a08-p1-dgx-04-c15 mlx5_5")
    link["b_port"] = 64 if link["b_port"] != 64 else 63
    proof, _ = prove(tmp_path, doc, TOPOLOGY.read_text(), "drawn")
    page = html_report.render(Report(results=(), hosts=tuple(HOSTS), fabric=step.view(proof)))
    assert '<section id="fabric"' in page and fabric_html.CSS.strip()[:40] in page
    assert "a08-p1-dgx-04-c15 mlx5_5 port 1" in page  # the moved cable's finding, marked
    bare = html_report.render(Report(results=(), hosts=tuple(HOSTS)))
    assert '<section id="fabric"' not in bare and fabric_html.CSS.strip()[:40] not in bare
