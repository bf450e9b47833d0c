"""`ibstat`: channel adapters (type, firmware, GUIDs) and their ports (state, rate, LIDs, link layer)."""

from __future__ import annotations

import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError
from ..textutil import Node, indent_tree, na_to_none, strip_ansi
from .ca_ports import IBSTAT_SCHEMA, IBSTATUS_HEADER, ca_ports_fragment
from .values import int_any, int_or_float, text_lines

_CA_HEADER = re.compile(r"^CA '(?P<name>[^']+)'$")
_PORT_HEADER = re.compile(r"^Port (?P<port>\d+)$")
# libibumad/infiniband-diags report failures as "ibpanic: ...", "ibwarn: ...", "iberror: ..." at column 0.
_IB_DIAG = re.compile(r"^ib(panic|warn|error)\b")
# What a loop over devices prints between them ("---- mlx5_1 ----", "=== mlx5_1 ==="): no diagnostic of ibstat's
_SEPARATOR = re.compile(r"^[-=#*]{3,}\s*(?:[\w.:-]+\s*)?[-=#*]{3,}$")


def _ibstat_port(ca: str, ca_type: str | None, port: int, node: Node) -> dict[str, Any]:
    def get(key: str) -> str | None:
        return na_to_none(node.get(key))

    return {
        "ca": ca,
        "ca_type": ca_type,
        "port": port,
        "state": get("State"),
        "phys_state": get("Physical state"),
        "rate": int_or_float(get("Rate")),
        "base_lid": int_any(get("Base lid")),
        "sm_lid": int_any(get("SM lid")),
        "lmc": int_any(get("LMC")),
        "capability_mask": get("Capability mask"),
        "port_guid": get("Port GUID"),
        "link_layer": get("Link layer"),
    }


def parse_ibstat(text: str) -> dict[str, Any]:
    """ibstat: "CA 'name'" blocks with nested "Port N:" blocks; TAB or 8-space indentation.

    When a device vanishes mid-listing ibstat dies with "ibpanic: ... stat of IB device 'mlx5_8' failed"
    (exit 255) after printing the CAs it could read: those CAs are kept and the line goes to errors.
    """
    if not text.strip():
        raise ParseError("empty ibstat output")
    hcas: list[dict[str, Any]] = []
    ports: list[dict[str, Any]] = []
    errors: list[str] = []
    diagnostics = 0
    separators = 0
    for ca_node in indent_tree(strip_ansi(text)).children:
        m = _CA_HEADER.match(ca_node.key) if ca_node.value is None else None
        if not m and ca_node.value is None and _SEPARATOR.match(ca_node.key):
            separators += 1
            continue
        if not m:
            line = ca_node.key if ca_node.value is None else f"{ca_node.key}: {ca_node.value}"
            errors.append(line)
            diagnostics += bool(_IB_DIAG.match(line))
            continue
        name = m.group("name")
        ca_type = na_to_none(ca_node.get("CA type"))
        own_ports = [
            _ibstat_port(name, ca_type, int(pm.group("port")), child)
            for child in ca_node.children
            if (pm := _PORT_HEADER.match(child.key))
        ]
        count = int_any(ca_node.get("Number of ports"))
        hcas.append(
            {
                "name": name,
                "ca_type": ca_type,
                "ports_count": count if count is not None else len(own_ports),
                "fw_version": na_to_none(ca_node.get("Firmware version")),
                "hw_version": na_to_none(ca_node.get("Hardware version")),
                "node_guid": na_to_none(ca_node.get("Node GUID")),
                "system_image_guid": na_to_none(ca_node.get("System image GUID")),
            }
        )
        ports.extend(own_ports)
    if not hcas and not diagnostics:
        if any(IBSTATUS_HEADER.match(line) for line in text_lines(text)):
            raise ParseError("ibstatus output, not ibstat (use the ibstatus collector)")
        raise ParseError("no \"CA '<name>'\" block: not ibstat output")
    noted = [f"{separators} separator line(s) between devices ignored"] if separators else []
    return ca_ports_fragment(hcas, ports, errors, noted)


COLLECTORS = (
    Collector(
        id="ibstat",
        argv=tools.argv("ibstat"),
        parse=parse_ibstat,
        provides="/ib/ibstat",
        schema=IBSTAT_SCHEMA,
        family="ib",
        description="InfiniBand CAs and ports: type, firmware, GUIDs, state, rate, LIDs, link layer (ibstat).",
        # ibstat exits 255 after an ibpanic yet has printed every CA it could read before dying
        ok_exit_codes=(0, 255),
        corpus=("ibstat",),
    ),
)
