"""ibqueryerrors: switch-port counters by End, saturated values kept, `port ALL` not a port, cut output refused."""

from __future__ import annotations

import pytest
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.subnet import ibqueryerrors
from fabricproof.subnet.model import End

from .sublib import corpus, roundtrip, sim

MAIL = "ib-fabric/ibqueryerrors-fdr-sx6036-4-nodes-14-ports-over-threshold-saturated-counters.txt"
SX6036 = "0x0002c903006e29b0"


def test_switch_ports_of_the_mailing_list_fabric() -> None:
    sub = ibqueryerrors.parse(corpus(MAIL))
    assert sorted(sub.counters) == [End(SX6036, p) for p in range(0, 9)]  # port ALL is the switch's sum, not a port
    assert sub.counters[End(SX6036, 5)]["SymbolErrorCounter"] == 65535  # saturated: 16 bits
    assert sub.counters[End(SX6036, 7)]["SymbolErrorCounter"] == 65535
    assert sub.counters[End(SX6036, 1)] == {"LinkDownedCounter": 8, "PortRcvSwitchRelayErrors": 2,
                                            "PortXmitWait": 4294967295}
    assert not sub.nodes and not sub.links  # counters only; the CAs' ports are the node collectors' business
    assert roundtrip(sub).counters == sub.counters


def test_saturated_counters_are_told_apart() -> None:
    sub = ibqueryerrors.parse(corpus(MAIL))
    full = sorted((e.port, name) for e, counters in sub.counters.items() for name, value in counters.items()
                  if ibqueryerrors.saturated(name, value))
    assert full == [(1, "PortXmitWait"), (2, "PortXmitWait"), (3, "PortXmitWait"), (5, "SymbolErrorCounter"),
                    (6, "PortXmitWait"), (7, "SymbolErrorCounter")]
    assert not ibqueryerrors.saturated("LinkDownedCounter", 48) and ibqueryerrors.saturated("LinkDownedCounter", 255)
    assert not ibqueryerrors.saturated("PortXmitData", 2**64)  # a counter of unknown width is never called full


def test_real_tool_on_ibsim_after_performanceset() -> None:
    sub = ibqueryerrors.parse(sim("ibqueryerrors"))
    assert sub.counters == {End("0x0002c90300a00002", 2): {"PortRcvErrors": 12},
                            End("0x0002c90300a00001", 3): {"SymbolErrorCounter": 65535, "LinkDownedCounter": 3}}


def test_a_clean_fabric_has_no_counters() -> None:
    text = ("## Summary: 2728 nodes checked, 0 bad nodes found\n"
            "##          18728 ports checked, 0 ports have errors beyond threshold\n## Thresholds: \n## Suppressed:\n")
    assert ibqueryerrors.parse(text).counters == {}


def test_output_cut_before_its_summary_fails_closed() -> None:
    text = corpus(MAIL)
    with pytest.raises(ParseError, match="no '## Summary' line"):
        ibqueryerrors.parse(text[: text.index("## Summary")])


def test_a_lost_block_or_port_line_fails_closed() -> None:
    lines = corpus(MAIL).split("\n")
    without_port = [ln for ln in lines if "port 6:" not in ln]
    with pytest.raises(ParseError, match="bad ports, the output lists 4 and 13"):
        ibqueryerrors.parse("\n".join(without_port))
    start = lines.index('Errors for "server mlx4_0"')
    with pytest.raises(ParseError, match="4 bad nodes and 14 bad ports, the output lists 3 and 13"):
        ibqueryerrors.parse("\n".join(lines[:start] + lines[start + 2:]))


@pytest.mark.parametrize("text", ["", "garbage\n", "   GUID 0x2c903006e29b0 port 1: [LinkDownedCounter == 8]\n"])
def test_garbage_fails_closed(text: str) -> None:
    with pytest.raises(ParseError):
        ibqueryerrors.parse(text)
