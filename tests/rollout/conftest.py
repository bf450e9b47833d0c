"""Lab fixtures for rollout rehearsals: a fresh small lab per test, started and always stopped by the lab tests'
own LabFactory (tests/labkit.py, so every suite stops labs the same way)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import labkit as kit
import pytest


@pytest.fixture(scope="session")
def rollout_labs() -> Iterator[object]:
    reason = kit.lab_skip_reason()
    if reason:
        pytest.skip(reason)
    factory = kit.LabFactory()
    try:
        yield factory
    finally:
        problems = factory.teardown()
        assert not problems, problems


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
