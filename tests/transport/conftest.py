"""Real-lab fixtures for transport tests: labs of our own, started and stopped by the lab engineers' LabFactory.

Transport tests kill sshd, inject faults and rewrite known_hosts copies, so they run on their own lab rather
than on the shared session lab; the factory stops every sshd it ever started, by PID.
"""

from __future__ import annotations

import pytest
from fabricproof import inventory as inventory_mod
from fabricproof.inventory import Inventory

from .labutil import LabFactory, RunningLab

#: 20 mixed nodes: every profile (a100 x3, h100 x7, h200 x5, gb200 x5) and two sshd (16 + 4 addresses).
FLEET_NODES = 20


@pytest.fixture(scope="session")
def transport_labs(lab_factory: LabFactory) -> LabFactory:
    """The session's lab factory (tests/conftest.py): it stops every sshd it ever started, by PID."""
    return lab_factory


@pytest.fixture(scope="session")
def fleet_lab(transport_labs: LabFactory) -> RunningLab:
    directory = transport_labs.new_dir()
    status = transport_labs.up(directory, nodes=FLEET_NODES, profile="mixed")
    assert status.running, status.as_dict()
    assert len(status.lab.sshd) == 2
    return RunningLab(dir=directory, status=status)


@pytest.fixture(scope="session")
def fleet_inventory(fleet_lab: RunningLab) -> Inventory:
    return inventory_mod.load(fleet_lab.dir / "inventory.yml")
