"""ibnetdiscover's topology file and ports report: every real layout in the corpus, the counts its PROVENANCE gives,
and capture that was cut, garbled or empty failing closed."""

from __future__ import annotations

from collections import Counter

import pytest
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.subnet import ibnetdiscover
from fabricproof.subnet.model import End

from .sublib import CORPUS, corpus, kinds, roundtrip, sim

SELENE = "ib-fabric/ibnetdiscover-selene-dgx-a100-superpod-compute-hdr-666sw-4341ca.txt"
DIRECTOR = "ib-fabric/ibnetdiscover-hdr-director-mcs8500-400sw-2328ca-putty-log-crlf-ufm-ndt.txt"
NDR = "ib-fabric/ibnetdiscover-ndr-dgx-h100-superpod-mqm9701-40sw-582ca-topograph.txt"
EDR = "ib-fabric/ibnetdiscover-edr-fdr-switchib-sx6012-leading-umad-timeout-line-loopbacks.txt"
UFM = "ib-fabric/ibnetdiscover-ufm-lab-mixed-fdr-fdr10-edr-hdr-loopback-cables.txt"
GB200 = "ib-fabric/ibnetdiscover-gb200-node-isolated-ca-no-links-topograph.txt"
FAKED = "ib-fabric/ibnetdiscover-f-FAKED-BY-UPSTREAM-hdr-director-excerpt-s-w-v-e-fields-superbench.txt"
EXCERPT_P = "misc/ibnetdiscover-p-edr-excerpt-treydock-fixture.txt"

#: file -> (switches, CAs, routers, links): the counts PROVENANCE.md states for each (ib-fabric section)
COUNTS = {
    SELENE: (666, 4341, 0, 12852),
    DIRECTOR: (400, 2328, 0, 8723),
    NDR: (40, 582, 0, 1114),
    EDR: (2, 6, 0, 10),  # SwitchIB + SX6012, 6 CAs; 3 loopbacks + 1 inter-switch + 6 HCA cables
    UFM: (2, 13, 0, 16),  # MQM8700 + SX6036, 13 CAs; 2 loopbacks + 1 inter-switch + 13 CA cables
    GB200: (0, 1, 0, 0),  # one CA and no cable: no fabric visible, not an error
}


def test_every_ibnetdiscover_file_of_the_corpus_parses_or_fails_closed() -> None:
    files = sorted(str(p.relative_to(CORPUS)) for p in CORPUS.glob("*/ibnetdiscover*"))
    assert set(files) == {*COUNTS, FAKED, EXCERPT_P}
    for name in COUNTS:
        ibnetdiscover.parse(corpus(name))
    for name in (FAKED, EXCERPT_P):
        with pytest.raises(ParseError, match="capture was cut"):
            ibnetdiscover.parse(corpus(name))


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_counts_are_those_the_provenance_states(name: str) -> None:
    sub = ibnetdiscover.parse(corpus(name))
    assert (*kinds(sub), len(sub.links)) == COUNTS[name]
    assert roundtrip(sub) == sub


def test_selene_three_tiers_rails_aggregation_nodes_and_descriptions_as_printed() -> None:
    sub = ibnetdiscover.parse(corpus(SELENE))
    assert {(lk.width, lk.speed, lk.state) for lk in sub.links} == {("4x", "HDR", "Active")}
    descs = [n.desc for n in sub.nodes.values()]
    assert descs.count("Mellanox Technologies Aggregation Node") == 666
    assert sum(d.startswith("luna-") for d in descs) == 3664  # 458 nodes x 8 rails
    assert "selene-cache-02 mlx5_1 " in descs  # the trailing space is the node's own
    # every cable is one Link, with its ends in canonical order, whichever end listed it first
    assert all(lk.a < lk.b for lk in sub.links)
    assert len({(lk.a, lk.b) for lk in sub.links}) == len(sub.links)


def test_director_putty_log_crlf_banner_prompt_lost_tabs_and_unassigned_lids() -> None:
    text = corpus(DIRECTOR)
    assert text.startswith("=~=~=") and "\r\n" in text and not text.endswith("\n")
    sub = ibnetdiscover.parse(text)
    by_desc = {n.desc: n for n in sub.nodes.values()}
    assert by_desc["SAT111092710053 ibp11s0f0"].lid is None  # printed "lid 65535": none assigned yet
    assert by_desc["SAT111092710037 ibp11s0f0"].lid == 4049
    assert by_desc["MF0;sat11-0101-0927-20ib0:MQM8700/U1"].lid == 3894
    assert sum(1 for n in sub.cas() if n.desc.startswith("MT4123 ConnectX6")) == 103
    # all 4xHDR but the 4 UFM hosts' HCAs at 4xEDR
    speeds = sorted((lk.width, lk.speed) for lk in sub.links)
    assert speeds.count(("4x", "EDR")) == 4 and speeds.count(("4x", "HDR")) == 8719
    ufm = by_desc["sat11-0101-0902-02ufm HCA-1"]
    assert sub.link_at(End(ufm.guid, 1)).speed == "EDR"


def test_ndr_superpod_ndr_speed_and_two_cables_per_leaf_spine_pair_but_six() -> None:
    sub = ibnetdiscover.parse(corpus(NDR))
    assert {(lk.width, lk.speed) for lk in sub.links} == {("4x", "NDR")}
    switches = {n.guid: n for n in sub.switches()}
    assert {n.ports for n in switches.values()} == {65}
    pairs: dict[tuple[str, str], int] = {}
    for lk in sub.links:
        if lk.a.guid in switches and lk.b.guid in switches:
            key = tuple(sorted((switches[lk.a.guid].desc, switches[lk.b.guid].desc)))
            pairs[key] = pairs.get(key, 0) + 1
    # two cables for each of 263 leaf-spine pairs; six pairs have one of theirs down in this capture
    assert sorted(Counter(pairs.values()).items()) == [(1, 6), (2, 263)]


def test_stderr_line_before_the_header_loopbacks_and_slow_links() -> None:
    text = corpus(EDR)
    assert text.startswith("src/query_smp.c:195; umad")
    sub = ibnetdiscover.parse(text)
    switchib = "0xe41d2d030003e470"
    loops = sorted((lk.a.port, lk.b.port) for lk in sub.links if lk.a.guid == lk.b.guid == switchib)
    assert loops == [(1, 2), (19, 21), (29, 30)]
    by_desc = {n.desc: n for n in sub.nodes.values()}
    ufm96 = by_desc["r-ufm96 HCA-1"]
    assert (sub.link_at(End(ufm96.guid, 1)).width, sub.link_at(End(ufm96.guid, 1)).speed) == ("4x", "SDR")
    assert sub.nodes[switchib].lid == 268 and sub.nodes["0xf4521403005764b0"].ports == 12
    # a two-port CA cabled on its port 2 only: port GUID 2c903003421b2, node GUID ...b0
    ufm111 = by_desc["r-ufm111 HCA-1"]
    assert (ufm111.guid, ufm111.ports, sub.link_at(End(ufm111.guid, 2)).other(End(ufm111.guid, 2))) == (
        "0x0002c903003421b0", 2, End(switchib, 35))


def test_mixed_speeds_and_loopbacks_at_fdr10_and_fdr() -> None:
    sub = ibnetdiscover.parse(corpus(UFM))
    sx = "0x0002c903007b78b0"
    loops = {(lk.a.port, lk.b.port): lk.speed for lk in sub.links if lk.a.guid == lk.b.guid == sx}
    assert loops == {(25, 26): "FDR10", (28, 29): "FDR"}
    assert {lk.speed for lk in sub.links} == {"FDR", "FDR10", "EDR", "HDR"}
    agg = next(n for n in sub.nodes.values() if n.desc == "Mellanox Technologies Aggregation Node")
    assert agg.kind == "ca" and sub.link_at(End(agg.guid, 1)).speed == "HDR"


def test_gb200_isolated_ca_is_a_node_without_links() -> None:
    sub = ibnetdiscover.parse(corpus(GB200))
    (node,) = sub.nodes.values()
    assert (node.guid, node.kind, node.desc, node.ports, node.lid, sub.links) == (
        "0xb8e92403009ca838", "ca", "dgx-gb200-n01-c1 HCA-1", 1, None, [])


def test_faked_file_names_the_aggregation_node_it_never_defines() -> None:
    """Upstream's hand-trimmed -f example references an aggregation node without a block: the very shape of a
    capture cut short, so it fails closed; without that one port line the rest (s= w= v= e= trailers) reads."""
    text = corpus(FAKED)
    with pytest.raises(ParseError, match=r"line 10: port 41 of 0x0ff08c43213b3f30 leads to 0x0ff08c43213b3f38, "
                                         r"which has no node block"):
        ibnetdiscover.parse(text)
    kept = "\n".join(line for line in text.split("\n") if '"H-0ff08c43213b3f38"' not in line)
    sub = ibnetdiscover.parse(kept)
    assert (*kinds(sub), len(sub.links)) == (8, 10, 0, 17)
    assert {(lk.width, lk.speed) for lk in sub.links} == {("4x", "HDR")}


def test_routers_aggregation_nodes_and_a_two_port_ca_from_the_real_tool_on_ibsim() -> None:
    sub = ibnetdiscover.parse(sim("ibnetdiscover"))
    assert (*kinds(sub), len(sub.links)) == (3, 8, 1, 14)
    router = next(sub.nodes[g] for g in sub.nodes if sub.nodes[g].kind == "router")
    assert (router.guid, router.desc, router.lid) == ("0x0002c90300c00001", "router-1", 4)
    link = sub.link_at(End(router.guid, 1))
    assert (link.other(End(router.guid, 1)), link.width, link.speed) == (End("0x0002c90300a00002", 8), "4x", "QDR")
    node04 = next(n for n in sub.cas() if n.desc == "node04 mlx5_0")
    assert (node04.ports, sub.link_at(End(node04.guid, 1)), sub.link_at(End(node04.guid, 2)).b) == (
        2, None, End(node04.guid, 2))
    one_x = next(n for n in sub.cas() if n.desc == "node03 mlx5_0")
    assert sub.link_at(End(one_x.guid, 1)).width == "1x"


def test_ports_report_from_the_real_tool_names_cas_by_port_guid_and_lists_idle_ports() -> None:
    report = ibnetdiscover.parse(sim("ibnetdiscover_p"))
    topology = ibnetdiscover.parse(sim("ibnetdiscover"))
    assert (*kinds(report), len(report.links), len(report.idle_ports)) == (3, 8, 1, 14, 17)
    assert {p.state for p in report.idle_ports} == {"Down"}
    # the same cables, once each CA's port GUID is read as its node (ibsim: node GUID + port number)
    port_of = {f"0x{int(lk.b.guid, 16) + lk.b.port:016x}": lk.b.guid for lk in topology.links
               if topology.nodes[lk.b.guid].kind != "switch"}

    def named(e: End) -> End:
        return End(port_of.get(e.guid, e.guid), e.port)

    assert sorted(tuple(sorted((named(lk.a), named(lk.b)))) + (lk.width, lk.speed) for lk in report.links) == \
        sorted((lk.a, lk.b, lk.width, lk.speed) for lk in topology.links)
    assert roundtrip(report) == report


# ---------------------------------------------------------------- fail closed

def _lines(name: str) -> list[str]:
    return corpus(name).split("\n")


@pytest.mark.parametrize("fraction", [0.1, 0.37, 0.5, 0.9, 0.999])
def test_selene_cut_anywhere_between_lines_fails_closed(fraction: float) -> None:
    lines = _lines(SELENE)
    with pytest.raises(ParseError, match="capture was cut"):
        ibnetdiscover.parse("\n".join(lines[: int(len(lines) * fraction)]) + "\n")


def test_cut_in_the_middle_of_a_line_fails_closed() -> None:
    text = corpus(EDR)
    for cut in (text.index('[21] "S-e41d'), text.index('[21] "S-e41d') + 9, text.index("caguid=0x2c90300337140") + 9):
        with pytest.raises(ParseError):
            ibnetdiscover.parse(text[:cut])


def test_a_block_without_its_node_line_at_the_end_fails_closed() -> None:
    text = corpus(UFM) + "\nvendid=0x2c9\ndevid=0x101b\n"
    with pytest.raises(ParseError, match="line 128: a node block without its node line: the capture was cut"):
        ibnetdiscover.parse(text)


def test_a_ca_whose_port_line_was_lost_fails_closed() -> None:
    text = corpus(UFM).replace('[1](c42a103008b40d0) \t"S-0002c903007b78b0"[8]', "", 1)
    with pytest.raises(ParseError, match="listed from that end only"):
        ibnetdiscover.parse(text)


def test_a_tool_warning_between_blocks_is_not_part_of_the_topology() -> None:
    """stderr kept with stdout: libibmad's warnings may land between the blocks of a complete topology."""
    text = corpus(UFM).replace("\nvendid=0x2c9\ndevid=0x1017", "\nibwarn: [4711] _do_madrpc: recv failed: Connection "
                               "timed out\nsrc/query_smp.c:195; umad (DR path slid 0; dlid 0; 0,1,3) bad status 110"
                               "\nvendid=0x2c9\ndevid=0x1017", 1)
    assert "ibwarn" in text
    assert ibnetdiscover.parse(text) == ibnetdiscover.parse(corpus(UFM))


def test_garbage_inside_the_topology_names_its_line() -> None:
    lines = _lines(UFM)
    lines.insert(20, "Traceback (most recent call last):")
    with pytest.raises(ParseError, match=r"^line 21: not an ibnetdiscover topology line: 'Traceback"):
        ibnetdiscover.parse("\n".join(lines))


@pytest.mark.parametrize("text", ["", "\n\n", "Permission denied\n", "ibwarn: [1] mad_rpc_open_port: can't open UMAD "
                                  "port ((null):0)\nibnetdiscover: iberror: failed: discover failed\n"])
def test_empty_or_an_error_message_is_no_topology(text: str) -> None:
    with pytest.raises(ParseError, match="no ibnetdiscover topology"):
        ibnetdiscover.parse(text)


@pytest.mark.parametrize(("old", "new", "error"), [
    ("4xFDR10", "4xGDR", "unknown link speed 'GDR'"),
    ("[26]\t\"S-0002c903007b78b0\"[25]", "[99]\t\"S-0002c903007b78b0\"[25]", "port 99 of a node with 36 ports"),
    ("switchguid=0x2c903007b78b0", "switchguid=0x2c903007b78b1", "its node line names 0x0002c903007b78b0"),
])
def test_inconsistent_lines_fail_closed(old: str, new: str, error: str) -> None:
    text = corpus(UFM)
    assert old in text
    with pytest.raises(ParseError, match=error):
        ibnetdiscover.parse(text.replace(old, new, 1))


def test_a_node_listed_twice_fails_closed() -> None:
    block = corpus(GB200).split("\n", 5)[5]
    with pytest.raises(ParseError, match="has a second block"):
        ibnetdiscover.parse(corpus(GB200) + "\n" + block)
