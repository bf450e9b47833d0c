"""The lab fabric's pure parts (issue 21.6): the rail-optimised fat tree generated from the lab's nodes, its plan, ibsim's
net file, the fabric faults' edits, how a change reaches a running ibsim, and what the lab changes in the real tools'
output (no I/O; tests/lab/test_lab_fabric.py runs ibsim and opensm)."""

from __future__ import annotations

import re

import pytest
import yaml

from fabricproof_lab.emu import model, simtools
from fabricproof_lab.emu.faults import FAULTS
from fabricproof_lab.emu.render_ib import SM_GUID
from fabricproof_lab.fabric import edits, netfile, plan, sim, topology
from fabricproof_lab.topology import plan_hosts

H100 = plan_hosts(8, "dgx-h100")
TARGET = "h100-0003"


@pytest.fixture(scope="module")
def fabric() -> topology.Fabric:
    return topology.build(H100)


def test_eight_h100s_make_two_units_of_eight_rail_leaves_and_two_spines(fabric) -> None:
    assert topology.counts(fabric) == {"leaves": 16, "spines": 2, "cas": 64, "host_cables": 64, "uplinks": 32,
                                       "cables": 96}
    assert fabric.speed == "NDR" and fabric.switches[0].name == "spine-1" and fabric.switches[0].guid == SM_GUID
    assert fabric.switches[0].lid == 1  # the SM lid every lab node's ibstat names
    for k, host in enumerate(H100):
        for ca in fabric.cas_of(host.name):
            leaf = fabric.peer((ca.node_id, 1))
            names = fabric.names()
            assert names[leaf[0]] == f"leaf-su{k // 4 + 1}-r{ca.rail}" and leaf[1] == k % 4 + 1
    for leaf in (s for s in fabric.switches if s.tier == "leaf"):
        ups = [fabric.peer((leaf.node_id, p)) for p in (33, 34)]
        assert [fabric.names()[u[0]] for u in ups] == ["spine-1", "spine-2"]


def test_the_cas_are_the_nodes_hcas(fabric) -> None:
    """GUIDs and LIDs are the ones the node model gives each HCA, so ibstat and the fabric agree."""
    for host in H100:
        node = model.new_node(host.profile, host.index, host.rack, host.name, host.address)
        hcas = [h for h in node["hcas"] if h["role"] == "compute"]
        cas = fabric.cas_of(host.name)
        assert [(c.hca, c.guid, c.lid) for c in cas] == \
            [(h["name"], "0x" + h["node_guid"], h["ports"][0]["base_lid"]) for h in hcas]
        model.attach_fabric(node, {"socket": "s", "sim_host": cas[0].node_id, "dir": "/x", "shifted": True,
                                   "vantage": False})
        assert ["0x" + h["ports"][0]["port_guid"] for h in hcas if h["role"] == "compute"] == [c.port_guid for c in cas]


def test_a_mixed_labs_lids_are_unique_and_its_nodes_take_them() -> None:
    """Each profile counts its nodes from 0 (a100-0001 and h100-0001 are both index 0): the subnet's LIDs go by the
    host's place in the lab, and a cabled node's ibstat shows the fabric's LID."""
    hosts = plan_hosts(8, "mixed")
    fabric = topology.build(hosts)
    lids = [c.lid for c in fabric.cas] + [s.lid for s in fabric.switches]
    assert len(lids) == len(set(lids)) == 56 + 18
    host = next(h for h in hosts if h.profile == "dgx-h100")
    node = model.new_node(host.profile, host.index, host.rack, host.name, host.address)
    cas = fabric.cas_of(host.name)
    model.attach_fabric(node, {"lids": {c.hca: c.lid for c in cas}})
    assert [h["ports"][0]["base_lid"] for h in node["hcas"][:8]] == [c.lid for c in cas]
    model.attach_fabric(node, None)  # off the fabric: the node's own LIDs again
    assert node == model.new_node(host.profile, host.index, host.rack, host.name, host.address) | {"fabric": None}


def test_larger_labs_get_larger_scalable_units_until_the_spines_are_full() -> None:
    assert topology.fitting_su_size(H100) == 4
    big = plan_hosts(200, "dgx-h100")
    size = topology.fitting_su_size(big)
    assert size == 29 and topology.counts(topology.build(big, size)) == {
        "leaves": 56, "spines": 2, "cas": 1600, "host_cables": 1600, "uplinks": 112, "cables": 1712}
    with pytest.raises(topology.FabricShapeError):
        topology.build(plan_hosts(250, "dgx-h100"), topology.fitting_su_size(plan_hosts(250, "dgx-h100")))


def test_shapes_the_fabric_cannot_take_are_refused() -> None:
    with pytest.raises(topology.FabricShapeError, match="does not fit a MQM9700 leaf's 32 host ports"):
        topology.build(plan_hosts(40, "dgx-h100"), su_size=32)
    with pytest.raises(topology.FabricShapeError, match="need 72 ports per spine; a MQM8700 has 40"):
        topology.build(plan_hosts(36, "dgx-a100"), su_size=4, spines=1, uplinks=1)


def test_the_plan_is_the_contracts_explicit_link_list(fabric) -> None:
    doc = yaml.safe_load(plan.render(fabric, "/lab"))
    assert {k: doc[k] for k in ("kind", "version", "name", "defaults")} == \
        {"kind": "FabricPlan", "version": 1, "name": "lab", "defaults": {"width": "4x", "speed": "NDR"}}
    assert len(doc["links"]) == 96
    assert doc["links"][16] == {"a": "h100-0003 mlx5_0", "a_port": 1, "b": "leaf-su1-r0", "b_port": 3}
    assert doc["links"][-1] == {"a": "leaf-su2-r7", "a_port": 34, "b": "spine-2", "b_port": 16}
    mixed = topology.build(plan_hosts(8, "mixed"))  # A100 HCAs train HDR in an NDR fabric: the plan says so
    assert {link.get("speed") for link in plan.document(mixed)["links"]} >= {None, "HDR"}


def test_the_net_file_has_every_node_once_and_every_cable_from_both_ends(fabric) -> None:
    text = netfile.render(fabric)
    blocks = re.findall(r'^(?:Switch|Ca)\t\d+ "([SH]-[0-9a-f]{16})"', text, re.M)
    assert len(blocks) == len(set(blocks)) == 82 and blocks[0] == "S-" + SM_GUID[2:]  # opensm attaches there
    ports = re.findall(r'^\[(\d+)\].*"([SH]-[0-9a-f]{16})"\[(\d+)\].* (\dx[A-Z]+)$', text, re.M)
    assert len(ports) == 2 * 96 and {p[3] for p in ports} == {"4xHDR"}  # NDR is given to ibsim one generation down
    hdr = topology.build(plan_hosts(2, "dgx-a100"))
    assert not netfile.shifted(hdr) and "4xHDR" in netfile.render(hdr) and "4xEDR" not in netfile.render(hdr)


#: Per fault: the cables it removes and adds, by operator names ((a, port), (b, port), width, speed).
def _named(fabric: topology.Fabric, cables) -> set:
    names = fabric.names()
    return {((names[c.a[0]], c.a[1]), (names[c.b[0]], c.b[1]), c.width, c.speed) for c in cables}


EXPECTED = {
    "subnet-rails-swapped": ({(("h100-0003 mlx5_0", 1), ("leaf-su1-r0", 3), "4x", "NDR"),
                              (("h100-0003 mlx5_1", 1), ("leaf-su1-r1", 3), "4x", "NDR")},
                             {(("h100-0003 mlx5_0", 1), ("leaf-su1-r1", 3), "4x", "NDR"),
                              (("h100-0003 mlx5_1", 1), ("leaf-su1-r0", 3), "4x", "NDR")}),
    "subnet-hca-wrong-port": ({(("h100-0003 mlx5_2", 1), ("leaf-su1-r2", 3), "4x", "NDR")},
                              {(("h100-0003 mlx5_2", 1), ("leaf-su1-r2", 32), "4x", "NDR")}),
    "subnet-uplink-missing": ({(("leaf-su1-r0", 33), ("spine-1", 1), "4x", "NDR")}, set()),
    "subnet-link-1x": ({(("h100-0003 mlx5_3", 1), ("leaf-su1-r3", 3), "4x", "NDR")},
                       {(("h100-0003 mlx5_3", 1), ("leaf-su1-r3", 3), "1x", "NDR")}),
    "subnet-link-slow": ({(("h100-0003 mlx5_1", 1), ("leaf-su1-r1", 3), "4x", "NDR")},
                         {(("h100-0003 mlx5_1", 1), ("leaf-su1-r1", 3), "4x", "HDR")}),
    "subnet-switch-errors": (set(), set()),
    "subnet-extra-link": (set(), {(("leaf-su1-r0", 64), ("spine-1", 64), "4x", "NDR")}),
    "subnet-duplicate-desc": (set(), set()),
    "subnet-hca-unplugged": ({(("h100-0003 mlx5_2", 1), ("leaf-su1-r2", 3), "4x", "NDR")}, set()),
}


def test_every_fabric_fault_has_an_edit() -> None:
    assert set(edits.EDITS) == {n for n, f in FAULTS.items() if f.kind == "fabric"} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_fault_changes_exactly_its_cables(fabric, name: str) -> None:
    faulty = edits.apply(fabric, [(TARGET, name)])
    gone = _named(fabric, [c for c in fabric.cables if c not in faulty.cables])
    added = _named(faulty, [c for c in faulty.cables if c not in fabric.cables])
    assert (gone, added) == EXPECTED[name]
    if name == "subnet-switch-errors":
        assert faulty.growing == (("S-7cfe900300b10100", 3),)
    if name == "subnet-duplicate-desc":
        assert [c.name for c in faulty.cas_of(TARGET)][:2] == ["h100-0003 mlx5_0", "h100-0003 mlx5_0"]
    assert edits.apply(faulty, []) == faulty


def test_a_cable_move_goes_through_ibsims_console_a_width_speed_or_name_needs_a_restart(fabric) -> None:
    swapped = edits.apply(fabric, [(TARGET, "subnet-rails-swapped")])
    cmds = sim.console_commands(fabric, swapped)
    assert sorted(cmds) == sorted(['Unlink "H-a088c20300000200"[1]', 'Unlink "H-a088c20300000201"[1]',
                                   'Link "H-a088c20300000200"[1] "S-7cfe900300b10101"[3]',
                                   'Link "H-a088c20300000201"[1] "S-7cfe900300b10100"[3]'])
    assert sim.console_commands(swapped, fabric) is not None  # clearing it too
    for name in ("subnet-link-1x", "subnet-link-slow", "subnet-duplicate-desc"):
        faulty = edits.apply(fabric, [(TARGET, name)])
        assert sim.console_commands(fabric, faulty) is None and sim.console_commands(faulty, fabric) is None, name
    assert sim.socket_name(__import__("pathlib").Path("/a")) != sim.socket_name(__import__("pathlib").Path("/b"))


# Lines the real tools printed of a lab fabric under ibsim (an NDR fabric, run at HDR).
IBLINKINFO = ('      0xa088c20300000201     36    1[  ] ==( 4X        53.125 Gbps Active/  LinkUp)==>   48101    3[  ] '
              '"h100-0003 mlx5_1" (Could be 12X )\n'
              '      0xa088c20300000202     37    1[  ] ==( 4X      25.78125 Gbps Active/  LinkUp)==>   48102    3[  ] '
              '"h100-0003 mlx5_2" (Could be 12X Could be 53.125 Gbps)\n')


def test_what_the_lab_changes_in_the_real_output_keeps_its_format() -> None:
    out = simtools.stdout("iblinkinfo", IBLINKINFO, shifted=True)
    first, second = out.splitlines()
    assert "==( 4X        106.25 Gbps Active/  LinkUp)==>" in first and first.endswith('"h100-0003 mlx5_1" ( )')
    assert "==( 4X        53.125 Gbps Active/  LinkUp)==>" in second and second.endswith("(Could be 106.25 Gbps)")
    assert [len(x) for x in first.split("==>")[:1]] == [len(IBLINKINFO.splitlines()[0].split("==>")[0])]
    assert simtools.stdout("iblinkinfo", IBLINKINFO, shifted=False).splitlines()[0].endswith("( )")
    topo = '[3]\t"H-a088c20300000200"[1](a088c20300000201) \t\t# "h100-0003 mlx5_0" lid 35 4xHDR\n'
    assert simtools.stdout("ibnetdiscover", topo, shifted=True).endswith(" lid 35 4xNDR\n")
    ports = "CA    35  1 0xa088c20300000201 4x HDR - SW 48100  3 0x7cfe900300b10100 ( 'a' - 'b' )\nSW 1 9 0x1 4x SDR\n"
    assert simtools.stdout("ibnetdiscover", ports, shifted=True) == ports.replace("4x HDR", "4x NDR")
    err = 'ibwarn: [42] sim_connect: attached as client 1 at node "H-a088c20300000000"\nreal error\n'
    assert simtools.stderr(err) == "real error\n"
