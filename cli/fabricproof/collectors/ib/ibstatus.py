"""`ibstatus` (a sysfs-reading script): the same port facts as ibstat, without CA type, firmware or GUIDs."""

from __future__ import annotations

import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError
from ..textutil import na_to_none, split_kv
from .ca_ports import IBSTAT_SCHEMA, IBSTATUS_HEADER, ca_ports_fragment
from .values import coded, int_any, int_or_float, text_lines

_GID_GROUP = re.compile(r"[0-9a-fA-F]{1,4}")

# Names ibstat prints for the PortInfo enums (infiniband-diags ibstat.c); ibstatus and sysfs print "N: NAME"
# instead, and the ibstatus parser maps the number to these names so both land in one fragment shape.
_IBSTAT_STATE = {1: "Down", 2: "Initializing", 3: "Armed", 4: "Active"}
_IBSTAT_PHYS = {
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "Phy Test",
}


def _guid_from_gid(gid: str | None) -> str | None:
    """An IB port's default GID (index 0) is subnet prefix + port GUID; return the GUID the way ibstat prints it."""
    if not gid:
        return None
    groups = gid.split(":")
    if len(groups) != 8 or not all(_GID_GROUP.fullmatch(g) for g in groups):
        return None
    return "0x" + "".join(g.zfill(4) for g in groups[4:]).lower()


def parse_ibstatus(text: str) -> dict[str, Any]:
    """ibstatus (a sysfs-reading script): one "Infiniband device 'X' port N status:" block per port.

    It prints no CA type, firmware or GUIDs, so those are null; "N: NAME" states are mapped to the names ibstat
    prints so the fragment is interchangeable with parse_ibstat's.
    """
    blocks: list[tuple[str, int, dict[str, str]]] = []
    for line in text_lines(text):
        if not line.strip():
            continue
        if m := IBSTATUS_HEADER.match(line.strip()):
            blocks.append((m.group("dev"), int(m.group("port")), {}))
        elif blocks and (kv := split_kv(line)):
            blocks[-1][2][kv[0].lower()] = kv[1]
    if not blocks:
        raise ParseError("no \"Infiniband device '<dev>' port N status:\" block: not ibstatus output")
    hcas: dict[str, dict[str, Any]] = {}
    ports: list[dict[str, Any]] = []
    for dev, port, kv in blocks:
        hca = hcas.setdefault(
            dev,
            {
                "name": dev,
                "ca_type": None,
                "ports_count": 0,
                "fw_version": None,
                "hw_version": None,
                "node_guid": None,
                "system_image_guid": None,
            },
        )
        hca["ports_count"] += 1
        state_code, state = coded(kv.get("state"))
        phys_code, phys = coded(kv.get("phys state"))
        link_layer = na_to_none(kv.get("link_layer"))
        gid = na_to_none(kv.get("default gid"))
        gid = None if gid == "unknown" else gid
        ports.append(
            {
                "ca": dev,
                "ca_type": None,
                "port": port,
                "state": _IBSTAT_STATE.get(state_code, state) if state_code is not None else state,
                "phys_state": _IBSTAT_PHYS.get(phys_code, phys) if phys_code is not None else phys,
                "rate": int_or_float(kv.get("rate")),
                "base_lid": int_any(kv.get("base lid")),
                "sm_lid": int_any(kv.get("sm lid")),
                "lmc": None,
                "capability_mask": None,
                "port_guid": _guid_from_gid(gid) if link_layer == "InfiniBand" else None,
                "link_layer": link_layer,
                "default_gid": gid,
            }
        )
    return ca_ports_fragment(list(hcas.values()), ports, [])


COLLECTORS = (
    Collector(
        id="ibstatus",
        argv=tools.argv("ibstatus"),
        parse=parse_ibstatus,
        provides="/ib/ibstat",
        schema=IBSTAT_SCHEMA,
        family="ib",
        description="Same port facts as ibstat from the ibstatus script (no CA type, firmware or GUIDs).",
        default=False,
        corpus=("ibstat",),
    ),
)
