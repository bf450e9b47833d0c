"""Lab fixtures for rollout rehearsals: a fresh small lab per test, started and always stopped by the lab tests'
own LabFactory (tests/labkit.py, so every suite stops labs the same way)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import labkit as kit
import pytest


@pytest.fixture(scope="session")
def rollout_labs(lab_factory: kit.LabFactory) -> kit.LabFactory:
    """The session's lab factory (tests/conftest.py): it stops every sshd it ever started, by PID."""
    return lab_factory


@dataclass(frozen=True)
class Lab:
    dir: Path
    inventory: Path

    def node(self, host: str) -> dict:
        """The stored state of a lab node by inventory name (h100-0001)."""
        import json

        return json.loads((self.dir / "nodes" / "by-name" / host / "state.json").read_text())


@pytest.fixture
def h100_lab(rollout_labs, request) -> Lab:
    """A fresh DGX H100 lab; its size comes from @pytest.mark.parametrize('h100_lab', [N], indirect=True)."""
    nodes = getattr(request, "param", 2)
    directory = rollout_labs.new_dir()
    status = rollout_labs.up(directory, nodes=nodes, profile="dgx-h100")
    assert status.running, status.as_dict()
    return Lab(directory, status.layout.inventory)
