"""The CLI end to end on facts built from real outputs: capture a baseline, validate, reports, catalog, schemas."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fabricproof import __version__
from fabricproof import facts as facts_mod
from fabricproof.collectors import COLLECTORS
from fabricproof.model import CommandResult

from .helpers import REPO, run

# One real HGX/DGX H100 node's outputs from the corpus (several captures of the same platform).
H100_OUTPUTS = {
    "nvidia_smi_q": "nvidia-smi-q/h100-80gb-hbm3-8gpu-driver535.161.08-fabric-completed.txt",
    "topo": "nvidia-smi-topo/h100-8gpu-nv18-12nic-cx7-mooncake-issue2039.txt",
    "ibstat": "ibstat/h100-cx7-mt4129-ndr400-ib-all-active.txt",
    "ib_counters": "sysfs-infiniband/gpud-h100-node-8x-cx7-ndr-plus-bond.txt",
    "lspci_vvv": "lspci/lspci-vvv-hgx-h100-excerpt-pex890xx-acs-off-pmc-sierra-acs-on-nvswitch-22a3.txt",
    "fm_log": "fabricmanager/fabricmanager-log-hgx-h100-fm535.161.08-restarts-nvswitch-nonfatal-12028.log",
}


@pytest.fixture
def h100_facts(corpus: Path, tmp_path: Path) -> Path:
    outputs = {cid: CommandResult((cid,), (corpus / rel).read_text()) for cid, rel in H100_OUTPUTS.items()}
    out = tmp_path / "facts"
    out.mkdir()
    for n, host in enumerate(("h100-golden", "h100-peer")):
        doc = facts_mod.build(host, outputs, via="replay", groups=["dgx_h100"],
                              evidence={cid: f"raw/{host}/{cid}.txt" for cid in outputs})
        for port in doc["ib"]["ibstat"]["ports"] if n else ():  # two hosts from one capture: the peer's own GUIDs
            port["port_guid"] = port["port_guid"][:-6] + "ff" + port["port_guid"][-4:]
        (out / f"{host}.json").write_text(facts_mod.dump(doc))
    return out


def _captured(facts: Path, tmp_path: Path) -> Path:
    baseline = tmp_path / "captured.yaml"
    res = run("baseline", "capture", "--facts", facts, "--host", "h100-golden", "-o", baseline)
    assert res.exit_code == 0, res.output
    return baseline


def test_capture_then_validate_passes_and_writes_every_format(h100_facts, tmp_path):
    baseline = _captured(h100_facts, tmp_path)
    assert run("baseline", "lint", baseline).exit_code == 0
    outs = {fmt: tmp_path / f"report.{fmt}" for fmt in ("json", "junit", "sarif", "tap", "prometheus", "markdown", "html")}
    args = [a for fmt, path in outs.items() for a in ("-f", f"{fmt}={path}")]
    res = run("validate", "--facts", h100_facts, "-b", baseline, *args)
    # The corpus holds outputs of some collectors only: the checks of the others cannot be judged, and a critical
    # check left unknown is a partial proof (exit 3), never a pass.
    assert res.exit_code == 3, res.output
    report = json.loads(outs["json"].read_text())
    unknown = [r for r in report["results"] if r["outcome"] == "unknown"]
    assert unknown and all("did not run on this host" in r["reason"] for r in unknown)
    assert any(r["severity"] == "critical" for r in unknown)
    # The captured node really was in HW power-brake slowdown ("HW Slowdown: Active" in its -q output):
    # a warning, so the run still exits 0 at the default --fail-on critical.
    failed = {(r["check_id"], r["severity"]) for r in report["results"] if r["outcome"] == "fail"}
    assert failed == {("gpu.throttle", "warning")}
    assert report["summary"]["passed"] >= 20
    assert set(report["hosts"]) == {"h100-golden", "h100-peer"}
    suites = ET.parse(outs["junit"]).getroot()
    assert int(suites.get("tests")) == report["summary"]["total"] + len(report["unapplied"])  # + a coverage suite
    assert json.loads(outs["sarif"].read_text())["version"] == "2.1.0"
    prom = outs["prometheus"].read_text()
    assert prom.count("fabricproof_check_result{") == report["summary"]["passed"] + report["summary"]["failed"]


def test_a_drifted_peer_fails_with_sentence_evidence_and_remediation(h100_facts, tmp_path):
    baseline = _captured(h100_facts, tmp_path)
    peer = h100_facts / "h100-peer.json"
    doc = json.loads(peer.read_text())
    doc["ib"]["ibstat"]["ports"][3]["rate"] = 200  # one rail trained down to HDR
    doc["gpu"]["gpus"][5]["fabric"]["state"] = "In Progress"
    peer.write_text(json.dumps(doc))
    res = run("validate", "--facts", h100_facts, "-b", baseline, "-f", "json")
    assert res.exit_code == 1
    failed = {(r["check_id"], r["host"]): r for r in json.loads(res.stdout)["results"] if r["outcome"] == "fail"}
    assert set(failed) - {("gpu.throttle", "h100-golden"), ("gpu.throttle", "h100-peer")} == {
        ("ib.rate", "h100-peer"), ("fabric.state_completed", "h100-peer")}
    rate = failed[("ib.rate", "h100-peer")]
    assert rate["expected"].endswith("should be 400 (baseline ib.rate)")
    assert "/ib/ibstat/ports/3/rate = 200" in rate["reason"]
    assert rate["evidence"] == ["raw/h100-peer/ibstat.txt"] and "mlxlink" in rate["remediation"]


def test_fail_on_warning_and_checks_selection(h100_facts, tmp_path):
    baseline = _captured(h100_facts, tmp_path)
    # the corpus FM log holds 18 non-fatal NVSwitch SXids: a warning-level check
    res = run("validate", "--facts", h100_facts, "-b", baseline, "--checks", "fm.*,nvswitch.*", "-f", "json")
    warn = [r for r in json.loads(res.stdout)["results"] if r["outcome"] == "fail"]
    assert res.exit_code == 0 or all(r["severity"] != "critical" for r in warn)
    strict = run("validate", "--facts", h100_facts, "-b", baseline, "--checks", "fm.*,nvswitch.*", "--fail-on", "warning")
    # the corpus has no `nv-fabricmanager --version` or unit state: those checks stay unknown, a partial proof (3)
    assert strict.exit_code == (1 if warn else 3)
    ids = {r["check_id"] for r in json.loads(res.stdout)["results"]}
    assert ids and all(i.startswith(("fm.", "nvswitch.")) for i in ids)


def test_require_all_turns_unapplied_checks_into_a_failure(h100_facts, tmp_path):
    baseline = _captured(h100_facts, tmp_path)
    assert run("validate", "--facts", h100_facts, "-b", baseline, "--checks", "imex.*").exit_code == 0
    res = run("validate", "--facts", h100_facts, "-b", baseline, "--checks", "imex.*", "--require-all", "-f", "json")
    assert res.exit_code == 1
    assert {u["check_id"] for u in json.loads(res.stdout)["unapplied"]} == {
        "imex.service_active", "imex.nodes_ready", "imex.channel0_present"}


def test_collector_error_makes_the_run_incomplete(h100_facts, tmp_path):
    baseline = _captured(h100_facts, tmp_path)
    peer = h100_facts / "h100-peer.json"
    doc = json.loads(peer.read_text())
    doc["collectors"]["ibstat"] = {"status": "error", "error": "exit 127: ibstat: command not found"}
    del doc["ib"]["ibstat"]
    peer.write_text(json.dumps(doc))
    res = run("validate", "--facts", h100_facts, "-b", baseline, "-f", "json")
    assert res.exit_code == 3
    errs = [r for r in json.loads(res.stdout)["results"] if r["outcome"] == "error"]
    assert errs and all("ibstat: command not found" in r["reason"] for r in errs)


def test_checks_list_and_show():
    listed = json.loads(run("checks", "list", "--format", "json").stdout)
    assert len(listed) >= 40 and {"id", "title", "severity", "scope", "family"} <= set(listed[0])
    shown = run("checks", "show", "fm.version_matches_driver")
    assert shown.exit_code == 0
    assert "nv-fabricmanager --version" in shown.stdout and "should be this host's /gpu/driver_version" in shown.stdout
    assert "action: update_software" in shown.stdout
    assert {c["id"]: c["action"] for c in listed}["fm.service_active"] == "restart_service"


def test_collectors_list_and_parse(corpus, tmp_path):
    listed = json.loads(run("collectors", "list", "--format", "json").stdout)
    assert {c["id"] for c in listed} == set(COLLECTORS)
    ibstat = next(c for c in listed if c["id"] == "ibstat")
    assert ibstat["command"] == "ibstat" and ibstat["provides"] == "/ib/ibstat"
    ok = run("collectors", "parse", "nvlink_status", corpus / "nvidia-smi-nvlink/nvlink-status-a100-sxm4-80gb-azure-8gpu-12links.txt")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["links_per_gpu_min"] == 12
    garbage = tmp_path / "garbage.txt"
    garbage.write_bytes(b"\x00\xffbash: nvidia-smi: command not found\n")
    bad = run("collectors", "parse", "nvlink_status", garbage)
    assert bad.exit_code == 1 and "cannot parse as nvlink_status" in bad.stderr and len(bad.stderr.splitlines()) == 1


def test_collectors_parse_reads_partial_outputs_pasted_into_a_ticket(corpus, tmp_path):
    """Issue 10.4: what an operator pastes during an incident is read as far as it carries facts, with notes."""
    vvv = (corpus / "lspci/lspci-vvv-hgx-h100-excerpt-pex890xx-acs-off-pmc-sierra-acs-on-nvswitch-22a3.txt").read_text()
    grep = tmp_path / "acsctl.txt"  # `lspci -vvv | grep ACSCtl`: no device headers
    grep.write_text("".join(line + "\n" for line in vvv.splitlines() if "ACSCtl:" in line))
    acs = run("collectors", "parse", "lspci_vvv", grep)
    assert acs.exit_code == 0, acs.stderr
    frag = json.loads(acs.stdout)
    # two PMC-Sierra ports have ACS on: some bridge does, which GPU-NIC path it sits on is unknown, not "none"
    assert frag["gpu_nic_path_acs_enabled"] is None and frag["acs_ctl_lines"] == 5
    assert "note: 5 ACSCtl lines without device headers" in acs.stderr
    clean = tmp_path / "acsctl-off.txt"
    clean.write_text("".join(line + "\n" for line in vvv.splitlines() if "ACSCtl:" in line and "+" not in line))
    assert json.loads(run("collectors", "parse", "lspci_vvv", clean).stdout)["gpu_nic_path_acs_enabled"] == []
    cut = run("collectors", "parse", "nvlink_status", corpus / "nvidia-smi-nvlink/nvlink-s-gb200-18links-53.125-excerpt-k8s-test-infra-371.txt")
    status = json.loads(cut.stdout)
    assert cut.exit_code == 0 and [g["links_active"] for g in status["gpus"]] == [18, None]  # GPU 1 cut, not degraded
    assert "note: output elided in the source" in cut.stderr
    section = run("collectors", "parse", "nvidia_smi_q", corpus / "nvidia-smi-q/q-d-page_retirement-8gpu-azure-driver535.86.10.txt")
    assert section.exit_code == 0 and "sections shown: Retired Pages" in section.stderr


def test_schema_export_and_version(tmp_path):
    res = run("schema", "export", tmp_path / "s")
    assert res.exit_code == 0
    names = sorted(p.name for p in (tmp_path / "s").iterdir())
    assert {"baseline.schema.json", "check.schema.json", "facts.schema.json", "report.schema.json"} <= set(names)
    assert run("--version").stdout.strip() == f"fabricproof {__version__}"


def test_example_baselines_lint_clean():
    for path in sorted((REPO / "inventories").glob("*/baseline.yaml")):
        assert run("baseline", "lint", path).exit_code == 0, path


def _inventory(tmp_path: Path, hosts: list[str]) -> Path:
    inv = tmp_path / "inventory.yml"
    inv.write_text("all:\n  children:\n    dgx_h100:\n      hosts:\n" + "".join(f"        {h}: {{}}\n" for h in hosts))
    return inv


def test_hosts_in_scope_without_facts_are_reported_never_passed(h100_facts, tmp_path):
    """Nothing proven is no pass: a --limit host with no facts, or an inventory host the facts directory lacks,
    is reported as not collected (exit 3); with every host in scope present the run passes."""
    baseline = _captured(h100_facts, tmp_path)
    inv = _inventory(tmp_path, ["h100-golden", "h100-peer", "h100-missing"])
    only_missing = run("validate", "--facts", h100_facts, "-b", baseline, "-i", inv, "--limit", "h100-missing",
                       "-f", "json")
    assert only_missing.exit_code == 3, only_missing.output
    report = json.loads(only_missing.stdout)
    assert report["summary"]["hosts"] == 1 and report["summary"]["passed"] == 0
    assert "h100-missing" in report["collection_errors"] and "no facts for this host" in \
        report["collection_errors"]["h100-missing"]
    whole = run("validate", "--facts", h100_facts, "-b", baseline, "-i", inv, "-f", "json")
    assert whole.exit_code == 3 and set(json.loads(whole.stdout)["collection_errors"]) == {"h100-missing"}
    present = run("validate", "--facts", h100_facts, "-b", baseline, "-i", inv, "--limit", "h100-golden:h100-peer",
                  "-f", "json")
    judged = json.loads(present.stdout)
    assert judged["collection_errors"] == {} and judged["summary"]["hosts"] == 2
    # every host in scope is present; what keeps the run from passing is only the checks the corpus capture cannot
    # judge (collectors it holds no output of): unknown at critical, a partial proof
    assert present.exit_code == 3 and judged["summary"]["unknown"] > 0, present.output


def test_zero_hosts_judged_is_never_a_pass():
    from fabricproof.judging.evaluate import exit_code
    from fabricproof.model import Report

    assert exit_code(Report(results=(), hosts=())) == 3
