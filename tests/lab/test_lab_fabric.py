"""The lab's real InfiniBand fabric (issue 21.6): ibsim holds a generated rail-optimised fat tree, opensm is its SM, and
on the lab's nodes Debian's real infiniband-diags print it over real SSH; each fabric fault changes the real tools'
output where the cable is; `lab down` leaves no simulator running.

Which is which: topology, node descriptions, GUIDs, LIDs, port numbers, widths, states, counters and the SM are
what the real tools print of ibsim's fabric. Emulated (emu/simtools.py): the NDR speeds (ibsim parses up to HDR, so
an NDR fabric runs one generation down and the lab raises the printed speeds back), iblinkinfo's "Could be 12X"
hint that ibsim adds to every port (dropped), and ibsim's "sim_connect" stderr line (dropped). Tests whose
assertion rests on an emulated part say so.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from fabricproof.collectors.subnet import ibnetdiscover
from fabricproof.inventory import load as load_inventory
from fabricproof_lab import manager, procs
from fabricproof_lab import state as lab_state
from fabricproof_lab.errors import LabError
from fabricproof_lab.fabric import edits, netfile, runtime, sim, topology
from fabricproof_lab.fabric.sim import FabricState
from fabricproof_lab.topology import plan_hosts
from labkit import connect_node

pytestmark = pytest.mark.lab

NODES, PROFILE = 8, "dgx-h100"
VANTAGE, TARGET = "h100-0001", "h100-0003"  # TARGET is the third host of scalable unit 1: port 3 of its leaves


def _skip_without_ibsim() -> None:
    try:
        sim.require_tools()
    except LabError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def fabric_lab(lab_factory) -> Path:
    _skip_without_ibsim()
    directory = lab_factory.new_dir()
    status = lab_factory.up(directory, nodes=NODES, profile=PROFILE, fabric=True)
    assert status.running, status.as_dict()
    return directory


def _connect(lab_dir: Path, name: str) -> paramiko.SSHClient:
    return connect_node(lab_dir, name)


@pytest.fixture(scope="module")
def vantage(fabric_lab: Path) -> Iterator[paramiko.SSHClient]:
    client = _connect(fabric_lab, VANTAGE)
    yield client
    client.close()


@pytest.fixture(scope="module")
def target(fabric_lab: Path) -> Iterator[paramiko.SSHClient]:
    client = _connect(fabric_lab, TARGET)
    yield client
    client.close()


def _run(client: paramiko.SSHClient, command: str) -> tuple[str, str, int]:
    _, stdout, stderr = client.exec_command(command, timeout=300)  # fixed command lines of this test
    out, err = stdout.read().decode(), stderr.read().decode()
    return out, err, stdout.channel.recv_exit_status()


def _ok(client: paramiko.SSHClient, command: str) -> str:
    out, err, rc = _run(client, command)
    assert rc == 0, (command, rc, err[-800:])
    assert "sim_connect" not in err, err  # ibsim's client line is the lab's to drop
    return out


# ibnetdiscover's topology file: a node header, then one line per linked port.
_HEADER = re.compile(r'^(Switch|Ca)\t(\d+) "([SH]-[0-9a-f]{16})"\t\t# "(.*?)"', re.M)
_PORT = re.compile(r'^\[(\d+)\](?:\(([0-9a-f]{16})\))?\s+"([SH]-[0-9a-f]{16})"\[(\d+)\].*?# .*?"(.*?)" lid (\d+) '
                   r'(\d+x[A-Z0-9]+)$')
_CA_LID = re.compile(r"# lid (\d+) lmc 0 ")


def _topology(text: str) -> tuple[dict[str, tuple[str, str]], dict[tuple[str, int], tuple[str, int, str]]]:
    """(node id -> (kind, description), (node id, port) -> (peer id, peer port, width+speed))."""
    nodes: dict[str, tuple[str, str]] = {}
    links: dict[tuple[str, int], tuple[str, int, str]] = {}
    current = None
    for line in text.splitlines():
        head = _HEADER.match(line)
        if head:
            current = head.group(3)
            nodes[current] = (head.group(1), head.group(4))
            continue
        port = _PORT.match(line)
        if port and current:
            links[(current, int(port.group(1)))] = (port.group(3), int(port.group(4)), port.group(7))
    return nodes, links


def _by_desc(nodes: dict[str, tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for node_id, (_kind, desc) in nodes.items():
        out.setdefault(desc, []).append(node_id)
    return out


def _peer_name(nodes, links, desc: str, port: int = 1) -> tuple[str, int] | None:
    """Where the node described `desc` is cabled: (the peer's description, its port)."""
    (node_id,) = _by_desc(nodes)[desc]
    found = links.get((node_id, port))
    return None if found is None else (nodes[found[0]][1], found[1])


def _healthy(fabric_lab: Path) -> topology.Fabric:
    lab = lab_state.load(fabric_lab / "lab.json")
    return runtime.healthy(FabricState.from_dict(lab.fabric), lab.hosts)


# ------------------------------------------------------------------------------------------ the healthy fabric


def test_lab_up_runs_ibsim_and_opensm_by_pid_and_writes_plan_and_vantage(fabric_lab: Path) -> None:
    lab = lab_state.load(fabric_lab / "lab.json")
    fs = FabricState.from_dict(lab.fabric)
    assert sim.alive(fs) == {"ibsim": True, "opensm": True}
    assert procs.cmdline(fs.ibsim_pid).startswith(f"{sim.IBSIM} -s {fs.dir}/net")
    plan = (fabric_lab / "fabric-plan.yaml").read_text()
    assert "kind: FabricPlan" in plan and f"{{a: {TARGET} mlx5_0, a_port: 1, b: leaf-su1-r0, b_port: 3}}" in plan
    hosts = load_inventory(str(fabric_lab / "inventory.yml")).hosts
    assert [h for h in hosts if hosts[h].vars.get("fabricproof_fabric_vantage")] == [VANTAGE]
    doc = manager.status(fabric_lab).as_dict()["fabric"]
    assert (doc["leaves"], doc["spines"], doc["cas"], doc["cables"], doc["speed"], doc["simulated_speed"]) == \
        (16, 2, 64, 96, "NDR", "HDR")


def test_ibnetdiscover_on_the_vantage_is_the_closed_generated_topology(fabric_lab: Path, vantage) -> None:
    """Real: nodes, descriptions, GUIDs, LIDs, links both ways. Emulated: the speed token NDR (ibsim ran HDR)."""
    text = _ok(vantage, "ibnetdiscover")
    fabric = _healthy(fabric_lab)
    nodes, links = _topology(text)
    first = fabric.cas_of(VANTAGE)[0]
    assert f"# Initiated from node {first.guid[2:]} port {first.port_guid[2:]}" in text
    assert sum(k == "Switch" for k, _ in nodes.values()) == 18 and sum(k == "Ca" for k, _ in nodes.values()) == 64
    assert len(links) == 2 * 96  # each cable from both of its ends
    for (node, port), (peer, pport, _ls) in links.items():
        assert peer in nodes and links[(peer, pport)][:2] == (node, port)  # closed: every end has its block
    assert {ls for _, _, ls in links.values()} == {"4xNDR"}
    want = {(c.a, c.b) for c in fabric.cables}
    got = {(a, (b[0], b[1])) for a, b in links.items()}
    assert all(pair in got for pair in want)
    assert _by_desc(nodes)["MF0;spine-1:MQM9700/U1"] == ["S-7cfe900300a1c4e1"]
    assert _peer_name(nodes, links, f"{TARGET} mlx5_5") == ("MF0;leaf-su1-r5:MQM9700/U1", 3)


def test_iblinkinfo_and_ibqueryerrors_are_the_real_tools(vantage) -> None:
    links = _ok(vantage, "iblinkinfo")
    assert "Could be 12X" not in links  # emulated: dropped (ibsim claims 12X on every port)
    line = next(ln for ln in links.splitlines() if f'"{TARGET} mlx5_0"' in ln)
    assert re.search(r"==\( 4X +106\.25 Gbps Active/  LinkUp\)==> +\d+ +1\[  \] \"" + TARGET + r" mlx5_0\" \( \)$",
                     line), line  # NDR's lane rate emulated; width, state, ports real
    out, err, rc = _run(vantage, "ibqueryerrors")
    assert rc == 0 and "## Summary: 82 nodes checked, 0 bad nodes found" in out, (rc, out, err)
    spine = _ok(vantage, "perfquery 1 1")  # with arguments: the real one, spine-1's port 1
    assert spine.startswith("# Port counters: Lid 1 port 1 ") and "SymbolErrorCounter:..............0\n" in spine
    own = _ok(vantage, "perfquery")  # without: the node's own port, as on every lab node (emulated)
    assert own.startswith("# Port counters: Lid 3 port 1 ")


def test_sminfo_on_the_vantage_is_opensm_and_agrees_with_the_nodes(vantage, target) -> None:
    real = _ok(vantage, "sminfo")
    assert re.fullmatch(r"sminfo: sm lid 1 sm guid 0x7cfe900300a1c4e1, activity count \d+ priority 14 state 3 "
                        r"SMINFO_MASTER\n", real), real
    node = _ok(target, "sminfo")  # a node that is not the vantage reads its own port, emulated
    assert node.split(", activity")[0] == real.split(", activity")[0]
    # any cabled node sees the whole subnet with the real tools, from its own first HCA
    assert "\n# Initiated from node a088c20300000200 port a088c20300000201\n" in _ok(target, "ibnetdiscover")


def test_every_node_ibstat_agrees_with_the_fabric(fabric_lab: Path, vantage) -> None:
    text = _ok(vantage, "ibnetdiscover")
    nodes, links = _topology(text)
    lids = {m.group(0) for m in _CA_LID.finditer(text)}
    for host in (VANTAGE, TARGET, "h100-0008"):
        client = vantage if host == VANTAGE else _connect(fabric_lab, host)
        try:
            ibstat = _ok(client, "ibstat")
        finally:
            if client is not vantage:
                client.close()
        cas = re.findall(r"CA '(mlx5_\d+)'\n(?:\t.*\n)*?\tNode GUID: 0x([0-9a-f]{16})\n(?:\t.*\n)*?\t\tState: (\w+)\n"
                         r"(?:\t.*\n)*?\t\tRate: (\d+)\n\t\tBase lid: (\d+)\n(?:\t.*\n)*?\t\tPort GUID: 0x([0-9a-f]{16})",
                         ibstat)
        assert len(cas) == 8, ibstat[:400]
        for name, guid, state, rate, lid, port_guid in cas:
            node_id = f"H-{guid}"
            assert nodes[node_id] == ("Ca", f"{host} {name}")
            assert (state, rate) == ("Active", "400") and f"# lid {lid} lmc 0 " in lids
            assert int(port_guid, 16) == int(guid, 16) + 1  # ibsim's CA port GUID, shown by the node alike
            assert (node_id, 1) in links


# ------------------------------------------------------------------------------------------ faults


@pytest.fixture()
def fault(fabric_lab: Path, vantage, request) -> Iterator[str]:
    """Inject the fault on TARGET, and after the test clear it and prove the fabric is as before."""
    healthy = _topology(_ok(vantage, "ibnetdiscover"))
    name = request.param
    manager.fault_inject(fabric_lab, TARGET, name)
    try:
        yield name
    finally:
        manager.fault_clear(fabric_lab, TARGET, name)
    nodes, links = _topology(_ok(vantage, "ibnetdiscover"))
    assert nodes == healthy[0], set(nodes.items()) ^ set(healthy[0].items())
    assert links == healthy[1], set(links.items()) ^ set(healthy[1].items())


@pytest.mark.parametrize("fault", ["subnet-rails-swapped"], indirect=True)
def test_rails_swapped_puts_mlx5_0_on_the_rail_1_leaf(fault: str, vantage, target) -> None:
    nodes, links = _topology(_ok(vantage, "ibnetdiscover"))
    assert _peer_name(nodes, links, f"{TARGET} mlx5_0") == ("MF0;leaf-su1-r1:MQM9700/U1", 3)
    assert _peer_name(nodes, links, f"{TARGET} mlx5_1") == ("MF0;leaf-su1-r0:MQM9700/U1", 3)
    assert "\t\tState: Down" not in _ok(target, "ibstat")  # the node sees nothing wrong


@pytest.mark.parametrize("fault", ["subnet-hca-wrong-port"], indirect=True)
def test_hca_wrong_port_moves_mlx5_2_to_the_spare_leaf_port(fault: str, vantage) -> None:
    nodes, links = _topology(_ok(vantage, "ibnetdiscover"))
    assert _peer_name(nodes, links, f"{TARGET} mlx5_2") == ("MF0;leaf-su1-r2:MQM9700/U1", 32)


@pytest.mark.parametrize("fault", ["subnet-uplink-missing"], indirect=True)
def test_uplink_missing_leaves_the_leafs_first_uplink_polling(fault: str, vantage) -> None:
    nodes, links = _topology(_ok(vantage, "ibnetdiscover"))
    (leaf,) = _by_desc(nodes)["MF0;leaf-su1-r0:MQM9700/U1"]
    assert (leaf, 33) not in links and (leaf, 34) in links
    block = _ok(vantage, "iblinkinfo").split("Switch: 0x7cfe900300b10100 MF0;leaf-su1-r0:MQM9700/U1:\n")[1]
    ports = {int(m.group(1)): m.group(2) for m in re.finditer(r"^\s+\d+\s+(\d+)\[  \] ==\((.*?)\)==>", block, re.M)}
    assert ports[33].split() == ["Down/", "Polling"] and "Active" in ports[34], ports


@pytest.mark.parametrize("fault", ["subnet-link-1x"], indirect=True)
def test_link_1x_trains_mlx5_3_at_1x_on_both_views(fault: str, vantage, target) -> None:
    nodes, links = _topology(_ok(vantage, "ibnetdiscover"))
    (ca,) = _by_desc(nodes)[f"{TARGET} mlx5_3"]
    assert links[(ca, 1)][2] == "1xNDR"  # the width real, the speed token emulated
    assert "Rate: 100\n" in _ok(target, "ibstat mlx5_3 1")


@pytest.mark.parametrize("fault", ["subnet-link-slow"], indirect=True)
def test_link_slow_trains_mlx5_1_one_generation_down(fault: str, vantage, target) -> None:
    nodes, links = _topology(_ok(vantage, "ibnetdiscover"))
    (ca,) = _by_desc(nodes)[f"{TARGET} mlx5_1"]
    assert links[(ca, 1)][2] == "4xHDR"  # emulated: ibsim ran this link at EDR under an HDR fabric
    line = next(ln for ln in _ok(vantage, "iblinkinfo").splitlines() if f'"{TARGET} mlx5_1"' in ln)
    assert "53.125 Gbps Active" in line and "(Could be 106.25 Gbps)" in line  # ibsim's own hint, raised
    assert "Rate: 200\n" in _ok(target, "ibstat mlx5_1 1")


@pytest.mark.parametrize("fault", ["subnet-switch-errors"], indirect=True)
def test_switch_errors_grow_on_every_read(fault: str, vantage) -> None:
    leaf = "0x7cfe900300b10100"  # leaf-su1-r0, where TARGET's mlx5_0 is on port 3
    counts = []
    for _ in range(2):
        out, err, rc = _run(vantage, "ibqueryerrors")
        assert rc == 1, (out, err)
        found = re.search(rf"GUID {leaf} port 3: \[SymbolErrorCounter == (\d+)\] \[LinkDownedCounter == (\d+)\] "
                          r"\[PortRcvErrors == (\d+)\]", out)
        assert found, (out, err)
        counts.append(tuple(int(v) for v in found.groups()))
    assert all(b > a for a, b in zip(counts[0], counts[1], strict=True)), counts


@pytest.mark.parametrize("fault", ["subnet-extra-link"], indirect=True)
def test_extra_link_joins_the_leaf_to_spine_1_on_spare_ports(fault: str, vantage) -> None:
    nodes, links = _topology(_ok(vantage, "ibnetdiscover"))
    (leaf,) = _by_desc(nodes)["MF0;leaf-su1-r0:MQM9700/U1"]
    assert links[(leaf, 64)][:2] == ("S-7cfe900300a1c4e1", 64)


@pytest.mark.parametrize("fault", ["subnet-duplicate-desc"], indirect=True)
def test_duplicate_desc_gives_two_cas_one_name(fault: str, vantage) -> None:
    nodes, _links = _topology(_ok(vantage, "ibnetdiscover"))
    named = _by_desc(nodes)
    assert len(named[f"{TARGET} mlx5_0"]) == 2 and f"{TARGET} mlx5_1" not in named


@pytest.mark.parametrize("fault", ["subnet-hca-unplugged"], indirect=True)
def test_hca_unplugged_is_gone_from_the_fabric_and_down_on_the_node(fault: str, vantage, target) -> None:
    nodes, _links = _topology(_ok(vantage, "ibnetdiscover"))
    assert f"{TARGET} mlx5_2" not in _by_desc(nodes) and len(nodes) == 81
    port = _ok(target, "ibstat mlx5_2 1")
    assert "State: Down\nPhysical state: Polling\n" in port


def test_fabric_faults_injected_in_one_call_are_all_in_the_fabric_through_the_console(fabric_lab: Path,
                                                                                     vantage) -> None:
    """Two cable moves in one `fault_inject` (the wire lab's rounds): both in the fabric, taken by ibsim's console
    in one change (ibsim and opensm keep their PIDs), recorded in injection order; clearing them all puts the fabric
    back."""
    healthy = _topology(_ok(vantage, "ibnetdiscover"))
    before = FabricState.from_dict(lab_state.load(fabric_lab / "lab.json").fabric)
    manager.fault_inject(fabric_lab, TARGET, "subnet-hca-wrong-port", "subnet-extra-link")
    try:
        nodes, links = _topology(_ok(vantage, "ibnetdiscover"))
        assert _peer_name(nodes, links, f"{TARGET} mlx5_2") == ("MF0;leaf-su1-r2:MQM9700/U1", 32)
        (leaf,) = _by_desc(nodes)["MF0;leaf-su1-r0:MQM9700/U1"]
        assert links[(leaf, 64)][:2] == ("S-7cfe900300a1c4e1", 64)
        after = FabricState.from_dict(lab_state.load(fabric_lab / "lab.json").fabric)
        assert after.faults == [[TARGET, "subnet-hca-wrong-port"], [TARGET, "subnet-extra-link"]]
        assert after.pids() == before.pids()
    finally:
        manager.fault_clear(fabric_lab, TARGET)
    nodes, links = _topology(_ok(vantage, "ibnetdiscover"))
    assert (nodes, links) == healthy


# ------------------------------------------------------------------------------------------ no fabric, and down


def test_a_lab_without_fabric_runs_no_simulator_and_refuses_fabric_faults(lab) -> None:
    assert lab.lab.fabric is None and manager.status(lab.dir).as_dict()["fabric"] is None
    with pytest.raises(LabError, match="has none; start it with `fabricproof lab up --fabric`"):
        manager.fault_inject(lab.dir, lab.lab.hosts[0].name, "subnet-rails-swapped")


def _fabric_processes(fabric_dir: str) -> list[int]:
    """Every process on this machine whose command line names the fabric's directory."""
    return sorted(pid for pid in procs.process_table() if fabric_dir in procs.cmdline(pid))


def test_lab_down_stops_ibsim_and_opensm_by_pid_and_leaves_none(lab_factory) -> None:
    _skip_without_ibsim()
    directory = lab_factory.new_dir()
    status = lab_factory.up(directory, nodes=2, profile="dgx-a100", fabric=True)
    fs = FabricState.from_dict(status.lab.fabric)
    running = _fabric_processes(fs.dir)
    assert set(fs.pids()) <= set(running) and len(running) == 2, running
    client = _connect(directory, "a100-0001")
    try:  # an HDR fabric: ibsim models its speed, nothing is raised
        nodes, links = _topology(_ok(client, "ibnetdiscover"))
    finally:
        client.close()
    assert {ls for _, _, ls in links.values()} == {"4xHDR"} and len(nodes) == 2 * 8 + 8 + 2
    with pytest.raises(LabError, match="with an InfiniBand fabric on port"):
        manager.up(directory, 2, "dgx-a100")  # the running lab has a fabric: another shape, refused
    manager.fault_inject(directory, "a100-0002", "subnet-hca-unplugged")
    report = manager.down(directory)
    assert set(fs.pids()) <= set(report.stopped_pids)
    assert _fabric_processes(fs.dir) == []
    assert lab_state.load(directory / "lab.json").fabric["ibsim_pid"] is None
    again = FabricState.from_dict(lab_factory.up(directory, nodes=2, profile="dgx-a100", fabric=True).lab.fabric)
    assert again.faults == [["a100-0002", "subnet-hca-unplugged"]] and sim.alive(again) == {"ibsim": True,
                                                                                           "opensm": True}
    client = _connect(directory, "a100-0001")
    try:  # the kept fault is in the fabric started again
        nodes, _links = _topology(_ok(client, "ibnetdiscover"))
    finally:
        client.close()
    assert len(nodes) == 2 * 8 + 8 + 2 - 1 and "a100-0002 mlx5_2" not in _by_desc(nodes)
    manager.down(directory)
    assert _fabric_processes(again.dir) == []


def test_a_cable_linked_through_ibsims_console_trains_at_the_fabrics_width_and_speed(tmp_path: Path) -> None:
    """The extra cable subnet-extra-link adds joins two spare switch ports through ibsim's console, as the lab does;
    the real ibnetdiscover shows it at the fabric's 4x and speed (HDR under ibsim for an NDR fabric), not at ibsim's
    4x SDR default, so it fails subnet.cable_unplanned alone. No lab: ibsim alone on the lab's net file."""
    _skip_without_ibsim()
    healthy = topology.build(plan_hosts(NODES, PROFILE))
    commands = sim.console_commands(healthy, edits.extra_link(healthy, TARGET))
    assert commands and len(commands) == 1 and commands[0].startswith("Link ")
    net = tmp_path / "net"
    net.write_text(netfile.render(healthy), encoding="utf-8")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "IBSIM_SOCKNAME": f"fabricproof-test-link-{os.getpid()}"}
    log = tmp_path / "ibsim.log"
    with open(log, "wb") as out:
        ibsim = subprocess.Popen([str(sim.IBSIM), "-s", str(net)], stdin=subprocess.PIPE, stdout=out,
                                 stderr=subprocess.STDOUT, env=env)
    try:
        for _ in range(600):  # ready in about a second here; bounded for a loaded machine
            if b"sim>" in log.read_bytes() or ibsim.poll() is not None:
                break
            time.sleep(0.1)
        assert b"sim>" in log.read_bytes(), log.read_text(errors="replace")[-2000:]
        ibsim.stdin.write((commands[0] + "\n").encode())
        ibsim.stdin.flush()
        ends = {(next(s.guid for s in healthy.switches if s.name == "leaf-su1-r0"), 64), (healthy.switches[0].guid, 64)}
        for _ in range(30):  # the console command is read at once; bounded all the same
            found = subprocess.run(["ibnetdiscover"], env={**env, "LD_PRELOAD": str(sim.UMAD2SIM)},
                                   capture_output=True, text=True, timeout=120, check=True).stdout
            links = {(lk.a, lk.b): lk for lk in ibnetdiscover.parse(found).links}
            extra = [lk for lk in links.values() if {(e.guid, e.port) for e in (lk.a, lk.b)} == ends]
            if extra:
                break
            time.sleep(0.2)
    finally:
        ibsim.terminate()
        ibsim.wait(timeout=60)
    assert len(extra) == 1, (ends, log.read_text(errors="replace")[-2000:])
    assert (extra[0].width, extra[0].speed) == ("4x", netfile.sim_speed(healthy, healthy.speed)) == ("4x", "HDR")
