"""Rehearsals on a real lab (issue 5, a-f): real sshd, real ansible-playbook through ansible-runner, the shipped
playbooks and example plans, emulated nodes whose tools the playbooks change.

a. driver + FM upgrade over three waves succeeds; the fleet ends on the after-baseline
b. the pilot's upgrade breaks FM -> post-gate fails -> automatic rollback -> before-baseline, exit 4, the story logged
c. SIGKILL of the rollout process during the apply of wave 2 -> resume finishes, no host applied twice
d. a second concurrent run on the same hosts is refused, from the same or another runs directory
e. NVLink error growth injected during the soak stops the rollout
f. HCA firmware upgrade, then `fabricproof rollback RUN` puts the old firmware back and proves it
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
import yaml
from fabricproof_lab import manager
from fabricproof.reporters import rollout_html
from fabricproof.rollout import decisions
from fabricproof.rollout import state as st
from fabricproof.rollout import view
from fabricproof.rollout.store import RolloutStore

from .rehearsal import (AFTER, BEFORE, PLANS, REPO, cli, derived_plan, driver_of, exit_of, install_events, prove_fleet,
                        spawn, step_started, the_run, wait_for, whats)

pytestmark = pytest.mark.lab

GATE_CHECKS = ["driver.version", "fm.version", "fm.version_matches_driver", "fm.service_active",
               "fabric.state_completed", "nvlink.links_active"]


# ----------------------------------------------------------------------------------------------------------- a


@pytest.mark.parametrize("h100_lab", [4], indirect=True)
def test_a_driver_fm_upgrade_over_three_waves(h100_lab, tmp_path):
    runs_dir = tmp_path / "runs"
    result = cli("rollout", "run", PLANS / "driver-fm-upgrade.yml", "-i", h100_lab.inventory, "--runs-dir", runs_dir)
    assert result.exit_code == 0, result.output
    run = the_run(runs_dir)
    assert run.status == st.DONE
    assert [w.hosts for w in run.waves] == [("h100-0001",), ("h100-0002",), ("h100-0003", "h100-0004")]
    hosts = [f"h100-000{i}" for i in range(1, 5)]
    for host in hosts:
        node = h100_lab.node(host)
        assert driver_of(node) == (AFTER, AFTER, AFTER), host
        assert "nvidia-fabricmanager-535" in node["holds"] and "nvidia-driver-535" in node["holds"]
        assert node["boot_count"] == 2 and node["slurm"]["state"] == "IDLE"  # one reboot, back in service
    assert whats(run.dir).count("PROCEED") == 3 and whats(run.dir)[-1] == "DONE"
    # the fleet, proven afresh, is on the after-baseline
    after = PLANS / "baselines" / "lab-driver-535.183.01.yaml"
    assert prove_fleet(h100_lab, after, GATE_CHECKS + ["driver.version_consistent"], hosts, tmp_path) == {}
    # every wave's gate reports exist in the plan's formats
    for wave in ("1-pilot", "2-early", "3-rest"):
        attempt = run.dir / "waves" / wave / "post-gate" / "attempt-1"
        assert {p.name for p in attempt.glob("report.*")} == {"report.json", "report.xml", "report.md"}


# ----------------------------------------------------------------------------------------------------------- b


@pytest.mark.parametrize("h100_lab", [2], indirect=True)
def test_b_failed_pilot_rolls_itself_back(h100_lab, tmp_path):
    manager.fault_inject(h100_lab.dir, "h100-0001", "upgrade-breaks-fm")
    plan = derived_plan(tmp_path, "driver-fm-upgrade.yml",
                        waves=[{"name": "pilot", "size": 1}, {"name": "rest", "size": "rest"}])
    runs_dir = tmp_path / "runs"
    result = cli("rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", runs_dir)
    assert result.exit_code == 4, result.output
    run = the_run(runs_dir)
    assert run.status == st.ROLLED_BACK
    pilot = h100_lab.node("h100-0001")
    assert driver_of(pilot) == (BEFORE, BEFORE, BEFORE)
    assert pilot["services"]["nvidia-fabricmanager"]["active"] == "active" and pilot["slurm"]["state"] == "IDLE"
    untouched = h100_lab.node("h100-0002")
    assert driver_of(untouched) == (BEFORE, BEFORE, BEFORE) and untouched["boot_count"] == 1
    story = whats(run.dir)
    assert story[:5] == ["START", "PRE_GATE", "DRAIN", "APPLY", "APPLY_DONE"]
    assert story[5:] == ["POST_GATE", "ROLLBACK", "ROLLBACK_START", "ROLLBACK_APPLY", "ROLLBACK_APPLY_DONE",
                         "ROLLBACK_GATE", "UNDRAIN", "ROLLBACK_DONE"]
    log = decisions.read(run.dir)
    post = next(d for d in log if d["what"] == "POST_GATE")
    assert post["hosts"] == ["h100-0001"] and "do not prove the after-baseline" in post["why"]
    report = json.loads((run.dir / post["evidence"][0]).read_text())
    failing = {r["check_id"] for r in report["results"] if r["outcome"] == "fail"}
    assert {"fm.version", "fm.version_matches_driver", "fm.service_active"} <= failing
    rollback = next(d for d in log if d["what"] == "ROLLBACK")
    assert rollback["hosts"] == ["h100-0001"] and "policy rollback_wave" in rollback["why"]
    done = log[-1]
    assert done["what"] == "ROLLBACK_DONE" and "proven on the before-baseline" in done["why"]
    # the rollback's proof is on disk, and the pilot proves the before-baseline afresh
    gate = next(d for d in log if d["what"] == "ROLLBACK_GATE")
    assert json.loads((run.dir / gate["evidence"][0]).read_text())["summary"]["failed"] == 0
    assert prove_fleet(h100_lab, REPO / "inventories" / "lab" / "baseline.yaml", GATE_CHECKS, ["h100-0001"],
                       tmp_path) == {}
    assert "decision log" in result.output and "ROLLBACK_DONE" in result.output
    # The run directory holds the rollout report, the page `rollout status RUN -f html` draws, owner-only.
    page = RolloutStore(run.dir).page_path
    assert f"rollout report {page}" in result.output
    assert page.stat().st_mode & 0o777 == 0o600
    assert page.read_text() == rollout_html.render(view.build(run.dir))
    assert "ROLLBACK_DONE" in page.read_text() and run.run_id in page.read_text()


# ----------------------------------------------------------------------------------------------------------- c


def _ansible_of(run_id: str) -> list[int]:
    """PIDs of ansible-playbook processes working for this run (their extra vars name the run id)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "ansible" in cmd and run_id in cmd:
            out.append(int(pid))
    return out


@pytest.mark.parametrize("h100_lab", [2], indirect=True)
def test_c_sigkill_during_wave_2_apply_then_resume_applies_no_host_twice(h100_lab, tmp_path):
    plan = derived_plan(tmp_path, "driver-fm-upgrade.yml", drain=None,
                        waves=[{"name": "pilot", "size": 1}, {"name": "second", "size": "rest"}],
                        soak={"duration": "1s", "checks": ["nvlink.recovery_errors"]})
    runs_dir = tmp_path / "runs"
    log = tmp_path / "run.log"
    proc = spawn("rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", runs_dir, log=log)
    try:
        wait_for(lambda: step_started(runs_dir, "w1.apply.b0"), 240, "the apply of wave 2", proc, log)
        wait_for(lambda: _ansible_of(the_run(runs_dir).run_id), 30, "ansible-playbook of wave 2", proc, log)
        time.sleep(1.5)  # mid-play
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    run = the_run(runs_dir)
    assert proc.returncode == -signal.SIGKILL
    assert run.status == st.RUNNING and run.in_doubt("apply") == ["h100-0002"]
    # the play dies with its parent (its pty hangs up): nothing goes on changing the host behind resume's back
    wait_for(lambda: not _ansible_of(run.run_id), 30, "ansible-playbook to die with the killed run")
    # another run is refused while this one is unfinished
    refused = cli("rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", runs_dir)
    assert refused.exit_code == 2 and f"run {run.run_id} stopped unfinished (running)" in refused.output

    resumed = cli("rollout", "resume", run.run_id, "--runs-dir", runs_dir)
    assert resumed.exit_code == 0, resumed.output
    assert the_run(runs_dir).status == st.DONE
    for host in ("h100-0001", "h100-0002"):
        node = h100_lab.node(host)
        assert driver_of(node) == (AFTER, AFTER, AFTER), host
        assert node["boot_count"] == 2, f"{host} rebooted {node['boot_count'] - 1} times"
    installs = install_events(run.dir)
    assert installs.get("h100-0001") == 1 and installs.get("h100-0002", 0) <= 1, installs
    story = decisions.read(run.dir)
    done = [d["hosts"] for d in story if d["what"] == "APPLY_DONE"]
    assert done.count(["h100-0001"]) == 1 and done.count(["h100-0002"]) == 1
    recovery = [d["what"] for d in story if d["what"] in ("APPLY_RECOVERED", "APPLY_RETRY")]
    assert len(recovery) == 1  # the in-doubt host was probed, then either left alone or finished


# ----------------------------------------------------------------------------------------------------------- d


@pytest.mark.parametrize("h100_lab", [1], indirect=True)
def test_d_a_second_concurrent_run_on_the_same_hosts_is_refused_whatever_its_runs_dir(h100_lab, tmp_path):
    plan = derived_plan(tmp_path, "hca-firmware.yml", drain=None, waves=[{"name": "all", "size": "rest"}],
                        soak={"duration": "6s", "checks": ["ib.link_downed"]})
    runs_dir, other_dir = tmp_path / "runs", tmp_path / "other" / "runs"
    log = tmp_path / "run.log"
    proc = spawn("rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", runs_dir, log=log)
    try:
        wait_for(lambda: step_started(runs_dir, "w0.soak"), 180, "the first run's soak", proc, log)
        # Hold the first run in its soak while the others try (on a loaded machine a 6 s soak can end before
        # they start): a stopped process is a live lock holder, as a busy one is.
        proc.send_signal(signal.SIGSTOP)
        first = the_run(runs_dir)
        second = cli("rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", runs_dir)
        assert second.exit_code == 2
        assert f"host h100-0001 is locked by run {first.run_id} (pid {proc.pid}" in second.output
        assert len(st.list_runs(runs_dir)) == 1  # the refused run left nothing behind
        # Locks are machine-wide: another operator's runs directory is refused the same way (issue 14.2).
        elsewhere = cli("rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", other_dir)
        assert elsewhere.exit_code == 2
        assert f"host h100-0001 is locked by run {first.run_id} (pid {proc.pid}" in elsewhere.output
        assert not other_dir.exists() or st.list_runs(other_dir) == []
        proc.send_signal(signal.SIGCONT)
        assert exit_of(proc, 120, log) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
    after = cli("rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", other_dir)
    # past the locks once the first run is done: its pre-gate finds the firmware already upgraded and halts
    assert after.exit_code == 1 and "locked" not in after.output and "pre-gate" in after.output, after.output


# ----------------------------------------------------------------------------------------------------------- e


@pytest.mark.parametrize("h100_lab", [2], indirect=True)
def test_e_nvlink_error_growth_during_the_soak_stops_the_rollout(h100_lab, tmp_path):
    plan = derived_plan(tmp_path, "hca-firmware.yml", drain=None, on_failure="halt",
                        # The soak ends at its first growth; its window only has to outlast the fault's injection,
                        # which under load 45 came after a 20 s window had closed flat.
                        soak={"duration": "120s", "interval": "1s",
                              "checks": ["nvlink.recovery_errors", "nvlink.crc_errors_burst", "ib.link_downed"]})
    runs_dir = tmp_path / "runs"
    log = tmp_path / "run.log"
    proc = spawn("rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", runs_dir, log=log)
    try:
        wait_for(lambda: step_started(runs_dir, "w0.soak"), 180, "the pilot's soak", proc, log)
        manager.fault_inject(h100_lab.dir, "h100-0001", "nvlink-errors-growing")
        assert exit_of(proc, 240, log, runs_dir) == 1, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    run = the_run(runs_dir)
    assert run.status == st.HALTED and run.hosts["h100-0002"]["state"] == st.PENDING  # wave 2 never started
    soak = next(d for d in decisions.read(run.dir) if d["what"] == "SOAK")
    assert soak["hosts"] == ["h100-0001"] and "nvlink.recovery_errors" in soak["why"]
    assert whats(run.dir)[-1] == "HALT"
    assert run.hosts["h100-0001"]["reason"].startswith("soak: ")
    assert h100_lab.node("h100-0002")["hcas"][0]["fw"] == "28.41.1000"


# ----------------------------------------------------------------------------------------------------------- f


@pytest.mark.parametrize("h100_lab", [2], indirect=True)
def test_f_hca_firmware_upgrade_then_rollback_run_proves_the_old_firmware(h100_lab, tmp_path):
    runs_dir = tmp_path / "runs"
    plan = derived_plan(tmp_path, "hca-firmware.yml", drain=None)
    result = cli("rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", runs_dir)
    assert result.exit_code == 0, result.output
    hosts = ["h100-0001", "h100-0002"]
    compute = lambda node: {h["fw"] for h in node["hcas"] if h["psid"] == "MT_0000000838"}
    assert all(compute(h100_lab.node(h)) == {"28.42.1000"} for h in hosts)
    run = the_run(runs_dir)

    back = cli("rollback", run.run_id, "--runs-dir", runs_dir)
    assert back.exit_code == 0, back.output
    assert all(compute(h100_lab.node(h)) == {"28.41.1000"} for h in hosts)
    state = st.RunState.load(run.dir)
    assert state.status == st.ROLLED_BACK and state.hosts_in(st.HOST_ROLLED_BACK) == hosts
    log = decisions.read(run.dir)
    gates = [d for d in log if d["what"] == "ROLLBACK_GATE"]
    assert [g["wave"] for g in gates] == ["rest", "pilot"]  # newest wave first
    for g in gates:
        report = json.loads((run.dir / g["evidence"][0]).read_text())
        fw = [r for r in report["results"] if r["check_id"] == "ib.fw_version"]
        assert fw and all(r["outcome"] == "pass" for r in fw)  # proven: the old firmware is what runs
    assert log[-1]["what"] == "ROLLBACK_DONE"
    assert prove_fleet(h100_lab, REPO / "inventories" / "lab" / "baseline.yaml", ["ib.fw_version", "ib.psid"], hosts,
                       tmp_path) == {}


# ------------------------------------------------------------------------------------------- runbook, --check


@pytest.mark.parametrize("h100_lab", [2], indirect=True)
def test_runbook_isolates_and_drains_the_failing_node(h100_lab, tmp_path):
    manager.fault_inject(h100_lab.dir, "h100-0002", "fm-down")
    runs_dir = tmp_path / "runs"
    book = REPO / "inventories" / "lab" / "runbooks" / "isolate-failing-nodes.yml"
    result = cli("runbook", "run", book, "-i", h100_lab.inventory, "--yes", "--runs-dir", runs_dir)
    assert result.exit_code == 1, result.output  # the validate step failed (as it should), the drain went on
    bad, good = h100_lab.node("h100-0002")["slurm"], h100_lab.node("h100-0001")["slurm"]
    assert bad["state"] == "IDLE+DRAIN" and bad["reason"].startswith("fabricproof: runbook isolate-failing-nodes run ")
    assert good["state"] == "IDLE" and good["reason"] is None
    run_dir = next(runs_dir.iterdir())
    log = decisions.read(run_dir)
    failed = next(d for d in log if d["what"] == "STEP_FAILED")
    assert "h100-0002: fm.service_active" in failed["why"]
    drained = next(d for d in log if d["what"] == "STEP_DONE")
    assert "drain.yml ok on 1 host(s)" in drained["why"]
    import tarfile

    with tarfile.open(run_dir / "evidence.tar.gz") as tar:
        names = tar.getnames()
    assert any("/raw/h100-0002/" in n for n in names)  # the raw outputs the verdict rests on
    assert any(n.endswith("attempt-1/report.json") for n in names)


@pytest.mark.parametrize("h100_lab", [1], indirect=True)
def test_playbooks_change_nothing_under_check(h100_lab, tmp_path):
    """Every change playbook (apply and rollback), drain and undrain, run with --check on a node that needs every
    change: the node's stored state is byte for byte the same afterwards."""
    from fabricproof.rollout.playbook import run_playbook

    books = [REPO / "playbooks" / "drain.yml"] + [
        REPO / "playbooks" / "changes" / change / f"{kind}.yml"
        for change in ("driver-fm-upgrade", "hca-firmware", "nvswitch-firmware") for kind in ("apply", "rollback")
    ] + [REPO / "playbooks" / "undrain.yml"]
    site = tmp_path / "site.yml"
    site.write_text("".join(f"- import_playbook: {b}\n" for b in books))
    extravars: dict = {"fabricproof_scheduler": "slurm", "fabricproof_reason": "fabricproof: check"}
    for name in ("driver-fm-upgrade.yml", "hca-firmware.yml", "nvswitch-firmware.yml"):
        extravars.update(yaml.safe_load((PLANS / name).read_text())["spec"]["change"]["apply"]["vars"])
    state_file = h100_lab.dir / "nodes" / "by-name" / "h100-0001" / "state.json"
    before = state_file.read_bytes()
    res = run_playbook(site, inventory=str(h100_lab.inventory), hosts=["h100-0001"], extravars=extravars,
                       private_dir=tmp_path / "ansible", ident="check", check=True)
    assert res.failed == {} and res.ok == ("h100-0001",), res
    assert state_file.read_bytes() == before
