"""The real Slurm of the Slurm tests (slurmlab.py): started once for the module, always stopped by PID."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
import slurmkit
from labkit import LabFactory

from .slurmlab import SlurmLab, start


@pytest.fixture(scope="module")
def slurm_lab(lab_factory: LabFactory) -> Iterator[SlurmLab]:
    reason = slurmkit.skip_reason() or (None if shutil.which("flock") else "flock (util-linux) is missing")
    if reason:
        pytest.skip(reason)
    sl = start(lab_factory)
    try:
        yield sl
    finally:
        problems = sl.cluster.stop()
        assert not problems, problems
