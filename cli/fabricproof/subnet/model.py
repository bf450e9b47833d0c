"""The InfiniBand subnet as one vantage point sees it: nodes, the cables between their ports, idle ports, the SMs."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Link speeds in rank order (a later name is faster per lane). FDR10 ranks below FDR: 10.3125 against 14.0625 Gb/s.
SPEEDS = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")
#: iblinkinfo prints the per-lane signalling rate; these are the rates the IB specification names.
LANE_GBPS = {"2.5": "SDR", "5.0": "DDR", "10.0": "QDR", "10.3125": "FDR10", "14.0625": "FDR",
             "25.78125": "EDR", "53.125": "HDR", "106.25": "NDR", "212.5": "XDR"}
#: Link widths in rank order, spelt as ibnetdiscover prints them ("4xHDR").
WIDTHS = ("1x", "2x", "4x", "8x", "12x")
KINDS = ("switch", "ca", "router")


def speed_rank(speed: str | None) -> int:
    """Where a speed stands among SPEEDS (-1 for unknown, so an unknown speed is never 'at least' a known one)."""
    return SPEEDS.index(speed) if speed in SPEEDS else -1


def width_rank(width: str | None) -> int:
    """Where a width stands among WIDTHS (-1 for unknown)."""
    return WIDTHS.index(width) if width in WIDTHS else -1


@dataclass(frozen=True, slots=True, order=True)
class End:
    """One port of one node: the node's GUID (lower-case, "0x" and 16 hex digits) and the port number."""

    guid: str
    port: int


@dataclass(frozen=True, slots=True)
class Node:
    """A switch, CA (an HCA, or a SHARP aggregation node) or router, as the subnet names it."""

    guid: str
    kind: str  # one of KINDS
    desc: str  # the node description as printed: "MF0;leaf-su1-r0:MQM9700/U1", "node0007 mlx5_3"
    ports: int
    lid: int | None = None  # a switch's port-0 LID; a CA's first port's LID (None when the tool printed none)


@dataclass(frozen=True, slots=True)
class Link:
    """One cable seen up: its two ends (a < b, so each cable has one spelling), width, speed and port state.

    `could_width` / `could_speed` are what both ends support when the tool said so (iblinkinfo's "Could be"):
    a link below them trained down."""

    a: End
    b: End
    width: str | None
    speed: str | None
    state: str = "Active"  # the logical port state printed for the link: Active, Armed, Initialize
    could_width: str | None = None
    could_speed: str | None = None

    def other(self, end: End) -> End:
        """The far end of this cable from `end`."""
        return self.b if end == self.a else self.a


@dataclass(frozen=True, slots=True)
class IdlePort:
    """A port with no cable seen up: iblinkinfo's "Down/ Polling" lines (ibnetdiscover does not list them)."""

    end: End
    state: str  # Down
    phys: str  # Polling, Disabled, ...


@dataclass(frozen=True, slots=True)
class SubnetManager:
    """One SM the vantage point heard of: sminfo's answer (state 3 = SMINFO_MASTER)."""

    guid: str
    lid: int
    priority: int
    state: str  # SMINFO_MASTER, SMINFO_STANDBY, ...


@dataclass
class Subnet:
    """Everything one vantage point saw of the fabric; parsers fill it, the plan diff reads it."""

    nodes: dict[str, Node] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)
    idle_ports: list[IdlePort] = field(default_factory=list)
    sms: list[SubnetManager] = field(default_factory=list)
    #: switch-port error counters by port: {End: {"SymbolErrorCounter": 3, "LinkDownedCounter": 1, ...}}
    counters: dict[End, dict[str, int]] = field(default_factory=dict)
    _by_end: dict[End, Link] = field(default_factory=dict, repr=False, compare=False)

    @staticmethod
    def cable(a: End, b: End, **kw: Any) -> Link:
        """A Link with its ends in the canonical order."""
        lo, hi = (a, b) if a <= b else (b, a)
        return Link(lo, hi, **kw)

    def add_link(self, link: Link) -> None:
        """Record a cable once however many times the tool printed it (ibnetdiscover lists it from both ends)."""
        if link.a in self._by_end or link.b in self._by_end:
            return
        self.links.append(link)
        self._by_end[link.a] = link
        self._by_end[link.b] = link

    def link_at(self, end: End) -> Link | None:
        """The cable plugged into `end`, if one was seen up."""
        if len(self._by_end) != 2 * len(self.links):
            self._by_end = {e: lk for lk in self.links for e in (lk.a, lk.b)}
        return self._by_end.get(end)

    def by_desc(self) -> dict[str, list[Node]]:
        """Nodes by description (a list: duplicates are a finding, not an error)."""
        out: dict[str, list[Node]] = {}
        for node in self.nodes.values():
            out.setdefault(node.desc, []).append(node)
        return out

    def switches(self) -> Iterator[Node]:
        return (n for n in self.nodes.values() if n.kind == "switch")

    def cas(self) -> Iterator[Node]:
        return (n for n in self.nodes.values() if n.kind == "ca")

    # -- the fabric document (fabric.json in a run directory): plain JSON, so a saved fabric is judged again offline

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [[n.guid, n.kind, n.desc, n.ports, n.lid] for n in self.nodes.values()],
            "links": [[lk.a.guid, lk.a.port, lk.b.guid, lk.b.port, lk.width, lk.speed, lk.state, lk.could_width,
                       lk.could_speed] for lk in self.links],
            "idle_ports": [[p.end.guid, p.end.port, p.state, p.phys] for p in self.idle_ports],
            "sms": [[s.guid, s.lid, s.priority, s.state] for s in self.sms],
            "counters": [[e.guid, e.port, dict(c)] for e, c in self.counters.items()],
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Subnet:
        sub = cls(nodes={g: Node(g, k, d, p, lid) for g, k, d, p, lid in doc.get("nodes", ())})
        for ag, ap, bg, bp, w, s, st, cw, cs in doc.get("links", ()):
            sub.add_link(cls.cable(End(ag, ap), End(bg, bp), width=w, speed=s, state=st, could_width=cw,
                                   could_speed=cs))
        sub.idle_ports = [IdlePort(End(g, p), st, ph) for g, p, st, ph in doc.get("idle_ports", ())]
        sub.sms = [SubnetManager(g, lid, pr, st) for g, lid, pr, st in doc.get("sms", ())]
        sub.counters = {End(g, p): dict(c) for g, p, c in doc.get("counters", ())}
        return sub


def merge(views: Iterable[Subnet]) -> Subnet:
    """One Subnet from several tools' views of the same fabric (ibnetdiscover's topology, iblinkinfo's idle ports and
    'could be' hints, sminfo, the counters): later views add what earlier ones lacked, never replace it."""
    out = Subnet()
    at: dict[End, int] = {}  # each cable's place in out.links, by both its ends: one pass, however many hints
    for view in views:
        for guid, node in view.nodes.items():
            out.nodes.setdefault(guid, node)
        for link in view.links:
            i = at.get(link.a)
            if i is None:
                if link.b not in at:
                    at[link.a] = at[link.b] = len(out.links)
                    out.links.append(link)
                continue
            known = out.links[i]
            if known.b == link.b and (known.could_width is None and link.could_width is not None
                                      or known.could_speed is None and link.could_speed is not None):
                out.links[i] = Link(known.a, known.b, known.width or link.width, known.speed or link.speed,
                                    known.state, known.could_width or link.could_width,
                                    known.could_speed or link.could_speed)
        seen = {p.end for p in out.idle_ports}
        out.idle_ports.extend(p for p in view.idle_ports if p.end not in seen)
        out.sms.extend(s for s in view.sms if s not in out.sms)
        for end, counters in view.counters.items():
            out.counters.setdefault(end, {}).update(counters)
    return out
