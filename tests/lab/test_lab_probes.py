"""Probes on a real lab over real SSH: a two-node ib_write_bw rendezvous over the nodes' own 127.x addresses (the
server started on one node, the client on the other dialing its fabricproof_data_address), and the idle state
that the runner's guard reads (nvidia-smi --query-compute-apps, scontrol listpids) with and without a job."""

from __future__ import annotations

import shlex
import threading
import time
from pathlib import Path

import paramiko
import pytest

from fabricproof.probes import spec
from fabricproof.collectors.probes.nccl_tests import parse_nccl_tests
from fabricproof.collectors.probes.perftest import parse_perftest
from fabricproof.inventory import load as load_inventory
from fabricproof_lab import manager

pytestmark = pytest.mark.lab

VALUES = {"gpu": {"count": 8}}


@pytest.fixture(scope="module")
def pair_lab(lab_factory):
    directory = lab_factory.new_dir()
    status = lab_factory.up(directory, nodes=2, profile="dgx-h100")
    assert status.running, status.as_dict()
    inv = load_inventory(str(directory / "inventory.yml"))
    return directory, [inv.hosts[h] for h in sorted(inv.hosts)]


def _connect(lab_dir: Path, host) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    client.load_host_keys(str(lab_dir / "known_hosts"))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(host.vars["ansible_host"], port=int(host.vars["ansible_port"]), username=host.vars["ansible_user"],
                   key_filename=host.vars["ansible_ssh_private_key_file"], look_for_keys=False, allow_agent=False,
                   timeout=30)
    return client


def _run(client: paramiko.SSHClient, argv, timeout: float = 90) -> tuple[int, str, str]:
    _stdin, stdout, stderr = client.exec_command(shlex.join(argv), timeout=timeout)
    out, err = stdout.read().decode(), stderr.read().decode()
    return stdout.channel.recv_exit_status(), out, err


def test_two_node_ib_write_bw_rendezvous_over_ssh(pair_lab) -> None:
    lab_dir, (a, b) = pair_lab
    assert a.vars["fabricproof_data_address"] == a.vars["ansible_host"]
    server_argv, client_argv = spec.PROBES["ib_pair_bw"].pair_argv(VALUES, a.vars["fabricproof_data_address"], None)
    sa, sb = _connect(lab_dir, a), _connect(lab_dir, b)
    try:
        chan = sa.get_transport().open_session(timeout=30)
        chan.settimeout(90)
        chan.exec_command(shlex.join(server_argv))
        out = b""
        deadline = time.monotonic() + 60
        while b"Waiting for client to connect" not in out and time.monotonic() < deadline:
            out += chan.recv(4096)  # the banner says the server listens: now the client may dial
        assert b"Waiting for client to connect" in out
        result: dict = {}
        thread = threading.Thread(target=lambda: result.update(client=_run(sb, client_argv)))
        thread.start()
        while True:
            chunk = chan.recv(4096)
            if not chunk:
                break
            out += chunk
        status = chan.recv_exit_status()
        thread.join(120)
    finally:
        sa.close()
        sb.close()
    rc, cout, cerr = result["client"]
    assert status == 0 and rc == 0, cerr
    server = parse_perftest(out.decode())["targets"]["mlx5_0"]
    client = parse_perftest(cout)["targets"]["mlx5_0"]
    assert server["runs"][0]["side"] == "server" and client["runs"][0]["side"] == "client"
    assert server["bw_average_gbps"] == client["bw_average_gbps"] == pytest.approx(391.2, rel=0.015)
    assert server["runs"][0]["remote_lid"] == client["runs"][0]["local_lid"]


def test_idle_guard_reads_a_gpu_process_and_a_job_step(pair_lab) -> None:
    lab_dir, (a, _b) = pair_lab
    apps = ("nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader")
    ssh = _connect(lab_dir, a)
    try:
        assert _run(ssh, apps) == (0, "", "")
        assert _run(ssh, ("scontrol", "listpids")) == (1, "", "No job steps exist on this node.\n")
        manager.fault_inject(lab_dir, a.name, "gpu-busy")
        manager.fault_inject(lab_dir, a.name, "slurm-job")
        rc, out, _err = _run(ssh, apps)
        assert rc == 0 and len(out.splitlines()) == 8 and out.startswith("12345, /usr/bin/python3, ")
        rc, out, _err = _run(ssh, ("scontrol", "listpids"))
        assert rc == 0 and out.splitlines()[0].split() == ["PID", "JOBID", "STEPID", "LOCALID", "GLOBALID"]
        manager.fault_clear(lab_dir, a.name)
        assert _run(ssh, apps) == (0, "", "")
        # and a probe on the idle node answers over the same session, in lab time
        t0 = time.monotonic()
        rc, out, err = _run(ssh, spec.PROBES["nccl_all_reduce"].node_argv(VALUES))
        assert rc == 0, err
        assert parse_nccl_tests(out)["gpus"] == 8 and time.monotonic() - t0 >= 1.0
    finally:
        ssh.close()
