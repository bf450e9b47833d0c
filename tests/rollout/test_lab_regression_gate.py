"""A regression gate rehearsed on a real lab (sshd, ansible-playbook through ansible-runner, the shipped driver
upgrade): the change step also degrades the pilot's NVLink under load (the lab's nvlink-degraded fault: every link
Active at full rate, so only a probe shows it), the pilot's all-reduce busbw halves against its own pre-change
figure, the regression gate fails it and the pilot is rolled back, with both figures in the decision log."""

from __future__ import annotations

import json
import os
import sys

import pytest
import yaml
from fabricproof.rollout import decisions
from fabricproof.rollout import state as st

from .rehearsal import BEFORE, REPO, cli, derived_plan, driver_of, the_run, whats

pytestmark = pytest.mark.lab


@pytest.mark.parametrize("h100_lab", [2], indirect=True)
def test_a_pilot_whose_busbw_drops_after_the_change_is_rolled_back(h100_lab, tmp_path):
    # The change: the shipped driver upgrade, then (as a bad driver would) NVLink bandwidth halved on the host.
    inject = [sys.executable, "-m", "fabricproof", "lab", "fault", "inject", "--dir", str(h100_lab.dir),
              "{{ inventory_hostname }}", "nvlink-degraded"]
    (tmp_path / "degrading-upgrade.yml").write_text(yaml.safe_dump([
        {"ansible.builtin.import_playbook": str(REPO / "playbooks/changes/driver-fm-upgrade/apply.yml")},
        {"name": "The upgrade also degrades NVLink under load (lab rehearsal)", "hosts": "all",
         "gather_facts": False, "tasks": [{
             "name": "nvlink-degraded", "delegate_to": "localhost", "vars": {"ansible_connection": "local"},
             "environment": {"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
             "ansible.builtin.command": {"argv": inject}}]},
    ], sort_keys=False))
    shipped = yaml.safe_load((REPO / "inventories/lab/plans/driver-fm-upgrade.yml").read_text())["spec"]
    change = shipped["change"]
    change["apply"]["playbook"] = "degrading-upgrade.yml"
    change["rollback"]["playbook"] = str(REPO / "playbooks/changes/driver-fm-upgrade/rollback.yml")
    gates = {**shipped["gates"], "probes": ["nccl_all_reduce"], "regression": {"tolerance_pct": 3}}
    plan = derived_plan(tmp_path, "driver-fm-upgrade.yml", change=change, gates=gates,
                        waves=[{"name": "pilot", "size": 1}, {"name": "rest", "size": "rest"}])
    runs_dir = tmp_path / "runs"
    result = cli("rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", runs_dir)
    assert result.exit_code == 4, result.output
    run = the_run(runs_dir)
    assert run.status == st.ROLLED_BACK
    story = whats(run.dir)
    assert story[:8] == ["START", "PRE_GATE", "DRAIN", "PRE_PROBES", "APPLY", "APPLY_DONE", "POST_GATE",
                         "REGRESSION_GATE"], story
    assert "ROLLBACK" in story and story[-1] == "ROLLBACK_DONE"
    log = decisions.read(run.dir)
    post = next(d for d in log if d["what"] == "POST_GATE")
    assert post["hosts"] == []  # every ordinary check passed: only the probe shows the damage
    reg = next(d for d in log if d["what"] == "REGRESSION_GATE")
    assert reg["hosts"] == ["h100-0001"]
    before = next(f for f in reg["before"]["h100-0001"] if f["figure"] == "busbw")
    after = next(f for f in reg["after"]["h100-0001"] if f["figure"] == "busbw")
    assert before["unit"] == after["unit"] == "GB/s" and after["value"] < 0.97 * before["value"]
    assert "nccl_all_reduce busbw" in reg["why"] and "before the change (at least 97%)" in reg["why"]
    for ev in reg["evidence"]:  # both probe runs' evidence is on disk
        facts = json.loads((run.dir / ev / "facts" / "h100-0001.json").read_text())
        assert facts["perf"]["nccl_all_reduce"]["busbw_gbps"] in (before["value"], after["value"])
    assert driver_of(h100_lab.node("h100-0001")) == (BEFORE, BEFORE, BEFORE)
    assert driver_of(h100_lab.node("h100-0002")) == (BEFORE, BEFORE, BEFORE)  # the rest never started
    print(f"\nrehearsal: pilot busbw {before['value']} -> {after['value']} GB/s, rolled back")
