"""`ibdev2netdev` (and -v): which network interface each RDMA port drives, and its link state."""

from __future__ import annotations

import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError, Requires, guarded
from ..fragments import array, integer, mapping, obj, string
from ..textutil import na_to_none
from .values import text_lines

_I2N_PLAIN = re.compile(r"^(?P<dev>\S+)\s+port\s+(?P<port>\d+)\s+==>\s+(?P<netdev>\S+)\s+\((?P<state>[^)]*)\)\s*$")
# -v: "<pci> <dev> (<MTxxxx> - <PSID/part>) <description> fw <fw> port <n> (<PORT_STATE>) ==> <netdev> (<Up|Down>)";
# the description may itself hold parentheses and runs of padding, so it is matched lazily up to " fw ".
_I2N_VERBOSE = re.compile(
    r"^(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F])\s+(?P<dev>\S+)\s+"
    r"\((?P<hca_type>\S+)\s+-\s+(?P<part>[^)]*?)\s*\)\s*(?P<desc>.*?)\s*\bfw\s+(?P<fw>\S+)\s+"
    r"port\s+(?P<port>\d+)\s+\((?P<port_state>[^)]*?)\s*\)\s*==>\s+(?P<netdev>\S+)\s+\((?P<state>[^)]*)\)\s*$"
)

NETDEV_SCHEMA = obj(
    "RDMA device port to network interface mapping from ibdev2netdev (or -v).",
    {
        "entries": array(
            "One record per RDMA port.",
            obj(
                "One 'dev port N ==> netdev (State)' line.",
                {
                    "device": string("RDMA device name."),
                    "port": integer("Port number."),
                    "netdev": string("Network interface name, e.g. ib0 or enp4s0f0np0."),
                    "state": string("Netdev state as printed: Up or Down.", True),
                    "pci": string("PCI address (-v only).", True),
                    "hca_type": string("Device type, e.g. MT4123 (-v only).", True),
                    "part": string(
                        "Part number, serial or PSID in the type parentheses; null when NA (-v only).", True
                    ),
                    "description": string("Board description (-v only; null when empty, e.g. VFs).", True),
                    "fw": string("Firmware version (-v only).", True),
                    "port_state": string("RDMA port state as printed, e.g. ACTIVE, DOWN (-v only).", True),
                },
            ),
        ),
        "map": mapping('"<device>/<port>" -> netdev, e.g. {"mlx5_0/1": "ib0"}.', string("Netdev name.")),
    },
)


def parse_ibdev2netdev(text: str) -> dict[str, Any]:
    """ibdev2netdev and ibdev2netdev -v, one line per RDMA port."""
    entries: list[dict[str, Any]] = []
    for raw in text_lines(text):
        line = raw.strip()
        if m := _I2N_VERBOSE.match(line):
            entries.append(
                {
                    "device": m.group("dev"),
                    "port": int(m.group("port")),
                    "netdev": m.group("netdev"),
                    "state": m.group("state").strip() or None,
                    "pci": m.group("pci"),
                    "hca_type": m.group("hca_type"),
                    "part": na_to_none(m.group("part")),
                    "description": m.group("desc").strip() or None,
                    "fw": m.group("fw"),
                    "port_state": m.group("port_state").strip() or None,
                }
            )
        elif m := _I2N_PLAIN.match(line):
            entries.append(
                {
                    "device": m.group("dev"),
                    "port": int(m.group("port")),
                    "netdev": m.group("netdev"),
                    "state": m.group("state").strip() or None,
                    "pci": None,
                    "hca_type": None,
                    "part": None,
                    "description": None,
                    "fw": None,
                    "port_state": None,
                }
            )
    if not entries:
        raise ParseError("no '<dev> port N ==> <netdev>' line: not ibdev2netdev output")
    return {"entries": entries, "map": {f"{e['device']}/{e['port']}": e["netdev"] for e in entries}}


# A MLNX_OFED script (mlnx-tools); a node on the distribution's inbox rdma-core has none, which is not a fault.
IBDEV2NETDEV_REQUIRES = Requires("command", "ibdev2netdev", "RDMA port to netdev map not read")

COLLECTORS = (
    Collector(
        id="ibdev2netdev",
        argv=guarded(IBDEV2NETDEV_REQUIRES, *tools.argv("ibdev2netdev")),
        requires=IBDEV2NETDEV_REQUIRES,
        parse=parse_ibdev2netdev,
        provides="/ib/netdev",
        schema=NETDEV_SCHEMA,
        family="ib",
        description="Which network interface each RDMA port drives, and its link state (ibdev2netdev).",
        corpus=("ibdev2netdev",),
    ),
)
