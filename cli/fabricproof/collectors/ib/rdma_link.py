"""`rdma link show` (iproute2): RDMA port state, physical state and netdev."""

from __future__ import annotations

import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError
from ..fragments import array, integer, obj, string
from .values import int_any, text_lines

_RDMA_LINK = re.compile(r"^link\s+(?P<dev>[^/\s]+)/(?P<port>\d+)\s*(?P<rest>.*)$")
_RDMA_LINK_KEYS = ("subnet_prefix", "lid", "sm_lid", "lmc", "state", "physical_state", "netdev", "netdev_index")

RDMA_LINK_SCHEMA = obj(
    "RDMA port links from iproute2 `rdma link show`.",
    {
        "links": array(
            "One record per 'link <dev>/<port>' line.",
            obj(
                "One RDMA link.",
                {
                    "device": string("RDMA device name."),
                    "port": integer("Port number."),
                    "state": string("Port state as printed, e.g. ACTIVE, DOWN.", True),
                    "physical_state": string("Physical state as printed, e.g. LINK_UP, POLLING, DISABLED.", True),
                    "netdev": string("Attached netdev, null if none.", True),
                    "lid": integer("Port LID (IB only).", True),
                    "sm_lid": integer("Subnet manager LID (IB only).", True),
                    "lmc": integer("LID mask control (IB only).", True),
                    "subnet_prefix": string("GID subnet prefix (IB only).", True),
                },
            ),
        ),
    },
)


def parse_rdma_link(text: str) -> dict[str, Any]:
    """rdma link show: 'link mlx5_0/1 [key value]...' with keys depending on the link layer."""
    links: list[dict[str, Any]] = []
    for raw in text_lines(text):
        m = _RDMA_LINK.match(raw.strip())
        if not m:
            continue
        tokens = m.group("rest").split()
        kv = {tokens[i]: tokens[i + 1] for i in range(0, len(tokens) - 1, 2) if tokens[i] in _RDMA_LINK_KEYS}
        links.append(
            {
                "device": m.group("dev"),
                "port": int(m.group("port")),
                "state": kv.get("state"),
                "physical_state": kv.get("physical_state"),
                "netdev": kv.get("netdev"),
                "lid": int_any(kv.get("lid")),
                "sm_lid": int_any(kv.get("sm_lid")),
                "lmc": int_any(kv.get("lmc")),
                "subnet_prefix": kv.get("subnet_prefix"),
            }
        )
    if not links:
        raise ParseError("no 'link <dev>/<port>' line: not rdma link output")
    return {"links": links}


COLLECTORS = (
    Collector(
        id="rdma_link",
        argv=tools.argv("rdma_link"),
        parse=parse_rdma_link,
        provides="/ib/rdma_link",
        schema=RDMA_LINK_SCHEMA,
        family="rdma",
        description="RDMA port state, physical state and netdev from iproute2 (rdma link show).",
        default=False,
        corpus=("rdma",),
    ),
)
