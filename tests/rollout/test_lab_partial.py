"""A partial proof never passes, on a real lab (issue 19.1): a runbook step that selects one check collects every
fact it reads; a collection killed after one of two hosts is not passed by `validate --facts/--raw RUNDIR`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fabricproof_lab import manager

from .rehearsal import REPO, cli

pytestmark = pytest.mark.lab

BASELINE = REPO / "inventories" / "lab" / "baseline.yaml"


def _runbook(tmp_path: Path, inventory: Path, checks: str) -> Path:
    path = tmp_path / "prove.yml"
    path.write_text("apiVersion: fabricproof/v1\nkind: Runbook\nmetadata: {name: prove-fm}\nspec:\n"
                    f"  inventory: {inventory}\n  steps:\n    - name: Prove Fabric Manager\n"
                    f"      validate: {{baseline: {BASELINE}, checks: {checks}}}\n")
    return path


@pytest.mark.parametrize("h100_lab", [1], indirect=True)
@pytest.mark.parametrize("checks", ["[fm.version_matches_driver]", "['fm.*']"])
def test_a_step_selecting_fm_checks_proves_a_healthy_host(h100_lab, tmp_path, checks):
    """fm.version_matches_driver compares with the driver version (nvidia_smi_q) and applies where NVSwitches are
    (nvswitch_pci): with only fm_version collected the healthy host was judged unknown and the step failed."""
    runs = tmp_path / "runs"
    result = cli("runbook", "run", _runbook(tmp_path, h100_lab.inventory, checks), "-i", h100_lab.inventory,
                 "--yes", "--runs-dir", runs)
    assert result.exit_code == 0, result.output
    (report_path,) = runs.glob("*/steps/1-*/attempt-1/report.json")
    report = json.loads(report_path.read_text())
    outcomes = {r["check_id"]: r["outcome"] for r in report["results"]}
    assert outcomes["fm.version_matches_driver"] == "pass", outcomes
    assert set(outcomes.values()) <= {"pass", "skip"} and report["not_proven"] == {}
    raw = report_path.parent / "raw" / "h100-0001"
    assert {"fm_version.txt", "nvidia_smi_q.txt", "nvswitch_pci.txt"} <= {p.name for p in raw.iterdir()}


@pytest.mark.parametrize("h100_lab", [2], indirect=True)
def test_a_collection_killed_after_one_of_two_hosts_is_not_passed(h100_lab, tmp_path):
    # h100-0002's nvidia-smi hangs, so the run is still collecting it when h100-0001's facts are written.
    manager.fault_inject(h100_lab.dir, "h100-0002", "tool-hangs")
    run_dir = tmp_path / "runs" / "T"
    log = tmp_path / "collect.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "fabricproof", "collect", "-i", str(h100_lab.inventory),
                                 "-o", str(run_dir), "--quiet"], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, cwd=tmp_path, env=dict(os.environ))
    try:
        end = time.monotonic() + 120
        while not (run_dir / "facts" / "h100-0001.json").exists():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < end, "h100-0001 was not collected in 120 s: " + log.read_text()
            time.sleep(0.2)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # killed mid-run (as by the OOM killer, or a full disk's crash)
        proc.wait(timeout=60)
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "running" and manifest["hosts"] == ["h100-0001", "h100-0002"]
    assert not (run_dir / "facts" / "h100-0002.json").exists()

    for source in ("--facts", "--raw"):
        res = cli("validate", source, run_dir, "-b", BASELINE, "-f", "json")
        assert res.exit_code == 3, (source, res.output)
        report = json.loads(res.stdout)
        assert report["hosts"] == ["h100-0001", "h100-0002"], source
        assert report["collection_errors"]["h100-0002"].startswith("the run did not finish (run.json: status running)")
        assert "holds an unfinished run (run.json: status running)" in " ".join(res.stderr.split())
        assert {r["outcome"] for r in report["results"] if r["host"] == "h100-0001"} <= {"pass", "skip"}


@pytest.mark.parametrize("h100_lab", [2], indirect=True)
def test_a_misspelt_h100_group_never_passes_a_degraded_fleet(h100_lab, tmp_path):
    """The issue's fleet: h100-0002 has an inactive NVLink, and the baseline spells dgx_h100 dgx_h10."""
    manager.fault_inject(h100_lab.dir, "h100-0002", "nvlink-inactive")
    typo = tmp_path / "typo.yaml"
    typo.write_text(BASELINE.read_text().replace("    dgx_h100:\n", "    dgx_h10:\n"))
    refused = tmp_path / "refused"
    res = cli("validate", "-i", h100_lab.inventory, "-b", typo, "--limit", "dgx_h100", "--run-dir", refused, "-q")
    assert res.exit_code == 2 and "did you mean 'dgx_h100'?" in " ".join(res.output.split()), res.output
    assert not refused.exists()  # refused before any host was touched
    run_dir = tmp_path / "run"
    judged = cli("validate", "-i", h100_lab.inventory, "-b", BASELINE, "--run-dir", run_dir, "-q", "-f", "json")
    assert judged.exit_code == 1, judged.output  # with the right groups the inactive link fails
    # Whatever the cause (here: the run re-judged without the inventory), nothing proves the H100s' hardware.
    res = cli("validate", "--facts", run_dir, "-b", typo, "-f", "json")
    assert res.exit_code == 3, res.output
    report = json.loads(res.stdout)
    assert sorted(report["not_proven"]) == ["h100-0001", "h100-0002"]
    assert {"nvlink.links_active", "fm.version_matches_driver", "fabric.state_completed", "ib.port_active"} <= set(
        report["not_proven"]["h100-0002"])
    assert report["summary"]["failed"] == 0 and "PASSED" not in cli("validate", "--facts", run_dir, "-b", typo).output
