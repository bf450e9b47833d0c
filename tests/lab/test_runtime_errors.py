"""Clear refusals before anything starts: not root, no sshd, bad shape, no lab, unknown host (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fabricproof.commands.lab import app
from fabricproof_lab import manager, sshd
from fabricproof_lab.state import LabState, SshdGroup, save
from fabricproof_lab.topology import plan_hosts
from typer.testing import CliRunner

runner = CliRunner()


def test_up_as_a_normal_user_says_root_is_needed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    result = runner.invoke(app, ["up", "--dir", str(tmp_path / "lab")])
    assert result.exit_code == 2
    assert "needs root" in result.stderr and "sudo" in result.stderr
    assert not (tmp_path / "lab").exists()  # nothing touched


def test_up_without_sshd_names_the_apt_get_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setattr(sshd, "SSHD", tmp_path / "no-such-sshd")
    result = runner.invoke(app, ["up", "--dir", str(tmp_path / "lab")])
    assert result.exit_code == 2
    assert "apt-get install -y openssh-server" in " ".join(result.stderr.split())


@pytest.mark.parametrize("args", [["--profile", "dgx-v100"], ["--nodes", "0"], ["--nodes", "5000"]])
def test_up_with_a_bad_shape_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                              args: list[str]) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setattr(sshd, "require_sshd", lambda: None)
    result = runner.invoke(app, ["up", "--dir", str(tmp_path / "lab"), *args])
    assert result.exit_code == 2
    assert not (tmp_path / "lab").exists()


def test_status_of_a_dir_without_a_lab_is_absent_and_not_running(tmp_path: Path) -> None:
    result = runner.invoke(app, ["status", "--dir", str(tmp_path), "--format", "json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {"running": False, "state": "absent", "dir": str(tmp_path), "nodes": 0,
                                         "inventory": None}


def test_status_of_a_lab_whose_sshd_are_gone_is_dead(tmp_path: Path) -> None:
    hosts = plan_hosts(2, "dgx-a100")
    save(tmp_path / "lab.json", LabState(dir=str(tmp_path), profile="dgx-a100", nodes=2, port=1, user="u",
                                         hosts=hosts, sshd=[SshdGroup(0, str(tmp_path / "c"), str(tmp_path / "l"),
                                                                      [h.address for h in hosts], pid=2 ** 22 + 1)]))
    result = runner.invoke(app, ["status", "--dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "dead" in result.stdout and f"pid {2 ** 22 + 1}" in result.stdout


def test_down_where_there_is_no_lab_is_a_no_op(tmp_path: Path) -> None:
    result = runner.invoke(app, ["down", "--dir", str(tmp_path)])
    assert result.exit_code == 0 and "no lab" in result.stderr


def test_purge_refuses_a_directory_that_is_not_a_lab(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    result = runner.invoke(app, ["down", "--dir", str(tmp_path), "--purge"])
    assert result.exit_code == 2 and (tmp_path / "precious.txt").exists()


def test_fault_commands_name_the_missing_lab_or_host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    fault = next(iter(manager.emu.FAULTS))
    result = runner.invoke(app, ["fault", "inject", "h100-0001", fault, "--dir", str(tmp_path)])
    assert result.exit_code == 2 and "no lab" in result.stderr
    hosts = plan_hosts(2, "dgx-h100")
    save(tmp_path / "lab.json", LabState(dir=str(tmp_path), profile="dgx-h100", nodes=2, port=1, user="u",
                                         hosts=hosts, sshd=[]))
    result = runner.invoke(app, ["fault", "inject", "h100-0009", fault, "--dir", str(tmp_path)])
    assert result.exit_code == 2 and "no host 'h100-0009'" in result.stderr
    result = runner.invoke(app, ["fault", "clear", "h100-0001", "no-such-fault", "--dir", str(tmp_path)])
    assert result.exit_code == 2 and "unknown fault 'no-such-fault'" in result.stderr
