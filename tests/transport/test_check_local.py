"""`check --local` on an emulated lab node run as this machine: NHC lines, exit codes, Slurm drain and resume."""

from __future__ import annotations

import os
import subprocess

import pytest
from typer.testing import CliRunner

from fabricproof import facts as facts_mod
from fabricproof.cli import app as main_app
from fabricproof_lab import manager

from .test_cli import BASELINE, app

pytestmark = pytest.mark.lab

NODE = "h100-0006"


@pytest.fixture
def as_lab_node(fleet_lab, monkeypatch):
    """This process becomes lab node NODE: its emulated tools first on PATH, its state and its fake root."""
    lab = fleet_lab.lab
    address = lab.host(NODE).address
    node_dir = fleet_lab.dir / "nodes" / address
    monkeypatch.setenv("PATH", f"{fleet_lab.dir / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("FABRICPROOF_LAB_NODE", str(node_dir))
    monkeypatch.setenv("FABRICPROOF_HOST_ROOT", str(node_dir / "root"))
    yield node_dir
    manager.fault_clear(fleet_lab.dir, NODE)  # also hands the node's files back to the lab user


def check(*args: object):
    return CliRunner().invoke(app, ["check", "--local", "-b", str(BASELINE), "--group", "dgx_h100",
                                    "--node-name", NODE, *map(str, args)], catch_exceptions=False)


def slurm_node() -> str:
    return subprocess.run(["scontrol", "show", "node", NODE], capture_output=True, text=True, check=True).stdout


def test_local_check_passes_drains_on_failure_and_resumes_only_its_own_drain(fleet_lab, as_lab_node, tmp_path):
    facts_dir = tmp_path / "shared-facts"
    res = check("--drain", "--facts-dir", facts_dir)
    assert res.exit_code == 0, res.output
    assert res.stdout.strip().startswith(f"OK {NODE}: ") and "checks passed" in res.stdout
    assert "State=IDLE " in slurm_node()

    manager.fault_inject(fleet_lab.dir, NODE, "nvlink-inactive")
    res = check("--drain", "--facts-dir", facts_dir)
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert any(ln.startswith(f"FAIL {NODE}: nvlink.links_active (critical): ") for ln in lines), lines
    assert any(ln.startswith(f"FAIL {NODE}: nvlink.topology (critical): ") for ln in lines), lines
    assert lines[-1] == f"ACTION {NODE}: reset_gpu (the most disruptive action of its failed checks)", lines
    shown = slurm_node()
    assert ("State=IDLE+DRAIN" in shown
            and "Reason=fabricproof check: reset_gpu: nvlink.links_active,nvlink.topology [" in shown)

    manager.fault_clear(fleet_lab.dir, NODE, "nvlink-inactive")
    res = check("--drain", "--facts-dir", facts_dir)
    assert res.exit_code == 0 and f"resuming {NODE}" in res.stderr
    shown = slurm_node()
    assert "State=IDLE " in shown and "Reason=" not in shown

    # A drain someone else set is theirs to lift.
    subprocess.run(["scontrol", "update", f"nodename={NODE}", "state=drain", "reason=bad DIMM, ticket 4711"], check=True)
    try:
        res = check("--drain")
        assert res.exit_code == 0 and "not this check's" in res.stderr
        assert "Reason=bad DIMM, ticket 4711" in slurm_node()
    finally:
        subprocess.run(["scontrol", "update", f"nodename={NODE}", "state=resume"], check=True)

    # What the node wrote to the shared directory is what a central validate evaluates (limited to this node:
    # the inventory's other hosts wrote no facts, and a host in scope without facts is never a pass).
    assert set(facts_mod.load_dir(facts_dir)) == {NODE}
    res = CliRunner().invoke(main_app, ["validate", "--facts", str(facts_dir), "-b", str(BASELINE),
                                        "-i", str(fleet_lab.dir / "inventory.yml"), "--limit", NODE, "-f", "json"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output


def test_local_check_writes_a_node_exporter_textfile(as_lab_node, tmp_path):
    prom = tmp_path / "fabricproof.prom"
    res = check("--format", f"prometheus={prom}", "--checks", "nvlink.*,ib.*")
    assert res.exit_code == 0, res.output
    text = prom.read_text()
    assert "fabricproof" in text and NODE in text
    assert res.stdout.startswith(f"OK {NODE}: ")


def test_slurmd_names_the_node(as_lab_node, tmp_path, monkeypatch):
    # slurmd sets SLURMD_NODENAME for HealthCheckProgram and job tasks: the Slurm NodeName, which the hostname
    # need not be (several slurmd on one machine, or NodeName != hostname).
    monkeypatch.setenv("SLURMD_NODENAME", NODE)
    res = CliRunner().invoke(app, ["check", "--local", "-b", str(BASELINE), "--group", "dgx_h100",
                                   "--checks", "nvlink.*", "--facts-dir", str(tmp_path)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(f"OK {NODE}: ") and [p.name for p in tmp_path.iterdir()] == [f"{NODE}.json"]


def test_the_whole_collection_ends_at_timeout_and_names_what_it_cut_off(fleet_lab, as_lab_node):
    # slurmd kills a HealthCheckProgram after 60 s, and then nothing is printed, drained or written. A hung
    # nvidia-smi holds its lane up to the tool's own timeout (30 s); --timeout ends the whole run first.
    res = check("--timeout", "0")
    assert res.exit_code == 2 and "--timeout must be positive, got 0" in res.stderr

    manager.fault_inject(fleet_lab.dir, NODE, "tool-hangs")
    res = check("--timeout", "10")
    assert res.exit_code == 3, res.output
    lines = res.stdout.splitlines()
    cut = [ln for ln in lines if "cut off: the host's collection deadline passed" in ln]
    assert cut and all(ln.startswith(f"ERROR {NODE}: ") for ln in cut), lines
    assert any("collector nvidia_smi_q failed: cut off" in ln for ln in cut), cut
    # Commands queued behind the hung one in its lane never start: they say so. Nothing else goes wrong, and
    # nothing unfinished is judged a failure.
    deadline = ("cut off: the host's collection deadline passed", "not run: the host's collection deadline passed")
    assert [ln for ln in lines if not ln.endswith(deadline)] == [], lines
