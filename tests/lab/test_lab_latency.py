"""`lab up --latency realistic` on a real lab: tools answer over SSH as late as the real ones (slept), a running lab
switches in place, and the choice is recorded and shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import paramiko
import pytest
from fabricproof import tools
from fabricproof.commands.lab import app
from fabricproof_lab.user import LAB_USER
from typer.testing import CliRunner

if TYPE_CHECKING:
    from labkit import LabFactory

pytestmark = pytest.mark.lab


UPTIME_TICK_S = 0.01  # the resolution of /proc/uptime


def _timed(lab_dir: Path, address: str, port: int, command: str) -> tuple[float, str]:
    """Seconds the host took to run `command` (measured there, from /proc/uptime), and what it printed."""
    client = paramiko.SSHClient()
    client.load_host_keys(str(lab_dir / "known_hosts"))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(address, port=port, username=LAB_USER, key_filename=str(lab_dir / "keys" / "id_ed25519"),
                   look_for_keys=False, allow_agent=False, timeout=10)
    try:
        _, out, _ = client.exec_command(f"read a _ </proc/uptime; {command} >/dev/null; read b _ </proc/uptime; "
                                        f"echo $a $b; times", timeout=30)
        lines = out.read().decode().splitlines()
    finally:
        client.close()
    a, b = map(float, lines[0].split())
    return round(b - a, 2), "\n".join(lines[1:])


def test_realistic_latency_is_slept_on_the_host_and_a_running_lab_switches_in_place(lab_factory: LabFactory) -> None:
    directory = lab_factory.new_dir()
    runner = CliRunner()
    bad = runner.invoke(app, ["up", "--dir", str(directory), "--nodes", "1", "--latency", "slow"])
    assert bad.exit_code == 2 and "--latency 'slow': choose off or realistic" in bad.stderr
    try:
        res = runner.invoke(app, ["up", "--dir", str(directory), "--nodes", "2", "--latency", "realistic"])
    finally:
        lab_factory.track(directory)
    assert res.exit_code == 0, res.output
    state = json.loads((directory / "lab.json").read_text())
    assert state["latency"] == "realistic"
    host = state["hosts"][0]["address"]
    took, times = _timed(directory, host, state["port"], "nvidia-smi -q")
    # /proc/uptime counts hundredths, each read rounded down: a 0.6 s sleep may read as 0.59 (it did, once in a run)
    assert took >= tools.TOOLS["nvidia_smi_q"].duration.typical_s - UPTIME_TICK_S
    # `times`: the shell's CPU, then its children's: a sleep's worth, not 0.6 s of it
    child_user, child_sys = (float(t.rstrip("s").split("m")[1]) for t in times.splitlines()[1].split())
    assert child_user + child_sys < took / 2

    res = runner.invoke(app, ["up", "--dir", str(directory), "--nodes", "2", "--latency", "off"])
    assert res.exit_code == 0 and "tool latency now off" in res.stderr
    after = json.loads((directory / "lab.json").read_text())
    assert after["latency"] == "off" and [g["pid"] for g in after["sshd"]] == [g["pid"] for g in state["sshd"]]
    assert "sleep" not in (directory / "bin" / "nvidia-smi").read_text()  # the same sshd, the tools rewritten
    status = runner.invoke(app, ["status", "--dir", str(directory), "--format", "json"])
    assert json.loads(status.stdout)["latency"] == "off"
