"""Operators rehearse runbooks on the lab by hand and from ad-hoc Ansible (issue 10.11): the commands they type
every day answer over real SSH in the real tools' formats, anything else with the real usage text and exit code,
and `ansible all -m raw -a 'nvidia-smi -L; ibstat -l'` works on every node through ansible-runner."""

from __future__ import annotations

import re
from pathlib import Path

import paramiko
import pytest

from fabricproof.inventory import load as load_inventory
from fabricproof.rollout.playbook import runner_env
from labkit import connect_node

pytestmark = pytest.mark.lab

HOST = "h100-0001"
NVSMI_INVALID = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"

#: (what an operator types, exit status, a pattern the output must match: stdout then stderr; (?s) where it spans
#: lines).
COMMANDS = [
    ("nvidia-smi", 0, r"(?s)\| NVIDIA-SMI 535\.\S+ +Driver Version: .*\|   0  NVIDIA H100 80GB HBM3 +On  \|"),
    ("nvidia-smi -L", 0, r"\AGPU 0: NVIDIA H100 80GB HBM3 \(UUID: GPU-[0-9a-f-]+\)\n(GPU \d: .*\n){7}\Z"),
    ("nvidia-smi -i 1 -L", 0, r"\AGPU 1: NVIDIA H100 [^\n]*\n\Z"),
    ("nvidia-smi -q -d FABRIC", 0, r"(?s)NVSMI LOG.*GPU 00000000:19:00.0\n    Fabric\n        State +: Completed"),
    ("nvidia-smi -q -d ECC -i 0", 0, r"Attached GPUs[^\n]*\nGPU 00000000:19:00.0\n    ECC Mode\n"),
    ("nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader", 0, r"\A0, NVIDIA H100 80GB HBM3, GPU-"),
    ("nvidia-smi --query-gpu=index,memory.used,utilization.gpu,power.draw,temperature.gpu --format=csv", 0,
     r"\Aindex, memory.used \[MiB\], utilization.gpu \[%\], power.draw \[W\], temperature.gpu\n0, 0 MiB, 0 %, "),
    ("nvidia-smi nvlink -s -i 0", 0, r"\AGPU 0: [^\n]*\n\t Link 0: 26.562 GB/s"),
    ("nvidia-smi nvlink -e -i 0", 0, r"\AGPU 0: [^\n]*\n\t Link 0: Replay Errors: 0"),
    ("nvidia-smi nvlink -c -i 0", 0, r"\AGPU 0: "),
    ("nvidia-smi topo -m", 0, r"\A\tGPU0\tGPU1.*\nGPU0\t X \tNV18"),
    ("nvidia-smi topo -p2p n", 0, r"\A \tGPU0\tGPU1\t.*\n GPU0\tX\tOK\t"),
    ("nvidia-smi --frobnicate", 2, "\\A" + re.escape(NVSMI_INVALID) + "\\Z"),
    ("ibstat -l", 0, r"\Amlx5_0\nmlx5_1\n(mlx5_\d\n)*\Z"),
    ("ibstat -s", 0, r"(?s)\ACA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n(?:(?!Port 1:).)*\Z"),
    ("ibstat -p", 0, r"\A(0x[0-9a-f]{16}\n)+\Z"),
    ("ibstat mlx5_0", 0, r"\ACA 'mlx5_0'\n(.*\n)*\t\tState: Active\n"),
    ("ibstat mlx5_0 1", 0, r"\ACA: 'mlx5_0'\nPort 1:\nState: Active\n"),
    ("ibstat -q", 2, r"\Aibstat: invalid option -- 'q'\n\nUsage: ibstat \[options\] <ca_name> \[portnum\]\n"),
    ("ibstat mlx5_0 9", 255, r"ibwarn: \[\d+\] ca_stat: CA: 'mlx5_0' has no port number 9 - max \(1\)"),
    ("ibv_devinfo -d mlx5_0", 0, r"\Ahca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand \(0\)\n(.*\n)*\t\t\tlink_layer:\t\tInfiniBand\n\n\Z"),
    ("ibv_devinfo -l", 0, r"\A8 HCAs found:\n\tmlx5_0\n"),
    ("ibv_devinfo -x", 255, r"\AUsage: ibv_devinfo +print the ca attributes\n"),
    ("ibv_devices", 0, r"\A    device          \t   node GUID\n    ------          \t-{16}\n    mlx5_0          \t[0-9a-f]{16}\n"),
    ("mlxfwmanager --query -d mlx5_0", 0, r"(?s)Device #1:(?:(?!Device #2).)*\Z"),
    ("systemctl status nvidia-fabricmanager", 0, r"nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
                                                 r"\s+Loaded: loaded .*\n\s+Active: active \(running\)"),
    ("systemctl show nvidia-fabricmanager -p ActiveState", 0, r"\AActiveState=active\n\Z"),
    ("journalctl -u nvidia-fabricmanager --no-pager", 0, r"nv-fabricmanager\[\d+\]: "),
    ("journalctl -k --no-pager", 0, r"kernel: NVRM: loading NVIDIA UNIX"),
    ("journalctl -xeu nvidia-fabricmanager", 0, r"systemd\[1\]: Started nvidia-fabricmanager.service"),
    ("systemctl --bogus status nvidia-fabricmanager", 1, r"\Asystemctl: unrecognized option '--bogus'\n\Z"),
    ("journalctl -k -z", 1, r"\Ajournalctl: invalid option -- 'z'\n\Z"),
]


@pytest.fixture(scope="module")
def small_lab(lab_factory):
    directory = lab_factory.new_dir()
    status = lab_factory.up(directory, nodes=4, profile="mixed")
    assert status.running, status.as_dict()
    return directory


@pytest.fixture(scope="module")
def h100(small_lab: Path):
    client = connect_node(small_lab, HOST, timeout_s=30)
    yield client
    client.close()


@pytest.mark.parametrize(("command", "code", "pattern"), COMMANDS, ids=[c for c, _, _ in COMMANDS])
def test_operator_command_answers_like_the_real_tool(h100: paramiko.SSHClient, command: str, code: int,
                                                     pattern: str) -> None:
    _, stdout, stderr = h100.exec_command(command, timeout=60)  # a fixed command line typed by an operator
    out, err = stdout.read().decode(), stderr.read().decode()
    status = stdout.channel.recv_exit_status()
    assert status == code, (status, out[-500:], err[-500:])
    assert re.search(pattern, out + err), (out + err)[:1500]


def test_ansible_raw_adhoc_runs_on_every_node(small_lab: Path, tmp_path: Path) -> None:
    import ansible_runner

    inventory = load_inventory(str(small_lab / "inventory.yml"))
    runner = ansible_runner.run(
        private_data_dir=str(tmp_path), host_pattern="all", module="raw", module_args="nvidia-smi -L; ibstat -l",
        inventory=str(small_lab / "inventory.yml"), quiet=True, envvars=runner_env(), timeout=300,
        settings={"suppress_ansible_output": True},
        cancel_callback=lambda: False)  # else ansible-runner takes over SIGINT for good (conftest checks)
    ok = {e["event_data"]["host"]: e["event_data"]["res"] for e in runner.events if e["event"] == "runner_on_ok"}
    failed = {e["event_data"].get("host") for e in runner.events if e["event"] in ("runner_on_failed", "runner_on_unreachable")}
    assert runner.rc == 0 and failed == set() and set(ok) == set(inventory.hosts), (runner.rc, failed, sorted(ok))
    for host, res in ok.items():
        lines = res["stdout"].splitlines()
        assert res["rc"] == 0 and lines[0].startswith("GPU 0: NVIDIA ") and lines[-1].startswith("mlx5_"), host
        assert "mlx5_0" in lines, host
