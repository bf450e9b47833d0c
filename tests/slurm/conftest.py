"""The real Slurm of the Slurm tests (slurmlab.py): started once for the module, always stopped by PID."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from labkit import LabFactory

from .slurmlab import SlurmLab, running


@pytest.fixture(scope="module")
def slurm_lab(lab_factory: LabFactory) -> Iterator[SlurmLab]:
    with running(lab_factory) as sl:
        yield sl
