"""fabricproof against a real Slurm (issue 12.2): Debian's slurmctld, one slurmd per lab node and munged on loopback.

- `check --local` as HealthCheckProgram drains a failing node with its reason and resumes only its own drains.
"""

from __future__ import annotations

import time

import pytest
from fabricproof import slurm
from fabricproof.lab import manager
from slurmkit import wait_for

from .slurmlab import NODES, SlurmLab

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
    assert "MULTIPLE_SLURMD         = Yes" in c.run("scontrol", "show", "config").stdout
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
    slurm_lab.health_checks(on=True)
    try:
        drained = wait_for(lambda: (n := c.node(sick)).drained and n, WAIT_S, f"{sick} drained by its health check",
                           lambda: c.logs())
        assert drained.reason == "fabricproof check: nvlink.links_active,nvlink.topology"
        wait_for(lambda: all(slurm_lab.checked_since(n, started) for n in NODES), WAIT_S, "every node checked")
        assert {n: c.node(n).drained for n in NODES} == {person: False, sick: True, rollout: False}
        assert (c.root / "health-facts" / f"{sick}.json").is_file()  # named by slurmd: no --node-name given

        manager.fault_clear(lab.dir, sick)
        # Slurm flags a resumed node NOT_RESPONDING until its next ping answers (a second or so).
        wait_for(lambda: c.node(sick) == slurm.NodeState(sick, "IDLE", None), WAIT_S, f"{sick} resumed",
                 lambda: str(c.node(sick)))

        # A person's drain, and a rollout's (playbooks/drain.yml's reason), are not the health check's to lift.
        theirs = "fabricproof: driver-fm-535.183.01 run 20260101T000000-driver-fm-535.183.01-beef"
        c.run("scontrol", "update", f"nodename={person}", "state=drain", f"reason={PERSON}")
        c.run("scontrol", "update", f"nodename={rollout}", "state=drain", f"reason={theirs}")
        since = time.time()
        wait_for(lambda: slurm_lab.checked_since(person, since) and slurm_lab.checked_since(rollout, since), WAIT_S,
                 "a passing health check of both drained nodes")
        assert (c.node(person).drained, c.node(person).reason) == (True, PERSON)
        assert (c.node(rollout).drained, c.node(rollout).reason) == (True, theirs)
    finally:
        slurm_lab.health_checks(on=False)
        reset(slurm_lab)


