"""Unconfigured is not broken (issue 10.9), on a real lab over SSH: a node without nvfwupd's BMC config file is
validated with its firmware checks skipped for that reason, and the run exits 0 when everything else passes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fabricproof.cli import app
from fabricproof_lab.emu.store import transaction
from fabricproof.paths import inventories_dir

pytestmark = pytest.mark.lab

REASON = "no /etc/fabricproof/nvfwupd.yaml: NVSwitch firmware not checked"
FIRMWARE_CHECKS = {"nvswitch.firmware", "nvswitch.firmware_consistent"}


def test_a_node_without_the_nvfwupd_config_skips_its_firmware_checks_and_the_run_passes(lab_factory, tmp_path):
    lab_dir = lab_factory.new_dir()
    status = lab_factory.up(lab_dir, nodes=2, profile="dgx-h100")
    assert status.running, status.as_dict()
    bare, configured = sorted(n.name for n in (lab_dir / "nodes" / "by-name").iterdir())
    with transaction((lab_dir / "nodes" / "by-name" / bare).resolve()) as node:
        node["nvfwupd_config"] = False  # the operator never provisioned BMC credentials on this one

    def validate(name: str, *hosts: str) -> tuple[int, dict]:
        report = tmp_path / f"{name}.json"
        res = CliRunner().invoke(app, [str(a) for a in (
            "validate", "-i", lab_dir / "inventory.yml", "--limit", ",".join(hosts),
            "-b", inventories_dir() / "lab" / "baseline.yaml", "--run-dir", tmp_path / name, "-q",
            "-f", f"json={report}")])
        return res.exit_code, json.loads(report.read_text())

    code, report = validate("bare", bare)
    results = {r["check_id"]: r for r in report["results"]}
    firmware = {cid: (results[cid]["outcome"], results[cid]["reason"]) for cid in FIRMWARE_CHECKS}
    assert all(outcome == "skip" and REASON in reason for outcome, reason in firmware.values()), firmware
    bad = {cid: (r["outcome"], r["reason"]) for cid, r in results.items() if r["outcome"] in ("fail", "error")}
    assert bad == {} and code == 0, (code, bad)
    facts = json.loads((tmp_path / "bare" / "facts" / f"{bare}.json").read_text())
    assert facts["collectors"]["nvswitch_firmware"]["status"] == "skipped"
    assert facts["collectors"]["nvswitch_firmware"]["error"] == REASON and "nvswitch" not in facts or \
        "firmware" not in facts["nvswitch"]

    # The configured peer is judged as before; the two together still pass (the bare one is not an outlier).
    code, report = validate("both", bare, configured)
    mine = {(r["check_id"], r["host"]): r["outcome"] for r in report["results"]}
    assert mine[("nvswitch.firmware", configured)] == "pass" and mine[("nvswitch.firmware", bare)] == "skip"
    assert code == 0, [(k, v) for k, v in mine.items() if v in ("fail", "error")]
