"""A fabric plan written from a fabric proven good (`fabric capture`): every cable seen, for a person to review."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from .model import End, Link, Subnet
from .names import host_of, node_name


def _names(subnet: Subnet) -> dict[str, str]:
    """Each node's plan name: its operator name where that names it alone, else its GUID (a vendor-default
    description shared by many HCAs, two switches of one name)."""
    names = {guid: node_name(subnet, guid) for guid in subnet.nodes}
    taken = Counter(n.lower() for n in names.values())
    return {guid: name if taken[name.lower()] == 1 else guid for guid, name in names.items()}


def plan_from(subnet: Subnet, hosts: Sequence[str], name: str = "captured") -> dict[str, Any]:
    """The plan document of this fabric as it is: host cables first (in inventory order, the HCA end first), then
    switch-to-switch cables; the commonest width and speed as defaults, others written on their cable."""
    names = _names(subnet)
    order = {h.lower(): i for i, h in enumerate(hosts)}

    def host_end(link: Link) -> tuple[End, End] | None:
        for ca, far in ((link.a, link.b), (link.b, link.a)):
            node = subnet.nodes.get(ca.guid)
            if node is not None and node.kind == "ca":
                return ca, far
        return None

    def key(link: Link) -> tuple[Any, ...]:
        ends = host_end(link)
        if ends is None:
            return (1, len(order), names.get(link.a.guid, link.a.guid), link.a.port)
        named = host_of(subnet.nodes[ends[0].guid].desc)
        rank = order.get(named[0].lower(), len(order)) if named else len(order)
        return (0, rank, names.get(ends[0].guid, ends[0].guid), ends[0].port)

    links = sorted(subnet.links, key=key)
    width = Counter(lk.width for lk in links if lk.width).most_common(1)
    speed = Counter(lk.speed for lk in links if lk.speed).most_common(1)
    defaults = {k: v[0][0] for k, v in (("width", width), ("speed", speed)) if v}
    out = []
    for link in links:
        a, b = host_end(link) or (link.a, link.b)
        item: dict[str, Any] = {"a": names.get(a.guid, a.guid), "a_port": a.port,
                                "b": names.get(b.guid, b.guid), "b_port": b.port}
        for k, v in (("width", link.width), ("speed", link.speed)):
            if v and v != defaults.get(k):
                item[k] = v
        out.append(item)
    doc: dict[str, Any] = {"kind": "FabricPlan", "version": 1, "name": name}
    if defaults:
        doc["defaults"] = defaults
    doc["links"] = out
    return doc
