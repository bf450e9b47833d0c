"""`perfquery`: the PMA port counters of the local InfiniBand port (classic or extended `-x` blocks)."""

from __future__ import annotations

import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError, Requires, guarded
from ..fragments import array, boolean, integer, mapping, obj
from ..textutil import first_line
from .values import int_any, text_lines

# "# Port counters: Lid 1 port 0 (CapMask: 0x5300)" / "# Port extended counters: Lid 1719 port 1 (CapMask: ...)"
_HEADER = re.compile(r"^# Port (extended )?counters: Lid (\d+) port (\d+)")
# "SymbolErrorCounter:..............0": the name, dots as padding, the value (decimal or 0x-hex)
_COUNTER = re.compile(r"^([A-Za-z0-9]+):\.*(\S+)$")


def parse_perfquery(text: str) -> dict[str, Any]:
    """One block per '# Port ... counters' header; counter names as perfquery prints them."""
    blocks: list[dict[str, Any]] = []
    for line in (raw.strip() for raw in text_lines(text)):
        if m := _HEADER.match(line):
            blocks.append({"lid": int(m.group(2)), "port": int(m.group(3)), "extended": bool(m.group(1)),
                           "counters": {}})
        elif (m := _COUNTER.match(line)) and blocks:
            value = int_any(m.group(2))
            if value is not None:
                blocks[-1]["counters"][m.group(1)] = value
    if not blocks:
        raise ParseError(f"not perfquery output: {first_line(text)!r}")
    return {"ports": blocks}


PERFQUERY_SCHEMA = obj(
    "PMA port counters (perfquery).",
    {
        "ports": array("One block per queried port.", obj("One port's counters.", {
            "lid": integer("LID of the queried port."),
            "port": integer("Port number (0: all ports of a switch, or the HCA's own counters)."),
            "extended": boolean("Extended (64-bit, -x) counters."),
            "counters": mapping("Counter name as printed -> value.", integer("Counter value.")),
        })),
    },
)

PERFQUERY_REQUIRES = Requires("command", "perfquery", "PMA port counters not checked")

PERFQUERY = Collector(
    id="perfquery",
    argv=guarded(PERFQUERY_REQUIRES, *tools.argv("perfquery")),  # infiniband-diags, optional (ib_counters reads sysfs)
    requires=PERFQUERY_REQUIRES,
    parse=parse_perfquery,
    provides="/ib/perfquery",
    schema=PERFQUERY_SCHEMA,
    family="ib",
    description="PMA port counters of the local port (perfquery); sysfs counters (ib_counters) cover every port.",
    default=False,
    corpus=("ib-diag", "misc"),
)

COLLECTORS = (PERFQUERY,)
