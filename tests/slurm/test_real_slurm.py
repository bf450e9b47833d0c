"""fabricproof against a real Slurm (issue 12.2): Debian's slurmctld, one slurmd per lab node and munged on loopback."""

from __future__ import annotations

import pytest
from fabricproof import slurm
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


