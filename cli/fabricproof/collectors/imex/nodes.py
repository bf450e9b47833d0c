"""`nvidia-imex-ctl -N -j` (or the -N text): IMEX domain state and per-node readiness."""

from __future__ import annotations

import json
import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError
from ..fragments import array, boolean, integer, obj, string
from ..textutil import strip_ansi
from .platforms import IMEX_PLATFORMS

READY = "READY"

# `nvidia-imex-ctl -N` (text) connectivity legend, per the IMEX guide command service page
# https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/cmdservice.html
_CONNECTION_CODES = {
    "C": "CONNECTED",
    "I": "INVALID",
    "N": "NEVER_CONNECTED",
    "R": "RECOVERING",
    "D": "DISCONNECTED",
    "A": "AUTHENTICATING",
    "!V!": "VERSION_MISMATCH",
    "!M!": "NODE_MAP_MISMATCH",
}
_TEXT_NODE = re.compile(r"^\s*Node\s*#\s*(\d+)\s+-\s+(.+?)\s+-\s+([A-Z_]+)\b(.*)$")
_TEXT_VERSION = re.compile(r"Version:\s*(\S+)")
_TEXT_HOSTNAME = re.compile(r"^(\S+)\s+\(([^)]*)\)$")
_TEXT_DOMAIN = re.compile(r"^\s*Domain State:\s*(\S+)")
_TEXT_MATRIX_HEAD = re.compile(r"^\s*Nodes From\\To\s+(.*)$")
_TEXT_TIMESTAMP = re.compile(r"^\d+/\d+/\d{4} \d")


def parse_imex_nodes(text: str) -> dict[str, Any]:
    """IMEX domain status from `nvidia-imex-ctl -N -j` (also the formatted `-N` text).

    The JSON carries a domain "status" (UP/DOWN/DEGRADED) and "nodes" keyed by index, each
    with "host" (IP), "status" (READY, WAITING_FOR_PEERS, UNAVAILABLE...), optional "hostName"
    (with -H), "version" and a "connections" map of peer index -> {host, status}.
    """
    body = strip_ansi(text).replace("\r", "").strip()
    if not body:
        raise ParseError("empty output")
    if body.startswith("{"):
        try:
            doc = json.loads(body)
        except json.JSONDecodeError as exc:
            raise ParseError(f"invalid JSON: {exc.msg} at line {exc.lineno}") from None
        nodes, connections, domain, timestamp = _from_json(doc)
    else:
        nodes, connections, domain, timestamp = _from_text(body)
    ready = sum(1 for n in nodes if n["status"] == READY)
    return {
        "domain_state": domain,
        "timestamp": timestamp,
        "nodes": nodes,
        "connections": connections,
        "total": len(nodes),
        "ready": ready,
        "all_ready": bool(nodes) and ready == len(nodes),
        "connections_not_connected": sum(1 for c in connections if c["status"] != "CONNECTED"),
    }


def _index(key: Any) -> int | None:
    return int(key) if isinstance(key, int) or (isinstance(key, str) and key.isdigit()) else None


def _from_json(doc: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str | None, str | None]:
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), (dict, list)):
        raise ParseError("JSON has no 'nodes' object: not nvidia-imex-ctl -N -j output")
    raw = doc["nodes"]
    items = list(raw.items()) if isinstance(raw, dict) else list(enumerate(raw))
    items.sort(key=lambda kv: (_index(kv[0]) is None, _index(kv[0]) or 0, str(kv[0])))
    nodes, connections = [], []
    for key, node in items:
        if not isinstance(node, dict):
            continue
        index = _index(key)
        nodes.append(
            {
                "index": index,
                "address": str(node.get("host") or ""),
                "hostname": node.get("hostName") or None,
                "status": str(node.get("status") or "UNKNOWN"),
                "version": node.get("version") or None,
            }
        )
        conns = node.get("connections")
        if isinstance(conns, dict):
            for peer_key, peer in sorted(conns.items(), key=lambda kv: (_index(kv[0]) is None, _index(kv[0]) or 0)):
                if isinstance(peer, dict):
                    connections.append(
                        {
                            "from_index": index,
                            "to_index": _index(peer_key),
                            "to_address": peer.get("host") or None,
                            "status": str(peer.get("status") or "UNKNOWN"),
                        }
                    )
    status, stamp = doc.get("status"), doc.get("timestamp")
    return nodes, connections, str(status) if status else None, str(stamp) if stamp else None


def _from_text(body: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str | None, str | None]:
    lines = body.split("\n")
    if any("Failed to read node configuration file" in line for line in lines):
        raise ParseError("nvidia-imex-ctl: failed to read node configuration file (IMEX not configured)")
    nodes: list[dict[str, Any]] = []
    connections: list[dict[str, Any]] = []
    domain: str | None = None
    columns: list[int | None] = []
    by_index: dict[int, str] = {}
    for line in lines:
        if m := _TEXT_NODE.match(line):
            address, hostname = m.group(2).strip(), None
            if hm := _TEXT_HOSTNAME.match(address):
                address, hostname = hm.group(1), hm.group(2)
            version = _TEXT_VERSION.search(m.group(4))
            index = int(m.group(1))
            by_index[index] = address
            nodes.append(
                {"index": index, "address": address, "hostname": hostname, "status": m.group(3),
                 "version": version.group(1) if version else None}
            )
        elif m := _TEXT_DOMAIN.match(line):
            domain = m.group(1)
        elif m := _TEXT_MATRIX_HEAD.match(line):
            columns = [_index(tok) for tok in m.group(1).split()]
        elif columns and (row := line.split()) and row[0].isdigit() and len(row) == len(columns) + 1:
            source = int(row[0])
            for target, code in zip(columns, row[1:]):
                connections.append(
                    {
                        "from_index": source,
                        "to_index": target,
                        "to_address": by_index.get(target) if target is not None else None,
                        "status": _CONNECTION_CODES.get(code, code),
                    }
                )
    if not nodes and domain is None:
        raise ParseError("no IMEX node lines or domain state found")
    timestamp = next((line.strip() for line in lines if _TEXT_TIMESTAMP.match(line.strip())), None)
    return nodes, connections, domain, timestamp


IMEX_NODES_SCHEMA: dict[str, Any] = obj(
    "IMEX domain membership and readiness as seen from this node.",
    {
        "domain_state": string("Domain status: UP, DOWN or DEGRADED.", True),
        "timestamp": string("Timestamp printed by nvidia-imex-ctl.", True),
        "nodes": array(
            "Every node of nodes_config.cfg, in index order.",
            obj(
                "One IMEX node.",
                {
                    "index": integer("Node index in nodes_config.cfg.", True),
                    "address": string("Node IP address."),
                    "hostname": string("Host name (with -H).", True),
                    "status": string("Node status as printed: READY, WAITING_FOR_PEERS, UNAVAILABLE..."),
                    "version": string("IMEX/driver version the node reports.", True),
                },
            ),
        ),
        "connections": array(
            "Connection state from each node to each peer.",
            obj(
                "One directed node-to-node connection.",
                {
                    "from_index": integer("Reporting node index.", True),
                    "to_index": integer("Peer node index.", True),
                    "to_address": string("Peer IP address.", True),
                    "status": string("CONNECTED, INVALID, DISCONNECTED, RECOVERING, NEVER_CONNECTED..."),
                },
            ),
        ),
        "total": integer("Number of nodes in the domain."),
        "ready": integer("Nodes whose status is READY."),
        "all_ready": boolean("At least one node and every node READY."),
        "connections_not_connected": integer("Connections whose state is not CONNECTED."),
    },
)

IMEX_NODES = Collector(
    id="imex_nodes",
    argv=tools.argv("imex_nodes"),
    parse=parse_imex_nodes,
    provides="/imex/nodes",
    schema=IMEX_NODES_SCHEMA,
    family="imex",
    description="IMEX domain state and per-node readiness (every node must be READY).",
    platforms=IMEX_PLATFORMS,
)

COLLECTORS = (IMEX_NODES,)
