"""fabricproof against a real Slurm (issue 12.2): Debian's slurmctld, one slurmd per lab node and munged on loopback.

- `check --local` as HealthCheckProgram drains a failing node with its reason and resumes only its own drains;
- a rollout's drain.yml waits for the running job, and undrain.yml resumes only what this run drained;
- `srun` fans the node-local check out to every node, and one `validate --facts` judges the written facts with the
  fleet checks (a fault no node can see on its own).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from fabricproof import slurm
from fabricproof.cli import app as main_app
from fabricproof_lab import manager
from fabricproof.rollout import decisions
from slurmkit import wait_for
from typer.testing import CliRunner

from .slurmlab import BASELINE, NODES, REPO, SlurmLab

pytestmark = [pytest.mark.lab, pytest.mark.slurm]

PERSON = "bad DIMM, ticket 4711"
WAIT_S = 120.0  # generous: health checks and playbooks share two loaded cores with other suites


def reset(sl: SlurmLab) -> None:
    """No job, every node in service, no fault: what each test starts from and leaves."""
    c = sl.cluster
    if c.jobs():
        c.run("scancel", "--quiet", "--user=root")
        wait_for(lambda: not c.jobs(), WAIT_S, "the cancelled jobs to end")
    for node in NODES:
        if c.node(node).drained:
            c.run("scontrol", "update", f"nodename={node}", "state=resume")
    sl.give_nodes_back()
    wait_for(lambda: set(c.states().values()) == {"idle"}, WAIT_S, "every node idle", lambda: str(c.states()))


def test_debian_slurm_runs_one_slurmd_per_node_on_loopback_only(slurm_lab):
    c = slurm_lab.cluster
    assert re.search(r"^MULTIPLE_SLURMD\s*=\s*Yes\s*$", c.run("scontrol", "show", "config").stdout, re.MULTILINE)
    listening = c.listening()
    assert set(listening) == {"munged", "slurmctld", *(f"slurmd {n}" for n in NODES)}
    assert listening["munged"] == set()  # a unix socket only
    assert listening["slurmctld"] == {("127.0.0.1", c.ctld_port)}
    for node in NODES:
        assert listening[f"slurmd {node}"] == {("127.0.0.1", c.node_ports[node])}
    # slurm.parse_show_node reads real scontrol output (22.05): state, and no reason on a node in service.
    assert c.node(NODES[0]) == slurm.NodeState(NODES[0], "IDLE", None)


def test_health_check_program_drains_a_failing_node_and_resumes_only_its_own_drains(slurm_lab):
    c, lab = slurm_lab.cluster, slurm_lab.lab
    sick, person, rollout = "gb200-0002", "gb200-0001", "gb200-0003"
    started = time.time()
    manager.fault_inject(lab.dir, sick, "nvlink-inactive")
    asked = slurm_lab.inventory_runs()
    # One round of checks at a time, each every node once at slurmd's tick: a node does not check again, a full
    # check --local, while the test waits for another (the CPU no longer grows with the wall time).
    slurm_lab.health_checks(on=True, rounds=1)
    try:
        drained = wait_for(lambda: (n := c.node(sick)).drained and n, WAIT_S, f"{sick} drained by its health check",
                           lambda: c.logs())
        assert drained.reason == "fabricproof check: reset_gpu: nvlink.links_active,nvlink.topology"
        wait_for(lambda: all(slurm_lab.checked_since(n, started) for n in NODES), WAIT_S, "every node checked")
        assert {n: c.node(n).drained for n in NODES} == {person: False, sick: True, rollout: False}
        assert (c.root / "health-facts" / f"{sick}.json").is_file()  # named by slurmd: no --node-name given
        # slurmd gives the check no HOME: the inventory is kept in the state directory's cache, and the nodes that
        # checked at the same tick waited for one ansible-inventory (none, if an earlier test's checks kept it).
        assert slurm_lab.inventory_runs() - asked <= 1
        asked = slurm_lab.inventory_runs()

        manager.fault_clear(lab.dir, sick)
        slurm_lab.health_rounds(1)
        # Slurm flags a resumed node NOT_RESPONDING until its next ping answers (a second or so).
        wait_for(lambda: c.node(sick) == slurm.NodeState(sick, "IDLE", None), WAIT_S, f"{sick} resumed",
                 lambda: str(c.node(sick)))

        # A person's drain, and a rollout's (playbooks/drain.yml's reason), are not the health check's to lift.
        theirs = "fabricproof: driver-fm-535.183.01 run 20260101T000000-driver-fm-535.183.01-beef"
        c.run("scontrol", "update", f"nodename={person}", "state=drain", f"reason={PERSON}")
        c.run("scontrol", "update", f"nodename={rollout}", "state=drain", f"reason={theirs}")
        since = time.time()
        slurm_lab.health_rounds(1)
        wait_for(lambda: slurm_lab.checked_since(person, since) and slurm_lab.checked_since(rollout, since), WAIT_S,
                 "a passing health check of both drained nodes")
        assert (c.node(person).drained, c.node(person).reason) == (True, PERSON)
        assert (c.node(rollout).drained, c.node(rollout).reason) == (True, theirs)
        assert slurm_lab.inventory_runs() == asked  # every later round read it from the cache
    finally:
        slurm_lab.health_checks(on=False)
        slurm_lab.health_rounds(None)
        reset(slurm_lab)


# ------------------------------------------------------------------------------------------------ rollout

APPLY = """\
- name: A stand-in change that insists the node is drained with no job left while it changes
  hosts: all
  gather_facts: false
  tasks:
    - name: Read the node from Slurm
      ansible.builtin.command:
        argv: [scontrol, show, node, "{{ inventory_hostname }}"]
      delegate_to: localhost
      register: fp_node
      changed_when: false
    - name: No job runs on it
      ansible.builtin.assert:
        that: fp_node.stdout is search('State=IDLE\\+DRAIN')
    - name: Change the node
      ansible.builtin.command:
        argv: [nvidia-smi, -L]
      changed_when: true
"""

ROLLBACK = """\
- name: Nothing to undo
  hosts: all
  gather_facts: false
  tasks:
    - name: Nothing to undo
      ansible.builtin.debug:
        msg: nothing to undo
"""


def _plan(directory: Path) -> Path:
    (directory / "apply.yml").write_text(APPLY)
    (directory / "rollback.yml").write_text(ROLLBACK)
    plan = {
        "apiVersion": "fabricproof/v1", "kind": "RolloutPlan",
        "metadata": {"name": "slurm-drain", "description": "A stand-in change on every GB200 tray, drained in Slurm."},
        "spec": {
            "target": "gb200_nvl72",
            "change": {"apply": {"playbook": "apply.yml", "vars": {"ansible_become": False}},
                       "rollback": {"playbook": "rollback.yml", "vars": {"ansible_become": False}}},
            "baseline": {"before": str(BASELINE), "after": str(BASELINE)},
            "waves": [{"name": "all", "size": "rest"}],
            "gates": {"checks": ["gpu.count"], "retry_interval": "1s", "timeout": "10s", "max_failed_hosts": 0},
            "on_failure": "rollback_wave",
            # scontrol runs where the rollout runs (this machine has the cluster's slurm.conf); poll every second.
            "drain": {"scheduler": "slurm", "vars": {"ansible_become": False, "slurm_controller": "localhost",
                                                     "drain_poll_s": 1, "drain_timeout_s": 600}},
            "reports": ["json"],
        },
    }
    path = directory / "plan.yml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


def _drain_polls(runs: Path) -> int:
    """How often drain.yml has found the node still running a job (ansible-runner's retry events)."""
    count = 0
    for event in runs.glob("*/ansible/artifacts/*/job_events/*.json"):
        try:
            doc = json.loads(event.read_text())
        except (OSError, ValueError):  # being written
            continue
        if doc.get("event") == "runner_retry" and "wait until DRAINED" in (doc.get("event_data") or {}).get("task", ""):
            count += 1
    return count


def _run_dir(runs: Path) -> Path | None:
    found = sorted(p for p in runs.glob("*") if p.is_dir())
    return found[-1] if found else None


def test_rollout_drain_waits_for_the_running_job_and_undrain_resumes_only_what_it_drained(slurm_lab, tmp_path):
    c = slurm_lab.cluster
    busy, person, earlier = "gb200-0001", "gb200-0002", "gb200-0003"
    # Drained before this run: by a person, and by an earlier run of the same plan (halted for an operator).
    earlier_reason = "fabricproof: slurm-drain run 20260101T000000-slurm-drain-0000"
    c.run("scontrol", "update", f"nodename={person}", "state=drain", f"reason={PERSON}")
    c.run("scontrol", "update", f"nodename={earlier}", "state=drain", f"reason={earlier_reason}")
    release = c.root / "release-the-job"
    job = c.run("sbatch", "--parsable", "-w", busy, "-o", str(c.root / "job.out"),
                "--wrap", f"while [ ! -e {release} ]; do sleep 0.2; done").stdout.strip()
    wait_for(lambda: c.states().get(busy) == "allocated", WAIT_S, f"job {job} running on {busy}")

    runs = tmp_path / "runs"
    log = tmp_path / "rollout.log"
    try:
        with log.open("w") as out:
            rollout = subprocess.Popen([sys.executable, "-m", "fabricproof", "rollout", "run", str(_plan(tmp_path)),
                                        "-i", str(slurm_lab.inventory), "--runs-dir", str(runs)],
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                       env=c.env(PYTHONPATH=str(REPO / "cli")))
        try:
            ours = wait_for(lambda: (n := c.node(busy)).drained and n, WAIT_S, f"the rollout draining {busy}",
                            log.read_text)
            run_dir = _run_dir(runs)
            assert run_dir is not None and ours.reason == f"fabricproof: slurm-drain run {run_dir.name}"
            wait_for(lambda: _drain_polls(runs) >= 2, WAIT_S, "drain.yml to poll the busy node twice", log.read_text)
            # The job still runs: the node is draining, not drained, and nothing has been changed yet.
            assert c.states()[busy] == "draining" and rollout.poll() is None
            assert "APPLY" not in [d["what"] for d in decisions.read(run_dir)]
            release.touch()
            assert rollout.wait(timeout=300) == 0, log.read_text()
        finally:
            release.touch()
            if rollout.poll() is None:
                rollout.kill()
                rollout.wait()

        assert "JobState=COMPLETED" in c.run("scontrol", "show", "job", job).stdout
        story = [d["what"] for d in decisions.read(run_dir)]
        assert story.index("DRAIN") < story.index("APPLY") < story.index("UNDRAIN") and story[-1] == "DONE", story
        # Back in service: only the node this run drained. The others keep their drains and reasons.
        wait_for(lambda: c.node(busy) == slurm.NodeState(busy, "IDLE", None), WAIT_S, f"{busy} in service",
                 lambda: str(c.node(busy)))
        assert (c.node(person).drained, c.node(person).reason) == (True, PERSON)
        assert (c.node(earlier).drained, c.node(earlier).reason) == (True, earlier_reason)
    finally:
        reset(slurm_lab)


# ------------------------------------------------------------------------------------------------ fan-out


def test_srun_runs_the_check_on_every_node_and_one_validate_judges_the_fleet(slurm_lab):
    c, lab = slurm_lab.cluster, slurm_lab.lab
    shared = c.root / "shared-facts"  # every node of this cluster is this machine: its disk is the shared one
    # Another rack's ClusterUUID on one tray: every node passes its own checks; only the fleet comparison sees it.
    manager.fault_inject(lab.dir, "gb200-0003", "cluster-uuid-mismatch")
    try:
        fanout = c.run("srun", f"--nodes={len(NODES)}", "--ntasks-per-node=1", str(slurm_lab.as_lab_node),
                       sys.executable, "-m", "fabricproof", "check", "--local", "-b", str(BASELINE),
                       "-i", str(slurm_lab.inventory), "--facts-dir", str(shared), check=False, timeout=300)
        assert fanout.returncode == 0, fanout.stdout + fanout.stderr
        assert sorted(line.split(":")[0] for line in fanout.stdout.splitlines()) == [f"OK {n}" for n in NODES]
        assert sorted(p.name for p in shared.iterdir()) == [f"{n}.json" for n in NODES]

        res = CliRunner().invoke(main_app, ["validate", "--facts", str(shared), "-b", str(BASELINE),
                                            "-i", str(slurm_lab.inventory), "-f", "json"], catch_exceptions=False)
        assert res.exit_code == 1, res.output
        report = json.loads(res.stdout)
        failed = {(r["check_id"], r["host"]) for r in report["results"] if r["outcome"] == "fail"}
        assert failed == {("fabric.cluster_uuid_consistent", "gb200-0003")}
        assert {r["host"] for r in report["results"]} == set(NODES)
        uuid = {r["host"]: r["outcome"] for r in report["results"] if r["check_id"] == "fabric.cluster_uuid_consistent"}
        assert uuid == {"gb200-0001": "pass", "gb200-0002": "pass", "gb200-0003": "fail"}
    finally:
        reset(slurm_lab)
