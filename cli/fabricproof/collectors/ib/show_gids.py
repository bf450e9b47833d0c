"""`show_gids`: the RoCE GID table (index, GID, IPv4, RoCE version, netdev) per RDMA port."""

from __future__ import annotations

import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError, Requires, guarded
from ..fragments import array, integer, obj, string
from .values import int_any, text_lines

_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_GID_VER = re.compile(r"^v\d$")

GIDS_SCHEMA = obj(
    "RoCE GID table from show_gids.",
    {
        "entries": array(
            "One record per GID row.",
            obj(
                "One show_gids row.",
                {
                    "device": string("RDMA device name."),
                    "port": integer("Port number."),
                    "index": integer("GID index (what NCCL_IB_GID_INDEX selects)."),
                    "gid": string("GID as printed."),
                    "ipv4": string("IPv4 address of an IPv4-mapped GID, else null.", True),
                    "version": string("RoCE version as printed: v1 or v2."),
                    "netdev": string("Network interface of the GID, null if none printed.", True),
                },
            ),
        ),
        "count": integer("Rows parsed."),
        "n_gids_found": integer("The tool's own n_gids_found= total, null if absent.", True),
        "rocev2_ipv4_indexes": array(
            "Sorted unique GID indexes with version v2 and an IPv4 address (the usual NCCL GID choice).",
            integer("GID index."),
        ),
    },
)


def parse_show_gids(text: str) -> dict[str, Any]:
    """show_gids: TAB-separated table (the IPv4 cell is empty for link-local GIDs); pasted copies may have spaces,
    so rows are read as whitespace tokens and the optional IPv4/netdev cells are recognised by shape."""
    entries: list[dict[str, Any]] = []
    n_found: int | None = None
    header = False
    for raw in text_lines(text):
        line = raw.strip()
        if line.startswith("n_gids_found="):
            n_found = int_any(line.partition("=")[2])
            continue
        tokens = line.split()
        header = header or tokens[:4] == ["DEV", "PORT", "INDEX", "GID"]
        if len(tokens) < 5 or not (tokens[1].isdigit() and tokens[2].isdigit()):
            continue  # header, dashes, blank
        dev, port, index, gid, rest = tokens[0], int(tokens[1]), int(tokens[2]), tokens[3], tokens[4:]
        ipv4 = rest.pop(0) if rest and _IPV4.match(rest[0]) else None
        if not rest or not _GID_VER.match(rest[0]):
            continue
        entries.append(
            {
                "device": dev,
                "port": port,
                "index": index,
                "gid": gid,
                "ipv4": ipv4,
                "version": rest[0],
                "netdev": rest[1] if len(rest) > 1 else None,
            }
        )
    if not entries and not (header and n_found is not None):
        # a RoCE-less host prints the header and n_gids_found=0: empty, but a real answer
        raise ParseError("no 'DEV PORT INDEX GID [IPv4] VER DEV' table: not show_gids output")
    return {
        "entries": entries,
        "count": len(entries),
        "n_gids_found": n_found,
        "rocev2_ipv4_indexes": sorted({e["index"] for e in entries if e["version"] == "v2" and e["ipv4"]}),
    }


SHOW_GIDS_REQUIRES = Requires("command", "show_gids", "RoCE GID table not checked")

COLLECTORS = (
    Collector(
        id="show_gids",
        # show_gids is a MLNX_OFED script; inbox rdma-core has none (the GID table is then not read).
        argv=guarded(SHOW_GIDS_REQUIRES, *tools.argv("show_gids")),
        requires=SHOW_GIDS_REQUIRES,
        parse=parse_show_gids,
        provides="/roce/gids",
        schema=GIDS_SCHEMA,
        family="rdma",
        description="RoCE GID table: index, GID, IPv4, RoCE version and netdev per RDMA port (show_gids).",
        corpus=("rdma",),
    ),
)
