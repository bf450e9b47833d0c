"""deploy/systemd: the service and timer pass `systemd-analyze verify` (it needs no running systemd), and the
service's ExecStart, run on an emulated node, writes the node_exporter textfile promtool accepts."""

from __future__ import annotations

import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from .conftest import BASELINE, LabNode

REPO = Path(__file__).resolve().parents[2]
UNITS = REPO / "deploy" / "systemd"
SERVICE, TIMER = UNITS / "fabricproof-check.service", UNITS / "fabricproof-check.timer"
INSTALLED = "/usr/local/bin/fabricproof"  # where the units expect the CLI (pip install as root puts it there)
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is missing: apt-get install -y systemd")


def _verify(directory: Path, *units: str) -> subprocess.CompletedProcess:
    assert ANALYZE is not None
    # --man=no: a Documentation= line an operator adds is not looked up in this machine's man pages.
    return subprocess.run([ANALYZE, "verify", "--man=no", *units], cwd=directory, capture_output=True, text=True,
                          timeout=300, check=False)


def _units_in(directory: Path, fabricproof: Path) -> None:
    """The shipped units in `directory`, ExecStart's binary rewritten to `fabricproof`: verify requires the binary
    to exist and be executable, and this machine has no /usr/local/bin/fabricproof (the tests must not install one)."""
    text = SERVICE.read_text()
    assert text.count(INSTALLED + " ") == 1
    (directory / SERVICE.name).write_text(text.replace(INSTALLED + " ", f"{fabricproof} "))
    shutil.copy(TIMER, directory / TIMER.name)


@needs_analyze
def test_the_service_and_timer_pass_systemd_analyze_verify(lab_node: LabNode, tmp_path):
    _units_in(tmp_path, lab_node.bin / "fabricproof")
    res = _verify(tmp_path, SERVICE.name, TIMER.name)
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")


@needs_analyze
@pytest.mark.parametrize("broken, by, said", [
    ("Type=oneshot", "Type=oneshot\nRestartSec=1min\nExecStartt=/bin/true", "Unknown key"),
    (INSTALLED + " ", "/nonexistent/fabricproof ", "/nonexistent/fabricproof"),
])
def test_systemd_analyze_verify_catches_a_broken_unit(tmp_path, broken, by, said):
    """The tool under the test does look: a misspelt key or a missing binary is reported."""
    (tmp_path / SERVICE.name).write_text(SERVICE.read_text().replace(broken, by, 1))
    shutil.copy(TIMER, tmp_path / TIMER.name)
    res = _verify(tmp_path, SERVICE.name, TIMER.name)
    assert said in res.stdout + res.stderr


def test_the_timer_starts_the_service():
    timer = TIMER.read_text()
    assert f"Unit={SERVICE.name}\n" in timer and "WantedBy=timers.target\n" in timer


def _exec_start() -> list[str]:
    """ExecStart's argv as systemd splits it (a backslash-newline continues the line)."""
    text = SERVICE.read_text().replace("\\\n", " ")
    (line,) = [ln for ln in text.splitlines() if ln.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


def test_exec_start_on_a_node_writes_a_textfile_node_exporter_can_read(lab_node: LabNode, tmp_path):
    """ExecStart as written, with this node's files in place of /etc/fabricproof and the textfile directory (the
    directory systemd makes from StateDirectory=)."""
    textfile_dir = tmp_path / "textfile"
    textfile_dir.mkdir()
    where = {"/etc/fabricproof/baseline.yaml": str(BASELINE), "/etc/fabricproof/inventory.yml": str(lab_node.inventory),
             "/var/lib/node_exporter/textfile/": f"{textfile_dir}/"}
    argv = _exec_start()
    assert argv[0] == INSTALLED
    for old, new in where.items():
        assert sum(old in a for a in argv) == 1, old
        argv = [a.replace(old, new) for a in argv]
    assert "StateDirectory=node_exporter/textfile\n" in SERVICE.read_text()
    res = subprocess.run(["fabricproof", *argv[1:]], env=lab_node.env(), capture_output=True, text=True, timeout=300,
                         check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    prom = textfile_dir / "fabricproof.prom"
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644  # node_exporter runs as its own user
    promtool = shutil.which("promtool")
    if promtool:
        check = subprocess.run([promtool, "check", "metrics"], input=prom.read_text(), capture_output=True, text=True,
                               timeout=120, check=False)
        assert (check.returncode, check.stdout, check.stderr) == (0, "", "")
