"""`ibnetdiscover` (the topology file, and its `-p` ports report): every node and every cable of the subnet."""

from __future__ import annotations

import re

from ...subnet.model import End, IdlePort, Node, Subnet
from ..base import ParseError
from ..textutil import first_line
from .words import DIAGNOSTIC, guid, lid, speed, width, width_speed

# The topology file (infiniband-diags ibnetdiscover.c: out_switch / out_ca / out_switch_port / out_ca_port). The
# TABs between fields are optional: terminal logs and web copies lose them ('Switch41 "S-..."# "..."').
_HEADER = re.compile(r'^(Switch|Ca|Rt)\s*(\d+)\s*"([SHR])-([0-9a-fA-F]+)"\s*#\s*"(.*)"(.*)$')
_SWITCH_TAIL = re.compile(r"^\s*(?:enhanced|base)\s+port\s+0\s+lid\s+(\d+)\s+lmc\s+\d+\s*$")
_KEY = re.compile(r"^(vendid|devid|sysimgguid|switchguid|caguid|rtguid)=(0x[0-9a-fA-F]+)(?:\(([0-9a-fA-F]+)\))?")
_EXT = r"(?:\[ext \d+\])?"
_PEER = rf'"([SHR])-([0-9a-fA-F]+)"\[(\d+)\]{_EXT}\s*(?:\(([0-9a-fA-F]+)\))?'
# "[3]\t"S-f452..."[1]\t\t# "MF0;switch-de779e:SX6012/U1" lid 174 4xFDR"
_SWITCH_PORT = re.compile(rf'^\[(\d+)\]{_EXT}\s*{_PEER}\s*#\s*"(.*)"\s+lid\s+(\d+)\s+(\S+)(.*)$')
# "[1](c42a10300a57af4) \t"S-0c42..."[1]\t\t# lid 697 lmc 0 "MF0;sat11-...:MQM8700/U1" lid 193 4xHDR"
_CA_PORT = re.compile(rf'^\[(\d+)\]\(([0-9a-fA-F]+)\)\s*{_PEER}\s*#\s*lid\s+(\d+)\s+lmc\s+\d+\s+"(.*)"\s+lid\s+(\d+)'
                      r"\s+(\S+)(.*)$")
# What `-f` (s= w= v= e=) and Xsigo gateways ("slot N", "(scp)") add after the width and speed.
_TRAILER = re.compile(r"^(?:\s+[swve]=\d+)*(?:\s+slot \d+|\s+\(scp\))?\s*$")
_KINDS = {"Switch": "switch", "Ca": "ca", "Rt": "router"}
_LETTERS = {"switch": "S", "ca": "H", "router": "R"}

# The ports report (`-p`, dump_ports_report): one line per port of every node, connected or not.
# "SW     1  3 0x0002c90300000100 4x HDR - SW     2  3 0x0002c90300000110 ( 'MF0;leaf-1...' - 'MF0;spine-1...' )"
_REPORT = re.compile(r"^(SW|CA|RT)\s+(\d+)\s+(\d+)\s+(0x[0-9a-fA-F]+)\s+(\S+)\s+(\S+)(.*)$")
_REPORT_PEER = re.compile(r"^\s+-\s+(SW|CA|RT)\s+(\d+)\s+(\d+)\s+(0x[0-9a-fA-F]+)\s+\( '(.*)' - '(.*)' \)\s*$")
_REPORT_ALONE = re.compile(r"^\s+'(.*)'\s*$")
_REPORT_KINDS = {"SW": "switch", "CA": "ca", "RT": "router"}


def parse(text: str) -> Subnet:
    """The subnet in an ibnetdiscover topology file, or in its `-p` ports report.

    Every cable is listed from both of its ends (a switch's port line and the peer's); a cable seen from one end
    only, or a port line naming a node that has no block of its own, means the capture was cut, and so does a node
    block without its node line: ParseError, never a partial fabric that the plan diff would read as missing cables.
    A CA with no cable (a node with its only port down) is a node with no link, not an error. Lines before the
    topology's first line (a terminal banner, a tool's warning on stderr) and a terminal prompt left unterminated
    at the end of a session log are not part of it. The file prints no port state: its links carry the model's
    default state (Active) until iblinkinfo's view says otherwise (collect_views)."""
    lines = text.split("\n")
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if _REPORT.match(line):
            return _ports_report(lines, n)
        if line.startswith(("#", "vendid=", "devid=", "sysimgguid=", "switchguid=", "caguid=", "rtguid=")) \
                or _HEADER.match(line):
            return _topology(lines, n)
    raise ParseError(f"no ibnetdiscover topology (no Switch/Ca/Rt node block): {first_line(text)!r}")


class _Cables:
    """Port lines as they come, each cable kept until its other end's line agrees with it."""

    def __init__(self) -> None:
        self.open: dict[End, tuple[End, str | None, str | None, int]] = {}
        self.sub = Subnet()

    def port(self, here: End, there: End, w: str | None, s: str | None, n: int) -> None:
        back = self.open.get(there)
        if back is not None and back[0] == here:
            del self.open[there]
            self.sub.add_link(Subnet.cable(here, there, width=w or back[1], speed=s or back[2]))
            return
        if here in self.open or self.sub.link_at(here) is not None:
            raise ParseError(f"line {n}: port {here.port} of {here.guid} is listed twice")
        self.open[here] = (there, w, s, n)

    def close(self) -> Subnet:
        for here, (there, _w, _s, n) in self.open.items():
            if there.guid not in self.sub.nodes:
                raise ParseError(f"line {n}: port {here.port} of {here.guid} leads to {there.guid}, which has no "
                                 "node block: the capture was cut")
            raise ParseError(f"line {n}: the cable from {here.guid} port {here.port} to {there.guid} port "
                             f"{there.port} is listed from that end only: the capture was cut")
        return self.sub


def _topology(lines: list[str], start: int) -> Subnet:
    cables = _Cables()
    nodes = cables.sub.nodes
    node: Node | None = None  # the block whose port lines come next
    keyed: tuple[str, str, int] | None = None  # a block's switchguid=/caguid=/rtguid= line, before its node line
    pending_key = 0  # line of a block's first key line, until its node line comes
    for n, raw in enumerate(lines[start - 1:], start):
        line = raw.strip()
        if not line:
            continue
        first = line[0]
        if first == "[":
            if node is None:
                raise ParseError(f"line {n}: a port line outside any node block: {line[:120]!r}")
            _port_line(cables, node, line, n)
        elif first == "#" or DIAGNOSTIC.match(line):
            continue
        elif m := _KEY.match(line):
            node = None
            pending_key = pending_key or n
            if m[1] in ("switchguid", "caguid", "rtguid"):
                keyed = (m[1], guid(m[2]), n)
        elif m := _HEADER.match(line):
            node = _header(m, n, keyed)
            if node.guid in nodes:
                raise ParseError(f"line {n}: node {node.guid} has a second block")
            nodes[node.guid] = node
            keyed, pending_key = None, 0
        elif n == len(lines):
            continue  # the prompt a terminal session log ends with, unterminated: no topology line looks like it
        else:
            raise ParseError(f"line {n}: not an ibnetdiscover topology line: {line[:120]!r}")
    if pending_key:
        raise ParseError(f"line {pending_key}: a node block without its node line: the capture was cut")
    if not nodes:
        raise ParseError("no ibnetdiscover topology (no Switch/Ca/Rt node block)")
    return cables.close()


def _header(m: re.Match[str], n: int, keyed: tuple[str, str, int] | None) -> Node:
    kind = _KINDS[m[1]]
    if m[3] != _LETTERS[kind]:
        raise ParseError(f"line {n}: a {m[1]} block named {m[3]}-{m[4]}")
    node_guid = guid(m[4])
    if keyed is not None and (keyed[0][:2] != {"switch": "sw", "ca": "ca", "router": "rt"}[kind]
                              or keyed[1] != node_guid):
        raise ParseError(f"line {n}: the block's {keyed[0]}= (line {keyed[2]}) is {keyed[1]}, its node line "
                         f"names {node_guid}")
    node_lid = None
    if kind == "switch":
        tail = _SWITCH_TAIL.match(m[6])
        if tail is None:
            raise ParseError(f"line {n}: a switch line without 'port 0 lid N lmc N': {m[0][:120]!r}")
        node_lid = lid(int(tail[1]))
    elif m[6].strip() not in ("", "(scp)"):
        raise ParseError(f"line {n}: unexpected text after a {m[1]} node line: {m[6].strip()[:80]!r}")
    ports = int(m[2])
    if not 0 < ports < 256:
        raise ParseError(f"line {n}: a node with {ports} ports")
    return Node(node_guid, kind, m[5], ports, node_lid)


def _port_line(cables: _Cables, node: Node, line: str, n: int) -> None:
    if node.kind == "switch":
        m = _SWITCH_PORT.match(line)
        if m is None:
            raise ParseError(f"line {n}: not a switch port line: {line[:120]!r}")
        local, letter, peer, peer_port, token, trailer = m[1], m[2], m[3], m[4], m[8], m[9]
    else:
        m = _CA_PORT.match(line)
        if m is None:
            raise ParseError(f"line {n}: not a CA port line: {line[:120]!r}")
        local, letter, peer, peer_port, token, trailer = m[1], m[3], m[4], m[5], m[10], m[11]
        if node.lid is None and (own := lid(int(m[7]))) is not None:
            cables.sub.nodes[node.guid] = node = Node(node.guid, node.kind, node.desc, node.ports, own)
    if not _TRAILER.match(trailer):
        raise ParseError(f"line {n}: unexpected text after the link's width and speed: {trailer.strip()[:80]!r}")
    if letter not in "SHR":
        raise ParseError(f"line {n}: a peer of unknown kind {letter!r}")
    port = int(local)
    if not 0 < port <= node.ports:
        raise ParseError(f"line {n}: port {port} of a node with {node.ports} ports")
    w, s = width_speed(token)
    cables.port(End(node.guid, port), End(guid(peer), int(peer_port)), w, s, n)


def _ports_report(lines: list[str], start: int) -> Subnet:
    """The `-p` report. It prints port GUIDs only: a switch's is its node GUID (all its ports share port 0's), a
    CA's is its port's, so a CA is named here by the GUID of the port printed (the node GUID for the one-port-per-
    node HCAs of ConnectX-4 and later; the topology file has both). It prints no port state: a port without a peer
    is an idle port of state Down and unknown physical state."""
    cables = _Cables()
    nodes = cables.sub.nodes
    idle: list[IdlePort] = []
    for n, raw in enumerate(lines[start - 1:], start):
        line = raw.strip()
        if not line or DIAGNOSTIC.match(line):
            continue
        m = _REPORT.match(line)
        if m is None:
            if n == len(lines):
                continue  # a terminal prompt, unterminated
            raise ParseError(f"line {n}: not an ibnetdiscover ports report line: {line[:120]!r}")
        kind, here_guid, port = _REPORT_KINDS[m[1]], guid(m[4]), int(m[3])
        w, s = width(m[5]), speed(m[6])
        if peer := _REPORT_PEER.match(m[7]):
            desc, there = peer[5], End(guid(peer[4]), int(peer[3]))
        elif alone := _REPORT_ALONE.match(m[7]):
            desc, there = alone[1], None
        else:
            raise ParseError(f"line {n}: not an ibnetdiscover ports report line: {line[:120]!r}")
        known = nodes.get(here_guid)
        if known is None or known.ports < port:
            nodes[here_guid] = Node(here_guid, kind, desc, port, lid(int(m[2])) if known is None else known.lid)
        if there is None:
            idle.append(IdlePort(End(here_guid, port), "Down", ""))
        else:
            cables.port(End(here_guid, port), there, w, s, n)
    if not nodes:
        raise ParseError("no ibnetdiscover ports report lines")
    sub = cables.close()
    sub.idle_ports = idle
    return sub

