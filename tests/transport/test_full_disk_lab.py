"""A full disk under a collection, for real: a small tmpfs holds the run directory while lab hosts are collected
over SSH. The run stops with one line naming the path, exit 6 (never 1, which is a failed check), and run.json says
`incomplete` with the reason when it can still be written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from diskkit import small_tmpfs
from typer.testing import CliRunner

from fabricproof.cli import app
from fabricproof.inventory import Inventory
from fabricproof.model import ExitCode
from fabricproof.runstore import RunStore

from .labutil import RunningLab

#: The disk: room for run.json (a few KiB, written twice) and far less than one lab host's evidence.
DISK = 256 * 1024
ROOM = 24 * 1024


@pytest.fixture(scope="module")
def two_hosts(fleet_lab: RunningLab, fleet_inventory: Inventory) -> tuple[Path, str]:
    """The transport tests' lab, its inventory, and a --limit naming two of its hosts."""
    return fleet_lab.dir / "inventory.yml", ",".join(sorted(fleet_inventory.hosts)[:2])


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of DISK bytes of our own, mounted on a temp dir and unmounted afterwards."""
    with small_tmpfs(tmp_path / "disk", str(DISK)) as mnt:
        yield mnt


def fill(disk: Path, leave: int) -> None:
    """Take all but `leave` bytes of the disk (tmpfs counts whole pages)."""
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    with open(disk / "filler", "wb") as fh:
        fh.write(b"\0" * max(0, free - leave))


def collect(hosts: tuple[Path, str], run_dir: Path, *extra: str):
    inventory, limit = hosts
    return CliRunner().invoke(app, ["collect", "-i", str(inventory), "--limit", limit, "-o", str(run_dir), "-q",
                                    *extra], catch_exceptions=False)


def the_one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.lab
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_full_disk_stops_the_run_with_one_line_exit_6_and_run_json_incomplete(two_hosts, small_disk, workers):
    fill(small_disk, ROOM)
    run_dir = small_disk / "run"
    res = collect(two_hosts, run_dir, "--workers", workers)
    assert res.exit_code == ExitCode.WRITE_FAILED == 6, res.output
    line = the_one_line(res.stderr)
    assert line.startswith(f"error: cannot write {run_dir}/") and line.endswith(": No space left on device"), line
    manifest = RunStore.open(run_dir).manifest()  # schema-valid
    assert manifest is not None
    assert manifest["status"] == "incomplete"
    assert manifest["reason"] == line.removeprefix("error: ")
    assert manifest["finished_at"] and manifest["pending"], manifest  # what the run could not finish is listed
    assert not list((run_dir / "raw").glob(".*")), "a host's staged evidence was left behind"


@pytest.mark.lab
def test_a_disk_too_full_for_run_json_names_run_json(two_hosts, small_disk):
    fill(small_disk, 0)
    run_dir = small_disk / "run"
    res = collect(two_hosts, run_dir)
    assert res.exit_code == 6, res.output
    line = the_one_line(res.stderr)
    assert line == f"error: cannot write {run_dir / 'run.json'}: No space left on device"
    assert not (run_dir / "run.json").exists() and not list(run_dir.rglob("*.json")), json.dumps(
        sorted(map(str, run_dir.rglob("*"))))


def test_a_report_on_stdout_redirected_to_a_full_disk_is_exit_6_in_one_line(small_disk):
    """The shell's redirect, not a file of ours: still no traceback, and not exit 1 (a failed check)."""
    fill(small_disk, 0)
    repo = Path(__file__).resolve().parents[2]
    with open(small_disk / "report.json", "w") as out:
        done = subprocess.run([sys.executable, "-m", "fabricproof", "validate", "--facts", repo / "inventories" / "lab" /
                               "facts", "-b", repo / "inventories" / "lab" / "baseline.yaml", "-f", "json"],
                              stdout=out, stderr=subprocess.PIPE, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(repo / "cli")})
    assert done.returncode == 6, done.stderr
    assert the_one_line(done.stderr) == "error: cannot write: No space left on device"
