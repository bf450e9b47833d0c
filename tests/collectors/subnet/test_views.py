"""The fabric-scope registry and collect_views: the tools' views of one fabric made one Subnet."""

from __future__ import annotations

import pytest
from fabricproof import tools
from fabricproof.collectors import COLLECTORS
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.subnet import FABRIC_COLLECTORS, collect_views
from fabricproof.collectors.subnet import sminfo as fabric_sminfo
from fabricproof.subnet.model import End, SubnetManager

from .sublib import SIM, corpus, kinds, roundtrip, sim

LEAF0, LEAF1, SPINE = "0x0002c90300a00001", "0x0002c90300a00002", "0x0002c90300a00003"


def _outputs() -> dict[str, str]:
    return {cid: sim(cid) for cid in FABRIC_COLLECTORS}


def test_the_registry_runs_its_tools_records_and_stays_out_of_the_per_host_set() -> None:
    assert list(FABRIC_COLLECTORS) == ["ibnetdiscover", "iblinkinfo", "ibqueryerrors", "sminfo_fabric"]
    assert not set(FABRIC_COLLECTORS) & set(COLLECTORS)
    assert not set(tools.FABRIC_TOOLS) & set(tools.TOOLS)  # the lab's nodes answer TOOLS; these run on the vantage
    for cid in ("ibnetdiscover", "iblinkinfo", "ibqueryerrors"):
        c, record = FABRIC_COLLECTORS[cid], tools.FABRIC_TOOLS[cid]
        assert (c.argv, c.typical_s, c.timeout_s) == (record.argv, record.duration.typical_s,
                                                      record.duration.timeout_s)
        assert "measured" in record.duration.source and "estimate" in record.duration.slow_source
    assert FABRIC_COLLECTORS["sminfo_fabric"].argv == COLLECTORS["sminfo"].tool_argv
    assert FABRIC_COLLECTORS["ibqueryerrors"].ok_exit_codes == (0, 1)


def test_each_view_of_the_ibsim_fabric_parses_alone() -> None:
    assert set(SIM) >= set(FABRIC_COLLECTORS)
    for cid, c in FABRIC_COLLECTORS.items():
        c.parse(sim(cid))


def test_collect_views_is_one_fabric_with_each_ca_named_once() -> None:
    """iblinkinfo names CAs by port GUID (ibsim: node GUID + port): merged naively, every CA would be there twice
    under two GUIDs, a duplicate description for the names check."""
    sub = collect_views(_outputs())
    assert (*kinds(sub), len(sub.links), len(sub.idle_ports)) == (3, 8, 1, 14, 17)
    assert all(len(same) == 1 for same in sub.by_desc().values())
    link = sub.link_at(End(LEAF1, 2))  # node02 mlx5_1 at EDR, could be HDR
    assert (link.b, link.speed, link.state, link.could_speed) == (End("0x0002c90300b00050", 1), "EDR", "Active", "HDR")
    assert sub.nodes["0x0002c90300b00050"].desc == "node02 mlx5_1"
    assert sub.counters == {End(LEAF1, 2): {"PortRcvErrors": 12},
                            End(LEAF0, 3): {"SymbolErrorCounter": 65535, "LinkDownedCounter": 3}}
    assert sub.sms == [SubnetManager(LEAF0, 1, 0, "SMINFO_MASTER")]
    assert roundtrip(sub) == sub


def test_link_states_come_from_iblinkinfo() -> None:
    """The topology prints no state; a cable up but not Active (no SM yet, or stuck in Armed) must not read Active."""
    outputs = _outputs()
    outputs["iblinkinfo"] = outputs["iblinkinfo"].replace(
        '2    9[  ] ==( 4X        53.125 Gbps Active/', '2    9[  ] ==( 4X        53.125 Gbps Armed/')
    sub = collect_views(outputs)
    assert sub.link_at(End(LEAF1, 9)).state == "Armed"
    assert sum(lk.state == "Active" for lk in sub.links) == 13


def test_any_subset_of_the_outputs_merges() -> None:
    assert len(collect_views({"ibnetdiscover": sim("ibnetdiscover")}).links) == 14
    assert collect_views({"sminfo_fabric": sim("sminfo_fabric")}).sms[0].state == "SMINFO_MASTER"
    alone = collect_views({"iblinkinfo": sim("iblinkinfo")})
    assert len(alone.links) == 14 and alone.link_at(End(LEAF1, 2)).b == End("0x0002c90300b00051", 1)


def test_a_broken_view_fails_the_whole_collection() -> None:
    outputs = _outputs()
    outputs["ibnetdiscover"] = outputs["ibnetdiscover"][: len(outputs["ibnetdiscover"]) // 2]
    with pytest.raises(ParseError):
        collect_views(outputs)


def test_sminfo_that_could_not_ask_is_not_an_answer() -> None:
    with pytest.raises(ParseError, match="Failed to open"):
        fabric_sminfo.parse(corpus("ib-diag/sminfo-FAIL-ibwarn-cant-open-umad-port-iberror.txt"))
    sm = fabric_sminfo.parse(corpus("ib-diag/sminfo-master-lid37-prio14-mellanox-guid.txt")).sms
    assert sm == [SubnetManager("0x7cfe90030016aef1", 37, 14, "SMINFO_MASTER")]
    assert fabric_sminfo.parse("ibwarn: [1] _do_madrpc: recv failed: Connection timed out\n"
                               "sminfo: iberror: failed: query\n").sms == []
