"""iblinkinfo's default and -S layouts: link states, "Could be" hints, idle ports, far ends found by LID."""

from __future__ import annotations

import re

import pytest
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.subnet import iblinkinfo
from fabricproof.subnet.model import End, IdlePort

from .sublib import corpus, kinds, roundtrip, sim

HDR = "ib-fabric/iblinkinfo-hdr-quantum-1sw-22ca-sharp-aggregation-node-41-ports.txt"
ONE_SWITCH = "ib-fabric/iblinkinfo-S-one-quantum-switch-4-hca-links-at-edr-could-be-53.125-down-polling.txt"
IBSWITCHES = "ib-fabric/ibswitches-2-quantum-hdr-base-and-enhanced-port0-same-fabric-as-iblinkinfo-S.txt"
IBHOSTS = "ib-fabric/ibhosts-31-cas-2-aggregation-nodes-same-fabric-as-iblinkinfo-S.txt"
EXCERPTS = ["misc/iblinkinfo-edr-2hca-sb7700-down-polling-xcat-excerpt.txt",
            "misc/iblinkinfo-qdr-4hca-infiniscale-iv-excerpt.txt"]


def test_one_switch_22_cas_and_an_aggregation_node() -> None:
    sub = iblinkinfo.parse(corpus(HDR))
    switch = "0x0c42a103008982a4"
    assert (*kinds(sub), len(sub.links), len(sub.idle_ports)) == (1, 22, 0, 22, 19)
    assert (sub.nodes[switch].desc, sub.nodes[switch].ports, sub.nodes[switch].lid) == (
        "Quantum Mellanox Technologies", 41, 3)
    assert {(lk.width, lk.speed, lk.state, lk.could_width, lk.could_speed) for lk in sub.links} == {
        ("4x", "HDR", "Active", None, None)}
    agg = sub.link_at(End(switch, 41)).other(End(switch, 41))
    assert (agg, sub.nodes[agg.guid].desc) == (End("0x0c42a103008982ac", 1), "Mellanox Technologies Aggregation Node")
    assert IdlePort(End(switch, 5), "Down", "Polling") in sub.idle_ports
    assert roundtrip(sub) == sub


def test_one_switch_layout_alone_names_no_far_end_but_every_idle_port() -> None:
    sub = iblinkinfo.parse(corpus(ONE_SWITCH))
    assert (*kinds(sub), len(sub.links), len(sub.idle_ports)) == (1, 0, 0, 0, 35)
    assert sub.nodes["0x08c0eb0300add04e"].ports == 41


def test_one_switch_layout_with_the_lids_of_its_fabric_reads_edr_links_that_could_be_hdr() -> None:
    """The far ends' LIDs come from the same fabric's ibswitches (LIDs) and ibhosts (GUIDs, by description)."""
    lids = {int(m[2]): m[1] for m in re.finditer(r"Switch\s+: (0x[0-9a-f]+) .* lid (\d+) lmc", corpus(IBSWITCHES))}
    hosts = {m[2]: m[1] for m in re.finditer(r'Ca\s+: (0x[0-9a-f]+) ports \d+ "(.*)"', corpus(IBHOSTS))}
    text = corpus(ONE_SWITCH)
    lids.update({int(m[1]): hosts[m[2]] for m in re.finditer(r'==>\s+(\d+)\s+\d+\[  \] "(node\d HCA-2)"', text)})
    sub = iblinkinfo.parse(text, lids)
    switch = "0x08c0eb0300add04e"
    got = {lk.other(End(switch, p)).guid if (lk := sub.link_at(End(switch, p))) else None:
           (lk.speed, lk.could_width, lk.could_speed) for p in (21, 22, 23, 24, 40)}
    assert got == {hosts["node3 HCA-2"]: ("EDR", None, "HDR"), hosts["node4 HCA-2"]: ("EDR", None, "HDR"),
                   hosts["node2 HCA-2"]: ("EDR", None, "HDR"), hosts["node1 HCA-2"]: ("EDR", None, "HDR"),
                   "0x08c0eb0300f6fc26": ("HDR", None, None)}
    assert sub.link_at(End(switch, 41)) is None  # LID 23: an aggregation node, in neither list


@pytest.mark.parametrize("name", EXCERPTS)
def test_older_excerpts_parse(name: str) -> None:
    sub = iblinkinfo.parse(corpus(name))
    assert sub.links and sub.idle_ports and {p.phys for p in sub.idle_ports} == {"Polling"}


def test_real_tool_on_ibsim_hints_router_and_port_guids() -> None:
    sub = iblinkinfo.parse(sim("iblinkinfo"))
    assert (*kinds(sub), len(sub.links), len(sub.idle_ports)) == (3, 8, 1, 14, 17)
    # ibsim's ports all claim 12X: every link reads "Could be 12X", which real fabrics do not print
    assert {lk.could_width for lk in sub.links} == {"12x"}
    edr = sub.link_at(End("0x0002c90300a00002", 2))
    assert (edr.b, edr.speed, edr.could_speed) == (End("0x0002c90300b00051", 1), "EDR", "HDR")  # the port GUID
    assert sub.nodes["0x0002c90300c00002"].kind == "router"
    assert sub.link_at(End("0x0002c90300a00001", 11)).b == End("0x0002c90300a00001", 12)  # a loopback


def test_link_states_other_than_active_are_kept() -> None:
    text = sim("iblinkinfo").replace("53.125 Gbps Active/", "53.125 Gbps Initialize/")
    assert {lk.state for lk in iblinkinfo.parse(text).links} == {"Active", "Initialize"}


def test_unassigned_lids_leave_far_ends_to_the_other_side() -> None:
    """Before an SM ran every CA port shows LID 65535: a switch line cannot name the CA, the CA's own line can."""
    text = corpus(HDR)
    unassigned = re.sub(r"^(      0x[0-9a-f]+)\s+\d+(\s+1\[)", r"\1  65535\2", text, flags=re.M)
    unassigned = re.sub(r"^(\s+3\s+\d+\[  \] ==\(.*\)==>)\s+\d+(\s+1\[)", r"\1   65535\2", unassigned, flags=re.M)
    assert not re.search(r"^\s+3\s+\d+\[  \] ==\(.*\)==>\s+(?!65535)\d+\s+1\[", unassigned, re.M)
    assert {(lk.a, lk.b): lk for lk in iblinkinfo.parse(unassigned).links} == {
        (lk.a, lk.b): lk for lk in iblinkinfo.parse(text).links}


@pytest.mark.parametrize(("old", "new", "error"), [
    ("53.125 Gbps Active", "99.9 Gbps Active", "a lane rate of 99.9 Gb/s names no InfiniBand speed"),
    ('"cu07 HCA-1" ( )', '"cu07 HCA-1" ( Could be faster )', "not an iblinkinfo hint"),
    ("==(                Down/ Polling)==>             [  ] \"\" ( )", "==( Down/ Polling)==> 3 1[  ] \"x\" ( )",
     "a port without a link names a far end"),
])
def test_malformed_lines_fail_closed(old: str, new: str, error: str) -> None:
    text = corpus(HDR)
    assert old in text
    with pytest.raises(ParseError, match=error):
        iblinkinfo.parse(text.replace(old, new, 1))


@pytest.mark.parametrize("text", ["", "\n", "ibwarn: [9] mad_rpc_open_port: can't open UMAD port\n",
                                  "           3    1[  ] ==( 4X 53.125 Gbps Active/  LinkUp)==> 20 1[  ] \"x\" ( )\n"])
def test_empty_or_headless_output_fails_closed(text: str) -> None:
    with pytest.raises(ParseError):
        iblinkinfo.parse(text)
