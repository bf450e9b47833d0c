"""`ofed_info -s`: the installed MLNX_OFED / DOCA-OFED version."""

from __future__ import annotations

import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError, Requires, guarded
from ..fragments import boolean, obj, string
from .values import text_lines

# Real `ofed_info -s` outputs (one line, trailing colon), found via the code index:
#   "MLNX_OFED_LINUX-23.10-1.1.9.0:"    Azure ND VM MLNX_OFED upgrade notes (code index file id 19926464626)
#   "OFED-internal-24.10-1.1.4.0.200:"  DOCA-OFED on a DGX image, DDN EXAScaler client notes (file id 48003245258)
#   "OFED-internal-25.10-1.7.1:"        DOCA-OFED host, TRex/DPDK notes (file id 3695655753)
# DOCA-OFED reports "OFED-internal-<release>" where MLNX_OFED reported "MLNX_OFED_LINUX-<release>".
_OFED_LINE = re.compile(r"^(?P<flavor>[A-Za-z][A-Za-z_]*(?:-[A-Za-z][A-Za-z_]*)*)-(?P<release>\d+\.\d[\w.-]*?):?\s*$")

OFED_SCHEMA = obj(
    "Installed OFED stack from ofed_info -s.",
    {
        "version": string("As printed without the trailing colon, e.g. MLNX_OFED_LINUX-23.10-1.1.9.0."),
        "flavor": string("Part before the release: MLNX_OFED_LINUX (MLNX_OFED) or OFED-internal (DOCA-OFED)."),
        "release": string("Release part, e.g. 23.10-1.1.9.0 or 24.10-1.1.4.0.200."),
        "doca": boolean("True for DOCA-OFED (OFED-internal-*)."),
    },
)


def parse_ofed_info(text: str) -> dict[str, Any]:
    """ofed_info -s: a single 'FLAVOR-RELEASE:' line."""
    for raw in text_lines(text):
        line = raw.strip()
        if m := _OFED_LINE.match(line):
            flavor, release = m.group("flavor"), m.group("release")
            return {
                "version": f"{flavor}-{release}",
                "flavor": flavor,
                "release": release,
                "doca": flavor == "OFED-internal",
            }
    raise ParseError("no '<flavor>-<release>:' line: not ofed_info -s output")


OFED_REQUIRES = Requires("command", "ofed_info", "MLNX_OFED/DOCA-OFED version not checked")

COLLECTORS = (
    Collector(
        id="ofed_info",
        # MLNX_OFED / DOCA-OFED is optional: a node on the distribution's inbox rdma-core has no ofed_info.
        argv=guarded(OFED_REQUIRES, *tools.argv("ofed_info")),
        requires=OFED_REQUIRES,
        parse=parse_ofed_info,
        provides="/ofed",
        schema=OFED_SCHEMA,
        family="ib",
        description="Installed MLNX_OFED / DOCA-OFED version (ofed_info -s).",
    ),
)
