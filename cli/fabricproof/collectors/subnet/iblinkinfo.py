"""`iblinkinfo` (and `-S <guid>`, one switch): each port's state, width and speed, and what it could do."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ...subnet.model import LANE_GBPS, End, IdlePort, Node, Subnet
from ..base import ParseError
from ..textutil import first_line
from .words import DIAGNOSTIC, guid, lid, width

_SWITCH = re.compile(r"^Switch:\s+(0x[0-9a-fA-F]+)\s+(.*):$")
_CA = re.compile(r"^(CA|Router):\s+(.*):$")
_EXT = r"\[[^\]]*\]"
# "           3    1[  ] ==( 4X        53.125 Gbps Active/  LinkUp)==>      20    1[  ] "cu07 HCA-1" ( )"
_SWITCH_PORT = re.compile(rf"^(\d+)\s+(\d+){_EXT}\s*==\((.*)\)==>\s*(.*)$")
# "      0xb8cef60300025b8c      1    1[  ] ==( 4X        53.125 Gbps Active/  LinkUp)==>       3   40[  ] ..."
_CA_PORT = re.compile(rf"^(0x[0-9a-fA-F]+)\s+(\d+)\s+(\d+){_EXT}\s*==\((.*)\)==>\s*(.*)$")
_LINK = re.compile(r"^\s*(?:(\d+)X\s+([\d.]+)\s+Gbps\s+)?(\w+)/\s*(\w+)\s*$")
_PEER = re.compile(rf'^(\d+)\s+(\d+){_EXT}\s+"(.*)"\s+\((.*)\)\s*$')
_NO_PEER = re.compile(rf'^{_EXT}\s+""\s+\((.*)\)\s*$')
_HINTS = re.compile(r"^\s*(?:Could be (\d+)X)?\s*(?:Could be ([\d.]+) Gbps)?\s*$")


def parse(text: str, lids: Mapping[int, str] | None = None) -> Subnet:
    """Links with their state and "Could be" hints, and the ports that are down (idle ports).

    iblinkinfo names a link's far end by LID and port, and a CA by its port's GUID (it prints no node GUID): a CA
    is named here by the GUID of the first port listed in its block (the node GUID for the one-port-per-node HCAs
    of ConnectX-4 and later; collect_views maps it onto the topology's node). A far end is found by its LID among
    the nodes of the output, else in `lids` (LID -> node GUID, e.g. from the topology: `-S` prints one switch, so
    its far ends are nowhere in its own output); a link whose far end has no LID known (0 or 65535 before an SM
    assigned them, or a partial output) is left out: the topology file names it."""
    nodes: dict[str, Node] = {}
    rows: list[tuple[End, int, int, str, re.Match[str], int]] = []  # here, far LID and port, hints, state, line
    owner: dict[int, list[tuple[str, str]]] = {}  # LID -> [(node GUID, kind)]
    current: tuple[str, str, str] | None = None  # (kind, desc, switch GUID or "")
    ca_guid = ""
    lines = text.split("\n")
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or DIAGNOSTIC.match(line):
            continue
        if m := _SWITCH.match(line):
            current, ca_guid = ("switch", m[2], guid(m[1])), ""
            continue
        if m := _CA.match(line):
            current, ca_guid = ("ca" if m[1] == "CA" else "router", m[2], ""), ""
            continue
        if current is None:
            raise ParseError(f"line {n}: not iblinkinfo output: {line[:120]!r}")
        kind, desc, sw_guid = current
        if kind == "switch":
            m = _SWITCH_PORT.match(line)
            if m is None:
                raise ParseError(f"line {n}: not an iblinkinfo switch port line: {line[:120]!r}")
            node_guid, own_lid, port, link, far = sw_guid, int(m[1]), int(m[2]), m[3], m[4]
        else:
            m = _CA_PORT.match(line)
            if m is None:
                raise ParseError(f"line {n}: not an iblinkinfo CA port line: {line[:120]!r}")
            ca_guid = ca_guid or guid(m[1])
            node_guid, own_lid, port, link, far = ca_guid, int(m[2]), int(m[3]), m[4], m[5]
        known = nodes.get(node_guid)
        if known is None or known.ports < port:
            nodes[node_guid] = Node(node_guid, kind, desc, port,
                                    known.lid if known is not None else lid(own_lid))
        if (key := lid(own_lid)) is not None and (node_guid, kind) not in owner.setdefault(key, []):
            owner[key].append((node_guid, kind))
        state = _LINK.match(link)
        if state is None:
            raise ParseError(f"line {n}: not an iblinkinfo link state: {link.strip()[:80]!r}")
        if state[1] is None:
            if not _NO_PEER.match(far):
                raise ParseError(f"line {n}: a port without a link names a far end: {far[:80]!r}")
            rows.append((End(node_guid, port), 0, 0, "", state, n))
            continue
        peer = _PEER.match(far)
        if peer is None:
            raise ParseError(f"line {n}: not an iblinkinfo far end: {far[:80]!r}")
        rows.append((End(node_guid, port), int(peer[1]), int(peer[2]), peer[4], state, n))
    if not nodes:
        raise ParseError(f"no iblinkinfo port lines: {first_line(text)!r}")
    sub = Subnet(nodes=nodes)
    for here, peer_lid, peer_port, hints, state, n in rows:
        if not peer_lid and not peer_port:
            sub.idle_ports.append(IdlePort(here, state[3], state[4]))
            continue
        there = _far_end(owner, lids, peer_lid, peer_port)
        if there is None:
            continue
        hint = _HINTS.match(hints)
        if hint is None:
            raise ParseError(f"line {n}: not an iblinkinfo hint: {hints.strip()[:80]!r}")
        sub.add_link(Subnet.cable(here, there, width=width(state[1] + "x"), speed=_speed(state[2], n),
                                  state=state[3], could_width=width(hint[1] + "x") if hint[1] else None,
                                  could_speed=_speed(hint[2], n) if hint[2] else None))
    return sub


def _far_end(owner: Mapping[int, list[tuple[str, str]]], lids: Mapping[int, str] | None, peer_lid: int,
             peer_port: int) -> End | None:
    if lid(peer_lid) is None:
        return None
    found = owner.get(peer_lid, [])
    if len(found) == 1:
        return End(found[0][0], peer_port)
    if not found and lids is not None and peer_lid in lids:
        return End(lids[peer_lid], peer_port)
    return None  # no node, or several, answer to that LID in this output


def _speed(gbps: str, n: int) -> str:
    try:
        return LANE_GBPS[gbps]
    except KeyError:
        raise ParseError(f"line {n}: a lane rate of {gbps} Gb/s names no InfiniBand speed") from None
