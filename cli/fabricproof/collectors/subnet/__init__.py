"""Fabric-scope collectors: tools run once per run on the vantage host, each read into a subnet.model.Subnet."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ... import tools
from ...subnet.model import End, IdlePort, Link, Node, Subnet, merge
from . import ibnetdiscover, iblinkinfo, ibqueryerrors, sminfo


@dataclass(frozen=True)
class FabricCollector:
    """A fixed argv run once on the vantage host and a pure parser of its output into a Subnet."""

    id: str
    argv: tuple[str, ...]
    parse: Callable[[str], Subnet]
    typical_s: float
    timeout_s: float
    #: Exit statuses that still mean an answer: ibqueryerrors exits 1 when it found errors to report.
    ok_exit_codes: tuple[int, ...] = (0,)


def _collector(cid: str, tool: str, parse: Callable[[str], Subnet], ok: tuple[int, ...] = (0,)) -> FabricCollector:
    record = tools.FABRIC_TOOLS.get(tool) or tools.TOOLS[tool]
    return FabricCollector(cid, record.argv, parse, record.duration.typical_s, record.duration.timeout_s, ok)


#: Not in collectors.COLLECTORS: none of these runs per host. The order is the order collect_views merges them in.
FABRIC_COLLECTORS: dict[str, FabricCollector] = {c.id: c for c in (
    _collector("ibnetdiscover", "ibnetdiscover", ibnetdiscover.parse),
    _collector("iblinkinfo", "iblinkinfo", iblinkinfo.parse),
    _collector("ibqueryerrors", "ibqueryerrors", ibqueryerrors.parse, (0, 1)),
    # the same invocation as the host collector's (its tools record): sminfo answers alike from any host
    _collector("sminfo_fabric", "sminfo", sminfo.parse, (0, 255)),
)}


def collect_views(outputs: Mapping[str, str]) -> Subnet:
    """One Subnet from the outputs of FABRIC_COLLECTORS (by id; absent ones are skipped): the topology's nodes and
    cables, iblinkinfo's link states, "Could be" hints and idle ports, the switch-port counters, the SM.

    iblinkinfo names a CA by a port GUID, the topology by its node GUID: its CAs are first named as the topology
    names the node at the other end of the same switch port. Raises ParseError as the parsers do."""
    views: list[Subnet] = []
    topology = ibnetdiscover.parse(outputs["ibnetdiscover"]) if "ibnetdiscover" in outputs else None
    if topology is not None:
        views.append(topology)
    links: Subnet | None = None
    if "iblinkinfo" in outputs:
        lids = _lids(topology) if topology is not None else None
        links = iblinkinfo.parse(outputs["iblinkinfo"], lids)
        if topology is not None:
            links = _as_named_by(links, topology)
        views.append(links)
    views.extend(FABRIC_COLLECTORS[cid].parse(outputs[cid]) for cid in ("ibqueryerrors", "sminfo_fabric")
                 if cid in outputs)
    out = merge(views)
    return _with_states(out, links) if topology is not None and links is not None else out

def _lids(topology: Subnet) -> dict[int, str]:
    """LID -> node GUID for the LIDs only one node has (a switch's port-0 LID, a CA's first port's)."""
    seen: dict[int, str] = {}
    shared: set[int] = set()
    for node in topology.nodes.values():
        if node.lid is not None:
            if node.lid in seen:
                shared.add(node.lid)
            seen[node.lid] = node.guid
    return {k: v for k, v in seen.items() if k not in shared}


def _as_named_by(view: Subnet, topology: Subnet) -> Subnet:
    """`view` with each node the topology knows under another GUID renamed to it: a CA iblinkinfo names by a port
    GUID is the node the topology shows at the far end of the same cable, seen from a node both name alike."""
    rename: dict[str, str] = {}
    for link in view.links:
        for here, there in ((link.a, link.b), (link.b, link.a)):
            if here.guid in topology.nodes or there.guid not in topology.nodes or here.guid in rename:
                continue
            cable = topology.link_at(there)
            if cable is not None:
                far = cable.other(there)
                if far.port == here.port and topology.nodes[far.guid].desc == view.nodes[here.guid].desc:
                    rename[here.guid] = far.guid
    if not rename:
        return view

    def end(e: End) -> End:
        return End(rename.get(e.guid, e.guid), e.port)

    out = Subnet(nodes={rename.get(g, g): Node(rename.get(g, g), n.kind, n.desc, n.ports, n.lid)
                        for g, n in view.nodes.items()})
    for lk in view.links:
        out.add_link(Subnet.cable(end(lk.a), end(lk.b), width=lk.width, speed=lk.speed, state=lk.state,
                                  could_width=lk.could_width, could_speed=lk.could_speed))
    out.idle_ports = [IdlePort(end(p.end), p.state, p.phys) for p in view.idle_ports]
    return out


def _with_states(out: Subnet, links: Subnet) -> Subnet:
    """The topology file prints no port state (a cable is listed once both ends see light): iblinkinfo's state of
    the same cable replaces the merged link's default."""
    states = []
    for lk in out.links:
        seen = links.link_at(lk.a)
        states.append(lk if seen is None or seen.b != lk.b or seen.state == lk.state else
                      Link(lk.a, lk.b, lk.width, lk.speed, seen.state, lk.could_width, lk.could_speed))
    return Subnet(nodes=out.nodes, links=states, idle_ports=out.idle_ports, sms=out.sms, counters=out.counters)
