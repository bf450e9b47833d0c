"""The shared session lab of the lab tests (the factory fixture itself lives in tests/conftest.py)."""

from __future__ import annotations

import pytest
from labkit import LabFactory, RunningLab


@pytest.fixture(scope="session")
def lab(lab_factory: LabFactory) -> RunningLab:
    """One mixed lab for the whole session: 2 sshd, every profile, a GB200 rack."""
    directory = lab_factory.new_dir()
    status = lab_factory.up(directory, nodes=24, profile="mixed")
    assert status.running, status.as_dict()
    return RunningLab(dir=directory, status=status)

