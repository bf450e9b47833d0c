"""The fabric against its cabling plan: one finding per cable to move, plug, remove or reseat, in an operator's words."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .checks import CHECKS, COLLECTOR
from .model import End, Link, Node, Subnet, speed_rank, width_rank
from .names import chassis, end_name, host_of, is_aggregation_node, switch_name
from .plan import Plan, PlanEnd, PlannedLink

#: Switch-port counters whose growth over the window is a failing cable or port.
COUNTERS = ("SymbolErrorCounter", "LinkDownedCounter", "PortRcvErrors")
_GUID = re.compile(r"0x[0-9a-fA-F]{16}")


@dataclass(frozen=True)
class Finding:
    check: str  # the catalog check id that fails on it: "subnet.cable_placement", ...
    kind: str  # miswired | swapped | missing | down | unplanned | width | speed | rail | duplicate | counters | sm
    ends: tuple[str, ...]  # operator names of the ports involved
    hosts: tuple[str, ...]  # the inventory hosts it affects (a leaf uplink: every host cabled to that leaf)
    sentence: str


@dataclass
class Diff:
    plan: Plan
    hosts: tuple[str, ...]
    findings: list[Finding] = field(default_factory=list)
    #: planned cables per host, for its facts
    cables: dict[str, int] = field(default_factory=dict)

    def host_facts(self) -> dict[str, dict[str, Any]]:
        """The /subnet fragment of every host: each check's failing sentences (empty lists on a clean host, so it
        passes rather than goes unjudged)."""
        out: dict[str, dict[str, Any]] = {h: {"plan": self.plan.name, "cables": self.cables.get(h, 0),
                                              **{c: [] for c in CHECKS}} for h in self.hosts}
        for f in self.findings:
            key = f.check.split(".", 1)[1]
            for h in f.hosts:
                out[h][key].append(f.sentence)
        return out


def merge_facts(facts: dict[str, Any], fragment: Mapping[str, Any]) -> None:
    """Put a host's /subnet fragment into its facts document, with the record the subnet.* checks look for."""
    facts["subnet"] = dict(fragment)
    facts.setdefault("collectors", {})[COLLECTOR] = {"status": "ok"}


class _Fabric:
    """The subnet indexed once: nodes by what a plan may call them, hosts by name, each switch's hosts."""

    def __init__(self, subnet: Subnet, hosts: Sequence[str]):
        self.subnet = subnet
        self.inventory = {h.lower(): h for h in hosts}
        self.by_name: dict[str, list[Node]] = {}
        for node in subnet.nodes.values():
            self.by_name.setdefault(node.desc.strip().lower(), []).append(node)
            if node.kind == "switch":
                short = switch_name(node.desc).lower()
                if short != node.desc.strip().lower():
                    self.by_name.setdefault(short, []).append(node)
        self.switch_hosts: dict[str, set[str]] = {}
        for link in subnet.links:
            for end in (link.a, link.b):
                host = self.host(end)
                far = subnet.nodes.get(link.other(end).guid)
                if host and far is not None and far.kind == "switch":
                    self.switch_hosts.setdefault(far.guid, set()).add(host)

    def node(self, device: str) -> Node | None:
        """The fabric node a plan's device names (a GUID, a description or a switch's short name, any case)."""
        if _GUID.fullmatch(device):
            return self.subnet.nodes.get(device.lower())
        found = self.by_name.get(device.strip().lower())
        return found[0] if found else None

    def end(self, pe: PlanEnd, far: End | None = None) -> End | None:
        """The fabric port a plan's end names; a description several nodes share resolves to the one whose cable
        reaches `far` (the planned far end, a switch port, which is unambiguous) when one does."""
        if _GUID.fullmatch(pe.device):
            node = self.subnet.nodes.get(pe.device.lower())
            return End(node.guid, pe.port) if node is not None else None
        found = self.by_name.get(pe.device.strip().lower())
        if not found:
            return None
        if far is not None and len(found) > 1:
            for node in found:
                link = self.subnet.link_at(End(node.guid, pe.port))
                if link is not None and link.other(End(node.guid, pe.port)) == far:
                    return End(node.guid, pe.port)
        return End(found[0].guid, pe.port)

    def host(self, end: End) -> str | None:
        """The inventory host whose HCA `end` is, if any."""
        node = self.subnet.nodes.get(end.guid)
        if node is None or node.kind != "ca":
            return None
        named = host_of(node.desc)
        return self.inventory.get(named[0].lower()) if named else None

    def name(self, end: End) -> str:
        return end_name(self.subnet, end)

    def is_ca(self, end: End) -> bool:
        node = self.subnet.nodes.get(end.guid)
        return node is not None and node.kind == "ca"

    def hosts_of(self, *ends: End) -> set[str]:
        """The hosts cables between these ends affect: the inventory hosts of their HCA ends; with none (a switch to
        switch cable, an HCA of no inventory host), every host cabled to those switches (a leaf's hosts; a spine has
        none of its own)."""
        own = {h for end in ends if (h := self.host(end))}
        return own or {h for end in ends if not self.is_ca(end) for h in self.switch_hosts.get(end.guid, ())}


def _planned_host(pe: PlanEnd, inventory: Mapping[str, str]) -> str | None:
    named = host_of(pe.device)
    return inventory.get(named[0].lower()) if named else None


def _rate(link: Link, planned: PlannedLink | None, what: str) -> tuple[str, str] | None:
    """(found, wanted) when the link's width or speed is below the plan's or below what both ends could do."""
    rank = width_rank if what == "width" else speed_rank
    found = link.width if what == "width" else link.speed
    plan = (planned.width if what == "width" else planned.speed) if planned else None
    could = link.could_width if what == "width" else link.could_speed
    if found is None:
        return None
    if plan is not None and rank(found) < rank(plan):
        return found, f"the plan says {plan}"
    if could is not None and rank(found) < rank(could):
        return found, f"both ends could run {could}"
    return None


def diff(plan: Plan, subnet: Subnet, *, hosts: Sequence[str], rails: Mapping[str, Mapping[str, int]] | None = None,
         counters_before: Subnet | None = None) -> Diff:
    """Every way the fabric differs from the plan, each as one Finding naming the ports and the hosts it affects.
    Linear in cables: the plan's ends and the fabric's are indexed once."""
    fab = _Fabric(subnet, hosts)
    out = Diff(plan, tuple(hosts))
    every = tuple(hosts)

    def add(check: str, kind: str, ends: Iterable[str], affected: Iterable[str], sentence: str) -> None:
        hs = tuple(sorted(set(affected))) or every  # a fault no host is cabled to (a core cable) touches them all
        out.findings.append(Finding(f"subnet.{check}", kind, tuple(ends), hs, sentence))

    # the plan's cables resolved to fabric ports, anchored at the host side (the HCA port is where a cable belongs)
    role = {name.lower(): r for name, r in plan.roles().items()}
    resolved: list[tuple[PlannedLink, End | None, End | None]] = []
    for link in plan.links:
        a, b = fab.end(link.a, fab.end(link.b)), fab.end(link.b, fab.end(link.a))
        if a is None and b is not None or a is not None and b is not None and _rank(fab, b, role) < _rank(fab, a, role):
            link = PlannedLink(link.b, link.a, link.width, link.speed, link.where)
            a, b = b, a
        resolved.append((link, a, b))
        if a is not None and b is not None and (host := _planned_host(link.a, fab.inventory)) and not fab.is_ca(b):
            fab.switch_hosts.setdefault(b.guid, set()).add(host)  # a leaf's hosts: cabled there now or by the plan
        for pe in (link.a, link.b):
            host = _planned_host(pe, fab.inventory)
            if host:
                out.cables[host] = out.cables.get(host, 0) + 1

    idle = {p.end: p for p in subnet.idle_ports}
    by_desc = subnet.by_desc()
    renamed: set[str] = set()  # CAs a names finding explains: they answer with another's description
    explained: set[tuple[End, End]] = set()  # found cables a finding already names
    matched: dict[tuple[End, End], PlannedLink] = {}
    done: set[int] = set()
    planned_at: dict[End, int] = {}
    for i, (_, a, b) in enumerate(resolved):
        for end in (a, b):
            if end is not None:
                planned_at[end] = i

    for i, (link, a, b) in enumerate(resolved):
        if i in done:
            continue
        done.add(i)
        if a is None or b is None:
            unknown, other = (link.a, link.b) if a is None else (link.b, link.a)
            host = _planned_host(link.a, fab.inventory) or _planned_host(link.b, fab.inventory)
            known = [e for e in (a, b) if e is not None]
            there = subnet.link_at(known[0]) if known else None
            if there is not None and there.other(known[0]) not in planned_at:
                # the port holds a device the plan does not name: the plan's device is not cabled there
                stray = there.other(known[0])
                explained.add((there.a, there.b))
                if _renamed(fab, by_desc, known[0], stray, unknown, host, add):
                    renamed.add(stray.guid)
                    continue
                add("cable_placement", "miswired", (fab.name(known[0]), fab.name(stray), str(unknown)),
                    fab.hosts_of(stray) | ({host} if host else set()),
                    f"{fab.name(known[0])} holds {fab.name(stray)}; the plan puts {unknown} there, which is not "
                    f"in the fabric")
                continue
            add("cable_present", "missing", (str(unknown), str(other)), ([host] if host else fab.hosts_of(*known)),
                f"{unknown.device} is not in the fabric, so its cable {unknown} to {other} is missing "
                f"(planned at {link.where})")
            continue
        found = subnet.link_at(a)
        if found is not None and found.other(a) == b:
            matched[(found.a, found.b)] = link
            continue
        if found is None:
            down = [e for e in (a, b) if e in idle]
            if down:
                port = idle[down[0]]
                add("cable_present", "down", (fab.name(a), fab.name(b)), fab.hosts_of(a, b),
                    f"the cable {fab.name(a)} to {fab.name(b)} is down: {fab.name(down[0])} is "
                    f"{port.state}/{port.phys} (planned at {link.where})")
            else:
                add("cable_present", "missing", (fab.name(a), fab.name(b)), fab.hosts_of(a, b),
                    f"the cable {fab.name(a)} to {fab.name(b)} is missing: neither port shows a link "
                    f"(planned at {link.where})")
            continue
        c = found.other(a)
        explained.add((found.a, found.b))
        # two crossed cables: a sits where d belongs and c (d's planned partner) sits where b belongs
        j = planned_at.get(c)
        if j is not None and j not in done:
            _, oa, ob = resolved[j]
            d_end = oa if ob == c else ob
            back = subnet.link_at(d_end) if d_end is not None else None
            if d_end is not None and back is not None and back.other(d_end) == b:
                done.add(j)
                explained.add((back.a, back.b))
                add("cable_placement", "swapped", (fab.name(a), fab.name(d_end), fab.name(b), fab.name(c)),
                    fab.hosts_of(a, b, c, d_end),
                    f"{fab.name(a)} and {fab.name(d_end)} are swapped: {fab.name(a)} is on {fab.name(c)} and "
                    f"{fab.name(d_end)} on {fab.name(b)}; the plan puts them the other way round")
                continue
        add("cable_placement", "miswired", (fab.name(a), fab.name(c), fab.name(b)), fab.hosts_of(a, b, c),
            f"{fab.name(a)} is on {fab.name(c)}; the plan puts it on {fab.name(b)}")

    for found in subnet.links:
        key = (found.a, found.b)
        planned = matched.get(key)
        if planned is None and _backplane(subnet, found):
            pass
        elif planned is None and key not in explained and found.a not in planned_at and found.b not in planned_at:
            a, b = (found.b, found.a) if fab.is_ca(found.b) and not fab.is_ca(found.a) else (found.a, found.b)
            add("cable_unplanned", "unplanned", (fab.name(a), fab.name(b)), fab.hosts_of(a, b),
                f"{fab.name(a)} is cabled to {fab.name(b)}, which the plan does not have")
        elif planned is None and key not in explained:
            # one end is planned for another cable whose own diff named it; the other end is the stray
            a, b = (found.a, found.b) if found.a in planned_at else (found.b, found.a)
            j = planned_at[a]
            _, pa, pb = resolved[j]
            should = pb if pa == a else pa
            add("cable_unplanned", "unplanned", (fab.name(b), fab.name(a)), fab.hosts_of(a, b),
                f"{fab.name(b)} is cabled to {fab.name(a)}, which the plan gives to "
                f"{fab.name(should) if should is not None else 'another cable'}")
        for what in ("width", "speed"):
            low = _rate(found, planned, what)
            if low:
                a, b = (found.b, found.a) if fab.is_ca(found.b) and not fab.is_ca(found.a) else (found.a, found.b)
                add(f"link_{what}", what, (fab.name(a), fab.name(b)), fab.hosts_of(a, b),
                    f"the cable {fab.name(a)} to {fab.name(b)} runs at {low[0]} {what}; {low[1]}")
        if found.a.guid not in renamed and found.b.guid not in renamed:
            _rail(found, fab, plan, rails, role, add)

    _duplicates(subnet, fab, add, {subnet.nodes[g].desc for g in renamed})
    if counters_before is not None:
        _counters(subnet, counters_before, fab, add)
    _sm(subnet, add)
    return out


def _backplane(subnet: Subnet, link: Link) -> bool:
    """A link between two ASICs of one director chassis: inside the box, so no cabling plan lists it."""
    a, b = subnet.nodes.get(link.a.guid), subnet.nodes.get(link.b.guid)
    if a is None or b is None or a.kind != "switch" or b.kind != "switch":
        return False
    box = chassis(a.desc)
    return box is not None and box == chassis(b.desc)


def _rank(fab: _Fabric, end: End, role: Mapping[str, Any]) -> int:
    """Which end of a planned cable anchors it, lowest first: an HCA, then a leaf, a spine, a core switch."""
    node = fab.subnet.nodes[end.guid]
    if node.kind != "switch":
        return 0
    r = role.get(switch_name(node.desc).lower())
    return 1 + (("leaf", "spine", "core").index(r.tier) if r is not None else 0)


def _rail(found: Link, fab: _Fabric, plan: Plan, rails: Mapping[str, Mapping[str, int]] | None,
          role: Mapping[str, Any], add: Any) -> None:
    """An HCA of rail N cabled to a leaf that carries another rail (rail from the host's facts, else the plan)."""
    for ca, sw in ((found.a, found.b), (found.b, found.a)):
        host = fab.host(ca)
        node = fab.subnet.nodes.get(sw.guid)
        if host is None or node is None or node.kind != "switch":
            continue
        r = role.get(switch_name(node.desc).lower())
        if r is None or r.tier != "leaf" or r.rail is None:
            continue
        hca = host_of(fab.subnet.nodes[ca.guid].desc)[1]  # type: ignore[index]
        want = (rails or {}).get(host, {}).get(hca)
        if want is None:
            want = plan.rail_of(hca)
        if want is not None and want != r.rail:
            add("rail_aligned", "rail", (fab.name(ca), fab.name(sw)), (host,),
                f"{fab.name(ca)} (rail {want}) is on {fab.name(sw)}, a rail-{r.rail} leaf")


def _renamed(fab: _Fabric, by_desc: Mapping[str, list[Node]], port: End, stray: End, unknown: PlanEnd,
             host: str | None, add: Any) -> bool:
    """A planned HCA absent while its switch port holds a CA answering with a description another node has too: the
    CA is surely the planned one misnamed, so one names finding (naming both ports and what the plan puts there)
    rather than a misplaced, missing, unplanned and off-rail cable. False when the stray's description is its own."""
    node = fab.subnet.nodes.get(stray.guid)
    twins = [n for n in by_desc.get(node.desc, ()) if n.guid != stray.guid] if node and node.kind == "ca" else []
    if not twins:
        return False
    where = [fab.name(link.other(end)) for n in twins for p in range(1, n.ports + 1)
             if (link := fab.subnet.link_at(end := End(n.guid, p))) is not None]
    also = (f"the one on {' and '.join(where)}" if where else
            f"{', '.join(n.guid for n in twins)}, with no cable up")
    add("names_unique", "duplicate", (fab.name(port), *where, str(unknown)),
        fab.hosts_of(stray) | ({host} if host else set()),
        f"{fab.name(port)} holds a node describing itself as {node.desc.strip()}, as does {also}; the plan puts "
        f"{unknown.device} there: fix its node description")
    return True


def _duplicates(subnet: Subnet, fab: _Fabric, add: Any, explained: set[str]) -> None:
    for desc, nodes in subnet.by_desc().items():
        # every Quantum switch's SHARP aggregation node shares one description by design; vendor-default HCAs do not
        if len(nodes) < 2 or desc in explained or all(is_aggregation_node(n) for n in nodes):
            continue
        guids = ", ".join(sorted(n.guid for n in nodes))
        affected: set[str] = set()
        for node in nodes:
            for port in range(1, node.ports + 1):
                end = End(node.guid, port)
                link = subnet.link_at(end)
                if link is not None:
                    affected |= fab.hosts_of(end, link.other(end))
        add("names_unique", "duplicate", (desc.strip(),), affected,
            f"{len(nodes)} nodes are named {desc.strip()!r} (GUIDs {guids}): give each its own description")


def _counters(subnet: Subnet, before: Subnet, fab: _Fabric, add: Any) -> None:
    for end, now in subnet.counters.items():
        node = subnet.nodes.get(end.guid)
        if node is None or node.kind != "switch":
            continue
        was = before.counters.get(end, {})
        grew = [(c, now[c] - was.get(c, 0)) for c in COUNTERS if c in now and now[c] > was.get(c, 0)]
        if not grew:
            continue
        link = subnet.link_at(end)
        far = f" (to {fab.name(link.other(end))})" if link else ""
        said = ", ".join(f"{c} by {n}" if k else f"{c} grew by {n}" for k, (c, n) in enumerate(grew))
        add("switch_errors", "counters", (fab.name(end),), fab.hosts_of(end, *((link.other(end),) if link else ())),
            f"{fab.name(end)}{far}: {said} over the window")


def _sm(subnet: Subnet, add: Any) -> None:
    masters = [s for s in subnet.sms if "MASTER" in s.state.upper()]
    if len(masters) == 1 or not subnet.sms:  # none heard: sminfo did not answer, and its record says why
        return
    if not masters:
        add("sm_master", "sm", (), (), f"no subnet manager answered as master ({len(subnet.sms)} heard: " +
            ", ".join(f"{s.guid} {s.state}" for s in subnet.sms) + ")")
        return
    add("sm_master", "sm", (), (), f"{len(masters)} subnet managers answer as master: " +
        ", ".join(f"{s.guid} (lid {s.lid}, priority {s.priority})" for s in masters))
