"""Where a check does not apply, it says so (issue 10.6): fabric and Fabric Manager checks on hosts without an
NVLink fabric skip with the reason, judged on facts parsed from real outputs of such hosts."""

from __future__ import annotations

from pathlib import Path

from fabricproof.judging import baseline as baselines
from fabricproof import facts
from fabricproof.judging.evaluate import evaluate
from fabricproof.model import CommandResult, Outcome

from catalogkit import shipped_checks

REPO = Path(__file__).resolve().parents[2]
CHECKS = shipped_checks()  # the repository's checks/, loaded once per test process
FABRIC_FM = [c for c in CHECKS if c.family in ("fabric", "fm") and not c.id.startswith("imex.")]


def _facts(corpus: Path, host: str, files: dict[str, str]) -> dict:
    outputs = {cid: CommandResult(tuple(), (corpus / rel).read_text(encoding="utf-8", errors="surrogateescape"))
               for cid, rel in files.items()}
    return facts.build(host, outputs, via="replay")


def test_fabric_and_fm_checks_skip_on_a_pcie_host_without_nvswitch(corpus: Path) -> None:
    # 8x RTX 4090 (Fabric: N/A), the FM journal of a two-4090 host (NV_WARN_NOTHING_TO_DO: no NVSwitch) and an lspci
    # without NVSwitch bridges, judged against an H100 fleet baseline (fabric and FM required): the GPUd false
    # positive. Before issue 10, fabric.status_success passed on nothing and the FM checks failed.
    pcie = _facts(corpus, "pcie-node", {
        "nvidia_smi_q": "nvidia-smi-q/rtx4090-8gpu-driver535.154.05-fabric-na.txt",
        "fm_journal": "fabricmanager/journal-fm-nv-warn-nothing-to-do-2x-rtx4090-pre-nvl5-cube-studio-29.txt",
        "nvswitch_pci": "lspci/lspci-gb200-compute-tray-cx7-bf3.txt",
    })
    assert pcie["nvswitch"]["pci"]["count"] == 0 and {g["fabric"]["state"] for g in pcie["gpu"]["gpus"]} == {None}
    base = baselines.load(REPO / "inventories" / "dgx-h100" / "baseline.yaml")
    report = evaluate({"pcie-node": pcie}, base, FABRIC_FM)
    outcome = {r.check_id: (r.outcome, r.reason) for r in report.results}
    judged_here = {cid for cid, (o, _) in outcome.items() if o is not Outcome.SKIP}
    # what this host reported decides; checks whose collector did not run here stay unknown, none fails
    assert not {cid for cid, (o, _) in outcome.items() if o is Outcome.FAIL}, outcome
    for cid in ("fabric.state_completed", "fabric.status_success"):
        assert outcome[cid][0] is Outcome.SKIP
        assert outcome[cid][1].startswith("not applicable: no GPU of this host reports NVLink fabric registration")
    assert outcome["fm.log_version_mismatch"][0] is Outcome.SKIP
    assert "no NVSwitch on this host" in outcome["fm.log_version_mismatch"][1]
    assert judged_here <= {c.id for c in FABRIC_FM if c.collector not in pcie["collectors"]}


def test_a_one_gpu_vm_that_reports_its_fabric_is_judged(corpus: Path) -> None:
    # A single H100 passed through to a VM still registers with the fabric (State Completed): it is judged, and passes.
    vm = _facts(corpus, "h100-vm", {"nvidia_smi_q": "nvidia-smi-q/q-h100-80gb-hbm3-1gpu-vm-590.48.01-idle-fabric-health-block.txt"})
    base = baselines.load(REPO / "inventories" / "dgx-h100" / "baseline.yaml")
    checks = [c for c in CHECKS if c.id in ("fabric.state_completed", "fabric.status_success")]
    assert {r.outcome for r in evaluate({"h100-vm": vm}, base, checks).results} == {Outcome.PASS}


def test_nvlink_topology_skips_a_one_gpu_host_and_stays_unknown_on_a_malformed_matrix(corpus: Path) -> None:
    one = _facts(corpus, "vm", {"topo": "nvidia-smi-topo/topo-m-h100-80gb-hbm3-1gpu-vm-590.48.01-ansi-underline-header.txt"})
    (check,) = [c for c in CHECKS if c.id == "nvlink.topology"]
    base = baselines.load(REPO / "inventories" / "dgx-h100" / "baseline.yaml")
    (r,) = evaluate({"vm": one}, base, [check]).results
    assert r.outcome is Outcome.SKIP and "fewer than two GPUs" in r.reason  # was a failure: "yields no values"
    eight = _facts(corpus, "hgx", {"topo": "nvidia-smi-topo/h100-8gpu-nv18-12nic-cx7-mooncake-issue2039.txt"})
    assert evaluate({"hgx": eight}, base, [check]).results[0].outcome is Outcome.PASS
