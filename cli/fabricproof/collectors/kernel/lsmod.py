"""`lsmod`: loaded kernel modules (nvidia_peermem for GPUDirect RDMA)."""

from __future__ import annotations

import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError
from ..fragments import array, boolean, integer, obj, string
from ..textutil import strip_ansi

_LSMOD_HEADER = re.compile(r"^\s*Module\s+Size\s+Used by\s*$")
_LSMOD_ROW = re.compile(r"^\s*([A-Za-z0-9_]+)\s+(\d+)\s+(-|\d+)(?:\s+(\S+))?")


def parse_lsmod(text: str) -> dict[str, Any]:
    """`lsmod` (or a grep of it): module rows 'name size refcount [users,]'."""
    modules = []
    header = False
    for line in strip_ansi(text).replace("\r", "").split("\n"):
        if not line.strip():
            continue
        if _LSMOD_HEADER.match(line):
            header = True
            continue
        if m := _LSMOD_ROW.match(line):
            users = [u for u in (m.group(4) or "").split(",") if u and u not in ("[permanent]", "-")]
            modules.append(
                {
                    "name": m.group(1),
                    "size": int(m.group(2)),
                    "refcount": int(m.group(3)) if m.group(3).isdigit() else None,
                    "used_by": users,
                }
            )
    if not modules and not header:
        raise ParseError("no lsmod module rows found")
    names = [mod["name"] for mod in modules]
    return {
        "loaded": names,
        "modules": modules,
        "nvidia_peermem": "nvidia_peermem" in names,
        "nv_peer_mem": "nv_peer_mem" in names,
    }


LSMOD_SCHEMA = obj(
    "Loaded kernel modules.",
    {
        "loaded": array("Module names in listing order.", string("Module name.")),
        "modules": array(
            "Module rows.",
            obj(
                "One module.",
                {
                    "name": string("Module name."),
                    "size": integer("Size in bytes."),
                    "refcount": integer("Use count ('-' when not applicable).", True),
                    "used_by": array("Modules using this one.", string("Module name.")),
                },
            ),
        ),
        "nvidia_peermem": boolean("nvidia_peermem (GPUDirect RDMA) is loaded."),
        "nv_peer_mem": boolean("Legacy nv_peer_mem (deprecated) is loaded."),
    },
)

LSMOD = Collector(
    id="lsmod",
    argv=tools.argv("lsmod"),
    parse=parse_lsmod,
    provides="/kernel/modules",
    schema=LSMOD_SCHEMA,
    family="kernel",
    description="Loaded kernel modules (nvidia_peermem for GPUDirect RDMA).",
    corpus=("lsmod",),
)

COLLECTORS = (LSMOD,)
