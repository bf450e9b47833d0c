"""Collection at the edges: a server that sends its banner and then nothing (retried like a refused connection), a
connection that goes silent mid-run (cut by keepalives, not by the host timeout), a host printing bytes that are
not UTF-8 (kept in the evidence byte for byte), and host names no file system takes as they are."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from fabricproof import inventory as inventory_mod
from fabricproof import facts as facts_mod
from fabricproof.collect import collect, reparse
from fabricproof.collectors import COLLECTORS
from fabricproof_lab import manager
from fabricproof_lab.emu.faults.tool import garbage
from fabricproof.model import Command, ExitCode, Host
from fabricproof.runstore import RunStore, file_name
from fabricproof.transport import ErrorKind, HostError
from fabricproof.transport.ssh import SSHOptions, SSHTransport

from .labutil import RunningLab, with_vars

FAST = [COLLECTORS["lsmod"], COLLECTORS["cmdline"]]


class Listener:
    """A TCP server on loopback with one behaviour per accepted connection; every socket closed on stop()."""

    def __init__(self, handle) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.5)
        self.port = self.server.getsockname()[1]
        self.handle = handle
        self.accepted = 0
        self.sockets: list[socket.socket] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            self.sockets.append(conn)
            threading.Thread(target=self.handle, args=(self, conn), daemon=True).start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(5)
        for s in [self.server, *self.sockets]:
            s.close()


def banner_then_nothing(listener: Listener, conn: socket.socket) -> None:
    conn.sendall(b"SSH-2.0-x\r\n")  # and never a KEXINIT: the socket stays open until the test stops


def test_a_server_that_sends_its_banner_and_stalls_is_retried_then_reported(tmp_path):
    listener = Listener(banner_then_nothing)
    try:
        transport = SSHTransport(SSHOptions(default_known_hosts=(), connect_timeout_s=1, retry_backoff_s=0.1))
        host = Host("stalls", {"ansible_host": "127.0.0.1", "ansible_port": listener.port})
        with pytest.raises(HostError) as caught:
            transport.run_many(host, [Command(("true",), 5)], time.monotonic() + 120)
    finally:
        listener.stop()
    err = caught.value
    assert err.kind is ErrorKind.TIMEOUT and err.retryable
    assert "sent its SSH banner and then stalled" in err.message and "(after 3 attempts)" in err.message
    assert listener.accepted == 3


# ------------------------------------------------------------------------------------------------ on a lab


@pytest.fixture(scope="module")
def small_lab(transport_labs) -> RunningLab:
    directory = transport_labs.new_dir()
    status = transport_labs.up(directory, nodes=2, profile="dgx-h100")
    assert status.running, status.as_dict()
    return RunningLab(dir=directory, status=status)


@pytest.fixture(scope="module")
def small_inventory(small_lab: RunningLab):
    return inventory_mod.load(small_lab.dir / "inventory.yml")


class Relay:
    """A TCP relay in front of a real sshd that goes silent, in both directions, once the client has sent
    `freeze_after` bytes (with the sockets left open: a frozen host, a black-holed path)."""

    def __init__(self, target: tuple[str, int], freeze_after: int | None) -> None:
        self.target = target
        self.freeze_after = freeze_after
        self.sent = 0
        self.frozen = threading.Event()
        self.listener = Listener(self._relay)

    def _relay(self, listener: Listener, client: socket.socket) -> None:
        upstream = socket.create_connection(self.target, timeout=10)
        listener.sockets.append(upstream)

        def pump(src: socket.socket, dst: socket.socket, upward: bool) -> None:
            src.settimeout(0.5)
            while not listener.stopping.is_set() and not self.frozen.is_set():
                try:
                    data = src.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                if upward and self.freeze_after is not None and self.sent + len(data) >= self.freeze_after:
                    self.frozen.set()  # this chunk and everything after it are held
                    return
                if upward:
                    self.sent += len(data)
                try:
                    dst.sendall(data)
                except OSError:
                    return

        threading.Thread(target=pump, args=(upstream, client, False), daemon=True).start()
        pump(client, upstream, True)

    def stop(self) -> None:
        self.listener.stop()


@pytest.mark.lab
@pytest.mark.parametrize("freeze", [False, True], ids=["relay", "silent"])
def test_a_connection_that_goes_silent_is_cut_by_keepalives_not_by_the_host_timeout(small_lab, small_inventory,
                                                                                    tmp_path, freeze):
    host = small_inventory.hosts["h100-0001"]
    target = (host.vars["ansible_host"], int(host.vars["ansible_port"]))
    # The host's bytes stop once the exec request and part of the script are through: past the handshake, which
    # is shorter than the script (the relay without a freeze proves the path itself works).
    from fabricproof.transport import framing

    script = framing.build_script([Command(c.argv, c.timeout_s, c.id, c.lock) for c in FAST], "0" * 32)
    relay = Relay(target, len(script) if freeze else None)
    known = small_lab.dir / "known_hosts"
    relayed = with_vars(host, ansible_host="127.0.0.1", ansible_port=relay.listener.port,
                        ansible_ssh_common_args=f"-o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes "
                                                    f"-o HostKeyAlias=[{target[0]}]:{target[1]}")
    try:
        result = collect([relayed], tmp_path / "run", via="ssh", collectors=FAST, host_timeout_s=150,
                         options=SSHOptions(default_known_hosts=(), alive_interval_s=1, alive_count_max=3))
    finally:
        relay.stop()
    if not freeze:
        assert result.errors == {} and result.collector_errors == {}, (result.errors, result.collector_errors)
        return
    assert relay.frozen.is_set()
    err = result.errors[host.name]
    assert "the host stopped answering: nothing, not even a keepalive reply, for 3 s" in err.message, err
    assert "deadline" not in err.message


@pytest.mark.lab
def test_bytes_that_are_not_utf8_reach_the_evidence_exactly_and_the_parser_as_text(small_lab, small_inventory,
                                                                                    tmp_path):
    name = "h100-0002"
    manager.fault_inject(small_lab.dir, name, "tool-garbage")  # ibstat prints \xff\xfe and binary noise
    try:
        result = collect([small_inventory.hosts[name]], tmp_path / "run", via="ssh", collectors=[COLLECTORS["ibstat"]],
                         options=SSHOptions(default_known_hosts=()))
    finally:
        manager.fault_clear(small_lab.dir, name, "tool-garbage")
    raw = result.run_dir / "raw" / name
    sent = garbage(f"{name}/ibstat").encode("utf-8", "surrogateescape")
    assert sent.startswith(b"\xff\xfe")
    assert (raw / "ibstat.txt").read_bytes() == sent
    assert json.loads((raw / "meta.json").read_text())["ibstat"]["stdout_bytes"] == len(sent)
    assert "ibstat" in result.collector_errors[name]  # the parser read the text and refused it


#: A legal FQDN of 250 characters (labels of up to 63): once "File name too long" for the whole fleet.
LONG = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 58])


@pytest.mark.lab
def test_host_names_no_file_system_takes_are_collected_under_made_names_that_readers_map_back(small_lab,
                                                                                           small_inventory, tmp_path):
    assert len(LONG) == 250
    one, two = small_inventory.hosts["h100-0001"], small_inventory.hosts["h100-0002"]
    hosts = [Host(LONG, one.vars, one.groups), Host("zz/bad", two.vars, two.groups), one]
    result = collect(hosts, tmp_path / "run", via="ssh", collectors=FAST, options=SSHOptions(default_known_hosts=()))
    assert result.exit_code == ExitCode.OK, (result.collection_errors, result.collector_errors)
    run = json.loads((result.run_dir / "run.json").read_text())
    assert run["evidence_names"] == {LONG: file_name(LONG), "zz/bad": file_name("zz/bad")}
    assert sorted(p.name for p in (result.run_dir / "raw").iterdir()) == sorted(map(file_name, [LONG, "zz/bad",
                                                                                                  one.name]))
    assert not (result.run_dir / "zz").exists() and not (result.run_dir / "raw" / "zz").exists()
    store = RunStore.open(result.run_dir)
    assert store.hosts() == sorted(h.name for h in hosts)  # readers find them by host name
    loaded = facts_mod.load_dir(result.run_dir)
    assert sorted(loaded) == sorted(h.name for h in hosts)
    for host in hosts:
        ref = loaded[host.name]["collectors"]["lsmod"]["evidence"]
        assert (result.run_dir / ref).is_file(), ref
    again, errors = reparse(result.run_dir)  # validate --raw: evidence read back under the made names
    assert errors == {} and sorted(again) == sorted(h.name for h in hosts)
    assert again[LONG]["kernel"] == loaded[LONG]["kernel"]


# ------------------------------------------------------------------------------------- host timeouts


REPO = Path(__file__).resolve().parents[2]


@pytest.mark.lab
def test_validate_takes_host_timeout_and_a_hung_host_ends_there(small_lab, tmp_path):
    from typer.testing import CliRunner

    from fabricproof.cli import app

    manager.fault_inject(small_lab.dir, "h100-0001", "tool-hangs")  # nvidia-smi hangs past its own 30 s timeout
    try:
        result = CliRunner().invoke(app, ["validate", "-i", str(small_lab.dir / "inventory.yml"), "--limit",
                                          "h100-0001", "-b", str(REPO / "inventories/lab/baseline.yaml"), "-c",
                                          "nvlink.*", "--host-timeout", "8", "--run-dir", str(tmp_path / "run"),
                                          "-q"], catch_exceptions=False)
    finally:
        manager.fault_clear(small_lab.dir, "h100-0001", "tool-hangs")
    assert result.exit_code == ExitCode.INCOMPLETE, result.output
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["host_timeout_s"] == 8
    failed = run["collector_errors"]["h100-0001"]
    assert failed and all("deadline passed" in why or "not run" in why for why in failed.values()), failed
    assert not any("timed out after 30 s" in why for why in failed.values())


@pytest.mark.lab
def test_a_gate_collection_ends_a_silent_host_at_the_plans_gate_timeout(small_lab, small_inventory, tmp_path):
    """The rollout gates collect with the plan's gates.host_timeout_s (30 s here): a host gone silent ends there,
    before the keepalives' 45 s and far before the collection default of 300 s."""
    from fabricproof.judging import catalog as catalog_mod
    from fabricproof.inventory import from_list_json
    from fabricproof.rollout.plan import Gates
    from fabricproof.rollout.runs import live_collect
    from fabricproof.transport import framing

    host = small_inventory.hosts["h100-0001"]
    target = (host.vars["ansible_host"], int(host.vars["ansible_port"]))
    checks = catalog_mod.select(catalog_mod.load(), ["rdma.peermem_loaded", "iommu.mode"])
    collectors = sorted({c.collector for c in checks})
    script = framing.build_script([Command(COLLECTORS[c].argv, COLLECTORS[c].timeout_s, c, COLLECTORS[c].lock)
                                   for c in collectors], "0" * 32)
    relay = Relay(target, len(script))
    known = small_lab.dir / "known_hosts"
    hostvars = {**host.vars, "ansible_host": "127.0.0.1", "ansible_port": relay.listener.port,
                "ansible_ssh_common_args": f"-o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes "
                                           f"-o HostKeyAlias=[{target[0]}]:{target[1]}"}
    inv = from_list_json({"_meta": {"hostvars": {host.name: hostvars}}, "gpu": {"hosts": [host.name]}}, "inv.yml")
    gates = Gates(timeout_s=20, kinds={"checks": ("rdma.peermem_loaded",)})
    assert gates.host_timeout_s == 30
    try:
        collected = live_collect(inv, checks, "ssh", "gate-test", "inv.yml", 4, gates.host_timeout_s)(
            [host.name], tmp_path / "gate" / "attempt-1")
    finally:
        relay.stop()
    assert relay.frozen.is_set()
    assert "the host's collection deadline passed" in collected.errors[host.name], collected.errors
