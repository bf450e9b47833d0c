"""The /ib/ibstat fragment ibstat and ibstatus share: channel adapters and their ports, and its schema."""

from __future__ import annotations

import re
from typing import Any

from ..fragments import array, integer, notes, number, obj, string

# ibstatus prints one block per port under this header; ibstat refuses output that has it.
IBSTATUS_HEADER = re.compile(r"^Infiniband device '(?P<dev>[^']+)' port (?P<port>\d+) status:\s*$")

_IBSTAT_HCA = obj(
    "One channel adapter (CA) as ibstat lists it.",
    {
        "name": string("Device name, e.g. mlx5_0."),
        "ca_type": string("CA type (PCI device id), e.g. MT4129 for ConnectX-7; null from ibstatus.", True),
        "ports_count": integer("Number of ports ibstat reports (ibstatus: port blocks seen)."),
        "fw_version": string("Firmware version, e.g. 28.41.1000; null from ibstatus.", True),
        "hw_version": string("Hardware revision; null from ibstatus.", True),
        "node_guid": string("Node GUID as printed (0x-prefixed hex); null from ibstatus.", True),
        "system_image_guid": string("System image GUID as printed; null from ibstatus.", True),
    },
)
_IBSTAT_PORT = obj(
    "One CA port (flat list: one record per CA port).",
    {
        "ca": string("Owning CA name."),
        "ca_type": string(
            "CA type of the owning CA (repeated so a port record stands alone); null from ibstatus.", True
        ),
        "port": integer("Port number (1-based)."),
        "state": string("Logical port state as ibstat prints it: Down, Initializing, Armed, Active.", True),
        "phys_state": string("Physical port state as ibstat prints it: LinkUp, Polling, Disabled, Sleep...", True),
        "rate": number("Link rate in Gb/s, e.g. 400 (NDR), 200 (HDR); ports Down often show 40 or 10.", True),
        "base_lid": integer("Base LID (0 on Ethernet / RoCE ports).", True),
        "sm_lid": integer("LID of the subnet manager; 0 means no SM seen (IB) or Ethernet.", True),
        "lmc": integer("LID mask control; null from ibstatus.", True),
        "capability_mask": string("Port capability mask as printed (hex); null from ibstatus.", True),
        "port_guid": string("Port GUID as printed; from ibstatus the low 64 bits of the IB default GID.", True),
        "link_layer": string("InfiniBand or Ethernet (RoCE).", True),
        "default_gid": string("Default GID (ibstatus only).", True),
    },
    optional=("default_gid",),
)
IBSTAT_SCHEMA = obj(
    "Channel adapters and their ports from ibstat (or ibstatus).",
    {
        "hcas": array("Channel adapters in output order.", _IBSTAT_HCA),
        "ports": array("All ports of all CAs.", _IBSTAT_PORT),
        "count": integer("Number of CAs listed."),
        "ports_active": integer("Ports whose state is Active."),
        "errors": array(
            "Diagnostics the tool printed (e.g. the ibpanic line when ibstat dies on a vanished device).",
            string("One diagnostic line as printed."),
        ),
        "notes": notes(),
    },
    optional=("notes",),
)


def ca_ports_fragment(hcas: list[dict[str, Any]], ports: list[dict[str, Any]], errors: list[str],
                      noted: list[str] | None = None) -> dict[str, Any]:
    return {
        **({"notes": noted} if noted else {}),
        "hcas": hcas,
        "ports": ports,
        "count": len(hcas),
        "ports_active": sum(1 for p in ports if p["state"] == "Active"),
        "errors": errors,
    }
