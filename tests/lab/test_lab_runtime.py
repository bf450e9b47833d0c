"""The lab runtime against a real sshd: up/status/down, strict host keys, per-node identity, Ansible, scale."""

from __future__ import annotations

import json
import os
import pwd
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import paramiko
import pytest
from fabricproof.commands.lab import app
from fabricproof_lab import manager, netstat, nodestore, procs
from fabricproof_lab.errors import LabError
from fabricproof_lab.user import LAB_USER
from typer.testing import CliRunner

if TYPE_CHECKING:  # fixtures come from conftest.py; imported for the annotations only
    from .conftest import LabFactory, RunningLab

pytestmark = pytest.mark.lab

runner = CliRunner()


def _cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout


def _connect(lab_dir: Path, address: str, port: int, known_hosts: Path | None = None) -> paramiko.SSHClient:
    """A paramiko client that trusts nothing but the given known_hosts (the lab's by default)."""
    client = paramiko.SSHClient()
    client.load_host_keys(str(known_hosts or lab_dir / "known_hosts"))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(address, port=port, username=LAB_USER, key_filename=str(lab_dir / "keys" / "id_ed25519"),
                   look_for_keys=False, allow_agent=False, timeout=10)
    return client


def _run(client: paramiko.SSHClient, command: str) -> tuple[int, str]:
    _, stdout, _ = client.exec_command(command, timeout=20)
    out = stdout.read().decode()
    return stdout.channel.recv_exit_status(), out


def _ssh(lab_dir: Path, address: str, port: int, command: str) -> tuple[int, str]:
    client = _connect(lab_dir, address, port)
    try:
        return _run(client, command)
    finally:
        client.close()


# ------------------------------------------------------------------------------ up and status


def test_up_again_with_the_same_shape_reuses_the_running_lab(lab: RunningLab) -> None:
    before = lab.lab.pids()
    again = manager.up(lab.dir, nodes=24, profile="mixed")
    assert again.running and again.lab is not None
    assert again.lab.pids() == before  # no sshd restarted
    code, out = _cli("up", "--nodes", "24", "--profile", "mixed", "--dir", str(lab.dir))
    assert code == 0 and out.strip() == str(lab.dir / "inventory.yml")


def test_up_with_another_shape_while_running_is_refused(lab: RunningLab) -> None:
    code, _ = _cli("up", "--nodes", "25", "--profile", "mixed", "--dir", str(lab.dir))
    assert code == 2
    with pytest.raises(LabError, match="is running"):
        manager.up(lab.dir, nodes=24, profile="dgx-h100")


def test_status_json_describes_the_running_lab(lab: RunningLab) -> None:
    code, out = _cli("status", "--dir", str(lab.dir), "--format", "json")
    doc = json.loads(out)
    assert code == 0
    assert doc["running"] is True and doc["state"] == "running"
    assert doc["nodes"] == 24 and doc["profile"] == "mixed" and doc["dir"] == str(lab.dir)
    assert doc["inventory"] == str(lab.dir / "inventory.yml") and Path(doc["inventory"]).is_file()
    assert doc["profiles"] == {"dgx-a100": 3, "dgx-h100": 9, "hgx-h200": 6, "gb200-nvl72": 6}
    assert doc["sshd"]["total"] == 2 and doc["sshd"]["alive"] == 2 and doc["sshd"]["dead"] == 0
    assert all(p["listening"] == p["addresses"] for p in doc["sshd"]["processes"])


def test_lab_files_have_the_modes_sshd_and_clients_need(lab: RunningLab) -> None:
    keys = lab.dir / "keys"
    assert (keys / "id_ed25519").stat().st_mode & 0o777 == 0o600 and (keys / "id_ed25519").stat().st_uid == 0
    assert (keys / "ssh_host_ed25519_key").stat().st_mode & 0o777 == 0o600
    assert (keys / "authorized_keys").stat().st_mode & 0o777 == 0o644  # sshd reads it as the lab user
    lines = (lab.dir / "known_hosts").read_text().splitlines()
    assert len(lines) == 24 and lines[0].startswith(f"[127.10.0.1]:{lab.lab.port} ssh-ed25519 ")
    state = json.loads((lab.dir / "lab.json").read_text())
    assert state["port"] == lab.lab.port and len(state["sshd"]) == 2 and all(g["pid"] for g in state["sshd"])


# ------------------------------------------------------------------------- SSH, strictly checked


def test_each_address_is_its_own_node_behind_strict_host_key_checking(lab: RunningLab) -> None:
    first, last = lab.lab.hosts[0], lab.lab.hosts[-1]
    seen: dict[str, str] = {}
    for host in (first, last):
        client = _connect(lab.dir, host.address, lab.lab.port)
        try:
            code, node = _run(client, "sh -c 'echo $FABRICPROOF_LAB_NODE'")
            assert code == 0 and node.strip() == str(lab.dir / "nodes" / host.address)
            code, root = _run(client, "echo $FABRICPROOF_HOST_ROOT")
            assert root.strip() == str(lab.dir / "nodes" / host.address / "root")
            code, who = _run(client, "id -un; echo $PATH")
            user, path = who.split()
            assert user == LAB_USER and path.startswith(f"{lab.dir / 'bin'}:")
            code, gpus = _run(client, "nvidia-smi -L")
            assert code == 0
            assert re.match(r"GPU 0: NVIDIA .+ \(UUID: GPU-[0-9a-f-]+\)$", gpus.splitlines()[0]), gpus
            seen[host.address] = gpus
        finally:
            client.close()
    assert "A100" in seen[first.address] and "GB200" in seen[last.address]
    assert seen[first.address] != seen[last.address]


def test_a_wrong_or_unknown_host_key_is_refused(lab: RunningLab, tmp_path: Path) -> None:
    address, port = lab.lab.hosts[0].address, lab.lab.port
    other_key = paramiko.Ed25519Key.from_private_key_file(str(lab.dir / "keys" / "id_ed25519"))  # not a host key
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[{address}]:{port} {other_key.get_name()} {other_key.get_base64()}\n")
    with pytest.raises(paramiko.BadHostKeyException):
        _connect(lab.dir, address, port, known_hosts=wrong)
    empty = tmp_path / "empty"
    empty.write_text("")
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        _connect(lab.dir, address, port, known_hosts=empty)


def test_root_and_password_logins_are_refused(lab: RunningLab) -> None:
    client = paramiko.SSHClient()
    client.load_host_keys(str(lab.dir / "known_hosts"))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    with pytest.raises(paramiko.AuthenticationException):
        client.connect(lab.lab.hosts[0].address, port=lab.lab.port, username="root",
                       key_filename=str(lab.dir / "keys" / "id_ed25519"), look_for_keys=False, allow_agent=False)
    client.close()


def test_node_state_lives_on_tmpfs_behind_the_nodes_link(lab: RunningLab) -> None:
    nodes = lab.dir / "nodes"
    if nodestore.tmpfs_room(24) is not None:
        pytest.skip("no room on /dev/shm: the lab put its nodes on disk")
    assert nodes.is_symlink() and nodestore.is_store(Path(os.readlink(nodes)))
    assert lab.lab.node_store == os.readlink(nodes)
    owner = (nodes / lab.lab.hosts[0].address).stat().st_uid
    assert owner == pwd.getpwnam(LAB_USER).pw_uid  # the mutating tools run as the lab user


# ---------------------------------------------------------------------------------- faults


def test_fault_list_names_what_catches_each_fault() -> None:
    code, out = _cli("fault", "list", "--format", "json")
    faults = json.loads(out)
    assert code == 0 and len(faults) >= 18
    names = {f["name"] for f in faults}
    assert {"fm-down", "fm-driver-mismatch", "nvlink-inactive", "ib-rate-degraded", "peermem-missing",
            "acs-enabled", "nvlink-errors-growing", "tool-hangs", "upgrade-breaks-fm"} <= names
    for fault in faults:  # every fault says how it shows (a trigger shows only once a tool fires it)
        assert fault["description"]
        shows = fault["catches"] or fault["catches_over_time"] or fault["catches_fleet"] or fault["breaks"]
        # probe-only faults show under load; gpu-busy and slurm-job make the node not idle (no probe starts there)
        shows = shows or any(fault["catches_probes_by_profile"].values()) or fault["blocks_probes"]
        shows = shows or fault["catches_subnet"]  # a cabling fault shows in the fabric's diff against its plan
        shows = shows or fault["catches_collective"]  # only a collective across nodes and its search show it
        assert shows or fault["kind"] == "trigger", fault


def test_injected_fault_shows_over_ssh_and_the_lab_user_can_repair_it(lab: RunningLab) -> None:
    host = lab.lab.host("a100-0001")
    assert host is not None
    try:
        code, _ = _cli("fault", "inject", "a100-0001", "fm-down", "--dir", str(lab.dir))
        assert code == 0
        client = _connect(lab.dir, host.address, lab.lab.port)
        try:
            assert _run(client, "systemctl is-active nvidia-fabricmanager") == (3, "failed\n")
            # The fault was written by root; the lab user's mutating tool must still be able to change the node.
            assert _run(client, "systemctl start nvidia-fabricmanager")[0] == 0
            assert _run(client, "systemctl is-active nvidia-fabricmanager") == (0, "active\n")
            assert _cli("fault", "inject", "127.10.0.1", "nvlink-inactive", "--dir", str(lab.dir))[0] == 0
            assert "<inactive>" in _run(client, "nvidia-smi nvlink -s")[1]
            code, _ = _cli("fault", "clear", "a100-0001", "--dir", str(lab.dir))
            assert code == 0
            assert "<inactive>" not in _run(client, "nvidia-smi nvlink -s")[1]
        finally:
            client.close()
        other = lab.lab.host("gb200-0001")
        assert other is not None
        assert _cli("fault", "inject", other.name, "fm-down", "--dir", str(lab.dir))[0] == 2  # not on GB200
    finally:
        manager.fault_clear(lab.dir, "a100-0001")


# ---------------------------------------------------------------------------------- Ansible


def _ansible_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ,
            "ANSIBLE_PIPELINING": "True",
            # No ControlMaster: nothing (no `ssh: ... [mux]` master) outlives the test.
            "ANSIBLE_SSH_ARGS": "-o ControlMaster=no",
            "ANSIBLE_HOST_KEY_CHECKING": "True",
            "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
            "ANSIBLE_NOCOLOR": "1"}


def test_ansible_inventory_lists_every_host_with_profile_and_rack_groups(lab: RunningLab, tmp_path: Path) -> None:
    done = subprocess.run(["ansible-inventory", "-i", str(lab.dir / "inventory.yml"), "--list"],
                          capture_output=True, text=True, env=_ansible_env(tmp_path), timeout=60, check=True)
    inv = json.loads(done.stdout)
    hostvars = inv["_meta"]["hostvars"]
    assert set(hostvars) == {h.name for h in lab.lab.hosts}
    assert len(inv["dgx_h100"]["hosts"]) == 9 and len(inv["gb200_nvl72"]["hosts"]) == 6
    assert inv["rack_01"]["hosts"] == [h.name for h in lab.lab.hosts if h.profile == "gb200-nvl72"]
    assert set(inv["lab"]["children"]) == {"dgx_a100", "dgx_h100", "hgx_h200", "gb200_nvl72", "rack_01"}
    gb = hostvars["gb200-0001"]
    assert gb["ansible_host"] == lab.lab.host("gb200-0001").address and gb["rack"] == 1
    assert gb["ansible_port"] == lab.lab.port and gb["ansible_user"] == LAB_USER
    assert "StrictHostKeyChecking=yes" in gb["ansible_ssh_common_args"]


def test_ansible_runs_a_command_on_two_lab_hosts(lab: RunningLab, tmp_path: Path) -> None:
    done = subprocess.run(["ansible", "-i", str(lab.dir / "inventory.yml"), "h100-0001:gb200-0001",
                           "-m", "command", "-a", "nvidia-smi -L", "--one-line"],
                          capture_output=True, text=True, env=_ansible_env(tmp_path), timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2
    for name in ("h100-0001", "gb200-0001"):
        line = next(ln for ln in lines if ln.startswith(name))
        assert "CHANGED" in line and "rc=0" in line and "GPU 0: NVIDIA" in line


def test_ansible_modules_compile_on_a_lab_node_once_and_later_tasks_reuse_it(lab: RunningLab, tmp_path: Path) -> None:
    """The lab nodes' sitecustomize (fabricproof_lab.zipcache) under real Ansible: the first task fills the lab's cache
    as the lab user, a later task only reads it (no entry rewritten), and both tasks answer alike."""
    cache = lab.dir / "zipcache"

    def task() -> str:
        done = subprocess.run(["ansible", "-i", str(lab.dir / "inventory.yml"), "h100-0002", "-m", "command",
                               "-a", "nvidia-smi -L", "--one-line"],
                              capture_output=True, text=True, env=_ansible_env(tmp_path), timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def entries() -> dict[str, tuple[int, int]]:
        return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in cache.iterdir()}

    first = task()
    after_first = entries()
    assert len(after_first) >= 20  # ansible.module_utils.basic and what it imports
    assert all(os.stat(cache / name).st_uid == pwd.getpwnam(LAB_USER).pw_uid for name in after_first)
    assert task() == first
    assert entries() == after_first, "a later task compiled and wrote again"


# ------------------------------------------------------------------------- failure and scale


def _wait_gone(pids: list[int], timeout_s: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    left = pids
    while left and time.monotonic() < deadline:
        left = [p for p in left if procs.is_running(p)]
        time.sleep(0.05)
    return left


def test_status_reports_a_killed_sshd_as_dead_and_up_repairs_it(lab_factory: LabFactory) -> None:
    directory = lab_factory.new_dir()
    first = lab_factory.up(directory, nodes=20, profile="dgx-h100", node_store="disk")
    assert first.lab is not None
    nodes_dir = directory / "nodes"
    assert nodes_dir.is_dir() and not nodes_dir.is_symlink() and first.lab.node_store == str(nodes_dir)
    victim = first.lab.sshd[1]
    os.kill(victim.pid, signal.SIGKILL)
    assert _wait_gone([victim.pid]) == []
    code, out = _cli("status", "--dir", str(directory), "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["running"] is False and doc["state"] == "degraded"
    dead = [p for p in doc["sshd"]["processes"] if not p["alive"]]
    assert [(p["pid"], p["first_address"]) for p in dead] == [(victim.pid, "127.10.0.17")]
    code, out = _cli("status", "--dir", str(directory))
    assert code == 1 and f"pid {victim.pid}" in out and "dead" in out

    repaired = lab_factory.up(directory, nodes=20, profile="dgx-h100")
    assert repaired.running and repaired.lab is not None
    assert repaired.lab.sshd[0].pid == first.lab.sshd[0].pid  # the live one was kept
    assert _ssh(directory, "127.10.0.20", repaired.lab.port, "echo $FABRICPROOF_LAB_NODE")[1].strip().endswith(
        "/127.10.0.20")

    for g in repaired.lab.sshd:
        os.kill(g.pid, signal.SIGKILL)
    assert _wait_gone(repaired.lab.pids()) == []
    assert manager.status(directory).state == "dead"
    manager.down(directory)
    assert manager.status(directory).state == "stopped"


def test_a_lab_of_200_nodes_answers_on_first_and_last_and_stops_without_leftovers(lab_factory: LabFactory) -> None:
    directory = lab_factory.new_dir()
    # How long `lab up` takes is a benchmark figure (bench_fleet.py prints lab_up_s), not asserted here: a
    # 30 s bound failed at 40.6 s on a loaded machine.
    status = lab_factory.up(directory, nodes=200, profile="dgx-h100")
    assert status.running and status.lab is not None
    lab = status.lab
    assert len(lab.sshd) == 13
    addresses = [h.address for h in lab.hosts]
    for address in (addresses[0], addresses[-1]):
        code, out = _ssh(directory, address, lab.port, "nvidia-smi -L")
        assert code == 0 and out.count("GPU ") == 8
    # A session still running at `down` (a hung tool, say) must not survive it either.
    hung = _connect(directory, addresses[5], lab.port)
    hung.exec_command("sleep 600")
    time.sleep(0.3)
    sessions = procs.descendants(lab.pids())
    assert sessions, "the open session should have sshd children"
    # Nor what a session left running once its shell had gone (re-parented to init, out of sshd's tree), as the
    # SSH transport's watchdog is until a command's deadline when the session's shell dies alone.
    code, out = _ssh(directory, addresses[7], lab.port, "sh -c 'sleep 600 </dev/null >/dev/null 2>&1 & echo $!'")
    orphan = int(out)
    assert code == 0 and procs.is_running(orphan) and orphan not in procs.descendants(lab.pids())

    code, _ = _cli("down", "--dir", str(directory))
    assert code == 0
    hung.close()
    assert _wait_gone(lab.pids() + sorted(sessions) + [orphan]) == []
    assert netstat.listening_on(lab.port, addresses, netstat.listeners()) == set()
    with pytest.raises(OSError):
        socket.create_connection((addresses[-1], lab.port), timeout=1).close()
    assert (directory / "inventory.yml").is_file() and (directory / "nodes").is_dir()  # down keeps the files
    assert manager.status(directory).state == "stopped"
    store = Path(lab.node_store or "")
    code, _ = _cli("down", "--dir", str(directory), "--purge")
    assert code == 0 and not directory.exists() and not store.exists()


def test_a_port_in_use_is_refused_with_exit_2(lab_factory: LabFactory) -> None:
    directory = lab_factory.new_dir()
    with socket.socket() as holder:
        holder.bind(("127.10.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        code, _ = _cli("up", "--nodes", "2", "--dir", str(directory), "--port", str(port))
    assert code == 2
    assert manager.status(directory).state in ("absent", "stopped")


def test_a_lab_dir_the_lab_user_cannot_reach_is_refused_naming_the_blocker(lab_factory: LabFactory) -> None:
    blocker = lab_factory.new_dir().parent / "private"
    blocker.mkdir(mode=0o700)
    with pytest.raises(LabError, match=re.escape(f"cannot traverse {blocker} (mode 0700")):
        manager.up(blocker / "lab", nodes=1, profile="dgx-h100")
    assert not (blocker / "lab").exists()  # refused before creating anything


@pytest.mark.slow
def test_a_lab_of_1000_nodes_starts_within_a_minute(lab_factory: LabFactory) -> None:
    directory = lab_factory.new_dir()
    started = time.monotonic()
    status = lab_factory.up(directory, nodes=1000, profile="mixed")
    took = time.monotonic() - started
    assert status.running and status.lab is not None and len(status.lab.sshd) == 63
    assert took < 60, took
    last = status.lab.hosts[-1]
    assert _ssh(directory, last.address, status.lab.port, "echo $FABRICPROOF_LAB_NODE")[1].strip().endswith(
        last.address)
    manager.down(directory)
    assert _wait_gone(status.lab.pids()) == []
