"""The README's demo command works: `fabricproof demo` proves a lab, catches injected faults, mends them, and ends
with a rollout whose pilot fails and rolls itself back; it leaves no sshd behind."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricproof.cli import app
from fabricproof_lab import manager

pytestmark = pytest.mark.lab


def test_demo_tour_behaves_and_cleans_up(lab_factory, tmp_path):
    lab_dir = lab_factory.new_dir()  # the factory tears it down too, should the demo fail half-way
    res = CliRunner().invoke(app, ["demo", "--nodes", "16", "--dir", str(lab_dir)], catch_exceptions=False)
    out = res.output
    assert res.exit_code == 0, out[-3000:]
    assert "this step did not behave as expected" not in out
    assert "passed, 0 failed" in out  # the healthy fleet
    for needle in ("nvlink.links_active", "fm.version_matches_driver", "rdma.peermem_loaded",  # caught faults
                   "ROLLBACK_DONE on h100-0001", "exit 4"):
        assert needle in out, needle
    assert "lab down: every sshd stopped" in out
    # the evidence the demo says it keeps is there (each step's run); the test removes it, an operator keeps it
    kept = re.search(r"evidence kept in (/tmp/fabricproof-demo-\w+)/runs", out)
    assert kept, out[-3000:]
    runs = Path(kept.group(1)) / "runs"
    try:
        assert {"1-healthy", "2-broken", "3-mended", "rollouts"} <= {p.name for p in runs.iterdir()}, runs
    finally:
        shutil.rmtree(kept.group(1))
    # the rollout's progress lines carry their time, and the apply error that failed the pilot is the playbook's
    # own words (ansible's msg alone read 'Start Fabric Manager: non-zero return code')
    assert re.search(r"^\d\d:\d\d:\d\dZ    apply failed on 1 of 1 host\(s\): h100-0001: Start Fabric Manager: Job for "
                     r"nvidia-fabricmanager\.service failed", out, re.M), out[-3000:]
    assert not manager.status(lab_dir).running
