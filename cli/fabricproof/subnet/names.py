"""How an operator names fabric things: a switch by its short name, a port as "node0007 mlx5_3 port 1"."""

from __future__ import annotations

import re

from .model import End, Node, Subnet

#: A director's ASIC location after its chassis name: "MCS8500/L16/U2" is leaf blade 16, ASIC 2 (NDT plans write
#: its ports "Blade 16_Port 2/20"); "/S03/U1" a spine blade's.
_ASIC = re.compile(r"/([LS]\d+)/(U\d+)$")


def switch_name(desc: str) -> str:
    """The name an operator uses for a switch: "leaf-su1-r0" from "MF0;leaf-su1-r0:MQM9700/U1" (between "MF0;" and
    ":"), the chassis and ASIC ("sat11-0101-0903-01ib1-A/L16/U2") for a director's ASIC, the description itself when
    it has no such parts ("Quantum Mellanox Technologies")."""
    rest = desc.split(";", 1)[1] if ";" in desc else desc
    if ":" not in rest:
        return rest.strip()
    name, tail = rest.split(":", 1)
    asic = _ASIC.search(tail)
    return f"{name.strip()}/{asic.group(1)}/{asic.group(2)}" if asic else name.strip()


def chassis(desc: str) -> str | None:
    """The chassis of a director's ASIC ("sat11-0101-0903-01ib1-A" for ".../L16/U2"), None for any other node: cables
    between two ASICs of one chassis are its backplane, not cabling."""
    name = switch_name(desc)
    return name.rsplit("/", 2)[0] if name != desc.strip() and _ASIC.search(name) else None


#: A SHARP aggregation node is a CA inside a switch, on its internal port (every Quantum switch of the corpus' HDR and
#: NDR fabrics has one, all with the same description by design): not a host, and its link is no cable.
AGGREGATION_NODE = "Aggregation Node"


def is_aggregation_node(node: Node | None) -> bool:
    """Whether a node is a switch's SHARP aggregation node ("Mellanox Technologies Aggregation Node")."""
    return node is not None and node.kind == "ca" and AGGREGATION_NODE in node.desc


def host_of(desc: str) -> tuple[str, str] | None:
    """(host, HCA) from a CA's description "<host> <hca>" ("node0007 mlx5_3"), or None for a description that names
    no host: one word ("HCA-1") or a vendor default ("MT4123 ConnectX6   Mellanox Technologies")."""
    words = desc.split()
    return (words[0], words[1]) if len(words) == 2 else None


def node_name(subnet: Subnet, guid: str) -> str:
    """A node as an operator names it: a CA by its description, a switch by its short name, else its GUID."""
    node = subnet.nodes.get(guid)
    if node is None:
        return guid
    if node.kind == "switch":
        return switch_name(node.desc) or guid
    return node.desc.strip() or guid


def end_name(subnet: Subnet, end: End) -> str:
    """A port as an operator names it: "node0007 mlx5_3 port 1", "leaf-r2-03 port 17"."""
    return f"{node_name(subnet, end.guid)} port {end.port}"
